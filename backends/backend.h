/* backend.h - what runs a candidate. One interface for every backend, each
 * backend one file implementing it: the CPU model (cpu.c), Metal on an Apple
 * GPU (metal.c), the Metal kernels on an NVIDIA GPU through NVRTC (cuda.c),
 * the Metal kernels on the CPU's MSL executor (msl_cpu.c). The measurement
 * loop (harness/measure.c) knows only this
 * interface; which backend runs and which chip a tool is about is decided in
 * one place (harness/target.c).
 *
 * Every backend has one constructor of the same form,
 *     mq_backend *mq_backend_NAME_open(const mq_backend_opts *o, mq_error *err);
 * returning NULL with err's message "unavailable: WHY" when it cannot run on
 * this machine, and is listed in mq_backend_kinds (registry.c). */
#ifndef MQ_BACKEND_H
#define MQ_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "mq.h"

typedef struct {
    int threads; /* CPU-model workers (0: one per core); ignored by device backends */
} mq_backend_opts;

/* What a backend's kernels round, so that verification holds each backend
 * to the bound of its own arithmetic (harness/measure.c derives it). */
typedef struct {
    int half_weights; /* weights are dequantized to FP16 before the products */
    int half_output;  /* C is stored as FP16 */
} mq_backend_arith;

/* A device's own limits, measured by its probes (the GPU backends). */
typedef struct {
    double read_gbs;   /* streaming read of a buffer far past the caches, GB/s */
    double fma_gflops; /* FP32 FMA peak, GFLOP/s (an FMA is 2 flops) */
    double mma_gflops; /* the simdgroup 8x8 multiply-accumulate as the backend maps it
                        * (metal/mq_probe_mma.metal), GFLOP/s; 0: not measured */
    size_t read_bytes; /* the read probe's buffer */
} mq_device_probe;

/* Copies of a `bytes`-byte buffer that make a set twice `cache_bytes` and
 * more: read in rotation, each is out of the cache when its turn comes (the
 * harness's cold weights, a backend's sized read probe). */
static inline size_t mq_cold_copies(size_t bytes, size_t cache_bytes)
{
    return (2 * cache_bytes) / (bytes ? bytes : 1) + 2;
}

typedef struct mq_backend mq_backend;
struct mq_backend {
    const char *name;  /* "cpu", "metal" */
    mq_backend_arith arith; /* the CPU model: FP32 throughout (both 0) */
    /* describe the device: filled when opened */
    char device[96];   /* the device's own name ("Apple M4 Max"); "" for the CPU model */
    char arch[64];     /* its architecture name ("applegpu_g16s"); "" when it has none */
    int gpu_cores;     /* its GPU core count where the system tells (a Mac's IORegistry
                        * gpu-core-count); 0: unknown */
    int threads;       /* CPU-model workers; 0 for device backends */
    int verify_only;   /* its times are nobody's (the MSL executor): verify, never time */
    int tg_mem_bytes;  /* the device's threadgroup memory where it tells (Metal's
                        * maxThreadgroupMemoryLength); the target plans under it
                        * where it is less than the chip row's. 0: the chip's */
    size_t cache_bytes; /* the device's last-level cache (cold weights rotate past twice
                         * it); 0: the host's */
    /* prepare a weight set ahead of its runs (upload it once); NULL: nothing to do */
    mq_status (*prepare)(mq_backend *b, const mq_weights *w, mq_error *err);
    /* run one candidate: C = A x dequant(w), with the plan the caller made
     * for it (mq_plan_candidate under the target's limits, once per
     * candidate: mq_measure plans, the backend never plans again) */
    mq_status (*run)(mq_backend *b, const mq_problem *p, const mq_weights *w, const uint16_t *A,
                     float *C, const mq_candidate *c, const mq_plan *plan, mq_error *err);
    /* the device's own time of the last run in seconds (Metal: the command
     * buffer's GPU end - start); NULL or < 0: time by the wall clock */
    double (*device_time)(const mq_backend *b);
    /* where device_time is launches queued back to back (cuda's default): 1
     * makes the next runs' device_time one launch on an idle device, 0 the
     * queued figure again. NULL: the backend has one timing. */
    void (*set_idle_timing)(mq_backend *b, int idle);
    /* measure the device's read bandwidth and FMA peak now; NULL: no probes */
    mq_status (*probe)(mq_backend *b, mq_device_probe *out, mq_error *err);
    /* a cold read of `bytes` (copies rotated past the device's cache as the
     * harness rotates weights), timed as run() is timed: one launch between
     * two events. *gbs: the median rate; *empty_s: the median time of the
     * same launch reading nothing (the fixed cost a short kernel pays). Tells
     * how near a kernel of that size can come to the streaming probe; NULL:
     * not measured */
    mq_status (*probe_read_at)(mq_backend *b, size_t bytes, double *gbs, double *empty_s,
                               mq_error *err);
    /* the MoE block (gemm_trellis_moe, metal/gemm_trellis_moe.metal; on the
     * lane layout metal/lane_trellis_moe.metal) with a candidate, planned
     * under the target's limits (lim; NULL: mq_limits_default): out [tokens]
     * [hidden] FP32; timed as run() is (device_time). NULL: this backend
     * does not run it */
    mq_status (*run_moe)(mq_backend *b, const mq_moe_problem *p, const mq_moe_weights *mw,
                         const uint16_t *x, const int32_t *expert_ids, const float *probs,
                         float *out, const mq_moe_candidate *c, const mq_limits *lim,
                         mq_error *err);
    /* the unfused baseline of the same block (each touched expert's rows
     * gathered, the dense kernels per expert and projection, SwiGLU and the
     * weighted sum as passes of their own), timed as run_moe is; each dense
     * kernel the one `dense` gives for its (rows, N, K) (mq_table_lookup;
     * NULL: the built-in rule). NULL: this backend does not run it */
    mq_status (*run_moe_unfused)(mq_backend *b, const mq_moe_problem *p,
                                 const mq_moe_weights *mw, const uint16_t *x,
                                 const int32_t *expert_ids, const float *probs, float *out,
                                 const mq_table *dense, mq_error *err);
    void (*close)(mq_backend *b);
    void *state;
};

/* The backends this build has, in the order "auto" tries them (devices
 * first, the CPU model last). */
typedef struct {
    const char *name;
    mq_backend *(*open)(const mq_backend_opts *o, mq_error *err);
} mq_backend_kind;
extern const mq_backend_kind mq_backend_kinds[];
extern const int mq_backend_nkinds;

mq_backend *mq_backend_cpu_open(const mq_backend_opts *o, mq_error *err);
mq_backend *mq_backend_metal_open(const mq_backend_opts *o, mq_error *err);
mq_backend *mq_backend_cuda_open(const mq_backend_opts *o, mq_error *err);
mq_backend *mq_backend_msl_cpu_open(const mq_backend_opts *o, mq_error *err);

/* A backend by name, or "auto": the first device backend that opens, else
 * the CPU model, with *note saying what was passed over and why (empty when
 * nothing was). NULL and "NAME: unavailable: WHY" or "unknown backend ..."
 * in err. */
mq_backend *mq_backend_open(const char *name, const mq_backend_opts *o, char *note,
                            size_t note_n, mq_error *err);
/* Is b a device (its times are a chip's), not the CPU model? */
int mq_backend_is_device(const mq_backend *b);
void mq_backend_close(mq_backend *b);

#endif
