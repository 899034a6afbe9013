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

#include "atomic_file.h"
#include "csvfile.h"
#include "grow.h"
#include "numparse.h"
#include "results.h"
#include "version.h"

static const char *const columns[] = {
    "schema", "tool_version", "git_rev", "host", "date", "chip", "backend", "format", "M", "N",
    "K", "group", "variant", "tile_m", "tile_n", "tile_k", "num_threadgroups", "split_k",
    "status", "error", "median_s", "p10_s", "p90_s", "mad_s", "ci_lo_s", "ci_hi_s", "reps",
    "gflops", "weight_gbs", "samples_s", "idle_s", "kernel_build",
};
/* the columns of schema 3 (NCOL), of schema 2 (all but kernel_build) and of
 * schema 1 (all but idle_s and kernel_build) */
enum { NCOL = (int)(sizeof columns / sizeof columns[0]), NCOL2 = NCOL - 1, NCOL1 = NCOL - 2 };

/* A file's schema from its header's width, 0 when no schema has it. */
static int schema_of_width(int nfields)
{
    return nfields == NCOL ? 3 : nfields == NCOL2 ? 2 : nfields == NCOL1 ? 1 : 0;
}

/* A schema's width. */
static int width_of_schema(int schema)
{
    return schema >= 3 ? NCOL : schema == 2 ? NCOL2 : NCOL1;
}

/* ---- writing ---- */

/* One CSV field, quoted as libcsv quotes (at most 2n + 2 bytes), then its
 * separator: ',' or the row's newline. */
static void put_field(mq_strbuf *b, const char *s, int last)
{
    size_t n = strlen(s);
    if (mq_sb_reserve(b, 2 * n + 3))
        return;
    b->len += csv_write(b->s + b->len, b->cap - b->len, s, n);
    b->s[b->len++] = last ? '\n' : ',';
    b->s[b->len] = 0;
}

static void put_num(mq_strbuf *b, const char *fmt, double v)
{
    char s[64];
    snprintf(s, sizeof s, fmt, v);
    put_field(b, s, 0);
}

/* The header of a results file: the schema line and the column names. */
static int format_header(mq_strbuf *b)
{
    char schema[64];
    snprintf(schema, sizeof schema, "# mq results, schema %d\n", MQ_RESULTS_SCHEMA);
    if (mq_sb_reserve(b, strlen(schema) + 1))
        return -1;
    b->len = (size_t)snprintf(b->s, b->cap, "%s", schema);
    for (int i = 0; i < NCOL; i++)
        put_field(b, columns[i], i == NCOL - 1);
    return b->oom ? -1 : 0;
}

int mq_results_open(const char *path, mq_results_writer *w, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    snprintf(w->path, sizeof w->path, "%s", path);
    /* locked before it is read: a second bench on the file is refused here,
     * not left to replace the header under the first one's rows */
    int created;
    int fd = mq_append_open(path, &created, err, errlen);
    if (fd < 0)
        return -1;
    w->created = created;
    struct stat sb;
    if (fstat(fd, &sb)) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        mq_append_abort(fd, path, created);
        return -1;
    }
    if (sb.st_size > 0) {
        mq_results rs;
        if (mq_results_load(path, &rs, err, errlen)) {
            mq_append_abort(fd, path, created);
            return -1;
        }
        w->kept_rows = rs.n;
        w->schema = rs.schema;
        mq_results_free(&rs);
    }
    if (!w->schema) /* a new or empty file gets this schema's header */
        w->schema = MQ_RESULTS_SCHEMA;
    w->fd = fd;
    /* a torn last row (a crash mid-write) goes before anything is appended */
    long cut = mq_cut_torn_tail(w->fd, path, err, errlen);
    if (cut < 0) {
        mq_results_close(w);
        return -1;
    }
    w->cut_bytes = cut;
    if (fstat(fd, &sb) == 0 && sb.st_size == 0) { /* new or empty: the header, whole */
        mq_strbuf b = {0};
        int rc = format_header(&b) ? -1 : mq_append_row(fd, path, b.s, b.len, err, errlen);
        if (b.oom)
            snprintf(err, errlen, "%s: out of memory", path);
        free(b.s);
        if (rc) {
            mq_append_abort(fd, path, created);
            w->fd = -1;
            return -1;
        }
    }
    return 0;
}

/* A row as its CSV line into b (b->oom on out of memory), in the width of
 * schema `schema` (1: without idle_s; the row says schema 1 then). */
static void format_row(mq_strbuf *b, const mq_result *r, int schema)
{
    char s[64];
    snprintf(s, sizeof s, "%d", r->schema < schema ? r->schema : schema);
    put_field(b, s, 0);
    put_field(b, r->tool_version, 0);
    put_field(b, r->git_rev, 0);
    put_field(b, r->host, 0);
    put_field(b, r->date, 0);
    put_field(b, r->chip, 0);
    put_field(b, r->backend, 0);
    put_field(b, mq_format_name(r->p.format), 0);
    const int dims[] = {r->p.M, r->p.N, r->p.K, r->p.group};
    for (int i = 0; i < 4; i++)
        put_num(b, "%.0f", dims[i]);
    put_field(b, mq_variant_get(r->c.variant)->name, 0);
    const int params[] = {r->c.p.tile_m, r->c.p.tile_n, r->c.p.tile_k, r->c.p.num_threadgroups,
                          r->c.p.split_k};
    for (int i = 0; i < 5; i++)
        put_num(b, "%.0f", params[i]);
    put_field(b, r->status, 0);
    put_field(b, r->error, 0);
    const double stats[] = {r->st.median, r->st.p10, r->st.p90, r->st.mad, r->st.ci_lo,
                            r->st.ci_hi};
    /* round-trip precision: a resumed tune reads back exactly the medians
     * the interrupted run chose with, so it makes the same choices */
    for (int i = 0; i < 6; i++)
        put_num(b, "%.17g", stats[i]);
    put_num(b, "%.0f", r->st.n);
    put_num(b, "%.6g", r->gflops);
    put_num(b, "%.6g", r->weight_gbs);
    size_t cap = (size_t)r->nsamples * 24 + 1, used = 0;
    char *samples = malloc(cap);
    if (!samples) {
        b->oom = 1;
        return;
    }
    samples[0] = '\0';
    for (int i = 0; i < r->nsamples; i++)
        used += (size_t)snprintf(samples + used, cap - used, "%s%.6e", i ? ";" : "",
                                 r->samples[i]);
    put_field(b, samples, schema < 2);
    free(samples);
    if (schema >= 2) {
        s[0] = 0;
        if (r->idle_s > 0)
            snprintf(s, sizeof s, "%.6e", r->idle_s);
        put_field(b, s, schema < 3);
    }
    if (schema >= 3)
        put_field(b, r->kernel_build, 1);
}

int mq_results_append(mq_results_writer *w, const mq_result *r, char *err, size_t errlen)
{
    mq_strbuf b = {0};
    format_row(&b, r, w->schema);
    if (b.oom) {
        free(b.s);
        snprintf(err, errlen, "%s: out of memory writing a result", w->path);
        return -1;
    }
    int rc = mq_append_row(w->fd, w->path, b.s, b.len, err, errlen);
    free(b.s);
    w->appended += rc == 0;
    return rc;
}

int mq_results_write(const char *path, const mq_result *const *rows, int n, char *err,
                     size_t errlen)
{
    char tmp[4200];
    FILE *f = mq_atomic_open(path, tmp, sizeof tmp, err, errlen);
    if (!f)
        return -1;
    mq_strbuf b = {0};
    format_header(&b);
    for (int i = 0; i <= n && !b.oom; i++) {
        fwrite(b.s, 1, b.len, f);
        b.len = 0;
        if (i < n)
            format_row(&b, rows[i], MQ_RESULTS_SCHEMA);
    }
    free(b.s);
    if (b.oom) {
        mq_atomic_abort(f, tmp);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    return mq_atomic_commit(f, tmp, path, err, errlen);
}

int mq_results_precheck(const char *path, char *err, size_t errlen)
{
    struct stat sb;
    if (lstat(path, &sb))
        return 0; /* absent: made on opening */
    const char *why = S_ISLNK(sb.st_mode)  ? "it is a symbolic link (not followed)"
                      : !S_ISREG(sb.st_mode) ? "not a regular file"
                                             : NULL;
    if (why) {
        snprintf(err, errlen, "%s: cannot open for appending: %s", path, why);
        return -1;
    }
    mq_results rs;
    if (sb.st_size == 0)
        return 0;
    if (mq_results_load(path, &rs, err, errlen))
        return -1;
    mq_results_free(&rs);
    return 0;
}

void mq_results_abandon(mq_results_writer *w)
{
    if (w->fd >= 0 && w->created && !w->appended) {
        mq_append_abort(w->fd, w->path, 1);
        w->fd = -1;
    }
    mq_results_close(w);
}

void mq_results_close(mq_results_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
}

/* ---- reading ---- */

/* A string field into a fixed buffer: too long is an error, never cut. */
#define COPY(dst, src, name)                                                                   \
    do {                                                                                       \
        if (strlen(src) >= sizeof(dst))                                                        \
            return snprintf(why, n, "%s is longer than %zu characters", (name),               \
                            sizeof(dst) - 1),                                                  \
                   -1;                                                                         \
        snprintf((dst), sizeof(dst), "%s", (src));                                             \
    } while (0)

/* The bounds of every number in a row: sizes as the tools accept them,
 * times and rates finite and not negative. */
#define MAX_DIM (1 << 24)
#define MAX_SECONDS 1e6
#define MAX_RATE 1e12

/* One data row of a file of `ncol` columns into r; on error a message
 * naming the column and value. */
static int parse_row(char **f, int ncol, mq_result *r, char *why, size_t n)
{
    char bad[160];
    mq_error e;
    int v;
    memset(r, 0, sizeof *r);
    if (mq_parse_int(f[0], 1, 1000000, &v, bad, sizeof bad))
        return snprintf(why, n, "schema: %s", bad), -1;
    if (v > MQ_RESULTS_SCHEMA)
        return snprintf(why, n, "schema %d is newer than this tool's %d (upgrade the tool)", v,
                        MQ_RESULTS_SCHEMA),
               -1;
    r->schema = v;
    COPY(r->tool_version, f[1], "tool_version");
    COPY(r->git_rev, f[2], "git_rev");
    COPY(r->host, f[3], "host");
    COPY(r->date, f[4], "date");
    COPY(r->chip, f[5], "chip");
    COPY(r->backend, f[6], "backend");
    if (mq_format_from_name(f[7], &r->p.format, &e))
        return snprintf(why, n, "format: %.200s", e.msg), -1;
    int *dims[] = {&r->p.M, &r->p.N, &r->p.K, &r->p.group};
    for (int i = 0; i < 4; i++)
        if (mq_parse_int(f[8 + i], 1, MAX_DIM, dims[i], bad, sizeof bad))
            return snprintf(why, n, "%s: %s", columns[8 + i], bad), -1;
    if (mq_variant_from_name(f[12], &r->c.variant, &e))
        return snprintf(why, n, "variant: %.200s", e.msg), -1;
    int *params[] = {&r->c.p.tile_m, &r->c.p.tile_n, &r->c.p.tile_k, &r->c.p.num_threadgroups,
                     &r->c.p.split_k};
    for (int i = 0; i < 5; i++)
        if (mq_parse_int(f[13 + i], 0, MAX_DIM, params[i], bad, sizeof bad))
            return snprintf(why, n, "%s: %s", columns[13 + i], bad), -1;
    static const char *const statuses[] = {"ok", "verified", "wrong", "error", "illegal"};
    int known = 0;
    for (int i = 0; i < 5; i++)
        known |= !strcmp(f[18], statuses[i]);
    if (!known)
        return snprintf(why, n, "status '%.40s' is not ok, verified, wrong, error or illegal",
                        f[18]),
               -1;
    COPY(r->status, f[18], "status");
    COPY(r->error, f[19], "error");
    double *stats[] = {&r->st.median, &r->st.p10, &r->st.p90, &r->st.mad, &r->st.ci_lo,
                       &r->st.ci_hi};
    for (int i = 0; i < 6; i++)
        if (mq_parse_double(f[20 + i], 0, MAX_SECONDS, stats[i], bad, sizeof bad))
            return snprintf(why, n, "%s: %s", columns[20 + i], bad), -1;
    if (mq_parse_int(f[26], 0, MQ_RESULTS_MAX_SAMPLES, &r->st.n, bad, sizeof bad))
        return snprintf(why, n, "reps: %s", bad), -1;
    if (mq_parse_double(f[27], 0, MAX_RATE, &r->gflops, bad, sizeof bad))
        return snprintf(why, n, "gflops: %s", bad), -1;
    if (mq_parse_double(f[28], 0, MAX_RATE, &r->weight_gbs, bad, sizeof bad))
        return snprintf(why, n, "weight_gbs: %s", bad), -1;
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
        char tok[64];
        size_t len = strcspn(s, ";");
        snprintf(tok, sizeof tok, "%.*s", (int)(len < 63 ? len : 63), s);
        if (len > 63 || mq_parse_double(tok, 0, MAX_SECONDS, &r->samples[i], bad, sizeof bad)) {
            free(r->samples);
            r->samples = NULL;
            return snprintf(why, n, "samples_s: sample %d: %s", i + 1,
                            len > 63 ? "too long" : bad),
                   -1;
        }
        s += len + (s[len] == ';');
    }
    r->nsamples = count;
    if (ncol > NCOL1 && f[NCOL1][0] &&
        mq_parse_double(f[NCOL1], 0, MAX_SECONDS, &r->idle_s, bad, sizeof bad)) {
        free(r->samples);
        r->samples = NULL;
        return snprintf(why, n, "idle_s: %s", bad), -1;
    }
    if (ncol > NCOL2 && strlen(f[NCOL2]) >= sizeof r->kernel_build) {
        free(r->samples);
        r->samples = NULL;
        return snprintf(why, n, "kernel_build: longer than %d characters",
                        (int)sizeof r->kernel_build - 1), -1;
    }
    if (ncol > NCOL2)
        snprintf(r->kernel_build, sizeof r->kernel_build, "%s", f[NCOL2]);
    if (!strcmp(r->status, "ok") && !(r->st.median > 0)) {
        free(r->samples);
        r->samples = NULL;
        return snprintf(why, n, "an ok row needs a positive median"), -1;
    }
    return 0;
}

/* mq_csv_parse_rows' parser: the next row of the set. */
static int take_row(char **f, void *set, char *why, size_t n)
{
    mq_results *rs = set;
    if (parse_row(f, width_of_schema(rs->schema), &rs->r[rs->n], why, n))
        return -1;
    if (rs->r[rs->n].schema > rs->schema) {
        snprintf(why, n, "a row of schema %d in a file of schema %d's columns",
                 rs->r[rs->n].schema, rs->schema);
        free(rs->r[rs->n].samples);
        rs->r[rs->n].samples = NULL;
        return -1;
    }
    rs->n++;
    return 0;
}

int mq_results_load(const char *path, mq_results *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    mq_csv_table t;
    if (mq_csv_read_appended(path, &t, err, errlen))
        return -1;
    out->torn_line = t.torn_line;
    out->torn_bytes = t.torn_bytes;
    int rc = 0;
    if (t.nrows == 0 || t.rows[0].nfields < 1 || strcmp(t.rows[0].fields[0], "schema")) {
        snprintf(err, errlen, "%s:%d: not a results file (expected a header starting 'schema')",
                 path, t.nrows ? t.rows[0].line : 1);
        rc = -1;
    } else if (!schema_of_width(t.rows[0].nfields)) {
        snprintf(err, errlen,
                 "%s:%d: header has %d columns, schema %d has %d (schema 2: %d, schema 1: %d)",
                 path, t.rows[0].line, t.rows[0].nfields, MQ_RESULTS_SCHEMA, NCOL, NCOL2, NCOL1);
        rc = -1;
    } else {
        for (int i = 0; i < t.rows[0].nfields && rc == 0; i++)
            if (strcmp(t.rows[0].fields[i], columns[i])) {
                snprintf(err, errlen, "%s:%d: header column %d is '%.40s', expected '%s'", path,
                         t.rows[0].line, i + 1, t.rows[0].fields[i], columns[i]);
                rc = -1;
            }
        out->schema = schema_of_width(t.rows[0].nfields);
    }
    if (rc == 0 && t.nrows > 1) {
        out->r = calloc((size_t)(t.nrows - 1), sizeof *out->r);
        if (!out->r) {
            snprintf(err, errlen, "%s: out of memory", path);
            rc = -1;
        }
    }
    if (rc == 0)
        rc = mq_csv_parse_rows(&t, path, width_of_schema(out->schema), take_row, out, err,
                               errlen);
    mq_csv_free(&t);
    if (rc)
        mq_results_free(out);
    return rc;
}

int mq_results_torn_note(const mq_results *rs, const char *path, char *buf, size_t n)
{
    if (!rs->torn_line)
        return 0;
    snprintf(buf, n,
             "%s: kept %d row%s; dropped its torn last line %d (%zu bytes without a newline: "
             "a write that was cut short)",
             path, rs->n, rs->n == 1 ? "" : "s", rs->torn_line, rs->torn_bytes);
    return 1;
}

int mq_results_writer_note(const mq_results_writer *w, char *buf, size_t n)
{
    if (w->cut_bytes <= 0)
        return 0;
    snprintf(buf, n,
             "%s: cut off a torn last line (%ld bytes without a newline, from a write that was "
             "cut short) before appending; its %d whole rows are kept",
             w->path, w->cut_bytes, w->kept_rows);
    return 1;
}

void mq_results_free(mq_results *rs)
{
    for (int i = 0; i < rs->n; i++)
        free(rs->r[i].samples);
    free(rs->r);
    free(rs->by_key);
    memset(rs, 0, sizeof *rs);
}

int mq_result_same_key(const mq_result *a, const mq_result *b)
{
    return mq_result_key_cmp(a, b) == 0;
}

/* Ints in order, compared one by one; 0 when all equal. */
static int ints_cmp(const int *a, const int *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (a[i] > b[i]) - (a[i] < b[i]);
    return 0;
}

int mq_result_problem_cmp(const mq_result *a, const mq_result *b)
{
    int c = strcmp(a->chip, b->chip);
    if (!c)
        c = strcmp(a->backend, b->backend);
    const int ka[] = {(int)a->p.format, a->p.M, a->p.N, a->p.K, a->p.group};
    const int kb[] = {(int)b->p.format, b->p.M, b->p.N, b->p.K, b->p.group};
    return c ? c : ints_cmp(ka, kb, sizeof ka / sizeof ka[0]);
}

int mq_result_key_cmp(const mq_result *a, const mq_result *b)
{
    int c = mq_result_problem_cmp(a, b);
    const int ka[] = {(int)a->c.variant, a->c.p.tile_m, a->c.p.tile_n, a->c.p.tile_k,
                      a->c.p.num_threadgroups, a->c.p.split_k};
    const int kb[] = {(int)b->c.variant, b->c.p.tile_m, b->c.p.tile_n, b->c.p.tile_k,
                      b->c.p.num_threadgroups, b->c.p.split_k};
    return c ? c : ints_cmp(ka, kb, sizeof ka / sizeof ka[0]);
}

void mq_result_stamp(mq_result *r)
{
    r->schema = MQ_RESULTS_SCHEMA;
    snprintf(r->tool_version, sizeof r->tool_version, "%s", MQ_TOOL_VERSION);
    snprintf(r->git_rev, sizeof r->git_rev, "%s", mq_git_rev());
    snprintf(r->kernel_build, sizeof r->kernel_build, "%s", mq_kernel_build());
    snprintf(r->host, sizeof r->host, "%s", mq_host_name());
    time_t now = time(NULL);
    strftime(r->date, sizeof r->date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
}

static int index_order(const void *a, const void *b)
{
    const mq_result *x = *(const mq_result *const *)a, *y = *(const mq_result *const *)b;
    int c = mq_result_key_cmp(x, y);
    return c ? c : (x > y) - (x < y); /* equal keys in file order */
}

int mq_results_index(mq_results *rs)
{
    free(rs->by_key);
    rs->by_key = malloc(sizeof *rs->by_key * (size_t)(rs->n ? rs->n : 1));
    if (!rs->by_key)
        return -1;
    for (int i = 0; i < rs->n; i++)
        rs->by_key[i] = &rs->r[i];
    qsort(rs->by_key, (size_t)rs->n, sizeof *rs->by_key, index_order);
    return 0;
}

static int own(const mq_result *r)
{
    return !strcmp(r->tool_version, MQ_TOOL_VERSION) && !strcmp(r->git_rev, mq_git_rev()) &&
           !strcmp(r->host, mq_host_name());
}

const mq_result *mq_results_find_own(const mq_results *rs, const mq_result *key)
{
    if (!rs->by_key) {
        for (int i = 0; i < rs->n; i++)
            if (mq_result_same_key(&rs->r[i], key) && own(&rs->r[i]))
                return &rs->r[i];
        return NULL;
    }
    int lo = 0, hi = rs->n;
    while (lo < hi) { /* the first row of the key */
        int mid = lo + (hi - lo) / 2;
        if (mq_result_key_cmp(rs->by_key[mid], key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < rs->n && mq_result_key_cmp(rs->by_key[lo], key) == 0; lo++)
        if (own(rs->by_key[lo]))
            return rs->by_key[lo];
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
