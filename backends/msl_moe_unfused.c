/* msl_moe_unfused.c - the unfused baseline of the MoE block for one
 * routing (msl_program.h: mq_msl_moe_unfused_plan): route, gather, per
 * touched expert the dense kernel of gate, up and down bound to its slices
 * of the MoE buffers, SwiGLU, the weighted sum. Apart from the fused plan
 * (msl_moe_plan.c), which it builds on, because it plans the dense GEMM
 * kernels (msl_program.c) per expert and allocates its steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msl_program.h"

/* The dense candidate of the unfused baseline for n rows of one expert (the
 * CPU model's dense rule: the decode kernel up to 16 rows, the prefill
 * kernel's default tile above). */
static mq_candidate unfused_dense(int n)
{
    mq_candidate c;
    memset(&c, 0, sizeof c);
    if (n <= 16) {
        int tm = 1;
        while (tm < n)
            tm *= 2;
        c.variant = MQ_VAR_GEMV_TRELLIS;
        c.p = (mq_params){tm, 64, 128, 0, 1};
    } else {
        c.variant = MQ_VAR_TRELLIS_PACKED;
        c.p = (mq_params){64, 64, 32, 0, 1};
    }
    return c;
}

static mq_msl_moe_step glue_step(const mq_msl_moe_plan *b, const char *fn, size_t threads_total)
{
    mq_msl_moe_step st;
    memset(&st, 0, sizeof st);
    st.file = MQ_MSL_MOE_FILE;
    st.function = fn;
    snprintf(st.defines, sizeof st.defines, "%s", b->defines);
    st.threads = b->d[0].threads;
    st.grid[0] = (unsigned)((threads_total + st.threads - 1) / st.threads);
    st.grid[1] = st.grid[2] = 1;
    return st;
}

/* Step s: the dense kernel rp for projection j of expert e, whose rows
 * start at row0 of its input (gate, up: the gathered rows XG; down: H). C
 * goes to those rows of GU (up after the gate plane's up_off bytes) or YH,
 * the weights are expert e's slices of the MoE fields (base and stride per
 * field, of projection j), the parameters slot nd of DPARAMS. */
static void dense_step(mq_msl_moe_step *s, const mq_msl_run_plan *rp, int j, size_t e,
                       size_t row0, int K, int N, size_t up_off, int nd,
                       const size_t fbase[MQ_MSL_MOE_NBUF], const size_t fstride[MQ_MSL_MOE_NBUF])
{
    s->file = rp->file;
    s->function = rp->function;
    snprintf(s->defines, sizeof s->defines, "%s", rp->defines);
    s->grid[0] = (unsigned)rp->plan->grid_x;
    s->grid[1] = (unsigned)rp->plan->grid_y;
    s->grid[2] = (unsigned)rp->plan->grid_z;
    s->threads = (unsigned)rp->plan->threads_per_tg;
    s->dense = 1;
    /* A, codes, scales, C, params */
    s->bind[0] = j == MQ_MOE_DOWN ? MQ_MSL_MOE_H : MQ_MSL_MOE_XG;
    s->off[0] = row0 * (size_t)K * 2;
    s->bind[1] = MQ_MSL_MOE_INDICES;
    s->off[1] = fbase[MQ_MSL_MOE_INDICES] + e * fstride[MQ_MSL_MOE_INDICES];
    s->bind[2] = MQ_MSL_MOE_TSCALES;
    s->off[2] = fbase[MQ_MSL_MOE_TSCALES] + e * fstride[MQ_MSL_MOE_TSCALES];
    s->bind[3] = j == MQ_MOE_DOWN ? MQ_MSL_MOE_YH : MQ_MSL_MOE_GU;
    s->off[3] = (j == MQ_MOE_UP ? up_off : 0) + row0 * (size_t)N * 2;
    s->bind[4] = MQ_MSL_MOE_DPARAMS;
    s->off[4] = (size_t)nd * MQ_MSL_MOE_DPARAMS_STRIDE;
    s->nbind = 5;
    for (int i = 0; rp->prog.extra[i] != MQ_BUF_END && s->nbind < 8; i++) {
        mq_buffer_kind k = rp->prog.extra[i];
        int f = k == MQ_BUF_GRID ? MQ_MSL_MOE_GRID : k == MQ_BUF_SU ? MQ_MSL_MOE_SU : MQ_MSL_MOE_SV;
        s->bind[s->nbind] = f;
        s->off[s->nbind++] =
            f == MQ_MSL_MOE_GRID ? (size_t)j * 16 * sizeof(float) : fbase[f] + e * fstride[f];
    }
}

mq_status mq_msl_moe_unfused_plan(const mq_moe_problem *p, const mq_moe_weights *mw,
                                  const int32_t *expert_ids, const mq_table *dense,
                                  mq_msl_moe_unfused *out, mq_error *err)
{
    memset(out, 0, sizeof *out);
    mq_moe_candidate fc;
    memset(&fc, 0, sizeof fc);
    fc.inner.variant = MQ_VAR_GEMV_TRELLIS;
    fc.inner.p = (mq_params){1, 64, 128, 0, 1}; /* the glue's module: 256 threads */
    fc.i_split = fc.fuse_gate_up = 1;
    mq_status st = mq_msl_moe_plan_of(p, mw, &fc, NULL, &out->base, err);
    if (st)
        return st;
    size_t R = (size_t)p->tokens * p->top_k, E = (size_t)p->experts;
    for (size_t i = 0; i < R; i++) /* the ids index the counts (mq_moe_routing_check: all) */
        if (expert_ids[i] < 0 || expert_ids[i] >= p->experts)
            return mq_fail(err, MQ_E_ARG, "token %zu slot %zu: expert %d is not in 0..%d",
                           i / (size_t)p->top_k, i % (size_t)p->top_k, (int)expert_ids[i],
                           p->experts - 1);
    size_t H = (size_t)p->hidden, I = (size_t)p->inter;
    int *offs = calloc(E + 1, sizeof *offs);
    out->steps = calloc(3 * E + 5, sizeof *out->steps);
    out->dparams = calloc(3 * E, MQ_MSL_MOE_DPARAMS_STRIDE);
    if (!offs || !out->steps || !out->dparams) {
        free(offs);
        mq_msl_moe_unfused_free(out);
        return mq_fail(err, MQ_E_NOMEM, "out of memory for the unfused plan of %d experts",
                       p->experts);
    }
    for (size_t i = 0; i < R; i++)
        offs[expert_ids[i] + 1]++;
    for (size_t e = 0; e < E; e++)
        offs[e + 1] += offs[e];
    const mq_msl_moe_plan *b = &out->base;
    out->steps[out->nsteps++] = (mq_msl_moe_step){.file = MQ_MSL_MOE_FILE, .function = "moe_route",
                                                  .grid = {1, 1, 1}, .threads = b->d[0].threads};
    snprintf(out->steps[0].defines, sizeof out->steps[0].defines, "%s", b->defines);
    out->steps[out->nsteps++] = glue_step(b, "moe_gather", R * H / 8);
    /* per projection, the per-expert stride of each weight field */
    size_t fstride[MQ_MOE_PROJS][MQ_MSL_MOE_NBUF], fbase[MQ_MOE_PROJS][MQ_MSL_MOE_NBUF];
    for (int f = MQ_MSL_MOE_INDICES; f <= MQ_MSL_MOE_SV; f++) {
        size_t at = 0;
        for (int j = 0; j < MQ_MOE_PROJS; j++) {
            size_t n = mq_msl_moe_field_bytes(mw, (mq_msl_moe_buffer)f, j);
            fbase[j][f] = at;
            fstride[j][f] = n / E;
            at += n;
        }
    }
    const mq_limits lim = mq_limits_default();
    int nd = 0;
    for (int j = 0; j < MQ_MOE_PROJS && !st; j++) {
        if (j == MQ_MOE_DOWN) /* after gate and up of every expert */
            out->steps[out->nsteps++] = glue_step(b, "moe_swiglu", R * I);
        for (size_t e = 0; e < E && !st; e++) {
            int n = offs[e + 1] - offs[e];
            if (!n)
                continue;
            int K, N;
            mq_msl_moe_dims(mw, j, &K, &N);
            mq_problem dp = {p->format, n, N, K, p->group};
            mq_candidate dc = dense ? mq_table_lookup(dense, &dp, &lim, NULL) : unfused_dense(n);
            mq_msl_run_plan rp;
            mq_plan plan;
            /* the decode kernel's K step halved until its partials fit */
            while ((st = mq_plan_candidate(&dp, &dc, &lim, &plan, err)) == MQ_E_ILLEGAL &&
                   dc.variant == MQ_VAR_GEMV_TRELLIS && dc.p.tile_k > 32)
                dc.p.tile_k /= 2;
            if (!st)
                st = mq_msl_run_plan_of(&dp, &dc, &plan, NULL, &rp, err);
            if (st)
                break;
            if (rp.plan->k_slices > 1 || rp.plan->workspace_bytes) {
                st = mq_fail(err, MQ_E_ILLEGAL, "the unfused baseline's dense kernel splits K");
                break;
            }
            dense_step(&out->steps[out->nsteps++], &rp, j, e, (size_t)offs[e], K, N, R * I * 2, nd,
                       fbase[j], fstride[j]);
            mq_msl_params_of(&dp, rp.plan, &mw->w[j][e],
                             (mq_msl_params *)((char *)out->dparams +
                                               (size_t)nd * MQ_MSL_MOE_DPARAMS_STRIDE));
            nd++;
        }
    }
    free(offs);
    if (st) {
        mq_msl_moe_unfused_free(out);
        return st;
    }
    out->steps[out->nsteps++] = glue_step(b, "moe_weighted_sum", (size_t)p->tokens * H);
    out->dparams_bytes = (size_t)(nd ? nd : 1) * MQ_MSL_MOE_DPARAMS_STRIDE;
    size_t *by = out->base.bytes;
    by[MQ_MSL_MOE_XG] = R * H * 2;
    by[MQ_MSL_MOE_GU] = 2 * R * I * 2;
    by[MQ_MSL_MOE_YH] = R * H * 2;
    by[MQ_MSL_MOE_DPARAMS] = out->dparams_bytes;
    return MQ_OK;
}

void mq_msl_moe_unfused_free(mq_msl_moe_unfused *u)
{
    free(u->steps);
    free(u->dparams);
    u->steps = NULL;
    u->dparams = NULL;
    u->nsteps = 0;
}
