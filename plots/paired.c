/* paired.c - see paired.h. */
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <string.h>

#include "paired.h"

#define MQ_MAX_ROUNDS 1024

mq_paired_opts mq_paired_defaults(void)
{
    mq_paired_opts o = {0.01, 0.03, 0.8, 3};
    return o;
}

void mq_paired_judge(const double *a, const double *b, int n, const mq_paired_opts *o,
                     mq_paired_result *out)
{
    memset(out, 0, sizeof *out);
    out->verdict = MQ_UNRELIABLE;
    out->ratio = out->ci_lo = out->ci_hi = 1.0;
    out->p = 1.0;
    out->detectable = INFINITY;
    if (n > MQ_MAX_ROUNDS)
        n = MQ_MAX_ROUNDS;
    double d[MQ_MAX_ROUNDS];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (a[i] > 0 && b[i] > 0 && isfinite(a[i]) && isfinite(b[i]))
            d[m++] = log(b[i] / a[i]);
    out->rounds = m;
    if (m < 2)
        return;
    double mean = gsl_stats_mean(d, 1, (size_t)m), sd = gsl_stats_sd_m(d, 1, (size_t)m, mean);
    double se = sd / sqrt((double)m), dof = m - 1;
    double tcrit = gsl_cdf_tdist_Qinv(o->alpha / 2, dof);
    out->ratio = exp(mean);
    out->sd_log = sd;
    out->ci_lo = exp(mean - tcrit * se);
    out->ci_hi = exp(mean + tcrit * se);
    if (se > 0)
        out->p = 2 * gsl_cdf_tdist_Q(fabs(mean) / se, dof);
    else
        out->p = mean != 0 ? 0.0 : 1.0;
    /* the effect whose t statistic would exceed tcrit with the given power:
     * (t_alpha/2 + t_(1-power)) standard errors */
    double reach = exp((tcrit + gsl_cdf_tdist_Qinv(1 - o->power, dof)) * se) - 1;
    out->detectable = fmax(reach, o->min_effect);
    if (m < o->min_rounds)
        return;
    double floor_log = log1p(o->min_effect);
    if (out->p < o->alpha && mean >= floor_log)
        out->verdict = MQ_REGRESSED;
    else if (out->p < o->alpha && -mean >= floor_log)
        out->verdict = MQ_IMPROVED;
    else
        out->verdict = MQ_SAME;
}
