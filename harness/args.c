/* args.c - see args.h. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"

int mq_args_parse(const char *tool, int argc, char **argv, int first, const mq_arg *args,
                  int nargs, const char **pos, int maxpos, int *npos)
{
    if (npos)
        *npos = 0;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return 1;
        if (a[0] != '-' || !a[1]) {
            if (!npos || *npos >= maxpos)
                return mq_cli_fail(tool, npos && maxpos ? "one argument too many" : "unexpected",
                                   a);
            pos[(*npos)++] = a;
            continue;
        }
        const mq_arg *o = NULL;
        for (int k = 0; k < nargs && !o; k++)
            if (!strcmp(a, args[k].name))
                o = &args[k];
        if (!o)
            return mq_cli_fail(tool, "unknown option", a);
        if (o->kind == MQ_ARG_FLAG) {
            *(int *)o->dst = 1;
            continue;
        }
        if (i + 1 >= argc)
            return mq_cli_fail(tool, "missing value for", a);
        const char *v = argv[++i];
        char err[1024] = "";
        int bad = 0;
        switch (o->kind) {
        case MQ_ARG_STR:
            *(const char **)o->dst = v;
            break;
        case MQ_ARG_INT:
            bad = mq_cli_int(v, (int)o->lo, (int)o->hi, (int *)o->dst);
            break;
        case MQ_ARG_DOUBLE:
            bad = mq_cli_double(v, o->lo, o->hi, (double *)o->dst);
            break;
        default:
            bad = o->parse(v, o->dst, err, sizeof err);
            break;
        }
        if (bad && err[0]) {
            fprintf(stderr, "%s: %s\n", tool, err);
            return 2;
        }
        if (bad)
            return mq_cli_fail(tool, o->bad ? o->bad : "bad value for", v);
    }
    return 0;
}
