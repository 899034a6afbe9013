/* stats.c - see stats.h. The CI of the median uses the ranks
 * n/2 -+ z*sqrt(n)/2 (z = 1.96, from gsl_cdf_ugaussian_Pinv), clamped to the
 * sample; with fewer than 6 samples it is the whole range. */
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

void mq_stats_compute(const double *samples, int n, mq_stats *out)
{
    memset(out, 0, sizeof *out);
    if (n <= 0)
        return;
    double *s = malloc(sizeof(double) * (size_t)n * 2);
    if (!s)
        return;
    double *dev = s + n;
    memcpy(s, samples, sizeof(double) * (size_t)n);
    gsl_sort(s, 1, (size_t)n);
    out->n = n;
    out->median = gsl_stats_median_from_sorted_data(s, 1, (size_t)n);
    out->p10 = gsl_stats_quantile_from_sorted_data(s, 1, (size_t)n, 0.10);
    out->p90 = gsl_stats_quantile_from_sorted_data(s, 1, (size_t)n, 0.90);
    for (int i = 0; i < n; i++)
        dev[i] = fabs(s[i] - out->median);
    gsl_sort(dev, 1, (size_t)n);
    out->mad = gsl_stats_median_from_sorted_data(dev, 1, (size_t)n);
    if (n < 6) {
        out->ci_lo = s[0];
        out->ci_hi = s[n - 1];
    } else {
        double z = gsl_cdf_ugaussian_Pinv(0.975), h = z * sqrt((double)n) / 2.0;
        int lo = (int)floor(n / 2.0 - h), hi = (int)ceil(n / 2.0 + h); /* 1-based ranks */
        if (lo < 1)
            lo = 1;
        if (hi > n)
            hi = n;
        out->ci_lo = s[lo - 1];
        out->ci_hi = s[hi - 1];
    }
    free(s);
}

double mq_stats_ci_rel(const mq_stats *s)
{
    return s->median > 0 ? (s->ci_hi - s->ci_lo) / 2.0 / s->median : INFINITY;
}
