/* msl_moe.c - the MoE block's entry points for the MSL kernels
 * (msl_program.h): a candidate's plan and a weight field, each the seed
 * block's (msl_moe_plan.c) or the lane block's (msl_moe_lane.c) by the inner
 * kernel's layout, and the candidate space of both. Above the two so that
 * neither calls back into the other (tests/check_cycles.sh). */
#include <stdlib.h>
#include <string.h>

#include "msl_program.h"

mq_status mq_msl_moe_plan_of(const mq_moe_problem *p, const mq_moe_weights *mw,
                             const mq_moe_candidate *c, const mq_limits *lim,
                             mq_msl_moe_plan *out, mq_error *err)
{
    memset(out, 0, sizeof *out);
    mq_status st = mq_moe_candidate_check(p, c, err);
    if (st)
        return st;
    if (c->inner.variant == MQ_VAR_LANE_TRELLIS)
        return mq_msl_moe_lane_plan(p, mw, c, lim, out, err);
    return mq_msl_moe_seed_plan(p, mw, c, out, err);
}

mq_status mq_msl_moe_field(const mq_moe_weights *mw, mq_msl_moe_buffer f, void *dst,
                           mq_error *err)
{
    if (f == MQ_MSL_MOE_LCODES || f == MQ_MSL_MOE_LSCALES)
        return mq_msl_moe_lane_field(mw, f, dst, err);
    mq_msl_moe_seed_field(mw, f, dst);
    return MQ_OK;
}

/* The lane block's candidates (mq_msl_moe_space) after the n there are:
 * first, the likelier (on the H100 the dense lane kernel is the table's
 * trellis pick at 10 of 11 rows); every tile with gate/up's K in 1 part,
 * then in 2, 4 and 8 while the grid with half as many parts has fewer than four
 * threadgroups per core of lim (a few tokens give gate/up a grid of a few
 * dozen tiles; a grid that fills the GPU four times over gains nothing
 * from more parts but their sums' traffic and the meeting: Qwen3 at 16
 * tokens on an H100, 3072 threadgroups, 2 parts 0.91x); every count where
 * the cores are unknown. */
static int lane_space(const mq_moe_problem *p, const mq_moe_weights *mw, const mq_limits *lim,
                      int max_rows, int i_splits, mq_moe_candidate *cs, int n, int cap)
{
    static const int splits[] = {1, 2, 4, 8}, tns[] = {64, 128, 32}, tks[] = {256, 128, 512};
    static const int parts[] = {1, 2, 4, 8};
    int lo = 8, hi = 16;
    if (max_rows > 0) {
        while (lo < 64 && lo < max_rows)
            lo *= 2;
        hi = lo;
    }
    for (int s = 0; s < (i_splits ? 4 : 1); s++)
        for (int pi = 0; pi < 4; pi++)
            for (int tm = lo; tm <= hi; tm *= 2)
                for (int t = 0; t < 3; t++)
                    for (int k = 0; k < 3; k++) {
                        mq_moe_candidate c;
                        memset(&c, 0, sizeof c);
                        c.inner.variant = MQ_VAR_LANE_TRELLIS;
                        c.inner.p = (mq_params){tm, tns[t], tks[k], 0, parts[pi]};
                        c.i_split = splits[s];
                        mq_msl_moe_plan plan;
                        if (n >= cap || mq_msl_moe_plan_of(p, mw, &c, lim, &plan, NULL))
                            continue;
                        const unsigned *g = plan.d[MQ_MSL_MOE_LANE_GATE_UP].grid;
                        double half_grid = (double)g[0] * g[1] * g[2] / 2;
                        if (parts[pi] == 1 || !lim || lim->cores <= 0 ||
                            half_grid < 4.0 * lim->cores)
                            cs[n++] = c;
                    }
    return n;
}

/* The seed block's candidates (mq_msl_moe_space) after the n there are. */
static int seed_space(const mq_moe_problem *p, const mq_moe_weights *mw, int max_rows,
                      int i_splits, mq_moe_candidate *cs, int n, int cap)
{
    static const int splits[] = {1, 2, 4, 8, 16}, tns[] = {64, 32, 128, 16};
    int lo = 1, hi = 16;
    if (max_rows > 0) { /* the one tile_m that takes an expert's rows in one pass */
        while (lo < 16 && lo < max_rows)
            lo *= 2;
        hi = lo;
    }
    for (int s = 0; s < (i_splits ? 5 : 1); s++)
        for (int tm = lo; tm <= hi; tm *= 2)
            for (int t = 0; t < 4; t++)
                for (int sgs = 8; sgs >= 1; sgs /= 2)
                    for (int fuse = 0; fuse <= 1; fuse++) {
                        int tn = tns[t], k_per_sg = 8 * (32 / (tn / 4));
                        mq_moe_candidate c;
                        memset(&c, 0, sizeof c);
                        c.inner.variant = MQ_VAR_GEMV_TRELLIS;
                        c.inner.p = (mq_params){tm, tn, k_per_sg * sgs, 0, 1};
                        c.i_split = splits[s];
                        c.fuse_gate_up = fuse;
                        mq_msl_moe_plan plan;
                        if (n < cap && mq_msl_moe_plan_of(p, mw, &c, NULL, &plan, NULL) == MQ_OK)
                            cs[n++] = c;
                    }
    return n;
}

int mq_msl_moe_space(const mq_moe_problem *p, const mq_moe_weights *mw, const mq_limits *lim,
                     int max_rows, int i_splits, mq_moe_candidate *cs, int cap)
{
    mq_moe_candidate *both = malloc(2 * (size_t)(cap > 0 ? cap : 1) * sizeof *both);
    if (!both)
        return 0;
    int nl = lane_space(p, mw, lim, max_rows, i_splits, both, 0, cap);
    int ns = seed_space(p, mw, max_rows, i_splits, both + cap, 0, cap);
    /* the blocks in turn, so that the first N of the space hold both */
    int n = 0;
    for (int i = 0; n < cap && (i < nl || i < ns); i++) {
        if (i < nl)
            cs[n++] = both[i];
        if (i < ns && n < cap)
            cs[n++] = both[cap + i];
    }
    free(both);
    return n;
}

