/* moe_run.c - the CPU model of gemm_trellis_moe (seed 004 section 7) and
 * the unfused baseline it is measured against.
 *
 * Fused: the routing is turned into a row list (each touched expert's
 * (token, slot) pairs, expert by expert, tokens in order) and the tokens'
 * activations are gathered once; then one work unit per touched expert and
 * chunk of the intermediate dimension computes gate and up for its columns
 * (FP32), SwiGLU (FP32, rounded to FP16 as the down projection's input),
 * and the down projection over its chunk of K into the chunk's partial-sum
 * plane; a last pass sums, per token, its experts' partials in slot and
 * chunk order times the routing probabilities. So there is no dispatch per
 * expert, the intermediate activations never leave the unit, and every
 * output is summed in one fixed order (results do not depend on the thread
 * count). With fuse_gate_up 0, gate and up are separate units of a first
 * dispatch (twice the units when few experts are touched).
 *
 * Each expert's rows run through a dense kernel of the CPU model: the
 * streaming decode path (gemv_stream.c) or the tile engine. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mq_internal.h"

/* context buffers (mq_ctx_buffer slots) */
enum { BUF_ROWS, BUF_X, BUF_GATE, BUF_UP, BUF_H, BUF_Y };

/* The row list: row r is one (token, slot) pair, token row_token[r], and
 * row_of maps each pair back to its row; touched expert i owns rows
 * [offs[i], offs[i] + count[i]). */
typedef struct {
    int *row_token, *row_of; /* row_of[t * top_k + slot] = r */
    int *touched, *offs, *count;
    int ntouched, rows;
} moe_rows;

typedef struct {
    const mq_moe_problem *p;
    const mq_moe_weights *mw;
    const mq_moe_candidate *c;
    const uint16_t *x;
    const float *probs;
    moe_rows r;
    int streaming;          /* the inner kernel is the decode path */
    int chunk_len, chunks;  /* the intermediate dimension's chunks */
    uint16_t *xg;           /* gathered activations [rows][hidden] */
    float *gate, *up;       /* [rows][inter] */
    uint16_t *h;            /* [rows][inter] FP16 */
    float *y;               /* [chunks][rows][hidden] */
    float *out;
    mq_ctx *ctx;
} moe_job;

/* The row list from the routing (counting sort by expert, stable in token
 * and slot order). */
static mq_status build_rows(mq_ctx *ctx, const mq_moe_problem *p, const int32_t *ids,
                            moe_rows *r, mq_error *err)
{
    int R = p->tokens * p->top_k, E = p->experts;
    int *mem = mq_ctx_buffer(ctx, BUF_ROWS, sizeof(int) * (2 * (size_t)R + 5 * (size_t)E));
    if (!mem)
        return mq_fail(err, MQ_E_NOMEM, "out of memory for the routing of %d rows", R);
    r->row_token = mem;
    r->row_of = mem + R;
    int *cnt = mem + 2 * (size_t)R, *next = cnt + E;
    r->touched = next + E;
    r->offs = r->touched + E;
    r->count = r->offs + E;
    r->rows = R;
    r->ntouched = 0;
    memset(cnt, 0, sizeof(int) * (size_t)E);
    for (int i = 0; i < R; i++)
        cnt[ids[i]]++;
    for (int e = 0, at = 0; e < E; e++) {
        next[e] = at;
        if (cnt[e]) {
            r->touched[r->ntouched] = e;
            r->offs[r->ntouched] = at;
            r->count[r->ntouched] = cnt[e];
            r->ntouched++;
        }
        at += cnt[e];
    }
    for (int i = 0; i < R; i++) {
        int row = next[ids[i]]++;
        r->row_token[row] = i / p->top_k;
        r->row_of[i] = row;
    }
    return mq_ok(err);
}

/* out (the n x pe->N plane, row stride pe->N) columns [c0, c1) = A (n x
 * pe->K) times w over K [k0, k1), through the candidate's inner kernel. */
static void run_cols(const moe_job *j, mq_scratch *s, const mq_problem *pe, const mq_weights *w,
                     const uint16_t *A, int k0, int k1, int c0, int c1, float *out)
{
    const mq_params *q = &j->c->inner.p;
    if (j->streaming) {
        mq_gemv_job g = {pe, w, A, q->tile_m, 1, mq_group_count(pe->K, pe->group), 1, pe->N, out};
        int width = mq_gemv_max_cols(mq_min(q->tile_m, pe->M));
        int g0 = k0 / pe->group, g1 = mq_cdiv(k1, pe->group);
        for (int cs = c0; cs < c1; cs += width)
            mq_gemv_part(&g, s, g0, g1, cs, mq_min(width, c1 - cs), out);
        return;
    }
    mq_tile_job t = {pe, w, A, q->tile_m, q->tile_n, q->tile_k};
    for (int row0 = 0; row0 < pe->M; row0 += q->tile_m)
        for (int col0 = c0; col0 < c1; col0 += q->tile_n)
            mq_tile_fused(&t, s, row0, col0, k0, k1, out + (size_t)row0 * pe->N + col0, pe->N);
}

static void chunk_range(const moe_job *j, int c, int *i0, int *i1)
{
    *i0 = c * j->chunk_len;
    *i1 = mq_min(j->p->inter, *i0 + j->chunk_len);
}

/* gate or up of touched expert ti, intermediate chunk c */
static void gate_up_part(const moe_job *j, mq_scratch *s, mq_moe_proj proj, int ti, int c)
{
    const mq_moe_problem *p = j->p;
    int off = j->r.offs[ti], i0, i1;
    chunk_range(j, c, &i0, &i1);
    mq_problem pe = {p->format, j->r.count[ti], p->inter, p->hidden, p->group};
    float *out = (proj == MQ_MOE_GATE ? j->gate : j->up) + (size_t)off * p->inter;
    run_cols(j, s, &pe, &j->mw->w[proj][j->r.touched[ti]], j->xg + (size_t)off * p->hidden, 0,
             p->hidden, i0, i1, out);
}

/* h = silu(gate) * up in FP32, rounded to FP16: rows [r0, r1), columns [i0, i1) */
static void swiglu_rows(const moe_job *j, int r0, int r1, int i0, int i1)
{
    int I = j->p->inter;
    for (int r = r0; r < r1; r++) {
        const float *g = j->gate + (size_t)r * I, *u = j->up + (size_t)r * I;
        uint16_t *h = j->h + (size_t)r * I;
        for (int i = i0; i < i1; i++)
            h[i] = mq_float_to_half(g[i] / (1.0f + expf(-g[i])) * u[i]);
    }
}

/* SwiGLU and the down projection's partial sum over chunk c of expert ti */
static void down_part(const moe_job *j, mq_scratch *s, int ti, int c)
{
    const mq_moe_problem *p = j->p;
    int off = j->r.offs[ti], n = j->r.count[ti], i0, i1;
    chunk_range(j, c, &i0, &i1);
    swiglu_rows(j, off, off + n, i0, i1);
    mq_problem pe = {p->format, n, p->hidden, p->inter, p->group};
    float *out = j->y + ((size_t)c * j->r.rows + off) * p->hidden;
    run_cols(j, s, &pe, &j->mw->w[MQ_MOE_DOWN][j->r.touched[ti]], j->h + (size_t)off * p->inter,
             i0, i1, 0, p->hidden, out);
}

#define GATHER_ROWS 8
static void gather_tg(void *arg, int unit, int worker)
{
    (void)worker;
    const moe_job *j = arg;
    int H = j->p->hidden;
    for (int r = unit * GATHER_ROWS; r < mq_min(j->r.rows, (unit + 1) * GATHER_ROWS); r++)
        memcpy(j->xg + (size_t)r * H, j->x + (size_t)j->r.row_token[r] * H,
               sizeof(uint16_t) * (size_t)H);
}

/* fuse_gate_up: the whole chunk in one unit */
static void fused_tg(void *arg, int unit, int worker)
{
    const moe_job *j = arg;
    mq_scratch *s = mq_ctx_scratch(j->ctx, worker);
    int ti = unit / j->chunks, c = unit % j->chunks;
    gate_up_part(j, s, MQ_MOE_GATE, ti, c);
    gate_up_part(j, s, MQ_MOE_UP, ti, c);
    down_part(j, s, ti, c);
}

/* otherwise: gate and up as units of their own ... */
static void gate_up_tg(void *arg, int unit, int worker)
{
    const moe_job *j = arg;
    int ti = unit / (2 * j->chunks), c = unit / 2 % j->chunks;
    gate_up_part(j, mq_ctx_scratch(j->ctx, worker), unit % 2 ? MQ_MOE_UP : MQ_MOE_GATE, ti, c);
}

/* ... then SwiGLU and down */
static void down_tg(void *arg, int unit, int worker)
{
    const moe_job *j = arg;
    down_part(j, mq_ctx_scratch(j->ctx, worker), unit / j->chunks, unit % j->chunks);
}

/* out[t][n] = sum over slots (in order) of prob x the sum of the slot's
 * partial planes (in chunk order), for token t and a block of columns */
#define COMBINE_COLS 256
static void combine_tg(void *arg, int unit, int worker)
{
    (void)worker;
    const moe_job *j = arg;
    const mq_moe_problem *p = j->p;
    int H = p->hidden, blocks = mq_cdiv(H, COMBINE_COLS);
    int t = unit / blocks, n0 = unit % blocks * COMBINE_COLS, nn = mq_min(COMBINE_COLS, H - n0);
    float acc[COMBINE_COLS], part[COMBINE_COLS];
    for (int n = 0; n < nn; n++)
        acc[n] = 0;
    for (int k = 0; k < p->top_k; k++) {
        int r = j->r.row_of[t * p->top_k + k];
        float pr = j->probs[t * p->top_k + k];
        for (int n = 0; n < nn; n++)
            part[n] = 0;
        for (int c = 0; c < j->chunks; c++) {
            const float *y = j->y + ((size_t)c * j->r.rows + r) * H + n0;
            for (int n = 0; n < nn; n++)
                part[n] += y[n];
        }
        for (int n = 0; n < nn; n++)
            acc[n] += pr * part[n];
    }
    memcpy(j->out + (size_t)t * H + n0, acc, sizeof(float) * (size_t)nn);
}

/* The job's buffers for `chunks` partial planes; MQ_E_NOMEM naming the size. */
static mq_status job_buffers(moe_job *j, int chunks, mq_error *err)
{
    const mq_moe_problem *p = j->p;
    size_t R = (size_t)j->r.rows, H = (size_t)p->hidden, I = (size_t)p->inter;
    j->xg = mq_ctx_buffer(j->ctx, BUF_X, R * H * sizeof(uint16_t));
    j->gate = mq_ctx_buffer(j->ctx, BUF_GATE, R * I * sizeof(float));
    j->up = mq_ctx_buffer(j->ctx, BUF_UP, R * I * sizeof(float));
    j->h = mq_ctx_buffer(j->ctx, BUF_H, R * I * sizeof(uint16_t));
    j->y = mq_ctx_buffer(j->ctx, BUF_Y, (size_t)chunks * R * H * sizeof(float));
    if (!j->xg || !j->gate || !j->up || !j->h || !j->y)
        return mq_fail(err, MQ_E_NOMEM,
                       "out of memory for the MoE block's buffers (%zu rows, hidden %zu, inter "
                       "%zu, %d chunks)", R, H, I, chunks);
    return mq_ok(err);
}

static mq_status check_run(mq_ctx *ctx, const mq_moe_problem *p, const mq_moe_weights *mw,
                           const uint16_t *x, const int32_t *ids, const float *probs,
                           float *out, mq_error *err)
{
    if (!ctx || !p || !mw || !x || !ids || !probs || !out)
        return mq_fail(err, MQ_E_ARG, "MoE run: null context, problem, weights or array");
    mq_status st = mq_moe_routing_check(p, ids, probs, err);
    if (st)
        return st;
    return mq_moe_weights_match(p, mw, err);
}

/* A job of the block: the routing's row list and the buffers for `chunks`
 * partial planes of chunk_len intermediate columns each. */
static mq_status job_init(moe_job *j, mq_ctx *ctx, const mq_moe_problem *p,
                          const mq_moe_weights *mw, const mq_moe_candidate *c,
                          const uint16_t *x, const int32_t *expert_ids, const float *probs,
                          float *out, int chunks, int chunk_len, mq_error *err)
{
    memset(j, 0, sizeof *j);
    j->p = p;
    j->mw = mw;
    j->c = c;
    j->x = x;
    j->probs = probs;
    j->out = out;
    j->ctx = ctx;
    j->chunks = chunks;
    j->chunk_len = chunk_len;
    mq_status st = build_rows(ctx, p, expert_ids, &j->r, err);
    return st ? st : job_buffers(j, chunks, err);
}

mq_status mq_moe_run(mq_ctx *ctx, const mq_moe_problem *p, const mq_moe_weights *mw,
                     const uint16_t *x, const int32_t *expert_ids, const float *probs,
                     float *out, const mq_moe_candidate *c, mq_error *err)
{
    mq_status st = check_run(ctx, p, mw, x, expert_ids, probs, out, err);
    if (st)
        return st;
    mq_moe_candidate def;
    if (!c) {
        def = mq_moe_default_candidate(p, mq_ctx_threads(ctx));
        c = &def;
    }
    if ((st = mq_moe_candidate_check(p, c, err)))
        return st;
    if (c->down_tile_n)
        return mq_fail(err, MQ_E_ILLEGAL, "down=%dx%d: the CPU model's down projection runs "
                                          "the inner kernel's tiles (a down tile is the MSL "
                                          "kernel's)", c->down_tile_n, c->down_tile_k);
    if (mq_variant_get(c->inner.variant)->layout == MQ_LAYOUT_LANE)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "inner %s: the CPU model runs the experts' seed layout (the lane block "
                       "is the MSL kernels', metal/lane_trellis_moe.metal)",
                       mq_variant_get(c->inner.variant)->name);
    moe_job j;
    if ((st = job_init(&j, ctx, p, mw, c, x, expert_ids, probs, out, c->i_split,
                       mq_moe_chunk_len(p, c), err)))
        return st;
    j.streaming = mq_variant_get(c->inner.variant)->dequant == MQ_DEQ_GEMV;
    mq_pool *pool = mq_ctx_pool(ctx);
    mq_pool_run(pool, mq_cdiv(j.r.rows, GATHER_ROWS), gather_tg, &j);
    if (c->fuse_gate_up) {
        mq_pool_run(pool, j.r.ntouched * j.chunks, fused_tg, &j);
    } else {
        mq_pool_run(pool, j.r.ntouched * j.chunks * 2, gate_up_tg, &j);
        mq_pool_run(pool, j.r.ntouched * j.chunks, down_tg, &j);
    }
    mq_pool_run(pool, p->tokens * mq_cdiv(p->hidden, COMBINE_COLS), combine_tg, &j);
    return mq_ok(err);
}

/* ---- the unfused baseline ---- */

typedef struct {
    moe_job *j;
    int off, n;
} swiglu_args;

#define SWIGLU_COLS 1024
static void swiglu_tg(void *arg, int unit, int worker)
{
    (void)worker;
    const swiglu_args *a = arg;
    int blocks = mq_cdiv(a->j->p->inter, SWIGLU_COLS);
    int r = a->off + unit / blocks, i0 = unit % blocks * SWIGLU_COLS;
    swiglu_rows(a->j, r, r + 1, i0, mq_min(a->j->p->inter, i0 + SWIGLU_COLS));
}

/* The dense kernel for n rows when the caller names none and the context
 * has no table: the decode path up to 16 rows (its K step shortened until
 * the plan is legal on both projections: 16 rows x 64 columns x 128 K is
 * over an Apple GPU's 32 KB), the prefill kernel above. */
static mq_candidate dense_rule(const mq_problem *gu, const mq_problem *dn)
{
    mq_candidate d;
    memset(&d, 0, sizeof d);
    int n = gu->M;
    d.variant = MQ_VAR_TRELLIS_PACKED;
    d.p = (mq_params){64, 64, 32, 0, 1};
    if (n > 16)
        return d;
    mq_limits lim = mq_limits_default();
    mq_plan plan;
    for (int tk = 128; tk >= 16; tk /= 2) {
        mq_candidate g = {MQ_VAR_GEMV_TRELLIS, {n, 64, tk, 0, 1}};
        if (!mq_plan_candidate(gu, &g, &lim, &plan, NULL) &&
            !mq_plan_candidate(dn, &g, &lim, &plan, NULL))
            return g;
    }
    return d;
}

mq_status mq_moe_run_unfused(mq_ctx *ctx, const mq_moe_problem *p, const mq_moe_weights *mw,
                             const uint16_t *x, const int32_t *expert_ids, const float *probs,
                             float *out, const mq_candidate *dense, mq_error *err)
{
    mq_status st = check_run(ctx, p, mw, x, expert_ids, probs, out, err);
    if (st)
        return st;
    moe_job j;
    mq_moe_candidate one; /* the combine pass reads one partial plane */
    memset(&one, 0, sizeof one);
    one.i_split = 1;
    if ((st = job_init(&j, ctx, p, mw, &one, x, expert_ids, probs, out, 1, p->inter, err)))
        return st;
    mq_pool *pool = mq_ctx_pool(ctx);
    mq_pool_run(pool, mq_cdiv(j.r.rows, GATHER_ROWS), gather_tg, &j);
    int H = p->hidden, I = p->inter, table = mq_ctx_table(ctx) != NULL;
    for (int ti = 0; ti < j.r.ntouched; ti++) {
        int e = j.r.touched[ti], off = j.r.offs[ti], n = j.r.count[ti];
        mq_problem gu = {p->format, n, I, H, p->group}, dn = {p->format, n, H, I, p->group};
        mq_candidate rule = dense_rule(&gu, &dn);
        const mq_candidate *dc = dense ? dense : table ? NULL : &rule;
        const uint16_t *xe = j.xg + (size_t)off * H;
        mq_error why;
        if ((st = mq_gemm(ctx, &gu, &mw->w[MQ_MOE_GATE][e], xe, j.gate + (size_t)off * I, dc,
                          NULL, &why)) ||
            (st = mq_gemm(ctx, &gu, &mw->w[MQ_MOE_UP][e], xe, j.up + (size_t)off * I, dc, NULL,
                          &why)))
            return mq_fail(err, st, "expert %d (%d rows), gate/up: %s", e, n, why.msg);
        swiglu_args sa = {&j, off, n};
        mq_pool_run(pool, n * mq_cdiv(I, SWIGLU_COLS), swiglu_tg, &sa);
        if ((st = mq_gemm(ctx, &dn, &mw->w[MQ_MOE_DOWN][e], j.h + (size_t)off * I,
                          j.y + (size_t)off * H, dc, NULL, &why)))
            return mq_fail(err, st, "expert %d (%d rows), down: %s", e, n, why.msg);
    }
    mq_pool_run(pool, p->tokens * mq_cdiv(H, COMBINE_COLS), combine_tg, &j);
    return mq_ok(err);
}
