/* cuda.c - the cuda backend: the MSL kernels of metal/, from the very source
 * the Metal backend compiles (the same program layer, the same macros),
 * translated for CUDA (cuda_module.c, backends/cuda/metal_stdlib), compiled
 * at run time by NVRTC for the device's own architecture, and timed on an
 * NVIDIA GPU with CUDA events around the GEMM and its reduction. The driver
 * and NVRTC are reached through dlopen (cuda_api.c): where they are absent
 * the backend reports "unavailable: ..." and the tools fall back. Modules
 * are cached in memory per (file, macros) and on disk as cubins
 * ($MQ_CUDA_CACHE, else ~/.cache/mq-cuda) keyed by a hash of the source,
 * the options and NVRTC's version (cuda_compile.c); every weight copy the
 * harness rotates is uploaded once and stays resident (cuda_state.c). It
 * also runs the MoE block (cuda_moe.c) and carries the device probes (read
 * bandwidth, FP32 FMA peak; cuda_probe.c) the tools report GPU figures
 * against. This file opens and closes the backend and runs one candidate. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_state.h"

/* ---- running ------------------------------------------------------------------------ */

static mq_status launch(cuda_state *s, CUmodule mod, const char *function, void *bufs,
                        unsigned gx, unsigned gy, unsigned gz, unsigned threads, mq_error *err)
{
    char sym[160];
    snprintf(sym, sizeof sym, "mq_cuda_entry_%s", function);
    CUfunction fn;
    CU(s->api.ModuleGetFunction(&fn, mod, sym), sym);
    void *args[] = {bufs};
    CU(s->api.LaunchKernel(fn, gx, gy, gz, threads, 1, 1, 0, NULL, args, NULL), function);
    return MQ_OK;
}

static mq_status cuda_run(mq_backend *b, const mq_problem *p, const mq_weights *w,
                          const uint16_t *A, float *C, const mq_candidate *c,
                          const mq_plan *planned, mq_error *err)
{
    cuda_state *s = b->state;
    if (s->broken[0])
        return mq_fail(err, MQ_E_ARG, "cuda: %s", s->broken);
    mq_msl_run_plan rp;
    mq_status st = mq_msl_run_plan_of(p, c, planned, w, &rp, err);
    if (st)
        return st;
    const mq_plan *plan = rp.plan;
    CU(s->api.CtxSetCurrent(s->ctx), "cuCtxSetCurrent");
    CUmodule gemm = mq_cuda_module_for(s, rp.file, rp.defines, err);
    CUmodule red =
        gemm && plan->k_slices > 1 ? mq_cuda_module_for(s, MQ_MSL_REDUCE_FILE, "", err) : NULL;
    if (!gemm || (plan->k_slices > 1 && !red))
        return err->code;
    weight_entry *we = mq_cuda_weights_for(s, w, err);
    if (!we)
        return err->code;
    size_t MN = (size_t)p->M * p->N, a_bytes = (size_t)p->M * p->K * 2;
    mq_msl_params mp;
    mq_msl_params_of(p, plan, w, &mp);
    if ((st = mq_cuda_ensure(s, &s->a, a_bytes, err)) ||
        (st = mq_cuda_ensure(s, &s->c, MN * 2, err)) ||
        (st = mq_cuda_ensure(s, &s->ws, plan->workspace_bytes, err)) ||
        (st = mq_cuda_ensure(s, &s->params, sizeof mp, err)))
        return st;
    CU(s->api.MemcpyHtoD(s->a.p, A, a_bytes), "copying A");
    CU(s->api.MemcpyHtoD(s->params.p, &mp, sizeof mp), "copying the parameters");
    /* outputs start as NaN: an element no thread writes cannot pass */
    CU(s->api.MemsetD8(s->c.p, 0xff, MN * 2), "poisoning C");
    if (plan->workspace_bytes)
        CU(s->api.MemsetD8(s->ws.p, 0xff, plan->workspace_bytes), "poisoning the workspace");
    /* the binding of metal.c: A, weights, scales, C, params, then the
     * variant's own buffers from index 5 (rp.bind) */
    cuda_buffer_args g = {{s->a.p, 0, 0, s->c.p, s->params.p}};
    for (int i = 0; i < rp.nbind; i++)
        if (rp.bind[i] != MQ_MSL_BIND_OWN)
            g.p[i] = rp.bind[i] == MQ_MSL_BIND_WORKSPACE ? s->ws.p : we->buf[rp.bind[i]];
    cuda_buffer_args r = {{s->ws.p, s->c.p, s->params.p}};
    if (s->queued && !s->idle_now && (st = mq_cuda_spin(s, err)))
        return st;
    CU(s->api.EventRecord(s->ev0, NULL), "cuEventRecord");
    st = launch(s, gemm, rp.function, &g, (unsigned)plan->grid_x, (unsigned)plan->grid_y,
                (unsigned)plan->grid_z, (unsigned)plan->threads_per_tg, err);
    if (!st && red) /* the reduction, after the GEMM on the same stream */
        st = launch(s, red, MQ_MSL_REDUCE_FUNCTION, &r, (unsigned)((MN + 255) / 256), 1, 1, 256,
                    err);
    if (st)
        return st;
    CU(s->api.EventRecord(s->ev1, NULL), "cuEventRecord");
    CU(s->api.EventSynchronize(s->ev1), "running the kernels");
    float ms = 0;
    CU(s->api.EventElapsedTime(&ms, s->ev0, s->ev1), "cuEventElapsedTime");
    s->last_s = ms * 1e-3;
    if (s->c_host_n < MN) {
        uint16_t *h = realloc(s->c_host, MN * 2);
        if (!h)
            return mq_fail(err, MQ_E_NOMEM, "cuda: out of memory for C");
        s->c_host = h;
        s->c_host_n = MN;
    }
    CU(s->api.MemcpyDtoH(s->c_host, s->c.p, MN * 2), "copying C back");
    for (size_t i = 0; i < MN; i++)
        C[i] = mq_half_to_float(s->c_host[i]);
    return MQ_OK;
}

static double cuda_device_time(const mq_backend *b)
{
    return ((const cuda_state *)b->state)->last_s;
}

static void cuda_set_idle_timing(mq_backend *b, int idle)
{
    ((cuda_state *)b->state)->idle_now = idle;
}

static mq_status cuda_prepare(mq_backend *b, const mq_weights *w, mq_error *err)
{
    cuda_state *s = b->state;
    if (s->broken[0])
        return mq_fail(err, MQ_E_ARG, "cuda: %s", s->broken);
    CU(s->api.CtxSetCurrent(s->ctx), "cuCtxSetCurrent");
    return mq_cuda_weights_for(s, w, err) ? MQ_OK : err->code;
}

/* ---- opening and closing ------------------------------------------------------- */

static void cuda_close(mq_backend *b)
{
    cuda_state *s = b->state;
    if (s) {
        if (!s->broken[0]) {
            s->api.CtxSetCurrent(s->ctx);
            for (int i = 0; i < s->nmods; i++)
                s->api.ModuleUnload(s->mods[i].mod);
            if (s->probe_mod)
                s->api.ModuleUnload(s->probe_mod);
            for (int i = 0; i < s->nweights; i++)
                mq_cuda_free_weights(s, &s->weights[i]);
            dbuf *bs[] = {&s->a, &s->c, &s->ws, &s->params};
            for (int i = 0; i < 4; i++)
                if (bs[i]->p)
                    s->api.MemFree(bs[i]->p);
            for (int i = 0; i < MQ_MSL_MOE_NBUF; i++)
                if (s->moe[i].p)
                    s->api.MemFree(s->moe[i].p);
            if (s->ev0)
                s->api.EventDestroy(s->ev0);
            if (s->ev1)
                s->api.EventDestroy(s->ev1);
        }
        if (s->ctx)
            s->api.DevicePrimaryCtxRelease(s->dev);
        free(s->c_host);
        mq_cuda_api_unload(&s->api);
        free(s);
    }
    free(b);
}

mq_backend *mq_backend_cuda_open(const mq_backend_opts *o, mq_error *err)
{
    (void)o;
    cuda_state *s = calloc(1, sizeof *s);
    mq_backend *b = calloc(1, sizeof *b);
    char why[512];
    if (!s || !b) {
        free(s);
        free(b);
        mq_fail(err, MQ_E_NOMEM, "unavailable: out of memory");
        return NULL;
    }
    b->state = s;
    b->close = cuda_close;
    if (mq_cuda_api_load(&s->api, why, sizeof why)) {
        mq_fail(err, MQ_E_SYSTEM, "%s", why);
        free(s);
        b->state = NULL;
        cuda_close(b);
        return NULL;
    }
    const mq_cuda_api *a = &s->api;
    int count = 0, ordinal = 0;
    const char *env = getenv("MQ_CUDA_DEVICE");
    if (env && *env)
        ordinal = atoi(env);
    CUresult r = a->Init(0);
    if (!r)
        r = a->DeviceGetCount(&count);
    if (r || count == 0 || ordinal < 0 || ordinal >= count) {
        mq_fail(err, MQ_E_SYSTEM, "unavailable: %s",
                r ? mq_cuda_error(a, r)
                  : count == 0 ? "the CUDA driver sees no GPU" : "MQ_CUDA_DEVICE is not a device");
        cuda_close(b);
        return NULL;
    }
    if (!(r = a->DeviceGet(&s->dev, ordinal)) && !(r = a->DevicePrimaryCtxRetain(&s->ctx, s->dev)) &&
        !(r = a->CtxSetCurrent(s->ctx)) && !(r = a->EventCreate(&s->ev0, 0)))
        r = a->EventCreate(&s->ev1, 0);
    int l2 = 0;
    if (!r)
        r = a->DeviceGetName(b->device, (int)sizeof b->device, s->dev);
    if (!r)
        r = a->DeviceGetAttribute(&s->cc_major, MQ_CU_CC_MAJOR, s->dev);
    if (!r)
        r = a->DeviceGetAttribute(&s->cc_minor, MQ_CU_CC_MINOR, s->dev);
    if (!r)
        r = a->DeviceGetAttribute(&s->sms, MQ_CU_SM_COUNT, s->dev);
    if (!r)
        r = a->DeviceGetAttribute(&l2, MQ_CU_L2_BYTES, s->dev);
    if (r) {
        mq_fail(err, MQ_E_SYSTEM, "unavailable: %s", mq_cuda_error(a, r));
        cuda_close(b);
        return NULL;
    }
    const char *mm = getenv("MQ_CUDA_MMA");
    if (mm && *mm && strcmp(mm, "tensor") && strcmp(mm, "fp32")) {
        mq_fail(err, MQ_E_ARG, "MQ_CUDA_MMA must be tensor or fp32, not '%.40s'", mm);
        cuda_close(b);
        return NULL;
    }
    s->mma_fp32 = (mm && !strcmp(mm, "fp32")) || s->cc_major < 8;
    /* queued (default): each timed run behind a spin kernel, as a runtime's
     * back-to-back launches run (the device time alone), and a few launches
     * on an idle GPU after them for the results' idle_s (set_idle_timing);
     * idle: every timed run launched on an idle GPU, the host's launch
     * latency inside the events, and no idle_s */
    const char *tm = getenv("MQ_CUDA_TIMING");
    if (tm && *tm && strcmp(tm, "idle") && strcmp(tm, "queued")) {
        mq_fail(err, MQ_E_ARG, "MQ_CUDA_TIMING must be idle or queued, not '%.40s'", tm);
        cuda_close(b);
        return NULL;
    }
    s->queued = !(tm && !strcmp(tm, "idle"));
    snprintf(b->arch, sizeof b->arch, "sm_%d%d", s->cc_major, s->cc_minor);
    snprintf(s->arch_opt, sizeof s->arch_opt, "--gpu-architecture=sm_%d%d", s->cc_major,
             s->cc_minor);
    b->name = "cuda";
    /* the Metal kernels' arithmetic: FP16 weights, FP16 C (metal/mq_metal.h) */
    b->arith = (mq_backend_arith){.half_weights = 1, .half_output = 1};
    b->cache_bytes = (size_t)l2;
    b->prepare = cuda_prepare;
    b->run = cuda_run;
    b->device_time = cuda_device_time;
    b->set_idle_timing = s->queued ? cuda_set_idle_timing : NULL;
    b->probe = mq_cuda_probe;
    b->probe_read_at = mq_cuda_probe_read_at;
    b->run_moe = mq_cuda_run_moe;
    b->run_moe_unfused = mq_cuda_run_moe_unfused;
    s->last_s = -1;
    return b;
}
