/* moe.c - the mixture-of-experts block of seed 004 section 7 as data: the
 * problem, per-expert trellis weights in the contiguous layout, routings
 * (checked, generated reproducibly, summarized) and the float64 reference
 * of the whole block with the error bound of the kernels' arithmetic. The
 * CPU model that runs it is moe_run.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mq_internal.h"

static const char *const proj_names[MQ_MOE_PROJS] = {"gate", "up", "down"};

const char *mq_moe_proj_name(mq_moe_proj j)
{
    return (unsigned)j < MQ_MOE_PROJS ? proj_names[j] : "?";
}

/* The largest sizes a block may have: a bound that keeps every product of
 * them (weights, workspace) within size_t and int arithmetic. */
#define MOE_MAX_DIM (1 << 17)
#define MOE_MAX_EXPERTS 4096
#define MOE_MAX_TOKENS (1 << 16)

mq_status mq_moe_problem_check(const mq_moe_problem *p, mq_error *err)
{
    if (!p)
        return mq_fail(err, MQ_E_ARG, "null MoE problem");
    if (!mq_format_is_trellis(p->format))
        return mq_fail(err, MQ_E_SHAPE,
                       "the MoE block takes a trellis format (trellis2/3/4), not %s",
                       mq_format_name(p->format));
    if (p->tokens < 1 || p->tokens > MOE_MAX_TOKENS)
        return mq_fail(err, MQ_E_SHAPE, "tokens=%d is outside 1..%d", p->tokens, MOE_MAX_TOKENS);
    if (p->experts < 1 || p->experts > MOE_MAX_EXPERTS)
        return mq_fail(err, MQ_E_SHAPE, "experts=%d is outside 1..%d", p->experts,
                       MOE_MAX_EXPERTS);
    if (p->top_k < 1 || p->top_k > p->experts)
        return mq_fail(err, MQ_E_SHAPE, "top_k=%d must be between 1 and experts=%d", p->top_k,
                       p->experts);
    if (p->hidden < 1 || p->hidden > MOE_MAX_DIM || p->inter < 1 || p->inter > MOE_MAX_DIM)
        return mq_fail(err, MQ_E_SHAPE, "hidden=%d and inter=%d must be in 1..%d", p->hidden,
                       p->inter, MOE_MAX_DIM);
    if (p->group != 32 && p->group != 64 && p->group != 128)
        return mq_fail(err, MQ_E_SHAPE, "group size %d is not one of 32, 64, 128", p->group);
    if (mq_check_k(p->format, p->hidden, p->group, NULL))
        return mq_fail(err, MQ_E_SHAPE,
                       "hidden=%d (K of gate and up) is not a multiple of the 16-row trellis "
                       "tile", p->hidden);
    if (mq_check_k(p->format, p->inter, p->group, NULL))
        return mq_fail(err, MQ_E_SHAPE,
                       "inter=%d (K of down) is not a multiple of the 16-row trellis tile",
                       p->inter);
    return mq_ok(err);
}

/* K and N of projection j */
static void proj_dims(const mq_moe_weights *mw, mq_moe_proj j, int *K, int *N)
{
    *K = j == MQ_MOE_DOWN ? mw->inter : mw->hidden;
    *N = j == MQ_MOE_DOWN ? mw->hidden : mw->inter;
}

static size_t tile_bytes_of(mq_format f, int K, int N)
{
    return (size_t)mq_cdiv(K, MQ_TRELLIS_TILE) * (size_t)mq_cdiv(N, MQ_TRELLIS_TILE) *
           (size_t)mq_trellis_tile_bytes(mq_format_bits(f));
}

void mq_moe_weights_free(mq_moe_weights *mw)
{
    if (!mw)
        return;
    for (int j = 0; j < MQ_MOE_PROJS; j++) {
        free(mw->indices[j]);
        free(mw->tscales[j]);
        free(mw->su[j]);
        free(mw->sv[j]);
        free(mw->grid[j]);
        free(mw->w[j]);
    }
    memset(mw, 0, sizeof *mw);
}

mq_status mq_moe_weights_alloc(mq_moe_weights *mw, const mq_moe_problem *p, mq_error *err)
{
    if (!mw)
        return mq_fail(err, MQ_E_ARG, "mq_moe_weights_alloc: null weights");
    memset(mw, 0, sizeof *mw);
    mq_status st = mq_moe_problem_check(p, err);
    if (st)
        return st;
    mw->format = p->format;
    mw->experts = p->experts;
    mw->hidden = p->hidden;
    mw->inter = p->inter;
    mw->group = p->group;
    int L = 1 << mq_format_bits(p->format), ok = 1;
    size_t E = (size_t)p->experts;
    for (int j = 0; j < MQ_MOE_PROJS && ok; j++) {
        int K, N;
        proj_dims(mw, (mq_moe_proj)j, &K, &N);
        size_t tb = tile_bytes_of(p->format, K, N), G = (size_t)mq_group_count(K, p->group);
        mw->indices[j] = calloc(E, tb);
        mw->tscales[j] = calloc(E * G * (size_t)N, sizeof(float));
        mw->su[j] = malloc(E * (size_t)K * sizeof(float));
        mw->sv[j] = malloc(E * (size_t)N * sizeof(float));
        mw->grid[j] = malloc((size_t)L * sizeof(float));
        mw->w[j] = calloc(E, sizeof(mq_weights));
        ok = mw->indices[j] && mw->tscales[j] && mw->su[j] && mw->sv[j] && mw->grid[j] &&
             mw->w[j];
        if (!ok)
            break;
        for (size_t i = 0; i < E * (size_t)K; i++)
            mw->su[j][i] = 1.0f;
        for (size_t i = 0; i < E * (size_t)N; i++)
            mw->sv[j][i] = 1.0f;
        mq_trellis_default_grid(mq_format_bits(p->format), mw->grid[j]);
        for (size_t e = 0; e < E; e++) {
            mq_weights *w = &mw->w[j][e];
            w->format = p->format;
            w->K = K;
            w->N = N;
            w->group = p->group;
            w->indices = mw->indices[j] + e * tb;
            w->tscales = mw->tscales[j] + e * G * (size_t)N;
            w->su = mw->su[j] + e * (size_t)K;
            w->sv = mw->sv[j] + e * (size_t)N;
            w->grid = mw->grid[j];
            w->n_levels = L;
            w->owned = 0;
        }
    }
    if (!ok) {
        mq_moe_weights_free(mw);
        return mq_fail(err, MQ_E_NOMEM,
                       "out of memory for %d experts of %s weights (hidden %d, inter %d)",
                       p->experts, mq_format_name(p->format), p->hidden, p->inter);
    }
    return mq_ok(err);
}

mq_status mq_moe_weights_set_grid(mq_moe_weights *mw, mq_moe_proj j, const float *grid,
                                  int n_levels, mq_error *err)
{
    if (!mw || !grid || (unsigned)j >= MQ_MOE_PROJS || !mw->w[0])
        return mq_fail(err, MQ_E_ARG, "mq_moe_weights_set_grid: null weights or grid");
    int L = 1 << mq_format_bits(mw->format);
    if (n_levels < 1 || n_levels > L)
        return mq_fail(err, MQ_E_WEIGHTS, "%s codebook of %d levels (expected 1..%d)",
                       mq_moe_proj_name(j), n_levels, L);
    for (int i = 0; i < n_levels; i++) {
        if (!isfinite(grid[i]))
            return mq_fail(err, MQ_E_WEIGHTS, "%s codebook[%d] is not finite",
                           mq_moe_proj_name(j), i);
        mw->grid[j][i] = grid[i];
    }
    for (int e = 0; e < mw->experts; e++)
        mw->w[j][e].n_levels = n_levels;
    return mq_ok(err);
}

mq_status mq_moe_weights_set(mq_moe_weights *mw, mq_moe_proj j, int expert,
                             const mq_weights *src, mq_error *err)
{
    if (!mw || !src || (unsigned)j >= MQ_MOE_PROJS || !mw->w[0])
        return mq_fail(err, MQ_E_ARG, "mq_moe_weights_set: null weights");
    if (expert < 0 || expert >= mw->experts)
        return mq_fail(err, MQ_E_ARG, "expert %d is outside 0..%d", expert, mw->experts - 1);
    mq_weights *w = &mw->w[j][expert];
    if (src->format != w->format || src->K != w->K || src->N != w->N || src->group != w->group)
        return mq_fail(err, MQ_E_WEIGHTS,
                       "%s of expert %d must be %s K=%d N=%d group %d, not %s K=%d N=%d group %d",
                       mq_moe_proj_name(j), expert, mq_format_name(w->format), w->K, w->N,
                       w->group, mq_format_name(src->format), src->K, src->N, src->group);
    if (src->n_levels != w->n_levels ||
        memcmp(src->grid, w->grid, (size_t)w->n_levels * sizeof *w->grid))
        return mq_fail(err, MQ_E_WEIGHTS,
                       "%s of expert %d has a codebook other than the projection's (one "
                       "codebook serves every expert: mq_moe_weights_set_grid)",
                       mq_moe_proj_name(j), expert);
    int K = w->K, N = w->N;
    memcpy(w->indices, src->indices, tile_bytes_of(w->format, K, N));
    memcpy(w->tscales, src->tscales,
           (size_t)mq_group_count(K, w->group) * (size_t)N * sizeof *w->tscales);
    memcpy(w->su, src->su, (size_t)K * sizeof *w->su);
    memcpy(w->sv, src->sv, (size_t)N * sizeof *w->sv);
    return mq_ok(err);
}

/* splitmix64: a small, well-mixed generator for reproducible data */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) */
static double next_unit(uint64_t *s)
{
    return (double)(next_u64(s) >> 11) * 0x1.0p-53;
}

void mq_moe_weights_fill_random(mq_moe_weights *mw, uint64_t seed)
{
    uint64_t s = seed ^ 0x6D6F652D77656967ull;
    int L = 1 << mq_format_bits(mw->format);
    for (int j = 0; j < MQ_MOE_PROJS; j++) {
        int K, N;
        proj_dims(mw, (mq_moe_proj)j, &K, &N);
        /* every index a level: uniform bytes decode to indices < 2^bits = L */
        size_t n = tile_bytes_of(mw->format, K, N) * (size_t)mw->experts;
        for (size_t i = 0; i < n; i += 8) {
            uint64_t r = next_u64(&s);
            memcpy(mw->indices[j] + i, &r, n - i < 8 ? n - i : 8);
        }
        double rms = 0; /* the codebook's RMS: scales keep a projection's output at unit RMS */
        for (int i = 0; i < L; i++)
            rms += (double)mw->grid[j][i] * mw->grid[j][i] / L;
        float scale = (float)(1.0 / sqrt(fmax(rms, 1e-30) * K));
        size_t ns = (size_t)mw->experts * mq_group_count(K, mw->group) * N;
        for (size_t i = 0; i < ns; i++)
            mw->tscales[j][i] = scale * (float)(0.75 + 0.5 * next_unit(&s));
        for (size_t i = 0; i < (size_t)mw->experts * K; i++)
            mw->su[j][i] = next_u64(&s) >> 63 ? -1.0f : 1.0f;
        for (size_t i = 0; i < (size_t)mw->experts * N; i++)
            mw->sv[j][i] = next_u64(&s) >> 63 ? -1.0f : 1.0f;
        for (int e = 0; e < mw->experts; e++)
            mw->w[j][e].n_levels = L;
    }
}

mq_status mq_moe_weights_match(const mq_moe_problem *p, const mq_moe_weights *mw,
                               mq_error *err)
{
    if (!mw->w[0] || mw->format != p->format || mw->experts != p->experts ||
        mw->hidden != p->hidden || mw->inter != p->inter || mw->group != p->group)
        return mq_fail(err, MQ_E_WEIGHTS,
                       "MoE weights are %s, %d experts, hidden %d, inter %d, group %d; the "
                       "problem is %s, %d, %d, %d, %d",
                       mq_format_name(mw->format), mw->experts, mw->hidden, mw->inter,
                       mw->group, mq_format_name(p->format), p->experts, p->hidden, p->inter,
                       p->group);
    return mq_ok(err);
}

mq_status mq_moe_weights_check(const mq_moe_weights *mw, mq_error *err)
{
    if (!mw || !mw->w[0])
        return mq_fail(err, MQ_E_ARG, "null MoE weights");
    for (int j = 0; j < MQ_MOE_PROJS; j++)
        for (int e = 0; e < mw->experts; e++) {
            mq_error inner;
            if (mq_weights_check(&mw->w[j][e], &inner) != MQ_OK)
                return mq_fail(err, inner.code, "%s of expert %d: %s",
                               mq_moe_proj_name((mq_moe_proj)j), e, inner.msg);
        }
    return mq_ok(err);
}

size_t mq_moe_weights_bytes_touched(const mq_moe_weights *mw, const int32_t *expert_ids,
                                    int tokens, int top_k)
{
    char *seen = calloc((size_t)mw->experts, 1);
    size_t per_expert = 0, bytes = 0;
    for (int j = 0; j < MQ_MOE_PROJS; j++)
        per_expert += mq_weights_bytes(&mw->w[j][0]);
    for (size_t i = 0; seen && i < (size_t)tokens * top_k; i++) {
        int e = expert_ids[i];
        if (e >= 0 && e < mw->experts && !seen[e]) {
            seen[e] = 1;
            bytes += per_expert;
        }
    }
    free(seen);
    return bytes;
}

mq_status mq_moe_routing_check(const mq_moe_problem *p, const int32_t *expert_ids,
                               const float *probs, mq_error *err)
{
    mq_status st = mq_moe_problem_check(p, err);
    if (st)
        return st;
    if (!expert_ids || !probs)
        return mq_fail(err, MQ_E_ARG, "null expert_ids or probs");
    for (int t = 0; t < p->tokens; t++)
        for (int k = 0; k < p->top_k; k++) {
            size_t i = (size_t)t * p->top_k + k;
            int e = expert_ids[i];
            if (e < 0 || e >= p->experts)
                return mq_fail(err, MQ_E_ARG,
                               "expert_ids[token %d][slot %d] = %d is outside 0..%d", t, k, e,
                               p->experts - 1);
            if (!isfinite(probs[i]) || probs[i] < 0)
                return mq_fail(err, MQ_E_ARG,
                               "probs[token %d][slot %d] = %g is not a finite non-negative "
                               "probability", t, k, (double)probs[i]);
            for (int k2 = 0; k2 < k; k2++)
                if (expert_ids[(size_t)t * p->top_k + k2] == e)
                    return mq_fail(err, MQ_E_ARG,
                                   "token %d routes to expert %d twice (slots %d and %d)", t, e,
                                   k2, k);
        }
    return mq_ok(err);
}

static const char *const route_names[MQ_ROUTE_KINDS] = {"uniform", "zipf", "one"};

const char *mq_route_kind_name(mq_route_kind k)
{
    return (unsigned)k < MQ_ROUTE_KINDS ? route_names[k] : "?";
}

mq_status mq_route_kind_from_name(const char *name, mq_route_kind *out, mq_error *err)
{
    for (int k = 0; name && k < MQ_ROUTE_KINDS; k++)
        if (!strcmp(name, route_names[k])) {
            *out = (mq_route_kind)k;
            return mq_ok(err);
        }
    return mq_fail(err, MQ_E_ARG, "unknown routing '%s' (known: uniform, zipf, one)",
                   name ? name : "(null)");
}

mq_status mq_moe_routing_generate(const mq_moe_problem *p, mq_route_kind kind, double zipf_s,
                                  uint64_t seed, int32_t *expert_ids, float *probs,
                                  mq_error *err)
{
    mq_status st = mq_moe_problem_check(p, err);
    if (st)
        return st;
    if (!expert_ids || !probs || (unsigned)kind >= MQ_ROUTE_KINDS)
        return mq_fail(err, MQ_E_ARG, "mq_moe_routing_generate: null arrays or unknown kind");
    if (kind == MQ_ROUTE_ZIPF && !(zipf_s >= 0 && zipf_s <= 10))
        return mq_fail(err, MQ_E_ARG, "Zipf exponent %g is outside 0..10", zipf_s);
    int E = p->experts, K = p->top_k;
    double *weight = malloc((size_t)E * sizeof *weight);
    double *logit = malloc((size_t)K * sizeof *logit);
    if (!weight || !logit) {
        free(weight);
        free(logit);
        return mq_fail(err, MQ_E_NOMEM, "out of memory for a routing of %d experts", E);
    }
    uint64_t s = seed ^ 0x726F7574696E6721ull;
    for (int t = 0; t < p->tokens; t++) {
        int32_t *ids = expert_ids + (size_t)t * K;
        /* the kind's weights; a chosen expert's weight drops to 0 (no repeats) */
        for (int e = 0; e < E; e++)
            weight[e] = kind == MQ_ROUTE_ZIPF ? pow(e + 1.0, -zipf_s) : 1.0;
        for (int k = 0; k < K; k++) {
            if (kind == MQ_ROUTE_ONE) {
                ids[k] = k;
            } else {
                double total = 0;
                for (int e = 0; e < E; e++)
                    total += weight[e];
                double r = next_unit(&s) * total;
                int e = 0;
                while (e < E - 1 && (r >= weight[e] || weight[e] == 0)) {
                    r -= weight[e];
                    e++;
                }
                while (weight[e] == 0) /* rounding left r past the last open expert */
                    e--;
                ids[k] = e;
                weight[e] = 0;
            }
            logit[k] = 2.0 * next_unit(&s) - 1.0;
        }
        double mx = logit[0], sum = 0;
        for (int k = 1; k < K; k++)
            mx = fmax(mx, logit[k]);
        for (int k = 0; k < K; k++)
            sum += exp(logit[k] - mx);
        for (int k = 0; k < K; k++)
            probs[(size_t)t * K + k] = (float)(exp(logit[k] - mx) / sum);
    }
    free(weight);
    free(logit);
    return mq_ok(err);
}

mq_moe_routing_summary mq_moe_routing_summarize(const mq_moe_problem *p,
                                                const int32_t *expert_ids)
{
    mq_moe_routing_summary r = {0, 0, 0.0};
    int *count = calloc((size_t)p->experts, sizeof *count);
    if (!count)
        return r;
    for (size_t i = 0; i < (size_t)p->tokens * p->top_k; i++)
        if (expert_ids[i] >= 0 && expert_ids[i] < p->experts)
            count[expert_ids[i]]++;
    for (int e = 0; e < p->experts; e++) {
        r.max_tokens = mq_max(r.max_tokens, count[e]);
        r.touched += count[e] > 0;
    }
    r.mean_tokens = (double)p->tokens * p->top_k / p->experts;
    free(count);
    return r;
}

/* x * sigmoid(x) in float64 */
static double silu(double x)
{
    return x / (1.0 + exp(-x));
}

/* Error bound of the kernels' arithmetic, step by step (u = 2^-24, the
 * dense kernels' gamma = (2K + 3) u per product sum, see mq_verify_bound):
 * g, u of one expert from FP32 sums of `hidden` products: eg = gamma_H
 * sum|x w|; SwiGLU in FP32 (|silu'| <= 1.1, silu and the product within 8u
 * relative); h rounded to FP16 (2^-11 relative); down from FP32 sums of
 * `inter` products: sum_i eh_i |wd_i| + gamma_I sum_i |h_i| |wd_i|; the
 * top_k experts (and the intermediate split's partials) summed in FP32. */
mq_status mq_moe_reference(const mq_moe_problem *p, const mq_moe_weights *mw,
                           const uint16_t *x, const int32_t *expert_ids, const float *probs,
                           double *out, double *bound, mq_error *err)
{
    return mq_moe_reference_arith(p, mw, x, expert_ids, probs, 0, out, bound, err);
}

mq_status mq_moe_reference_arith(const mq_moe_problem *p, const mq_moe_weights *mw,
                                 const uint16_t *x, const int32_t *expert_ids, const float *probs,
                                 int half_mid, double *out, double *bound, mq_error *err)
{
    mq_status st = mq_moe_routing_check(p, expert_ids, probs, err);
    if (st)
        return st;
    if (!mw || !x || !out)
        return mq_fail(err, MQ_E_ARG, "mq_moe_reference: null weights, x or out");
    if ((st = mq_moe_weights_match(p, mw, err)))
        return st;
    int H = p->hidden, I = p->inter, T = p->tokens, E = p->experts;
    const double u = ldexp(1.0, -24), h16 = ldexp(1.0, -11);
    const int hw = (half_mid & MQ_MOE_HALF_WEIGHTS) != 0, hs = (half_mid & MQ_MOE_HALF_STORES) != 0;
    const double gH = (2.0 * H + 3) * u, gI = (2.0 * I + 3) * u;
    const double gsum = (p->top_k + 3.0) * u; /* experts and split partials summed */
    double *wg = malloc((size_t)H * I * sizeof *wg), *wu = malloc((size_t)H * I * sizeof *wu);
    double *wd = malloc((size_t)I * H * sizeof *wd);
    double *g = malloc((size_t)I * 6 * sizeof *g), *y = malloc((size_t)H * 2 * sizeof *y);
    double *xt = malloc((size_t)H * sizeof *xt);
    if (!wg || !wu || !wd || !g || !y || !xt) {
        st = mq_fail(err, MQ_E_NOMEM, "out of memory for the MoE reference (hidden %d, inter %d)",
                     H, I);
        goto done;
    }
    double *gs = g, *us = g + I, *ga = g + 2 * I, *ua = g + 3 * I, *hv = g + 4 * I,
           *eh = g + 5 * I, *ys = y, *ya = y + H;
    for (size_t i = 0; i < (size_t)T * H; i++)
        out[i] = 0;
    if (bound)
        for (size_t i = 0; i < (size_t)T * H; i++)
            bound[i] = 0;
    /* expert by expert, so each expert's weights are dequantized once */
    for (int e = 0; e < E; e++) {
        int used = 0;
        for (size_t i = 0; i < (size_t)T * p->top_k && !used; i++)
            used = expert_ids[i] == e;
        if (!used)
            continue;
        if ((st = mq_dequantize(&mw->w[MQ_MOE_GATE][e], wg, err)) ||
            (st = mq_dequantize(&mw->w[MQ_MOE_UP][e], wu, err)) ||
            (st = mq_dequantize(&mw->w[MQ_MOE_DOWN][e], wd, err)))
            goto done;
        for (int t = 0; t < T; t++)
            for (int k = 0; k < p->top_k; k++) {
                if (expert_ids[(size_t)t * p->top_k + k] != e)
                    continue;
                double pr = probs[(size_t)t * p->top_k + k];
                for (int i = 0; i < H; i++)
                    xt[i] = mq_half_to_float(x[(size_t)t * H + i]);
                for (int i = 0; i < I; i++)
                    gs[i] = us[i] = ga[i] = ua[i] = 0;
                for (int kk = 0; kk < H; kk++) {
                    const double *rg = wg + (size_t)kk * I, *ru = wu + (size_t)kk * I;
                    for (int i = 0; i < I; i++) {
                        gs[i] += xt[kk] * rg[i];
                        us[i] += xt[kk] * ru[i];
                        ga[i] += fabs(xt[kk] * rg[i]);
                        ua[i] += fabs(xt[kk] * ru[i]);
                    }
                }
                for (int i = 0; i < I; i++) {
                    double sg = silu(gs[i]), egi = gH * ga[i], eui = gH * ua[i];
                    if (hw) { /* weights staged or decoded as FP16 */
                        egi += h16 * ga[i];
                        eui += h16 * ua[i];
                    }
                    if (hs) { /* gate and up stored as FP16 (subnormals: 2^-25) */
                        egi += h16 * (fabs(gs[i]) + egi) + ldexp(1.0, -25);
                        eui += h16 * (fabs(us[i]) + eui) + ldexp(1.0, -25);
                    }
                    hv[i] = sg * us[i];
                    /* |d silu| <= 1.1 eg; the product's first-order terms and their product */
                    double e1 = 1.1 * egi * fabs(us[i]) + fabs(sg) * eui + 1.1 * egi * eui;
                    eh[i] = e1 + 8 * u * (fabs(hv[i]) + e1) +
                            h16 * (fabs(hv[i]) + e1) * (1 + 8 * u) + ldexp(1.0, -25);
                }
                for (int n = 0; n < H; n++)
                    ys[n] = ya[n] = 0;
                for (int i = 0; i < I; i++) {
                    const double *rd = wd + (size_t)i * H;
                    for (int n = 0; n < H; n++) {
                        ys[n] += hv[i] * rd[n];
                        ya[n] += (eh[i] + (gI + hw * h16) * (fabs(hv[i]) + eh[i])) *
                                 fabs(rd[n]);
                    }
                }
                for (int n = 0; n < H; n++) {
                    if (hs) /* the expert's down output stored as FP16 */
                        ya[n] += h16 * (fabs(ys[n]) + ya[n]) + ldexp(1.0, -25);
                    out[(size_t)t * H + n] += pr * ys[n];
                    if (bound)
                        bound[(size_t)t * H + n] +=
                            pr * (ya[n] + gsum * (fabs(ys[n]) + ya[n])) + 1e-30;
                }
            }
    }
    st = mq_ok(err);
done:
    free(wg);
    free(wu);
    free(wd);
    free(g);
    free(y);
    free(xt);
    return st;
}
