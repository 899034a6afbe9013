/* moe_plan.c - planning the MoE block (gemm_trellis_moe, seed 004 section
 * 7): whether a candidate is legal for a problem, how it is written, and
 * the default candidate. Kept apart from the block's CPU model (moe_run.c,
 * which runs on the gemm context) so that the dispatch table's lookup
 * (table.c) can check and default MoE candidates without depending on the
 * code that runs them: no file of kernels/ calls back into one that calls
 * it (tests/check_cycles.sh). */
#include <stdio.h>
#include <string.h>

#include "mq_internal.h"

/* Whole groups (and, for the tile engine, whole K tiles) per chunk. */
static int chunk_unit(const mq_moe_problem *p, const mq_moe_candidate *c)
{
    const mq_variant_info *vi = mq_variant_get(c->inner.variant);
    return vi && vi->dequant == MQ_DEQ_GEMV ? p->group : mq_max(p->group, c->inner.p.tile_k);
}

int mq_moe_chunk_len(const mq_moe_problem *p, const mq_moe_candidate *c)
{
    int unit = chunk_unit(p, c);
    return mq_cdiv(mq_cdiv(p->inter, unit), c->i_split) * unit;
}

mq_status mq_moe_candidate_check(const mq_moe_problem *p, const mq_moe_candidate *c,
                                 mq_error *err)
{
    mq_status st = mq_moe_problem_check(p, err);
    if (st)
        return st;
    if (!c)
        return mq_fail(err, MQ_E_ARG, "null MoE candidate");
    const mq_variant_info *vi = mq_variant_get(c->inner.variant);
    if (!vi || !mq_variant_serves(c->inner.variant, p->format))
        return mq_fail(err, MQ_E_ILLEGAL, "the inner kernel %s does not serve %s",
                       vi ? vi->name : "(unknown)", mq_format_name(p->format));
    /* the lane block splits gate/up's K into split_k parts (its planner
     * checks them, backends/msl_moe_lane.c); the seed block splits only the
     * intermediate dimension (i_split) */
    int lane = vi->layout == MQ_LAYOUT_LANE;
    if ((!lane && c->inner.p.split_k != 1) || c->inner.p.split_k < 1 ||
        c->inner.p.split_k > 64 || c->inner.p.num_threadgroups != 0)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "the inner kernel's split_k=%d and threadgroups=%d: threadgroups must be "
                       "0 and split_k 1 (the block splits the intermediate dimension itself: "
                       "i_split), or 1..64 for the lane block's gate/up",
                       c->inner.p.split_k, c->inner.p.num_threadgroups);
    if (c->fuse_gate_up != 0 && c->fuse_gate_up != 1)
        return mq_fail(err, MQ_E_ILLEGAL, "fuse_gate_up=%d is not 0 or 1", c->fuse_gate_up);
    if ((c->down_tile_n != 0) != (c->down_tile_k != 0))
        return mq_fail(err, MQ_E_ILLEGAL,
                       "down_tile_n=%d and down_tile_k=%d: both set (the down projection's own "
                       "tile) or neither",
                       c->down_tile_n, c->down_tile_k);
    if (c->down_tile_n) { /* legal for the decode path on the down shape (the MSL kernel's) */
        mq_candidate d = {MQ_VAR_GEMV_TRELLIS,
                          {c->inner.p.tile_m, c->down_tile_n, c->down_tile_k, 0, 1}};
        mq_problem dn = {p->format, mq_min(p->tokens, 16), p->hidden, p->inter, p->group};
        mq_limits lim = mq_limits_default();
        mq_plan plan;
        mq_error why;
        if (mq_plan_candidate(&dn, &d, &lim, &plan, &why))
            return mq_fail(err, MQ_E_ILLEGAL, "the down tile: %s", why.msg);
    }
    /* the inner kernel must be legal on both projections' shapes; the lane
     * block's is planned by the MSL plan under the target's limits
     * (backends/msl_moe_lane.c), whose threadgroup memory may exceed Apple's */
    mq_problem gu = {p->format, mq_min(p->tokens, 16), p->inter, p->hidden, p->group};
    mq_problem dn = {p->format, mq_min(p->tokens, 16), p->hidden, p->inter, p->group};
    mq_limits lim = mq_limits_default(); /* as mq_gemm plans the dense kernels */
    mq_plan plan;
    mq_error why;
    if (!lane && (mq_plan_candidate(&gu, &c->inner, &lim, &plan, &why) ||
                  mq_plan_candidate(&dn, &c->inner, &lim, &plan, &why)))
        return mq_fail(err, MQ_E_ILLEGAL, "the inner kernel: %s", why.msg);
    int unit = chunk_unit(p, c), units = mq_cdiv(p->inter, unit);
    if (c->i_split < 1 || c->i_split > units)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "i_split=%d is outside 1..%d (inter=%d in chunks of whole %d-row units)",
                       c->i_split, units, p->inter, unit);
    int len = mq_moe_chunk_len(p, c);
    if ((c->i_split - 1) * len >= p->inter)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "i_split=%d leaves an empty chunk (inter=%d in chunks of %d)",
                       c->i_split, p->inter, len);
    if (!lane && vi->dequant != MQ_DEQ_GEMV && c->i_split > 1 && len % c->inner.p.tile_n)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "tile_n=%d does not divide the intermediate chunk of %d columns",
                       c->inner.p.tile_n, len);
    return mq_ok(err);
}

int mq_moe_candidate_str(const mq_moe_candidate *c, char *buf, size_t n)
{
    char inner[128];
    mq_candidate_str(&c->inner, inner, sizeof inner);
    if (c->down_tile_n)
        return snprintf(buf, n, "gemm_trellis_moe[%s] i_split=%d fuse_gate_up=%d down=%dx%d",
                        inner, c->i_split, c->fuse_gate_up, c->down_tile_n, c->down_tile_k);
    return snprintf(buf, n, "gemm_trellis_moe[%s] i_split=%d fuse_gate_up=%d", inner,
                    c->i_split, c->fuse_gate_up);
}

mq_status mq_moe_candidate_parse(const char *s, mq_moe_candidate *c, mq_error *err)
{
    char var[64];
    int used = 0;
    memset(c, 0, sizeof *c);
    mq_params *q = &c->inner.p;
    int ok = sscanf(s, "gemm_trellis_moe[%63[^ ] tm=%d tn=%d tk=%d tg=%d sk=%d] i_split=%d "
                       "fuse_gate_up=%d%n",
                    var, &q->tile_m, &q->tile_n, &q->tile_k, &q->num_threadgroups, &q->split_k,
                    &c->i_split, &c->fuse_gate_up, &used) == 8;
    if (ok && s[used] == ' ' && !strncmp(s + used, " down=", 6)) {
        int more = 0;
        ok = sscanf(s + used, " down=%dx%d%n", &c->down_tile_n, &c->down_tile_k, &more) == 2 &&
             c->down_tile_n > 0 && c->down_tile_k > 0;
        used += more;
    }
    while (ok && (s[used] == ' ' || s[used] == '\t'))
        used++;
    if (!ok || s[used])
        return mq_fail(err, MQ_E_ARG,
                       "bad MoE candidate '%.160s' (expected 'gemm_trellis_moe[VARIANT tm=.. "
                       "tn=.. tk=.. tg=.. sk=..] i_split=.. fuse_gate_up=.. [down=TNxTK]')",
                       s);
    return mq_variant_from_name(var, &c->inner.variant, err);
}

mq_moe_candidate mq_moe_default_candidate(const mq_moe_problem *p, int threads)
{
    mq_moe_candidate c;
    memset(&c, 0, sizeof c);
    c.fuse_gate_up = 1;
    int per_expert = mq_cdiv(p->tokens * p->top_k, p->experts);
    if (per_expert <= 16) { /* decode: the streaming kernel, the chunks filling the workers */
        c.inner.variant = MQ_VAR_GEMV_TRELLIS;
        c.inner.p = (mq_params){mq_min(16, mq_max(1, p->tokens)), 64, 128, 0, 1};
    } else {
        c.inner.variant = MQ_VAR_TRELLIS_PACKED;
        c.inner.p = (mq_params){64, 64, 32, 0, 1};
    }
    c.i_split = 1;
    /* the most rows a pass may hold that the plan allows */
    while (c.inner.p.tile_m > 1 && mq_moe_candidate_check(p, &c, NULL) == MQ_E_ILLEGAL &&
           c.inner.variant == MQ_VAR_GEMV_TRELLIS)
        c.inner.p.tile_m /= 2;
    int touched = mq_min(p->experts, p->tokens * p->top_k);
    int units = mq_cdiv(p->inter, chunk_unit(p, &c));
    c.i_split = mq_max(1, mq_min(units, mq_cdiv(2 * mq_max(1, threads), touched)));
    while (c.i_split > 1 && mq_moe_candidate_check(p, &c, NULL))
        c.i_split--;
    return c;
}

