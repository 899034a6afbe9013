/* baselines.h - the hard-coded rules the dispatch tables must beat, as
 * functions from a problem and a chip to a candidate (each rule is spelled
 * out below and in README "tune"; the MLX rule is the split-K choice of
 * ml-explore/mlx quantized matmul):
 *  - seed: the seed kernels' own rule (2D 64x64, 128 threads; trellis
 *    decode 32x128 when M <= 16, else prefill 64x64; no split-K);
 *  - stripe: the stripe document's rule (split K when m_tiles*n_tiles <
 *    cores; num_threadgroups = 4 x cores when M*N > 1M, else
 *    min(work units, 2 x cores)); fp4 only (the striped kernel's format);
 *  - mlx: MLX's split-K rule (32x32 tiles, split_k = max(1, 512 /
 *    (m_tiles*n_tiles)) stepped down until K divides by split_k x group). */
#ifndef MQ_BASELINES_H
#define MQ_BASELINES_H

#include "chips.h"
#include "mq.h"

typedef enum { MQ_BASE_SEED, MQ_BASE_STRIPE, MQ_BASE_MLX, MQ_BASE_COUNT } mq_baseline;

const char *mq_baseline_name(mq_baseline b);
/* 0 and the candidate, or -1 when the rule does not serve this format or
 * gives nothing legal for this problem on this chip. */
int mq_baseline_candidate(mq_baseline b, const mq_problem *p, const mq_chip *chip,
                          mq_candidate *out);

#endif
