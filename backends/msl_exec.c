/* msl_exec.c - running a compiled MSL kernel (msl_module.c) over a grid on
 * the CPU, with a GPU's semantics where they decide correctness:
 *   - every thread of a threadgroup is a fiber with its own stack (a
 *     register switch of our own on x86-64 and arm64, Linux and macOS;
 *     ucontext elsewhere); a worker (OS thread) runs one threadgroup at a
 *     time, switching fibers only at barriers and simdgroup exchanges, so a
 *     threadgroup's threads interleave as concurrent threads may;
 *   - threadgroup_barrier waits for every thread of the threadgroup,
 *     simdgroup_barrier for every lane of the simdgroup; a barrier that some
 *     threads can never reach (they returned, or wait at another barrier) is
 *     a deadlock, reported with who waits where;
 *   - threadgroup memory is one 32 KB arena per worker, filled with NaN
 *     bytes before each threadgroup (reading what no thread wrote shows);
 *   - device buffers have inaccessible pages around them and a canary in
 *     the slack of their last 16 bytes: a fault names the buffer, the
 *     offset and the thread;
 *   - under ThreadSanitizer each fiber is a TSan fiber and barriers are
 *     release/acquire pairs, so a missing barrier is reported as a race.
 * A launch runs in a forked child (buffers are shared mappings), so a
 * faulting, hanging or deadlocked kernel is an error message, never a crash
 * of the caller. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "msl_exec.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define __SANITIZE_THREAD__ 1
#endif
#if __has_feature(address_sanitizer)
#define __SANITIZE_ADDRESS__ 1
#endif
#endif
#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>
#endif
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/common_interface_defs.h>
#endif

/* The scheduler's own bookkeeping is shared by the fibers of a worker by
 * design (one runs at a time); TSan must see only the kernels' accesses and
 * the barriers' release/acquire, so these functions are not instrumented. */
#define SCHED __attribute__((no_sanitize("thread")))
/* A context switch stays out of line: the sanitizers' fiber calls bracket
 * it exactly, and with ucontext (which returns twice) no caller's locals
 * need to survive it (-Wclobbered). */
#define SWITCH __attribute__((noinline))

#include "msl_fiber.h"

#define MAX_THREADS 1024 /* per threadgroup, as on Apple GPUs */
#define MAX_SGS (MAX_THREADS / MQ_MSL_SIMD_WIDTH)
#define XBYTES 64        /* the largest value one lane exchanges */
#define STACK_BYTES (256u * 1024u)
#define CANARY 0xA5

/* ---- buffers ---------------------------------------------------------------- */

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

int mq_msl_buffer_alloc(mq_msl_buffer *b, size_t bytes, char *err, size_t errlen)
{
    size_t P = page_size(), region = (bytes + P - 1) / P * P;
    if (!region)
        region = P;
    /* past the end, an inaccessible region as long as the buffer (64 pages
     * at least): a row-sized overrun lands there, not in the next buffer */
    size_t tail = region > 64 * P ? region : 64 * P;
    memset(b, 0, sizeof *b);
    b->map_bytes = P + region + tail;
    b->map = mmap(NULL, b->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (b->map == MAP_FAILED) {
        b->map = NULL;
        snprintf(err, errlen, "cannot map a %zu-byte device buffer: %s", bytes, strerror(errno));
        return -1;
    }
    if (mprotect(b->map, P, PROT_NONE) || mprotect(b->map + P + region, tail, PROT_NONE)) {
        snprintf(err, errlen, "cannot protect a device buffer's guard pages: %s", strerror(errno));
        mq_msl_buffer_free(b);
        return -1;
    }
    /* 16-byte aligned start, the end as close to the guard page as that allows */
    size_t start = (region - bytes) & ~(size_t)15;
    b->data = b->map + P + start;
    b->bytes = bytes;
    memset((unsigned char *)b->data + bytes, CANARY, region - start - bytes); /* < 16 bytes */
    return 0;
}

void mq_msl_buffer_free(mq_msl_buffer *b)
{
    if (b && b->map)
        munmap(b->map, b->map_bytes);
    if (b)
        memset(b, 0, sizeof *b);
}

/* ---- the per-worker scheduler ----------------------------------------------- */

enum { F_RUN, F_WAIT_TG, F_WAIT_SG, F_DONE };

typedef struct {
    fiber_ctx ctx;
    int state, nalloc;
    unsigned sg, lane, xparity;
    mq_msl_thread t;
    void *tsan;
} fiber;

typedef struct {
    fiber_ctx main;
    void *main_tsan, *asan_fake, *main_bottom;
    size_t main_size;
    fiber f[MAX_THREADS];
    unsigned char *stacks[MAX_THREADS];
    int n, cur, tg_arrived, tg_gen;
    int nsg, sg_size[MAX_SGS], sg_arrived[MAX_SGS], sg_gen[MAX_SGS];
    _Alignas(64) unsigned char tg_mem[MQ_MSL_TG_MEM_LIMIT];
    size_t tg_used;
    struct {
        size_t off, bytes;
    } blk[64];
    int nblk;
    unsigned char xbuf[MAX_SGS][2][MQ_MSL_SIMD_WIDTH][XBYTES];
    char tg_sync[2], sg_sync[MAX_SGS][2], done_sync; /* TSan's synchronization addresses */
    mq_msl_entry_fn entry;
    const mq_msl_launch *l;
    unsigned tg[3];
    int failed;
    char msg[768];
} worker;

static __thread worker *tw;

/* The report a launch's child leaves for its parent (a shared page). */
typedef struct {
    atomic_int status; /* 0 ok, else failed */
    char msg[1024];
} report;

static report *child_report;             /* in the child */
static const mq_msl_launch *child_launch; /* for the fault handler */
static atomic_int child_stop;

static void report_failure(const char *msg)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&child_report->status, &expected, 1))
        snprintf(child_report->msg, sizeof child_report->msg, "%s", msg);
    atomic_store(&child_stop, 1);
}

SCHED SWITCH static void switch_to_fiber(worker *w, int i)
{
    w->cur = i;
#ifdef __SANITIZE_THREAD__
    __tsan_switch_to_fiber(w->f[i].tsan, __tsan_switch_to_fiber_no_sync);
#endif
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_start_switch_fiber(&w->asan_fake, w->stacks[i] + page_size(), STACK_BYTES);
#endif
    fiber_swap(&w->main, &w->f[i].ctx);
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_finish_switch_fiber(w->asan_fake, NULL, NULL);
#endif
}

/* From the running fiber back to the worker; `last` when it never resumes. */
SCHED SWITCH static void yield_to_main(worker *w, int last)
{
    fiber *f = &w->f[w->cur];
#ifdef __SANITIZE_THREAD__
    __tsan_switch_to_fiber(w->main_tsan, __tsan_switch_to_fiber_no_sync);
#endif
#ifdef __SANITIZE_ADDRESS__
    void *fake = NULL;
    __sanitizer_start_switch_fiber(last ? NULL : &fake, w->main_bottom, w->main_size);
#else
    (void)last;
#endif
    fiber_swap(&f->ctx, &w->main);
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

static void fail_here(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
SCHED static void fail_here(worker *w, const char *fmt, ...)
{
    fiber *f = &w->f[w->cur];
    if (!w->failed) {
        char what[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        snprintf(w->msg, sizeof w->msg, "%s (threadgroup %u,%u,%u, thread %u)", what, w->tg[0],
                 w->tg[1], w->tg[2], f->t.thread_index_in_threadgroup);
    }
    w->failed = 1;
    f->state = F_DONE;
    yield_to_main(w, 1);
    abort(); /* not reached: a failed fiber is never resumed */
}

SCHED static void api_barrier(int scope)
{
    worker *w = tw;
    fiber *f = &w->f[w->cur];
    void *sync;
    if (scope == MQ_MSL_BARRIER_THREADGROUP) {
        sync = &w->tg_sync[w->tg_gen & 1];
        f->state = F_WAIT_TG;
        if (++w->tg_arrived == w->n) {
            for (int i = 0; i < w->n; i++)
                w->f[i].state = F_RUN;
            w->tg_arrived = 0;
            w->tg_gen++;
        }
    } else {
        unsigned s = f->sg;
        sync = &w->sg_sync[s][w->sg_gen[s] & 1];
        f->state = F_WAIT_SG;
        if (++w->sg_arrived[s] == w->sg_size[s]) {
            for (int i = 0; i < w->sg_size[s]; i++)
                w->f[s * MQ_MSL_SIMD_WIDTH + (unsigned)i].state = F_RUN;
            w->sg_arrived[s] = 0;
            w->sg_gen[s]++;
        }
    }
#ifdef __SANITIZE_THREAD__
    __tsan_release(sync);
#endif
    yield_to_main(w, 0);
#ifdef __SANITIZE_THREAD__
    __tsan_acquire(sync);
#else
    (void)sync;
#endif
}

SCHED static void *api_tg_alloc(size_t bytes, size_t align)
{
    worker *w = tw;
    fiber *f = &w->f[w->cur];
    int k = f->nalloc++;
    if (k < w->nblk) {
        if (w->blk[k].bytes != bytes)
            fail_here(w, "threadgroup array %d is %zu bytes in one thread and %zu in another", k,
                      w->blk[k].bytes, bytes);
        return w->tg_mem + w->blk[k].off;
    }
    if (k >= 64)
        fail_here(w, "more than 64 threadgroup arrays");
    size_t off = align ? (w->tg_used + align - 1) / align * align : w->tg_used;
    if (off + bytes > MQ_MSL_TG_MEM_LIMIT)
        fail_here(w, "threadgroup memory of %zu bytes, over the %d bytes of an Apple GPU",
                  off + bytes, MQ_MSL_TG_MEM_LIMIT);
    w->blk[k].off = off;
    w->blk[k].bytes = bytes;
    w->nblk = k + 1;
    w->tg_used = off + bytes;
    return w->tg_mem + off;
}

SCHED static unsigned api_exchange(const void *mine, size_t bytes, void *all)
{
    worker *w = tw;
    fiber *f = &w->f[w->cur];
    if (bytes > XBYTES)
        fail_here(w, "a simd collective of %zu bytes per lane (the executor moves %d)", bytes,
                  XBYTES);
    unsigned s = f->sg, par = f->xparity;
    memcpy(w->xbuf[s][par][f->lane], mine, bytes);
    api_barrier(MQ_MSL_BARRIER_SIMDGROUP);
    /* the lane's copy-out ends before it reaches the next exchange; the one
     * after that (the same parity) starts only when every lane is past the
     * next, so this buffer stays until every lane has read it */
    for (int i = 0; i < w->sg_size[s]; i++)
        memcpy((unsigned char *)all + (size_t)i * bytes, w->xbuf[s][par][i], bytes);
    f->xparity ^= 1u;
    return (unsigned)w->sg_size[s];
}

SCHED static unsigned api_lane(void)
{
    return tw->f[tw->cur].lane;
}

SCHED static void api_fail(const char *msg)
{
    fail_here(tw, "%s", msg);
}

const mq_msl_api mq_msl_host_api = {api_barrier, api_tg_alloc, api_exchange, api_lane, api_fail};

SCHED static void fiber_main(void)
{
    worker *w = tw;
    fiber *f = &w->f[w->cur];
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_finish_switch_fiber(NULL, (const void **)&w->main_bottom, &w->main_size);
#endif
    w->entry(&f->t);
    f->state = F_DONE;
#ifdef __SANITIZE_THREAD__
    __tsan_release(&w->done_sync);
#endif
    yield_to_main(w, 1);
}

/* Who waits where, when no thread can go on. */
SCHED static void describe_deadlock(worker *w)
{
    int tg = 0, sg = 0, done = 0, first_sg = -1;
    for (int i = 0; i < w->n; i++) {
        tg += w->f[i].state == F_WAIT_TG;
        done += w->f[i].state == F_DONE;
        if (w->f[i].state == F_WAIT_SG) {
            sg++;
            if (first_sg < 0)
                first_sg = (int)w->f[i].sg;
        }
    }
    int n = snprintf(w->msg, sizeof w->msg,
                     "deadlock in threadgroup %u,%u,%u of %d threads: %d wait at "
                     "threadgroup_barrier, %d at a simdgroup barrier or collective",
                     w->tg[0], w->tg[1], w->tg[2], w->n, tg, sg);
    if (first_sg >= 0 && n > 0 && (size_t)n < sizeof w->msg)
        n += snprintf(w->msg + n, sizeof w->msg - (size_t)n, " (simdgroup %d: %d of %d lanes)",
                      first_sg, w->sg_arrived[first_sg], w->sg_size[first_sg]);
    if (n > 0 && (size_t)n < sizeof w->msg)
        snprintf(w->msg + n, sizeof w->msg - (size_t)n,
                 ", %d returned: a barrier in divergent control flow", done);
    w->failed = 1;
}

/* Thread i's context, to start at fiber_main on its own stack. The stack
 * may still carry ASan's marks of the fibers that ran on it before (they
 * never return), so the frame is written uninstrumented, one word at a
 * time (a loop the compiler could make a memset would be checked). */
SCHED SWITCH __attribute__((no_sanitize("address"))) static void make_fiber(worker *w, int i)
{
    fiber *f = &w->f[i];
#if FIBER_ASM
    uintptr_t top = ((uintptr_t)(w->stacks[i] + page_size()) + STACK_BYTES) & ~(uintptr_t)15;
    uintptr_t base = top - FIBER_FRAME_WORDS * sizeof(uintptr_t);
    volatile uintptr_t *frame = (volatile uintptr_t *)base;
    for (int k = 0; k < FIBER_FRAME_WORDS; k++)
        frame[k] = 0; /* and so the frame pointer is 0 */
    frame[FIBER_SLOT_FN] = (uintptr_t)fiber_main;
    frame[FIBER_SLOT_START] = (uintptr_t)mq_fiber_start;
    f->ctx.sp = (void *)base;
#else
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = w->stacks[i] + page_size();
    f->ctx.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc_link = NULL;
    makecontext(&f->ctx, fiber_main, 0);
#endif
#ifdef __SANITIZE_THREAD__
    f->tsan = __tsan_create_fiber(0);
#endif
}

/* Make every thread of threadgroup (x, y, z) a fiber and run them to the
 * end; 0, or -1 with w->msg. */
SCHED static int run_threadgroup(worker *w, const unsigned tgp[3])
{
    const mq_msl_launch *l = w->l;
    const unsigned *T = l->threads, *G = l->grid;
    memcpy(w->tg, tgp, sizeof w->tg);
    memset(w->tg_mem, 0xff, sizeof w->tg_mem); /* NaN in every float type */
    w->tg_used = 0;
    w->nblk = 0;
    w->tg_arrived = 0;
    w->nsg = (w->n + MQ_MSL_SIMD_WIDTH - 1) / MQ_MSL_SIMD_WIDTH;
    for (int s = 0; s < w->nsg; s++) {
        int left = w->n - s * MQ_MSL_SIMD_WIDTH;
        w->sg_size[s] = left < MQ_MSL_SIMD_WIDTH ? left : MQ_MSL_SIMD_WIDTH;
        w->sg_arrived[s] = 0;
    }
    for (int i = 0; i < w->n; i++) {
        fiber *f = &w->f[i];
        memset(&f->t, 0, sizeof f->t);
        for (int b = 0; b < MQ_MSL_MAX_BUFFERS; b++)
            f->t.buffers[b] = l->buffers[b] ? l->buffers[b]->data : NULL;
        unsigned u = (unsigned)i, pos[3] = {u % T[0], u / T[0] % T[1], u / (T[0] * T[1])};
        for (int d = 0; d < 3; d++) {
            f->t.threadgroup_position_in_grid[d] = tgp[d];
            f->t.thread_position_in_threadgroup[d] = pos[d];
            f->t.thread_position_in_grid[d] = tgp[d] * T[d] + pos[d];
            f->t.threads_per_threadgroup[d] = T[d];
            f->t.threadgroups_per_grid[d] = G[d];
        }
        f->sg = u / MQ_MSL_SIMD_WIDTH;
        f->lane = u % MQ_MSL_SIMD_WIDTH;
        f->t.thread_index_in_threadgroup = u;
        f->t.simdgroup_index_in_threadgroup = f->sg;
        f->t.thread_index_in_simdgroup = f->lane;
        f->t.simdgroups_per_threadgroup = (unsigned)w->nsg;
        f->t.threads_per_simdgroup = MQ_MSL_SIMD_WIDTH;
        f->state = F_RUN;
        f->nalloc = 0;
        f->xparity = 0;
        make_fiber(w, i);
    }
    int rc = 0;
    for (;;) {
        int ran = 0, live = 0;
        for (int i = 0; i < w->n && !w->failed; i++)
            if (w->f[i].state == F_RUN) {
                switch_to_fiber(w, i);
                ran = 1;
            }
        for (int i = 0; i < w->n; i++)
            live += w->f[i].state != F_DONE;
        if (w->failed) {
            rc = -1;
            break;
        }
        if (!live)
            break;
        if (!ran) {
            describe_deadlock(w);
            rc = -1;
            break;
        }
    }
#ifdef __SANITIZE_THREAD__
    __tsan_acquire(&w->done_sync);
    for (int i = 0; i < w->n; i++)
        __tsan_destroy_fiber(w->f[i].tsan);
#endif
    return rc;
}

static atomic_long next_tg;

SCHED static void *worker_main(void *arg)
{
    worker *w = arg;
    tw = w;
    /* a fault on a fiber's stack (an overflow) needs a stack of its own */
    stack_t ss = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16, .ss_flags = 0}, old;
    int have_ss = ss.ss_sp && sigaltstack(&ss, &old) == 0;
#ifdef __SANITIZE_THREAD__
    w->main_tsan = __tsan_get_current_fiber();
#endif
    const unsigned *G = w->l->grid;
    long total = (long)G[0] * G[1] * G[2];
    for (;;) {
        if (atomic_load(&child_stop))
            break;
        long t = atomic_fetch_add(&next_tg, 1);
        if (t >= total)
            break;
        unsigned tgp[3] = {(unsigned)(t % G[0]), (unsigned)(t / G[0] % G[1]),
                           (unsigned)(t / ((long)G[0] * G[1]))};
        if (run_threadgroup(w, tgp)) {
            report_failure(w->msg);
            break;
        }
    }
    if (have_ss) /* the thread's own (a sanitizer's) signal stack back before it ends */
        sigaltstack(&old, NULL);
    if (have_ss)
        free(ss.ss_sp);
    return NULL;
}

/* ---- faults in the child ---------------------------------------------------- */

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    /* the child ends here; formatting is not async-signal-safe, but nothing
     * else runs in this thread any more */
    uintptr_t a = (uintptr_t)si->si_addr;
    size_t P = page_size();
    char msg[512];
    snprintf(msg, sizeof msg, "%s at address %p", sig == SIGBUS ? "bus error" : "segmentation fault",
             si->si_addr);
    for (int b = 0; b < MQ_MSL_MAX_BUFFERS; b++) {
        const mq_msl_buffer *buf = child_launch->buffers[b];
        if (!buf || !buf->map)
            continue;
        uintptr_t lo = (uintptr_t)buf->map, hi = lo + buf->map_bytes;
        uintptr_t d = (uintptr_t)buf->data;
        if (a >= lo && a < lo + P)
            snprintf(msg, sizeof msg, "an access %lu bytes before the start of buffer(%d)",
                     (unsigned long)(d - a), b);
        else if (a >= lo + P && a < hi) /* past the data: its tail */
            snprintf(msg, sizeof msg,
                     "an access at byte %lu of buffer(%d), which has %zu bytes (out of bounds)",
                     (unsigned long)(a - d), b, buf->bytes);
    }
    worker *w = tw;
    if (w) {
        for (int i = 0; i < w->n; i++)
            if (a >= (uintptr_t)w->stacks[i] && a < (uintptr_t)w->stacks[i] + P)
                snprintf(msg, sizeof msg, "a thread's stack overflowed (%u bytes)", STACK_BYTES);
        size_t n = strlen(msg);
        snprintf(msg + n, sizeof msg - n, " (threadgroup %u,%u,%u, thread %u)", w->tg[0], w->tg[1],
                 w->tg[2], w->f[w->cur].t.thread_index_in_threadgroup);
    }
    report_failure(msg);
    _exit(3);
}

static int alloc_worker_stacks(worker *w)
{
    size_t P = page_size();
    for (int i = 0; i < w->n; i++) {
        w->stacks[i] = mmap(NULL, STACK_BYTES + P, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (w->stacks[i] == MAP_FAILED || mprotect(w->stacks[i], P, PROT_NONE))
            return -1;
    }
    return 0;
}

/* The child: run the grid on `workers` threads, leave the report. */
static void child_run(mq_msl_entry_fn entry, const mq_msl_launch *l, int workers)
{
    child_launch = l;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    long total = (long)l->grid[0] * l->grid[1] * l->grid[2];
    if (workers > total)
        workers = (int)total;
    if (workers < 1)
        workers = 1;
    worker **ws = calloc((size_t)workers, sizeof *ws);
    pthread_t *th = calloc((size_t)workers, sizeof *th);
    for (int i = 0; ws && th && i < workers; i++) {
        ws[i] = calloc(1, sizeof **ws);
        if (!ws[i]) {
            report_failure("out of memory for the executor's workers");
            return;
        }
        ws[i]->n = (int)(l->threads[0] * l->threads[1] * l->threads[2]);
        ws[i]->entry = entry;
        ws[i]->l = l;
        if (alloc_worker_stacks(ws[i])) {
            report_failure("cannot map the threads' stacks");
            return;
        }
    }
    if (!ws || !th) {
        report_failure("out of memory for the executor's workers");
        return;
    }
    if (workers == 1) {
        worker_main(ws[0]);
        return;
    }
    for (int i = 0; i < workers; i++)
        if (pthread_create(&th[i], NULL, worker_main, ws[i])) {
            report_failure("cannot start the executor's worker threads");
            workers = i;
            break;
        }
    for (int i = 0; i < workers; i++)
        pthread_join(th[i], NULL);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A buffer's canary after a launch: -1 with a message when the kernel wrote
 * into the slack past its end. */
static int check_canary(const mq_msl_buffer *b, int index, char *err, size_t errlen)
{
    const unsigned char *end = (const unsigned char *)b->data + b->bytes;
    const unsigned char *lim = (const unsigned char *)(((uintptr_t)end + page_size() - 1) /
                                                       page_size() * page_size());
    for (const unsigned char *p = end; p < lim; p++)
        if (*p != CANARY) {
            snprintf(err, errlen,
                     "the kernel wrote byte %zu of buffer(%d), which has %zu bytes (out of bounds)",
                     b->bytes + (size_t)(p - end), index, b->bytes);
            return -1;
        }
    return 0;
}

int mq_msl_run(const mq_msl_module *m, const char *name, const mq_msl_launch *l, char *err,
               size_t errlen)
{
    unsigned used = 0;
    mq_msl_entry_fn entry = mq_msl_kernel(m, name, &used);
    if (!entry) {
        snprintf(err, errlen, "no kernel %s in the module", name);
        return -1;
    }
    for (int b = 0; b < MQ_MSL_MAX_BUFFERS; b++)
        if ((used >> b & 1u) && !(l->buffers[b] && l->buffers[b]->map)) {
            snprintf(err, errlen, "kernel %s binds buffer(%d), but the launch sets none", name, b);
            return -1;
        }
    unsigned long threads = (unsigned long)l->threads[0] * l->threads[1] * l->threads[2];
    if (threads == 0 || threads > MAX_THREADS) {
        snprintf(err, errlen, "%lu threads per threadgroup (1 to %d)", threads, MAX_THREADS);
        return -1;
    }
    if (!l->grid[0] || !l->grid[1] || !l->grid[2])
        return 0; /* an empty grid */
    report *rep = mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (rep == MAP_FAILED) {
        snprintf(err, errlen, "cannot map the executor's report: %s", strerror(errno));
        return -1;
    }
    memset(rep, 0, sizeof *rep);
    int workers = l->workers > 0 ? l->workers : (int)sysconf(_SC_NPROCESSORS_ONLN);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "cannot fork the executor: %s", strerror(errno));
        munmap(rep, sizeof *rep);
        return -1;
    }
    if (pid == 0) {
        child_report = rep;
        atomic_store(&next_tg, 0);
        atomic_store(&child_stop, 0);
        child_run(entry, l, workers);
        _exit(atomic_load(&rep->status) ? 1 : 0);
    }
    double limit = l->timeout_s > 0 ? l->timeout_s : 600, t0 = now_s();
    int status = 0, rc = -1;
    long nap = 50000; /* ns, doubling to 20 ms */
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            snprintf(err, errlen, "lost the executor's process: %s", strerror(errno));
            munmap(rep, sizeof *rep);
            return -1;
        }
        if (now_s() - t0 > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            snprintf(err, errlen,
                     "kernel %s did not finish in %.0f s (an endless loop, or a barrier that "
                     "never completes)",
                     name, limit);
            munmap(rep, sizeof *rep);
            return -1;
        }
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        if (nap < 20000000)
            nap *= 2;
    }
    if (atomic_load(&rep->status))
        snprintf(err, errlen, "kernel %s: %s", name, rep->msg);
    else if (WIFSIGNALED(status))
        snprintf(err, errlen, "kernel %s: the executor's process died of signal %d", name,
                 WTERMSIG(status));
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        snprintf(err, errlen, "kernel %s: the executor's process exited with status %d", name,
                 WEXITSTATUS(status));
    else
        rc = 0;
    munmap(rep, sizeof *rep);
    for (int b = 0; rc == 0 && b < MQ_MSL_MAX_BUFFERS; b++)
        if (l->buffers[b] && l->buffers[b]->map && check_canary(l->buffers[b], b, err, errlen)) {
            char tmp[512];
            snprintf(tmp, sizeof tmp, "kernel %s: %s", name, err);
            snprintf(err, errlen, "%s", tmp);
            rc = -1;
        }
    return rc;
}
