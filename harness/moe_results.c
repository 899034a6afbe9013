/* moe_results.c - see moe_results.h. The columns are one table (name and
 * where the value lives in mq_moe_result), so the header, the writer and
 * the reader cannot drift apart. */
#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "cli.h"
#include "grow.h"
#include "moe_results.h"
#include "numparse.h"

typedef enum { T_STR, T_INT, T_REAL, T_FORMAT, T_PATH, T_STATUS, T_WORST } col_type;

typedef struct {
    const char *name;
    col_type type;
    size_t off;           /* of the field in mq_moe_result */
    double lo, hi;        /* numbers: the range read */
    const char *fmt;      /* reals: how they are written */
} moe_col;

/* the worst ratio written at most (a larger one, or an infinite one, is
 * as wrong; DBL_MAX itself would print as 1.8e+308 and read back as inf) */
#define WORST_MAX 1e300

#define S(n) {#n, T_STR, offsetof(mq_moe_result, n), 0, 0, NULL}
#define I(n, lo, hi) {#n, T_INT, offsetof(mq_moe_result, n), lo, hi, NULL}
#define R(n, hi, f) {#n, T_REAL, offsetof(mq_moe_result, n), 0, hi, f}
static const moe_col cols[] = {
    I(schema, 1, 3), S(tool_version), S(git_rev), S(host), S(date), S(model),
    {"format", T_FORMAT, offsetof(mq_moe_result, format), 0, 0, NULL},
    I(tokens, 1, 1 << 16), I(experts, 1, 4096), I(top_k, 1, 4096), I(hidden, 1, 1 << 20),
    I(inter, 1, 1 << 20), I(group, 1, 1 << 20), S(routing), I(route_max_tokens, 0, 1 << 16),
    R(route_mean_tokens, 1 << 16, "%.3f"), I(route_touched, 0, 4096), I(threads, 0, 1 << 20),
    {"path", T_PATH, offsetof(mq_moe_result, fused), 0, 0, NULL}, S(candidate),
    {"status", T_STATUS, offsetof(mq_moe_result, status), 0, 0, NULL}, S(error),
    R(median_s, 1e9, "%.9g"), R(p10_s, 1e9, "%.9g"), R(p90_s, 1e9, "%.9g"), I(reps, 0, 1 << 30),
    R(touched_gbs, 1e12, "%.4g"),
    {"worst_of_bound", T_WORST, offsetof(mq_moe_result, worst_of_bound), 0, WORST_MAX, "%.3g"},
    /* schema 2 */
    S(backend), S(device), R(read_probe_gbs, 1e12, "%.4g"),
    /* schema 3 */
    S(kernel_build),
};
#undef S
#undef I
#undef R
#define NCOL_1 28
#define NCOL_2 31
#define NCOL_3 (int)(sizeof cols / sizeof cols[0])

static const char *const statuses[] = {"ok", "wrong", "error", "verified"};

/* ---- writing ---- */

/* s as one CSV field: \, newline and CR escaped (the reader takes a row per
 * line), then quoted by libcsv; then the separator. */
static void put_text(mq_strbuf *b, const char *s, int last)
{
    size_t n = strlen(s), k = 0;
    char *esc = malloc(2 * n + 1);
    if (!esc) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\\' || c == '\n' || c == '\r') {
            esc[k++] = '\\';
            c = c == '\n' ? 'n' : c == '\r' ? 'r' : '\\';
        }
        esc[k++] = c;
    }
    if (!mq_sb_reserve(b, 2 * k + 3)) {
        b->len += csv_write(b->s + b->len, b->cap - b->len, esc, k);
        b->s[b->len++] = last ? '\n' : ',';
        b->s[b->len] = '\0';
    }
    free(esc);
}

/* The header: the schema line and the column names. */
static void put_header(mq_strbuf *b)
{
    mq_sb_printf(b, "# mq MoE results, schema %d\n", MQ_MOE_RESULTS_SCHEMA);
    for (int i = 0; i < NCOL_3; i++)
        mq_sb_printf(b, "%s%c", cols[i].name, i == NCOL_3 - 1 ? '\n' : ',');
}

/* What every row must hold, read or written: each number in its column's
 * range (worst_of_bound also nan, in a row that did not pass), the status
 * one of four, the values consistent. 0, or -1 with "COLUMN: problem". */
static int check_values(const mq_moe_result *r, int schema, char *why, size_t whylen)
{
    const char *base = (const char *)r;
    for (int i = 0; i < NCOL_3; i++) {
        const moe_col *c = &cols[i];
        const void *v = base + c->off;
        if (c->type != T_INT && c->type != T_REAL && c->type != T_WORST)
            continue;
        double d = c->type == T_INT ? *(const int *)v : *(const double *)v;
        int passed = r->status && (!strcmp(r->status, "ok") || !strcmp(r->status, "verified"));
        if (c->type == T_WORST && isnan(d) && passed) {
            snprintf(why, whylen, "%s: nan in a row that passed", c->name);
            return -1;
        }
        if (!(d >= c->lo && d <= c->hi) && !(c->type == T_WORST && isnan(d))) {
            snprintf(why, whylen, "%s: %g is outside %g..%g", c->name, d, c->lo, c->hi);
            return -1;
        }
    }
    size_t k = 0, nst = sizeof statuses / sizeof statuses[0];
    while (k < nst && (!r->status || strcmp(r->status, statuses[k])))
        k++;
    const char *bad = NULL;
    if (k == nst)
        bad = "status: not ok, wrong, error or verified";
    else if (r->schema != schema)
        bad = "schema: not the header's";
    else if (r->top_k > r->experts)
        bad = "top_k: more than experts";
    else if (r->route_touched > r->experts)
        bad = "route_touched: more than experts";
    else if (!strcmp(r->status, "ok") && !(r->median_s > 0))
        bad = "median_s: 0 in a row that is ok";
    else if (!r->model || !r->model[0])
        bad = "model: empty";
    if (bad)
        snprintf(why, whylen, "%s", bad);
    return bad ? -1 : 0;
}

int mq_moe_results_append(int fd, const char *path, const mq_moe_result *r, char *err,
                          size_t errlen)
{
    mq_moe_result w = *r;
    if (w.worst_of_bound > WORST_MAX)
        w.worst_of_bound = WORST_MAX;
    r = &w;
    char why[300];
    if (check_values(r, MQ_MOE_RESULTS_SCHEMA, why, sizeof why)) {
        /* a row its readers would refuse is not written */
        snprintf(err, errlen, "%s: a results row that cannot be read back (%s) was not written",
                 path, why);
        return -1;
    }
    mq_strbuf b = {0};
    const char *base = (const char *)r;
    for (int i = 0; i < NCOL_3; i++) {
        const moe_col *c = &cols[i];
        int last = i == NCOL_3 - 1;
        const void *v = base + c->off;
        if (c->type == T_STR) {
            const char *s = *(const char *const *)v;
            put_text(&b, s ? s : "", last);
            continue;
        }
        if (c->type == T_FORMAT)
            put_text(&b, mq_format_name(*(const mq_format *)v), last);
        else if (c->type == T_PATH)
            put_text(&b, *(const int *)v ? "fused" : "unfused", last);
        else if (c->type == T_STATUS)
            put_text(&b, *(const char *const *)v, last);
        else if (c->type == T_INT)
            mq_sb_printf(&b, "%d", *(const int *)v);
        else if (isnan(*(const double *)v)) /* worst_of_bound only (checked) */
            mq_sb_puts(&b, "nan");
        else
            mq_sb_printf(&b, c->fmt, *(const double *)v);
        if (c->type == T_INT || c->type == T_REAL || c->type == T_WORST)
            mq_sb_add(&b, last ? "\n" : ",", 1);
    }
    int rc = -1;
    if (b.oom)
        snprintf(err, errlen, "%s: out of memory for a results row", path);
    else
        rc = mq_append_row(fd, path, b.s, b.len, err, errlen);
    free(b.s);
    return rc;
}

int mq_moe_results_open(const char *path, char *err, size_t errlen)
{
    struct stat sb;
    if (lstat(path, &sb) && errno == ENOENT && mq_make_parent_dirs(path, err, errlen))
        return -1;
    int created;
    int fd = mq_append_open(path, &created, err, errlen);
    if (fd < 0)
        return -1;
    /* locked before it is read: a second moe-bench on the file is refused
     * above, not left to append between this check and the first row */
    int bad = fstat(fd, &sb) != 0;
    if (bad)
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    if (!bad && sb.st_size > 0) {
        mq_moe_results rs;
        bad = mq_moe_results_load(path, &rs, err, errlen) != 0;
        if (!bad && rs.schema != MQ_MOE_RESULTS_SCHEMA) {
            snprintf(err, errlen, "%s: a moe-bench results file of schema %d: rows of schema "
                                  "%d cannot be appended to it (write another file)",
                     path, rs.schema, MQ_MOE_RESULTS_SCHEMA);
            bad = 1;
        }
        mq_moe_results_free(&rs); /* empty after a failed load */
        bad = bad || mq_cut_torn_tail(fd, path, err, errlen) < 0;
    }
    if (!bad && (fstat(fd, &sb) || sb.st_size == 0)) { /* new or empty: the header, whole */
        mq_strbuf b = {0};
        put_header(&b);
        if (b.oom)
            snprintf(err, errlen, "%s: out of memory", path);
        bad = b.oom || mq_append_row(fd, path, b.s, b.len, err, errlen);
        free(b.s);
    }
    if (bad) {
        mq_append_abort(fd, path, created);
        return -1;
    }
    return fd;
}

/* ---- reading ---- */

/* Undo put_text's escapes in place (another backslash stays as it is). */
static void unescape(char *s)
{
    char *w = s;
    for (; *s; s++) {
        if (*s == '\\' && (s[1] == '\\' || s[1] == 'n' || s[1] == 'r')) {
            s++;
            *w++ = *s == 'n' ? '\n' : *s == 'r' ? '\r' : '\\';
        } else {
            *w++ = *s;
        }
    }
    *w = '\0';
}

/* Field i of a row into r; -1 with the reason in why. */
static int read_field(const moe_col *c, char *f, mq_moe_result *r, char *why, size_t whylen)
{
    void *v = (char *)r + c->off;
    switch (c->type) {
    case T_STR:
        unescape(f);
        *(const char **)v = f;
        return 0;
    case T_INT:
        return mq_parse_int(f, (int)c->lo, (int)c->hi, v, why, whylen);
    case T_REAL:
        return mq_parse_double(f, c->lo, c->hi, v, why, whylen);
    case T_WORST:
        return mq_parse_double_or_nan(f, c->lo, c->hi, v, why, whylen);
    case T_FORMAT:
        if (mq_format_from_name(f, v, NULL) == MQ_OK)
            return 0;
        snprintf(why, whylen, "unknown format '%.60s'", f);
        return -1;
    case T_PATH:
        *(int *)v = !strcmp(f, "fused");
        if (*(int *)v || !strcmp(f, "unfused"))
            return 0;
        snprintf(why, whylen, "'%.60s' is neither fused nor unfused", f);
        return -1;
    default: /* T_STATUS */
        for (size_t k = 0; k < sizeof statuses / sizeof statuses[0]; k++)
            if (!strcmp(f, statuses[k])) {
                *(const char **)v = statuses[k];
                return 0;
            }
        snprintf(why, whylen, "'%.60s' is not ok, wrong, error or verified", f);
        return -1;
    }
}

/* Row fields into r, checked one by one and against each other; 0, or -1
 * with "COLUMN: problem" in why. */
static int read_row(char **f, int ncol, int schema, mq_moe_result *r, char *why, size_t whylen)
{
    char w[300];
    memset(r, 0, sizeof *r);
    r->backend = "cpu";
    r->device = "";
    r->kernel_build = "";
    for (int i = 0; i < ncol; i++)
        if (read_field(&cols[i], f[i], r, w, sizeof w)) {
            snprintf(why, whylen, "%s: %s", cols[i].name, w);
            return -1;
        }
    return check_values(r, schema, why, whylen);
}

/* The schema of a header row (1, 2 or 3), or 0. */
static int header_schema(const mq_csv_row *h)
{
    if (h->nfields != NCOL_1 && h->nfields != NCOL_2 && h->nfields != NCOL_3)
        return 0;
    for (int i = 0; i < h->nfields; i++)
        if (strcmp(h->fields[i], cols[i].name))
            return 0;
    return h->nfields == NCOL_1 ? 1 : h->nfields == NCOL_2 ? 2 : 3;
}

int mq_moe_results_load(const char *path, mq_moe_results *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (mq_csv_read_appended(path, &out->t, err, errlen))
        return -1;
    mq_csv_table *t = &out->t;
    out->torn_line = t->torn_line;
    out->torn_bytes = t->torn_bytes;
    if (!t->nrows || !(out->schema = header_schema(&t->rows[0]))) {
        if (t->nrows)
            snprintf(err, errlen, "%s: not a moe-bench results file (line %d is not the header "
                                  "of schema 1, 2 or 3: schema,tool_version,git_rev,...)",
                     path, t->rows[0].line);
        else
            snprintf(err, errlen, "%s: not a moe-bench results file (no header line: "
                                  "schema,tool_version,git_rev,...)", path);
        mq_moe_results_free(out);
        return -1;
    }
    int ncol = t->rows[0].nfields;
    out->r = calloc((size_t)t->nrows, sizeof *out->r);
    if (!out->r) {
        snprintf(err, errlen, "%s: out of memory", path);
        mq_moe_results_free(out);
        return -1;
    }
    for (int i = 1; i < t->nrows; i++) {
        const mq_csv_row *row = &t->rows[i];
        char why[400];
        if (row->nfields != ncol)
            snprintf(why, sizeof why, "%d field%s, the header has %d", row->nfields,
                     row->nfields == 1 ? "" : "s", ncol);
        if (row->nfields != ncol ||
            read_row(row->fields, ncol, out->schema, &out->r[out->n], why, sizeof why)) {
            snprintf(err, errlen, "%s:%d: %s", path, row->line, why);
            mq_moe_results_free(out);
            return -1;
        }
        out->r[out->n++].line = row->line;
    }
    return 0;
}

void mq_moe_results_free(mq_moe_results *rs)
{
    free(rs->r);
    mq_csv_free(&rs->t);
    memset(rs, 0, sizeof *rs);
}
