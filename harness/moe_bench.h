/* moe_bench.h - the MoE block measured: real models' MoE layers (suites,
 * with their sources), routings generated or read from a CSV, the fused
 * gemm_trellis_moe over a candidate space against the unfused baseline,
 * every candidate verified against the float64 reference of sampled tokens
 * before it is timed, each results row appended whole as it is measured. */
#ifndef MQ_MOE_BENCH_H
#define MQ_MOE_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "mq.h"

/* One model's MoE layer, from its published configuration. */
typedef struct {
    const char *name, *source;
    int hidden, inter, experts, top_k;
} mq_moe_model;

/* The models of a suite: one model's name, or "all"; -1 and a message
 * listing the known names otherwise. */
int mq_moe_suite(const char *name, const mq_moe_model **out, int cap, char *err, size_t errlen);
const char *mq_moe_suite_names(void);

/* A routing read from a CSV with columns token, slot, expert, prob (every
 * token 0..T-1 and slot 0..top_k-1 exactly once, any order; every row with
 * the header's field count): tokens and top_k come from the file; expert
 * ids must be in 0..experts-1 and distinct within a token, probabilities
 * finite and not negative (harness/moe_routing.c). -1 and one line
 * "PATH:LINE: problem" (naming the token, slot or expert) otherwise. */
typedef struct {
    int tokens, top_k;
    int32_t *ids;
    float *probs;
} mq_moe_routing_file;

int mq_moe_routing_read(const char *path, int experts, mq_moe_routing_file *out, char *err,
                        size_t errlen);
void mq_moe_routing_file_free(mq_moe_routing_file *r);

typedef struct {
    const char *backend;      /* cpu (default), cuda, msl-cpu (verifies, never times), auto */
    const char *routing;      /* uniform, zipf, one, or a CSV path */
    double zipf_s;
    mq_format format;
    int group, threads;
    double budget_s;          /* timing per candidate */
    int max_candidates;       /* of the fused space, per problem (0: all) */
    int rotations;            /* routings cycled through while timing (cold-ish weights) */
    uint64_t seed;
    int quiet;
    const mq_limits *lim;     /* the target's limits the MSL kernels are planned under
                               * (--chip; NULL: mq_limits_default, Apple's) */
    const mq_moe_candidate *candidates; /* --candidate: these instead of the space (and no
                                         * second stage); NULL: the space */
    int ncandidates;
} mq_moe_bench_opts;

/* Measure each model x token count; each row appended whole to out_path as
 * it is measured (harness/moe_results.h: opened last, after the routing and
 * the backend, so bad input creates nothing; a new file gets the header, an
 * existing one must load; a second writer is refused); a summary on stdout.
 * Returns 0, 1 when a candidate's output was wrong, 2 on bad input or an
 * environment error (one line on stderr). */
int mq_moe_bench(const mq_moe_model *models, int nmodels, const int *tokens, int ntokens,
                 const mq_moe_bench_opts *o, const char *out_path);

#endif
