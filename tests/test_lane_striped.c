/* test_lane_striped.c - lane_gemm_striped (metal/lane_gemm.metal,
 * mq_lane_gemm_striped in mq_lane.h: the lane kernel's body on Marlin's
 * stripes, a threadgroup's consecutive K slices of a tile summed in its
 * accumulators, whole tiles written to C, shared ones reduced from the
 * planes of each threadgroup's first slice): the planner's figures for it,
 * then fp4 and u4 on the msl-cpu executor over every way a threadgroup's
 * range can fall on the tiles (inside one tile, a tile's tail and the next
 * one's head, whole tiles and a head, one unit each, whole tiles only with
 * K split, empty threadgroups at the end, several row tiles in the
 * column-major order), on both K loops, each launch verified against the
 * float64 reference; and planted faults in the part and the reduction that
 * the check must catch (the executor starts the workspace as NaN, so a
 * plane summed that no threadgroup wrote cannot pass). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "chips.h"
#include "measure.h"
#include "testdata.h"

static char cache[] = "/tmp/mq-lane-striped-XXXXXX";

/* The planner: a 1D grid of num_threadgroups, work_per_tg units each, the
 * tiles the reduction needs; the other striped variant and the grid lane
 * kernel leave them 0 (the reduction sums every plane). */
static void test_plan(void)
{
    mq_problem p = {MQ_FMT_FP4, 16, 14336, 4096, 128};
    mq_candidate c = {MQ_VAR_LANE_STRIPED, {16, 64, 256, 264, 4}};
    mq_plan plan;
    mq_error e;
    int rc = mq_plan_candidate(&p, &c, NULL, &plan, &e);
    /* 224 tiles x 4 slices = 896 units over 264 threadgroups: 4 each */
    CHECK(rc == MQ_OK && plan.grid_x == 264 && plan.grid_y == 1 && plan.grid_z == 1 &&
              plan.work_units == 896 && plan.work_per_tg == 4 && plan.merged_tile_m == 16 &&
              plan.merged_tile_n == 64 && plan.dispatches == 2,
          "expected lane_gemm_striped 16x64x256 tg=264 sk=4 on 16x14336x4096 to plan a 1D grid "
          "of 264, 896 units, 4 a threadgroup, merged tiles 16x64, two dispatches; got rc %d "
          "(%s) grid %dx%dx%d units %d per %d merged %dx%d dispatches %d",
          rc, rc ? e.msg : "", plan.grid_x, plan.grid_y, plan.grid_z, plan.work_units,
          plan.work_per_tg, plan.merged_tile_m, plan.merged_tile_n, plan.dispatches);
    mq_candidate others[2] = {{MQ_VAR_LANE_GEMM, {16, 64, 256, 0, 4}},
                              {MQ_VAR_MARLIN_FP4_STRIPED, {64, 64, 32, 132, 4}}};
    for (int i = 0; i < 2; i++) {
        rc = mq_plan_candidate(&p, &others[i], NULL, &plan, &e);
        CHECK(rc == MQ_OK && plan.merged_tile_m == 0 && plan.merged_tile_n == 0,
              "expected %s to plan without merged stripes (every plane summed), got rc %d, "
              "merged %dx%d",
              mq_variant_get(others[i].variant)->name, rc, plan.merged_tile_m,
              plan.merged_tile_n);
    }
    c.p.num_threadgroups = 897;
    rc = mq_plan_candidate(&p, &c, NULL, &plan, &e);
    CHECK(rc == MQ_E_ILLEGAL && strstr(e.msg, "num_threadgroups=897"),
          "expected more threadgroups than work units refused naming num_threadgroups=897, "
          "got rc %d: %s", rc, rc ? e.msg : "(planned)");
}

/* One launch, verified; 1 when it ran. */
static int run_one(mq_backend *b, mq_format fmt, int M, int N, int K, int group, const int t[5],
                   const mq_limits *lim, int staged)
{
    mq_problem p = {fmt, M, N, K, group};
    mq_candidate c = {MQ_VAR_LANE_STRIPED, {t[0], t[1], t[2], t[3], t[4]}};
    char name[128];
    mq_candidate_str(&c, name, sizeof name);
    mq_plan plan;
    mq_error e;
    if (mq_plan_candidate(&p, &c, lim, &plan, &e) != MQ_OK) {
        CHECK(0, "expected %s on %s %dx%dx%d to plan: %s", name, mq_format_name(fmt), M, N, K,
              e.msg);
        return 0;
    }
    static mq_measurement m;
    int stages;
    td_run_candidate(b, &p, &c, lim, &stages, &m);
    CHECK(staged ? stages >= 2 : stages == 0, "expected %s with its weights %s, got %d stages",
          name, staged ? "staged" : "in registers", stages);
    CHECK(!strcmp(m.status, "verified"),
          "expected %s M=%d N=%d K=%d group %d %s (%d units, %d a threadgroup) on the executor "
          "to match the reference: %s %s",
          mq_format_name(fmt), M, N, K, group, name, plan.work_units, plan.work_per_tg,
          m.status, m.error);
    return 1;
}

static void test_on_executor(const mq_limits *staged)
{
    mq_backend_opts bo = {0};
    mq_error e;
    mq_backend *b = mq_backend_msl_cpu_open(&bo, &e);
    CHECK(b != NULL, "expected the msl-cpu backend to open: %s", e.msg);
    if (!b)
        return;
    const mq_limits apple = mq_limits_default();
    /* {tile_m, tile_n, tile_k, num_threadgroups, split_k} on 16x256x1024,
     * 4 tiles x 4 slices = 16 units */
    static const int ranges[][5] = {
        {16, 64, 128, 5, 4},  /* 4 each: every tile whole in one, the last one empty */
        {16, 64, 128, 6, 4},  /* 3 each: a tile's tail and the next one's head */
        {16, 64, 128, 3, 4},  /* 6 each: a whole tile and the next one's head */
        {16, 64, 128, 16, 4}, /* one unit each: every slice its own part */
        {16, 64, 128, 8, 2},  /* 1 each of 8: tiles halved */
        {16, 64, 128, 3, 1},  /* K not split: whole tiles only, two a threadgroup */
        {16, 64, 128, 11, 4}, /* 2 each of 11: the last three threadgroups empty */
    };
    int ran = 0;
    for (int f = 0; f < 2; f++)
        for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++)
            ran += run_one(b, f ? MQ_FMT_U4 : MQ_FMT_FP4, 16, 256, 1024, 128, ranges[r], &apple,
                           0);
    /* several row tiles (column-major: a threadgroup's run crosses row
     * tiles of one column first), a partial last column block, groups of
     * 32 and 64, an uneven last slice, rows inside a tile */
    static const struct {
        mq_format fmt;
        int M, N, K, group, t[5];
    } shapes[] = {
        {MQ_FMT_U4, 33, 96, 512, 64, {16, 32, 64, 7, 3}},
        {MQ_FMT_FP4, 40, 200, 448, 32, {8, 64, 64, 9, 3}},
        {MQ_FMT_FP4, 5, 128, 768, 128, {8, 32, 128, 5, 4}},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        ran += run_one(b, shapes[s].fmt, shapes[s].M, shapes[s].N, shapes[s].K, shapes[s].group,
                       shapes[s].t, &apple, 0);
    /* staged (an NVIDIA chip's plan under the executor's 32 KB): the
     * pipeline started and drained once per part */
    static const int staged_ranges[][5] = {{16, 64, 128, 6, 4}, {16, 32, 256, 7, 2}};
    for (int f = 0; f < 2; f++)
        ran += run_one(b, f ? MQ_FMT_U4 : MQ_FMT_FP4, 16, 256, 1024, 128, staged_ranges[f],
                       staged, 1);
    CHECK(ran == 19, "expected 19 launches, ran %d", ran);
    mq_backend_close(b);
    printf("lane striped: %d launches on the executor, all verified\n", ran);
}

/* A fault planted in a metal/ file must make the check fail. */
static void planted(const char *what, const char *file, const char *from, const char *to,
                    const int t[5])
{
    mq_problem p = {MQ_FMT_FP4, 16, 256, 1024, 128};
    mq_candidate c = {MQ_VAR_LANE_STRIPED, {t[0], t[1], t[2], t[3], t[4]}};
    const mq_limits apple = mq_limits_default();
    static mq_measurement m;
    int rc = td_run_planted(file, from, to, &p, &c, &apple, &m);
    CHECK(rc != -1, "expected to plant %s in metal/%s", what, file);
    if (rc == 0)
        CHECK(!strcmp(m.status, "wrong"), "expected %s to be caught (wrong), got %s: %s", what,
              m.status, m.error);
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
        return check_done("lane_striped");
    }
    test_plan();
    mq_limits lim = chip.lim; /* the executor's threadgroup memory is Apple's 32 KB */
    lim.tg_mem_bytes = 32768;
    test_on_executor(&lim);
    static const int tail_head[5] = {16, 64, 128, 6, 4}, whole[5] = {16, 64, 128, 5, 4};
    planted("a tile's tail taken for whole (to C, then overwritten by the reduction)",
            "mq_lane.h", "s0 == 0u && s1 == ks, smem", "s1 == ks, smem", tail_head);
    planted("every part's partial in plane 0", "mq_lane.h",
            "workspace + size_t(s0) * p.M * p.N,", "workspace,", tail_head);
    planted("the reduction summing every plane of a shared tile", "marlin_gemm_fp4_striped.metal",
            "every = p.work_per_tg;", "every = 1u;", tail_head);
    planted("the reduction rewriting a tile whole in one threadgroup",
            "marlin_gemm_fp4_striped.metal",
            "(u0 + p.k_slices - 1u) / p.work_per_tg)\n            return;",
            "(u0 + p.k_slices - 1u) / p.work_per_tg)\n            u0 = u0;", whole);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd)) {
    }
    return check_done("lane_striped");
}
