/* pool.c - the persistent worker pool that runs threadgroups. Threads are
 * created once per context; a dispatch hands out threadgroup ids through an
 * atomic counter (as a GPU hands threadgroups to free cores) and the caller
 * works as worker 0. Idle workers spin briefly, then sleep on a condition
 * variable, so back-to-back dispatches do not pay a wake-up each. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "mq_internal.h"

#define SPIN_BEFORE_SLEEP 200000

struct mq_pool {
    int threads;
    pthread_t *tids;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;      /* bumped once per dispatch */
    atomic_int next;      /* next threadgroup id to hand out */
    atomic_int busy;      /* background workers still inside the dispatch */
    atomic_int stop;
    int count;
    mq_pool_fn fn;
    void *arg;
};

typedef struct {
    mq_pool *pool;
    int id;
} worker_arg;

static void drain(mq_pool *p, int worker)
{
    int tg;
    while ((tg = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed)) < p->count)
        p->fn(p->arg, tg, worker);
}

static void *worker_main(void *argp)
{
    worker_arg wa = *(worker_arg *)argp;
    free(argp);
    mq_pool *p = wa.pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop)) {
            if (++spins < SPIN_BEFORE_SLEEP)
                continue;
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = g;
        drain(p, wa.id);
        atomic_fetch_sub_explicit(&p->busy, 1, memory_order_release);
    }
}

mq_status mq_pool_create(int threads, mq_pool **out, mq_error *err)
{
    mq_pool *p = calloc(1, sizeof *p);
    if (!p)
        return mq_fail(err, MQ_E_NOMEM, "out of memory for the worker pool");
    p->threads = threads;
    p->tids = calloc((size_t)threads, sizeof *p->tids);
    if (!p->tids) {
        free(p);
        return mq_fail(err, MQ_E_NOMEM, "out of memory for the worker pool");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (int i = 1; i < threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa) {
            wa->pool = p;
            wa->id = i;
        }
        if (!wa || pthread_create(&p->tids[i], NULL, worker_main, wa) != 0) {
            free(wa);
            p->threads = i; /* join the ones that started */
            mq_pool_destroy(p);
            return mq_fail(err, MQ_E_SYSTEM, "could not start worker thread %d of %d", i,
                           threads);
        }
    }
    *out = p;
    return mq_ok(err);
}

void mq_pool_destroy(mq_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->threads; i++)
        pthread_join(p->tids[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->tids);
    free(p);
}

void mq_pool_run(mq_pool *p, int count, mq_pool_fn fn, void *arg)
{
    if (count <= 0)
        return;
    p->fn = fn;
    p->arg = arg;
    p->count = count;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->busy, p->threads - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    int spins = 0;
    while (atomic_load_explicit(&p->busy, memory_order_acquire) > 0)
        if (++spins > 1000)
            sched_yield();
}
