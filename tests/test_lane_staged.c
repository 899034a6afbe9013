/* test_lane_staged.c - the lane kernel's staged K loop (metal/mq_lane_staged.h:
 * A and weights in LANE_STAGES threadgroup buffers, the path the planner
 * picks where the chip copies asynchronously, async_copy_stages) executed
 * on the msl-cpu executor with the NVIDIA chips' plans: fp4 and u4, row
 * counts inside and past a tile, a partial last 16-column block, K slices
 * of one tile and of several, two to four stages, each launch verified
 * against the float64 reference; and planted faults in the staged copies
 * that the check must catch. The executor's copies are plain loads and
 * stores, so this proves the indexing and the ring of buffers; the
 * asynchronous copies themselves run in make test-gpu on an H100. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "chips.h"
#include "measure.h"
#include "testdata.h"

static char cache[] = "/tmp/mq-lane-staged-XXXXXX";

static void test_staged_on_executor(const mq_limits *lim, const char *chip)
{
    mq_backend_opts bo = {0};
    mq_error e;
    mq_backend *b = mq_backend_msl_cpu_open(&bo, &e);
    CHECK(b != NULL, "expected the msl-cpu backend to open: %s", e.msg);
    if (!b)
        return;
    /* tiles: one to four super-blocks a K tile, one to four column
     * simdgroups, 8 to 64 rows; the stage count follows from the memory
     * (4, 3, 2 stages) */
    static const int tiles[][3] = {{16, 64, 128}, {8, 32, 64}, {32, 128, 64},
                                   {32, 64, 128}, {64, 64, 64},  {8, 64, 256}};
    static const struct {
        int M, N, K, group, split_k;
    } shapes[] = {
        {3, 200, 384, 64, 1},   /* rows inside a tile, a partial column block */
        {17, 256, 1024, 128, 2}, /* rows past a tile, two slices */
        {9, 96, 448, 32, 3},    /* groups of 32 (two a super-block), an uneven last slice */
        {5, 64, 512, 128, 4},   /* four slices of one group each */
    };
    int ran = 0, seen[8] = {0}, per_shape[4] = {0};
    static mq_measurement m;
    for (int f = 0; f < 2; f++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
                mq_format fmt = f ? MQ_FMT_U4 : MQ_FMT_FP4;
                mq_problem p = {fmt, shapes[s].M, shapes[s].N, shapes[s].K, shapes[s].group};
                mq_candidate c = {MQ_VAR_LANE_GEMM,
                                  {tiles[t][0], tiles[t][1], tiles[t][2], 0, shapes[s].split_k}};
                mq_plan plan;
                if (mq_plan_candidate(&p, &c, lim, &plan, NULL) != MQ_OK)
                    continue; /* (tile_m past the rows, or the memory) */
                int stages;
                td_run_candidate(b, &p, &c, lim, &stages, &m);
                char name[128];
                mq_candidate_str(&c, name, sizeof name);
                CHECK(stages >= 2, "expected %s on %s to stage its weights (async_copy_stages), "
                      "got %d stages", name, chip, stages);
                CHECK(!strcmp(m.status, "verified"),
                      "expected %s M=%d N=%d K=%d group %d %s (%d stages) on the executor to "
                      "match the reference: %s %s",
                      mq_format_name(fmt), p.M, p.N, p.K, p.group, name, stages, m.status,
                      m.error);
                ran++;
                per_shape[s]++;
                if (stages >= 0 && stages < 8)
                    seen[stages]++;
            }
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        CHECK(per_shape[s] >= 4, "expected shape %zu (M=%d N=%d K=%d split %d) on several tiles, "
              "ran %d", s, shapes[s].M, shapes[s].N, shapes[s].K, shapes[s].split_k, per_shape[s]);
    CHECK(ran >= 30, "expected at least 30 staged launches, ran %d", ran);
    CHECK(seen[2] && seen[3] && seen[4],
          "expected plans of 2, 3 and 4 stages among them, got %d, %d, %d", seen[2], seen[3],
          seen[4]);
    mq_backend_close(b);
    printf("lane staged: %d launches on the executor with %s's plans (%d of 2 stages, %d of 3, "
           "%d of 4)\n", ran, chip, seen[2], seen[3], seen[4]);
}

/* fp4 weights whose scales reach 4 and more: lane_scales_small goes to 0
 * and the kernel takes its unfolded loop (the fold of 2^14 into the scales
 * would overflow FP16); both loops verified, on the staged path and on the
 * register path (m4max's plan). */
static void test_fold_both_ways(const mq_limits *staged)
{
    mq_backend_opts bo = {0};
    mq_error e;
    mq_backend *b = mq_backend_msl_cpu_open(&bo, &e);
    const mq_limits apple = mq_limits_default();
    const mq_limits *lims[2] = {staged, &apple};
    for (int li = 0; b && li < 2; li++) {
        mq_problem p = {MQ_FMT_FP4, 9, 96, 1024, 64};
        mq_candidate c = {MQ_VAR_LANE_GEMM, {16, 64, 128, 0, 2}};
        mq_bench_problem bp;
        memset(&bp, 0, sizeof bp);
        static mq_measurement m;
        if (mq_bench_problem_setup(&bp, &p, 1, NULL, 0, &e)) {
            CHECK(0, "set up: %s", e.msg);
            break;
        }
        mq_measure_opts mo = mq_measure_defaults();
        int small = bp.copies[0].lane_scales_small;
        mq_measure(b, &bp, &c, lims[li], &mo, &m);
        CHECK(small == 1 && !strcmp(m.status, "verified"),
              "expected the bench's fp4 scales all under 4 (lane_scales_small 1, got %d) and the "
              "folded loop verified (%s), got %s %s",
              small, li ? "registers" : "staged", m.status, m.error);
        int rc = td_scale_fp4_weights(&bp, 10);
        small = bp.copies[0].lane_scales_small;
        mq_measure(b, &bp, &c, lims[li], &mo, &m);
        CHECK(rc == 0 && small == 0 && !strcmp(m.status, "verified"),
              "expected the scales x 1024 to clear lane_scales_small (got %d) and the unfolded "
              "loop verified (%s), got %s %s",
              small, li ? "registers" : "staged", m.status, m.error);
        mq_bench_problem_free(&bp);
    }
    mq_backend_close(b);
}

/* A fault planted in metal/FILE must make the check fail (lane_gemm
 * tile_m x 64 x 64). */
static void planted_in(const char *file, const char *what, const char *from, const char *to,
                       mq_format fmt, int tile_m, const mq_limits *lim)
{
    /* 32 K tiles a slice: the ring of buffers wraps many times */
    mq_problem p = {fmt, 9, 96, 2048, 32};
    mq_candidate c = {MQ_VAR_LANE_GEMM, {tile_m, 64, 64, 0, 1}};
    static mq_measurement m;
    int rc = td_run_planted(file, from, to, &p, &c, lim, &m);
    CHECK(rc == 0,
          "expected to plant %s in metal/%s and run it on the executor, got %d "
          "(-1: nothing planted, -2: the executor did not open)", what, file, rc);
    if (rc == 0)
        CHECK(!strcmp(m.status, "wrong"), "expected %s to be caught (wrong), got %s: %s", what,
              m.status, m.error);
}

static void planted(const char *what, const char *from, const char *to, mq_format fmt,
                    const mq_limits *lim)
{
    planted_in("mq_lane_staged.h", what, from, to, fmt, 16, lim);
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
        return check_done("lane_staged");
    }
    CHECK(chip.lim.async_copy_stages == 4, "expected h100's async_copy_stages 4, got %d",
          chip.lim.async_copy_stages);
    /* the staged copies index the codes in 32 bits: weights of 2^32 uints
     * of codes or more (N x K >= 2^35) keep the register path */
    {
        mq_candidate c = {MQ_VAR_LANE_GEMM, {16, 64, 128, 0, 1}};
        mq_problem small = {MQ_FMT_FP4, 16, 131072, 131072, 128};
        mq_problem big = {MQ_FMT_FP4, 16, 262144, 131072, 128};
        mq_plan ps, pb;
        int rs = mq_plan_candidate(&small, &c, &chip.lim, &ps, NULL);
        int rb = mq_plan_candidate(&big, &c, &chip.lim, &pb, NULL);
        CHECK(rs == MQ_OK && ps.stages == 4 && rb == MQ_OK && pb.stages == 0,
              "expected 4 stages at N = K = 2^17 and the register path (0) at N = 2^18, got "
              "%d (rc %d) and %d (rc %d)", rs ? -1 : ps.stages, rs, rb ? -1 : pb.stages, rb);
    }
    /* the executor's threadgroup memory is Apple's 32 KB (its prelude
     * refuses larger arrays): h100's copy stages under that budget */
    mq_limits lim = chip.lim;
    lim.tg_mem_bytes = 32768;
    test_staged_on_executor(&lim, "h100");
    test_fold_both_ways(&lim);
    /* u4 at up to 8 rows scales its sums once per group, not its weights */
    planted_in("mq_lane.h", "u4's weights scaled as well as its sums", "ACC ? 1.0f : scale",
               "scale", MQ_FMT_U4, 8, &lim);
    planted_in("mq_lane.h", "u4's sums left unscaled",
               "mq_lane_acc_add_scaled(acc[i][1][mi], part[i][1][mi], ts.y);",
               "mq_lane_acc_add_scaled(acc[i][1][mi], part[i][1][mi], 1.0f);", MQ_FMT_U4, 8,
               &lim);
    /* so does fp4, its MMAs taking its codes' values */
    planted_in("mq_lane.h", "fp4's unscaled weights left at 2^-14 of their values",
               "ACC ? 16384.0f : FOLD", "ACC ? 1.0f : FOLD", MQ_FMT_FP4, 8, &lim);
    planted_in("mq_lane.h", "fp4's sums times the cuda prelude's unit off that prelude",
               "#define LANE_FP4_ACC_UNIT 1.0f", "#define LANE_FP4_ACC_UNIT 16384.0f",
               MQ_FMT_FP4, 8, &lim);
    planted("the second 16 bytes of a scale pair read from the first",
            "+ i % uint(LANE_SCALE_PIECES)) * 8u;", "+ 0u) * 8u;", MQ_FMT_FP4, &lim);
    planted("a zero-point piece of the other K half", "+ (i % 2u) * 32u : LANE_NEVER;",
            "+ 0u : LANE_NEVER;", MQ_FMT_U4, &lim);
    planted("the ring's write buffer one behind", "wr = (uint(LANE_STAGES) - 1u) *",
            "wr = (uint(LANE_STAGES) - 2u) *", MQ_FMT_FP4, &lim);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd)) {
    }
    return check_done("lane_staged");
}
