/* msl_worker.h - the MSL executor's internals, shared by its three files:
 *   msl_exec.c   buffers and the launch as its caller sees it: checks, the
 *                forked child, the timeout, the report, the canaries;
 *   msl_child.c  the launch's child process: worker threads over the grid,
 *                the fault handler, the report it leaves its parent;
 *   msl_sched.c  one worker's scheduler: a threadgroup's threads as fibers,
 *                barriers, threadgroup memory, the API kernels call.
 * Calls run one way only: msl_exec.c -> msl_child.c -> msl_sched.c
 * (tests/check_cycles.sh). Not for the executor's users (msl_exec.h). */
#ifndef MQ_MSL_WORKER_H
#define MQ_MSL_WORKER_H

#include <stdatomic.h>
#include <stddef.h>
#include <unistd.h>

#include "msl_exec.h"

/* The scheduler's own bookkeeping is shared by the fibers of a worker by
 * design (one runs at a time); TSan must see only the kernels' accesses and
 * the barriers' release/acquire, so these functions are not instrumented. */
#define SCHED __attribute__((no_sanitize("thread")))

#include "msl_fiber.h"

#define MAX_THREADS 1024 /* per threadgroup, as on Apple GPUs */
#define MAX_SGS (MAX_THREADS / MQ_MSL_SIMD_WIDTH)
#define XBYTES 64        /* the largest value one lane exchanges */
#define STACK_BYTES (256u * 1024u)

static inline size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* ---- a worker and its fibers (msl_sched.c runs them) ---------------------- */

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

/* The API a module's kernels call (barriers, threadgroup memory, SIMD
 * exchange), handed to a module before it runs (mq_msl_module_bind). */
extern const mq_msl_api mq_msl_host_api;

/* The calling OS thread runs w from now on (the kernels' API finds it). */
void mq_msl_worker_enter(worker *w);
/* The worker of the calling thread (NULL before mq_msl_worker_enter): the
 * fault handler names the thread that faulted. */
worker *mq_msl_worker_current(void);
/* Make every thread of threadgroup tgp a fiber and run them to the end; 0,
 * or -1 with w->msg (a failure, a deadlock). */
int mq_msl_run_threadgroup(worker *w, const unsigned tgp[3]);

/* ---- the launch's child (msl_child.c) ------------------------------------- */

/* The report a launch's child leaves for its parent (a shared page). */
typedef struct {
    atomic_int status; /* 0 ok, else failed */
    char msg[1024];
} mq_msl_report;

/* In the forked child: run the grid of l with kernel entry on `workers`
 * threads; the first failure goes into *rep. */
void mq_msl_child_run(mq_msl_entry_fn entry, const mq_msl_launch *l, int workers,
                      mq_msl_report *rep);

#endif
