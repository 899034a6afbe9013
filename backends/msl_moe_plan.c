/* msl_moe_plan.c - the seed-layout MoE block's plan for the MSL kernel
 * (msl_program.h, metal/gemm_trellis_moe.metal): what a candidate becomes
 * (parameters, macros, four dispatches, every buffer's size), the weight
 * fields' sizes (every block's) and the seed fields in the kernel's layout.
 * Apart from msl_program.c because the MoE block is a workload of its own
 * with its own buffers; the lane block (msl_moe_lane.c) and the unfused
 * baseline (msl_moe_unfused.c) build on it, msl_moe.c chooses between the
 * blocks. */
#include <stdio.h>
#include <string.h>

#include "msl_program.h"

/* K, N of projection j (gate, up: hidden -> inter; down: inter -> hidden) */
void mq_msl_moe_dims(const mq_moe_weights *mw, int j, int *K, int *N)
{
    *K = j == MQ_MOE_DOWN ? mw->inter : mw->hidden;
    *N = j == MQ_MOE_DOWN ? mw->hidden : mw->inter;
}

/* bytes of field f of projection j for all experts */
size_t mq_msl_moe_field_bytes(const mq_moe_weights *mw, mq_msl_moe_buffer f, int j)
{
    int K, N;
    mq_msl_moe_dims(mw, j, &K, &N);
    size_t E = (size_t)mw->experts, G = (size_t)mq_group_count(K, mw->group);
    switch (f) {
    case MQ_MSL_MOE_INDICES:
        return E * (size_t)((K + 15) / 16) * (size_t)((N + 15) / 16) *
               (size_t)mq_trellis_tile_bytes(mq_format_bits(mw->format));
    case MQ_MSL_MOE_TSCALES:
        return E * G * (size_t)N * sizeof(float);
    case MQ_MSL_MOE_SU:
        return E * (size_t)K * sizeof(float);
    case MQ_MSL_MOE_SV:
        return E * (size_t)N * sizeof(float);
    case MQ_MSL_MOE_LCODES:
    case MQ_MSL_MOE_LSCALES: {
        mq_lane_geom g;
        if (mq_lane_geometry(mw->format, K, N, mw->group, &g, NULL))
            return 0; /* (the shapes passed mq_moe_problem_check) */
        return E * (f == MQ_MSL_MOE_LCODES ? g.code_words * sizeof(uint32_t)
                                           : g.scale_count * g.scale_size);
    }
    default:
        return 16 * sizeof(float); /* the codebook, padded to 16 levels */
    }
}

#define CDIV(a, b) (((a) + (b)-1) / (b))

mq_status mq_msl_moe_seed_plan(const mq_moe_problem *p, const mq_moe_weights *mw,
                               const mq_moe_candidate *c, mq_msl_moe_plan *out, mq_error *err)
{
    memset(out, 0, sizeof *out);
    mq_status st = mq_moe_candidate_check(p, c, err);
    if (st)
        return st;
    const mq_params *q = &c->inner.p;
    if (c->inner.variant != MQ_VAR_GEMV_TRELLIS)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "the MSL kernel streams the weights (inner gemv_trellis_decode); %s is "
                       "the CPU model's",
                       mq_variant_get(c->inner.variant)->name);
    /* the decode path's planner counts the simdgroups of a tile (kernels/variants.c) */
    const mq_limits roomy = {1 << 20, 4096, 32, 0, 0};
    mq_problem gu = {p->format, q->tile_m, p->inter, p->hidden, p->group};
    mq_plan gp, dp;
    if ((st = mq_plan_candidate(&gu, &c->inner, &roomy, &gp, err)))
        return st;
    int simdgroups = gp.simdgroups;
    size_t tg = (size_t)4 * (32 + (size_t)(simdgroups + 1) * q->tile_m * q->tile_n);
    if (tg > 32768)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "tile_m=%d x tile_n=%d x %d simdgroups needs %zu bytes of threadgroup "
                       "memory (32768 at most)",
                       q->tile_m, q->tile_n, simdgroups, tg);
    /* the down kernel: its own tile, or the inner one's */
    int dtn = c->down_tile_n ? c->down_tile_n : q->tile_n;
    int dtk = c->down_tile_k ? c->down_tile_k : q->tile_k;
    mq_problem dn = {p->format, q->tile_m, p->hidden, p->inter, p->group};
    mq_candidate dc = {MQ_VAR_GEMV_TRELLIS, {q->tile_m, dtn, dtk, 0, 1}};
    if ((st = mq_plan_candidate(&dn, &dc, &roomy, &dp, err)))
        return st;
    int dsg = dp.simdgroups;
    size_t dtg = (size_t)4 * (16 + (size_t)dsg * q->tile_m * dtn);
    if (dtg > 32768)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "the down tile: tile_m=%d x tile_n=%d x %d simdgroups needs %zu bytes of "
                       "threadgroup memory (32768 at most)",
                       q->tile_m, dtn, dsg, dtg);
    size_t R = (size_t)p->tokens * p->top_k, E = (size_t)p->experts;
    unsigned threads = 32u * (unsigned)simdgroups;
    int len = mq_moe_chunk_len(p, c);
    out->mp = (mq_msl_moe_params){(uint32_t)p->tokens, (uint32_t)p->hidden, (uint32_t)p->inter,
                                  (uint32_t)p->experts, (uint32_t)p->top_k, (uint32_t)p->group,
                                  (uint32_t)mw->w[0][0].n_levels, (uint32_t)len,
                                  (uint32_t)c->i_split};
    snprintf(out->defines, sizeof out->defines,
             "TRELLIS_BITS=%d TILE_M=%d TILE_N=%d TILE_K=%d MOE_FUSE=%d", mq_format_bits(p->format),
             q->tile_m, q->tile_n, q->tile_k, c->fuse_gate_up);
    /* the grids are sized for every expert a routing could touch (the
     * touched ones are known on the device only) */
    unsigned slots = (unsigned)(R < E ? R : E);
    static const char *const fn[4] = {
        "moe_route", "gemm_trellis_moe", "gemm_trellis_moe_down", "moe_combine"};
    const unsigned grids[4][3] = {
        {1, 1, 1},
        {(unsigned)CDIV(p->inter, q->tile_n), slots, 1},
        {(unsigned)CDIV(p->hidden, dtn), slots, (unsigned)c->i_split},
        {(unsigned)CDIV(p->tokens * p->hidden, (int)threads), 1, 1}};
    out->nd = 4;
    out->nbuf = MQ_MSL_MOE_FUSED_NBUF;
    for (int k = 0; k < out->nd; k++) {
        out->d[k].file = MQ_MSL_MOE_FILE;
        out->d[k].function = fn[k];
        memcpy(out->d[k].grid, grids[k], sizeof grids[k]);
        out->d[k].threads = k == 2 ? 32u * (unsigned)dsg : threads;
        if (k == 2)
            snprintf(out->d[k].defines, sizeof out->d[k].defines,
                     "TRELLIS_BITS=%d TILE_M=%d TILE_N=%d TILE_K=%d",
                     mq_format_bits(p->format), q->tile_m, dtn, dtk);
        else
            snprintf(out->d[k].defines, sizeof out->d[k].defines, "%s", out->defines);
    }
    size_t *b = out->bytes;
    b[MQ_MSL_MOE_X] = (size_t)p->tokens * p->hidden * 2;
    b[MQ_MSL_MOE_IDS] = b[MQ_MSL_MOE_PROBS] = R * 4;
    b[MQ_MSL_MOE_PARAMS] = sizeof out->mp;
    b[MQ_MSL_MOE_ROUTE] = (2 * R + 2 * E + 2) * 4;
    for (int f = MQ_MSL_MOE_INDICES; f <= MQ_MSL_MOE_GRID; f++)
        for (int j = 0; j < MQ_MOE_PROJS; j++)
            b[f] += mq_msl_moe_field_bytes(mw, (mq_msl_moe_buffer)f, j);
    b[MQ_MSL_MOE_H] = R * (size_t)p->inter * 2;
    b[MQ_MSL_MOE_Y] = (size_t)c->i_split * R * (size_t)p->hidden * 4;
    b[MQ_MSL_MOE_OUT] = (size_t)p->tokens * p->hidden * 4;
    if (err) {
        err->code = MQ_OK;
        err->msg[0] = 0;
    }
    return MQ_OK;
}

void mq_msl_moe_seed_field(const mq_moe_weights *mw, mq_msl_moe_buffer f, void *dst)
{
    char *d = dst;
    for (int j = 0; j < MQ_MOE_PROJS; j++) {
        size_t n = mq_msl_moe_field_bytes(mw, f, j);
        const void *src = f == MQ_MSL_MOE_INDICES   ? (const void *)mw->indices[j]
                          : f == MQ_MSL_MOE_TSCALES ? (const void *)mw->tscales[j]
                          : f == MQ_MSL_MOE_SU      ? (const void *)mw->su[j]
                          : f == MQ_MSL_MOE_SV      ? (const void *)mw->sv[j]
                                                    : NULL;
        if (src) {
            memcpy(d, src, n);
        } else { /* the codebook: its levels, zero above */
            memset(d, 0, n);
            memcpy(d, mw->grid[j], (size_t)mw->w[j][0].n_levels * sizeof(float));
        }
        d += n;
    }
}
