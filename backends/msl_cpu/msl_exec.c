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
 * of the caller. This file holds the buffers and the launch as the caller
 * sees it; the child's side is msl_child.c, a worker's scheduler (fibers,
 * barriers, the kernels' API) msl_sched.c (msl_worker.h). */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "msl_worker.h"

#define CANARY 0xA5

/* ---- buffers ---------------------------------------------------------------- */

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

/* ---- a launch ---------------------------------------------------------------- */

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
    mq_msl_module_bind(m, &mq_msl_host_api);
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
    mq_msl_report *rep = mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
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
        mq_msl_child_run(entry, l, workers, rep);
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
