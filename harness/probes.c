/* probes.c - streaming-read bandwidth (every thread sums its own slice of a
 * buffer much larger than the last-level cache) and FP32 FMA peak (every
 * thread runs independent chains of 16-lane FMAs, enough to cover the FMA
 * latency). Each probe is run several times and the best trial is kept:
 * these are ceilings, and noise only ever lowers a trial. Linux and macOS:
 * the cache sizes come from sysfs, sysconf or sysctl, the threads start
 * together at a barrier of our own (macOS has no pthread_barrier_t). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#ifdef __APPLE__
#include <limits.h>
#include <stdint.h>
#include <sys/sysctl.h>
#endif

#include "probes.h"
#include "simd.h"

/* macOS's CLOCK_MONOTONIC counts whole microseconds (Libc's clock_gettime
 * derives it from gettimeofday, opensource.apple.com/source/Libc/, file
 * gen/clock_gettime.c); CLOCK_UPTIME_RAW is mach_absolute_time in
 * nanoseconds and, like Linux's CLOCK_MONOTONIC, stops while asleep. */
#ifdef CLOCK_UPTIME_RAW
#define MQ_CLOCK CLOCK_UPTIME_RAW
#else
#define MQ_CLOCK CLOCK_MONOTONIC
#endif

double mq_now(void)
{
    struct timespec ts;
    clock_gettime(MQ_CLOCK, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifdef __APPLE__
/* A sysctl number of bytes, 0 when the name does not exist: byte counts
 * are 64-bit, the per-perflevel ones 32-bit on some releases, so either
 * length is taken. */
static long sysctl_bytes(const char *name)
{
    uint64_t v64 = 0;
    size_t len = sizeof v64;
    if (sysctlbyname(name, &v64, &len, NULL, 0) != 0)
        return 0;
    if (len == sizeof(uint32_t)) {
        uint32_t v32;
        memcpy(&v32, &v64, sizeof v32);
        return (long)v32;
    }
    return len == sizeof v64 && v64 <= (uint64_t)LONG_MAX ? (long)v64 : 0;
}

/* macOS has neither sysfs nor _SC_LEVEL*_CACHE_SIZE; sysctl names the
 * caches (Apple, "Determining system capabilities", developer.apple.com/
 * documentation/kernel/1387446-sysctlbyname/determining_system_capabilities).
 * Level 2: the performance cores' L2 (hw.perflevel0.l2cachesize, macOS 12
 * and later on Apple Silicon, where plain hw.l2cachesize may describe the
 * efficiency cores' smaller one), else hw.l2cachesize (Intel Macs, older
 * releases). Apple Silicon's L2 is shared by a cluster of cores, not per
 * core as on most x86 parts.
 * Level 3: hw.l3cachesize, which Intel Macs have. Apple Silicon has no
 * level-3 cache the CPU reports: its System Level Cache sits at the memory
 * controllers, shared with the GPU, and no sysctl gives its size. We return
 * 0 ("unknown") rather than the L2 or a guess: the callers already treat 0
 * as unknown (the bench's cold copies then assume 32 MiB, the host chip's
 * SLC figure stays empty), and a level-3 size that is really the L2 would
 * make the cold copies too small to leave the SLC cold. */
static long darwin_cache_bytes(int level)
{
    if (level == 2) {
        long v = sysctl_bytes("hw.perflevel0.l2cachesize");
        return v > 0 ? v : sysctl_bytes("hw.l2cachesize");
    }
    return level == 3 ? sysctl_bytes("hw.l3cachesize") : 0;
}
#endif

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
#if defined(__APPLE__)
    return darwin_cache_bytes(level);
#elif defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE) /* glibc */
    long v = sysconf(level == 2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE);
    return v > 0 ? v : 0;
#else
    return 0;
#endif
}

/* The probe threads' common start. pthread_barrier_t is an optional part
 * of POSIX that macOS lacks, so: a mutex, a condition variable and a
 * generation count (a thread waits until the generation it arrived in has
 * ended, which also makes spurious wakeups harmless and the barrier
 * reusable). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t all_in;
    unsigned count, arrived, generation;
} start_barrier;

static void start_barrier_init(start_barrier *b, unsigned count)
{
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->all_in, NULL);
    b->count = count;
    b->arrived = 0;
    b->generation = 0;
}

static void start_barrier_wait(start_barrier *b)
{
    pthread_mutex_lock(&b->mu);
    unsigned gen = b->generation;
    if (++b->arrived == b->count) {
        b->arrived = 0;
        b->generation++;
        pthread_cond_broadcast(&b->all_in);
    } else {
        while (gen == b->generation)
            pthread_cond_wait(&b->all_in, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
}

static void start_barrier_destroy(start_barrier *b)
{
    pthread_cond_destroy(&b->all_in);
    pthread_mutex_destroy(&b->mu);
}

typedef struct {
    const float *base;
    size_t floats;
    long iters;
    start_barrier *start;
    double elapsed;
    float sink;
} probe_arg;

static void *read_worker(void *argp)
{
    probe_arg *a = argp;
    start_barrier_wait(a->start);
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
    start_barrier_wait(a->start);
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
    start_barrier start;
    start_barrier_init(&start, (unsigned)threads);
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
    start_barrier_destroy(&start);
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
