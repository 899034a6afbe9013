/* regress.h - regression detection between two sets of per-repetition
 * timing samples: a two-sided Mann-Whitney U test (normal approximation
 * with the tie correction, GSL for the normal tail) combined with a
 * minimum effect size on the ratio of medians. */
#ifndef MQ_REGRESS_H
#define MQ_REGRESS_H

typedef enum { MQ_SAME, MQ_REGRESSED, MQ_IMPROVED, MQ_UNRELIABLE } mq_verdict;

typedef struct {
    double alpha;      /* significance (default 0.01) */
    double min_effect; /* |new/base - 1| must exceed this (default 0.05) */
    int min_samples;   /* fewer on either side: unreliable (default 5) */
} mq_regress_opts;

typedef struct {
    mq_verdict verdict;
    double ratio;   /* median(new) / median(base) */
    double p;       /* two-sided p-value of Mann-Whitney U */
    double u;       /* U of the new samples */
} mq_comparison;

mq_regress_opts mq_regress_defaults(void);
const char *mq_verdict_name(mq_verdict v);
void mq_compare_samples(const double *base, int nb, const double *cur, int nc,
                        const mq_regress_opts *o, mq_comparison *out);

#endif
