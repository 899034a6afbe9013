/* test_schedule.c - the work decomposition as the kernels really execute it,
 * read from the context's trace: the stripe document's worked example
 * (M=48, N=64, 16x16 tiles, 5 threadgroups), k_parallel stripes, the 2D grid
 * and the split-K grid each covering every (tile, slice) exactly once; a
 * GEMM run with the caller's plan (mq_gemm_planned). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mq.h"
#include "testdata.h"

#define MAXT 4096
static mq_trace_entry trace[MAXT];

static int run_traced(mq_ctx *ctx, const mq_problem *p, mq_candidate c)
{
    float *W = malloc(sizeof(float) * p->K * p->N);
    uint16_t *A = malloc(sizeof(uint16_t) * p->M * p->K);
    float *C = malloc(sizeof(float) * p->M * p->N);
    td_fill_weights(W, p->K, p->N, 1);
    td_fill_activations(A, p->M, p->K, 2);
    mq_weights w;
    mq_error err;
    int count = 0;
    CHECK(mq_quantize(p->format, W, p->K, p->N, p->group, NULL, &w, &err) == MQ_OK, "quantize");
    mq_ctx_set_trace(ctx, trace, MAXT, &count);
    CHECK(mq_gemm(ctx, p, &w, A, C, &c, NULL, &err) == MQ_OK, "gemm: %s", err.msg);
    mq_ctx_set_trace(ctx, NULL, 0, NULL);
    mq_weights_free(&w);
    free(W);
    free(A);
    free(C);
    return count;
}

static void test_worked_example(mq_ctx *ctx)
{
    /* seed 000, section 2.3: 3x4 tiles, 5 threadgroups, work_per_tg = 3 */
    static const int expected[5][3][2] = {
        {{0, 0}, {1, 0}, {2, 0}}, {{0, 1}, {1, 1}, {2, 1}}, {{0, 2}, {1, 2}, {2, 2}},
        {{0, 3}, {1, 3}, {2, 3}}, {{-1, -1}, {-1, -1}, {-1, -1}},
    };
    mq_problem p = {MQ_FMT_FP4, 48, 64, 64, 32};
    mq_candidate c = {MQ_VAR_MARLIN_FP4_STRIPED, {16, 16, 32, 5, 1}};
    int n = run_traced(ctx, &p, c);
    CHECK(n == 12, "12 work units processed, got %d", n);
    int got[5][3][2];
    int cnt[5] = {0};
    memset(got, -1, sizeof got);
    /* a threadgroup runs its units in order; the trace is in execution order */
    for (int i = 0; i < n; i++) {
        int tg = trace[i].tg;
        CHECK(tg >= 0 && tg < 5 && cnt[tg] < 3, "threadgroup %d within 0..4 with <= 3 units", tg);
        if (tg < 0 || tg >= 5 || cnt[tg] >= 3)
            continue;
        got[tg][cnt[tg]][0] = trace[i].tile_row;
        got[tg][cnt[tg]][1] = trace[i].tile_col;
        cnt[tg]++;
    }
    for (int tg = 0; tg < 5; tg++)
        for (int u = 0; u < 3; u++)
            CHECK(got[tg][u][0] == expected[tg][u][0] && got[tg][u][1] == expected[tg][u][1],
                  "TG %d unit %d: expected tile (%d,%d), got (%d,%d)", tg, u,
                  expected[tg][u][0], expected[tg][u][1], got[tg][u][0], got[tg][u][1]);
    CHECK(cnt[4] == 0, "TG 4 is idle, as in the seed's table (it ran %d units)", cnt[4]);
}

/* Every (row, col, slice) of an m x n x s space is recorded exactly once. */
static void check_cover(int n, int mt, int nt, int s, const char *what)
{
    int *seen = calloc((size_t)(mt * nt * s), sizeof *seen);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        mq_trace_entry e = trace[i];
        if (e.tile_row < 0 || e.tile_row >= mt || e.tile_col < 0 || e.tile_col >= nt ||
            e.k_slice < 0 || e.k_slice >= s) {
            bad++;
            continue;
        }
        seen[(e.tile_row * nt + e.tile_col) * s + e.k_slice]++;
    }
    for (int i = 0; i < mt * nt * s; i++)
        bad += seen[i] != 1;
    CHECK(n == mt * nt * s && bad == 0,
          "%s: %d units each exactly once (got %d entries, %d problems)", what, mt * nt * s, n,
          bad);
    free(seen);
}

static void test_k_parallel_stripes(mq_ctx *ctx)
{
    mq_problem p = {MQ_FMT_FP4, 48, 64, 128, 32};
    mq_candidate c = {MQ_VAR_MARLIN_FP4_STRIPED, {16, 16, 32, 5, 2}};
    int n = run_traced(ctx, &p, c);
    check_cover(n, 3, 4, 2, "striped k_parallel=2");
    /* TG t owns the contiguous range [5t, 5t+5) of the column-major list
     * (tile_linear = unit / 2, slice = unit % 2, row = tile_linear % 3) */
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int unit = (trace[i].tile_col * 3 + trace[i].tile_row) * 2 + trace[i].k_slice;
        if (unit / 5 != trace[i].tg)
            bad++;
    }
    CHECK(bad == 0, "each threadgroup ran only its own stripe of 5 units (%d strays)", bad);
}

static void test_grids(mq_ctx *ctx)
{
    mq_problem p = {MQ_FMT_U4, 70, 100, 256, 64};
    mq_candidate c = {MQ_VAR_FUSED_U4, {32, 32, 64, 0, 1}};
    check_cover(run_traced(ctx, &p, c), 3, 4, 1, "2D grid 3x4");
    mq_candidate s = {MQ_VAR_MLX_SPLITK, {32, 32, 64, 0, 3}};
    check_cover(run_traced(ctx, &p, s), 3, 4, 3, "split-K grid 3x4x3");
}

/* mq_gemm_planned: the caller's plan gives mq_gemm's output bit for bit
 * (split-K, striped and the 2D grid), and a plan made for another problem
 * or candidate is refused before a threadgroup runs. */
static void test_planned(mq_ctx *ctx)
{
    mq_problem p = {MQ_FMT_FP4, 48, 64, 256, 32}, other = {MQ_FMT_FP4, 96, 64, 256, 32};
    mq_candidate cs[] = {{MQ_VAR_MLX_SPLITK, {16, 32, 32, 0, 3}},
                         {MQ_VAR_MARLIN_FP4_STRIPED, {16, 16, 32, 5, 2}},
                         {MQ_VAR_MARLIN_FP4, {16, 32, 32, 0, 1}}};
    float *W = malloc(sizeof(float) * p.K * p.N);
    uint16_t *A = malloc(sizeof(uint16_t) * other.M * p.K);
    float *C0 = malloc(sizeof(float) * other.M * p.N), *C1 = malloc(sizeof(float) * other.M * p.N);
    td_fill_weights(W, p.K, p.N, 3);
    td_fill_activations(A, other.M, p.K, 4);
    mq_weights w;
    mq_error err;
    CHECK(mq_quantize(p.format, W, p.K, p.N, p.group, NULL, &w, &err) == MQ_OK, "quantize");
    const mq_limits lim = mq_limits_default();
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        mq_plan plan, wrong;
        CHECK(mq_plan_candidate(&p, &cs[i], &lim, &plan, &err) == MQ_OK &&
                  mq_plan_candidate(&other, &cs[i], &lim, &wrong, &err) == MQ_OK,
              "plan %s: %s", mq_variant_get(cs[i].variant)->name, err.msg);
        CHECK(mq_gemm(ctx, &p, &w, A, C0, &cs[i], &lim, &err) == MQ_OK &&
                  mq_gemm_planned(ctx, &p, &w, A, C1, &cs[i], &plan, &err) == MQ_OK &&
                  !memcmp(C0, C1, sizeof(float) * p.M * p.N),
              "%s: expected mq_gemm_planned with the caller's plan to give mq_gemm's output "
              "(%s)", mq_variant_get(cs[i].variant)->name, err.msg);
        CHECK(mq_gemm_planned(ctx, &p, &w, A, C1, &cs[i], &wrong, &err) == MQ_E_ARG &&
                  strstr(err.msg, "the plan is not this problem's"),
              "%s: expected a plan for M=96 refused for M=48, got '%s'",
              mq_variant_get(cs[i].variant)->name, err.msg);
        wrong = plan;
        wrong.threadgroups = wrong.work_units + 1;
        CHECK(mq_gemm_planned(ctx, &p, &w, A, C1, &cs[i], &wrong, &err) == MQ_E_ARG,
              "%s: expected a plan with more threadgroups than work units refused",
              mq_variant_get(cs[i].variant)->name);
    }
    mq_weights_free(&w);
    free(W);
    free(A);
    free(C0);
    free(C1);
}

int main(void)
{
    mq_ctx *ctx;
    mq_error err;
    CHECK(mq_ctx_create(0, &ctx, &err) == MQ_OK, "context: %s", err.msg);
    test_worked_example(ctx);
    test_k_parallel_stripes(ctx);
    test_grids(ctx);
    test_planned(ctx);
    mq_ctx_destroy(ctx);
    return check_done("schedule");
}
