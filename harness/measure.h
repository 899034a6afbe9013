/* measure.h - the verify-then-time measurement of candidates on any
 * backend (backends/backend.h).
 * A bench problem holds what every candidate of one problem shares:
 * rotated weight copies, activations, and the float64 reference of sampled
 * rows. A candidate's time counts only after its output matched. */
#ifndef MQ_MEASURE_H
#define MQ_MEASURE_H

#include <stddef.h>

#include "backend.h"
#include "mq.h"
#include "results.h"
#include "stats.h"

typedef struct {
    mq_problem p;         /* the current problem: its M selects rows of A */
    mq_weights *copies;   /* rotated so a decode run is not an L3-hot run */
    int ncopies, next_copy, warm;
    void *copies_block;   /* copies 1.. live in it (mq_weights_copies) */
    uint16_t *A;          /* [max_m][K]; row r depends only on r */
    float *C;             /* [max_m][N] */
    int max_m;
    int *ref_rows, nref;  /* rows whose float64 reference is cached */
    const mq_backend *prepared; /* the backend every copy was prepared on, once */
    double *ref_cache, *abs_cache; /* [nref][N]: sum a*w and sum |a*w| */
    int rows[3], slot[3], nrows;   /* sampled rows of M (first, middle, last) */
} mq_bench_problem;

/* Whether p's setup (the float weights it quantizes, one quantized set,
 * the activations, the reference and the output) fits in this machine's
 * physical memory: 0, or -1 with "needs X GB of memory to set up (M=.. N=..
 * K=..); this machine has Y GB". Checked with the other inputs, before
 * anything is created or timed, so a shape too large is bad input, not a
 * failure half-way through a run. */
int mq_problem_fits_memory(const mq_problem *p, char *err, size_t errlen);

/* Make bp serve problem p: seeded random weights (quantized once per
 * format, N, K and group; warm: a single copy), activations, and the
 * reference of the sampled rows. ms lists the token counts that will follow
 * for the same weights (may be NULL): their reference rows are computed in
 * the same pass over the weights. bp must be zeroed before its first use. */

/* The device's last-level cache (a GPU's L2): cold runs rotate weight
 * copies past twice the larger of it and the host's. 0: the host's alone. */
void mq_bench_set_device_cache(size_t bytes);

int mq_bench_problem_setup(mq_bench_problem *bp, const mq_problem *p, int warm, const int *ms,
                           int nms, mq_error *err);
void mq_bench_problem_free(mq_bench_problem *bp);
/* Elements of the sampled rows outside the bound of the backend's arithmetic
 * (see mq_verify_bound); worst_ratio gets the largest |C - ref| / bound. */
int mq_bench_verify(const mq_bench_problem *bp, const mq_backend_arith *arith,
                    double *worst_ratio);
/* The bound on |C - ref| of one output: K products, sum_abs = sum |a*w|,
 * ref the float64 reference, under arith (NULL: FP32 throughout). */
double mq_verify_bound(int K, double sum_abs, double ref, const mq_backend_arith *arith);
typedef struct {
    double budget_s;  /* stop after this much timed running ... */
    double ci_rel;    /* ... or once the 95% CI of the median is within +-ci_rel */
    int min_reps, max_reps, warmups; /* max_reps 0: verify only, no timing ("verified") */
} mq_measure_opts;

mq_measure_opts mq_measure_defaults(void); /* 0.5 s, 2%, 5..1000 reps, 1 warm-up */

#define MQ_MAX_SAMPLES 4096

typedef struct {
    char status[16];      /* ok (verified and timed), verified (not timed), wrong, error, illegal */
    char error[256];      /* the reason when not ok */
    mq_stats st;
    double samples[MQ_MAX_SAMPLES];
    int nsamples;
    double gflops, weight_gbs, worst_ratio;
    double kernel_s;      /* time spent inside the backend, warm-ups and check included */
    double idle_s;        /* where the backend times queued launches: the median of
                           * MQ_IDLE_REPS launches on an idle device (0: not measured) */
} mq_measurement;

/* Launches on an idle device timed after the queued samples, for idle_s:
 * each on the next rotated weight copy, as the samples are. */
#define MQ_IDLE_REPS 5

/* A results row's status, error, statistics and samples from a measurement
 * (samples borrowed from m), stamped with this build, host and date. */
void mq_result_from_measurement(mq_result *r, const mq_measurement *m);

/* Plan the candidate under lim (once: every run of it gets that plan), run
 * it and verify its output against the reference, then (unless the backend
 * only verifies or o->max_reps is 0) time it with warm-ups and rotated weight
 * copies. The status says why a candidate has no time: illegal, error,
 * wrong. */
void mq_measure(mq_backend *b, mq_bench_problem *bp, const mq_candidate *c,
                const mq_limits *lim, const mq_measure_opts *o, mq_measurement *m);

#endif
