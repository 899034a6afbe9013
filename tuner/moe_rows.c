/* moe_rows.c - see moe_rows.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_results.h"
#include "moe_rows.h"

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

/* A results row's candidate (mq_moe_candidate_parse) into r; 0 or -1 */
static int parse_cand(const char *s, mq_table_row *r)
{
    mq_moe_candidate c;
    if (mq_moe_candidate_parse(s, &c, NULL))
        return -1;
    r->c = c.inner;
    r->i_split = c.i_split;
    r->fuse_gate_up = c.fuse_gate_up;
    r->down_tile_n = c.down_tile_n;
    r->down_tile_k = c.down_tile_k;
    return 0;
}

int mq_moe_table_entries(const char *path, const char *backend, const char *device,
                         const char *host, mq_table_entry **out, char *kbuild, char *err,
                         size_t errlen)
{
    *out = NULL;
    if (kbuild)
        kbuild[0] = '\0';
    const mq_moe_result *first = NULL; /* the first row counted: its kernel build */
    /* moe-bench's own reader: the same checks, escapes and torn-row rule as
     * moe-bench and plot moe */
    mq_moe_results rs;
    if (mq_moe_results_load(path, &rs, err, errlen))
        return -1;
    int n = 0, rc = -1;
    mq_table_row *picks = calloc((size_t)(rs.n > 1 ? rs.n : 1), sizeof *picks);
    if (!picks) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto done;
    }
    int elsewhere = 0;
    for (int i = 0; i < rs.n; i++) {
        const mq_moe_result *x = &rs.r[i];
        if (!x->fused || strcmp(x->status, "ok"))
            continue;
        if (backend && (strcmp(x->backend, backend) || strcmp(x->device, device) ||
                        (!device[0] && strcmp(x->host, host)))) {
            elsewhere++;
            continue;
        }
        if (backend && first && strcmp(x->kernel_build, first->kernel_build)) {
            snprintf(err, errlen, "%s:%d: a row of kernel build '%s' after rows of '%s': a "
                                  "table's MoE rows come from one build (keep one build's rows)",
                     path, x->line, x->kernel_build, first->kernel_build);
            goto done;
        }
        if (backend && !first)
            first = x;
        mq_table_row r;
        memset(&r, 0, sizeof r);
        r.format = x->format;
        r.group = x->group;
        r.N = x->hidden;
        r.K = x->inter;
        r.experts = x->experts;
        r.top_k = x->top_k;
        r.m_hi = x->tokens;
        r.expected_s = x->median_s;
        if (!(r.expected_s > 0) || parse_cand(x->candidate, &r)) {
            snprintf(err, errlen, "%s:%d: a fused row that cannot be read (median_s or "
                                  "candidate '%.60s')", path, x->line, x->candidate);
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
    if (kbuild)
        snprintf(kbuild, MQ_MOE_KBUILD_LEN, "%s", first->kernel_build);
done:
    free(picks);
    mq_moe_results_free(&rs);
    return rc;
}
