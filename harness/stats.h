/* stats.h - summary statistics of per-repetition timing samples, with GSL:
 * median, p10, p90, MAD, and the distribution-free 95% confidence interval
 * of the median (order statistics, normal approximation of the binomial). */
#ifndef MQ_STATS_H
#define MQ_STATS_H

typedef struct {
    double median, p10, p90, mad;
    double ci_lo, ci_hi; /* 95% CI of the median */
    int n;
} mq_stats;

/* samples are not modified; n >= 1 */
void mq_stats_compute(const double *samples, int n, mq_stats *out);
/* (ci_hi - ci_lo) / 2 / median: the relative half-width of the CI */
double mq_stats_ci_rel(const mq_stats *s);

#endif
