/* cli.c - see cli.h. */
#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int mq_cli_fail(const char *tool, const char *msg, const char *arg)
{
    fprintf(stderr, "%s: %s '%s' (see --help)\n", tool, msg, arg);
    return 2;
}

int mq_cli_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

int mq_cli_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

int mq_cli_shape(const char *s, int *M, int *N, int *K)
{
    char extra;
    if (sscanf(s, "%dx%dx%d%c", M, N, K, &extra) != 3 || *M <= 0 || *N <= 0 || *K <= 0)
        return -1;
    return 0;
}

int mq_cli_formats(const char *s, unsigned *mask, char *err, size_t errlen)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        mq_format f;
        mq_error e;
        if (mq_format_from_name(t, &f, &e)) {
            snprintf(err, errlen, "%s", e.msg);
            return -1;
        }
        *mask |= 1u << f;
    }
    return 0;
}

int mq_cli_candidate(const char *s, mq_candidate *c, char *err, size_t errlen)
{
    char name[64];
    if (sscanf(s, "%63s %d %d %d %d %d", name, &c->p.tile_m, &c->p.tile_n, &c->p.tile_k,
               &c->p.num_threadgroups, &c->p.split_k) != 6) {
        snprintf(err, errlen, "bad candidate '%s' (expected 'variant tm tn tk tg sk')", s);
        return -1;
    }
    mq_error e;
    if (mq_variant_from_name(name, &c->variant, &e)) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    return 0;
}

int mq_make_parent_dirs(const char *path)
{
    char buf[4200];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return 0;
}
