/* run_compare.c - see run_compare.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_compare.h"

int mq_compare_runs(const mq_results *base, const mq_results *cur, const mq_regress_opts *o,
                    mq_run_comparison *out)
{
    memset(out, 0, sizeof *out);
    out->geomean = 1.0;
    out->pairs = calloc((size_t)(cur->n ? cur->n : 1), sizeof *out->pairs);
    if (!out->pairs)
        return -1;
    double lg = 0;
    for (int i = 0; i < cur->n; i++) {
        const mq_result *n = &cur->r[i];
        if (strcmp(n->status, "ok"))
            continue;
        mq_run_pair *pr = &out->pairs[out->n];
        /* a suite may measure one benchmark more than once (two layers of
         * the same shape): the k-th occurrence pairs with the k-th in the
         * baseline, or its last when the baseline has fewer */
        int k = 0;
        for (int j = 0; j < i; j++)
            k += !strcmp(cur->r[j].status, "ok") && mq_result_same_key(&cur->r[j], n);
        for (int j = 0, seen = 0; j < base->n && seen <= k; j++) {
            const mq_result *b = &base->r[j];
            if (!strcmp(b->status, "ok") && mq_result_same_key(b, n)) {
                pr->b = b;
                seen++;
            }
        }
        if (!pr->b)
            continue;
        pr->n = n;
        mq_compare_samples(pr->b->samples, pr->b->nsamples, n->samples, n->nsamples, o, &pr->c);
        out->counts[pr->c.verdict]++;
        if (pr->c.verdict != MQ_UNRELIABLE)
            lg += log(pr->c.ratio);
        out->n++;
    }
    int judged = out->n - out->counts[MQ_UNRELIABLE];
    if (judged)
        out->geomean = exp(lg / judged);
    return 0;
}

void mq_run_comparison_free(mq_run_comparison *rc)
{
    free(rc->pairs);
    memset(rc, 0, sizeof *rc);
}

void mq_result_name(const mq_result *r, char *buf, size_t n)
{
    char cand[128];
    mq_candidate_str(&r->c, cand, sizeof cand);
    snprintf(buf, n, "%s %s %s M=%d N=%d K=%d g=%d %s", r->chip, r->backend,
             mq_format_name(r->p.format), r->p.M, r->p.N, r->p.K, r->p.group, cand);
}
