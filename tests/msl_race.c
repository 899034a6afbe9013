/* msl_race.c - the MSL executor under ThreadSanitizer (make race): the
 * executor and the kernel module are built with -fsanitize=thread, each
 * thread of a threadgroup is a TSan fiber and each barrier a
 * release/acquire, so a kernel that reads threadgroup memory another thread
 * wrote without a barrier between is reported as a data race (the launch's
 * child exits with TSan's status), while the same kernel with its barrier,
 * and a kernel that exchanges through simd collectives and a simdgroup
 * matrix, run clean. Then the lane MoE block (metal/lane_trellis_moe.metal),
 * whose gate/up kernel reuses its threadgroup memory from one pass to the
 * next: clean in registers and staged, with gate/up's K in one part and in
 * two that meet (metal/mq_meet.h; the parts' sums cross threadgroups
 * through the host's atomics, which TSan follows), and a race with the
 * barrier between the passes planted away. (A meeting without its barrier
 * before the arrival ran clean here: threadgroups that meet on one worker
 * are ordered by its fiber switches, so TSan cannot be relied on to see it;
 * tests/test_moe_lane.c plants the meeting's faults that change outputs.)
 * Not part of make test: it needs its own build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "chips.h"
#include "check.h"
#include "msl_exec.h"
#include "testdata.h"

static const char *rotate_src =
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "kernel void rotate(device float *out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]],\n"
    "                   uint n [[threads_per_threadgroup]], uint tg [[threadgroup_position_in_grid]])\n"
    "{\n"
    "    threadgroup float share[128];\n"
    "    share[tid] = float(tg * 1000u + tid);\n"
    "    %s\n"
    "    out[tg * n + tid] = share[(tid + 1u) %% n];\n"
    "    simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8, 8>(float(simd_sum(1.0f)));\n"
    "    simdgroup_multiply_accumulate(m, m, m, m);\n"
    "}\n";

static int run(const char *barrier, char *err, size_t n)
{
    char src[2048];
    snprintf(src, sizeof src, rotate_src, barrier);
    mq_msl_compile_opts o = {NULL, "-fsanitize=thread", getenv("MQ_MSL_CACHE")};
    mq_msl_module *m = mq_msl_module_load("race.metal", src, "", &o, err, n);
    if (!m)
        return -1;
    mq_msl_buffer b;
    int rc = mq_msl_buffer_alloc(&b, 2 * 64 * 4, err, n);
    mq_msl_launch l = {{&b}, {2, 1, 1}, {64, 1, 1}, 2, 120};
    if (rc == 0)
        rc = mq_msl_run(m, "rotate", &l, err, n);
    mq_msl_buffer_free(&b);
    mq_msl_module_free(m);
    return rc;
}

/* The lane MoE block once on the TSan-built executor (MQ_METAL_DIR: dir,
 * NULL the source's), two simdgroups along K so that the passes share
 * threadgroup memory; 0, or -1 and the error. */
static int moe_lane_run(const char *dir, const mq_limits *lim, int parts, char *err, size_t n)
{
    if (dir)
        setenv("MQ_METAL_DIR", dir, 1);
    setenv("MQ_MSL_CFLAGS", "-fsanitize=thread", 1);
    mq_moe_problem p = {MQ_FMT_TRELLIS3, 3, 256, 192, 4, 2, 128};
    mq_backend_opts bo = {2};
    mq_error e;
    mq_moe_weights mw;
    int rc = -1;
    mq_backend *b = mq_backend_msl_cpu_open(&bo, &e);
    if (b && mq_moe_weights_alloc(&mw, &p, &e) == MQ_OK) {
        mq_moe_weights_fill_random(&mw, 3);
        uint16_t x[3 * 256];
        int32_t ids[6];
        float pr[6], out[3 * 256];
        td_fill_activations(x, 3, 256, 5);
        mq_moe_candidate c;
        memset(&c, 0, sizeof c);
        c.inner.variant = MQ_VAR_LANE_TRELLIS;
        c.inner.p = (mq_params){8, 64, parts > 1 ? 128 : 256, 0, parts};
        c.i_split = 1;
        rc = mq_moe_routing_generate(&p, MQ_ROUTE_UNIFORM, 1, 7, ids, pr, &e) ||
                     b->run_moe(b, &p, &mw, x, ids, pr, out, &c, lim, &e)
                 ? -1
                 : 0;
        mq_moe_weights_free(&mw);
    }
    if (rc)
        snprintf(err, n, "%s", e.msg);
    mq_backend_close(b);
    unsetenv("MQ_METAL_DIR");
    unsetenv("MQ_MSL_CFLAGS");
    return rc;
}

static void moe_lane_checks(void)
{
    char err[1024] = "", cerr[256];
    mq_chip h100;
    const mq_limits apple = mq_limits_default();
    int have = mq_chip_load_named(mq_chips_default_path(), "h100", &h100, cerr, sizeof cerr) == 0;
    h100.lim.tg_mem_bytes = apple.tg_mem_bytes; /* the executor's: Apple's 32 KB */
    CHECK(have, "h100: %s", cerr);
    const mq_limits *lims[2] = {&apple, have ? &h100.lim : &apple};
    for (int l = 0; l < 4; l++) {
        int rc = moe_lane_run(NULL, lims[l % 2], l < 2 ? 1 : 2, err, sizeof err);
        CHECK(rc == 0, "expected the lane MoE block (%s, gate/up in %d parts) to run clean "
              "under TSan, got %s", l % 2 ? "staged" : "registers", l < 2 ? 1 : 2, err);
    }
    char dir[64];
    if (td_planted_dir("lane_trellis_moe.metal",
                       "        mq_lane_totals(acc, red, sgc, lane, v);\n"
                       "    threadgroup_barrier(mem_flags::mem_threadgroup);",
                       "        mq_lane_totals(acc, red, sgc, lane, v);", dir, sizeof dir)) {
        CHECK(0, "expected to plant the missing barrier in metal/lane_trellis_moe.metal");
        return;
    }
    printf("msl_race: the data race ThreadSanitizer reports next is the planted one\n");
    fflush(stdout);
    int rc = moe_lane_run(dir, &apple, 1, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "status 66"),
          "expected the lane MoE block without the barrier between its passes to be a data "
          "race (TSan's exit status 66), got %s",
          rc ? err : "a clean run");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {
    }
}

int main(void)
{
    char err[1024] = "";
    int rc = run("threadgroup_barrier(mem_flags::mem_threadgroup);", err, sizeof err);
    CHECK(rc == 0, "expected the kernel with its barrier to run clean under TSan, got %s", err);
    printf("msl_race: the data race ThreadSanitizer reports next is the planted one\n");
    fflush(stdout);
    rc = run("", err, sizeof err);
    CHECK(rc != 0 && strstr(err, "status 66"),
          "expected the kernel without its barrier to be a data race (TSan's exit status 66), "
          "got %s",
          rc ? err : "a clean run");
    moe_lane_checks();
    return check_done("msl_race");
}
