/* results.c - see results.h. */
#include <csv.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "csvfile.h"
#include "results.h"
#include "version.h"

static const char *const columns[] = {
    "schema", "tool_version", "git_rev", "host", "date", "chip", "backend", "format", "M", "N",
    "K", "group", "variant", "tile_m", "tile_n", "tile_k", "num_threadgroups", "split_k",
    "status", "error", "median_s", "p10_s", "p90_s", "mad_s", "ci_lo_s", "ci_hi_s", "reps",
    "gflops", "weight_gbs", "samples_s",
};
enum { NCOL = (int)(sizeof columns / sizeof columns[0]) };

/* ---- writing ---- */

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} linebuf;

static void put_field(linebuf *b, const char *s, int last)
{
    size_t n = strlen(s), need = 2 * n + 4;
    if (b->oom)
        return;
    if (b->len + need > b->cap) {
        size_t cap = (b->len + need) * 2;
        char *nb = realloc(b->buf, cap);
        if (!nb) {
            b->oom = 1;
            return;
        }
        b->buf = nb;
        b->cap = cap;
    }
    b->len += csv_write(b->buf + b->len, b->cap - b->len, s, n);
    b->buf[b->len++] = last ? '\n' : ',';
}

static void put_num(linebuf *b, const char *fmt, double v)
{
    char s[64];
    snprintf(s, sizeof s, fmt, v);
    put_field(b, s, 0);
}

static int write_all(int fd, const char *buf, size_t len)
{
    /* one write: appended rows are never interleaved or cut by a kill */
    ssize_t w = write(fd, buf, len);
    return w == (ssize_t)len ? 0 : -1;
}

static int write_header(const char *path, char *err, size_t errlen)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    linebuf b = {0};
    char comment[128];
    int cl = snprintf(comment, sizeof comment, "# mq results, schema %d\n", MQ_RESULTS_SCHEMA);
    for (int i = 0; i < NCOL; i++)
        put_field(&b, columns[i], i == NCOL - 1);
    int rc = b.oom || write_all(fd, comment, (size_t)cl) || write_all(fd, b.buf, b.len) ||
             fsync(fd);
    rc |= close(fd);
    free(b.buf);
    if (rc || rename(tmp, path)) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int mq_results_open(const char *path, mq_results_writer *w, char *err, size_t errlen)
{
    w->fd = -1;
    struct stat sb;
    if (stat(path, &sb) == 0) {
        mq_results rs;
        if (mq_results_load(path, &rs, err, errlen))
            return -1;
        mq_results_free(&rs);
    } else if (write_header(path, err, errlen)) {
        return -1;
    }
    w->fd = open(path, O_WRONLY | O_APPEND);
    if (w->fd < 0) {
        snprintf(err, errlen, "%s: cannot open for appending: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int mq_results_append(mq_results_writer *w, const mq_result *r, char *err, size_t errlen)
{
    linebuf b = {0};
    char s[64];
    snprintf(s, sizeof s, "%d", r->schema);
    put_field(&b, s, 0);
    put_field(&b, r->tool_version, 0);
    put_field(&b, r->git_rev, 0);
    put_field(&b, r->host, 0);
    put_field(&b, r->date, 0);
    put_field(&b, r->chip, 0);
    put_field(&b, r->backend, 0);
    put_field(&b, mq_format_name(r->p.format), 0);
    const int dims[] = {r->p.M, r->p.N, r->p.K, r->p.group};
    for (int i = 0; i < 4; i++)
        put_num(&b, "%.0f", dims[i]);
    put_field(&b, mq_variant_get(r->c.variant)->name, 0);
    const int params[] = {r->c.p.tile_m, r->c.p.tile_n, r->c.p.tile_k, r->c.p.num_threadgroups,
                          r->c.p.split_k};
    for (int i = 0; i < 5; i++)
        put_num(&b, "%.0f", params[i]);
    put_field(&b, r->status, 0);
    put_field(&b, r->error, 0);
    const double stats[] = {r->st.median, r->st.p10, r->st.p90, r->st.mad, r->st.ci_lo,
                            r->st.ci_hi};
    for (int i = 0; i < 6; i++)
        put_num(&b, "%.9g", stats[i]);
    put_num(&b, "%.0f", r->st.n);
    put_num(&b, "%.6g", r->gflops);
    put_num(&b, "%.6g", r->weight_gbs);
    size_t cap = (size_t)r->nsamples * 24 + 1, used = 0;
    char *samples = malloc(cap);
    if (!samples) {
        free(b.buf);
        snprintf(err, errlen, "out of memory writing a result");
        return -1;
    }
    samples[0] = '\0';
    for (int i = 0; i < r->nsamples; i++)
        used += (size_t)snprintf(samples + used, cap - used, "%s%.6e", i ? ";" : "",
                                 r->samples[i]);
    put_field(&b, samples, 1);
    free(samples);
    int rc = b.oom || write_all(w->fd, b.buf, b.len);
    free(b.buf);
    if (rc)
        snprintf(err, errlen, "cannot append a result: %s", strerror(errno));
    return rc ? -1 : 0;
}

void mq_results_close(mq_results_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
}

/* ---- reading ---- */

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno)
        return -1;
    *out = v;
    return 0;
}

#define COPY(dst, src) snprintf((dst), sizeof(dst), "%s", (src))

/* One data row into r; on error a message naming the column. */
static int parse_row(char **f, mq_result *r, char *why, size_t n)
{
    long v;
    mq_error e;
    memset(r, 0, sizeof *r);
    if (parse_long(f[0], 1, 1000000, &v))
        return snprintf(why, n, "schema '%s' is not a number", f[0]), -1;
    if (v > MQ_RESULTS_SCHEMA)
        return snprintf(why, n, "schema %ld is newer than this tool's %d (upgrade the tool)", v,
                        MQ_RESULTS_SCHEMA),
               -1;
    r->schema = (int)v;
    COPY(r->tool_version, f[1]);
    COPY(r->git_rev, f[2]);
    COPY(r->host, f[3]);
    COPY(r->date, f[4]);
    COPY(r->chip, f[5]);
    COPY(r->backend, f[6]);
    if (mq_format_from_name(f[7], &r->p.format, &e))
        return snprintf(why, n, "%s", e.msg), -1;
    int *dims[] = {&r->p.M, &r->p.N, &r->p.K, &r->p.group};
    for (int i = 0; i < 4; i++) {
        if (parse_long(f[8 + i], 1, 1 << 24, &v))
            return snprintf(why, n, "%s '%s' is not a positive integer", columns[8 + i],
                            f[8 + i]),
                   -1;
        *dims[i] = (int)v;
    }
    if (mq_variant_from_name(f[12], &r->c.variant, &e))
        return snprintf(why, n, "%s", e.msg), -1;
    int *params[] = {&r->c.p.tile_m, &r->c.p.tile_n, &r->c.p.tile_k, &r->c.p.num_threadgroups,
                     &r->c.p.split_k};
    for (int i = 0; i < 5; i++) {
        if (parse_long(f[13 + i], 0, 1 << 24, &v))
            return snprintf(why, n, "%s '%s' is not an integer", columns[13 + i], f[13 + i]),
                   -1;
        *params[i] = (int)v;
    }
    static const char *const statuses[] = {"ok", "wrong", "error", "illegal"};
    int known = 0;
    for (int i = 0; i < 4; i++)
        known |= !strcmp(f[18], statuses[i]);
    if (!known)
        return snprintf(why, n, "status '%s' is not ok, wrong, error or illegal", f[18]), -1;
    COPY(r->status, f[18]);
    COPY(r->error, f[19]);
    double *stats[] = {&r->st.median, &r->st.p10, &r->st.p90, &r->st.mad, &r->st.ci_lo,
                       &r->st.ci_hi};
    for (int i = 0; i < 6; i++)
        if (parse_double(f[20 + i], stats[i]))
            return snprintf(why, n, "%s '%s' is not a number", columns[20 + i], f[20 + i]), -1;
    if (parse_long(f[26], 0, 1 << 24, &v))
        return snprintf(why, n, "reps '%s' is not a count", f[26]), -1;
    r->st.n = (int)v;
    if (parse_double(f[27], &r->gflops) || parse_double(f[28], &r->weight_gbs))
        return snprintf(why, n, "gflops or weight_gbs is not a number"), -1;
    const char *s = f[29];
    int count = *s ? 1 : 0;
    for (const char *c = s; *c; c++)
        count += *c == ';';
    if (count != r->st.n)
        return snprintf(why, n, "%d samples for %d reps", count, r->st.n), -1;
    r->samples = count ? malloc(sizeof(double) * (size_t)count) : NULL;
    if (count && !r->samples)
        return snprintf(why, n, "out of memory"), -1;
    for (int i = 0; i < count; i++) {
        char *end;
        r->samples[i] = strtod(s, &end);
        if (end == s || (*end && *end != ';')) {
            free(r->samples);
            r->samples = NULL;
            return snprintf(why, n, "sample %d is not a number", i + 1), -1;
        }
        s = *end ? end + 1 : end;
    }
    r->nsamples = count;
    if (!strcmp(r->status, "ok") && !(r->st.median > 0)) {
        free(r->samples);
        r->samples = NULL;
        return snprintf(why, n, "an ok row needs a positive median"), -1;
    }
    return 0;
}

int mq_results_load(const char *path, mq_results *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    mq_csv_table t;
    if (mq_csv_read(path, &t, err, errlen))
        return -1;
    int rc = 0;
    if (t.nrows == 0 || t.rows[0].nfields < 1 || strcmp(t.rows[0].fields[0], "schema")) {
        snprintf(err, errlen, "%s:%d: not a results file (expected a header starting 'schema')",
                 path, t.nrows ? t.rows[0].line : 1);
        rc = -1;
    } else if (t.rows[0].nfields != NCOL) {
        snprintf(err, errlen, "%s:%d: header has %d columns, schema %d has %d", path,
                 t.rows[0].line, t.rows[0].nfields, MQ_RESULTS_SCHEMA, NCOL);
        rc = -1;
    }
    if (rc == 0 && t.nrows > 1) {
        out->r = calloc((size_t)(t.nrows - 1), sizeof *out->r);
        if (!out->r) {
            snprintf(err, errlen, "%s: out of memory", path);
            rc = -1;
        }
    }
    for (int i = 1; rc == 0 && i < t.nrows; i++) {
        char why[256];
        if (t.rows[i].nfields != NCOL) {
            snprintf(err, errlen, "%s:%d: %d fields, expected %d", path, t.rows[i].line,
                     t.rows[i].nfields, NCOL);
            rc = -1;
        } else if (parse_row(t.rows[i].fields, &out->r[out->n], why, sizeof why)) {
            snprintf(err, errlen, "%s:%d: %s", path, t.rows[i].line, why);
            rc = -1;
        } else {
            out->n++;
        }
    }
    mq_csv_free(&t);
    if (rc)
        mq_results_free(out);
    return rc;
}

void mq_results_free(mq_results *rs)
{
    for (int i = 0; i < rs->n; i++)
        free(rs->r[i].samples);
    free(rs->r);
    memset(rs, 0, sizeof *rs);
}

int mq_result_same_key(const mq_result *a, const mq_result *b)
{
    return !strcmp(a->chip, b->chip) && !strcmp(a->backend, b->backend) &&
           !memcmp(&a->p, &b->p, sizeof a->p) && a->c.variant == b->c.variant &&
           !memcmp(&a->c.p, &b->c.p, sizeof a->c.p);
}

void mq_result_stamp(mq_result *r)
{
    r->schema = MQ_RESULTS_SCHEMA;
    COPY(r->tool_version, MQ_TOOL_VERSION);
    COPY(r->git_rev, mq_git_rev());
    COPY(r->host, mq_host_name());
    time_t now = time(NULL);
    strftime(r->date, sizeof r->date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
}

const mq_result *mq_results_find_own(const mq_results *rs, const mq_result *key)
{
    for (int i = 0; i < rs->n; i++) {
        const mq_result *r = &rs->r[i];
        if (mq_result_same_key(r, key) && !strcmp(r->tool_version, MQ_TOOL_VERSION) &&
            !strcmp(r->git_rev, mq_git_rev()) && !strcmp(r->host, mq_host_name()))
            return r;
    }
    return NULL;
}

const mq_result *mq_results_best(const mq_results *rs, const char *chip, const char *backend,
                                 const mq_problem *p)
{
    const mq_result *best = NULL;
    for (int i = 0; i < rs->n; i++) {
        const mq_result *r = &rs->r[i];
        if (strcmp(r->status, "ok") || strcmp(r->chip, chip) || strcmp(r->backend, backend) ||
            memcmp(&r->p, p, sizeof *p))
            continue;
        if (!best || r->st.median < best->st.median)
            best = r;
    }
    return best;
}
