/* cpu.c - the CPU model as a backend: mq_gemm of the runtime library on a
 * context of worker threads (one per core unless told otherwise). Its times
 * are this machine's (the chip 'host'), never an Apple GPU's. */
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

/* macOS's CLOCK_MONOTONIC counts whole microseconds; CLOCK_UPTIME_RAW
 * (macOS only) is its nanosecond clock that, like Linux's CLOCK_MONOTONIC,
 * stops while asleep (harness/probes.c says where that comes from). */
static double seconds_now(void)
{
    struct timespec t;
#ifdef CLOCK_UPTIME_RAW
    clock_gettime(CLOCK_UPTIME_RAW, &t);
#else
    clock_gettime(CLOCK_MONOTONIC, &t);
#endif
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#ifdef MQ_PLANT
/* A planted slowdown, for testing the nightly's A/B and bisect only: built
 * in by `make PLANT=1` (never in a normal build), it reads
 * MQ_PLANT_SLOWDOWN="VARIANT:FRACTION" and makes every run of that variant
 * longer by FRACTION of the run's own time, the calling thread busy the
 * while, as more work in the kernel would keep it. */
static double planted_fraction(const mq_candidate *c)
{
    const char *e = getenv("MQ_PLANT_SLOWDOWN"), *colon = e ? strchr(e, ':') : NULL;
    const mq_variant_info *vi = mq_variant_get(c->variant);
    if (!colon || !vi || strlen(vi->name) != (size_t)(colon - e) ||
        strncmp(vi->name, e, (size_t)(colon - e)))
        return 0;
    double f = atof(colon + 1);
    return f > 0 && f < 10 ? f : 0;
}
#endif

static mq_status cpu_run(mq_backend *b, const mq_problem *p, const mq_weights *w,
                         const uint16_t *A, float *C, const mq_candidate *c, const mq_plan *plan,
                         mq_error *err)
{
#ifdef MQ_PLANT
    double t0 = seconds_now(), f = planted_fraction(c);
    mq_status st = mq_gemm_planned((mq_ctx *)b->state, p, w, A, C, c, plan, err);
    if (f > 0 && st == MQ_OK) {
        double until = seconds_now() + f * (seconds_now() - t0);
        while (seconds_now() < until)
            ;
    }
    return st;
#else
    return mq_gemm_planned((mq_ctx *)b->state, p, w, A, C, c, plan, err);
#endif
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
    /* one buffer for the process, grown as needed: the summary reads one
     * per problem, and fresh pages would be faulted in and zeroed each time */
    static unsigned char *buf;
    static size_t cap;
    if (copies * stride > cap) {
        free(buf);
        buf = aligned_alloc(4096, copies * stride);
        cap = buf ? copies * stride : 0;
        if (!buf)
            return mq_fail(err, MQ_E_NOMEM, "cpu: out of memory for the sized read probe");
        memset(buf, 0x3c, cap); /* written once, so every page is really there */
    }
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
    gsl_sort(t_read, 1, REPS);
    gsl_sort(t_empty, 1, REPS);
    *gbs = (double)bytes / gsl_stats_median_from_sorted_data(t_read, 1, REPS) / 1e9;
    *empty_s = gsl_stats_median_from_sorted_data(t_empty, 1, REPS);
    return MQ_OK;
}

static mq_status cpu_run_moe(mq_backend *b, const mq_moe_problem *p, const mq_moe_weights *mw,
                             const uint16_t *x, const int32_t *ids, const float *probs,
                             float *out, const mq_moe_candidate *c, const mq_limits *lim,
                             mq_error *err)
{
    (void)lim; /* the CPU model plans its own workers */
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
