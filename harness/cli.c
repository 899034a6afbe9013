/* cli.c - see cli.h. */
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "numparse.h"

int mq_cli_fail(const char *tool, const char *msg, const char *arg)
{
    fprintf(stderr, "%s: %s '%s' (see --help)\n", tool, msg, arg);
    return 2;
}

int mq_cli_int(const char *s, int lo, int hi, int *out)
{
    return mq_parse_int(s, lo, hi, out, NULL, 0);
}

int mq_cli_double(const char *s, double lo, double hi, double *out)
{
    return mq_parse_double(s, lo, hi, out, NULL, 0);
}

int mq_cli_shape(const char *s, int *M, int *N, int *K)
{
    int d[3];
    if (mq_parse_dims(s, 3, 1, MQ_CLI_MAX_DIM, d, NULL, 0))
        return -1;
    *M = d[0];
    *N = d[1];
    *K = d[2];
    return 0;
}

int mq_cli_formats(const char *s, unsigned *mask, char *err, size_t errlen)
{
    char buf[256];
    if (strlen(s) >= sizeof buf) {
        snprintf(err, errlen, "format list '%.40s...' is too long", s);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", s);
    unsigned m = 0;
    /* every comma-separated name must be a format: '', ',' and 'fp4,' are refused */
    for (char *t = buf, *next; t; t = next) {
        next = strchr(t, ',');
        if (next)
            *next++ = '\0';
        mq_format f;
        mq_error e;
        if (!*t) {
            snprintf(err, errlen, "empty name in the format list '%s' (expected names like "
                                  "fp4,u4)", s);
            return -1;
        }
        if (mq_format_from_name(t, &f, &e)) {
            snprintf(err, errlen, "%s", e.msg);
            return -1;
        }
        m |= 1u << f;
    }
    *mask |= m;
    return 0;
}

int mq_cli_candidate(const char *s, mq_candidate *c, char *err, size_t errlen)
{
    char buf[256], *tok[7];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, " \t", &save); t && n < 7;
         t = strtok_r(NULL, " \t", &save))
        tok[n++] = t;
    int *v[5] = {&c->p.tile_m, &c->p.tile_n, &c->p.tile_k, &c->p.num_threadgroups,
                 &c->p.split_k};
    static const char *const names[5] = {"tile_m", "tile_n", "tile_k", "num_threadgroups",
                                         "split_k"};
    if (n != 6 || strlen(s) >= sizeof buf) {
        snprintf(err, errlen, "bad candidate '%s' (expected 'variant tm tn tk tg sk')", s);
        return -1;
    }
    for (int i = 0; i < 5; i++) {
        char why[128];
        if (mq_parse_int(tok[1 + i], 0, MQ_CLI_MAX_DIM, v[i], why, sizeof why)) {
            snprintf(err, errlen, "bad candidate '%s': %s %s", s, names[i], why);
            return -1;
        }
    }
    mq_error e;
    if (mq_variant_from_name(tok[0], &c->variant, &e)) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    return 0;
}

/* What the tools add to an output's name: ".manifest.csv" for its manifest
 * (in place of ".csv"), then a temporary suffix (.tmp.HOST.PID.XXXXXX). */
#define MQ_NAME_ROOM 43

/* A path the OS would refuse part-way: longer than PATH_MAX in all, or a
 * component longer than NAME_MAX, counting what the tools add to the last
 * one. Said before any directory is made, so a long path never leaves half
 * its directories behind, nor a results file without its manifest. */
static int path_fits(const char *path, char *err, size_t errlen)
{
    size_t len = strlen(path), comp = 0;
    if (len >= 4096 - MQ_NAME_ROOM) {
        snprintf(err, errlen, "%.60s...: the path is %zu bytes long (at most %d)", path, len,
                 4095 - MQ_NAME_ROOM);
        return -1;
    }
    for (const char *p = path; *p; p++) {
        comp = *p == '/' ? 0 : comp + 1;
        if (comp > 255 - MQ_NAME_ROOM) {
            snprintf(err, errlen, "%.60s...: a name in the path is longer than %d bytes (the "
                                  "tools add up to %d to it)",
                     path, 255 - MQ_NAME_ROOM, MQ_NAME_ROOM);
            return -1;
        }
    }
    return 0;
}

int mq_output_replaceable(const char *path, char *err, size_t errlen)
{
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s: cannot write: it is a directory", path);
        return -1;
    }
    return 0;
}

int mq_make_parent_dirs(const char *path, char *err, size_t errlen)
{
    char buf[4200];
    if (path_fits(path, err, errlen))
        return -1;
    snprintf(buf, sizeof buf, "%s", path);
    /* the directories made here, undone (deepest first) when a later one fails */
    short made[2048];
    int nmade = 0, rc = 0;
    for (char *p = buf + 1; *p && !rc; p++) {
        if (*p != '/' || p[-1] == '/')
            continue;
        *p = '\0';
        struct stat sb;
        if (mkdir(buf, 0755) == 0) {
            made[nmade++] = (short)(p - buf);
        } else if (errno != EEXIST || stat(buf, &sb) || !S_ISDIR(sb.st_mode)) {
            snprintf(err, errlen, "%s: cannot create the directory: %s", buf,
                     errno == EEXIST ? "a file of that name is in the way" : strerror(errno));
            rc = -1;
        }
        *p = '/';
    }
    while (rc && nmade > 0) {
        buf[made[--nmade]] = '\0';
        rmdir(buf);
    }
    return rc;
}

int mq_cli_add_shape(const char *v, void *list, char *err, size_t errlen)
{
    mq_shape_list *l = list;
    (void)err;
    (void)errlen;
    if (l->n >= l->cap)
        return -1;
    mq_shape *s = &l->items[l->n];
    memset(s, 0, sizeof *s);
    snprintf(s->model, sizeof s->model, "shape");
    if (mq_cli_shape(v, &s->M, &s->N, &s->K))
        return -1;
    snprintf(s->layer, sizeof s->layer, "%s", v);
    l->n++;
    return 0;
}

int mq_cli_add_candidate(const char *v, void *list, char *err, size_t errlen)
{
    mq_candidate_list *l = list;
    if (l->n >= l->cap)
        return snprintf(err, errlen, "too many candidates at '%s' (at most %d)", v, l->cap), -1;
    if (mq_cli_candidate(v, &l->items[l->n], err, errlen))
        return -1;
    l->n++;
    return 0;
}

int mq_cli_parse_formats(const char *v, void *mask, char *err, size_t errlen)
{
    return mq_cli_formats(v, mask, err, errlen);
}
