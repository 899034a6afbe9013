/* moe_space.h - what moe-bench measures in a case: the fused kernel's
 * candidates (the CPU model's space here; the MSL kernel's comes from
 * backends/msl_program.h, with its second stage here) and the unfused
 * baseline's dense kernels, tuned per shape on a device. Apart from the
 * measuring (moe_case.h) because it only chooses what is measured. */
#ifndef MQ_MOE_SPACE_H
#define MQ_MOE_SPACE_H

#include "backend.h"
#include "mq.h"

/* The CPU model's fused space: inner kernels (the streaming path at 1..16
 * rows a pass up to the most rows an expert gets, max_rows; when an expert
 * gets more than 16, output tiles first and the streaming path at 16 rows),
 * intermediate splits, gate/up fused or not; legal ones only, in that
 * order (so --max-candidates keeps the likeliest), at most cap. The count. */
int mq_moe_fused_space(const mq_moe_problem *p, int max_rows, mq_moe_candidate *cs, int cap);

/* The second stage of the MSL kernel's search, around the best gate/up
 * tile: the down kernel's own tiles and i_split, the legal ones the first
 * stage did not measure, at most cap and max. The count. */
int mq_moe_down_stage(const mq_moe_problem *p, const mq_moe_weights *mw,
                      const mq_moe_candidate *best, mq_moe_candidate *cs, int cap, int max);

/* The unfused baseline's dense kernels on device b, tuned in this run for
 * row counts from min_rows (the fewest rows a touched expert gets) to
 * max_rows (the most), as a table for mq_table_lookup; NULL when nothing
 * could be timed (the dense rule then). Says each pick on stderr unless
 * quiet. */
mq_table *mq_moe_tune_dense(mq_backend *b, const mq_moe_problem *p, const mq_moe_weights *mw,
                            int min_rows, int max_rows, int quiet);

#endif
