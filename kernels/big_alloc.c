/* big_alloc.c - the weight arrays' memory: large arrays 2 MiB aligned with
 * a transparent-huge-page hint (a kernel walks B rows N words apart; with
 * 4 KiB pages nearly every row is a TLB miss), and an opt-in cache of freed
 * large blocks (mq_weights_cache_limit). A process that sets up the weights
 * of many shapes in turn (bench over a suite: a set of cold copies twice
 * the last-level cache per shape) otherwise has the kernel fault in and
 * zero fresh pages for every shape; on the development VM that was 46% of
 * a nightly bench process's time. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "grow.h"
#include "mq_internal.h"

#define HUGE_BYTES ((size_t)2 << 20)

typedef struct {
    void *p;
    size_t bytes;
} block;

typedef struct {
    block *b;
    int n, cap;
} block_list;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block_list live, cached; /* large blocks handed out; freed ones kept */
static size_t cached_bytes, cache_limit;

static int list_push(block_list *l, void *p, size_t bytes)
{
    if (mq_grow(&l->b, &l->cap, l->n + 1, sizeof *l->b, 64))
        return -1;
    l->b[l->n].p = p;
    l->b[l->n].bytes = bytes;
    l->n++;
    return 0;
}

static void list_remove(block_list *l, int i)
{
    l->b[i] = l->b[--l->n];
}

void mq_weights_cache_limit(size_t bytes)
{
    pthread_mutex_lock(&lock);
    cache_limit = bytes;
    while (cached_bytes > cache_limit && cached.n) { /* drop the newest first */
        cached_bytes -= cached.b[cached.n - 1].bytes;
        free(cached.b[cached.n - 1].p);
        cached.n--;
    }
    pthread_mutex_unlock(&lock);
}

/* mq_big_alloc without the zeroing, for callers that write every byte
 * they read (mq_weights_copies) */
static void *big_alloc(size_t count, size_t size, int zero);

void *mq_big_alloc(size_t count, size_t size)
{
    return big_alloc(count, size, 1);
}

void *mq_big_alloc_raw(size_t count, size_t size)
{
    return big_alloc(count, size, 0);
}

static void *big_alloc(size_t count, size_t size, int zero)
{
    size_t bytes = count * size;
    if (count && bytes / count != size)
        return NULL;
    if (bytes < HUGE_BYTES)
        return zero ? calloc(count ? count : 1, size) : malloc(bytes ? bytes : 1);
    /* blocks of 256 MiB and more in steps of 128 MiB, so weight sets of
     * nearly the same size (bench's cold copies: twice the last-level
     * cache, whatever the shape) fit each other's cached blocks */
    size_t step = bytes >= ((size_t)256 << 20) ? (size_t)128 << 20 : HUGE_BYTES;
    size_t rounded = (bytes + step - 1) / step * step;
    void *p = NULL;
    pthread_mutex_lock(&lock);
    int best = cached.n; /* the smallest cached block that fits */
    for (int i = 0; i < cached.n; i++)
        if (cached.b[i].bytes >= rounded &&
            (best == cached.n || cached.b[i].bytes < cached.b[best].bytes))
            best = i;
    if (best < cached.n && list_push(&live, cached.b[best].p, cached.b[best].bytes) == 0) {
        p = cached.b[best].p;
        cached_bytes -= cached.b[best].bytes;
        list_remove(&cached, best);
    }
    pthread_mutex_unlock(&lock);
    if (!p) {
        p = aligned_alloc(HUGE_BYTES, rounded);
        if (!p)
            return NULL;
#ifdef MADV_HUGEPAGE
        madvise(p, rounded, MADV_HUGEPAGE); /* a hint: failure changes nothing */
#endif
        pthread_mutex_lock(&lock);
        int bad = list_push(&live, p, rounded);
        pthread_mutex_unlock(&lock);
        if (bad) {
            free(p);
            return NULL;
        }
    }
    if (zero)
        memset(p, 0, bytes);
    return p;
}

void mq_big_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&lock);
    int i = live.n;
    while (i > 0 && live.b[i - 1].p != p) /* the newest first: frees mirror allocations */
        i--;
    if (i == 0) { /* a small array (calloc) */
        pthread_mutex_unlock(&lock);
        free(p);
        return;
    }
    size_t bytes = live.b[i - 1].bytes;
    list_remove(&live, i - 1);
    if (cached_bytes + bytes <= cache_limit && list_push(&cached, p, bytes) == 0) {
        cached_bytes += bytes;
        p = NULL;
    }
    pthread_mutex_unlock(&lock);
    free(p);
}
