/* args.c - see args.h. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"

/* Strings (paths, names) past this are refused whole: the tools keep them
 * in buffers of about 4 KB, and the OS takes no path of 4096 bytes or more,
 * so a longer one could only be cut (a file written somewhere else). */
#define MQ_ARG_MAX_LEN 3900

static int too_long(const char *tool, const char *what, const char *v)
{
    size_t n = strlen(v);
    if (n <= MQ_ARG_MAX_LEN)
        return 0;
    fprintf(stderr, "%s: %s: '%.40s...' is %zu bytes long (at most %d)\n", tool, what, v, n,
            MQ_ARG_MAX_LEN);
    return 2;
}

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
            if (too_long(tool, "an argument", a))
                return 2;
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
        if (too_long(tool, a, v))
            return 2;
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
