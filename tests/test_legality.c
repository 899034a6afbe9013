/* test_legality.c - candidates refused with a reason (threadgroup memory over
 * budget, K slices that cannot be aligned, tiles that do not divide what they
 * must, split_k where the variant has none, wrong format, bad threadgroup
 * counts, too many threads), bad problems, the seeds' memory budgets, and an
 * unaligned last K partition that runs and matches the reference. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mq.h"
#include "testdata.h"

static void expect_refused(const mq_problem *p, mq_candidate c, const mq_limits *lim,
                           const char *needle)
{
    mq_plan plan;
    mq_error err = {MQ_OK, ""};
    char name[128];
    mq_candidate_str(&c, name, sizeof name);
    mq_status st = mq_plan_candidate(p, &c, lim, &plan, &err);
    CHECK(st == MQ_E_ILLEGAL && strstr(err.msg, needle),
          "%s refused with a reason containing '%s'; got status %s, '%s'", name, needle,
          mq_status_name(st), err.msg);
}

static void test_refusals(void)
{
    mq_problem fp4 = {MQ_FMT_FP4, 16, 4096, 4096, 128};
    mq_limits lim = mq_limits_default();
    /* double-buffered FP16 A (tm x tk) and B (tk x tn) tiles, rows padded */
    const int pad = mq_variant_get(MQ_VAR_MARLIN_FP4)->tile_pad;
#define MARLIN_BYTES(tm, tn, tk) (2 * 2 * ((tm) * ((tk) + pad) + (tk) * ((tn) + pad)))
    char want[96];
    snprintf(want, sizeof want, "threadgroup memory %d B", MARLIN_BYTES(128, 128, 64));
    expect_refused(&fp4, (mq_candidate){MQ_VAR_MARLIN_FP4, {128, 128, 64, 0, 1}}, NULL, want);
    mq_limits small = lim;
    small.tg_mem_bytes = MARLIN_BYTES(64, 64, 32); /* 16384 B unpadded, 19456 B at pad 8 */
    mq_plan plan;
    CHECK(mq_plan_candidate(&fp4, &(mq_candidate){MQ_VAR_MARLIN_FP4, {64, 64, 32, 0, 1}},
                            &small, &plan, NULL) == MQ_OK,
          "64x64x32 double-buffered fits %d B exactly", small.tg_mem_bytes);
    snprintf(want, sizeof want, "exceeds the budget %d", small.tg_mem_bytes);
    expect_refused(&fp4, (mq_candidate){MQ_VAR_MARLIN_FP4, {64, 64, 64, 0, 1}}, &small, want);
#undef MARLIN_BYTES
    expect_refused(&fp4, (mq_candidate){MQ_VAR_MLX_SPLITK, {128, 128, 8, 0, 1}}, NULL,
                   "2048 threads per threadgroup");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_MARLIN_FP4, {64, 64, 48, 0, 1}}, NULL,
                   "straddle scale groups");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_MARLIN_FP4, {64, 20, 32, 0, 1}}, NULL,
                   "tile_n=20 must be a multiple of 8");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_MARLIN_FP4, {12, 64, 32, 0, 1}}, NULL,
                   "tile_m=12");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_FUSED_FP4, {8, 2048, 32, 0, 1}}, NULL,
                   "tile_n=2048 must be a multiple of 8 in [8, 1024]");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_FUSED_FP4, {512, 1024, 8, 0, 1}}, NULL,
                   "more than the CPU model's 262144");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_MARLIN_FP4, {64, 64, 32, 0, 2}}, NULL,
                   "does not split K");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_FUSED_U4, {64, 64, 32, 0, 1}}, NULL,
                   "does not serve format fp4");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_MARLIN_FP4, {64, 64, 32, 7, 1}}, NULL,
                   "fixes num_threadgroups by its grid (64)");
    /* 1 x 64 tiles x 2 slices = 128 work units */
    expect_refused(&fp4, (mq_candidate){MQ_VAR_MARLIN_FP4_STRIPED, {64, 64, 32, 129, 2}}, NULL,
                   "num_threadgroups=129 must be in [1, 128]");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_MARLIN_FP4_STRIPED, {64, 64, 32, 4, 0}}, NULL,
                   "split_k=0");
    /* K=256, group 128: two aligned slices at most */
    mq_problem shortk = {MQ_FMT_FP4, 4, 256, 256, 128};
    expect_refused(&shortk, (mq_candidate){MQ_VAR_MLX_SPLITK, {32, 32, 32, 0, 3}}, NULL,
                   "split_k=3 exceeds the 2 aligned K slices");
    mq_problem tr = {MQ_FMT_TRELLIS3, 4, 256, 256, 32};
    expect_refused(&tr, (mq_candidate){MQ_VAR_TRELLIS_DECODE, {32, 120, 32, 0, 1}}, NULL,
                   "tile_n=120 must be a multiple of 16");
    expect_refused(&tr, (mq_candidate){MQ_VAR_TRELLIS_PACKED, {64, 64, 24, 0, 1}}, NULL,
                   "tile_k=24 must be a multiple of 16");
    /* the decode path's own rules */
    expect_refused(&fp4, (mq_candidate){MQ_VAR_GEMV_DECODE, {32, 32, 128, 0, 1}}, NULL,
                   "at most 16 rows in registers");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_GEMV_DECODE, {4, 48, 128, 0, 1}}, NULL,
                   "tile_n is 16, 32, 64 or 128");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_GEMV_DECODE, {4, 16, 32, 0, 1}}, NULL,
                   "tile_k=32 must be a multiple of 64");
    mq_problem odd_n = {MQ_FMT_U4, 1, 4098, 256, 128};
    expect_refused(&odd_n, (mq_candidate){MQ_VAR_GEMV_DECODE, {1, 32, 128, 0, 1}}, NULL,
                   "N must be a multiple of 4");
    expect_refused(&tr, (mq_candidate){MQ_VAR_GEMV_TRELLIS, {4, 64, 128, 0, 2}}, NULL,
                   "does not split K");
}

static void test_budgets(void)
{
    /* the seeds' own budgets: 16384 B, 4608 B, 9216 B; 128 threads; with
     * tile rows padded by 8 halves (the default) 19456 B, 5632 B, 11264 B */
    static const struct {
        mq_variant v;
        mq_format f;
        int bytes, padded8;
    } seeds[] = {
        {MQ_VAR_MARLIN_FP4, MQ_FMT_FP4, 16384, 19456},
        {MQ_VAR_FUSED_FP4, MQ_FMT_FP4, 4608, 5632},
        {MQ_VAR_FUSED_U4, MQ_FMT_U4, 4608, 5632},
        {MQ_VAR_TRELLIS_PACKED, MQ_FMT_TRELLIS4, 9216, 11264},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        mq_problem p = {seeds[i].f, 64, 4096, 4096, 128};
        const mq_variant_info *vi = mq_variant_get(seeds[i].v);
        mq_candidate c = {seeds[i].v, vi->defaults};
        mq_plan plan;
        CHECK(vi->tile_pad == 0 || vi->tile_pad == 8, "%s: tile pad 0 or 8, got %d", vi->name,
              vi->tile_pad);
        const int want = vi->tile_pad ? seeds[i].padded8 : seeds[i].bytes;
        CHECK(mq_plan_candidate(&p, &c, NULL, &plan, NULL) == MQ_OK, "seed default is legal");
        CHECK(plan.tg_mem_bytes == want && plan.threads_per_tg == 128,
              "%s: %d B (pad %d) and 128 threads as in the seed, got %d B, %d threads",
              vi->name, want, vi->tile_pad, plan.tg_mem_bytes, plan.threads_per_tg);
    }
    mq_problem dec = {MQ_FMT_TRELLIS2, 8, 4096, 4096, 128}, pre = dec;
    pre.M = 17;
    CHECK(mq_default_candidate(&dec).variant == MQ_VAR_TRELLIS_DECODE &&
              mq_default_candidate(&pre).variant == MQ_VAR_TRELLIS_PACKED,
          "seed rule: trellis M <= 16 decodes, M = 17 prefills");
}

/* The lane kernel's rules (kernels/variants.c lane_plan), each refused with
 * its reason, and its threadgroup memory and threads as metal/mq_lane.h
 * declares them: two padded A tiles (the next one fills while one is
 * multiplied), or the K shares of the simdgroups past the first, whichever
 * is larger; 64x64x128 is over Apple's 32 KiB that way. */
static void test_lane_rules(void)
{
    mq_problem fp4 = {MQ_FMT_FP4, 16, 4096, 4096, 128};
    mq_limits lim = mq_limits_default();
    expect_refused(&fp4, (mq_candidate){MQ_VAR_LANE_GEMM, {128, 64, 64, 0, 1}}, NULL,
                   "at most 64 rows of accumulators");
    expect_refused(&(mq_problem){MQ_FMT_FP4, 16, 4096, 4096, 32},
                   (mq_candidate){MQ_VAR_LANE_GEMM, {16, 64, 96, 0, 1}}, NULL,
                   "whole super-blocks of 64 K");
    expect_refused(&fp4, (mq_candidate){MQ_VAR_LANE_GEMM, {16, 48, 64, 0, 1}}, NULL,
                   "tile_n=48 must be a multiple of 32");
    expect_refused(&(mq_problem){MQ_FMT_TRELLIS3, 16, 4096, 4096, 128},
                   (mq_candidate){MQ_VAR_LANE_GEMM, {16, 64, 64, 0, 1}}, NULL,
                   "does not serve format trellis3");
    mq_limits narrow = lim;
    narrow.simd_width = 64;
    expect_refused(&fp4, (mq_candidate){MQ_VAR_LANE_GEMM, {16, 64, 64, 0, 1}}, &narrow,
                   "needs 32-lane simdgroups");
    const int pad = mq_variant_get(MQ_VAR_LANE_GEMM)->tile_pad;
    expect_refused(&fp4, (mq_candidate){MQ_VAR_LANE_GEMM, {64, 64, 128, 0, 1}}, NULL,
                   "threadgroup memory 34816 B (lane_gemm 64x64x128) exceeds the budget 32768 B");
    static const int cases[][3] = {{16, 64, 128}, {32, 64, 128}, {16, 32, 256}, {8, 128, 256}};
    for (int i = 0; i < 4; i++) {
        int tm = cases[i][0], tn = cases[i][1], tk = cases[i][2];
        int sgs = (tn / 32) * (tk / 64), a = 2 * 2 * tm * (tk + pad);
        int red = (tk / 64 - 1) * (tn / 32) * 4 * (tm / 8) * 64 * 4;
        mq_plan plan;
        mq_error err;
        mq_status st = mq_plan_candidate(&fp4, &(mq_candidate){MQ_VAR_LANE_GEMM, {tm, tn, tk, 0, 1}},
                                         &lim, &plan, &err);
        CHECK(st == MQ_OK && plan.simdgroups == sgs && plan.threads_per_tg == sgs * 32 &&
                  plan.tg_mem_bytes == (a > red ? a : red),
              "lane_gemm %dx%dx%d: expected %d simdgroups and %d B, got %d and %d (%s)", tm, tn,
              tk, sgs, a > red ? a : red, plan.simdgroups, plan.tg_mem_bytes,
              st ? err.msg : "ok");
    }
    mq_plan plan;
    CHECK(mq_plan_candidate(&fp4,
                            &(mq_candidate){MQ_VAR_LANE_GEMM,
                                            mq_variant_get(MQ_VAR_LANE_GEMM)->defaults},
                            &lim, &plan, NULL) == MQ_OK,
          "lane_gemm's defaults are legal under Apple's limits");
}

static void test_bad_problems(void)
{
    mq_error err;
    mq_problem p = {MQ_FMT_U4, 1, 64, 100, 32};
    CHECK(mq_problem_check(&p, &err) == MQ_E_SHAPE &&
              strstr(err.msg, "K=100 is not a multiple of the group size 32"),
          "K not a multiple of the group: '%s'", err.msg);
    p.K = 96;
    p.group = 16;
    CHECK(mq_problem_check(&p, &err) == MQ_E_SHAPE && strstr(err.msg, "group size 16"),
          "group 16 refused: '%s'", err.msg);
    p.group = 32;
    p.M = 0;
    CHECK(mq_problem_check(&p, &err) == MQ_E_SHAPE, "M=0 refused: '%s'", err.msg);
    mq_variant v;
    CHECK(mq_variant_from_name("marlin_gemm_int8", &v, &err) == MQ_E_ARG &&
              strstr(err.msg, "mlx_qmm_splitk"),
          "unknown variant lists the known ones: '%s'", err.msg);
}

static void test_unaligned_last_partition(void)
{
    /* K = 31 groups of 32 (prime): split_k = 2 gives slices of 15 and 16 groups */
    mq_problem p = {MQ_FMT_U4, 12, 96, 31 * 32, 32};
    mq_candidate c = {MQ_VAR_MLX_SPLITK, {32, 32, 32, 0, 2}};
    mq_plan plan;
    mq_error err;
    CHECK(mq_plan_candidate(&p, &c, NULL, &plan, &err) == MQ_OK, "split 31 groups in 2: %s",
          err.msg);
    CHECK(plan.k_slice_len == 15 * 32 && plan.k_last_len == 16 * 32,
          "slices of 480 and 512, got %d and %d", plan.k_slice_len, plan.k_last_len);
    float *W = malloc(sizeof(float) * p.K * p.N);
    uint16_t *A = malloc(sizeof(uint16_t) * p.M * p.K);
    float *C = malloc(sizeof(float) * p.M * p.N);
    double *ref = malloc(sizeof(double) * p.M * p.N), *ab = malloc(sizeof(double) * p.M * p.N);
    td_fill_weights(W, p.K, p.N, 5);
    td_fill_activations(A, p.M, p.K, 6);
    mq_weights w;
    mq_ctx *ctx;
    CHECK(mq_quantize(p.format, W, p.K, p.N, p.group, NULL, &w, &err) == MQ_OK, "quantize");
    CHECK(mq_ctx_create(2, &ctx, &err) == MQ_OK, "context");
    CHECK(mq_gemm(ctx, &p, &w, A, C, &c, NULL, &err) == MQ_OK, "run: %s", err.msg);
    CHECK(mq_reference_gemm(&w, A, p.M, ref, ab, &err) == MQ_OK, "reference");
    double worst;
    CHECK(td_count_outside_bound(C, ref, ab, (long)p.M * p.N, p.K, &worst) == 0,
          "unaligned last partition matches the reference (worst err/bound %.3g)", worst);
    mq_problem other = p;
    other.N = 64;
    CHECK(mq_gemm(ctx, &other, &w, A, C, &c, NULL, &err) == MQ_E_WEIGHTS &&
              strstr(err.msg, "N=96"),
          "weights for another shape are refused: '%s'", err.msg);
    mq_ctx_destroy(ctx);
    mq_weights_free(&w);
    free(W);
    free(A);
    free(C);
    free(ref);
    free(ab);
}

int main(void)
{
    test_refusals();
    test_budgets();
    test_bad_problems();
    test_lane_rules();
    test_unaligned_last_partition();
    return check_done("legality");
}
