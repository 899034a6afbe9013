/* test_lane_trellis.c - lane_trellis (metal/lane_trellis.metal, the lane
 * kernel's body on the trellis formats' lane layout, mq_lane_trellis.h):
 * the planner's rules for it, then trellis2, 3 and 4 executed on the
 * msl-cpu executor on both K loops (the weights in registers, Apple's
 * plans; staged through threadgroup memory, h100's plans under the
 * executor's 32 KB), over shapes with a partial last group and super-block,
 * a partial column block, rows inside and past a tile, groups of 32, 64 and
 * 128 and one to three K slices, each launch verified against the float64
 * reference (the bench's trellis weights carry pseudo-random signs su and
 * sv); and planted faults (the signs dropped, trellis3's run-on bits and
 * last two words, the codebook's copies, a staged super-block's second
 * plane, a staged FP32 scale's second float) that the check must catch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "chips.h"
#include "measure.h"
#include "testdata.h"

static char cache[] = "/tmp/mq-lane-trellis-XXXXXX";

static void expect_refused(mq_problem p, mq_candidate c, const char *needle)
{
    mq_plan plan;
    mq_error e;
    mq_status st = mq_plan_candidate(&p, &c, NULL, &plan, &e);
    CHECK(st == MQ_E_ILLEGAL && strstr(e.msg, needle),
          "expected %s %dx%dx%d on %s refused with '%s', got status %d: %s",
          mq_variant_get(c.variant)->name, c.p.tile_m, c.p.tile_n, c.p.tile_k,
          mq_format_name(p.format), needle, (int)st, st ? e.msg : "(planned)");
}

/* The planner: whole 128-K super-blocks, the formats each lane variant
 * serves, and the threadgroup memory it counts (the kernel's static check
 * compares the same figure, MQ_CHECK_PLAN). */
static void test_rules(const mq_limits *h100)
{
    mq_problem t3 = {MQ_FMT_TRELLIS3, 16, 4096, 4096, 128};
    expect_refused(t3, (mq_candidate){MQ_VAR_LANE_TRELLIS, {16, 64, 64, 0, 1}},
                   "whole super-blocks of 128 K");
    expect_refused((mq_problem){MQ_FMT_FP4, 16, 4096, 4096, 128},
                   (mq_candidate){MQ_VAR_LANE_TRELLIS, {16, 64, 128, 0, 1}},
                   "does not serve format fp4");
    /* registers: two A tiles of 16 x (128 + 8) halves (one simdgroup along
     * K: no K shares to sum), the 3-bit pair codebook of 64 half2 in 32 copies */
    mq_plan plan;
    mq_candidate c = {MQ_VAR_LANE_TRELLIS, {16, 64, 128, 0, 1}};
    int rc = mq_plan_candidate(&t3, &c, NULL, &plan, NULL);
    int want = 2 * 2 * 16 * 136 + 64 * 4 * 32;
    CHECK(rc == MQ_OK && plan.stages == 0 && plan.tg_mem_bytes == want,
          "expected lane_trellis 16x64x128 trellis3 on Apple's limits in registers with %d B, "
          "got rc %d, %d stages, %d B", want, rc, plan.stages, plan.tg_mem_bytes);
    /* h100: 4 stages of A (2 x 16 x 136 B), codes (4 blocks x 768 B) and
     * FP32 scales (4 blocks x 4 x 32 K x 64 B), plus the codebook's 32 copies */
    rc = mq_plan_candidate(&t3, &c, h100, &plan, NULL);
    int stage = 2 * 16 * 136 + 4 * 768 + 4 * 4 * 64;
    CHECK(rc == MQ_OK && plan.stages == 4 && plan.tg_mem_bytes == 4 * stage + 64 * 4 * 32,
          "expected 4 stages of %d B plus 8192 B of codebook on h100, got rc %d, %d stages, %d B",
          stage, rc, plan.stages, plan.tg_mem_bytes);
    /* the program's scale window: the group, at most a super-block (128 K
     * trellis, 64 K fp4 and u4); fp4 and u4 only at up to 8 rows (above,
     * their scales go on the weights) */
    static const struct {
        mq_format fmt;
        mq_variant v;
        int group, tile_m;
        const char *want;
    } windows[] = {{MQ_FMT_TRELLIS3, MQ_VAR_LANE_TRELLIS, 32, 16, " MQ_PLAN_SCALE_K=32"},
                   {MQ_FMT_TRELLIS2, MQ_VAR_LANE_TRELLIS, 64, 16, " MQ_PLAN_SCALE_K=64"},
                   {MQ_FMT_TRELLIS4, MQ_VAR_LANE_TRELLIS, 128, 32, " MQ_PLAN_SCALE_K=128"},
                   {MQ_FMT_U4, MQ_VAR_LANE_GEMM, 128, 8, " MQ_PLAN_SCALE_K=64"},
                   {MQ_FMT_U4, MQ_VAR_LANE_GEMM, 32, 8, " MQ_PLAN_SCALE_K=32"},
                   {MQ_FMT_U4, MQ_VAR_LANE_GEMM, 128, 16, NULL},
                   {MQ_FMT_FP4, MQ_VAR_LANE_GEMM, 128, 8, " MQ_PLAN_SCALE_K=64"},
                   {MQ_FMT_FP4, MQ_VAR_LANE_GEMM, 32, 8, " MQ_PLAN_SCALE_K=32"},
                   {MQ_FMT_FP4, MQ_VAR_LANE_GEMM, 128, 16, NULL}};
    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++) {
        mq_problem p = {windows[i].fmt, 16, 4096, 4096, windows[i].group};
        mq_candidate wc = {windows[i].v, {windows[i].tile_m, 64, 128, 0, 1}};
        const char *file, *fn;
        char defines[512] = "", err[256] = "";
        int r = td_metal_program(&p, &wc, h100, &file, &fn, defines, sizeof defines, err,
                                 sizeof err);
        const char *at = strstr(defines, "MQ_PLAN_SCALE_K");
        int ok = r == 0 && (windows[i].want ? at && !strcmp(at - 1, windows[i].want) : !at);
        CHECK(ok, "expected %s group %d tile_m %d's program to %s%s, got '%s' %s",
              mq_format_name(windows[i].fmt), windows[i].group, windows[i].tile_m,
              windows[i].want ? "end with" : "have no scale window",
              windows[i].want ? windows[i].want : "", defines, err);
    }
}

/* Every format on both K loops, verified. */
static void test_on_executor(const mq_limits *staged)
{
    mq_backend_opts bo = {0};
    mq_error e;
    mq_backend *b = mq_backend_msl_cpu_open(&bo, &e);
    CHECK(b != NULL, "expected the msl-cpu backend to open: %s", e.msg);
    if (!b)
        return;
    const mq_limits apple = mq_limits_default();
    const mq_limits *lims[2] = {&apple, staged};
    /* in registers: three tiles; staged: one a shape (its programs are the
     * costly ones to compile), each fitting stages in 32 KB */
    static const int tiles[2][3][3] = {{{8, 32, 128}, {16, 64, 256}, {32, 128, 128}},
                                       {{8, 32, 128}, {16, 64, 128}, {8, 64, 128}}};
    static const struct {
        int M, N, K, group, split_k;
    } shapes[] = {
        {1, 200, 400, 128, 1},   /* a partial last group and super-block, partial block */
        {17, 96, 1024, 32, 3},   /* rows past a tile, groups of 32, uneven slices */
        {5, 256, 512, 64, 2},    /* two slices */
    };
    static mq_measurement m;
    int ran[2] = {0, 0}, per_format[3] = {0, 0, 0};
    for (int li = 0; li < 2; li++)
        for (int f = 0; f < 3; f++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (size_t t = 0; t < 3; t++) {
                    mq_format fmt = (mq_format)(MQ_FMT_TRELLIS2 + f);
                    mq_problem p = {fmt, shapes[s].M, shapes[s].N, shapes[s].K, shapes[s].group};
                    /* trellis3's codebook copies (8 KiB) leave no room
                     * for two stages of 32 rows under the executor's 32 KB */
                    static const int staged32[3] = {32, 64, 128};
                    const int *tl = li == 1 && t == 2 && fmt != MQ_FMT_TRELLIS3
                                        ? staged32 : tiles[li][t];
                    mq_candidate c = {MQ_VAR_LANE_TRELLIS,
                                      {tl[0], tl[1], tl[2], 0, shapes[s].split_k}};
                    mq_plan plan;
                    if (mq_plan_candidate(&p, &c, lims[li], &plan, NULL) != MQ_OK)
                        continue;
                    if (li == 1 && t != s)
                        continue;
                    int stages;
                    td_run_candidate(b, &p, &c, lims[li], &stages, &m);
                    char name[128];
                    mq_candidate_str(&c, name, sizeof name);
                    CHECK(li == 0 ? stages == 0 : stages >= 2,
                          "expected %s %s with %s its weights, got %d stages", name,
                          mq_format_name(fmt), li ? "stages for" : "registers for", stages);
                    CHECK(!strcmp(m.status, "verified"),
                          "expected %s M=%d N=%d K=%d group %d %s (%s) on the executor to match "
                          "the reference: %s %s",
                          mq_format_name(fmt), p.M, p.N, p.K, p.group, name,
                          li ? "staged" : "registers", m.status, m.error);
                    ran[li]++;
                    per_format[f]++;
                }
    CHECK(ran[0] >= 24 && ran[1] >= 9,
          "expected at least 24 launches in registers and 9 staged, ran %d and %d", ran[0],
          ran[1]);
    for (int f = 0; f < 3; f++)
        CHECK(per_format[f] >= 11, "expected trellis%d on at least 11 launches, ran %d", f + 2,
              per_format[f]);
    mq_backend_close(b);
    printf("lane trellis: %d launches in registers, %d staged (h100's plans), all verified\n",
           ran[0], ran[1]);
}

/* A fault planted in a metal/ file must make the check fail on problem p
 * (lane_trellis 16x64x128). */
static void planted_on(const char *what, const char *file, const char *from, const char *to,
                       mq_problem p, const mq_limits *lim)
{
    mq_candidate c = {MQ_VAR_LANE_TRELLIS, {16, 64, 128, 0, 1}};
    static mq_measurement m;
    int rc = td_run_planted(file, from, to, &p, &c, lim, &m);
    CHECK(rc == 0,
          "expected to plant %s in metal/%s and run it on the executor, got %d (-1: nothing "
          "planted, -2: the executor did not open)", what, file, rc);
    if (rc == 0)
        CHECK(!strcmp(m.status, "wrong"), "expected %s to be caught (wrong), got %s: %s", what,
              m.status, m.error);
}

/* ... on 9 x 96 x 1024, group 64 */
static void planted(const char *what, const char *file, const char *from, const char *to,
                    mq_format fmt, const mq_limits *lim)
{
    planted_on(what, file, from, to, (mq_problem){fmt, 9, 96, 1024, 64}, lim);
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
        return check_done("lane_trellis");
    }
    test_rules(&chip.lim);
    /* the executor's threadgroup memory is Apple's 32 KB */
    mq_limits lim = chip.lim;
    lim.tg_mem_bytes = 32768;
    test_on_executor(&lim);
    const mq_limits apple = mq_limits_default();
    planted("the signs su dropped", "mq_lane.h", "        mq_lane_a_signs(As, g, k0, k_end, tid);",
            "        (void)g;", MQ_FMT_TRELLIS2, &apple);
    planted("the staged signs su dropped", "mq_lane_staged.h",
            "        mq_lane_a_signs(smem + rd, sgn, k0, kr.y, tid);", "", MQ_FMT_TRELLIS2, &lim);
    planted("the staged loop's first tile's signs kept for every tile", "mq_lane_staged.h",
            "        mq_lane_signs_load(sgn, su, k0 + uint(TILE_K), kr.y, tid);", "",
            MQ_FMT_TRELLIS3, &lim);
    planted("a trellis3 code's bits in the next word dropped", "mq_lane_trellis.h",
            "(mq_lane_tr_word6(cw, cx, t + 1u) << (32u + uint(up) - s))",
            "(0u << (32u + uint(up) - s))",
            MQ_FMT_TRELLIS3, &apple);
    planted("the codebook's copies laid entry after entry, not side by side",
            "mq_lane_trellis.h", "const uint c = e >> LANE_LUT_SHIFT;",
            "const uint c = e % uint(LANE_LUT_ENTRIES);", MQ_FMT_TRELLIS3, &apple);
    planted("trellis3's last two words read from the first two", "mq_lane_trellis.h",
            "t == 4u ? cx.x : cx.y", "t == 4u ? cw.x : cw.y", MQ_FMT_TRELLIS3, &apple);
    planted("a staged 4-bit super-block's second plane read from the first", "mq_lane_trellis.h",
            "cx = as_type<uint4>(((threadgroup const float4 *)(sb + 128u))[L]);",
            "cx = as_type<uint4>(((threadgroup const float4 *)(sb))[L]);", MQ_FMT_TRELLIS4, &lim);
    planted("a staged FP32 scale pair's second float from the first", "mq_lane_staged.h",
            "as_type<float>(ss[at * 2u + 1u])", "as_type<float>(ss[at * 2u])", MQ_FMT_TRELLIS3,
            &lim);
    /* one scale a 128-K window (group 128): a partial last super-block's
     * staged scales are zero past K, so the window takes its first 32 K's */
    planted_on("the scale window's last 32 K's scale taken", "mq_lane.h",
               "const uint first = (w + 1u - uint(LANE_SCALE_ATOMS)) / 2u;",
               "const uint first = w / 2u;", (mq_problem){MQ_FMT_TRELLIS3, 9, 96, 400, 128},
               &lim);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd)) {
    }
    return check_done("lane_trellis");
}
