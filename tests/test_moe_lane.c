/* test_moe_lane.c - the MoE block on the trellis lane layout
 * (metal/lane_trellis_moe.metal, backends/msl_moe_lane.c) on the msl-cpu
 * executor: both K loops (the weights in registers, Apple's plans; staged,
 * h100's plans under the executor's 32 KB), trellis2/3/4, decode and a
 * few dozen tokens, routings that leave experts empty or put every token
 * on one expert, rows past a tile, a partial last column tile and super-
 * block, down split into one to four K slices, gate/up's K in one to four
 * parts that meet in the kernel (mq_meet.h): each run within the float64
 * reference's bound for FP16 levels (MQ_MOE_HALF_WEIGHTS), the block's own
 * arithmetic. Then what the plan refuses, the CPU model's refusal, the lane
 * fields' round trip against the seed weights, and planted faults in the
 * kernel (up through gate's signs, a row's SwiGLU on its neighbour, the
 * wrong K slice's plane; the parts' sums in one plane, a part left out of
 * the sum, no meeting at all, a tile counter left set) that the check must
 * catch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "chips.h"
#include "msl_program.h"
#include "testdata.h"

static char cache[] = "/tmp/mq-moe-lane-XXXXXX";

typedef struct {
    mq_moe_problem p;
    mq_route_kind route;
    int tile_m, tile_n, tile_k, i_split, gu_parts;
    const char *what;
} lane_case;

/* Run c on case lc's problem (weights, activations and routing from seed)
 * on backend be under lim; the outputs outside the lane bound (-1: the run
 * failed, its message in why). */
static long run_case(mq_backend *be, const lane_case *lc, const mq_limits *lim, uint32_t seed,
                     double *worst, char *why, size_t n)
{
    const mq_moe_problem *p = &lc->p;
    mq_error e;
    mq_moe_weights mw;
    if (mq_moe_weights_alloc(&mw, p, &e)) {
        snprintf(why, n, "weights: %s", e.msg);
        return -1;
    }
    mq_moe_weights_fill_random(&mw, seed); /* each projection and expert its own signs */
    size_t R = (size_t)p->tokens * p->top_k, on = (size_t)p->tokens * p->hidden;
    uint16_t *x = malloc(on * sizeof *x);
    int32_t *ids = malloc(R * sizeof *ids);
    float *pr = malloc(R * sizeof *pr), *got = malloc(on * sizeof *got);
    double *ref = malloc(on * sizeof *ref), *bound = malloc(on * sizeof *bound);
    long bad = -1;
    mq_moe_candidate c;
    memset(&c, 0, sizeof c);
    c.inner.variant = MQ_VAR_LANE_TRELLIS;
    c.inner.p = (mq_params){lc->tile_m, lc->tile_n, lc->tile_k, 0, lc->gu_parts};
    c.i_split = lc->i_split;
    *worst = 0;
    if (x && ids && pr && got && ref && bound) {
        td_fill_activations(x, p->tokens, p->hidden, seed + 1);
        if (mq_moe_routing_generate(p, lc->route, 1.5, seed + 2, ids, pr, &e) ||
            mq_moe_reference_arith(p, &mw, x, ids, pr, MQ_MOE_HALF_WEIGHTS, ref, bound, &e) ||
            be->run_moe(be, p, &mw, x, ids, pr, got, &c, lim, &e))
            snprintf(why, n, "%s", e.msg);
        else
            bad = td_outside(got, ref, bound, on, worst);
    }
    mq_moe_weights_free(&mw);
    free(x), free(ids), free(pr), free(got), free(ref), free(bound);
    return bad;
}

static const lane_case cases[] = {
    {{MQ_FMT_TRELLIS3, 1, 256, 192, 8, 6, 128}, MQ_ROUTE_UNIFORM, 8, 64, 128, 1, 2,
     "decode, 6 of 8 experts (the combine's second four), 192 columns in tiles of 64, "
     "gate/up's K in 2 parts"},
    {{MQ_FMT_TRELLIS3, 1, 256, 320, 8, 2, 64}, MQ_ROUTE_UNIFORM, 8, 128, 256, 2, 1,
     "decode, group 64, inter 320 (a partial super-block and tile), down in 2 K slices"},
    {{MQ_FMT_TRELLIS2, 13, 128, 384, 6, 3, 32}, MQ_ROUTE_ZIPF, 16, 64, 128, 3, 1,
     "13 tokens, Zipf, top 3 of 6, group 32, down in 3 slices"},
    {{MQ_FMT_TRELLIS4, 20, 128, 256, 4, 1, 128}, MQ_ROUTE_ONE, 8, 64, 128, 2, 1,
     "20 tokens all on one expert (3 row tiles of 8)"},
    {{MQ_FMT_TRELLIS3, 40, 384, 512, 8, 2, 128}, MQ_ROUTE_UNIFORM, 16, 64, 128, 4, 3,
     "40 tokens, 16-row tiles, hidden 384, down in 4 slices, gate/up's K in 3 parts"},
    {{MQ_FMT_TRELLIS3, 5, 512, 288, 8, 2, 128}, MQ_ROUTE_ZIPF, 8, 64, 128, 1, 4,
     "5 tokens, Zipf, hidden 512, inter 288 (a partial column tile), gate/up's K in 4 parts"},
};
#define MEET_CASE 5 /* the planted faults of the parts' meeting run this one */

static void test_cases(mq_backend *be, const mq_limits *staged)
{
    const mq_limits apple = mq_limits_default();
    const mq_limits *lims[2] = {&apple, staged};
    int runs = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int l = 0; l < 2; l++) {
            double worst;
            char why[512] = "";
            long bad = run_case(be, &cases[i], lims[l], 71 + (uint32_t)i, &worst, why, sizeof why);
            fprintf(stderr, "  lane MoE %s (%s): worst %.4f of the bound\n", cases[i].what,
                    l ? "staged" : "registers", worst);
            CHECK(bad == 0,
                  "%s (%s): expected every output within the FP16-level bound, got %ld outside "
                  "(worst %.3f of it) %s",
                  cases[i].what, l ? "staged, h100's plan" : "registers", bad, worst, why);
            runs++;
        }
    printf("lane MoE: %d runs on the executor\n", runs);
}

/* What the lane plan refuses, and that the CPU model names the layout. */
static void test_refusals(const mq_limits *staged)
{
    mq_moe_problem p = {MQ_FMT_TRELLIS3, 4, 256, 192, 8, 2, 128};
    mq_moe_weights mw;
    mq_error e;
    if (mq_moe_weights_alloc(&mw, &p, &e)) {
        CHECK(0, "weights: %s", e.msg);
        return;
    }
    mq_moe_weights_fill_random(&mw, 5);
    mq_moe_candidate c;
    memset(&c, 0, sizeof c);
    c.inner.variant = MQ_VAR_LANE_TRELLIS;
    c.inner.p = (mq_params){8, 64, 128, 0, 1};
    c.i_split = 1;
    mq_msl_moe_plan plan;
    int planned = mq_msl_moe_plan_of(&p, &mw, &c, staged, &plan, &e) == MQ_OK;
    CHECK(planned && plan.nd == 4 && plan.nbuf == MQ_MSL_MOE_NBUF &&
              !strcmp(plan.d[0].function, "moe_route") &&
              !strcmp(plan.d[MQ_MSL_MOE_LANE_GATE_UP].function, "lane_trellis_moe_gate_up") &&
              strstr(plan.d[MQ_MSL_MOE_LANE_GATE_UP].defines, "MQ_PLAN_STAGES") &&
              !strcmp(plan.d[MQ_MSL_MOE_LANE_DOWN].function, "lane_trellis_moe_down") &&
              !strcmp(plan.d[3].function, "moe_combine"),
          "expected 4 dispatches (route, gate/up with h100's stages, down, combine; no gather), "
          "got %d (%s): %s",
          plan.nd, planned ? plan.d[1].function : "", e.msg);
    CHECK(plan.bytes[MQ_MSL_MOE_XG] == 16 && plan.bytes[MQ_MSL_MOE_H] == (size_t)(8 + 4) * 192 * 2,
          "expected no gathered rows (16 bytes, unread) and h padded by the tokens (12 rows of 192), "
          "got %zu and %zu bytes",
          plan.bytes[MQ_MSL_MOE_XG], plan.bytes[MQ_MSL_MOE_H]);
    /* gate/up's K in 2 parts: twice the grid, a counter a tile, the parts' sums */
    c.inner.p.split_k = 2;
    planned = mq_msl_moe_plan_of(&p, &mw, &c, staged, &plan, &e) == MQ_OK;
    const mq_msl_dispatch *gu = &plan.d[MQ_MSL_MOE_LANE_GATE_UP];
    CHECK(planned && gu->grid[0] == 3 && gu->grid[1] == 1 && gu->grid[2] == 8 * 2 &&
              plan.lwork_counters == 3 * 8 * 4 &&
              plan.bytes[MQ_MSL_MOE_LWORK] == 3 * 8 * 4 + (size_t)2 * 2 * 8 * 192 * 4,
          "expected gate/up in 2 parts: grid 3x1x16, 24 tile counters, 2 parts x (gate, up) x 8 "
          "rows x 192 FP32 sums after them; got %ux%ux%u, %zu and %zu bytes (%s)",
          gu->grid[0], gu->grid[1], gu->grid[2], plan.lwork_counters,
          plan.bytes[MQ_MSL_MOE_LWORK], e.msg);
    c.inner.p.split_k = 4; /* hidden 256: two K tiles of 128 */
    CHECK(mq_msl_moe_plan_of(&p, &mw, &c, staged, &plan, &e) == MQ_E_ILLEGAL,
          "expected gate/up in 4 parts of 2 K tiles refused, got '%s'", e.msg);
    mq_moe_candidate sc = c;
    sc.inner.variant = MQ_VAR_GEMV_TRELLIS;
    sc.inner.p = (mq_params){1, 64, 128, 0, 2};
    CHECK(mq_moe_candidate_check(&p, &sc, &e) == MQ_E_ILLEGAL && strstr(e.msg, "split_k=2"),
          "expected the seed block to refuse an inner split_k, naming it, got '%s'", e.msg);
    c.inner.p.split_k = 1;
    c.fuse_gate_up = 1;
    CHECK(mq_msl_moe_plan_of(&p, &mw, &c, NULL, &plan, &e) == MQ_E_ILLEGAL &&
              strstr(e.msg, "two passes"),
          "expected gate and up in one pass refused, got '%s'", e.msg);
    c.fuse_gate_up = 0;
    c.inner.p.tile_m = 4;
    CHECK(mq_msl_moe_plan_of(&p, &mw, &c, NULL, &plan, &e) == MQ_E_ILLEGAL,
          "expected tile_m 4 refused by the lane kernel's planner, got '%s'", e.msg);
    c.inner.p.tile_m = 8;
    uint16_t x[4 * 256] = {0};
    int32_t ids[8];
    float pr[8], out[4 * 256];
    mq_moe_routing_generate(&p, MQ_ROUTE_UNIFORM, 1, 3, ids, pr, &e);
    mq_ctx *ctx = NULL;
    mq_ctx_create(1, &ctx, &e);
    CHECK(ctx && mq_moe_run(ctx, &p, &mw, x, ids, pr, out, &c, &e) == MQ_E_ILLEGAL &&
              strstr(e.msg, "seed layout"),
          "expected the CPU model to refuse the lane block, naming the layout: '%s'", e.msg);
    if (ctx)
        mq_ctx_destroy(ctx);
    /* the lane fields hold each expert's repack: expert 5's up back to its seed arrays */
    size_t cb = 0, sb = 0;
    for (int j = 0; j < MQ_MOE_PROJS; j++) {
        cb += mq_msl_moe_field_bytes(&mw, MQ_MSL_MOE_LCODES, j);
        sb += mq_msl_moe_field_bytes(&mw, MQ_MSL_MOE_LSCALES, j);
    }
    char *codes = malloc(cb), *scales = malloc(sb);
    int ok = codes && scales && !mq_msl_moe_field(&mw, MQ_MSL_MOE_LCODES, codes, &e) &&
             !mq_msl_moe_field(&mw, MQ_MSL_MOE_LSCALES, scales, &e);
    size_t per_c = mq_msl_moe_field_bytes(&mw, MQ_MSL_MOE_LCODES, MQ_MOE_UP) / 8;
    size_t per_s = mq_msl_moe_field_bytes(&mw, MQ_MSL_MOE_LSCALES, MQ_MOE_UP) / 8;
    mq_weights v = mw.w[MQ_MOE_UP][5], back;
    if (ok) {
        v.lane_codes = (uint32_t *)(void *)(codes + per_c * (8 + 5));
        v.lane_scales = scales + per_s * (8 + 5);
        ok = mq_weights_from_lane(&v, &back, &e) == MQ_OK;
    }
    if (ok) {
        size_t ib = (size_t)(back.K / 16) * (size_t)(back.N / 16) *
                    (size_t)mq_trellis_tile_bytes(mq_format_bits(back.format));
        size_t tb = (size_t)mq_group_count(back.K, back.group) * (size_t)back.N * sizeof(float);
        ok = !memcmp(back.indices, v.indices, ib) && !memcmp(back.tscales, v.tscales, tb);
        mq_weights_free(&back);
    }
    CHECK(ok, "expected expert 5's up projection back bit for bit from the lane fields: %s",
          e.msg);
    free(codes), free(scales);
    mq_moe_weights_free(&mw);
}

/* The lane space's parts of gate/up (backends/msl_moe.c): every candidate
 * in p > 1 parts has a gate/up grid that, halved, is under four
 * threadgroups per core of h100's 132; at one token some are in parts, at
 * 16 tokens fewer than with the cores unknown (every count the plan
 * allows). */
static int space_parts(const mq_moe_problem *p, const mq_moe_weights *mw, const mq_limits *lim,
                       int *lane, int *broken)
{
    mq_moe_candidate cs[400];
    int n = mq_msl_moe_space(p, mw, lim, 0, 0, cs, 400), parted = 0;
    *lane = *broken = 0;
    for (int i = 0; i < n; i++) {
        if (cs[i].inner.variant != MQ_VAR_LANE_TRELLIS)
            continue;
        (*lane)++;
        if (cs[i].inner.p.split_k < 2)
            continue;
        parted++;
        mq_msl_moe_plan plan;
        const unsigned *g = plan.d[MQ_MSL_MOE_LANE_GATE_UP].grid;
        if (mq_msl_moe_plan_of(p, mw, &cs[i], lim, &plan, NULL) ||
            (lim->cores > 0 && (double)g[0] * g[1] * g[2] / 2 >= 4.0 * lim->cores))
            (*broken)++;
    }
    return parted;
}

static void test_space_parts(const mq_limits *staged)
{
    mq_moe_problem p = {MQ_FMT_TRELLIS3, 1, 512, 256, 128, 8, 128};
    mq_moe_weights mw;
    mq_error e;
    if (mq_moe_weights_alloc(&mw, &p, &e)) {
        CHECK(0, "weights: %s", e.msg);
        return;
    }
    mq_limits unknown = *staged;
    unknown.cores = 0;
    int lane[3], broken[3], parted[3];
    parted[0] = space_parts(&p, &mw, staged, &lane[0], &broken[0]);
    p.tokens = 16;
    parted[1] = space_parts(&p, &mw, staged, &lane[1], &broken[1]);
    parted[2] = space_parts(&p, &mw, &unknown, &lane[2], &broken[2]);
    CHECK(lane[0] > 0 && parted[0] > 0 && broken[0] + broken[1] == 0,
          "expected gate/up in parts at one token (%d of %d lane candidates) and every parted "
          "candidate's halved grid under 4 threadgroups a core (%d and %d are not)",
          parted[0], lane[0], broken[0], broken[1]);
    CHECK(parted[1] < parted[2],
          "expected fewer parted candidates at 16 tokens with h100's cores than with the cores "
          "unknown, got %d and %d",
          parted[1], parted[2]);
    mq_moe_weights_free(&mw);
}

/* A fault planted in file (metal/) must put case ci outside the bound,
 * or, with fails_with, fail the run with a message holding it. */
static void planted_in(const char *file, int ci, const char *what, const char *from,
                       const char *to, const char *fails_with)
{
    char dir[64];
    if (td_planted_dir(file, from, to, dir, sizeof dir)) {
        CHECK(0, "expected to plant %s in metal/%s", what, file);
        return;
    }
    setenv("MQ_METAL_DIR", dir, 1);
    mq_backend_opts bo = {1};
    mq_error e;
    mq_backend *b = mq_backend_msl_cpu_open(&bo, &e);
    double worst = 0;
    char why[512] = "";
    long bad = b ? run_case(b, &cases[ci], NULL, 73, &worst, why, sizeof why) : -1;
    mq_backend_close(b);
    unsetenv("MQ_METAL_DIR");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {
    }
    if (fails_with)
        CHECK(bad < 0 && strstr(why, fails_with),
              "planted %s: expected the run to fail with '%s', got %ld outside the bound: %s",
              what, fails_with, bad, why);
    else
        CHECK(bad > 0, "planted %s: expected outputs outside the bound, got %ld (worst %.3f) %s",
              what, bad, worst, why);
}

static void planted(const char *what, const char *from, const char *to)
{
    planted_in("lane_trellis_moe.metal", 2, what, from, to, NULL);
}

int main(void)
{
    if (!mkdtemp(cache)) {
        perror("mkdtemp");
        return 2;
    }
    setenv("MQ_MSL_CACHE", cache, 1);
    mq_chip chip;
    char err[512];
    if (mq_chip_load_named(mq_chips_default_path(), "h100", &chip, err, sizeof err)) {
        CHECK(0, "h100: %s", err);
        return check_done("moe_lane");
    }
    mq_limits lim = chip.lim; /* the executor's threadgroup memory is Apple's 32 KB */
    lim.tg_mem_bytes = 32768;
    mq_backend_opts bo = {2};
    mq_error e;
    mq_backend *be = mq_backend_msl_cpu_open(&bo, &e);
    CHECK(be != NULL, "expected the msl-cpu backend (make deps installs clang): %s",
          be ? "" : e.msg);
    if (be) {
        test_cases(be, &lim);
        mq_backend_close(be);
    }
    test_refusals(&lim);
    test_space_parts(&chip.lim);
    planted("up through gate's signs", "q.su = su + size_t(j) * E * mp.hidden",
            "q.su = su + size_t(j == 1u ? 0u : j) * E * mp.hidden");
    planted("a row's SwiGLU stored on its neighbour's row",
            "h[size_t(first + m) * mp.inter + n] =", "h[size_t(first + (m ^ 1u)) * mp.inter + n] =");
    planted("gate/up's A rows read in x's order, not through the route list",
            "return a.row_token[metal::min(r, a.count - 1u)] * p.K;",
            "return (a.row_token[0] + metal::min(r, a.count - 1u)) * p.K;");
    planted("every K slice into plane 0", "const size_t plane = size_t(c) * mp.tokens * mp.top_k;",
            "const size_t plane = 0;");
    /* the meeting of gate/up's parts (mq_meet.h) */
    planted_in("lane_trellis_moe.metal", MEET_CASE, "every part's sums into part 0's planes",
               "const size_t at = size_t(2u * part) * plane", "const size_t at = size_t(0u) * plane",
               NULL);
    planted_in("lane_trellis_moe.metal", MEET_CASE, "the last part's sum one part short",
               "for (uint p = 0; p < parts; p++, at += 2u * plane)",
               "for (uint p = 1; p < parts; p++, at += 2u * plane)", NULL);
    planted_in("lane_trellis_moe.metal", MEET_CASE, "the last part's own sums only",
               "if (parts > 1u && !moe_gu_meet(", "if (parts > 99u && !moe_gu_meet(", NULL);
    planted_in("mq_meet.h", MEET_CASE, "a tile counter left set",
               "atomic_store_explicit(cnt, 0u, memory_order_relaxed);", "(void)0;",
               "tile counter");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd)) {
    }
    return check_done("moe_lane");
}
