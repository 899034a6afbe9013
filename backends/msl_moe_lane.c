/* msl_moe_lane.c - the MoE block on the trellis lane layout
 * (metal/lane_trellis_moe.metal, msl_program.h: mq_msl_moe_plan_of with
 * inner lane_trellis): its four dispatches planned from the dense lane
 * kernel's plan of each projection, and the weights' lane fields. Apart
 * from msl_moe_plan.c (the seed-layout block) because it plans through the
 * dense programs (msl_program.c) and repacks weights (kernels/layout_lane.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msl_program.h"

/* Projection dims of the lane kernels: gate/up (hidden -> inter) and down
 * (inter -> hidden), at `tokens` rows (the most one expert can hold), down
 * split into c->i_split K slices, gate/up into the inner split_k; their
 * programs and MqParams. */
static mq_status lane_proj_plan(const mq_moe_problem *p, const mq_moe_weights *mw,
                                const mq_moe_candidate *c, const mq_limits *lim, int down,
                                mq_plan *plan, mq_msl_run_plan *rp, mq_msl_params *mp,
                                mq_error *err)
{
    int K = down ? p->inter : p->hidden, N = down ? p->hidden : p->inter;
    mq_problem dp = {p->format, p->tokens, N, K, p->group};
    mq_candidate dc = c->inner;
    dc.p.split_k = down ? c->i_split : c->inner.p.split_k;
    mq_error why;
    mq_status st = mq_plan_candidate(&dp, &dc, lim, plan, &why);
    if (!st)
        st = mq_msl_run_plan_of(&dp, &dc, plan, NULL, rp, &why);
    if (st)
        return mq_fail(err, st, "the lane block's %s: %s", down ? "down projection" : "gate/up",
                       why.msg);
    if (plan->k_slices != dc.p.split_k)
        return mq_fail(err, MQ_E_ILLEGAL, "the lane block's %s: %d K slices, not %d",
                       down ? "down projection" : "gate/up", plan->k_slices, dc.p.split_k);
    mq_msl_params_of(&dp, plan, &mw->w[down ? MQ_MOE_DOWN : MQ_MOE_GATE][0], mp);
    return MQ_OK;
}

mq_status mq_msl_moe_lane_plan(const mq_moe_problem *p, const mq_moe_weights *mw,
                               const mq_moe_candidate *c, const mq_limits *lim,
                               mq_msl_moe_plan *out, mq_error *err)
{
    const mq_limits def = mq_limits_default();
    if (!lim)
        lim = &def;
    if (c->fuse_gate_up != 0 || c->down_tile_n)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "the lane block runs gate and up as two passes with down on the inner "
                       "tile: fuse_gate_up=0 and no down tile");
    /* the route and combine come from the seed block's module */
    mq_moe_candidate sc;
    memset(&sc, 0, sizeof sc);
    sc.inner.variant = MQ_VAR_GEMV_TRELLIS;
    sc.inner.p = (mq_params){1, 64, 128, 0, 1};
    sc.i_split = sc.fuse_gate_up = 1;
    mq_status st = mq_msl_moe_seed_plan(p, mw, &sc, out, err);
    if (st)
        return st;
    mq_plan pl[2];
    mq_msl_run_plan rp[2];
    for (int d = 0; d < 2; d++)
        if ((st = lane_proj_plan(p, mw, c, lim, d, &pl[d], &rp[d], &out->lane[d], err)))
            return st;
    size_t R = (size_t)p->tokens * p->top_k, E = (size_t)p->experts;
    unsigned slots = (unsigned)(R < E ? R : E), chunks = (unsigned)pl[1].k_slices;
    out->mp.chunks = chunks;
    out->mp.i_chunk = (uint32_t)pl[1].k_slice_len;
    mq_msl_dispatch route = out->d[0], combine = out->d[3];
    mq_msl_dispatch proj[2];
    static const char *const fn[2] = {"lane_trellis_moe_gate_up", "lane_trellis_moe_down"};
    for (int d = 0; d < 2; d++) {
        memset(&proj[d], 0, sizeof proj[d]);
        proj[d].file = MQ_MSL_MOE_LANE_FILE;
        proj[d].function = fn[d];
        snprintf(proj[d].defines, sizeof proj[d].defines, "%s", rp[d].defines);
        proj[d].grid[0] = (unsigned)pl[d].n_tiles;
        proj[d].grid[1] = (unsigned)pl[d].m_tiles;
        proj[d].grid[2] = slots * (unsigned)pl[d].k_slices; /* down: chunks; gate/up: parts */
        proj[d].threads = (unsigned)pl[d].threads_per_tg;
    }
    out->d[0] = route;
    out->d[MQ_MSL_MOE_LANE_GATE_UP] = proj[0];
    out->d[MQ_MSL_MOE_LANE_DOWN] = proj[1];
    out->d[3] = combine;
    out->nd = 4;
    out->nbuf = MQ_MSL_MOE_NBUF;
    /* gate/up reads its tokens' rows of x through the route list (no
     * gathered copy); down's A rows past an expert's own are read up to
     * `tokens` past its first: h gets that many more (never stored) */
    size_t *b = out->bytes;
    b[MQ_MSL_MOE_XG] = 16; /* (not read) */
    b[MQ_MSL_MOE_H] = (R + (size_t)p->tokens) * (size_t)p->inter * 2;
    b[MQ_MSL_MOE_Y] = (size_t)chunks * R * (size_t)p->hidden * 4;
    b[MQ_MSL_MOE_GU] = b[MQ_MSL_MOE_YH] = b[MQ_MSL_MOE_DPARAMS] = 16; /* (not read) */
    for (int f = MQ_MSL_MOE_LCODES; f <= MQ_MSL_MOE_LSCALES; f++)
        for (int j = 0; j < MQ_MOE_PROJS; j++)
            b[f] += mq_msl_moe_field_bytes(mw, (mq_msl_moe_buffer)f, j);
    b[MQ_MSL_MOE_LPARAMS] = sizeof out->lane;
    /* gate/up's parts of K meet in the kernel: a counter per output tile,
     * then each part's FP32 sums of gate and up (lane_trellis_moe.metal's
     * MoeGuWork) */
    out->lwork_counters = 0;
    b[MQ_MSL_MOE_LWORK] = 16; /* (not read) */
    if (pl[0].k_slices > 1) {
        size_t tiles = (size_t)pl[0].n_tiles * (size_t)pl[0].m_tiles * slots;
        out->lwork_counters = tiles * 4;
        b[MQ_MSL_MOE_LWORK] = (tiles + 3) / 4 * 16 +
                              (size_t)pl[0].k_slices * 2 * R * (size_t)p->inter * 4;
    }
    return MQ_OK; /* (err holds the seed plan's clear state) */
}

/* Each expert's lane arrays of field f come from mq_weights_prepare_lane_part
 * on a view whose lane array of that part points into dst (the other part
 * is not filled: each field is one array, repacked once). */
mq_status mq_msl_moe_lane_field(const mq_moe_weights *mw, mq_msl_moe_buffer f, void *dst,
                                mq_error *err)
{
    char *d = dst;
    int codes = f == MQ_MSL_MOE_LCODES;
    for (int j = 0; j < MQ_MOE_PROJS; j++) {
        const mq_weights *w0 = &mw->w[j][0];
        mq_lane_geom g;
        mq_status st = mq_lane_geometry(w0->format, w0->K, w0->N, w0->group, &g, err);
        if (st)
            return st;
        size_t per = codes ? g.code_words * sizeof(uint32_t) : g.scale_count * g.scale_size;
        for (int e = 0; e < mw->experts; e++, d += per) {
            mq_weights v = mw->w[j][e]; /* a view: its lane array is dst's */
            v.lane_codes = codes ? (uint32_t *)(void *)d : NULL;
            v.lane_scales = codes ? NULL : (void *)d;
            v.lane_zeros = NULL;
            if ((st = mq_weights_prepare_lane_part(&v, codes ? MQ_LANE_CODES : MQ_LANE_SCALES,
                                                   err)))
                return st;
        }
    }
    return MQ_OK;
}

mq_status mq_msl_moe_counters_check(const mq_msl_moe_plan *plan, const uint32_t *counters,
                                    mq_error *err)
{
    for (size_t i = 0; i < plan->lwork_counters / 4; i++)
        if (counters[i])
            return mq_fail(err, MQ_E_WRONG,
                           "the lane block's gate/up left tile counter %zu at %u (its parts' last "
                           "must set it back to 0)",
                           i, counters[i]);
    return MQ_OK;
}
