/* cpu.c - the CPU model as a backend: mq_gemm of the runtime library on a
 * context of worker threads (one per core unless told otherwise). Its times
 * are this machine's (the chip 'host'), never an Apple GPU's. */
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

static mq_status cpu_run(mq_backend *b, const mq_problem *p, const mq_weights *w,
                         const uint16_t *A, float *C, const mq_candidate *c, const mq_limits *lim,
                         mq_error *err)
{
    return mq_gemm((mq_ctx *)b->state, p, w, A, C, c, lim, err);
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A read of the weights' own size, cold, timed as a candidate is (the wall
 * clock around one dispatch on the same workers): copies that make a set
 * twice the last-level cache (b->cache_bytes, the harness's figure), each
 * first written by this thread as the harness's weight copies are, read in
 * rotation; and the same dispatch reading nothing. Medians of 15 after one
 * pass of warm-ups. */
static mq_status cpu_probe_read_at(mq_backend *b, size_t bytes, double *gbs, double *empty_s,
                                   mq_error *err)
{
    mq_ctx *ctx = b->state;
    size_t stride = (bytes + 4095) & ~(size_t)4095;
    size_t copies = mq_cold_copies(stride, b->cache_bytes ? b->cache_bytes : (size_t)32 << 20);
    if (stride == 0 || copies * stride > ((size_t)4 << 30))
        return mq_fail(err, MQ_E_ARG, "cpu: a %zu-byte read probe does not fit in 4 GiB of copies",
                       bytes);
    unsigned char *buf = aligned_alloc(4096, copies * stride);
    if (!buf)
        return mq_fail(err, MQ_E_NOMEM, "cpu: out of memory for the sized read probe");
    memset(buf, 0x3c, copies * stride);
    enum { REPS = 15 };
    double t_read[REPS], t_empty[REPS];
    volatile float sink = 0;
    for (size_t i = 0; i < copies + REPS; i++) {
        double t0 = seconds_now();
        sink += mq_ctx_read(ctx, buf + (i % copies) * stride, bytes);
        double t1 = seconds_now();
        sink += mq_ctx_read(ctx, NULL, 0);
        double t2 = seconds_now();
        if (i >= copies) {
            t_read[i - copies] = t1 - t0;
            t_empty[i - copies] = t2 - t1;
        }
    }
    (void)sink;
    free(buf);
    gsl_sort(t_read, 1, REPS);
    gsl_sort(t_empty, 1, REPS);
    *gbs = (double)bytes / gsl_stats_median_from_sorted_data(t_read, 1, REPS) / 1e9;
    *empty_s = gsl_stats_median_from_sorted_data(t_empty, 1, REPS);
    return MQ_OK;
}

static mq_status cpu_run_moe(mq_backend *b, const mq_moe_problem *p, const mq_moe_weights *mw,
                             const uint16_t *x, const int32_t *ids, const float *probs,
                             float *out, const mq_moe_candidate *c, mq_error *err)
{
    return mq_moe_run((mq_ctx *)b->state, p, mw, x, ids, probs, out, c, err);
}

static mq_status cpu_run_moe_unfused(mq_backend *b, const mq_moe_problem *p,
                                     const mq_moe_weights *mw, const uint16_t *x,
                                     const int32_t *ids, const float *probs, float *out,
                                     const mq_table *dense, mq_error *err)
{
    mq_ctx_set_table((mq_ctx *)b->state, dense); /* mq_gemm asks it for each expert's kernel */
    mq_status st = mq_moe_run_unfused((mq_ctx *)b->state, p, mw, x, ids, probs, out, NULL, err);
    mq_ctx_set_table((mq_ctx *)b->state, NULL);
    return st;
}

static void cpu_close(mq_backend *b)
{
    mq_ctx_destroy((mq_ctx *)b->state);
    free(b);
}

mq_backend *mq_backend_cpu_open(const mq_backend_opts *o, mq_error *err)
{
    mq_backend *b = calloc(1, sizeof *b);
    mq_ctx *ctx = NULL;
    if (!b) {
        mq_fail(err, MQ_E_NOMEM, "unavailable: out of memory for the CPU backend");
        return NULL;
    }
    if (mq_ctx_create(o ? o->threads : 0, &ctx, err)) {
        free(b);
        return NULL;
    }
    b->name = "cpu";
    b->threads = mq_ctx_threads(ctx);
    b->run = cpu_run;
    b->probe_read_at = cpu_probe_read_at;
    b->run_moe = cpu_run_moe;
    b->run_moe_unfused = cpu_run_moe_unfused;
    b->close = cpu_close;
    b->state = ctx;
    return b;
}
