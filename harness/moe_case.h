/* moe_case.h - one case of moe-bench (a model's MoE layer at one token
 * count): its routings, activations and sampled tokens, the float64
 * reference of those tokens, and one candidate (or the unfused baseline)
 * verified against it, then timed. Apart from moe_bench.c, which walks the
 * models and token counts and writes the rows, so that the measuring and
 * its checks read on their own. */
#ifndef MQ_MOE_CASE_H
#define MQ_MOE_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "moe_bench.h"
#include "mq.h"
#include "stats.h"

#define MQ_MOE_MAX_ROTATIONS 64 /* --rotations at most */

typedef struct {
    const mq_moe_problem *p;
    const mq_moe_weights *mw;
    uint16_t *x;     /* [tokens][hidden] activations, the case's own */
    int32_t **ids;   /* [rotations] */
    float **probs;
    int rotations;
    int sample[3], nsample;  /* tokens whose reference is kept */
    int half_mid;            /* the unfused path's dense kernels write FP16 (a device) */
    /* per routing, made when first needed: [nsample][hidden] each */
    double *ref[MQ_MOE_MAX_ROTATIONS];
    /* per path's arithmetic (mq_moe_reference_arith's flags: 0 FP32, the
     * seed block; MQ_MOE_HALF_WEIGHTS the lane block; both the unfused path
     * when half_mid) */
    double *bound[4][MQ_MOE_MAX_ROTATIONS];
    const mq_table *dense;   /* the unfused baseline's dense kernels (NULL: the rule) */
    const mq_limits *lim;    /* the target's limits the MSL kernels are planned under */
    float *out;
} mq_moe_case;

/* What one measurement of a case gives: status ok, verified, wrong or
 * error, the candidate's text, its timing and the worst output's share of
 * its bound. */
typedef struct {
    char status[16], error[256], cand[192];
    mq_stats st;
    double worst;
} mq_moe_meas;

/* splitmix64: the activations' and the dense tuning's inputs */
uint64_t mq_moe_splitmix64(uint64_t *s);

/* Set up a case of problem p (p->tokens set) on weights mw: `rotations`
 * routings (each a copy of rf's when rf is not NULL, else generated as
 * kind says from the seed), the activations, the sampled tokens and the
 * reference of routing 0; half_mid as the backend's arithmetic says. 0, or
 * -1 with one line "MODEL, T tokens: problem" on stderr (md the model).
 * Free with mq_moe_case_free (also after a failure). */
int mq_moe_case_setup(mq_moe_case *mc, const mq_moe_problem *p, const mq_moe_weights *mw,
                      const mq_moe_routing_file *rf, mq_route_kind kind, int rotations,
                      const mq_moe_bench_opts *o, int half_mid, const mq_moe_model *md);
void mq_moe_case_free(mq_moe_case *mc);

/* The arithmetic of the path that runs c (NULL: the unfused baseline):
 * mq_moe_reference_arith's flags. */
int mq_moe_case_arith(const mq_moe_case *mc, const mq_moe_candidate *c);
/* The float64 reference of the sampled tokens of routing r and its bound
 * for a path's arithmetic (mq_moe_case_arith), made once per routing and
 * path. 0, or -1 and the message. */
int mq_moe_case_reference(mq_moe_case *mc, int r, int arith, char *err, size_t errlen);

/* The fewest rows any touched expert gets in any of the case's routings. */
int mq_moe_case_fewest_rows(const mq_moe_case *mc);

/* Run c (NULL: the unfused baseline) once on routing 0 and verify; then
 * time it over the rotated routings until budget seconds are spent (5
 * repetitions at least, 200 at most), every run's output verified too: the
 * device's own time where the backend has one, else the wall clock. A
 * verify-only backend (the MSL executor) is not timed ("verified"). */
void mq_moe_case_measure(mq_backend *b, mq_moe_case *mc, const mq_moe_candidate *c,
                         double budget, mq_moe_meas *m);

#endif
