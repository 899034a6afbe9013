/* msl_sched.c - one worker of the MSL executor (msl_worker.h): a
 * threadgroup's threads as fibers on their own stacks, run until each
 * returns, switched only at barriers and simdgroup exchanges, so they
 * interleave as concurrent threads may; threadgroup_barrier and
 * simdgroup_barrier wait for every thread of their scope, and a barrier some
 * threads can never reach is a deadlock reported with who waits where;
 * threadgroup memory is a 32 KB arena filled with NaN bytes before each
 * threadgroup; under ThreadSanitizer each fiber is a TSan fiber and
 * barriers are release/acquire pairs. This is the API a kernel module calls
 * (mq_msl_host_api). Apart from the launch (msl_exec.c, msl_child.c)
 * because it is what runs inside one worker thread and knows nothing of
 * processes, signals or the grid. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#include "msl_worker.h"

/* A context switch stays out of line: the sanitizers' fiber calls bracket
 * it exactly, and with ucontext (which returns twice) no caller's locals
 * need to survive it (-Wclobbered). */
#define SWITCH __attribute__((noinline))

static __thread worker *tw;

SCHED void mq_msl_worker_enter(worker *w)
{
    tw = w;
#ifdef __SANITIZE_THREAD__
    w->main_tsan = __tsan_get_current_fiber();
#endif
}

SCHED worker *mq_msl_worker_current(void)
{
    return tw;
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
SCHED int mq_msl_run_threadgroup(worker *w, const unsigned tgp[3])
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
