/* msl_race.c - the MSL executor under ThreadSanitizer (make race): the
 * executor and the kernel module are built with -fsanitize=thread, each
 * thread of a threadgroup is a TSan fiber and each barrier a
 * release/acquire, so a kernel that reads threadgroup memory another thread
 * wrote without a barrier between is reported as a data race (the launch's
 * child exits with TSan's status), while the same kernel with its barrier,
 * and a kernel that exchanges through simd collectives and a simdgroup
 * matrix, run clean. Not part of make test: it needs its own build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "msl_exec.h"

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
    return check_done("msl_race");
}
