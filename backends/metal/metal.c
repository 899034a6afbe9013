/* metal.c - the Metal backend: the MSL kernels of metal/ on an Apple GPU.
 * It talks to Metal through the Objective-C runtime loaded at run time
 * (dlopen of libobjc, Foundation and Metal; objc_msgSend cast to each
 * method's exact C type), so it needs no Objective-C compiler and builds
 * everywhere; where Metal is absent it reports "unavailable: ..." and the
 * tools fall back to the CPU model. What to compile for a candidate comes
 * from backends/msl_program.c; this file compiles (with the tuned macros as
 * preprocessorMacros), caches pipelines and weight buffers, binds,
 * dispatches (GEMM and reduction in one command buffer) and reads the GPU
 * timestamps. Compiled with fast math off and a fixed language version
 * (the kernels are verified exactly so); limits are the device's own
 * (threadgroup memory, each pipeline's maximum threads and SIMD width);
 * weight buffers stay under half the device's recommended working set.
 * Its every message is checked in `make test` by the stand-in runtime
 * (tests/objc_standin/); nothing of it has run on Apple hardware from this
 * repository yet (see README "Metal"). */
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "msl_program.h"
#include "objc_rt.h"


#define MAX_PIPELINES 64
/* Every weight copy the harness rotates stays resident (it rotates up to
 * 4096, past twice the host's last-level cache): re-uploading inside the
 * timed rotation would cost wall time, and data the CPU just wrote may sit
 * in the system-level cache the GPU shares. Older problems' sets leave
 * first: by count, and by bytes past half the device's recommended working
 * set (unified memory: every resident copy is memory the host also needs). */
#define MAX_WEIGHTS 4352
/* The cold weights rotate past twice this: the largest system-level cache
 * published for an Apple GPU (M1 Ultra, 96 MiB: harness/chips.csv, from
 * philipturner/metal-benchmarks); macOS reports no SLC size, and the host's
 * L2 would be far too small. */
#define APPLE_SLC_BYTES ((size_t)96 << 20)
#define REDUCE_THREADS 256 /* marlin_splitk_reduce's threadgroup (msl_cpu.c launches the same) */

typedef struct {
    char key[320];
    id pipeline;
    NSUInteger max_threads;  /* maxTotalThreadsPerThreadgroup */
    NSUInteger simd_width;   /* threadExecutionWidth */
    NSUInteger static_tg_mem; /* staticThreadgroupMemoryLength */
} pipeline_entry;

typedef struct {
    const mq_weights *w; /* identity of the CPU-side copy ... */
    uint64_t print;      /* ... and of its contents (memory is reused across problems) */
    size_t bytes;        /* of its device buffers */
    id buf[MQ_MSL_W_COUNT]; /* by mq_msl_weight_slot (backends/msl_program.h) */
} weight_entry;

typedef struct {
    objc_rt rt;
    id device, queue;
    NSUInteger max_tg_mem;       /* maxThreadgroupMemoryLength */
    size_t weight_cap;           /* bytes of resident weights at most */
    pipeline_entry pipes[MAX_PIPELINES];
    int npipes;
    weight_entry weights[MAX_WEIGHTS]; /* a ring: oldest at first_weight */
    int nweights, first_weight;
    size_t weight_bytes;
    id a_buf, c_buf, ws_buf;
    size_t a_bytes, c_bytes, ws_bytes;
    double last_gpu_s; /* GPU end - start of the last command buffer, or -1 */
} metal_state;

/* A shared-storage buffer of at least `bytes`, reused while big enough. */
static int ensure_buffer(metal_state *s, id *buf, size_t *have, size_t bytes)
{
    if (*buf && *have >= bytes)
        return 0;
    mq_objc_release(&s->rt, *buf);
    *buf = MSG(&s->rt, id, NSUInteger, NSUInteger)(s->device,
                                                  s->rt.sel("newBufferWithLength:options:"),
                                                  bytes ? bytes : 16, 0 /* shared */);
    *have = *buf ? bytes : 0;
    return *buf ? 0 : -1;
}

static id buffer_with(metal_state *s, const void *bytes, size_t n)
{
    if (!bytes)
        return NULL;
    return MSG(&s->rt, id, const void *, NSUInteger, NSUInteger)(
        s->device, s->rt.sel("newBufferWithBytes:length:options:"), bytes, n, 0);
}

static void weight_evict_oldest(metal_state *s)
{
    weight_entry *e = &s->weights[s->first_weight];
    for (int j = 0; j < MQ_MSL_W_COUNT; j++)
        mq_objc_release(&s->rt, e->buf[j]);
    s->weight_bytes -= e->bytes;
    memset(e, 0, sizeof *e);
    s->first_weight = (s->first_weight + 1) % MAX_WEIGHTS;
    s->nweights--;
}

/* The device buffers of a weight set, uploaded once per CPU-side copy
 * (prepare uploads every copy of a problem before its first timed run);
 * the oldest sets leave while the count or the bytes would pass the caps. */
static weight_entry *weights_for(metal_state *s, const mq_weights *w, mq_error *err)
{
    uint64_t print = mq_msl_weights_print(w);
    for (int k = 0; k < s->nweights; k++) {
        weight_entry *e = &s->weights[(s->first_weight + k) % MAX_WEIGHTS];
        if (e->w == w && e->print == print)
            return e;
    }
    const void *ptr[MQ_MSL_W_COUNT];
    size_t bytes[MQ_MSL_W_COUNT], total = 0;
    mq_msl_weight_arrays(w, ptr, bytes);
    for (int i = 0; i < MQ_MSL_W_COUNT; i++)
        total += ptr[i] ? bytes[i] : 0;
    while (s->nweights > 0 &&
           (s->nweights == MAX_WEIGHTS || s->weight_bytes + total > s->weight_cap))
        weight_evict_oldest(s);
    weight_entry *e = &s->weights[(s->first_weight + s->nweights) % MAX_WEIGHTS];
    memset(e, 0, sizeof *e);
    for (int i = 0; i < MQ_MSL_W_COUNT; i++)
        e->buf[i] = buffer_with(s, ptr[i], bytes[i]);
    if (!e->buf[MQ_MSL_W_CODES] || !e->buf[MQ_MSL_W_SCALES]) {
        for (int j = 0; j < MQ_MSL_W_COUNT; j++)
            mq_objc_release(&s->rt, e->buf[j]);
        memset(e, 0, sizeof *e);
        mq_fail(err, MQ_E_NOMEM, "metal: cannot allocate the weight buffers (%zu bytes)", total);
        return NULL;
    }
    e->w = w;
    e->print = print;
    e->bytes = total;
    s->weight_bytes += total;
    s->nweights++;
    return e;
}

/* A compiled pipeline for (file, function, defines), cached. */
/* Room for the n pipelines one run looks up, made before the first lookup:
 * a long sweep starts the cache over here, never between two lookups (the
 * second would release the pipeline the first returned). */
static void reserve_pipelines(metal_state *s, int n)
{
    if (s->npipes + n <= MAX_PIPELINES)
        return;
    for (int i = 0; i < s->npipes; i++)
        mq_objc_release(&s->rt, s->pipes[i].pipeline);
    s->npipes = 0;
}

/* The line of a compiler log a user needs: the first with "error:", else
 * the first line (the log itself can run to pages). */
static void first_error_line(const char *log, char *out, size_t n)
{
    const char *e = strstr(log, "error:");
    const char *start = log;
    if (e) {
        while (e > log && e[-1] != '\n')
            e--;
        start = e;
    }
    size_t len = strcspn(start, "\n");
    snprintf(out, n, "%.*s", (int)len, start);
}

/* MTLCompileOptions: the tuned macros as preprocessorMacros, fast math off
 * (it lets the compiler reassociate, and the kernels' magic-bias decodes and
 * every verified result assume it does not; MLX compiles the same way), MSL
 * 3.0. +1 (owned). */
static id compile_options(const objc_rt *rt, const char *defines)
{
    id keys[12], vals[12];
    int nm = 0;
    char name[32];
    int value, used = 0;
    const char *d = defines;
    while (nm < 12 && sscanf(d, " %31[^=]=%d%n", name, &value, &used) == 2) {
        keys[nm] = mq_objc_nsstring(rt, name);
        vals[nm] = MSG(rt, id, int)(rt->get_class("NSNumber"), rt->sel("numberWithInt:"), value);
        nm++;
        d += used;
    }
    id dict = MSG(rt, id, const id *, const id *, NSUInteger)(
        rt->get_class("NSDictionary"), rt->sel("dictionaryWithObjects:forKeys:count:"), vals, keys,
        (NSUInteger)nm);
    id opts = mq_objc_send0(rt, mq_objc_send0(rt, rt->get_class("MTLCompileOptions"), "alloc"), "init");
    MSG(rt, void, id)(opts, rt->sel("setPreprocessorMacros:"), dict);
    if (mq_objc_responds(rt, opts, "setMathMode:")) /* macOS 15: fastMathEnabled's successor */
        MSG(rt, void, long)(opts, rt->sel("setMathMode:"), MQ_MTL_MATH_MODE_SAFE); /* an NSInteger enum */
    else
        MSG(rt, void, BOOL)(opts, rt->sel("setFastMathEnabled:"), 0);
    MSG(rt, void, NSUInteger)(opts, rt->sel("setLanguageVersion:"), MQ_MTL_LANGUAGE_3_0);
    return opts;
}

/* A compiled pipeline for (file, function, defines), cached. */
static pipeline_entry *pipeline_for(metal_state *s, const char *file, const char *function,
                                    const char *defines, mq_error *err)
{
    char key[320];
    snprintf(key, sizeof key, "%s %s", function, defines);
    for (int i = 0; i < s->npipes; i++)
        if (!strcmp(s->pipes[i].key, key))
            return &s->pipes[i];
    if (s->npipes == MAX_PIPELINES) { /* reserve_pipelines makes room first */
        mq_fail(err, MQ_E_ARG, "metal: the pipeline cache is full");
        return NULL;
    }
    const objc_rt *rt = &s->rt;
    char msg[512];
    char *src = mq_metal_source(file, msg, sizeof msg);
    if (!src) {
        mq_fail(err, MQ_E_ARG, "metal: %s", msg);
        return NULL;
    }
    id opts = compile_options(rt, defines);
    id error = NULL;
    id lib = MSG(rt, id, id, id, id *)(s->device, rt->sel("newLibraryWithSource:options:error:"),
                                       mq_objc_nsstring(rt, src), opts, &error);
    free(src);
    mq_objc_release(rt, opts);
    if (!lib) {
        first_error_line(mq_objc_error_text(rt, error), msg, sizeof msg);
        mq_fail(err, MQ_E_ARG, "metal: %s does not compile: %s (%s)", file, msg, defines);
        return NULL;
    }
    id fn = MSG(rt, id, id)(lib, rt->sel("newFunctionWithName:"), mq_objc_nsstring(rt, function));
    error = NULL;
    id pso = fn ? MSG(rt, id, id, id *)(s->device,
                                        rt->sel("newComputePipelineStateWithFunction:error:"), fn,
                                        &error)
                : NULL;
    mq_objc_release(rt, fn);
    mq_objc_release(rt, lib);
    if (!pso) {
        first_error_line(fn ? mq_objc_error_text(rt, error) : "no such function", msg, sizeof msg);
        mq_fail(err, MQ_E_ARG, "metal: no pipeline for %s: %s", function, msg);
        return NULL;
    }
    pipeline_entry *e = &s->pipes[s->npipes++];
    snprintf(e->key, sizeof e->key, "%s", key);
    e->pipeline = pso;
    e->max_threads = MSG0(rt, NSUInteger)(pso, rt->sel("maxTotalThreadsPerThreadgroup"));
    e->simd_width = MSG0(rt, NSUInteger)(pso, rt->sel("threadExecutionWidth"));
    e->static_tg_mem = MSG0(rt, NSUInteger)(pso, rt->sel("staticThreadgroupMemoryLength"));
    return e;
}

/* Can this pipeline run `threads` threads per threadgroup of the kernels'
 * SIMD width within the device's threadgroup memory? MQ_E_ILLEGAL and the
 * limit that says no (the device's, not the chips file's). */
/* the SIMD width the MSL kernels are written for (simd_shuffle and the
 * simdgroup matrices of metal/mq_metal.h assume 32 lanes) */
#define KERNEL_SIMD_WIDTH 32

static mq_status pipeline_fits(const metal_state *s, const pipeline_entry *pe, const char *what,
                               int threads, int simd_width, mq_error *err)
{
    if ((NSUInteger)threads > pe->max_threads)
        return mq_fail(err, MQ_E_ILLEGAL, "metal: %s: %d threads per threadgroup exceed the "
                                          "pipeline's maximum %lu",
                       what, threads, (unsigned long)pe->max_threads);
    if (pe->simd_width != (NSUInteger)simd_width)
        return mq_fail(err, MQ_E_ILLEGAL, "metal: %s: the pipeline's SIMD width is %lu, the "
                                          "kernels are written for %d",
                       what, (unsigned long)pe->simd_width, simd_width);
    if (pe->static_tg_mem > s->max_tg_mem)
        return mq_fail(err, MQ_E_ILLEGAL, "metal: %s: %lu bytes of threadgroup memory, the "
                                          "device has %lu",
                       what, (unsigned long)pe->static_tg_mem, (unsigned long)s->max_tg_mem);
    return MQ_OK;
}

static void encode(const objc_rt *rt, id enc, id pso, MTLSize grid, MTLSize threads)
{
    MSG(rt, void, id)(enc, rt->sel("setComputePipelineState:"), pso);
    MSG(rt, void, MTLSize, MTLSize)(enc, rt->sel("dispatchThreadgroups:threadsPerThreadgroup:"),
                                    grid, threads);
}

static void set_buffer(const objc_rt *rt, id enc, id buf, NSUInteger index)
{
    MSG(rt, void, id, NSUInteger, NSUInteger)(enc, rt->sel("setBuffer:offset:atIndex:"), buf, 0,
                                              index);
}

/* One command buffer: the GEMM, then the reduction when K is split (the
 * command buffer orders them), committed and waited for; C read back and the
 * GPU time kept only when it completed. */
static mq_status run_command_buffer(metal_state *s, const mq_problem *p, const mq_msl_run_plan *rp,
                                    const pipeline_entry *pe, const pipeline_entry *re,
                                    const weight_entry *we, const mq_weights *w, float *C,
                                    mq_error *err)
{
    const objc_rt *rt = &s->rt;
    const mq_plan *plan = rp->plan;
    size_t MN = (size_t)p->M * p->N;
    mq_msl_params mp;
    mq_msl_params_of(p, plan, w, &mp);
    id cb = mq_objc_send0(rt, s->queue, "commandBuffer");
    id enc = cb ? mq_objc_send0(rt, cb, "computeCommandEncoder") : NULL;
    if (!enc)
        return mq_fail(err, MQ_E_SYSTEM, "metal: the queue gave no command buffer or encoder");
    set_buffer(rt, enc, s->a_buf, 0);
    set_buffer(rt, enc, s->c_buf, 3);
    MSG(rt, void, const void *, NSUInteger, NSUInteger)(enc, rt->sel("setBytes:length:atIndex:"),
                                                        &mp, sizeof mp, 4);
    for (int i = 0; i < rp->nbind; i++) /* the weights and the variant's own buffers */
        if (rp->bind[i] != MQ_MSL_BIND_OWN)
            set_buffer(rt, enc, rp->bind[i] == MQ_MSL_BIND_WORKSPACE ? s->ws_buf : we->buf[rp->bind[i]],
                       (NSUInteger)i);
    encode(rt, enc, pe->pipeline,
           (MTLSize){(NSUInteger)plan->grid_x, (NSUInteger)plan->grid_y, (NSUInteger)plan->grid_z},
           (MTLSize){(NSUInteger)plan->threads_per_tg, 1, 1});
    if (re) {
        set_buffer(rt, enc, s->ws_buf, 0);
        set_buffer(rt, enc, s->c_buf, 1);
        MSG(rt, void, const void *, NSUInteger, NSUInteger)(
            enc, rt->sel("setBytes:length:atIndex:"), &mp, sizeof mp, 2);
        encode(rt, enc, re->pipeline,
               (MTLSize){(NSUInteger)((MN + REDUCE_THREADS - 1) / REDUCE_THREADS), 1, 1},
               (MTLSize){REDUCE_THREADS, 1, 1});
    }
    MSG0(rt, void)(enc, rt->sel("endEncoding"));
    MSG0(rt, void)(cb, rt->sel("commit"));
    MSG0(rt, void)(cb, rt->sel("waitUntilCompleted"));
    NSUInteger status = MSG0(rt, NSUInteger)(cb, rt->sel("status"));
    if (status != MQ_MTL_STATUS_COMPLETED) {
        char line[200];
        first_error_line(mq_objc_error_text(rt, mq_objc_send0(rt, cb, "error")), line, sizeof line);
        return mq_fail(err, MQ_E_SYSTEM, "metal: the command buffer failed (status %lu): %s",
                       (unsigned long)status, line);
    }
    s->last_gpu_s = MSG0(rt, double)(cb, rt->sel("GPUEndTime")) -
                    MSG0(rt, double)(cb, rt->sel("GPUStartTime"));
    const uint16_t *out = MSG0(rt, const uint16_t *)(s->c_buf, rt->sel("contents"));
    for (size_t i = 0; i < MN; i++)
        C[i] = mq_half_to_float(out[i]);
    return MQ_OK;
}

static mq_status metal_run(mq_backend *b, const mq_problem *p, const mq_weights *w,
                           const uint16_t *A, float *C, const mq_candidate *c,
                           const mq_plan *planned, mq_error *err)
{
    metal_state *s = b->state;
    const objc_rt *rt = &s->rt;
    s->last_gpu_s = -1; /* a run that fails has no time: never the last one's */
    /* the target planned under the device's threadgroup memory where it is
     * less than the chip row's (b->tg_mem_bytes); a plan made elsewhere is
     * checked against it still */
    if (s->max_tg_mem && (NSUInteger)planned->tg_mem_bytes > s->max_tg_mem)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "metal: %d bytes of threadgroup memory planned, the device has %lu",
                       planned->tg_mem_bytes, (unsigned long)s->max_tg_mem);
    mq_msl_run_plan rp;
    mq_status st = mq_msl_run_plan_of(p, c, planned, w, &rp, err);
    if (st)
        return st;
    const mq_plan *plan = rp.plan;
    void *pool = rt->pool_push();
    reserve_pipelines(s, 2); /* the GEMM and the reduction */
    pipeline_entry *pe = pipeline_for(s, rp.file, rp.function, rp.defines, err);
    pipeline_entry *re = pe && plan->k_slices > 1 ? pipeline_for(s, MQ_MSL_REDUCE_FILE,
                                                                MQ_MSL_REDUCE_FUNCTION, "", err)
                                                 : NULL;
    size_t MN = (size_t)p->M * p->N;
    if (!pe || (plan->k_slices > 1 && !re))
        st = err->code ? err->code : MQ_E_ARG;
    if (st == MQ_OK)
        st = pipeline_fits(s, pe, rp.function, plan->threads_per_tg, KERNEL_SIMD_WIDTH, err);
    if (st == MQ_OK && re) /* the reduction's 256 threads are a pipeline's too */
        st = pipeline_fits(s, re, MQ_MSL_REDUCE_FUNCTION, REDUCE_THREADS, KERNEL_SIMD_WIDTH, err);
    weight_entry *we = st == MQ_OK ? weights_for(s, w, err) : NULL;
    if (st == MQ_OK && !we)
        st = err->code ? err->code : MQ_E_NOMEM;
    else if (st == MQ_OK && (ensure_buffer(s, &s->a_buf, &s->a_bytes, (size_t)p->M * p->K * 2) ||
                             ensure_buffer(s, &s->c_buf, &s->c_bytes, MN * 2) ||
                             ensure_buffer(s, &s->ws_buf, &s->ws_bytes, plan->workspace_bytes)))
        st = mq_fail(err, MQ_E_NOMEM, "metal: cannot allocate the A, C or workspace buffers");
    if (st == MQ_OK) {
        memcpy(MSG0(rt, void *)(s->a_buf, rt->sel("contents")), A, (size_t)p->M * p->K * 2);
        st = run_command_buffer(s, p, &rp, pe, re, we, w, C, err);
    }
    rt->pool_pop(pool);
    return st;
}

static double metal_device_time(const mq_backend *b)
{
    return ((const metal_state *)b->state)->last_gpu_s;
}

static mq_status metal_prepare(mq_backend *b, const mq_weights *w, mq_error *err)
{
    metal_state *s = b->state;
    void *pool = s->rt.pool_push();
    weight_entry *we = weights_for(s, w, err);
    s->rt.pool_pop(pool);
    return we ? MQ_OK : err->code;
}

static void metal_close(mq_backend *b)
{
    metal_state *s = b->state;
    if (s) {
        for (int i = 0; i < s->npipes; i++)
            mq_objc_release(&s->rt, s->pipes[i].pipeline);
        while (s->nweights > 0)
            weight_evict_oldest(s);
        mq_objc_release(&s->rt, s->a_buf);
        mq_objc_release(&s->rt, s->c_buf);
        mq_objc_release(&s->rt, s->ws_buf);
        mq_objc_release(&s->rt, s->queue);
        mq_objc_release(&s->rt, s->device);
        free(s);
    }
    free(b);
}

/* Name, architecture (macOS 14+: device.architecture.name, from which
 * harness/target.c finds the chip with the core count) and the limits the
 * runs are held to: the device's threadgroup memory, and half its
 * recommended working set for resident weights. */
static void describe_device(metal_state *s, mq_backend *b)
{
    const objc_rt *rt = &s->rt;
    id archobj = mq_objc_responds(rt, s->device, "architecture")
                     ? mq_objc_send0(rt, s->device, "architecture")
                     : NULL;
    if (archobj)
        snprintf(b->arch, sizeof b->arch, "%s",
                 mq_objc_cstring(rt, mq_objc_send0(rt, archobj, "name")));
    snprintf(b->device, sizeof b->device, "%s",
             mq_objc_cstring(rt, mq_objc_send0(rt, s->device, "name")));
    b->gpu_cores = mq_objc_gpu_core_count(rt);
    s->max_tg_mem = MSG0(rt, NSUInteger)(s->device, rt->sel("maxThreadgroupMemoryLength"));
    b->tg_mem_bytes = s->max_tg_mem > INT_MAX ? INT_MAX : (int)s->max_tg_mem;
    NSUInteger ws = mq_objc_responds(rt, s->device, "recommendedMaxWorkingSetSize")
                        ? MSG0(rt, NSUInteger)(s->device, rt->sel("recommendedMaxWorkingSetSize"))
                        : 0;
    s->weight_cap = ws ? (size_t)(ws / 2) : (size_t)1 << 32;
}

mq_backend *mq_backend_metal_open(const mq_backend_opts *o, mq_error *err)
{
    (void)o;
    char why[512];
    metal_state *s = calloc(1, sizeof *s);
    mq_backend *b = calloc(1, sizeof *b);
    if (!s || !b) {
        free(s);
        free(b);
        mq_fail(err, MQ_E_NOMEM, "unavailable: out of memory");
        return NULL;
    }
    if (mq_objc_load(&s->rt, why, sizeof why)) {
        free(s);
        free(b);
        mq_fail(err, MQ_E_SYSTEM, "%s", why);
        return NULL;
    }
    const objc_rt *rt = &s->rt;
    void *pool = rt->pool_push();
    s->device = mq_objc_metal_device(rt);
    if (s->device) {
        s->queue = mq_objc_send0(rt, s->device, "newCommandQueue");
        describe_device(s, b);
    }
    rt->pool_pop(pool);
    if (!s->device || !s->queue) {
        mq_fail(err, MQ_E_SYSTEM, "unavailable: %s",
                s->device ? "the device gave no command queue"
                          : "no Metal device (MTLCreateSystemDefaultDevice and MTLCopyAllDevices "
                            "found none)");
        mq_objc_release(rt, s->device);
        free(s);
        free(b);
        return NULL;
    }
    s->last_gpu_s = -1;
    b->name = "metal";
    b->arith = (mq_backend_arith){.half_weights = 1, .half_output = 1}; /* metal/mq_metal.h */
    b->prepare = metal_prepare;
    b->run = metal_run;
    b->device_time = metal_device_time;
    b->cache_bytes = APPLE_SLC_BYTES;
    b->close = metal_close;
    b->state = s;
    return b;
}
