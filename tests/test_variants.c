/* test_variants.c - every kernel variant against the float64 reference, over
 * several tile configurations, split_k in {1, 2, 3, 8}, several threadgroup
 * counts for the striped kernel, groups 32/64/128 and ragged shapes (M, N, K
 * not tile multiples, M = 1), with the error bound of testdata.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "measure.h"
#include "mq.h"
#include "mq_internal.h"
#include "testdata.h"

typedef struct {
    int M, N, K, group;
} shape;

static const shape shapes[] = {
    {1, 72, 256, 32}, {3, 130, 384, 128}, {17, 100, 192, 64}, {70, 45, 320, 32}, {64, 64, 128, 64},
    {5, 96, 1024, 64}, /* eight 64-K slices: the lane kernel's split_k=8 */
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

typedef struct {
    int m, n, k;
} tiles;

static const tiles q4_tiles[] = {{64, 64, 32}, {16, 32, 64}, {8, 128, 128}, {32, 16, 16}, {128, 64, 32},
                                 {8, 1024, 128}};
static const tiles trellis_tiles[] = {{64, 64, 32}, {32, 128, 32}, {16, 16, 16}, {8, 32, 64}};
static const tiles mlx_tiles[] = {{32, 32, 32}, {16, 64, 64}, {64, 32, 128}};
static const tiles lane_tiles[] = {{16, 64, 128}, {8, 32, 64}, {64, 96, 256}, {32, 128, 64}};
static const int splits[] = {1, 2, 3, 8};
static const int striped_tgs[] = {0, 1, 5};

typedef struct {
    mq_weights w;
    uint16_t *A;
    double *ref, *absref;
    float *C;
} fixture;

static int ran[MQ_VAR_COUNT][9];

static void run_case(mq_ctx *ctx, const fixture *fx, const mq_problem *p, mq_candidate c)
{
    mq_error err;
    mq_plan plan;
    char name[128];
    mq_candidate_str(&c, name, sizeof name);
    if (mq_plan_candidate(p, &c, NULL, &plan, &err) != MQ_OK) {
        CHECK(err.code == MQ_E_ILLEGAL && err.msg[0], "%s refused with a reason", name);
        return;
    }
    long count = (long)p->M * p->N;
    for (long i = 0; i < count; i++)
        fx->C[i] = NAN;
    mq_status st = mq_gemm(ctx, p, &fx->w, fx->A, fx->C, &c, NULL, &err);
    CHECK(st == MQ_OK, "%s on M=%d N=%d K=%d runs: %s", name, p->M, p->N, p->K, err.msg);
    double worst;
    long bad = td_count_outside_bound(fx->C, fx->ref, fx->absref, count, p->K, &worst);
    CHECK(bad == 0,
          "%s %s M=%d N=%d K=%d g=%d: every element within the FP32 bound; %ld outside, "
          "worst err/bound %.3g",
          name, mq_format_name(p->format), p->M, p->N, p->K, p->group, bad, worst);
    ran[c.variant][c.p.split_k]++;
}

static void run_variant(mq_ctx *ctx, const fixture *fx, const mq_problem *p, mq_variant v)
{
    const mq_variant_info *vi = mq_variant_get(v);
    const tiles *ts = q4_tiles;
    int nt = (int)(sizeof q4_tiles / sizeof q4_tiles[0]);
    if (vi->tile_quantum == 16) {
        ts = trellis_tiles;
        nt = (int)(sizeof trellis_tiles / sizeof trellis_tiles[0]);
    } else if (v == MQ_VAR_MLX_SPLITK) {
        ts = mlx_tiles;
        nt = (int)(sizeof mlx_tiles / sizeof mlx_tiles[0]);
    } else if (vi->dequant == MQ_DEQ_LANE) {
        ts = lane_tiles;
        nt = (int)(sizeof lane_tiles / sizeof lane_tiles[0]);
    }
    for (int t = 0; t < nt; t++) {
        int nsplit = vi->schedule == MQ_SCHED_GRID2D ? 1 : 4;
        for (int s = 0; s < nsplit; s++) {
            int ntg = vi->schedule == MQ_SCHED_STRIPED ? 3 : 1;
            for (int g = 0; g < ntg; g++) {
                mq_candidate c = {v, {ts[t].m, ts[t].n, ts[t].k, 0, splits[s]}};
                if (vi->schedule == MQ_SCHED_STRIPED && striped_tgs[g]) {
                    mq_plan plan;
                    c.p.num_threadgroups = 0;
                    if (mq_plan_candidate(p, &c, NULL, &plan, NULL) != MQ_OK)
                        continue;
                    c.p.num_threadgroups = striped_tgs[g] < plan.work_units ? striped_tgs[g]
                                                                            : plan.work_units;
                }
                run_case(ctx, fx, p, c);
            }
        }
    }
}

/* u4 as the seeds dequantize it, (q - z) * s per weight: codes at their
 * zero point are exactly zero weights, so with every code at its zero point
 * C is exactly 0, and with one non-zero weight per column every variant
 * stays within the FP32 bound of sum |a*w| (the algebraic form
 * s * (sum a*q - z * sum a) misses it by 5-110x: the difference of two
 * rounded sums of |a*q|). */
static void test_u4_zero_points(mq_ctx *ctx)
{
    enum { M = 5, N = 48, K = 512, G = 32 };
    mq_error err;
    mq_weights w;
    CHECK(mq_weights_alloc(&w, MQ_FMT_U4, K, N, G, &err) == MQ_OK, "alloc: %s", err.msg);
    uint16_t *A = malloc(sizeof(uint16_t) * M * K);
    float *C = malloc(sizeof(float) * M * N);
    double *ref = malloc(sizeof(double) * M * N), *abs = malloc(sizeof(double) * M * N);
    td_fill_activations(A, M, K, 77u);
    for (int pass = 0; pass < 2; pass++) {
        /* codes 9..15 as zero points, every code at its zero point ... */
        for (int g = 0; g < K / G; g++)
            for (int n = 0; n < N; n++) {
                w.zeros[g * N + n] = (uint8_t)(9 + (g + n) % 7);
                w.scales[g * N + n] = mq_float_to_half(0.5f + (float)((g * 7 + n) % 5));
            }
        for (int kw = 0; kw < K / 8; kw++)
            for (int n = 0; n < N; n++) {
                uint32_t z = w.zeros[(kw * 8 / G) * N + n], word = 0;
                for (int j = 0; j < 8; j++)
                    word |= z << (4 * j);
                /* ... but one: code 0 at k = 8 * (n % 64) (pass 1) */
                if (pass == 1 && kw == n % (K / 8))
                    word &= ~0xfu;
                w.packed[(size_t)kw * N + n] = word;
            }
        CHECK(mq_reference_gemm(&w, A, M, ref, abs, &err) == MQ_OK, "reference: %s", err.msg);
        for (int v = 0; v < MQ_VAR_COUNT; v++) {
            if (!mq_variant_serves((mq_variant)v, MQ_FMT_U4))
                continue;
            mq_problem p = {MQ_FMT_U4, M, N, K, G};
            mq_candidate c = {(mq_variant)v, mq_variant_get((mq_variant)v)->defaults};
            int bad = 0;
            double worst = 0; /* pass 0: the largest |C|; pass 1: of the bound */
            if (mq_gemm(ctx, &p, &w, A, C, &c, NULL, &err) != MQ_OK) {
                CHECK(0, "%s: %s", mq_variant_get((mq_variant)v)->name, err.msg);
                continue;
            }
            for (int i = 0; i < M * N; i++) {
                double bound = mq_verify_bound(K, abs[i], ref[i], NULL);
                double e = fabs(C[i] - ref[i]);
                bad += pass == 0 ? C[i] != 0.0f : e > bound;
                if (pass == 0 && fabs(C[i]) > worst)
                    worst = fabs(C[i]);
                if (pass == 1 && bound > 0 && e / bound > worst)
                    worst = e / bound;
            }
            CHECK(bad == 0,
                  pass == 0 ? "%s u4: every code at its zero point gives C exactly 0, %d outputs "
                              "are not (largest |C| %.3g)"
                            : "%s u4: one non-zero weight per column stays within the FP32 bound, "
                              "%d outputs do not (worst %.3g x)",
                  mq_variant_get((mq_variant)v)->name, bad, worst);
        }
    }
    free(A);
    free(C);
    free(ref);
    free(abs);
    mq_weights_free(&w);
}

/* Seed 004's partial last group: trellis weights with K = 400 and group
 * 128 (groups of 128, 128, 128, 16) through every trellis variant, against
 * the float64 reference; fp4 and u4 still refuse such a K, naming it. */
static void test_partial_group(mq_ctx *ctx)
{
    enum { M = 5, N = 48, K = 400, G = 128 };
    mq_error err;
    float *W = malloc(sizeof(float) * K * N);
    uint16_t *A = malloc(sizeof(uint16_t) * M * K);
    float *C = malloc(sizeof(float) * M * N);
    double *ref = malloc(sizeof(double) * M * N), *abs = malloc(sizeof(double) * M * N);
    td_fill_weights(W, K, N, 9u);
    td_fill_activations(A, M, K, 10u);
    CHECK(mq_group_count(K, G) == 4, "expected ceil(400 / 128) = 4 groups, got %d",
          mq_group_count(K, G));
    for (int f = 0; f < MQ_FMT_COUNT; f++) {
        mq_problem p = {(mq_format)f, M, N, K, G};
        mq_weights w;
        if (!mq_format_is_trellis((mq_format)f)) {
            CHECK(mq_problem_check(&p, &err) == MQ_E_SHAPE && strstr(err.msg, "K=400") &&
                      strstr(err.msg, "group size 128") &&
                      mq_quantize(p.format, W, K, N, G, NULL, &w, &err) == MQ_E_SHAPE,
                  "expected %s with K=400, group 128 to be refused naming K and the group, got "
                  "'%s'",
                  mq_format_name(p.format), err.msg);
            continue;
        }
        CHECK(mq_problem_check(&p, &err) == MQ_OK &&
                  mq_quantize(p.format, W, K, N, G, NULL, &w, &err) == MQ_OK &&
                  mq_reference_gemm(&w, A, M, ref, abs, &err) == MQ_OK,
              "expected %s with a partial last group to quantize: %s", mq_format_name(p.format),
              err.msg);
        /* the last group's scales come from its 16 rows only */
        double amax = 0;
        for (int k = 384; k < K; k++)
            amax = fmax(amax, fabs(W[(size_t)k * N]));
        CHECK(amax > 0 && fabs(w.tscales[3 * N] - amax) <= 1e-6 * amax,
              "expected the partial last group's scale from its 16 rows (max |w| %g, the grid's "
              "max 1), got %g",
              amax, (double)w.tscales[3 * N]);
        for (int v = 0; v < MQ_VAR_COUNT; v++) {
            if (!mq_variant_serves((mq_variant)v, p.format))
                continue;
            mq_candidate c = {(mq_variant)v, mq_variant_get((mq_variant)v)->defaults};
            int bad = 0;
            if (mq_gemm(ctx, &p, &w, A, C, &c, NULL, &err) != MQ_OK) {
                CHECK(0, "%s %s K=400: %s", mq_variant_get((mq_variant)v)->name,
                      mq_format_name(p.format), err.msg);
                continue;
            }
            for (int i = 0; i < M * N; i++)
                bad += fabs(C[i] - ref[i]) > mq_verify_bound(K, abs[i], ref[i], NULL);
            CHECK(bad == 0, "%s %s with a partial last group (K=400, group 128): %d outputs off",
                  mq_variant_get((mq_variant)v)->name, mq_format_name(p.format), bad);
        }
        mq_weights_free(&w);
    }
    free(W);
    free(A);
    free(C);
    free(ref);
    free(abs);
}

/* The decode path's CPU schedule (gemv_stream.c): K slices x column ranges
 * that cover every group and column once for any thread count and row
 * count, and every format right through it: N not a multiple of 16 (the
 * last vector and the last trellis tile partly valid), several column
 * ranges (tile_m rows x the range stay in L1), several slices summed in
 * order, and M not a multiple of tile_m. */
static void test_decode_stream(void)
{
    static const struct {
        int M, N, K, group, tile_m;
    } cases[] = {
        {1, 4100, 512, 128, 1}, {3, 84, 1024, 64, 2}, {17, 1000, 256, 32, 16}, {16, 20, 128, 32, 8},
        {5, 516, 2048, 128, 4},
    };
    static const int thread_counts[] = {1, 3, 5};
    mq_error err;
    for (int t = 0; t < 3; t++) {
        mq_ctx *ctx;
        CHECK(mq_ctx_create(thread_counts[t], &ctx, &err) == MQ_OK, "context: %s", err.msg);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            int M = cases[i].M, N = cases[i].N, K = cases[i].K, G = cases[i].group;
            /* the schedule: whole groups per slice, 16-column ranges, all covered */
            mq_problem p0 = {MQ_FMT_FP4, M, N, K, G};
            mq_gemv_job j = {&p0, NULL, NULL, cases[i].tile_m, 0, 0, 0, 0, NULL};
            mq_gemv_schedule(&j, thread_counts[t]);
            int groups = K / G;
            CHECK(j.slices >= 1 && j.groups_per_slice * j.slices >= groups &&
                      j.groups_per_slice * (j.slices - 1) < groups && j.width % 16 == 0 &&
                      j.width * j.col_ranges >= N && j.width * (j.col_ranges - 1) < N &&
                      j.width * mq_min(j.rows, M) <= 4096 + 16 * mq_min(j.rows, M),
                  "expected the decode schedule of M=%d N=%d K=%d g=%d tile_m=%d on %d threads "
                  "to cover %d groups and %d columns once in L1-sized ranges, got %d slices x %d "
                  "groups, %d ranges x %d columns",
                  M, N, K, G, j.rows, thread_counts[t], groups, N, j.slices, j.groups_per_slice,
                  j.col_ranges, j.width);
            float *W = malloc(sizeof(float) * K * N);
            uint16_t *A = malloc(sizeof(uint16_t) * M * K);
            float *C = malloc(sizeof(float) * M * N);
            double *ref = malloc(sizeof(double) * M * N), *abs = malloc(sizeof(double) * M * N);
            td_fill_weights(W, K, N, 40u + (uint32_t)i);
            td_fill_activations(A, M, K, 50u + (uint32_t)i);
            for (int f = 0; f < MQ_FMT_COUNT; f++) {
                mq_problem p = {(mq_format)f, M, N, K, G};
                mq_weights w;
                if (mq_quantize(p.format, W, K, N, G, NULL, &w, &err) != MQ_OK ||
                    mq_reference_gemm(&w, A, M, ref, abs, &err) != MQ_OK) {
                    CHECK(0, "%s weights for the decode test: %s", mq_format_name(p.format),
                          err.msg);
                    continue;
                }
                mq_variant v = mq_format_is_trellis(p.format) ? MQ_VAR_GEMV_TRELLIS
                                                              : MQ_VAR_GEMV_DECODE;
                mq_candidate c = {v, {cases[i].tile_m, 32, 256, 0, 1}};
                for (int e = 0; e < M * N; e++)
                    C[e] = NAN;
                int bad = 0;
                if (mq_gemm(ctx, &p, &w, A, C, &c, NULL, &err) != MQ_OK) {
                    CHECK(0, "%s decode M=%d N=%d K=%d: %s", mq_format_name(p.format), M, N, K,
                          err.msg);
                } else {
                    for (int e = 0; e < M * N; e++)
                        bad += !(fabs(C[e] - ref[e]) <= mq_verify_bound(K, abs[e], ref[e], NULL));
                    CHECK(bad == 0,
                          "expected the CPU decode path (%s, M=%d N=%d K=%d g=%d tile_m=%d, %d "
                          "threads: %d slices x %d column ranges) within the bound everywhere; "
                          "%d outputs off",
                          mq_format_name(p.format), M, N, K, G, cases[i].tile_m,
                          thread_counts[t], j.slices, j.col_ranges, bad);
                }
                mq_weights_free(&w);
            }
            free(W);
            free(A);
            free(C);
            free(ref);
            free(abs);
        }
        mq_ctx_destroy(ctx);
    }
}

int main(void)
{
    mq_ctx *ctx;
    mq_error err;
    CHECK(mq_ctx_create(0, &ctx, &err) == MQ_OK, "context: %s", err.msg);
    test_u4_zero_points(ctx);
    test_partial_group(ctx);
    test_decode_stream();
    for (int s = 0; s < NSHAPES; s++) {
        const shape *sh = &shapes[s];
        float *W = malloc(sizeof(float) * sh->K * sh->N);
        td_fill_weights(W, sh->K, sh->N, 100u + (uint32_t)s);
        fixture fx;
        fx.A = malloc(sizeof(uint16_t) * sh->M * sh->K);
        fx.ref = malloc(sizeof(double) * sh->M * sh->N);
        fx.absref = malloc(sizeof(double) * sh->M * sh->N);
        fx.C = malloc(sizeof(float) * sh->M * sh->N);
        td_fill_activations(fx.A, sh->M, sh->K, 200u + (uint32_t)s);
        for (int f = 0; f < MQ_FMT_COUNT; f++) {
            mq_problem p = {(mq_format)f, sh->M, sh->N, sh->K, sh->group};
            /* trellis: random signs so su/sv are exercised */
            float *su = malloc(sizeof(float) * sh->K), *sv = malloc(sizeof(float) * sh->N);
            uint32_t st = 300u + (uint32_t)s;
            for (int k = 0; k < sh->K; k++)
                su[k] = td_uniform(&st) < 0 ? -1.0f : 1.0f;
            for (int n = 0; n < sh->N; n++)
                sv[n] = td_uniform(&st) < 0 ? -1.0f : 1.0f;
            mq_trellis_opts to = {su, sv, NULL, 0};
            CHECK(mq_quantize(p.format, W, sh->K, sh->N, sh->group, &to, &fx.w, &err) == MQ_OK,
                  "quantize: %s", err.msg);
            CHECK(mq_reference_gemm(&fx.w, fx.A, sh->M, fx.ref, fx.absref, &err) == MQ_OK,
                  "reference: %s", err.msg);
            for (int v = 0; v < MQ_VAR_COUNT; v++)
                if (mq_variant_serves((mq_variant)v, p.format))
                    run_variant(ctx, &fx, &p, (mq_variant)v);
            mq_weights_free(&fx.w);
            free(su);
            free(sv);
        }
        free(W);
        free(fx.A);
        free(fx.ref);
        free(fx.absref);
        free(fx.C);
    }
    for (int v = 0; v < MQ_VAR_COUNT; v++) {
        const mq_variant_info *vi = mq_variant_get((mq_variant)v);
        CHECK(ran[v][1] > 0, "%s ran with split_k=1", vi->name);
        if (vi->schedule != MQ_SCHED_GRID2D)
            for (int s = 1; s < 4; s++)
                CHECK(ran[v][splits[s]] > 0, "%s ran with split_k=%d at least once", vi->name,
                      splits[s]);
    }
    mq_ctx_destroy(ctx);
    return check_done("variants");
}
