/* ab_compare.c - see ab_compare.h. */
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ab_compare.h"
#include "run_compare.h"

int mq_ab_compare(const mq_results *a, const mq_results *b, int rounds, const mq_paired_opts *o,
                  const char *filter, mq_ab_comparison *out)
{
    memset(out, 0, sizeof *out);
    out->geomean = 1.0;
    if (rounds > MQ_AB_MAX_ROUNDS)
        rounds = MQ_AB_MAX_ROUNDS;
    const mq_results *first = &a[0];
    out->bench = calloc((size_t)(first->n ? first->n : 1), sizeof *out->bench);
    double *det = calloc((size_t)(first->n ? first->n : 1), sizeof *det);
    if (!out->bench || !det) {
        free(det);
        mq_ab_comparison_free(out);
        return -1;
    }
    double lg = 0;
    int judged = 0;
    for (int i = 0; i < first->n; i++) {
        const mq_result *row = &first->r[i];
        if (strcmp(row->status, "ok"))
            continue;
        if (filter) {
            char name[256];
            mq_result_name(row, name, sizeof name);
            if (!strstr(name, filter))
                continue;
        }
        int k = mq_results_occurrence(first, i);
        mq_ab_bench *e = &out->bench[out->n];
        e->row = row;
        for (int r = 0; r < rounds; r++) {
            const mq_result *ra = mq_results_kth_ok(&a[r], row, k),
                            *rb = mq_results_kth_ok(&b[r], row, k);
            if (!ra || !rb)
                continue;
            e->a[e->rounds] = ra->st.median;
            e->b[e->rounds] = rb->st.median;
            e->rounds++;
        }
        mq_paired_judge(e->a, e->b, e->rounds, o, &e->r);
        out->counts[e->r.verdict]++;
        if (e->r.verdict != MQ_UNRELIABLE) {
            lg += log(e->r.ratio);
            det[judged++] = e->r.detectable;
        }
        out->n++;
    }
    if (judged) {
        out->geomean = exp(lg / judged);
        gsl_sort(det, 1, (size_t)judged);
        out->detectable_med = gsl_stats_median_from_sorted_data(det, 1, (size_t)judged);
    }
    free(det);
    return 0;
}

void mq_ab_comparison_free(mq_ab_comparison *c)
{
    free(c->bench);
    memset(c, 0, sizeof *c);
}

int mq_ab_load(const char *dir, mq_ab_rounds *r, char *err, size_t errlen)
{
    char path[4200];
    r->rounds = 0;
    for (int k = 1; k <= MQ_AB_MAX_ROUNDS; k++) {
        snprintf(path, sizeof path, "%s/a.%d.csv", dir, k);
        if (access(path, F_OK))
            break;
        if (mq_results_load(path, &r->a[k - 1], err, errlen)) {
            mq_ab_rounds_free(r);
            return -2;
        }
        snprintf(path, sizeof path, "%s/b.%d.csv", dir, k);
        if (mq_results_load(path, &r->b[k - 1], err, errlen)) {
            mq_results_free(&r->a[k - 1]);
            mq_ab_rounds_free(r);
            return -2;
        }
        r->rounds++;
    }
    if (r->rounds == 0) {
        snprintf(err, errlen, "%s: no a.1.csv: not an A/B directory", dir);
        return 1;
    }
    if (r->rounds < 2) {
        snprintf(err, errlen, "%s: one round (a.1.csv, b.1.csv): a paired test needs two or more",
                 dir);
        mq_ab_rounds_free(r);
        return -2;
    }
    return 0;
}

void mq_ab_rounds_free(mq_ab_rounds *r)
{
    for (int k = 0; k < r->rounds; k++) {
        mq_results_free(&r->a[k]);
        mq_results_free(&r->b[k]);
    }
    r->rounds = 0;
}

int mq_ab_open_count(const mq_ab_comparison *c, double fraction)
{
    int open = 0;
    for (int i = 0; i < c->n; i++) {
        const mq_paired_result *r = &c->bench[i].r;
        if (r->verdict == MQ_UNRELIABLE || (r->verdict != MQ_REGRESSED && r->ci_hi >= 1 + fraction))
            open++;
    }
    return open;
}
