/* ab_compare.h - an A/B night: rounds of results files, round r holding a
 * run of the baseline revision (A) and one of the candidate (B), measured
 * in alternating fresh processes. Every benchmark ok in A's first round
 * (its key, and its occurrence where a suite measures a key twice) gets its
 * per-round medians from both sides and the paired verdict of paired.h. */
#ifndef MQ_AB_COMPARE_H
#define MQ_AB_COMPARE_H

#include "paired.h"
#include "results.h"

#define MQ_AB_MAX_ROUNDS 64

typedef struct {
    const mq_result *row; /* its row in A's first round (names it; borrowed) */
    double a[MQ_AB_MAX_ROUNDS], b[MQ_AB_MAX_ROUNDS]; /* per-round medians, s */
    int rounds;           /* rounds with the benchmark ok on both sides */
    mq_paired_result r;
} mq_ab_bench;

typedef struct {
    mq_ab_bench *bench;
    int n;
    int counts[4];          /* by mq_verdict */
    double geomean;         /* of the judged benchmarks' B/A; 1 when none */
    double detectable_med;  /* median detectable slowdown over the judged */
} mq_ab_comparison;

/* An A/B directory's rounds: DIR/a.R.csv and DIR/b.R.csv, R = 1, 2, ...
 * up to the first R without a.R.csv. */
typedef struct {
    mq_results a[MQ_AB_MAX_ROUNDS], b[MQ_AB_MAX_ROUNDS];
    int rounds;
} mq_ab_rounds;

/* 0 loaded (two rounds or more); 1 no DIR/a.1.csv (not an A/B directory);
 * -2 with a message naming the file: a bad file, a round without its b
 * side, or one round only. */
int mq_ab_load(const char *dir, mq_ab_rounds *r, char *err, size_t errlen);
void mq_ab_rounds_free(mq_ab_rounds *r);

/* a[r], b[r] for r < rounds; only the benchmarks whose name
 * (mq_result_name) contains filter, when it is not NULL. -1 on out of
 * memory. */
int mq_ab_compare(const mq_results *a, const mq_results *b, int rounds, const mq_paired_opts *o,
                  const char *filter, mq_ab_comparison *out);
void mq_ab_comparison_free(mq_ab_comparison *c);

/* How many of c's benchmarks leave a slowdown of `fraction` open: not
 * regressed, and either unreliable or with an interval that reaches
 * 1 + fraction. A bisect step may call its commit good only when this is
 * 0; "same" alone only says that this night saw no significant slowdown,
 * which a noisy round can say of a 4x slower build. */
int mq_ab_open_count(const mq_ab_comparison *c, double fraction);

#endif
