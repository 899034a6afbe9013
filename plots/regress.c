/* regress.c - see regress.h. */
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "regress.h"

mq_regress_opts mq_regress_defaults(void)
{
    mq_regress_opts o = {0.01, 0.05, 5};
    return o;
}

const char *mq_verdict_name(mq_verdict v)
{
    static const char *const names[] = {"same", "regressed", "improved", "unreliable"};
    return (unsigned)v < 4 ? names[v] : "?";
}

typedef struct {
    double v;
    int from_cur;
} tagged;

static int cmp_tagged(const void *a, const void *b)
{
    double x = ((const tagged *)a)->v, y = ((const tagged *)b)->v;
    return x < y ? -1 : x > y;
}

static double median_of(const double *s, int n, double *work)
{
    memcpy(work, s, sizeof(double) * (size_t)n);
    gsl_sort(work, 1, (size_t)n);
    return gsl_stats_median_from_sorted_data(work, 1, (size_t)n);
}

void mq_compare_samples(const double *base, int nb, const double *cur, int nc,
                        const mq_regress_opts *o, mq_comparison *out)
{
    memset(out, 0, sizeof *out);
    out->p = 1;
    int n = nb + nc;
    tagged *t = malloc(sizeof *t * (size_t)(n ? n : 1));
    double *work = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!t || !work || nb < 1 || nc < 1) {
        out->verdict = MQ_UNRELIABLE;
        free(t);
        free(work);
        return;
    }
    out->ratio = median_of(cur, nc, work) / median_of(base, nb, work);
    if (nb < o->min_samples || nc < o->min_samples) {
        out->verdict = MQ_UNRELIABLE;
        free(t);
        free(work);
        return;
    }
    for (int i = 0; i < nb; i++)
        t[i] = (tagged){base[i], 0};
    for (int i = 0; i < nc; i++)
        t[nb + i] = (tagged){cur[i], 1};
    qsort(t, (size_t)n, sizeof *t, cmp_tagged);
    /* rank sum of the new samples, ties given their average rank */
    double rank_sum = 0, ties = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && t[j].v == t[i].v)
            j++;
        double avg = (i + 1 + j) / 2.0, len = j - i;
        for (int k = i; k < j; k++)
            if (t[k].from_cur)
                rank_sum += avg;
        ties += len * len * len - len;
        i = j;
    }
    double u = rank_sum - nc * (nc + 1) / 2.0, mu = (double)nb * nc / 2.0;
    double var = (double)nb * nc / 12.0 * ((n + 1) - ties / ((double)n * (n - 1)));
    double z = var > 0 ? (u - mu) / sqrt(var) : 0;
    out->u = u;
    out->p = var > 0 ? 2 * gsl_cdf_ugaussian_Q(fabs(z)) : 1;
    if (out->p < o->alpha && out->ratio > 1 + o->min_effect)
        out->verdict = MQ_REGRESSED;
    else if (out->p < o->alpha && out->ratio < 1 - o->min_effect)
        out->verdict = MQ_IMPROVED;
    else
        out->verdict = MQ_SAME;
    free(t);
    free(work);
}
