/* moe_routing.c - mq_moe_routing_read (moe_bench.h): a recorded routing,
 * read and checked whole before moe-bench creates anything, each problem
 * named by its file and line, so that a bad routing never gets as far as
 * the kernels' own check (which knows no file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csvfile.h"
#include "moe_bench.h"
#include "numparse.h"

#define MAX_TOKENS (1 << 16) /* the MoE block's (mq_moe_problem_check) */
#define MAX_SLOTS 4096       /* its most experts, so the most slots */

typedef struct {
    int tok, slot, expert, line;
    float prob;
} route_row;

static int by_pair(const void *a, const void *b)
{
    const route_row *x = a, *y = b;
    if (x->tok != y->tok)
        return x->tok < y->tok ? -1 : 1;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

void mq_moe_routing_file_free(mq_moe_routing_file *r)
{
    free(r->ids);
    free(r->probs);
    memset(r, 0, sizeof *r);
}

/* The header's columns into col[4]; -1 with the message. */
static int routing_header(const mq_csv_table *t, const char *path, int col[4], char *err,
                          size_t errlen)
{
    static const char *const names[4] = {"token", "slot", "expert", "prob"};
    if (!t->nrows) {
        snprintf(err, errlen, "%s: empty (a routing CSV starts with the header "
                              "token,slot,expert,prob)", path);
        return -1;
    }
    for (int i = 0; i < 4; i++)
        if ((col[i] = mq_csv_column(t, names[i])) < 0) {
            snprintf(err, errlen, "%s:%d: no '%s' column in the header (a routing CSV has "
                                  "token,slot,expert,prob)", path, t->rows[0].line, names[i]);
            return -1;
        }
    if (t->nrows < 2) {
        snprintf(err, errlen, "%s:%d: no routing rows after the header", path, t->rows[0].line);
        return -1;
    }
    return 0;
}

/* Every row's fields into rows[], in the file's order; -1 with the message. */
static int routing_rows(const mq_csv_table *t, const char *path, const int col[4], int experts,
                        route_row *rows, char *err, size_t errlen)
{
    for (int r = 1; r < t->nrows; r++) {
        const mq_csv_row *row = &t->rows[r];
        route_row *o = &rows[r - 1];
        char why[200];
        double pr = 0;
        const char *bad = NULL;
        o->line = row->line;
        if (row->nfields != t->rows[0].nfields) {
            snprintf(err, errlen, "%s:%d: %d field%s, the header has %d", path, row->line,
                     row->nfields, row->nfields == 1 ? "" : "s", t->rows[0].nfields);
            return -1;
        }
        if (mq_parse_int(row->fields[col[0]], 0, MAX_TOKENS - 1, &o->tok, why, sizeof why))
            bad = "token";
        else if (mq_parse_int(row->fields[col[1]], 0, MAX_SLOTS - 1, &o->slot, why, sizeof why))
            bad = "slot";
        else if (mq_parse_int(row->fields[col[2]], 0, experts - 1, &o->expert, NULL, 0)) {
            snprintf(err, errlen, "%s:%d: expert '%.40s' is not in 0..%d (the model's experts)",
                     path, row->line, row->fields[col[2]], experts - 1);
            return -1;
        } else if (mq_parse_double(row->fields[col[3]], 0, 1e30, &pr, why, sizeof why))
            bad = "prob";
        if (bad) {
            snprintf(err, errlen, "%s:%d: %s: %s%s", path, row->line, bad, why,
                     bad[0] == 'p' ? " (a probability: finite, 0 or more)" : "");
            return -1;
        }
        o->prob = (float)pr;
    }
    return 0;
}

/* rows (n, sorted by token and slot) must be every token 0..T-1 x slot
 * 0..K-1 exactly once, and no token on one expert twice; -1 with the
 * message naming the line. */
static int routing_complete(const route_row *rows, int n, int tokens, int top_k, int experts,
                            const char *path, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        const route_row *r = &rows[i];
        size_t key = (size_t)r->tok * top_k + r->slot;
        if (i && rows[i - 1].tok == r->tok && rows[i - 1].slot == r->slot) {
            snprintf(err, errlen, "%s:%d: token %d slot %d given twice (first at line %d)", path,
                     r->line, r->tok, r->slot, rows[i - 1].line);
            return -1;
        }
        if (key != (size_t)i) {
            snprintf(err, errlen, "%s:%d: token %d slot %d has no row (every token 0..%d needs "
                                  "slots 0..%d)", path, r->line, (int)((size_t)i / top_k),
                     (int)((size_t)i % top_k), tokens - 1, top_k - 1);
            return -1;
        }
    }
    if ((size_t)n != (size_t)tokens * top_k) {
        snprintf(err, errlen, "%s:%d: token %d slot %d has no row (every token 0..%d needs slots "
                              "0..%d)", path, rows[n - 1].line, n / top_k, n % top_k, tokens - 1,
                 top_k - 1);
        return -1;
    }
    int *last = calloc((size_t)experts, sizeof *last); /* row index + 1 of the expert's last use */
    if (!last) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const route_row *r = &rows[i];
        int j = last[r->expert] - 1;
        if (j >= 0 && rows[j].tok == r->tok) {
            const route_row *a = rows[j].line < r->line ? &rows[j] : r, *b = a == r ? &rows[j] : r;
            snprintf(err, errlen, "%s:%d: token %d routes to expert %d twice (slot %d here, "
                                  "slot %d at line %d)", path, b->line, r->tok, r->expert,
                     b->slot, a->slot, a->line);
            rc = -1;
        }
        last[r->expert] = i + 1;
    }
    free(last);
    return rc;
}

int mq_moe_routing_read(const char *path, int experts, mq_moe_routing_file *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof *out);
    mq_csv_table t;
    if (mq_csv_read(path, &t, err, errlen))
        return -1;
    int col[4], rc = -1, n = t.nrows - 1;
    route_row *rows = NULL;
    if (routing_header(&t, path, col, err, errlen))
        goto done;
    if (!(rows = calloc((size_t)n, sizeof *rows))) {
        snprintf(err, errlen, "%s: out of memory for %d rows", path, n);
        goto done;
    }
    if (routing_rows(&t, path, col, experts, rows, err, errlen))
        goto done;
    int tokens = 0, top_k = 0;
    for (int i = 0; i < n; i++) {
        tokens = tokens > rows[i].tok + 1 ? tokens : rows[i].tok + 1;
        top_k = top_k > rows[i].slot + 1 ? top_k : rows[i].slot + 1;
    }
    qsort(rows, (size_t)n, sizeof *rows, by_pair);
    if (routing_complete(rows, n, tokens, top_k, experts, path, err, errlen))
        goto done;
    out->ids = malloc((size_t)n * sizeof *out->ids);
    out->probs = malloc((size_t)n * sizeof *out->probs);
    if (!out->ids || !out->probs) {
        snprintf(err, errlen, "%s: out of memory for %d tokens", path, tokens);
        goto done;
    }
    for (int i = 0; i < n; i++) { /* sorted: row i is token i / top_k, slot i % top_k */
        out->ids[i] = rows[i].expert;
        out->probs[i] = rows[i].prob;
    }
    out->tokens = tokens;
    out->top_k = top_k;
    rc = 0;
done:
    free(rows);
    mq_csv_free(&t);
    if (rc)
        mq_moe_routing_file_free(out);
    return rc;
}
