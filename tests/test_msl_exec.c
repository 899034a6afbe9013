/* test_msl_exec.c - the MSL executor and the msl-cpu backend.
 * The executor's semantics, each on a small kernel written here: Apple's
 * simdgroup_matrix lane layout (thread_elements) and multiply-accumulate,
 * an operand gathered from the lanes, simd collectives in a partial
 * simdgroup, FP16 rounding against the library's converter, threadgroup
 * memory shared through a barrier and NaN where no thread wrote, and the
 * faults it must report (a barrier in divergent control flow, a store past
 * a buffer into its slack and into its guard page, threadgroup memory over
 * 32 KB when compiled and when run, an unbound buffer, an endless loop).
 * Then every variant x format of metal/ on the executor through the
 * harness against the float64 reference: the smallest, the seed and the
 * largest legal tiles, split_k 1, 2 and 3 where the variant splits, M of
 * 1, 3 and 17 with N = 200 (no tile divides it), trellis with a partial
 * last group (K = 400, group 128); the fragment helpers of mq_metal.h
 * (mq_probe_mma16) against a host product, bit for bit; and planted defects in
 * the real kernels (nibble order, a dropped K element, a missing barrier,
 * a store past M, threadgroup memory over 32 KB) that must each fail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "chips.h"
#include "measure.h"
#include "msl_exec.h"
#include "msl_program.h"
#include "probes.h"
#include "space.h"
#include "testdata.h"

static char cache[] = "/tmp/mq-msl-test-XXXXXX";
static mq_msl_compile_opts copts;

static mq_msl_module *compile(const char *name, const char *src, const char *defines, char *err,
                              size_t n)
{
    return mq_msl_module_load(name, src, defines, &copts, err, n);
}

/* One launch of kernel `fn` from src over grid x threads with up to 4
 * buffers of the given byte sizes (initial contents from init, may be
 * NULL); 0 or -1 with err. */
typedef struct {
    size_t bytes[4];
    const void *init[4];
    mq_msl_buffer b[4];
} bufs;

static int launch(const char *src, const char *fn, bufs *bs, unsigned grid, unsigned threads,
                  double timeout, char *err, size_t n)
{
    mq_msl_module *m = compile("test.metal", src, "", err, n);
    if (!m)
        return -1;
    mq_msl_launch l = {{0}, {grid, 1, 1}, {threads, 1, 1}, 1, timeout};
    int rc = 0;
    for (int i = 0; i < 4 && bs->bytes[i]; i++) {
        if (mq_msl_buffer_alloc(&bs->b[i], bs->bytes[i], err, n)) {
            rc = -1;
            break;
        }
        if (bs->init[i])
            memcpy(bs->b[i].data, bs->init[i], bs->bytes[i]);
        l.buffers[i] = &bs->b[i];
    }
    if (rc == 0)
        rc = mq_msl_run(m, fn, &l, err, n);
    mq_msl_module_free(m);
    return rc;
}

static void free_bufs(bufs *bs)
{
    for (int i = 0; i < 4; i++)
        mq_msl_buffer_free(&bs->b[i]);
}

/* ---- the semantics ---------------------------------------------------------- */

static const char *layout_src =
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "kernel void layout(device float *out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]])\n"
    "{\n"
    "    simdgroup_float8x8 m;\n"
    "    m.thread_elements()[0] = float(lane * 2);\n"
    "    m.thread_elements()[1] = float(lane * 2 + 1);\n"
    "    simdgroup_store(m, out, 8);\n"
    "}\n";

static void test_layout(void)
{
    char err[1024];
    bufs bs = {.bytes = {64 * 4}};
    int rc = launch(layout_src, "layout", &bs, 1, 32, 0, err, sizeof err);
    CHECK(rc == 0, "expected the layout kernel to run: %s", err);
    const float *out = bs.b[0].data;
    int bad = 0;
    /* MLX steel's get_coord: lane l holds row (l/4 & 4) + (l/2) % 4,
     * columns (l/4 & 2) * 2 + (l % 2) * 2 and +1 */
    for (unsigned l = 0; rc == 0 && l < 32; l++) {
        unsigned r = ((l / 4) & 4) + (l / 2) % 4, c = ((l / 4) & 2) * 2 + (l % 2) * 2;
        bad += out[r * 8 + c] != (float)(2 * l) || out[r * 8 + c + 1] != (float)(2 * l + 1);
    }
    CHECK(rc == 0 && bad == 0, "expected thread_elements in Apple's lane layout, %d lanes differ",
          bad);
    free_bufs(&bs);
}

static const char *mma_src =
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "kernel void mma(device const half *a [[buffer(0)]], device const half *b [[buffer(1)]],\n"
    "                device float *d [[buffer(2)]], device float *e [[buffer(3)]],\n"
    "                uint lane [[thread_index_in_simdgroup]])\n"
    "{\n"
    "    simdgroup_half8x8 A, B;\n"
    "    simdgroup_load(A, a, 8);\n"
    "    simdgroup_load(B, b, 8);\n"
    "    simdgroup_float8x8 C = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);\n"
    "    simdgroup_multiply_accumulate(C, A, B, C);\n"
    "    simdgroup_store(C, d, 8);\n"
    "    // an operand each lane holds only its part of: gathered from the lanes\n"
    "    simdgroup_half8x8 T;\n"
    "    T.thread_elements()[0] = half(float(lane));\n"
    "    T.thread_elements()[1] = half(-float(lane));\n"
    "    simdgroup_float8x8 Z = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);\n"
    "    simdgroup_multiply_accumulate(Z, T, B, Z);\n"
    "    simdgroup_store(Z, e, 8);\n"
    "}\n";

static void test_mma(void)
{
    uint16_t a[64], b[64];
    float af[64], bf[64];
    for (int i = 0; i < 64; i++) {
        af[i] = (float)((i * 7) % 13 - 6) / 4;
        bf[i] = (float)((i * 5) % 11 - 5) / 8;
        a[i] = mq_float_to_half(af[i]);
        b[i] = mq_float_to_half(bf[i]);
    }
    char err[1024];
    bufs bs = {.bytes = {128, 128, 256, 256}, .init = {a, b}};
    int rc = launch(mma_src, "mma", &bs, 1, 32, 0, err, sizeof err);
    CHECK(rc == 0, "expected the mma kernel to run: %s", err);
    const float *d = bs.b[2].data, *e = bs.b[3].data;
    int bad = 0, bad_t = 0;
    for (int r = 0; rc == 0 && r < 8; r++)
        for (int c = 0; c < 8; c++) {
            double s = 1, t = 0;
            for (int k = 0; k < 8; k++) {
                s += (double)af[r * 8 + k] * bf[k * 8 + c];
                /* T(r, k): the lane holding (r, k), + for the even column */
                unsigned l = (r & 4) * 4 + (k & 4) * 2 + (r % 4) * 2 + (k % 4) / 2;
                t += (k % 2 ? -(double)l : (double)l) * bf[k * 8 + c];
            }
            bad += fabs(d[r * 8 + c] - s) > 1e-5;
            bad_t += fabs(e[r * 8 + c] - t) > 1e-4;
        }
    CHECK(rc == 0 && bad == 0, "expected simdgroup_multiply_accumulate to give A x B + C, %d differ",
          bad);
    CHECK(rc == 0 && bad_t == 0,
          "expected an operand built with thread_elements to be gathered from the lanes, %d "
          "differ",
          bad_t);
    free_bufs(&bs);
}

static const char *simd_src =
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "kernel void simd(device float *out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]],\n"
    "                 uint lane [[thread_index_in_simdgroup]])\n"
    "{\n"
    "    float x = float(tid + 1);\n"
    "    out[tid * 5 + 0] = simd_sum(x);\n"
    "    out[tid * 5 + 1] = simd_shuffle_xor(x, ushort(1));\n"
    "    out[tid * 5 + 2] = simd_shuffle_down(x, ushort(4));\n"
    "    out[tid * 5 + 3] = simd_prefix_exclusive_sum(x);\n"
    "    out[tid * 5 + 4] = simd_max(lane < 3u ? 100.0f + x : x);\n"
    "}\n";

static void test_simd(void)
{
    enum { T = 48 }; /* a full simdgroup and one of 16 lanes */
    char err[1024];
    bufs bs = {.bytes = {T * 5 * 4}};
    int rc = launch(simd_src, "simd", &bs, 1, T, 0, err, sizeof err);
    CHECK(rc == 0, "expected the simd kernel to run: %s", err);
    const float *o = bs.b[0].data;
    int bad = 0;
    for (int t = 0; rc == 0 && t < T; t++) {
        int base = t / 32 * 32, n = t < 32 ? 32 : T - 32, lane = t % 32;
        double sum = 0, pre = 0;
        for (int i = 0; i < n; i++)
            sum += base + i + 1;
        for (int i = 0; i < lane; i++)
            pre += base + i + 1;
        double xo = (lane ^ 1) < n ? base + (lane ^ 1) + 1 : t + 1;
        double dn = lane + 4 < n ? t + 4 + 1 : t + 1;
        double mx = 100 + base + 3;
        bad += o[t * 5] != sum || o[t * 5 + 1] != xo || o[t * 5 + 2] != dn || o[t * 5 + 3] != pre ||
               o[t * 5 + 4] != mx;
    }
    CHECK(rc == 0 && bad == 0,
          "expected simd_sum/shuffle_xor/shuffle_down/prefix_exclusive_sum/max over each "
          "simdgroup's lanes (48 threads: 32 + 16), %d threads differ",
          bad);
    free_bufs(&bs);
}

static const char *half_src =
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "kernel void conv(device const float *in [[buffer(0)]], device ushort *out [[buffer(1)]],\n"
    "                 device ushort *prod [[buffer(2)]], uint gid [[thread_position_in_grid]])\n"
    "{\n"
    "    out[gid] = as_type<ushort>(half(in[gid]));\n"
    "    prod[gid] = as_type<ushort>(half(in[gid]) * half(in[(gid + 1) % 4096u]));\n"
    "}\n";

static void test_half(void)
{
    enum { N = 4096 };
    static float in[N];
    static const float fixed[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65519.0f, 65520.0f,
                                  0x1p-25f, 3 * 0x1p-26f, -0.0f, 1e-8f};
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        int e = (int)(s >> 27) - 20; /* 2^-20 .. 2^11: subnormal halves to large ones */
        in[i] = ldexpf((float)(s & 0xffffff) / 0x1p24f + 0.5f, e) * ((s >> 26) & 1 ? -1 : 1);
    }
    memcpy(in, fixed, sizeof fixed);
    char err[1024];
    bufs bs = {.bytes = {N * 4, N * 2, N * 2}, .init = {in}};
    int rc = launch(half_src, "conv", &bs, N / 64, 64, 0, err, sizeof err);
    CHECK(rc == 0, "expected the conversion kernel to run: %s", err);
    const uint16_t *o = bs.b[1].data, *pr = bs.b[2].data;
    int bad = 0, badp = 0;
    for (int i = 0; rc == 0 && i < N; i++) {
        bad += o[i] != mq_float_to_half(in[i]);
        float p = mq_half_to_float(mq_float_to_half(in[i])) *
                  mq_half_to_float(mq_float_to_half(in[(i + 1) % N]));
        badp += pr[i] != mq_float_to_half(p); /* exact in float, then rounded once */
    }
    CHECK(rc == 0 && bad == 0, "expected half(float) to round as mq_float_to_half, %d of %d differ",
          bad, N);
    CHECK(rc == 0 && badp == 0, "expected half * half rounded once to FP16, %d of %d differ", badp,
          N);
    CHECK(rc == 0 && o[0] == 0x3c00 && o[1] == 0x3c02 && o[2] == 0x7bff && o[3] == 0x7c00 &&
              o[4] == 0 && o[5] == 1,
          "expected ties to even, saturation at 65520 and subnormal rounding, got %04x %04x %04x "
          "%04x %04x %04x",
          o[0], o[1], o[2], o[3], o[4], o[5]);
    free_bufs(&bs);
}

static const char *tg_src =
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "kernel void rotate(device float *out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]],\n"
    "                   uint n [[threads_per_threadgroup]], uint tg [[threadgroup_position_in_grid]])\n"
    "{\n"
    "    threadgroup float share[256];\n"
    "    share[tid] = float(tg * 1000u + tid);\n"
    "    BARRIER\n"
    "    out[tg * n + tid] = share[(tid + 1u) % n];\n"
    "}\n";

static char *with(const char *src, const char *mark, const char *text)
{
    const char *at = strstr(src, mark);
    size_t n = strlen(src) + strlen(text) + 1;
    char *s = malloc(n);
    if (!s || !at)
        return free(s), NULL;
    snprintf(s, n, "%.*s%s%s", (int)(at - src), src, text, at + strlen(mark));
    return s;
}

static void test_threadgroup_memory(void)
{
    char err[1024];
    char *good = with(tg_src, "BARRIER", "threadgroup_barrier(mem_flags::mem_threadgroup);");
    char *racy = with(tg_src, "BARRIER", "");
    bufs bs = {.bytes = {3 * 96 * 4}};
    int rc = launch(good, "rotate", &bs, 3, 96, 0, err, sizeof err);
    const float *o = bs.b[0].data;
    int bad = 0;
    for (int g = 0; rc == 0 && g < 3; g++)
        for (int t = 0; t < 96; t++)
            bad += o[g * 96 + t] != (float)(g * 1000 + (t + 1) % 96);
    CHECK(rc == 0 && bad == 0,
          "expected a threadgroup array shared by the threadgroup's threads after a barrier: "
          "%s, %d differ",
          rc ? err : "ran", bad);
    free_bufs(&bs);
    memset(&bs, 0, sizeof bs);
    bs.bytes[0] = 96 * 4;
    rc = launch(racy, "rotate", &bs, 1, 96, 0, err, sizeof err);
    o = bs.b[0].data;
    CHECK(rc == 0 && isnan(o[0]) && o[95] == 0.0f,
          "expected a read before the writer's store (no barrier) to see NaN, not the value: "
          "got %g (thread 95 reads thread 0's: %g)",
          rc ? -1.0 : o[0], rc ? -1.0 : o[95]);
    free_bufs(&bs);
    free(good);
    free(racy);
}

/* Two threadgroup arrays in one declaration (`threadgroup T a[n], b[m];`)
 * are both the threadgroup's: each thread writes its index into both and
 * reads its neighbour's after the barrier (before the translation took
 * several declarators, the whole declaration was left as written: both
 * arrays each thread's own). */
static const char *tg_pair_src =
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "kernel void pair(device uint *out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]])\n"
    "{\n"
    "    threadgroup uint a[64], /* its neighbours' */ b[2][32];\n"
    "    a[tid] = tid;\n"
    "    b[tid / 32u][tid % 32u] = 100u + tid;\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "    const uint n = (tid + 1u) % 64u;\n"
    "    out[tid] = a[n] + 1000u * b[n / 32u][n % 32u];\n"
    "}\n";

static void test_threadgroup_declarators(void)
{
    char err[1024];
    bufs bs = {.bytes = {64 * 4}};
    int rc = launch(tg_pair_src, "pair", &bs, 1, 64, 0, err, sizeof err);
    const uint32_t *o = bs.b[0].data;
    int bad = 0;
    for (uint32_t t = 0; rc == 0 && t < 64; t++) {
        uint32_t n = (t + 1) % 64;
        bad += o[t] != n + 1000u * (100u + n);
    }
    CHECK(rc == 0 && bad == 0,
          "expected both arrays of `threadgroup uint a[64], /* c */ b[2][32];` shared by the "
          "threadgroup: %s, %d of 64 threads read another value",
          rc ? err : "ran", bad);
    free_bufs(&bs);
}

/* A launch with one buffer of `bytes` that must be refused with needle
 * (and needle2) in its message. */
static void expect_error(const char *what, const char *src, const char *fn, size_t bytes,
                         unsigned grid, unsigned threads, double timeout, const char *needle,
                         const char *needle2)
{
    char err[1024] = "";
    bufs one = {.bytes = {bytes}}, *bs = &one;
    int rc = launch(src, fn, bs, grid, threads, timeout, err, sizeof err);
    CHECK(rc != 0 && strstr(err, needle) && (!needle2 || strstr(err, needle2)),
          "expected %s to be refused with '%s'%s%s, got %s", what, needle, needle2 ? " and " : "",
          needle2 ? needle2 : "", rc ? err : "success");
    free_bufs(bs);
}

static void test_faults(void)
{
    const char *head = "#include <metal_stdlib>\nusing namespace metal;\n";
    char src[2048];
    snprintf(src, sizeof src,
             "%skernel void k(device float *o [[buffer(0)]], uint t [[thread_index_in_threadgroup]])\n"
             "{ if (t < 16u) return; threadgroup_barrier(mem_flags::mem_threadgroup); o[0] = 1.0f; }\n",
             head);
    expect_error("a barrier some threads returned before", src, "k", 40, 1, 64, 0, "deadlock",
                 "16 returned");
    /* 10 floats: index 10 lands in the slack before the guard, 5000 in it */
    snprintf(src, sizeof src,
             "%skernel void k(device float *o [[buffer(0)]], uint t [[thread_position_in_grid]])\n"
             "{ o[t + IDX] = 1.0f; }\n",
             head);
    char *slack = with(src, "IDX", "1u"), *far = with(src, "IDX", "5000u");
    expect_error("a store one element past a buffer", slack, "k", 40, 1, 10, 0, "buffer(0)",
                 "out of bounds");
    expect_error("a store far past a buffer", far, "k", 40, 1, 10, 0, "buffer(0), which has 40 bytes",
                 "thread");
    free(slack);
    free(far);
    snprintf(src, sizeof src,
             "%skernel void k(device float *o [[buffer(0)]], uint t [[thread_index_in_threadgroup]])\n"
             "{ threadgroup float big[9000]; big[t] = 1.0f; o[0] = big[0]; }\n",
             head);
    expect_error("a threadgroup array over 32 KB", src, "k", 4, 1, 32, 0, "does not compile",
                 "32 KB of threadgroup memory");
    snprintf(src, sizeof src,
             "%skernel void k(device float *o [[buffer(0)]], uint t [[thread_index_in_threadgroup]])\n"
             "{ threadgroup float a[5000]; threadgroup float b[5000]; a[t] = b[t] = 1.0f;\n"
             "  o[0] = a[0] + b[0]; }\n",
             head);
    expect_error("two threadgroup arrays over 32 KB together", src, "k", 4, 1, 32, 0,
                 "threadgroup memory of 40000 bytes", "32768");
    snprintf(src, sizeof src,
             "%skernel void k(device float *o [[buffer(0)]], device float *p [[buffer(1)]])\n"
             "{ o[0] = p[0]; }\n",
             head);
    expect_error("a kernel whose buffer is not bound", src, "k", 4, 1, 1, 0, "buffer(1)",
                 "sets none");
    snprintf(src, sizeof src,
             "%skernel void k(device float *o [[buffer(0)]])\n"
             "{ volatile int go = 1; while (go) {} o[0] = 1.0f; }\n",
             head);
    expect_error("an endless loop", src, "k", 4, 1, 1, 1, "did not finish", NULL);
}

/* ---- the real kernels ---------------------------------------------------------- */

/* mq_probe_mma16 (metal/mq_probe_mma.metal, its buffers defined there): one
 * super-block of lane-major codes dequantized into fragments with
 * MQ_FRAG_FILL, the activations as right operands through transposed loads,
 * mq_mma_16x8x16 and mq_mma_16x8x8, C^T stored. The host product here reads
 * the codes through Apple's lane layout (MLX steel's get_coord) directly;
 * small integers make every summation order exact, so the check is
 * equality. The executor runs the Apple path (MQ_FRAG_LANE the identity,
 * four simdgroup products per 16x8x16 step). */
static void test_probe_mma16(void)
{
    uint32_t codes[128];
    uint16_t act[8 * 64];
    float ref[16][8];
    td_probe16_inputs(codes, act, ref);
    char err[1024];
    mq_msl_module *m = compile("mq_probe_mma.metal", NULL, "", err, sizeof err);
    CHECK(m != NULL, "expected mq_probe_mma.metal to compile for the executor: %s", err);
    if (!m)
        return;
    mq_msl_buffer bc, ba, bo;
    int rc = mq_msl_buffer_alloc(&bc, sizeof codes, err, sizeof err) ||
             mq_msl_buffer_alloc(&ba, sizeof act, err, sizeof err) ||
             mq_msl_buffer_alloc(&bo, sizeof ref, err, sizeof err);
    int bad = 0, distinct = 0;
    if (rc == 0) {
        memcpy(bc.data, codes, sizeof codes);
        memcpy(ba.data, act, sizeof act);
        memset(bo.data, 0xff, sizeof ref); /* NaN: an element no lane stores fails */
        mq_msl_launch l = {{&bc, &ba, &bo}, {1, 1, 1}, {32, 1, 1}, 1, 0};
        rc = mq_msl_run(m, "mq_probe_mma16", &l, err, sizeof err);
        const float *out = bo.data;
        for (int i = 0; rc == 0 && i < 128; i++) {
            bad += out[i] != ref[i / 8][i % 8];
            distinct += i == 0 || ref[i / 8][i % 8] != ref[(i - 1) / 8][(i - 1) % 8];
        }
    }
    CHECK(rc == 0 && bad == 0 && distinct > 64,
          "expected mq_probe_mma16 on the executor to equal the host product C^T = W^T A^T "
          "(lane-major codes, MQ_FRAG_FILL, transposed loads, 16x8x16 steps): %s, %d of 128 "
          "differ",
          rc ? err : "ran", bad);
    printf("msl_exec: mq_probe_mma16: 128 of C^T %s the host product\n",
           rc == 0 && bad == 0 ? "equal" : "do NOT equal");
    mq_msl_buffer_free(&bc);
    mq_msl_buffer_free(&ba);
    mq_msl_buffer_free(&bo);
    mq_msl_module_free(m);
}

/* The helper no candidate names: marlin_zero_reduction clears a float
 * buffer, whole float4s and the tail, and nothing past it. */
static void test_zero_reduction(void)
{
    enum { N = 1003 };
    char err[1024];
    mq_msl_module *m = compile("marlin_zero_reduction.metal", NULL, "", err, sizeof err);
    CHECK(m != NULL, "expected marlin_zero_reduction.metal to compile for the executor: %s", err);
    if (!m)
        return;
    mq_msl_buffer buf, cnt;
    uint32_t count = N;
    int rc = mq_msl_buffer_alloc(&buf, N * 4, err, sizeof err) ||
             mq_msl_buffer_alloc(&cnt, 4, err, sizeof err);
    if (rc == 0) {
        for (int i = 0; i < N; i++)
            ((float *)buf.data)[i] = 1.0f;
        memcpy(cnt.data, &count, 4);
        mq_msl_launch l = {{&buf, &cnt}, {(N / 4 + 1 + 63) / 64, 1, 1}, {64, 1, 1}, 1, 0};
        rc = mq_msl_run(m, "marlin_zero_reduction", &l, err, sizeof err);
    }
    int nonzero = 0;
    for (int i = 0; rc == 0 && i < N; i++)
        nonzero += ((float *)buf.data)[i] != 0.0f;
    CHECK(rc == 0 && nonzero == 0,
          "expected marlin_zero_reduction to clear all %d floats and nothing past them: %s, %d "
          "left",
          N, rc ? err : "ran", nonzero);
    mq_msl_buffer_free(&buf);
    mq_msl_buffer_free(&cnt);
    mq_msl_module_free(m);
}

static void test_real_kernels(void)
{
    mq_chip chip;
    char err[1024];
    if (mq_chip_load_named(mq_chips_default_path(), "m4max", &chip, err, sizeof err)) {
        CHECK(0, "m4max: %s", err);
        return;
    }
    mq_limits lim = chip.lim;
    static mq_test_job js[512];
    int n = 0;
    static const int ms[] = {1, 3, 17};
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int mi = 0; mi < 3; mi++) {
            mq_problem p = {(mq_format)f, ms[mi], 200, 384, 64};
            n = mq_test_pick(&p, &chip, js, n, 512);
        }
    /* seed 004's partial last group: trellis with K = 400, group 128 */
    for (int f = MQ_FMT_TRELLIS2; f <= MQ_FMT_TRELLIS4; f++) {
        mq_problem p = {(mq_format)f, 3, 200, 400, 128};
        n = mq_test_pick(&p, &chip, js, n, 512);
    }
    /* the decode path's structure, every legal (tile_n, tile_k) pair of it:
     * lanes along N and K, simdgroups per threadgroup and the reduction
     * differ with each; formats and row counts rotate over the pairs */
    {
        static const mq_format fmts[] = {MQ_FMT_FP4, MQ_FMT_U4, MQ_FMT_TRELLIS2, MQ_FMT_TRELLIS3,
                                         MQ_FMT_TRELLIS4};
        static const int rows[] = {1, 2, 4, 8, 16};
        int pairs = 0;
        for (int tn = 16; tn <= 128; tn *= 2)
            for (int tk = 16; tk <= 1024; tk *= 2) {
                mq_format f = fmts[pairs % 5];
                mq_problem p = {f, 5, 256, 1024, 128};
                mq_candidate c = {mq_format_is_trellis(f) ? MQ_VAR_GEMV_TRELLIS : MQ_VAR_GEMV_DECODE,
                                  {rows[pairs % 5], tn, tk, 0, 1}};
                mq_plan pl;
                /* fewer rows where the partial sums would not fit */
                while (c.p.tile_m > 1 && mq_plan_candidate(&p, &c, &lim, &pl, NULL) != MQ_OK)
                    c.p.tile_m /= 2;
                if (mq_plan_candidate(&p, &c, &lim, &pl, NULL) == MQ_OK && n < 512) {
                    js[n++] = (mq_test_job){p, c};
                    pairs++;
                }
            }
        CHECK(pairs == 22, "expected the decode path's 22 legal (tile_n, tile_k) pairs on m4max, got %d",
              pairs);
    }
    /* every distinct program compiled first, in parallel */
    static char progs[512][600];
    int np = 0;
    for (int i = 0; i < n; i++) {
        const char *file, *fn;
        char d[256], key[600];
        if (td_metal_program(&js[i].p, &js[i].c, &lim, &file, &fn, d, sizeof d, err, sizeof err))
            continue;
        snprintf(key, sizeof key, "%s|%s", file, d);
        int k = 0;
        while (k < np && strcmp(progs[k], key))
            k++;
        if (k == np)
            snprintf(progs[np++], sizeof progs[0], "%s", key);
    }
    double t0 = mq_now();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int running = 0, failed_compiles = 0;
    for (int i = 0; i <= np; i++) {
        while (running > 0 && (running >= cores || i == np)) {
            int st;
            if (wait(&st) < 0)
                break;
            running--;
            failed_compiles += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        }
        if (i == np)
            break;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            char file[600], *bar;
            snprintf(file, sizeof file, "%s", progs[i]);
            bar = strchr(file, '|');
            *bar = 0;
            mq_msl_module *m = compile(file, NULL, bar + 1, err, sizeof err);
            if (!m)
                fprintf(stderr, "%s\n", err);
            _exit(m ? 0 : 1);
        }
        running += pid > 0;
    }
    CHECK(failed_compiles == 0, "expected every program of the set to compile, %d failed",
          failed_compiles);
    double t1 = mq_now();
    /* then each job through the harness, verified against the float64 reference */
    mq_backend_opts bo = {0}; /* a worker per core */
    mq_error e;
    mq_backend *b = mq_backend_msl_cpu_open(&bo, &e);
    CHECK(b != NULL, "expected the msl-cpu backend to open: %s", e.msg);
    if (!b)
        return;
    int ok = 0, per_vf[64][MQ_FMT_COUNT] = {{0}};
    mq_bench_problem bp;
    memset(&bp, 0, sizeof bp);
    mq_measure_opts mo = mq_measure_defaults();
    static mq_measurement m;
    for (int i = 0; i < n; i++) {
        if (i == 0 || memcmp(&js[i].p, &js[i - 1].p, sizeof js[i].p)) {
            mq_bench_problem_free(&bp);
            memset(&bp, 0, sizeof bp);
            if (mq_bench_problem_setup(&bp, &js[i].p, 1, NULL, 0, &e)) {
                CHECK(0, "set up: %s", e.msg);
                break;
            }
        }
        mq_measure(b, &bp, &js[i].c, &lim, &mo, &m);
        char name[128];
        mq_candidate_str(&js[i].c, name, sizeof name);
        CHECK(!strcmp(m.status, "verified"),
              "expected %s M=%d N=200 K=%d %s on the executor to match the reference: %s %s",
              mq_format_name(js[i].p.format), js[i].p.M, js[i].p.K, name, m.status, m.error);
        if (!strcmp(m.status, "verified")) {
            ok++;
            if ((int)js[i].c.variant < 64)
                per_vf[js[i].c.variant][js[i].p.format]++;
        }
    }
    mq_bench_problem_free(&bp);
    mq_backend_close(b);
    for (int v = 0; v < mq_variant_count() && v < 64; v++)
        for (int f = 0; f < MQ_FMT_COUNT; f++)
            if (mq_variant_serves((mq_variant)v, (mq_format)f))
                CHECK(per_vf[v][f] >= 3, "expected %s on %s executed on several tiles and Ms, got %d",
                      mq_variant_get((mq_variant)v)->name, mq_format_name((mq_format)f),
                      per_vf[v][f]);
    printf("msl-cpu: %d programs compiled (%.1f s), %d launches of %d executed and verified "
           "(%.1f s)\n",
           np, t1 - t0, ok, n, mq_now() - t1);
}

static void planted(const char *what, const char *file, const char *from, const char *to,
                    mq_format fmt, int M, mq_candidate c, const char *status, const char *needle)
{
    char dir[64];
    int rc = td_planted_dir(file, from, to, dir, sizeof dir);
    CHECK(rc == 0, "expected to plant %s in metal/%s", what, file);
    setenv("MQ_METAL_DIR", dir, 1);
    mq_chip chip;
    char err[512];
    mq_backend_opts bo = {1};
    mq_error e;
    mq_backend *b = mq_backend_msl_cpu_open(&bo, &e);
    if (rc == 0 && b && !mq_chip_load_named(mq_chips_default_path(), "m4max", &chip, err, sizeof err)) {
        mq_limits lim = chip.lim;
        mq_problem p = {fmt, M, 200, 384, 64};
        mq_bench_problem bp;
        memset(&bp, 0, sizeof bp);
        mq_measure_opts mo = mq_measure_defaults();
        static mq_measurement m;
        if (mq_bench_problem_setup(&bp, &p, 1, NULL, 0, &e) == 0) {
            mq_measure(b, &bp, &c, &lim, &mo, &m);
            CHECK(!strcmp(m.status, status) && (!needle || strstr(m.error, needle)),
                  "expected %s to be %s%s%s, got %s: %s", what, status, needle ? " naming " : "",
                  needle ? needle : "", m.status, m.error);
        }
        mq_bench_problem_free(&bp);
    }
    mq_backend_close(b);
    unsetenv("MQ_METAL_DIR");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {
    }
}

static void test_planted(void)
{
    mq_candidate fp4_2d = {MQ_VAR_MARLIN_FP4, {64, 64, 32, 0, 1}};
    mq_candidate striped = {MQ_VAR_MARLIN_FP4_STRIPED, {64, 64, 32, 0, 1}};
    mq_candidate fused_u4 = {MQ_VAR_FUSED_U4, {64, 64, 32, 0, 1}};
    mq_candidate fused_fp4 = {MQ_VAR_FUSED_FP4, {32, 64, 32, 0, 1}};
    mq_candidate gemv = {MQ_VAR_GEMV_DECODE, {4, 32, 128, 0, 1}};
    planted("a decode reduction that skips the lanes along K", "mq_gemv.h",
            "for (uint off = uint(GEMV_LN); off < 32u; off *= 2u)",
            "for (uint off = 32u; off < 32u; off *= 2u)", MQ_FMT_U4, 3, gemv, "wrong", NULL);
    planted("a decode that reads the scale of the wrong column", "mq_gemv.h",
            "sh[int(c / 2u)] >> (16u * (c % 2u))", "sh[int(c / 2u)] >> (16u * ((c + 1u) % 2u))",
            MQ_FMT_FP4, 1, gemv, "wrong", NULL);
    planted("a wrong nibble order", "mq_metal.h", "(word >> (4u * i))", "(word >> (4u * (i ^ 1u)))",
            MQ_FMT_FP4, 17, fp4_2d, "wrong", NULL);
    planted("an off-by-one that drops the last K row of a word (u4, fused)", "mq_fused.h",
            "v1 = mq_u4_to_half(", "v1 = j == 6u ? half(0.0h) : mq_u4_to_half(", MQ_FMT_U4, 3,
            fused_u4, "wrong", NULL);
    planted("a fused sub-tile that fetches the next column block's neighbour", "mq_fused.h",
            "(last_col ? 0u : (ni + 1u) * 8u)", "(last_col ? 0u : ni * 8u)", MQ_FMT_FP4, 17,
            fused_fp4, "wrong", NULL);
    planted("a missing barrier between staging and multiplying", "marlin_gemm_fp4_striped.metal",
            "p, tid);\n            threadgroup_barrier(mem_flags::mem_threadgroup);\n", "p, tid);\n",
            MQ_FMT_FP4, 17, striped, "wrong", NULL);
    planted("a register-staged tile stored into the buffer being multiplied", "marlin_gemm_fp4.metal",
            "mq_put_a(As[cur ^ 1u]", "mq_put_a(As[cur]", MQ_FMT_FP4, 17, fp4_2d, "wrong", NULL);
    planted("a store past M on a ragged tile", "mq_metal.h", "if (r < M && c < N) {",
            "if (c < N) {", MQ_FMT_FP4, 17, fp4_2d, "error", "out of bounds");
    planted("threadgroup memory over 32 KB", "mq_metal.h",
            "#define MQ_STAGED_SMEM(TILE_HALVES) MQ_MAX((TILE_HALVES), SIMDGROUPS * 128)",
            "#define MQ_STAGED_SMEM(TILE_HALVES) (MQ_MAX((TILE_HALVES), SIMDGROUPS * 128) + 16384)",
            MQ_FMT_FP4, 17, fp4_2d, "error", "does not compile"); /* 32 KB and the plan */
}

int main(void)
{
    if (!mkdtemp(cache)) {
        perror("mkdtemp");
        return 2;
    }
    copts.cache_dir = cache;
    setenv("MQ_MSL_CACHE", cache, 1);
    if (!mq_msl_cxx(NULL)) {
        CHECK(0, "expected a C++ compiler for the executor (make deps installs clang)");
        return check_done("msl_exec");
    }
    test_layout();
    test_mma();
    if (system("command -v g++ >/dev/null 2>&1") == 0) {
        /* the other compiler the executor falls back to: its preprocessed
         * text puts line markers inside declarations */
        copts.cxx = "g++";
        test_layout();
        test_mma();
        test_simd();
        copts.cxx = NULL;
    }
    test_simd();
    test_half();
    test_threadgroup_memory();
    test_threadgroup_declarators();
    test_faults();
    test_zero_reduction();
    test_probe_mma16();
    test_real_kernels();
    test_planted();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd)) {
    }
    return check_done("msl_exec");
}
