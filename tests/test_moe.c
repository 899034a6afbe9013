/* test_moe.c - the MoE block (gemm_trellis_moe, seed 004 section 7): bad
 * problems, routings and weights refused with the element named; routings
 * reproducible and of their kind; the float64 reference against one built
 * from the dense reference GEMM; the fused CPU model and the unfused
 * baseline within the reference's bound on every legal candidate of a
 * grid, for every trellis width, ragged token counts, experts with no
 * tokens and all tokens on one expert; the bound catching a planted
 * defect; results independent of the thread count; the MSL kernel
 * (metal/gemm_trellis_moe.metal) run by the CPU executor within the same
 * bound. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* mkdtemp: macOS declares it here only */

#include "check.h"
#include "backend.h"
#include "msl_exec.h"
#include "msl_program.h"
#include "mq.h"
#include "testdata.h"

static int msg_has(const mq_error *e, const char *s)
{
    return strstr(e->msg, s) != NULL;
}

static void test_problem_check(void)
{
    mq_error e;
    mq_moe_problem p = {MQ_FMT_TRELLIS3, 4, 64, 96, 8, 2, 32};
    CHECK(mq_moe_problem_check(&p, &e) == MQ_OK, "a good problem passes: %s", e.msg);
    mq_moe_problem q = p;
    q.format = MQ_FMT_FP4;
    CHECK(mq_moe_problem_check(&q, &e) == MQ_E_SHAPE && msg_has(&e, "fp4"),
          "fp4 refused naming it, got '%s'", e.msg);
    q = p;
    q.top_k = 9;
    CHECK(mq_moe_problem_check(&q, &e) == MQ_E_SHAPE && msg_has(&e, "top_k=9"),
          "top_k > experts refused naming top_k=9, got '%s'", e.msg);
    q = p;
    q.hidden = 72;
    CHECK(mq_moe_problem_check(&q, &e) == MQ_E_SHAPE && msg_has(&e, "hidden=72"),
          "hidden not a multiple of 16 refused naming it, got '%s'", e.msg);
    q = p;
    q.group = 48;
    CHECK(mq_moe_problem_check(&q, &e) == MQ_E_SHAPE && msg_has(&e, "48"),
          "group 48 refused, got '%s'", e.msg);
}

static void test_routing(void)
{
    mq_error e;
    mq_moe_problem p = {MQ_FMT_TRELLIS2, 64, 64, 96, 16, 4, 32};
    size_t n = (size_t)p.tokens * p.top_k;
    int32_t *ids = malloc(n * sizeof *ids), *ids2 = malloc(n * sizeof *ids2);
    float *pr = malloc(n * sizeof *pr), *pr2 = malloc(n * sizeof *pr2);
    for (int kind = 0; kind < MQ_ROUTE_KINDS; kind++) {
        CHECK(mq_moe_routing_generate(&p, (mq_route_kind)kind, 1.2, 7, ids, pr, &e) == MQ_OK,
              "%s routing generated: %s", mq_route_kind_name((mq_route_kind)kind), e.msg);
        CHECK(mq_moe_routing_check(&p, ids, pr, &e) == MQ_OK, "%s routing is valid: %s",
              mq_route_kind_name((mq_route_kind)kind), e.msg);
        mq_moe_routing_generate(&p, (mq_route_kind)kind, 1.2, 7, ids2, pr2, &e);
        CHECK(!memcmp(ids, ids2, n * sizeof *ids) && !memcmp(pr, pr2, n * sizeof *pr),
              "%s: the same seed gives the same routing", mq_route_kind_name((mq_route_kind)kind));
        double worst = 0;
        for (int t = 0; t < p.tokens; t++) {
            double s = 0;
            for (int k = 0; k < p.top_k; k++)
                s += pr[t * p.top_k + k];
            worst = fmax(worst, fabs(s - 1));
        }
        CHECK(worst < 1e-5, "%s: each token's probabilities sum to 1 (worst off by %g)",
              mq_route_kind_name((mq_route_kind)kind), worst);
    }
    mq_moe_routing_generate(&p, MQ_ROUTE_UNIFORM, 0, 7, ids, pr, &e);
    mq_moe_routing_generate(&p, MQ_ROUTE_UNIFORM, 0, 8, ids2, pr2, &e);
    CHECK(memcmp(ids, ids2, n * sizeof *ids) != 0, "another seed, another routing");
    mq_moe_routing_summary su = mq_moe_routing_summarize(&p, ids);
    mq_moe_routing_generate(&p, MQ_ROUTE_ZIPF, 1.5, 7, ids, pr, &e);
    mq_moe_routing_summary sz = mq_moe_routing_summarize(&p, ids);
    mq_moe_routing_generate(&p, MQ_ROUTE_ONE, 0, 7, ids, pr, &e);
    mq_moe_routing_summary so = mq_moe_routing_summarize(&p, ids);
    CHECK(fabs(su.mean_tokens - 16.0) < 1e-12, "mean tokens per expert 64 x 4 / 16 = 16, got %g",
          su.mean_tokens);
    CHECK(sz.max_tokens > su.max_tokens, "Zipf 1.5 is more skewed than uniform: max %d vs %d",
          sz.max_tokens, su.max_tokens);
    CHECK(so.max_tokens == 64 && so.touched == 4,
          "'one': every token on the same experts (max 64, 4 touched), got max %d, %d touched",
          so.max_tokens, so.touched);
    mq_moe_routing_generate(&p, MQ_ROUTE_UNIFORM, 0, 7, ids, pr, &e);
    ids[5 * 4 + 2] = 16;
    CHECK(mq_moe_routing_check(&p, ids, pr, &e) == MQ_E_ARG &&
              msg_has(&e, "token 5") && msg_has(&e, "slot 2") && msg_has(&e, "16"),
          "an expert id out of range is named by token and slot, got '%s'", e.msg);
    ids[5 * 4 + 2] = ids[5 * 4 + 0];
    CHECK(mq_moe_routing_check(&p, ids, pr, &e) == MQ_E_ARG && msg_has(&e, "twice"),
          "a token routed to one expert twice is refused, got '%s'", e.msg);
    mq_moe_routing_generate(&p, MQ_ROUTE_UNIFORM, 0, 7, ids, pr, &e);
    pr[3 * 4 + 1] = NAN;
    CHECK(mq_moe_routing_check(&p, ids, pr, &e) == MQ_E_ARG && msg_has(&e, "token 3") &&
              msg_has(&e, "slot 1"),
          "a NaN probability is named by token and slot, got '%s'", e.msg);
    mq_route_kind k;
    CHECK(mq_route_kind_from_name("zipfian", &k, &e) == MQ_E_ARG && msg_has(&e, "zipfian"),
          "an unknown routing kind is named, got '%s'", e.msg);
    free(ids);
    free(ids2);
    free(pr);
    free(pr2);
}

/* Weights for p: expert by expert from mq_quantize of random floats */
static int make_weights(const mq_moe_problem *p, mq_moe_weights *mw, uint32_t seed)
{
    mq_error e;
    if (mq_moe_weights_alloc(mw, p, &e)) {
        CHECK(0, "MoE weights allocate: %s", e.msg);
        return -1;
    }
    for (int j = 0; j < MQ_MOE_PROJS; j++)
        for (int x = 0; x < p->experts; x++) {
            int K = j == MQ_MOE_DOWN ? p->inter : p->hidden;
            int N = j == MQ_MOE_DOWN ? p->hidden : p->inter;
            float *W = malloc((size_t)K * N * sizeof *W), *su = malloc((size_t)K * sizeof *su);
            float *sv = malloc((size_t)N * sizeof *sv);
            td_fill_weights(W, K, N, seed + 977u * (unsigned)(j * p->experts + x));
            uint32_t st = seed ^ 0x5eedu;
            for (int k = 0; k < K; k++)
                su[k] = td_uniform(&st) < 0 ? -1.0f : 1.0f;
            for (int n = 0; n < N; n++)
                sv[n] = td_uniform(&st) < 0 ? -1.0f : 1.0f;
            mq_trellis_opts o = {su, sv, NULL, 0};
            mq_weights w;
            int bad = mq_quantize(p->format, W, K, N, p->group, &o, &w, &e) ||
                      mq_moe_weights_set(mw, (mq_moe_proj)j, x, &w, &e);
            if (!bad)
                mq_weights_free(&w);
            free(W);
            free(su);
            free(sv);
            if (bad) {
                CHECK(0, "expert %d %s quantized and set: %s", x,
                      mq_moe_proj_name((mq_moe_proj)j), e.msg);
                return -1;
            }
        }
    return 0;
}

static void test_weights(void)
{
    mq_error e;
    mq_moe_problem p = {MQ_FMT_TRELLIS3, 2, 64, 96, 4, 2, 32};
    mq_moe_weights mw;
    if (make_weights(&p, &mw, 3))
        return;
    CHECK(mq_moe_weights_check(&mw, &e) == MQ_OK, "quantized experts validate: %s", e.msg);
    /* a sign that is not +-1 in expert 2's down projection */
    mw.w[MQ_MOE_DOWN][2].su[5] = 0.5f;
    CHECK(mq_moe_weights_check(&mw, &e) == MQ_E_WEIGHTS && msg_has(&e, "down of expert 2"),
          "a bad sign names the projection and expert, got '%s'", e.msg);
    mw.w[MQ_MOE_DOWN][2].su[5] = 1.0f;
    float grid7[7] = {-1, -0.6f, -0.2f, 0, 0.2f, 0.6f, 1};
    CHECK(mq_moe_weights_set_grid(&mw, MQ_MOE_UP, grid7, 7, &e) == MQ_OK, "a 7-level codebook");
    CHECK(mq_moe_weights_check(&mw, &e) == MQ_E_WEIGHTS && msg_has(&e, "up of expert") &&
              msg_has(&e, "7-level"),
          "indices of the 8-level codebook outside a 7-level one are named, got '%s'", e.msg);
    mq_weights w;
    float W[64 * 96];
    td_fill_weights(W, 64, 96, 1);
    mq_quantize(MQ_FMT_TRELLIS3, W, 64, 96, 32, NULL, &w, &e);
    CHECK(mq_moe_weights_set(&mw, MQ_MOE_DOWN, 1, &w, &e) == MQ_E_WEIGHTS &&
              msg_has(&e, "down of expert 1"),
          "a [64][96] matrix refused as down ([96][64]), got '%s'", e.msg);
    CHECK(mq_moe_weights_set(&mw, MQ_MOE_GATE, 4, &w, &e) == MQ_E_ARG && msg_has(&e, "4"),
          "expert 4 of 4 refused, got '%s'", e.msg);
    mq_weights_free(&w);
    mq_moe_weights_free(&mw);

    mq_moe_problem big = {MQ_FMT_TRELLIS2, 1, 256, 512, 8, 2, 128};
    mq_moe_weights r1, r2;
    mq_moe_weights_alloc(&r1, &big, &e);
    mq_moe_weights_alloc(&r2, &big, &e);
    mq_moe_weights_fill_random(&r1, 11);
    mq_moe_weights_fill_random(&r2, 11);
    CHECK(mq_moe_weights_check(&r1, &e) == MQ_OK, "synthetic weights validate: %s", e.msg);
    size_t tb = 256 / 16 * (512 / 16) * 64 * 8;
    CHECK(!memcmp(r1.indices[MQ_MOE_UP], r2.indices[MQ_MOE_UP], tb) &&
              !memcmp(r1.su[MQ_MOE_DOWN], r2.su[MQ_MOE_DOWN], 512 * 8 * sizeof(float)),
          "the same seed gives the same synthetic weights");
    int32_t ids[2] = {3, 5};
    size_t per = mq_weights_bytes(&r1.w[0][0]) + mq_weights_bytes(&r1.w[1][0]) +
                 mq_weights_bytes(&r1.w[2][0]);
    CHECK(mq_moe_weights_bytes_touched(&r1, ids, 1, 2) == 2 * per,
          "bytes touched by two experts: %zu, got %zu", 2 * per,
          mq_moe_weights_bytes_touched(&r1, ids, 1, 2));
    mq_moe_weights_free(&r1);
    mq_moe_weights_free(&r2);
}

/* The reference against one built from the dense reference GEMM: gate and
 * up by mq_reference_gemm, SwiGLU and the down product in float64 here. */
static void test_reference(void)
{
    mq_error e;
    mq_moe_problem p = {MQ_FMT_TRELLIS4, 3, 64, 96, 4, 2, 32};
    mq_moe_weights mw;
    if (make_weights(&p, &mw, 5))
        return;
    int H = p.hidden, I = p.inter;
    uint16_t x[3 * 64];
    td_fill_activations(x, 3, H, 9);
    int32_t ids[6];
    float pr[6];
    mq_moe_routing_generate(&p, MQ_ROUTE_UNIFORM, 0, 4, ids, pr, &e);
    double out[3 * 64], bound[3 * 64], mine[3 * 64] = {0};
    CHECK(mq_moe_reference(&p, &mw, x, ids, pr, out, bound, &e) == MQ_OK, "reference: %s",
          e.msg);
    double g[96], u[96], *wd = malloc((size_t)I * H * sizeof *wd);
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < 2; k++) {
            int ex = ids[t * 2 + k];
            mq_reference_gemm(&mw.w[MQ_MOE_GATE][ex], x + t * H, 1, g, NULL, &e);
            mq_reference_gemm(&mw.w[MQ_MOE_UP][ex], x + t * H, 1, u, NULL, &e);
            mq_dequantize(&mw.w[MQ_MOE_DOWN][ex], wd, &e);
            for (int n = 0; n < H; n++) {
                double y = 0;
                for (int i = 0; i < I; i++)
                    y += g[i] / (1 + exp(-g[i])) * u[i] * wd[(size_t)i * H + n];
                mine[t * H + n] += pr[t * 2 + k] * y;
            }
        }
    double worst = 0, scale = 0, bmax = 0;
    for (int i = 0; i < 3 * H; i++) {
        worst = fmax(worst, fabs(out[i] - mine[i]));
        scale = fmax(scale, fabs(mine[i]));
        bmax = fmax(bmax, bound[i]);
    }
    CHECK(worst <= 1e-12 * fmax(scale, 1), "the reference matches the dense-GEMM build: %g off",
          worst);
    CHECK(bmax > 0 && bmax < 0.05 * scale,
          "the bound is positive and small against the outputs (%g vs %g)", bmax, scale);
    free(wd);
    mq_moe_weights_free(&mw);
}

/* |got - ref| <= bound everywhere; the worst ratio into *worst */
/* Candidates of a small grid: inner kernels x i_split x fuse_gate_up */
static int moe_candidates(const mq_moe_problem *p, mq_moe_candidate *cs, int cap)
{
    static const struct {
        mq_variant v;
        int tm, tn, tk;
    } inner[] = {
        {MQ_VAR_GEMV_TRELLIS, 1, 64, 128},   {MQ_VAR_GEMV_TRELLIS, 4, 32, 256},
        {MQ_VAR_GEMV_TRELLIS, 16, 64, 128},  {MQ_VAR_TRELLIS_PACKED, 16, 16, 16},
        {MQ_VAR_TRELLIS_PACKED, 32, 32, 32}, {MQ_VAR_TRELLIS_PACKED, 64, 64, 32},
        {MQ_VAR_TRELLIS_DECODE, 32, 128, 32},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof inner / sizeof inner[0]; i++)
        for (int split = 1; split <= 8; split++)
            for (int fuse = 0; fuse <= 1; fuse++) {
                mq_moe_candidate c;
                memset(&c, 0, sizeof c);
                c.inner.variant = inner[i].v;
                c.inner.p = (mq_params){inner[i].tm, inner[i].tn, inner[i].tk, 0, 1};
                c.i_split = split;
                c.fuse_gate_up = fuse;
                if (n < cap && mq_moe_candidate_check(p, &c, NULL) == MQ_OK)
                    cs[n++] = c;
            }
    return n;
}

typedef struct {
    mq_format f;
    int tokens, experts, top_k;
    mq_route_kind route;
    const char *what;
} run_case;

static void test_runs(void)
{
    static const run_case cases[] = {
        {MQ_FMT_TRELLIS3, 1, 8, 2, MQ_ROUTE_UNIFORM, "decode, 6 experts with no tokens"},
        {MQ_FMT_TRELLIS2, 5, 8, 2, MQ_ROUTE_ZIPF, "5 tokens, Zipf"},
        {MQ_FMT_TRELLIS4, 13, 6, 3, MQ_ROUTE_UNIFORM, "13 tokens (ragged), top 3 of 6"},
        {MQ_FMT_TRELLIS3, 40, 8, 1, MQ_ROUTE_ONE, "40 tokens all on one expert"},
        {MQ_FMT_TRELLIS3, 16, 8, 1, MQ_ROUTE_ONE, "16 tokens on one expert (the decode path's most rows)"},
        {MQ_FMT_TRELLIS3, 70, 4, 2, MQ_ROUTE_UNIFORM, "prefill-like: 70 tokens, 4 experts"},
    };
    mq_ctx *ctx = NULL, *ctx1 = NULL;
    mq_error e;
    if (mq_ctx_create(3, &ctx, &e) || mq_ctx_create(1, &ctx1, &e)) {
        CHECK(0, "contexts: %s", e.msg);
        return;
    }
    int total = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const run_case *rc = &cases[ci];
        mq_moe_problem p = {rc->f, rc->tokens, 64, 96, rc->experts, rc->top_k, 32};
        mq_moe_weights mw;
        if (make_weights(&p, &mw, 17 + (uint32_t)ci))
            continue;
        size_t R = (size_t)p.tokens * p.top_k, out_n = (size_t)p.tokens * p.hidden;
        uint16_t *x = malloc((size_t)p.tokens * p.hidden * sizeof *x);
        int32_t *ids = malloc(R * sizeof *ids);
        float *pr = malloc(R * sizeof *pr), *got = malloc(out_n * sizeof *got);
        float *got1 = malloc(out_n * sizeof *got1);
        double *ref = malloc(out_n * sizeof *ref), *bound = malloc(out_n * sizeof *bound);
        td_fill_activations(x, p.tokens, p.hidden, 23 + (uint32_t)ci);
        mq_moe_routing_generate(&p, rc->route, 1.5, 31 + ci, ids, pr, &e);
        mq_moe_reference(&p, &mw, x, ids, pr, ref, bound, &e);
        mq_moe_candidate cs[128];
        int n = moe_candidates(&p, cs, 128), fails = 0, nondet = 0;
        double worst_all = 0;
        CHECK(n >= 20, "%s: at least 20 legal candidates of the grid, got %d", rc->what, n);
        for (int i = 0; i < n; i++) {
            double worst;
            memset(got, 0xff, out_n * sizeof *got); /* NaN: every output must be written */
            if (mq_moe_run(ctx, &p, &mw, x, ids, pr, got, &cs[i], &e)) {
                char s[256];
                mq_moe_candidate_str(&cs[i], s, sizeof s);
                CHECK(0, "%s: %s runs: %s", rc->what, s, e.msg);
                continue;
            }
            long bad = td_outside(got, ref, bound, out_n, &worst);
            worst_all = fmax(worst_all, worst);
            if (bad) {
                char s[256];
                mq_moe_candidate_str(&cs[i], s, sizeof s);
                CHECK(0, "%s: %s within the bound everywhere: %ld outside, worst %.2f x", rc->what,
                      s, bad, worst);
                fails++;
            }
            mq_moe_run(ctx1, &p, &mw, x, ids, pr, got1, &cs[i], &e);
            nondet += memcmp(got, got1, out_n * sizeof *got) != 0;
            total++;
        }
        fprintf(stderr, "  %s: %d candidates, worst %.4f of the bound\n", rc->what, n, worst_all);
        CHECK(fails == 0, "%s: all %d candidates within the reference's bound (worst %.3f of it)",
              rc->what, n, worst_all);
        CHECK(nondet == 0, "%s: 3 threads and 1 give the same bits (%d candidates differ)",
              rc->what, nondet);
        double worst = 0;
        CHECK(mq_moe_run_unfused(ctx, &p, &mw, x, ids, pr, got, NULL, &e) == MQ_OK &&
                  td_outside(got, ref, bound, out_n, &worst) == 0,
              "%s: the unfused baseline within the bound (worst %.3f): %s", rc->what, worst,
              e.msg);
        CHECK(mq_moe_run(ctx, &p, &mw, x, ids, pr, got, NULL, &e) == MQ_OK &&
                  td_outside(got, ref, bound, out_n, &worst) == 0,
              "%s: the default candidate within the bound (worst %.3f): %s", rc->what, worst,
              e.msg);
        /* a planted defect: the first token's two probabilities swapped (or, with one
         * expert per token, its probability halved) must be caught */
        if (p.top_k > 1) {
            float t0 = pr[0];
            pr[0] = pr[1];
            pr[1] = t0;
        } else {
            pr[0] *= 0.5f;
        }
        mq_moe_run(ctx, &p, &mw, x, ids, pr, got, &cs[0], &e);
        CHECK(td_outside(got, ref, bound, out_n, &worst) > 0,
              "%s: a defect (the first token's probabilities changed) is caught (worst %.1f x)",
              rc->what, worst);
        mq_moe_weights_free(&mw);
        free(x);
        free(ids);
        free(pr);
        free(got);
        free(got1);
        free(ref);
        free(bound);
    }
    CHECK(total >= 100, "at least 100 candidate runs verified, got %d", total);
    mq_ctx_destroy(ctx);
    mq_ctx_destroy(ctx1);
}

/* mq_moe_run on a 2-worker context with c: 1 when it is refused as illegal
 * naming the down tile */
static int mq_moe_run_check_cpu_refuses(const mq_moe_problem *p, const mq_moe_weights *mw,
                                        const uint16_t *x, const int32_t *ids, const float *pr,
                                        float *out, const mq_moe_candidate *c, mq_error *e)
{
    mq_ctx *ctx = NULL;
    if (mq_ctx_create(2, &ctx, e))
        return 0;
    int refused = mq_moe_run(ctx, p, mw, x, ids, pr, out, c, e) == MQ_E_ILLEGAL &&
                  strstr(e->msg, "down=16x128") != NULL;
    mq_ctx_destroy(ctx);
    return refused;
}

/* ---- the MSL kernels on the CPU executor (the msl-cpu backend) ---- */

static void test_msl(void)
{
    static char cache[] = "/tmp/mq-moe-msl-XXXXXX";
    if (!mkdtemp(cache)) {
        CHECK(0, "a cache directory for the executor's modules");
        return;
    }
    setenv("MQ_MSL_CACHE", cache, 1);
    mq_backend_opts bo = {2};
    mq_error e;
    mq_backend *be = mq_backend_msl_cpu_open(&bo, &e);
    CHECK(be && be->run_moe && be->run_moe_unfused,
          "expected the msl-cpu backend with the MoE block and its unfused baseline (make deps "
          "installs clang): %s",
          be ? "" : e.msg);
    if (!be)
        return;
    static const struct msl_case {
        mq_format f;
        int tokens, experts, top_k;
        mq_route_kind route;
        int tile_m, tile_n, sgs;
        const char *what;
    } cases[] = {
        {MQ_FMT_TRELLIS3, 1, 8, 2, MQ_ROUTE_UNIFORM, 8, 64, 2,
         "decode, 6 experts with no tokens, 64 of 96 columns a tile"},
        {MQ_FMT_TRELLIS2, 13, 6, 3, MQ_ROUTE_ZIPF, 4, 16, 1,
         "13 tokens, Zipf, top 3 of 6, 4 rows a pass"},
        {MQ_FMT_TRELLIS4, 20, 4, 1, MQ_ROUTE_ONE, 8, 32, 4,
         "20 tokens all on one expert (3 passes of 8; the baseline's tile kernel)"},
        {MQ_FMT_TRELLIS3, 3, 8, 6, MQ_ROUTE_UNIFORM, 4, 32, 2,
         "3 tokens, top 6 of 8 (the combine's second four experts)"},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const struct msl_case *rc = &cases[ci];
        mq_moe_problem p = {rc->f, rc->tokens, 64, 96, rc->experts, rc->top_k, 32};
        mq_moe_candidate c;
        memset(&c, 0, sizeof c);
        c.inner.variant = MQ_VAR_GEMV_TRELLIS;
        c.inner.p = (mq_params){rc->tile_m, rc->tile_n, 8 * (128 / rc->tile_n) * rc->sgs, 0, 1};
        c.fuse_gate_up = 1;
        mq_moe_weights mw;
        if (make_weights(&p, &mw, 41 + (uint32_t)ci))
            continue;
        size_t R = (size_t)p.tokens * p.top_k, out_n = (size_t)p.tokens * p.hidden;
        uint16_t *x = malloc(out_n * sizeof *x);
        int32_t *ids = malloc(R * sizeof *ids);
        float *pr = malloc(R * sizeof *pr), *got = malloc(out_n * sizeof *got);
        double *ref = malloc(out_n * sizeof *ref), *bound = malloc(out_n * sizeof *bound);
        double *bound_h = malloc(out_n * sizeof *bound_h);
        td_fill_activations(x, p.tokens, p.hidden, 43 + (uint32_t)ci);
        mq_moe_routing_generate(&p, rc->route, 1.5, 47 + ci, ids, pr, &e);
        mq_moe_reference(&p, &mw, x, ids, pr, ref, bound, &e);
        mq_moe_reference_arith(&p, &mw, x, ids, pr, MQ_MOE_HALF_WEIGHTS | MQ_MOE_HALF_STORES, ref,
                               bound_h, &e);
        /* 96 = 3 groups of 32: 1 or 3 chunks; gate and up in two passes or one */
        for (int split = 1; split <= 3; split += 2)
            for (int fuse = 0; fuse <= 1; fuse++) {
                double worst = 0;
                c.i_split = split;
                c.fuse_gate_up = fuse;
                int ok = be->run_moe(be, &p, &mw, x, ids, pr, got, &c, NULL, &e) == MQ_OK;
                CHECK(ok, "%s, i_split %d, fuse_gate_up %d: the dispatches run: %s", rc->what,
                      split, fuse, e.msg);
                long bad = ok ? td_outside(got, ref, bound, out_n, &worst) : -1;
                fprintf(stderr, "  MSL %s, i_split %d, fuse_gate_up %d: worst %.4f of the bound\n",
                        rc->what, split, fuse, worst);
                CHECK(bad == 0,
                      "%s, i_split %d, fuse_gate_up %d: the MSL kernel within the reference's "
                      "bound: %ld outside, worst %.3f of it",
                      rc->what, split, fuse, bad, worst);
            }
        c.fuse_gate_up = 1;
        { /* the down kernel with its own tile (two simdgroups of 16 columns) */
            double worst = 0;
            mq_moe_candidate d = c;
            d.i_split = 3;
            d.down_tile_n = 16;
            d.down_tile_k = 128;
            int ok = be->run_moe(be, &p, &mw, x, ids, pr, got, &d, NULL, &e) == MQ_OK;
            long bad = ok ? td_outside(got, ref, bound, out_n, &worst) : -1;
            CHECK(ok && bad == 0, "%s, down tile 16x128: within the bound (%ld outside, worst "
                                  "%.3f) %s", rc->what, bad, worst, ok ? "" : e.msg);
            mq_error ce;
            CHECK(mq_moe_run_check_cpu_refuses(&p, &mw, x, ids, pr, got, &d, &ce),
                  "the CPU model refuses a down tile, naming it: '%s'", ce.msg);
        }
        /* the unfused baseline as the GPUs run it: dense kernels per expert */
        double worst = 0;
        int ok = be->run_moe_unfused(be, &p, &mw, x, ids, pr, got, NULL, &e) == MQ_OK;
        CHECK(ok, "%s: the unfused baseline's launches run: %s", rc->what, e.msg);
        long bad = ok ? td_outside(got, ref, bound_h, out_n, &worst) : -1;
        fprintf(stderr, "  MSL unfused %s: worst %.4f of its bound\n", rc->what, worst);
        CHECK(bad == 0, "%s: the unfused baseline within the FP16-intermediate bound: %ld "
                        "outside, worst %.3f of it", rc->what, bad, worst);
        if (p.top_k > 1) { /* a planted defect: probabilities swapped */
            float t0 = pr[0];
            pr[0] = pr[1];
            pr[1] = t0;
            c.i_split = 1;
            ok = be->run_moe(be, &p, &mw, x, ids, pr, got, &c, NULL, &e) == MQ_OK;
            CHECK(ok && td_outside(got, ref, bound, out_n, &worst) > 0,
                  "%s: swapped probabilities caught in the MSL kernel's output (worst %.1f x)",
                  rc->what, worst);
            pr[0] = 0; /* and the first slot's expert dropped: the looser bound still sees it */
            ok = be->run_moe_unfused(be, &p, &mw, x, ids, pr, got, NULL, &e) == MQ_OK;
            CHECK(ok && td_outside(got, ref, bound_h, out_n, &worst) > 0,
                  "%s: a dropped expert caught in the unfused baseline's output (worst %.1f x) %s",
                  rc->what, worst, ok ? "" : e.msg);
        }
        mq_moe_weights_free(&mw);
        free(x);
        free(ids);
        free(pr);
        free(got);
        free(ref);
        free(bound);
        free(bound_h);
    }
    mq_moe_candidate c = mq_moe_default_candidate(&(mq_moe_problem){MQ_FMT_TRELLIS3, 512, 64, 96,
                                                                     8, 2, 32}, 4);
    mq_msl_moe_plan plan;
    mq_moe_weights mw;
    mq_moe_problem pre = {MQ_FMT_TRELLIS3, 512, 64, 96, 8, 2, 32};
    if (make_weights(&pre, &mw, 7) == 0) {
        CHECK(mq_msl_moe_plan_of(&pre, &mw, &c, NULL, &plan, &e) == MQ_E_ILLEGAL &&
                  msg_has(&e, "gemm_trellis_packed"),
              "the tile engine as the inner kernel refused by the MSL plan, naming it: '%s'",
              e.msg);
        c.inner.variant = MQ_VAR_GEMV_TRELLIS;
        c.inner.p = (mq_params){16, 128, 64, 0, 1}; /* 8 simdgroups of 16 x 128 partials */
        c.i_split = 1;
        CHECK(mq_msl_moe_plan_of(&pre, &mw, &c, NULL, &plan, &e) == MQ_E_ILLEGAL &&
                  msg_has(&e, "threadgroup memory"),
              "tile_m=16 tile_n=128 with 8 simdgroups refused for its threadgroup memory: '%s'",
              e.msg);
        mq_moe_weights_free(&mw);
    }
    mq_backend_close(be);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd) != 0)
        fprintf(stderr, "test_moe: could not remove %s\n", cache);
}

static void test_candidate_check(void)
{
    mq_error e;
    mq_moe_problem p = {MQ_FMT_TRELLIS3, 1, 64, 96, 8, 2, 32};
    mq_moe_candidate c = mq_moe_default_candidate(&p, 4);
    CHECK(mq_moe_candidate_check(&p, &c, &e) == MQ_OK, "the default candidate is legal: %s",
          e.msg);
    c.i_split = 4;
    CHECK(mq_moe_candidate_check(&p, &c, &e) == MQ_E_ILLEGAL && msg_has(&e, "i_split=4"),
          "4 chunks of a 96-wide intermediate in 32-row groups refused, got '%s'", e.msg);
    c.i_split = 1;
    c.inner.variant = MQ_VAR_MLX_SPLITK;
    CHECK(mq_moe_candidate_check(&p, &c, &e) == MQ_E_ILLEGAL && msg_has(&e, "mlx_qmm_splitk"),
          "an inner kernel that does not serve trellis is refused, got '%s'", e.msg);
    c = mq_moe_default_candidate(&p, 4);
    c.inner.p.split_k = 2;
    CHECK(mq_moe_candidate_check(&p, &c, &e) == MQ_E_ILLEGAL && msg_has(&e, "split_k"),
          "an inner split_k is refused, got '%s'", e.msg);
    mq_moe_problem pre = {MQ_FMT_TRELLIS3, 512, 64, 96, 8, 2, 32};
    mq_moe_candidate d = mq_moe_default_candidate(&pre, 4);
    CHECK(d.inner.variant == MQ_VAR_TRELLIS_PACKED,
          "512 tokens over 8 experts: the tile engine by default");
}

int main(void)
{
    test_problem_check();
    test_routing();
    test_weights();
    test_reference();
    test_candidate_check();
    test_runs();
    test_msl();
    return check_done("test_moe");
}
