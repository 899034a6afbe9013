/* moe_rows.c - see moe_rows.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csvfile.h"
#include "moe_rows.h"
#include "numparse.h"

typedef struct {
    mq_table_row r; /* m_hi holds the token count until the ranges are made */
} moe_pick;

static int same_key(const mq_table_row *a, const mq_table_row *b)
{
    return a->format == b->format && a->group == b->group && a->N == b->N && a->K == b->K &&
           a->experts == b->experts && a->top_k == b->top_k;
}

static int same_cand(const mq_table_row *a, const mq_table_row *b)
{
    return a->c.variant == b->c.variant && !memcmp(&a->c.p, &b->c.p, sizeof a->c.p) &&
           a->i_split == b->i_split && a->fuse_gate_up == b->fuse_gate_up &&
           a->down_tile_n == b->down_tile_n && a->down_tile_k == b->down_tile_k;
}

static int cmp_pick(const void *x, const void *y)
{
    const mq_table_row *a = x, *b = y;
    int k[6][2] = {{a->format, b->format}, {a->group, b->group}, {a->N, b->N},
                   {a->K, b->K},           {a->experts, b->experts}, {a->top_k, b->top_k}};
    for (int i = 0; i < 6; i++)
        if (k[i][0] != k[i][1])
            return k[i][0] < k[i][1] ? -1 : 1;
    return (a->m_hi > b->m_hi) - (a->m_hi < b->m_hi);
}

/* "gemm_trellis_moe[VARIANT tm=.. tn=.. tk=.. tg=.. sk=..] i_split=.. fuse_gate_up=..
 * [down=TNxTK]" (mq_moe_candidate_str) into r; 0 or -1 */
static int parse_cand(const char *s, mq_table_row *r)
{
    char var[64];
    int used = 0;
    mq_params *q = &r->c.p;
    if (sscanf(s, "gemm_trellis_moe[%63s tm=%d tn=%d tk=%d tg=%d sk=%d] i_split=%d "
                  "fuse_gate_up=%d%n",
               var, &q->tile_m, &q->tile_n, &q->tile_k, &q->num_threadgroups, &q->split_k,
               &r->i_split, &r->fuse_gate_up, &used) != 8)
        return -1;
    r->down_tile_n = r->down_tile_k = 0;
    if (s[used] && (sscanf(s + used, " down=%dx%d", &r->down_tile_n, &r->down_tile_k) != 2 ||
                    r->down_tile_n <= 0 || r->down_tile_k <= 0))
        return -1;
    return mq_variant_from_name(var, &r->c.variant, NULL) == MQ_OK ? 0 : -1;
}

int mq_moe_table_entries(const char *path, const char *backend, const char *device,
                         const char *host, mq_table_entry **out, char *err, size_t errlen)
{
    *out = NULL;
    mq_csv_table t;
    if (mq_csv_read(path, &t, err, errlen))
        return -1;
    static const char *const names[] = {"format", "group",  "hidden",    "inter",
                                        "experts", "top_k", "tokens",    "path",
                                        "status", "median_s", "candidate", "backend",
                                        "device", "host"};
    enum { C_FMT, C_GROUP, C_H, C_I, C_E, C_K, C_T, C_PATH, C_ST, C_MED, C_CAND, C_BE, C_DEV,
           C_HOST, C_N };
    int col[C_N], n = 0, rc = -1;
    mq_table_row *picks = NULL;
    for (int i = 0; i < C_N; i++)
        if ((col[i] = mq_csv_column(&t, names[i])) < 0) {
            snprintf(err, errlen, "%s: no '%s' column (not a moe-bench results file of "
                                  "schema 2)", path, names[i]);
            goto done;
        }
    picks = calloc((size_t)(t.nrows > 1 ? t.nrows : 1), sizeof *picks);
    if (!picks) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto done;
    }
    int elsewhere = 0;
    for (int i = 1; i < t.nrows; i++) {
        const mq_csv_row *row = &t.rows[i];
        if (row->nfields != t.rows[0].nfields) {
            snprintf(err, errlen, "%s:%d: %d fields, the header has %d", path, row->line,
                     row->nfields, t.rows[0].nfields);
            goto done;
        }
        char **f = row->fields;
        if (strcmp(f[col[C_PATH]], "fused") || strcmp(f[col[C_ST]], "ok"))
            continue;
        if (backend && (strcmp(f[col[C_BE]], backend) ||
            strcmp(f[col[C_DEV]], device) || (!device[0] && strcmp(f[col[C_HOST]], host)))) {
            elsewhere++;
            continue;
        }
        mq_table_row r;
        memset(&r, 0, sizeof r);
        int *ints[] = {&r.group, &r.N, &r.K, &r.experts, &r.top_k, &r.m_hi};
        const int cols[] = {C_GROUP, C_H, C_I, C_E, C_K, C_T};
        char b[160] = "";
        int bad = mq_format_from_name(f[col[C_FMT]], &r.format, NULL) != MQ_OK;
        for (int j = 0; !bad && j < 6; j++)
            bad = mq_parse_int(f[col[cols[j]]], 1, 1 << 30, ints[j], b, sizeof b) != 0;
        bad = bad || mq_parse_double(f[col[C_MED]], 1e-12, 1e6, &r.expected_s, b, sizeof b) ||
              parse_cand(f[col[C_CAND]], &r);
        if (bad) {
            snprintf(err, errlen, "%s:%d: a fused row that cannot be read (format, sizes, "
                                  "median_s or candidate '%.60s')", path, row->line,
                     f[col[C_CAND]]);
            goto done;
        }
        r.expected_m = r.m_hi;
        int k = 0; /* the fastest per key and token count */
        while (k < n && !(same_key(&picks[k], &r) && picks[k].m_hi == r.m_hi))
            k++;
        if (k == n)
            picks[n++] = r;
        else if (r.expected_s < picks[k].expected_s)
            picks[k] = r;
    }
    if (!backend) { /* read and checked: that is all that was asked */
        rc = 0;
        goto done;
    }
    if (!n) {
        snprintf(err, errlen, "%s: no verified, timed fused rows of backend %s%s%s%s (%d rows "
                              "from elsewhere)", path, backend, device[0] ? " on " : " on host ",
                 device[0] ? device : host, "", elsewhere);
        goto done;
    }
    qsort(picks, (size_t)n, sizeof *picks, cmp_pick);
    mq_table_entry *e = calloc((size_t)n, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto done;
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        int first = i == 0 || !same_key(&picks[i - 1], &picks[i]);
        int last = i == n - 1 || !same_key(&picks[i + 1], &picks[i]);
        mq_table_row r = picks[i];
        r.m_lo = first ? 1 : picks[i - 1].m_hi + 1;
        r.m_hi = last ? 1 << 30 : picks[i].m_hi;
        if (!first && same_cand(&e[m - 1].row, &r)) { /* the same choice goes on */
            e[m - 1].row.m_hi = r.m_hi;
            continue;
        }
        e[m].row = r;
        e[m++].measured = 1;
    }
    *out = e;
    rc = m;
done:
    free(picks);
    mq_csv_free(&t);
    return rc;
}
