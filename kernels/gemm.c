/* gemm.c - the context (worker pool, per-worker threadgroup memory, the
 * split-K workspace, the optional trace) and mq_gemm: plan a candidate, then
 * run its schedule: a 2D grid, 1D stripes over column-major tiles x
 * k_parallel, or a grid with split_k slices; K-split schedules write FP32
 * partials to the workspace and a second dispatch sums them in slice order
 * (deterministic). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "simd.h"
#include "mq_internal.h"

#define MQ_MAX_WORKERS 1024

struct mq_ctx {
    mq_pool *pool;
    int threads;
    mq_scratch *scratch;
    float *workspace;
    size_t workspace_cap;
    const mq_table *table; /* asked when mq_gemm gets no candidate */
    /* the table's last answers (a model choice walks the candidate grid:
     * made once per problem), replaced round-robin */
    struct {
        mq_problem p;
        mq_limits lim;
        int has_lim;
        mq_candidate c;
    } answers[16];
    int nanswers, next_answer;
    void *bufs[MQ_CTX_BUFFERS]; /* mq_ctx_buffer's, kept between calls */
    size_t buf_cap[MQ_CTX_BUFFERS];
    mq_trace_entry *trace;
    int trace_cap;
    int *trace_count;
    atomic_int trace_n;
};

static void free_scratch(mq_ctx *ctx)
{
    for (int i = 0; ctx->scratch && i < ctx->threads; i++) {
        free(ctx->scratch[i].a_tile);
        free(ctx->scratch[i].b_tile);
        free(ctx->scratch[i].acc);
    }
    free(ctx->scratch);
}

mq_status mq_ctx_create(int threads, mq_ctx **out, mq_error *err)
{
    if (!out)
        return mq_fail(err, MQ_E_ARG, "mq_ctx_create: null output");
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    if (threads > MQ_MAX_WORKERS)
        return mq_fail(err, MQ_E_ARG, "%d worker threads is more than %d", threads,
                       MQ_MAX_WORKERS);
    mq_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return mq_fail(err, MQ_E_NOMEM, "out of memory for the context");
    ctx->threads = threads;
    ctx->scratch = calloc((size_t)threads, sizeof *ctx->scratch);
    size_t tile = (size_t)MQ_SCRATCH_FLOATS * sizeof(float);
    int ok = ctx->scratch != NULL;
    for (int i = 0; ok && i < threads; i++) {
        ctx->scratch[i].a_tile = aligned_alloc(64, tile);
        ctx->scratch[i].b_tile = aligned_alloc(64, tile);
        ctx->scratch[i].acc = aligned_alloc(64, tile);
        ok = ctx->scratch[i].a_tile && ctx->scratch[i].b_tile && ctx->scratch[i].acc;
    }
    if (!ok) {
        free_scratch(ctx);
        free(ctx);
        return mq_fail(err, MQ_E_NOMEM, "out of memory for threadgroup memory of %d workers",
                       threads);
    }
    mq_status st = mq_pool_create(threads, &ctx->pool, err);
    if (st) {
        free_scratch(ctx);
        free(ctx);
        return st;
    }
    *out = ctx;
    return mq_ok(err);
}

void mq_ctx_destroy(mq_ctx *ctx)
{
    if (!ctx)
        return;
    mq_pool_destroy(ctx->pool);
    free_scratch(ctx);
    free(ctx->workspace);
    for (int i = 0; i < MQ_CTX_BUFFERS; i++)
        free(ctx->bufs[i]);
    free(ctx);
}

int mq_ctx_threads(const mq_ctx *ctx) { return ctx ? ctx->threads : 0; }

mq_pool *mq_ctx_pool(mq_ctx *ctx) { return ctx->pool; }
mq_scratch *mq_ctx_scratch(mq_ctx *ctx, int worker) { return &ctx->scratch[worker]; }
const mq_table *mq_ctx_table(const mq_ctx *ctx) { return ctx->table; }

void *mq_ctx_buffer(mq_ctx *ctx, int slot, size_t bytes)
{
    if (slot < 0 || slot >= MQ_CTX_BUFFERS)
        return NULL;
    if (bytes <= ctx->buf_cap[slot] && ctx->bufs[slot])
        return ctx->bufs[slot];
    size_t cap = (bytes + 63) & ~(size_t)63;
    void *b = aligned_alloc(64, cap ? cap : 64);
    if (!b)
        return NULL;
    free(ctx->bufs[slot]);
    ctx->bufs[slot] = b;
    ctx->buf_cap[slot] = cap;
    return b;
}

typedef struct {
    const float *base;
    size_t floats, chunk; /* chunk: floats per threadgroup, a multiple of 64 */
    float *sums;          /* one per worker */
} read_job;

static void read_chunk(void *argp, int tg, int worker)
{
    read_job *j = argp;
    size_t lo = (size_t)tg * j->chunk, hi = lo + j->chunk < j->floats ? lo + j->chunk : j->floats;
    if (!j->base || lo >= hi)
        return;
    const float *p = j->base;
    v16f s0 = v16f_splat(0), s1 = s0, s2 = s0, s3 = s0;
    size_t i = lo;
    for (; i + 64 <= hi; i += 64) {
        s0 += v16f_load(p + i);
        s1 += v16f_load(p + i + 16);
        s2 += v16f_load(p + i + 32);
        s3 += v16f_load(p + i + 48);
    }
    v16f s = (s0 + s1) + (s2 + s3);
    float t = 0;
    for (int k = 0; k < 16; k++)
        t += s[k];
    for (; i < hi; i++)
        t += p[i];
    j->sums[worker] += t;
}

float mq_ctx_read(mq_ctx *ctx, const void *buf, size_t bytes)
{
    if (!ctx)
        return 0;
    float sums[MQ_MAX_WORKERS] = {0};
    int count = 4 * ctx->threads;
    read_job j = {buf, buf ? bytes / sizeof(float) : 0, 0, sums};
    j.chunk = ((j.floats + (size_t)count - 1) / (size_t)count + 63) & ~(size_t)63;
    if (j.chunk == 0)
        j.chunk = 64;
    mq_pool_run(ctx->pool, count, read_chunk, &j);
    float t = 0;
    for (int w = 0; w < ctx->threads; w++)
        t += sums[w];
    return t;
}

void mq_ctx_set_table(mq_ctx *ctx, const mq_table *t)
{
    if (ctx) {
        ctx->table = t;
        ctx->nanswers = ctx->next_answer = 0;
    }
}

/* The context's table's candidate for p, remembered. */
static mq_candidate table_answer(mq_ctx *ctx, const mq_problem *p, const mq_limits *lim)
{
    const int cap = (int)(sizeof ctx->answers / sizeof ctx->answers[0]);
    for (int i = 0; i < ctx->nanswers; i++)
        if (!memcmp(&ctx->answers[i].p, p, sizeof *p) && ctx->answers[i].has_lim == !!lim &&
            (!lim || !memcmp(&ctx->answers[i].lim, lim, sizeof *lim)))
            return ctx->answers[i].c;
    mq_candidate c = mq_table_lookup(ctx->table, p, lim, NULL);
    int slot = ctx->nanswers < cap ? ctx->nanswers++ : ctx->next_answer++ % cap;
    ctx->answers[slot].p = *p;
    ctx->answers[slot].has_lim = !!lim;
    if (lim)
        ctx->answers[slot].lim = *lim;
    ctx->answers[slot].c = c;
    return c;
}

void mq_ctx_set_trace(mq_ctx *ctx, mq_trace_entry *buf, int cap, int *count)
{
    if (!ctx)
        return;
    ctx->trace = buf;
    ctx->trace_cap = buf ? cap : 0;
    ctx->trace_count = buf ? count : NULL;
    atomic_store(&ctx->trace_n, 0);
    if (count)
        *count = 0;
}

typedef void (*tile_fn)(const mq_tile_job *, mq_scratch *, int, int, int, int, float *, int);

typedef struct {
    mq_ctx *ctx;
    mq_tile_job job;
    const mq_plan *plan;
    tile_fn tile;
    float *C;
    float *partials; /* NULL when K is not split */
} run_args;

static void record(mq_ctx *ctx, int tg, int row, int col, int slice)
{
    if (!ctx->trace)
        return;
    int i = atomic_fetch_add(&ctx->trace_n, 1);
    if (i < ctx->trace_cap) {
        mq_trace_entry e = {tg, row, col, slice};
        ctx->trace[i] = e;
    }
}

/* Compute output tile (row, col) over K slice `slice` into C or its partials. */
static void run_unit(const run_args *ra, int worker, int tg, int row, int col, int slice)
{
    const mq_problem *p = ra->job.p;
    int row0 = row * ra->job.tile_m, col0 = col * ra->job.tile_n;
    int k0 = slice * ra->plan->k_slice_len;
    int k1 = slice == ra->plan->k_slices - 1 ? p->K : k0 + ra->plan->k_slice_len;
    float *dst = ra->partials ? ra->partials + (size_t)slice * p->M * p->N : ra->C;
    ra->tile(&ra->job, &ra->ctx->scratch[worker], row0, col0, k0, k1,
             dst + (size_t)row0 * p->N + col0, p->N);
    record(ra->ctx, tg, row, col, slice);
}

static void grid_tg(void *arg, int tg, int worker)
{
    const run_args *ra = arg;
    int per_slice = ra->plan->grid_x * ra->plan->grid_y;
    int slice = tg / per_slice, t = tg % per_slice;
    run_unit(ra, worker, tg, t / ra->plan->grid_x, t % ra->plan->grid_x, slice);
}

/* Marlin stripes: a contiguous range of the column-major work list. */
static void striped_tg(void *arg, int tg, int worker)
{
    const run_args *ra = arg;
    const mq_plan *pl = ra->plan;
    int start = tg * pl->work_per_tg;
    int end = mq_min(start + pl->work_per_tg, pl->work_units);
    for (int wu = start; wu < end; wu++) {
        int tile_linear = wu / pl->k_slices, slice = wu % pl->k_slices;
        run_unit(ra, worker, tg, tile_linear % pl->m_tiles, tile_linear / pl->m_tiles, slice);
    }
}

/* Reduction pass: one threadgroup per output row, slices summed in order. */
static void reduce_tg(void *arg, int row, int worker)
{
    (void)worker;
    const run_args *ra = arg;
    int N = ra->job.p->N, S = ra->plan->k_slices;
    size_t plane = (size_t)ra->job.p->M * N;
    const float *src = ra->partials + (size_t)row * N;
    float *dst = ra->C + (size_t)row * N;
    int n = 0;
    for (; n + 16 <= N; n += 16) {
        v16f s = v16f_load(src + n);
        for (int k = 1; k < S; k++)
            s += v16f_load(src + (size_t)k * plane + n);
        v16f_store(dst + n, s);
    }
    for (; n < N; n++) {
        float s = src[n];
        for (int k = 1; k < S; k++)
            s += src[(size_t)k * plane + n];
        dst[n] = s;
    }
}

/* The context's workspace grown to at least `bytes` (kept between calls). */
static mq_status ensure_workspace(mq_ctx *ctx, size_t bytes, const char *what, mq_error *err)
{
    if (bytes <= ctx->workspace_cap)
        return MQ_OK;
    float *ws = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!ws)
        return mq_fail(err, MQ_E_NOMEM, "out of memory for a %zu-byte %s workspace", bytes,
                       what);
    free(ctx->workspace);
    ctx->workspace = ws;
    ctx->workspace_cap = bytes;
    return MQ_OK;
}

typedef struct {
    mq_ctx *ctx;
    mq_gemv_job job;
    float *C;
} gemv_args;

static void gemv_unit_tg(void *arg, int unit, int worker)
{
    const gemv_args *ga = arg;
    mq_gemv_unit(&ga->job, &ga->ctx->scratch[worker], unit);
    record(ga->ctx, unit, 0, unit % ga->job.col_ranges, unit / ga->job.col_ranges);
}

static void gemv_reduce_tg(void *arg, int chunk, int worker)
{
    (void)worker;
    const gemv_args *ga = arg;
    mq_gemv_reduce(&ga->job, chunk, ga->C);
}

/* The decode path's CPU schedule (gemv_stream.c), not the GPU grid. */
static mq_status run_gemv(mq_ctx *ctx, const mq_problem *p, const mq_weights *w,
                          const uint16_t *A, float *C, const mq_candidate *c, mq_error *err)
{
    gemv_args ga = {ctx, {p, w, A, c->p.tile_m, 0, 0, 0, 0, C}, C};
    mq_gemv_schedule(&ga.job, ctx->threads);
    size_t need = mq_gemv_workspace_floats(&ga.job) * sizeof(float);
    mq_status st = ensure_workspace(ctx, need, "decode", err);
    if (st)
        return st;
    if (need)
        ga.job.out = ctx->workspace;
    mq_pool_run(ctx->pool, ga.job.slices * ga.job.col_ranges, gemv_unit_tg, &ga);
    if (need)
        mq_pool_run(ctx->pool,
                    (int)(((size_t)p->M * p->N + MQ_GEMV_REDUCE_CHUNK - 1) / MQ_GEMV_REDUCE_CHUNK),
                    gemv_reduce_tg, &ga);
    if (ctx->trace_count)
        *ctx->trace_count = mq_min(atomic_load(&ctx->trace_n), ctx->trace_cap);
    return mq_ok(err);
}

mq_status mq_gemm(mq_ctx *ctx, const mq_problem *p, const mq_weights *w, const uint16_t *A,
                  float *C, const mq_candidate *c, const mq_limits *lim, mq_error *err)
{
    if (!ctx || !p || !w || !A || !C)
        return mq_fail(err, MQ_E_ARG, "mq_gemm: null context, problem, weights or array");
    mq_candidate def;
    if (!c) {
        mq_status st = mq_problem_check(p, err);
        if (st)
            return st;
        def = table_answer(ctx, p, lim);
        c = &def;
    }
    mq_plan plan;
    mq_status st = mq_plan_candidate(p, c, lim, &plan, err);
    if (st)
        return st;
    return mq_gemm_planned(ctx, p, w, A, C, c, &plan, err);
}

/* Does the plan cover this problem with this candidate's tiles? A plan made
 * for another problem would send threadgroups past the arrays. */
static int plan_covers(const mq_problem *p, const mq_candidate *c, const mq_plan *pl)
{
    if (mq_variant_get(c->variant)->dequant == MQ_DEQ_GEMV)
        return 1; /* the decode path walks the problem itself (run_gemv) */
    long units = (long)pl->m_tiles * pl->n_tiles * pl->k_slices;
    return c->p.tile_m > 0 && c->p.tile_n > 0 &&
           pl->m_tiles == (p->M + c->p.tile_m - 1) / c->p.tile_m &&
           pl->n_tiles == (p->N + c->p.tile_n - 1) / c->p.tile_n && pl->k_slices >= 1 &&
           (long)(pl->k_slices - 1) * pl->k_slice_len + pl->k_last_len == p->K &&
           pl->work_units == units && pl->threadgroups >= 1 && pl->threadgroups <= units &&
           (long)pl->work_per_tg * pl->threadgroups >= units &&
           (pl->k_slices == 1 ||
            pl->workspace_bytes >= (size_t)pl->k_slices * p->M * p->N * sizeof(float));
}

mq_status mq_gemm_planned(mq_ctx *ctx, const mq_problem *p, const mq_weights *w,
                          const uint16_t *A, float *C, const mq_candidate *c, const mq_plan *pl,
                          mq_error *err)
{
    if (!ctx || !p || !w || !A || !C || !c || !pl)
        return mq_fail(err, MQ_E_ARG,
                       "mq_gemm_planned: null context, problem, weights, array, candidate or plan");
    if (!mq_variant_get(c->variant) || !plan_covers(p, c, pl))
        return mq_fail(err, MQ_E_ARG, "mq_gemm_planned: the plan is not this problem's (%dx%dx%d)",
                       p->M, p->N, p->K);
    const mq_plan plan = *pl;
    mq_status st;
    if (w->format != p->format || w->K != p->K || w->N != p->N || w->group != p->group)
        return mq_fail(err, MQ_E_WEIGHTS,
                       "weights are %s K=%d N=%d group %d but the problem is %s K=%d N=%d "
                       "group %d",
                       mq_format_name(w->format), w->K, w->N, w->group,
                       mq_format_name(p->format), p->K, p->N, p->group);
    int arrays = mq_format_is_trellis(w->format)
                     ? w->indices && w->tscales && w->grid && w->su && w->sv
                     : w->packed && w->scales && (w->format != MQ_FMT_U4 || w->zeros);
    if (!arrays)
        return mq_fail(err, MQ_E_WEIGHTS, "%s weights are missing an array",
                       mq_format_name(w->format));
    const mq_variant_info *vi = mq_variant_get(c->variant);
    if (vi->dequant == MQ_DEQ_GEMV)
        return run_gemv(ctx, p, w, A, C, c, err);
    if ((st = ensure_workspace(ctx, plan.workspace_bytes, "split-K", err)))
        return st;
    run_args ra;
    ra.ctx = ctx;
    ra.job.p = p;
    ra.job.w = w;
    ra.job.A = A;
    ra.job.tile_m = c->p.tile_m;
    ra.job.tile_n = c->p.tile_n;
    ra.job.tile_k = c->p.tile_k;
    ra.plan = &plan;
    ra.tile = vi->dequant == MQ_DEQ_STAGED ? mq_tile_staged : mq_tile_fused;
    ra.C = C;
    ra.partials = plan.k_slices > 1 ? ctx->workspace : NULL;
    mq_pool_run(ctx->pool, plan.threadgroups,
                vi->schedule == MQ_SCHED_STRIPED ? striped_tg : grid_tg, &ra);
    if (ra.partials)
        mq_pool_run(ctx->pool, p->M, reduce_tg, &ra);
    if (ctx->trace_count)
        *ctx->trace_count = mq_min(atomic_load(&ctx->trace_n), ctx->trace_cap);
    return mq_ok(err);
}
