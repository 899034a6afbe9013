/* msl_child.c - the forked child of an MSL executor launch (msl_worker.h):
 * worker threads take the grid's threadgroups in turn (msl_sched.c runs
 * each), the first failure stops them all, a fault (SIGSEGV, SIGBUS) is
 * named by the buffer, offset and thread it hit, and the outcome goes into
 * the report its parent reads (msl_exec.c). Apart from the parent's side
 * because all of it runs only in the child, where a crash is an answer,
 * not an accident. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "msl_worker.h"

static mq_msl_report *child_report;       /* in the child */
static const mq_msl_launch *child_launch; /* for the fault handler */
static atomic_int child_stop;
static atomic_long next_tg;

static void report_failure(const char *msg)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&child_report->status, &expected, 1))
        snprintf(child_report->msg, sizeof child_report->msg, "%s", msg);
    atomic_store(&child_stop, 1);
}

SCHED static void *worker_main(void *arg)
{
    worker *w = arg;
    mq_msl_worker_enter(w);
    /* a fault on a fiber's stack (an overflow) needs a stack of its own */
    stack_t ss = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16, .ss_flags = 0}, old;
    int have_ss = ss.ss_sp && sigaltstack(&ss, &old) == 0;
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
        if (mq_msl_run_threadgroup(w, tgp)) {
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
    worker *w = mq_msl_worker_current();
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

void mq_msl_child_run(mq_msl_entry_fn entry, const mq_msl_launch *l, int workers,
                      mq_msl_report *rep)
{
    child_report = rep;
    atomic_store(&next_tg, 0);
    atomic_store(&child_stop, 0);
    child_run(entry, l, workers);
}
