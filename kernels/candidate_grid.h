/* candidate_grid.h - the candidate grid as data, walked in one place for
 * the harness's space (harness/space.c, which keeps every entry with its
 * reason) and the lookup that chooses with the cost model (kernels/table.c):
 * every variant serving the format x tile_m {8..128} x tile_n {32..1024} x
 * tile_k {16..256} x split_k {1,2,3,4,8} (not for 2D grids) x, for striped
 * variants, one threadgroup per work unit and {1,2,4,8} x the cores. */
#ifndef MQ_CANDIDATE_GRID_H
#define MQ_CANDIDATE_GRID_H

#include "mq.h"

/* Called per candidate; pointless is NULL or why the candidate is not worth
 * timing (a tile more than twice the problem: a half-size tile of the grid
 * already covers M, N or K). A nonzero return stops the walk. */
typedef int (*mq_grid_visit)(const mq_candidate *c, const char *pointless, void *ctx);

/* Walk the grid for p on a chip of `cores` cores (seed_only: each serving
 * variant's seed configuration only). Returns the first nonzero visit, or 0. */
int mq_candidate_grid(const mq_problem *p, int cores, int seed_only, mq_grid_visit visit,
                      void *ctx);

#endif
