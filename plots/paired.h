/* paired.h - the A/B verdict of one benchmark from interleaved rounds: in
 * round i the baseline revision A and the candidate B were each measured
 * in a fresh process, next to each other in time, so the round's ratio
 * B/A cancels the host's drift between rounds. The log ratios get a paired
 * (one-sample) Student t test, the geometric-mean ratio a confidence
 * interval, and the night a statement of its own power: the smallest
 * slowdown this many rounds with this much scatter would have caught. */
#ifndef MQ_PAIRED_H
#define MQ_PAIRED_H

#include "regress.h"

typedef struct {
    double alpha;      /* two-sided significance (default 0.01) */
    double min_effect; /* |B/A - 1| must reach this as well (default 0.03) */
    double power;      /* for the detectable effect (default 0.8) */
    int min_rounds;    /* fewer: unreliable (default 3) */
} mq_paired_opts;

typedef struct {
    mq_verdict verdict;
    int rounds;
    double ratio;          /* geometric mean of the rounds' B/A */
    double ci_lo, ci_hi;   /* its (1 - alpha) confidence interval */
    double p;              /* two-sided p of the paired t test */
    double sd_log;         /* standard deviation of the rounds' log ratios */
    double detectable;     /* smallest slowdown (B/A - 1) detectable at alpha with
                            * the given power tonight, at least min_effect */
} mq_paired_result;

mq_paired_opts mq_paired_defaults(void);

/* a[i], b[i]: round i's time of A and of B (> 0). n < 2 or a time <= 0:
 * unreliable, with what could be computed. */
void mq_paired_judge(const double *a, const double *b, int n, const mq_paired_opts *o,
                     mq_paired_result *out);

#endif
