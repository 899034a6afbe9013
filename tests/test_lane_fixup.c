/* test_lane_fixup.c - the lane kernels' split tiles summed inside the
 * kernel (metal/mq_fixup.h: each share's partial in its workspace plane,
 * the last share to arrive at the tile's counter sums the planes into C and
 * resets the counter; no reduction dispatch), on the grid (lane_gemm) and on
 * Marlin's stripes (lane_gemm_striped: a threadgroup's consecutive K slices
 * of a tile summed in its accumulators, a tile shared between threadgroups
 * by the ones whose runs meet it): the planner's figures (one dispatch, the
 * counters after the planes), then fp4 and u4 on the msl-cpu executor over
 * every way a threadgroup's range can fall on the tiles (inside one tile, a
 * tile's tail and the next one's head, whole tiles and a head, one unit
 * each, whole tiles only with K split, empty threadgroups at the end,
 * several row tiles in the column-major order), on both K loops, each launch
 * verified against the float64 reference and its counters found zero after
 * it; and planted faults in the arrival and the shares that the check must
 * catch (the executor starts the workspace as NaN, so a plane read that no
 * share wrote cannot pass). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "chips.h"
#include "measure.h"
#include "testdata.h"

static char cache[] = "/tmp/mq-lane-fixup-XXXXXX";

/* The planner: lane_gemm_striped a 1D grid of num_threadgroups,
 * work_per_tg units each; every lane variant one dispatch with the tiles'
 * counters after the planes; a variant without the fixup (mlx_qmm_splitk)
 * two dispatches and no counters. */
static void test_plan(void)
{
    mq_problem p = {MQ_FMT_FP4, 16, 14336, 4096, 128};
    mq_candidate c = {MQ_VAR_LANE_STRIPED, {16, 64, 256, 264, 4}};
    mq_plan plan;
    mq_error e;
    int rc = mq_plan_candidate(&p, &c, NULL, &plan, &e);
    /* 224 tiles x 4 slices = 896 units over 264 threadgroups: 4 each */
    size_t planes = (size_t)4 * 16 * 14336 * 4;
    CHECK(rc == MQ_OK && plan.grid_x == 264 && plan.grid_y == 1 && plan.grid_z == 1 &&
              plan.work_units == 896 && plan.work_per_tg == 4 && plan.dispatches == 1 &&
              plan.counters_at == planes && plan.workspace_bytes == planes + 224 * 4,
          "expected lane_gemm_striped 16x64x256 tg=264 sk=4 on 16x14336x4096 to plan a 1D grid "
          "of 264, 896 units, 4 a threadgroup, one dispatch, 224 counters after %zu B of "
          "planes; got rc %d (%s) grid %dx%dx%d units %d per %d dispatches %d counters at %zu "
          "of %zu B",
          planes, rc, rc ? e.msg : "", plan.grid_x, plan.grid_y, plan.grid_z, plan.work_units,
          plan.work_per_tg, plan.dispatches, plan.counters_at, plan.workspace_bytes);
    static const struct {
        mq_format fmt;
        mq_candidate c;
        int dispatches, counters;
    } rows[] = {
        {MQ_FMT_FP4, {MQ_VAR_LANE_GEMM, {16, 64, 256, 0, 4}}, 1, 224},
        {MQ_FMT_TRELLIS3, {MQ_VAR_LANE_TRELLIS, {16, 64, 256, 0, 2}}, 1, 224},
        {MQ_FMT_FP4, {MQ_VAR_LANE_GEMM, {16, 64, 256, 0, 1}}, 1, 0},
        {MQ_FMT_FP4, {MQ_VAR_MLX_SPLITK, {32, 32, 32, 0, 4}}, 2, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        mq_problem q = p;
        q.format = rows[i].fmt;
        rc = mq_plan_candidate(&q, &rows[i].c, NULL, &plan, &e);
        size_t ws = (size_t)rows[i].c.p.split_k * 16 * 14336 * 4;
        int sk1 = rows[i].c.p.split_k == 1;
        CHECK(rc == MQ_OK && plan.dispatches == rows[i].dispatches &&
                  plan.counters_at == (rows[i].counters ? ws : 0) &&
                  plan.workspace_bytes == (sk1 ? 0 : ws + (size_t)rows[i].counters * 4),
              "expected %s sk=%d to plan %d dispatch(es) and %d counters, got rc %d (%s), %d, "
              "counters at %zu of %zu B",
              mq_variant_get(rows[i].c.variant)->name, rows[i].c.p.split_k, rows[i].dispatches,
              rows[i].counters, rc, rc ? e.msg : "", plan.dispatches, plan.counters_at,
              plan.workspace_bytes);
    }
    c.p.num_threadgroups = 897;
    rc = mq_plan_candidate(&p, &c, NULL, &plan, &e);
    CHECK(rc == MQ_E_ILLEGAL && strstr(e.msg, "num_threadgroups=897"),
          "expected more threadgroups than work units refused naming num_threadgroups=897, "
          "got rc %d: %s", rc, rc ? e.msg : "(planned)");
}

/* One launch, verified; 1 when it ran. */
static int run_one(mq_backend *b, mq_variant v, mq_format fmt, int M, int N, int K, int group,
                   const int t[5], const mq_limits *lim, int staged)
{
    mq_problem p = {fmt, M, N, K, group};
    mq_candidate c = {v, {t[0], t[1], t[2], t[3], t[4]}};
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
            ran += run_one(b, MQ_VAR_LANE_STRIPED, f ? MQ_FMT_U4 : MQ_FMT_FP4, 16, 256, 1024, 128,
                           ranges[r], &apple, 0);
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
        ran += run_one(b, MQ_VAR_LANE_STRIPED, shapes[s].fmt, shapes[s].M, shapes[s].N,
                       shapes[s].K, shapes[s].group, shapes[s].t, &apple, 0);
    /* staged (an NVIDIA chip's plan under the executor's 32 KB): the
     * pipeline started and drained once per part */
    static const int staged_ranges[][5] = {{16, 64, 128, 6, 4}, {16, 32, 256, 7, 2}};
    for (int f = 0; f < 2; f++)
        ran += run_one(b, MQ_VAR_LANE_STRIPED, f ? MQ_FMT_U4 : MQ_FMT_FP4, 16, 256, 1024, 128,
                       staged_ranges[f], staged, 1);
    /* the grid's shares: K in 3 or 8 slices, rows past a tile, N a multiple
     * of 4 (the last share's 4-column sums) and not (one column a thread) */
    static const int grid[][5] = {{16, 64, 128, 0, 8}, {8, 32, 64, 0, 3}};
    for (int f = 0; f < 2; f++)
        ran += run_one(b, MQ_VAR_LANE_GEMM, f ? MQ_FMT_U4 : MQ_FMT_FP4, 20, f ? 90 : 96, 1024, 64,
                       grid[f], &apple, 0);
    CHECK(ran == 21, "expected 21 launches, ran %d", ran);
    mq_backend_close(b);
    printf("lane fixup: %d launches on the executor, all verified, counters left zero\n", ran);
}

/* A fault planted in a metal/ file must make the check fail: `want` the
 * status (wrong: a result off the bound; error: counters left set). */
static void planted(const char *what, const char *file, const char *from, const char *to,
                    mq_variant v, const int t[5], const char *want)
{
    mq_problem p = {MQ_FMT_FP4, 16, 256, 1024, 128};
    mq_candidate c = {v, {t[0], t[1], t[2], t[3], t[4]}};
    const mq_limits apple = mq_limits_default();
    static mq_measurement m;
    int rc = td_run_planted(file, from, to, &p, &c, &apple, &m);
    CHECK(rc != -1, "expected to plant %s in metal/%s", what, file);
    if (rc == 0)
        CHECK(!strcmp(m.status, want), "expected %s to be caught (%s), got %s: %s", what, want,
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
        return check_done("lane_fixup");
    }
    test_plan();
    mq_limits lim = chip.lim; /* the executor's threadgroup memory is Apple's 32 KB */
    lim.tg_mem_bytes = 32768;
    test_on_executor(&lim);
    static const int tail_head[5] = {16, 64, 128, 6, 4}, grid4[5] = {16, 64, 128, 0, 4};
    /* (a fault that makes every arrival sum and reset, such as "the first
     * is the last", is harmless when the shares run one after another: the
     * true last one sums last) */
    planted("the share before the last taken for the last", "mq_fixup.h",
            "flag[0] + 1u == sh.shares", "flag[0] + 2u == sh.shares", MQ_VAR_LANE_GEMM, grid4,
            "error");
    planted("the counter not reset by the last share", "mq_fixup.h",
            "atomic_store_explicit(cnt, 0u, memory_order_relaxed);", "(void)cnt;",
            MQ_VAR_LANE_GEMM, grid4, "error");
    planted("a share more than the grid's slices", "mq_lane.h", "sh.shares = p.k_slices;",
            "sh.shares = p.k_slices + 1u;", MQ_VAR_LANE_GEMM, grid4, "error");
    planted("a stripe's shares one too many", "mq_lane.h", "- sh.first / wpt + 1u;",
            "- sh.first / wpt + 2u;", MQ_VAR_LANE_STRIPED, tail_head, "error");
    planted("every plane of a striped tile summed", "mq_lane.h", "sh.every = wpt;",
            "sh.every = 1u;", MQ_VAR_LANE_STRIPED, tail_head, "wrong");
    planted("a tile's tail taken for whole (to C, never arriving)", "mq_lane.h",
            "s0 == 0u && s1 == ks, sh", "s1 == ks, sh", MQ_VAR_LANE_STRIPED, tail_head, "error");
    planted("every part's partial in plane 0", "mq_lane.h",
            "workspace + size_t(plane) * p.M * p.N, whole", "workspace, whole",
            MQ_VAR_LANE_STRIPED, tail_head, "wrong");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd)) {
    }
    return check_done("lane_fixup");
}
