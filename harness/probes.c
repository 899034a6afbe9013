/* probes.c - streaming-read bandwidth (every thread sums its own slice of a
 * buffer much larger than the last-level cache) and FP32 FMA peak (every
 * thread runs independent chains of 16-lane FMAs, enough to cover the FMA
 * latency). Each probe is run several times and the best trial is kept:
 * these are ceilings, and noise only ever lowers a trial. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>

#include "probes.h"
#include "simd.h"

double mq_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

long mq_cache_bytes(int level)
{
    for (int idx = 0; idx < 8; idx++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        int lv = 0;
        int ok = fscanf(f, "%d", &lv) == 1;
        fclose(f);
        if (!ok || lv != level)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        f = fopen(path, "r");
        if (!f)
            break;
        long v = 0;
        char unit = 0;
        ok = fgets(buf, sizeof buf, f) != NULL && sscanf(buf, "%ld%c", &v, &unit) >= 1;
        fclose(f);
        if (ok && v > 0)
            return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : v;
    }
    long v = sysconf(level == 2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE);
    return v > 0 ? v : 0;
}

typedef struct {
    const float *base;
    size_t floats;
    long iters;
    pthread_barrier_t *start;
    double elapsed;
    float sink;
} probe_arg;

static void *read_worker(void *argp)
{
    probe_arg *a = argp;
    pthread_barrier_wait(a->start);
    double t0 = mq_now();
    v16f s0 = v16f_splat(0), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 64 <= a->floats; i += 64) {
        s0 += v16f_load(a->base + i);
        s1 += v16f_load(a->base + i + 16);
        s2 += v16f_load(a->base + i + 32);
        s3 += v16f_load(a->base + i + 48);
    }
    v16f s = (s0 + s1) + (s2 + s3);
    a->elapsed = mq_now() - t0;
    float t = 0;
    for (int i = 0; i < 16; i++)
        t += s[i];
    a->sink = t;
    return NULL;
}

#define FMA_CHAINS 12
static void *fma_worker(void *argp)
{
    probe_arg *a = argp;
    v16f acc[FMA_CHAINS];
    v16f mul = v16f_splat(0.999999f), add = v16f_splat(1e-7f);
    for (int c = 0; c < FMA_CHAINS; c++)
        acc[c] = v16f_splat((float)c);
    pthread_barrier_wait(a->start);
    double t0 = mq_now();
    for (long i = 0; i < a->iters; i++) {
        for (int c = 0; c < FMA_CHAINS; c++)
            acc[c] = acc[c] * mul + add;
    }
    a->elapsed = mq_now() - t0;
    float t = 0;
    for (int c = 0; c < FMA_CHAINS; c++)
        t += acc[c][0];
    a->sink = t;
    return NULL;
}

/* Run fn on `threads` threads started together; returns the slowest time. */
static double run_threads(int threads, void *(*fn)(void *), probe_arg *args)
{
    pthread_t tid[256];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        args[t].start = &start;
        if (t > 0)
            pthread_create(&tid[t], NULL, fn, &args[t]);
    }
    fn(&args[0]);
    double worst = args[0].elapsed;
    for (int t = 1; t < threads; t++) {
        pthread_join(tid[t], NULL);
        if (args[t].elapsed > worst)
            worst = args[t].elapsed;
    }
    pthread_barrier_destroy(&start);
    return worst;
}

int mq_probe_machine(int threads, size_t buffer_bytes, int trials, mq_machine_probe *out)
{
    if (threads < 1 || threads > 256 || trials < 1 || !out)
        return -1;
    if (!buffer_bytes)
        buffer_bytes = MQ_PROBE_READ_BYTES;
    size_t floats = buffer_bytes / sizeof(float);
    /* 2 MiB aligned with a huge-page hint, like the weight arrays */
    size_t huge = (size_t)2 << 20;
    buffer_bytes = (buffer_bytes + huge - 1) & ~(huge - 1);
    floats = buffer_bytes / sizeof(float);
    float *buf = aligned_alloc(huge, buffer_bytes);
    if (!buf)
        return -1;
#ifdef MADV_HUGEPAGE
    madvise(buf, buffer_bytes, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < floats; i++) /* touch every page */
        buf[i] = (float)(i & 7);
    probe_arg args[256];
    memset(args, 0, sizeof args);
    size_t per = floats / (size_t)threads / 64 * 64;
    double best_read = 0, best_fma = 0;
    for (int r = 0; r < trials; r++) {
        for (int t = 0; t < threads; t++) {
            args[t].base = buf + (size_t)t * per;
            args[t].floats = per;
        }
        double s = run_threads(threads, read_worker, args);
        double gbs = (double)per * threads * sizeof(float) / s / 1e9;
        if (gbs > best_read)
            best_read = gbs;
    }
    free(buf);
    long iters = 20000000;
    for (int r = 0; r < trials; r++) {
        for (int t = 0; t < threads; t++)
            args[t].iters = iters;
        double s = run_threads(threads, fma_worker, args);
        double gf = 2.0 * 16 * FMA_CHAINS * (double)iters * threads / s / 1e9;
        if (gf > best_fma)
            best_fma = gf;
    }
    out->read_gbs = best_read;
    out->fma_gflops = best_fma;
    out->read_bytes = per * (size_t)threads * sizeof(float);
    out->threads = threads;
    return 0;
}

static int probes_skipped;

void mq_probes_set_skip(int skip)
{
    probes_skipped = skip;
}

int mq_probes_skip(void)
{
    return probes_skipped;
}
