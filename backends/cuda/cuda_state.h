/* cuda_state.h - what the files of the cuda backend share: its state (the
 * context, the module and weight caches, the device buffers, the events),
 * the failure rule every driver call goes through (CU), and the functions
 * one file of the backend calls in another. The backend is split by concern:
 *   cuda.c          opening, closing, running one candidate
 *   cuda_state.c    failures, device buffers, the resident weight sets
 *   cuda_compile.c  NVRTC, the on-disk cubin cache, the in-memory modules
 *   cuda_moe.c      the MoE block, fused and the unfused baseline
 *   cuda_probe.c    the device probes (read bandwidth, FMA and MMA peaks)
 * Calls run one way only: cuda.c -> the others -> cuda_compile.c ->
 * cuda_state.c (tests/check_cycles.sh). */
#ifndef MQ_CUDA_STATE_H
#define MQ_CUDA_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cuda_api.h"
#include "msl_program.h"

#define MQ_CUDA_MAX_MODULES 256
#define MQ_CUDA_MAX_WEIGHTS 4352 /* the harness rotates up to 4096 copies */

typedef struct {
    char key[320];
    CUmodule mod;
} module_entry;

typedef struct {
    const mq_weights *w;
    uint64_t print;
    CUdeviceptr buf[MQ_MSL_W_COUNT];
} weight_entry;

typedef struct {
    CUdeviceptr p;
    size_t n;
} dbuf;

typedef struct {
    mq_cuda_api api;
    CUdevice dev;
    CUcontext ctx;
    int cc_major, cc_minor, sms;
    char arch_opt[48];
    module_entry mods[MQ_CUDA_MAX_MODULES];
    int nmods, next_mod;
    weight_entry weights[MQ_CUDA_MAX_WEIGHTS];
    int nweights, next_weight;
    dbuf a, c, ws, params;
    uint16_t *c_host;
    size_t c_host_n;
    CUevent ev0, ev1;
    double last_s;
    char broken[512]; /* a sticky error lost the context: every later run reports it */
    CUmodule probe_mod;
    int mma_fp32; /* MQ_CUDA_MMA=fp32: simdgroup matrices on the FP32 units */
    int queued;   /* MQ_CUDA_TIMING=queued (the default): each timed run and probe launch
                   * queued behind a spin kernel */
    int idle_now; /* set_idle_timing: the next runs launched on an idle GPU after all */
    /* the MoE block: its buffers (the weight fields uploaded once per weight set) */
    dbuf moe[MQ_MSL_MOE_NBUF];
    const mq_moe_weights *moe_w;
    uint64_t moe_print;
    int moe_sent[MQ_MSL_MOE_NBUF]; /* the field holds moe_w's (uploaded since it changed) */
} cuda_state;

/* The argument block of every translated entry: its [[buffer(n)]] device
 * pointers (metal::mq_cuda_buffers in backends/cuda/metal_stdlib). */
typedef struct {
    CUdeviceptr p[31];
} cuda_buffer_args;

/* ---- cuda_state.c ---- */

/* The error of a failed driver call; one that loses the context (an illegal
 * address, a launch failure) also makes the backend broken for good. */
mq_status mq_cuda_fail(cuda_state *s, mq_error *err, CUresult r, const char *what);

/* Return the failure of a driver call (needs s and err in scope). */
#define CU(call, what)                                                                       \
    do {                                                                                     \
        CUresult r_ = (call);                                                                \
        if (r_)                                                                              \
            return mq_cuda_fail(s, err, r_, what);                                           \
    } while (0)

/* b holds at least n bytes (16 when n is 0): reallocated when smaller. */
mq_status mq_cuda_ensure(cuda_state *s, dbuf *b, size_t n, mq_error *err);

/* The device arrays of a weight set, uploaded once per CPU-side copy (again
 * when its print changed); NULL and err on failure. */
weight_entry *mq_cuda_weights_for(cuda_state *s, const mq_weights *w, mq_error *err);
void mq_cuda_free_weights(cuda_state *s, weight_entry *e);

/* ---- cuda_compile.c ---- */

/* FNV-1a over n bytes, from h. */
uint64_t mq_cuda_fnv(uint64_t h, const void *p, size_t n);

/* NVRTC: source (with the prelude metal_stdlib as its one header when
 * with_prelude) to a cubin for this device; the cached one when the same
 * text was compiled the same way. NULL and msg on failure; free() it. */
char *mq_cuda_compile(cuda_state *s, const char *name, const char *source, const char *defines,
                      int with_prelude, size_t *cubin_n, char *msg, size_t mn);

/* The same NVRTC compile with no device, no context and no cache (NVRTC
 * needs no GPU: CI's check of every program, tests/test_nvrtc.c): the
 * backend's options for arch_opt ("--gpu-architecture=sm_90": a real
 * architecture, so ptxas runs and a cubin comes back) and mma_fp32, then
 * extra (NULL-terminated, NULL for none; e.g. "--ptxas-options=-v"). api
 * needs only NVRTC (mq_nvrtc_api_load). NULL and msg on failure; *log, when
 * log is not NULL, gets NVRTC's program log either way (free it). */
char *mq_nvrtc_compile(const mq_cuda_api *api, const char *arch_opt, int mma_fp32,
                       const char *name, const char *source, const char *defines,
                       int with_prelude, const char *const *extra, size_t *cubin_n, char **log,
                       char *msg, size_t mn);

/* The module of (metal/FILE, defines): in memory, on disk, or compiled now;
 * NULL and err on failure. */
CUmodule mq_cuda_module_for(cuda_state *s, const char *file, const char *defines, mq_error *err);

/* ---- cuda_moe.c: the backend's run_moe and run_moe_unfused ---- */

mq_status mq_cuda_run_moe(mq_backend *b, const mq_moe_problem *p, const mq_moe_weights *mw,
                          const uint16_t *x, const int32_t *ids, const float *probs, float *out,
                          const mq_moe_candidate *c, const mq_limits *lim, mq_error *err);
mq_status mq_cuda_run_moe_unfused(mq_backend *b, const mq_moe_problem *p,
                                  const mq_moe_weights *mw, const uint16_t *x,
                                  const int32_t *ids, const float *probs, float *out,
                                  const mq_table *dense, mq_error *err);

/* ---- cuda_probe.c: the backend's probe and probe_read_at ---- */

mq_status mq_cuda_probe(mq_backend *b, mq_device_probe *out, mq_error *err);
/* Launch a one-thread kernel that spins for about 50 us, so that what is
 * launched next waits queued behind it (the host's launch latency hidden,
 * as when a runtime launches kernels back to back). */
mq_status mq_cuda_spin(cuda_state *s, mq_error *err);
mq_status mq_cuda_probe_read_at(mq_backend *b, size_t bytes, double *gbs, double *empty_s,
                                mq_error *err);

#endif
