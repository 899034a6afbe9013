/* cuda_moe.c - the MoE block on the cuda backend (cuda_state.h): the fused
 * block's four dispatches (route, gate/up with SwiGLU, down, combine) and
 * the unfused baseline (gather, the dense kernels per expert, SwiGLU, the
 * weighted sum), each launched in order and timed together between two
 * events; the weight fields uploaded once per weight set. Apart from cuda.c
 * because it is a workload of its own with its own buffers and plans
 * (backends/msl_moe_plan.c, backends/msl_moe_unfused.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_state.h"

/* A print of MoE weights: the pointers and a sample of each field, so a
 * weight set changed in place is uploaded again. */
static uint64_t moe_print(const mq_moe_weights *mw)
{
    uint64_t h = mq_cuda_fnv(14695981039346656037ull, mw, sizeof *mw);
    for (int j = 0; j < MQ_MOE_PROJS; j++) {
        h = mq_cuda_fnv(h, mw->indices[j], 64);
        h = mq_cuda_fnv(h, mw->tscales[j], 64);
    }
    return h;
}

/* The MoE buffers of a run: the weight fields uploaded once per weight set
 * (again when it changed in place), the inputs copied, out poisoned (an
 * element no thread writes cannot pass); the first nbuf buffers. */
static mq_status moe_setup(cuda_state *s, const mq_moe_weights *mw, const void *const in[4],
                           const size_t *bytes, int nbuf, mq_error *err)
{
    mq_status st;
    uint64_t print = moe_print(mw);
    int upload = s->moe_w != mw || s->moe_print != print;
    if (upload) /* every field on the device is another weight set's now */
        memset(s->moe_sent, 0, sizeof s->moe_sent);
    for (int i = 0; i < nbuf; i++) {
        int field = mq_msl_moe_is_field(i);
        if (field && !bytes[i]) /* a field this plan does not bind */
            continue;
        /* (a field is uploaded whole: the plans size them so) */
        if (field && !upload && s->moe_sent[i] && s->moe[i].n >= bytes[i])
            continue;
        if ((st = mq_cuda_ensure(s, &s->moe[i], bytes[i], err)))
            return st;
        if (field) {
            void *h = malloc(bytes[i]);
            if (!h)
                return mq_fail(err, MQ_E_NOMEM, "cuda: out of memory for the MoE weights");
            if ((st = mq_msl_moe_field(mw, (mq_msl_moe_buffer)i, h, err))) {
                free(h);
                return st;
            }
            CUresult r = s->api.MemcpyHtoD(s->moe[i].p, h, bytes[i]);
            free(h);
            if (r)
                return mq_cuda_fail(s, err, r, "uploading the MoE weights");
            s->moe_sent[i] = 1;
        }
    }
    s->moe_w = mw;
    s->moe_print = print;
    for (int i = 0; i < 4; i++)
        CU(s->api.MemcpyHtoD(s->moe[i].p, in[i], bytes[i]), "copying the MoE inputs");
    CU(s->api.MemsetD8(s->moe[MQ_MSL_MOE_OUT].p, 0xff, bytes[MQ_MSL_MOE_OUT]), "poisoning out");
    return MQ_OK;
}

/* Launch fns[i] with bufs[i] in order between the two events, wait, keep
 * the time, copy out back. */
static mq_status moe_launch_all(cuda_state *s, int n, const CUfunction *fns,
                                const cuda_buffer_args *bufs, const unsigned (*grid)[4],
                                float *out, size_t out_bytes, mq_error *err)
{
    CU(s->api.EventRecord(s->ev0, NULL), "cuEventRecord");
    for (int i = 0; i < n; i++) {
        void *args[] = {(void *)&bufs[i]};
        CU(s->api.LaunchKernel(fns[i], grid[i][0], grid[i][1], grid[i][2], grid[i][3], 1, 1, 0,
                               NULL, args, NULL),
           "launching an MoE kernel");
    }
    CU(s->api.EventRecord(s->ev1, NULL), "cuEventRecord");
    CU(s->api.EventSynchronize(s->ev1), "running the MoE kernels");
    float ms = 0;
    CU(s->api.EventElapsedTime(&ms, s->ev0, s->ev1), "cuEventElapsedTime");
    s->last_s = ms * 1e-3;
    CU(s->api.MemcpyDtoH(out, s->moe[MQ_MSL_MOE_OUT].p, out_bytes), "copying out back");
    return MQ_OK;
}

static mq_status function_of(cuda_state *s, const char *file, const char *defines,
                             const char *function, CUfunction *fn, mq_error *err)
{
    CUmodule mod = mq_cuda_module_for(s, file, defines, err);
    if (!mod)
        return err->code;
    char sym[160];
    snprintf(sym, sizeof sym, "mq_cuda_entry_%s", function);
    CU(s->api.ModuleGetFunction(fn, mod, sym), sym);
    return MQ_OK;
}

/* The MoE block's dispatches (the seed block's route, gate/up/SwiGLU,
 * down, combine; the lane block's with a gather), planned under lim,
 * timed together between two events. */
mq_status mq_cuda_run_moe(mq_backend *b, const mq_moe_problem *p, const mq_moe_weights *mw,
                          const uint16_t *x, const int32_t *ids, const float *probs, float *out,
                          const mq_moe_candidate *c, const mq_limits *lim, mq_error *err)
{
    cuda_state *s = b->state;
    if (s->broken[0])
        return mq_fail(err, MQ_E_ARG, "cuda: %s", s->broken);
    mq_msl_moe_plan plan;
    mq_status st = mq_moe_routing_check(p, ids, probs, err);
    if (st || (st = mq_msl_moe_plan_of(p, mw, c, lim, &plan, err)))
        return st;
    CU(s->api.CtxSetCurrent(s->ctx), "cuCtxSetCurrent");
    CUfunction fns[MQ_MSL_MOE_DISPATCHES];
    cuda_buffer_args g[MQ_MSL_MOE_DISPATCHES];
    unsigned grid[MQ_MSL_MOE_DISPATCHES][4];
    for (int k = 0; k < plan.nd; k++)
        if ((st = function_of(s, plan.d[k].file, plan.d[k].defines, plan.d[k].function, &fns[k],
                              err)))
            return st;
    const void *in[4] = {x, ids, probs, &plan.mp};
    if ((st = moe_setup(s, mw, in, plan.bytes, plan.nbuf, err)))
        return st;
    if (plan.nbuf > MQ_MSL_MOE_LPARAMS)
        CU(s->api.MemcpyHtoD(s->moe[MQ_MSL_MOE_LPARAMS].p, plan.lane, sizeof plan.lane),
           "copying the lane kernels' parameters");
    if (plan.lwork_counters) /* gate/up's tile counters start at zero */
        CU(s->api.MemsetD8(s->moe[MQ_MSL_MOE_LWORK].p, 0, plan.lwork_counters),
           "zeroing the gate/up tile counters");
    for (int k = 0; k < plan.nd; k++) {
        memset(&g[k], 0, sizeof g[k]);
        for (int i = 0; i < plan.nbuf; i++)
            g[k].p[i] = s->moe[i].p;
        memcpy(grid[k], plan.d[k].grid, sizeof plan.d[k].grid);
        grid[k][3] = plan.d[k].threads;
    }
    if ((st = moe_launch_all(s, plan.nd, fns, g, (const unsigned(*)[4])grid, out,
                             plan.bytes[MQ_MSL_MOE_OUT], err)) ||
        !plan.lwork_counters)
        return st;
    uint32_t *cnt = malloc(plan.lwork_counters);
    if (!cnt)
        return mq_fail(err, MQ_E_NOMEM, "cuda: out of memory for the tile counters");
    CUresult r = s->api.MemcpyDtoH(cnt, s->moe[MQ_MSL_MOE_LWORK].p, plan.lwork_counters);
    st = r ? mq_cuda_fail(s, err, r, "reading the gate/up tile counters back")
           : mq_msl_moe_counters_check(&plan, cnt, err);
    free(cnt);
    return st;
}

/* The unfused baseline (mq_msl_moe_unfused_plan): every module loaded and
 * the dense launches' parameters copied first, then route, gather, the
 * dense kernels per expert, SwiGLU and the weighted sum between two
 * events. */
mq_status mq_cuda_run_moe_unfused(mq_backend *b, const mq_moe_problem *p,
                                  const mq_moe_weights *mw, const uint16_t *x,
                                  const int32_t *ids, const float *probs, float *out,
                                  const mq_table *dense, mq_error *err)
{
    cuda_state *s = b->state;
    if (s->broken[0])
        return mq_fail(err, MQ_E_ARG, "cuda: %s", s->broken);
    mq_msl_moe_unfused u;
    mq_status st = mq_moe_routing_check(p, ids, probs, err);
    if (st || (st = mq_msl_moe_unfused_plan(p, mw, ids, dense, &u, err)))
        return st;
    CUfunction *fns = calloc((size_t)u.nsteps, sizeof *fns);
    cuda_buffer_args *g = calloc((size_t)u.nsteps, sizeof *g);
    unsigned(*grid)[4] = calloc((size_t)u.nsteps, sizeof *grid);
    if (!fns || !g || !grid) {
        st = mq_fail(err, MQ_E_NOMEM, "cuda: out of memory for %d launches", u.nsteps);
        goto done;
    }
    CUresult r = s->api.CtxSetCurrent(s->ctx);
    if (r) {
        st = mq_cuda_fail(s, err, r, "cuCtxSetCurrent");
        goto done;
    }
    for (int k = 0; k < u.nsteps && !st; k++)
        st = function_of(s, u.steps[k].file, u.steps[k].defines, u.steps[k].function, &fns[k],
                         err);
    const void *in[4] = {x, ids, probs, &u.base.mp};
    if (st || (st = moe_setup(s, mw, in, u.base.bytes, MQ_MSL_MOE_NBUF, err)))
        goto done;
    if ((r = s->api.MemcpyHtoD(s->moe[MQ_MSL_MOE_DPARAMS].p, u.dparams, u.dparams_bytes))) {
        st = mq_cuda_fail(s, err, r, "copying the dense launches' parameters");
        goto done;
    }
    for (int k = 0; k < u.nsteps; k++) {
        const mq_msl_moe_step *sp = &u.steps[k];
        for (int i = 0; i < (sp->dense ? sp->nbind : MQ_MSL_MOE_NBUF); i++)
            g[k].p[i] = sp->dense ? s->moe[sp->bind[i]].p + sp->off[i] : s->moe[i].p;
        memcpy(grid[k], sp->grid, sizeof sp->grid);
        grid[k][3] = sp->threads;
    }
    st = moe_launch_all(s, u.nsteps, fns, g, (const unsigned(*)[4])grid, out,
                        u.base.bytes[MQ_MSL_MOE_OUT], err);
done:
    free(fns);
    free(g);
    free(grid);
    mq_msl_moe_unfused_free(&u);
    return st;
}
