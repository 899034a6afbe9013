/* test_cuda_prelude.c - the cuda backend as far as a machine without CUDA
 * allows (CI): every distinct legal program of the NVIDIA chips (h100,
 * h200: each MSL kernel with the tuned macros of every legal candidate),
 * turned into CUDA exactly as the backend hands it to NVRTC
 * (mq_cuda_source), passes clang's CUDA front end against
 * backends/cuda/metal_stdlib with no CUDA toolkit (-nocudainc -nocudalib,
 * device side only); one program per kernel file is compiled on to PTX; the
 * MMA probes' PTX shows each mapping (mq_probe_mma16: weight fragments
 * filled in the tensor cores' layout, mma.sync.m16n8k16, no shuffle); a
 * planted typo fails; half literals and threadgroup arrays are translated;
 * the backend reports itself unavailable without a driver and "auto" falls
 * back saying so; NVIDIA device names map to their chips. NVRTC itself
 * compiles a covering subset of the same programs to sm_90 cubins in
 * tests/test_nvrtc.c (where the toolkit is installed); the GPU runs only in
 * make test-gpu (tests/gpu_cuda.c). Under make sanitize and make portable
 * ($MQ_TEST_REPEAT) every program's CUDA text is still made, and clang
 * compiles a covering subset (mq_test_subset), saying so as skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "chips.h"
#include "cuda_module.h"
#include "msl_exec.h"
#include "msl_program.h"
#include "space.h"
#include "testdata.h"

/* clang's CUDA mode, device side, no toolkit */
#define CUDA_CXX                                                                                \
    "clang++ -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -nocudainc -nocudalib -std=c++17 " \
    "-Wno-unknown-cuda-version -Wno-unknown-attributes -isystem "

/* Compile one CUDA text (mode: -fsyntax-only or -S to PTX); the exit status
 * and the first error line. */
static int compile_one(const char *cu, const char *defines, const char *mode, const char *out,
                       char *first, size_t n)
{
    char path[] = "/tmp/mq-cuda-one-XXXXXX", cmd[2048];
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    fputs(cu, f);
    fclose(f);
    char script[64];
    snprintf(script, sizeof script, "%s.cmd", path);
    FILE *c = fopen(script, "w");
    if (!c)
        return -1;
    fprintf(c, CUDA_CXX "%s %s", mq_cuda_include_dir(), mode);
    mq_test_define_flags(c, defines);
    fprintf(c, " -o %s %s > %s.log 2>&1\n", out ? out : "/dev/null", path, path);
    fclose(c);
    snprintf(cmd, sizeof cmd, "sh %s", script);
    int st = system(cmd);
    snprintf(cmd, sizeof cmd, "%s.log", path);
    FILE *l = fopen(cmd, "r");
    char line[512];
    first[0] = 0;
    while (l && fgets(line, sizeof line, l))
        if (strstr(line, "error")) {
            line[strcspn(line, "\n")] = 0;
            snprintf(first, n, "%s", line);
            break;
        }
    if (l)
        fclose(l);
    unlink(cmd);
    unlink(path);
    unlink(script);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The lane MoE block's two kernels (metal/lane_trellis_moe.metal) as
 * their dispatches' defines give them, under h100's limits (staged) and
 * Apple's (registers). */
static void lane_moe_compiles(const mq_moe_problem *mp, const mq_moe_weights *mw)
{
    mq_chip chip;
    char err[1024], first[1024];
    if (mq_chip_load_named(mq_chips_default_path(), "h100", &chip, err, sizeof err)) {
        CHECK(0, "h100: %s", err);
        return;
    }
    const mq_limits apple = mq_limits_default();
    const mq_limits *lims[2] = {&chip.lim, &apple};
    mq_moe_candidate c;
    memset(&c, 0, sizeof c);
    c.inner.variant = MQ_VAR_LANE_TRELLIS;
    c.inner.p = (mq_params){8, 64, 128, 0, 1};
    c.i_split = 2;
    for (int l = 0; l < 2; l++) {
        mq_msl_moe_plan plan;
        mq_error e;
        CHECK(mq_msl_moe_plan_of(mp, mw, &c, lims[l], &plan, &e) == MQ_OK && plan.nd == 4,
              "expected the lane block 8x64x128 planned, four dispatches: %s", e.msg);
        for (int d = MQ_MSL_MOE_LANE_GATE_UP; d <= MQ_MSL_MOE_LANE_DOWN && plan.nd == 4; d++) {
            mq_cuda_kernel ks[MQ_CUDA_MAX_KERNELS];
            int nks = 0;
            char *cu = mq_cuda_source(MQ_MSL_MOE_LANE_FILE, NULL, plan.d[d].defines, ks, &nks,
                                      err, sizeof err);
            CHECK(cu && nks == 2 &&
                      compile_one(cu, plan.d[d].defines, "-fsyntax-only", NULL, first,
                                  sizeof first) == 0,
                  "expected lane_trellis_moe.metal (%s) as 2 CUDA entries that compile (got "
                  "%d): %s",
                  plan.d[d].defines, nks, cu ? first : err);
            free(cu);
        }
    }
}

/* Program i's CUDA text into DIR/I.cu, or why not into DIR/I.err. */
static void write_cuda_text(const char *dir, const mq_test_program *p, int i)
{
    char err[1024], path[300];
    mq_cuda_kernel ks[MQ_CUDA_MAX_KERNELS];
    int nks = 0;
    char *cu = mq_cuda_source(p->file, NULL, p->defines, ks, &nks, err, sizeof err);
    int ok = cu && nks > 0;
    snprintf(path, sizeof path, "%s/%d.%s", dir, i, ok ? "cu" : "err");
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(ok ? cu : cu ? "no kernel" : err, f);
        fclose(f);
    }
    free(cu);
}

static void test_every_program(void)
{
    char err[1024];
    static mq_test_program ps[4096];
    int missing = 0;
    int np = mq_test_programs("sm_", ps, 4096, NULL, &missing);
    CHECK(np >= 0 && missing == 0, "expected a program for every legal candidate: %d missing",
          missing);
    CHECK(np >= 300, "expected hundreds of distinct legal programs for h100/h200, got %d", np);
    /* every program's CUDA text, then clang on all of them, a core each;
     * under make sanitize and make portable (mq_test_repeat) every text is
     * still made, by the build under test, and clang, the same whatever the
     * build, compiles mq_test_subset's covering subset (make test: all) */
    static char keep[4096];
    int nc = np > 0 ? np : 0;
    if (mq_test_repeat() && np > 0)
        nc = mq_test_subset(ps, np, keep);
    else
        memset(keep, 1, sizeof keep);
    char dir[] = "/tmp/mq-cuda-sweep-XXXXXX", path[300];
    if (!mkdtemp(dir))
        return;
    /* the texts by a worker per core (each text is preprocessed by clang++
     * -E: one at a time this took a minute); worker w makes w, w + nw, ... */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nw = cores > 1 ? (int)(cores < 8 ? cores : 8) : 1;
    fflush(NULL);
    for (int w = 0; w < nw; w++) {
        pid_t pid = fork();
        if (pid > 0)
            continue;
        for (int i = w; i < np; i += nw)
            write_cuda_text(dir, &ps[i], i);
        if (pid == 0)
            _exit(0);
    }
    while (wait(NULL) > 0)
        ;
    snprintf(path, sizeof path, "%s/cmds", dir);
    FILE *cmds = fopen(path, "w");
    int made = 0;
    const char *ptx_files[16];
    int nptx = 0;
    for (int i = 0; cmds && i < np; i++) {
        snprintf(path, sizeof path, "%s/%d.cu", dir, i);
        int have = access(path, F_OK) == 0;
        err[0] = 0;
        snprintf(path, sizeof path, "%s/%d.err", dir, i);
        FILE *f = have ? NULL : fopen(path, "r");
        if (f) {
            size_t got = fread(err, 1, sizeof err - 1, f);
            err[got] = 0;
            fclose(f);
        }
        CHECK(have, "expected the CUDA source of %s (%s): %s", ps[i].file, ps[i].defines,
              err[0] ? err : "no file written");
        if (!have)
            continue;
        made++;
        /* the first program of each file also goes on to PTX */
        int fi = 0;
        while (fi < nptx && strcmp(ptx_files[fi], ps[i].file))
            fi++;
        const char *mode = "-fsyntax-only";
        if (fi == nptx && nptx < 16) {
            ptx_files[nptx++] = ps[i].file;
            mode = "-O1 -S";
            nc += !keep[i];
        } else if (!keep[i])
            continue;
        fprintf(cmds, CUDA_CXX "%s %s", mq_cuda_include_dir(), mode);
        mq_test_define_flags(cmds, ps[i].defines);
        fprintf(cmds, " -o %s/%d.out %s/%d.cu > %s/%d.log 2>&1 || touch %s/%d.bad\n", dir, i, dir,
                i, dir, i, dir, i);
    }
    if (cmds)
        fclose(cmds);
    int bad = mq_test_run_programs(dir, ps, np, "compile as CUDA");
    int ptx_ok = 0;
    for (int i = 0; i < np; i++) { /* the PTX outputs hold the entries */
        snprintf(path, sizeof path, "%s/%d.out", dir, i);
        FILE *f = fopen(path, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f))
            if (strstr(line, ".entry mq_cuda_entry_")) {
                ptx_ok++;
                break;
            }
        if (f)
            fclose(f);
    }
    CHECK(ptx_ok >= nptx && nptx >= 5,
          "expected PTX with a mq_cuda_entry_ kernel for one program of each of the %d files, got "
          "%d",
          nptx, ptx_ok);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd))
        bad++;
    CHECK(bad == 0 && made == np, "expected every program to compile as CUDA: %d of %d failed", bad,
          np);
    printf("cuda prelude: %d of %d distinct legal programs of h100/h200 compiled by clang's CUDA "
           "mode (%d to PTX), %d failed\n",
           nc, np, nptx, bad);
    if (nc < np)
        check_skip(mq_test_repeat(), "clang's CUDA mode on %d of the %d programs (the CUDA text of "
                                     "every one made and checked; clang compiles the same text "
                                     "whatever this build: make test compiles all)",
                   np - nc, np);
}

static void test_translation_and_failure(void)
{
    char err[1024], first[512];
    /* half literals and threadgroup arrays */
    char *t = mq_msl_translate_cuda("threadgroup half s[64]; half x = half(1.5h) + 2h; uint y = 0x1h0;");
    CHECK(t && strstr(t, "__shared__ __attribute__((aligned(16))) half s[64];") &&
              strstr(t, "metal::half(1.5f)") && strstr(t, "metal::half(2.0f)") && strstr(t, "0x1h0"),
          "expected threadgroup arrays as __shared__ and half literals as metal::half(...f): %s",
          t ? t : "(null)");
    free(t);
    /* several arrays in one declaration: each its own __shared__ one */
    t = mq_msl_translate_cuda("threadgroup uint a[8], /* rows */ b[2][4] // x\n, c[1]; x;");
    CHECK(t && strstr(t, "__shared__ __attribute__((aligned(16))) uint a[8];") &&
              strstr(t, "__shared__ __attribute__((aligned(16))) uint b[2][4];") &&
              strstr(t, "__shared__ __attribute__((aligned(16))) uint c[1];"),
          "expected `threadgroup uint a[8], /* rows */ b[2][4] // x\n, c[1];` as three "
          "__shared__ arrays: %s",
          t ? t : "(null)");
    free(t);
    /* a pointer among them would leave the arrays after it one per thread:
     * the compile stops, saying why */
    t = mq_msl_translate_cuda("threadgroup uint a[8], *q, b[4]; x;");
    CHECK(t && strstr(t, "__shared__ __attribute__((aligned(16))) uint a[8];") &&
              strstr(t, "static_assert(false, \"a threadgroup declaration of arrays and other"),
          "expected `threadgroup uint a[8], *q, b[4];` to stop the compile with a "
          "static_assert: %s",
          t ? t : "(null)");
    free(t);
    /* the check can fail: a typo in a kernel */
    char *src = mq_metal_source("marlin_gemm_fused.metal", err, sizeof err);
    if (src) {
        char *at = strstr(src, "simdgroup_multiply_accumulate(acc");
        if (at)
            memcpy(at, "simdgroup_multiply_acumulate ", 29);
        mq_cuda_kernel ks[MQ_CUDA_MAX_KERNELS];
        int nks;
        char *cu = at ? mq_cuda_source("marlin_gemm_fused.metal", src, "", ks, &nks, err, sizeof err)
                      : NULL;
        CHECK(cu && compile_one(cu, "", "-fsyntax-only", NULL, first, sizeof first) != 0 &&
                  strstr(first, "acumulate"),
              "expected a planted typo to fail the CUDA compile, naming it: %s", cu ? first : err);
        free(cu);
        free(src);
    }
    /* and a program that passes passes here too, to PTX */
    mq_cuda_kernel ks[MQ_CUDA_MAX_KERNELS];
    int nks = 0;
    char *cu = mq_cuda_source("marlin_zero_reduction.metal", NULL, "", ks, &nks, err, sizeof err);
    CHECK(cu && nks == 1 && !strcmp(ks[0].name, "marlin_zero_reduction") && ks[0].used == 3u &&
              compile_one(cu, "", "-O1 -S", NULL, first, sizeof first) == 0,
          "expected marlin_zero_reduction as one CUDA entry binding buffers 0 and 1: %s",
          cu ? first : err);
    free(cu);
    /* the MoE block (no GEMM candidate names it): every width, each tile_n with
     * another row count and simdgroup count (test_metal compiles its whole
     * space; NVRTC compiles them in test_nvrtc and on the GPU) */
    static const int rows[] = {1, 16, 8, 2, 4};
    for (int bits = 2; bits <= 4; bits++) {
        mq_moe_problem mp = {(mq_format)(MQ_FMT_TRELLIS2 + bits - 2), 1, 2048, 768, 8, 2, 128};
        mq_moe_weights mw;
        mq_error e;
        if (mq_moe_weights_alloc(&mw, &mp, &e)) {
            CHECK(0, "MoE weights: %s", e.msg);
            continue;
        }
        for (int t = 0; t < 4; t++) {
            int tn = 16 << t, sgs = 1 << ((t + bits) % 4);
            mq_moe_candidate c;
            memset(&c, 0, sizeof c);
            c.inner.variant = MQ_VAR_GEMV_TRELLIS;
            c.inner.p = (mq_params){rows[(t + bits) % 5], tn, 8 * (32 / (tn / 4)) * sgs, 0, 1};
            c.i_split = 1;
            c.fuse_gate_up = 1;
            mq_msl_moe_plan plan;
            /* the next simdgroup count where this one is illegal (threadgroup
             * memory, or tile_k under 16 at tile_n 128) */
            for (int i = 0; i < 4 && mq_msl_moe_plan_of(&mp, &mw, &c, NULL, &plan, &e); i++)
                c.inner.p.tile_k = 8 * (32 / (tn / 4)) * (1 << ((t + bits + i + 1) % 4));
            CHECK(mq_msl_moe_plan_of(&mp, &mw, &c, NULL, &plan, &e) == MQ_OK,
                  "expected tile_m=%d tile_n=%d legal with some simdgroup count: %s",
                  c.inner.p.tile_m, tn, e.msg);
            cu = mq_cuda_source(MQ_MSL_MOE_FILE, NULL, plan.defines, ks, &nks, err, sizeof err);
            /* the 4 dispatches of the fused block and the unfused baseline's 3 */
            CHECK(cu && nks == 7 &&
                      compile_one(cu, plan.defines, "-fsyntax-only", NULL, first,
                                  sizeof first) == 0,
                  "expected gemm_trellis_moe.metal (%s) as 7 CUDA entries that compile (got "
                  "%d): %s",
                  plan.defines, nks, cu ? first : err);
            free(cu);
        }
        lane_moe_compiles(&mp, &mw);
        mq_moe_weights_free(&mw);
    }
}

/* The MMA probes' two mappings (clang -O3 PTX for sm_80, a proxy for
 * NVRTC's). mq_probe_mma: FP16 simdgroup products on the tensor cores by
 * default (mma.sync in the PTX), on the FP32 units (no mma, FMAs) when the
 * backend defines MQ_CUDA_MMA_FP32 (MQ_CUDA_MMA=fp32). mq_probe_mma16 (the
 * fragment helpers of mq_metal.h): on the tensor cores its 16 weight
 * fragments filled by MQ_FRAG_FILL and its transposed B loads feed exactly
 * 3 mma.sync.m16n8k16 and 2 m16n8k8 (its K16 steps) with no shuffle at all,
 * before its store or after, and no local memory; with MQ_CUDA_MMA_FP32 no
 * mma and FMAs. Counted per entry (the PTX holds both). */
typedef struct {
    int k8, k16, fma, shfl, shfl_before_store, local;
} ptx_counts;

static void count_entry(const char *ptx, const char *entry, ptx_counts *c)
{
    memset(c, 0, sizeof *c);
    FILE *f = fopen(ptx, "r");
    char line[512];
    int in = 0, stored = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strstr(line, ".entry "))
            in = strstr(line, entry) != NULL;
        if (!in)
            continue;
        c->k8 += strstr(line, "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32") != NULL;
        c->k16 += strstr(line, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") != NULL;
        c->fma += strstr(line, "fma.rn.f32") != NULL;
        c->local += strstr(line, "ld.local") || strstr(line, "st.local");
        stored |= strstr(line, "st.global") != NULL;
        if (strstr(line, "shfl.sync")) {
            c->shfl++;
            c->shfl_before_store += !stored;
        }
    }
    if (f)
        fclose(f);
}

static void test_mma_mappings(void)
{
    char err[1024], first[512];
    mq_cuda_kernel ks[MQ_CUDA_MAX_KERNELS];
    int nks = 0;
    char *cu = mq_cuda_source("mq_probe_mma.metal", NULL, "", ks, &nks, err, sizeof err);
    CHECK(cu && nks == 2 && !strcmp(ks[0].name, "mq_probe_mma") && ks[0].used == 7u &&
              !strcmp(ks[1].name, "mq_probe_mma16") && ks[1].used == 7u,
          "expected mq_probe_mma and mq_probe_mma16 as two CUDA entries binding buffers 0, 1 and "
          "2: %s",
          cu ? "" : err);
    if (!cu)
        return;
    static const struct {
        const char *defines;
        int mma;
    } maps[] = {{"", 1}, {"MQ_CUDA_MMA_FP32", 0}};
    for (int i = 0; i < 2; i++) {
        char ptx[] = "/tmp/mq-cuda-ptx-XXXXXX";
        int fd = mkstemp(ptx);
        if (fd < 0)
            continue;
        close(fd);
        int rc = compile_one(cu, maps[i].defines, "-O3 -S", ptx, first, sizeof first);
        ptx_counts p, q;
        count_entry(ptx, "mq_cuda_entry_mq_probe_mma(", &p);
        count_entry(ptx, "mq_cuda_entry_mq_probe_mma16(", &q);
        unlink(ptx);
        CHECK(rc == 0 && (maps[i].mma ? p.k8 > 0 : p.k8 + p.k16 == 0 && p.fma > 0),
              "expected the MMA probe compiled %s to %s, got %d mma.sync and %d fma lines (%s)",
              maps[i].mma ? "by default" : "with MQ_CUDA_MMA_FP32",
              maps[i].mma ? "use the tensor cores (mma.sync m16n8k8)" : "run FMAs and no mma.sync",
              p.k8 + p.k16, p.fma, rc ? first : "compiled");
        if (maps[i].mma)
            CHECK(rc == 0 && q.k16 == 3 && q.k8 == 2 && q.shfl == 0 && q.local == 0,
                  "expected mq_probe_mma16 on the tensor cores as 3 mma.sync.m16n8k16 and 2 "
                  "m16n8k8, no shfl.sync (fragments filled in the A layout, B loaded in its "
                  "own) and no local memory, got %d, %d, %d shfl.sync (%d before the store), %d "
                  "local-memory accesses (%s)",
                  q.k16, q.k8, q.shfl, q.shfl_before_store, q.local, rc ? first : "compiled");
        else
            CHECK(rc == 0 && q.k8 + q.k16 == 0 && q.fma > 0,
                  "expected mq_probe_mma16 with MQ_CUDA_MMA_FP32 to run FMAs and no mma.sync, got "
                  "%d mma.sync and %d fma lines (%s)",
                  q.k8 + q.k16, q.fma, rc ? first : "compiled");
        if (rc == 0 && maps[i].mma)
            printf("cuda prelude: mq_probe_mma16 PTX (clang -O3, sm_80): %d mma.sync.m16n8k16, %d "
                   "m16n8k8, %d shfl.sync, %d local-memory accesses\n",
                   q.k16, q.k8, q.shfl, q.local);
    }
    free(cu);
}

/* The fragment loads of the MMA kernels (clang -O3 PTX for sm_80, a proxy
 * for NVRTC's): a loaded FP16 matrix reads its two tensor-core views, two
 * elements each, and nothing spills to local memory. The prelude before
 * this check read 30 elements per fragment (every view of both mappings,
 * the state a run-time field) and kept the MMA loop out of line with its
 * accumulators in local memory: 5.6-12.3x slower on the H100 at M=512. */
static void test_fragment_loads(void)
{
    static const char *const progs[][2] = {
        {"mlx_qmm_splitk.metal", "TILE_M=64 TILE_N=64 TILE_K=32 SG_M=16 SG_N=16 MQ_TILE_PAD=8"},
        {"marlin_gemm_fp4_striped.metal",
         "TILE_M=128 TILE_N=128 TILE_K=64 SG_M=32 SG_N=32 MQ_TILE_PAD=8"},
    };
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        char err[1024], first[512];
        mq_cuda_kernel ks[MQ_CUDA_MAX_KERNELS];
        int nks = 0;
        char *cu = mq_cuda_source(progs[i][0], NULL, progs[i][1], ks, &nks, err, sizeof err);
        CHECK(cu != NULL, "expected the CUDA source of %s: %s", progs[i][0], err);
        if (!cu)
            continue;
        char ptx[] = "/tmp/mq-cuda-ptx-XXXXXX";
        int fd = mkstemp(ptx);
        if (fd < 0) {
            free(cu);
            continue;
        }
        close(fd);
        int rc = compile_one(cu, progs[i][1], "-O3 -S", ptx, first, sizeof first);
        FILE *f = fopen(ptx, "r");
        char line[512];
        int mma = 0, loads = 0, local = 0;
        while (f && fgets(line, sizeof line, f)) {
            mma += strstr(line, "mma.sync.aligned.m16n8k8") != NULL;
            local += strstr(line, "ld.local") || strstr(line, "st.local");
            /* a fragment's elements: 16-bit loads, or pairs merged into 32 */
            loads += (strstr(line, "ld.shared.u16") || strstr(line, "ld.shared.b16") ||
                      strstr(line, "ld.shared.u32") || strstr(line, "ld.shared.b32") ||
                      strstr(line, "\tld.u16") || strstr(line, "\tld.b16"));
        }
        if (f)
            fclose(f);
        unlink(ptx);
        CHECK(rc == 0 && mma > 0 && local == 0 && loads <= 4 * mma,
              "expected %s (%s) on the tensor cores with at most 4 fragment loads per mma.sync "
              "and no local memory, got %d mma.sync, %d loads, %d local-memory accesses (%s)",
              progs[i][0], progs[i][1], mma, loads, local, rc ? first : "compiled");
        free(cu);
    }
}

/* In a PTX file: the shfl.sync and mma.sync lines inside loops (between a
 * label and a later branch back to it), to *shfl and *mma; -1 when the file
 * cannot be read. */
static int ptx_loop_counts(const char *path, int *shfl, int *mma)
{
    enum { MAXL = 200000 };
    FILE *f = fopen(path, "r");
    char **lines = calloc(MAXL, sizeof *lines);
    unsigned char *in = calloc(MAXL, 1);
    int n = 0;
    char line[512];
    while (f && lines && in && n < MAXL && fgets(line, sizeof line, f))
        lines[n++] = strdup(line);
    if (f)
        fclose(f);
    *shfl = *mma = 0;
    for (int j = 0; lines && in && j < n; j++) {
        const char *b = lines[j] ? strstr(lines[j], "bra") : NULL;
        char target[128];
        if (!b || sscanf(b, "bra%*[.a-z] %127[^;]", target) != 1)
            if (!b || sscanf(b, "bra %127[^;]", target) != 1)
                continue;
        size_t tl = strlen(target);
        for (int i = 0; i < j; i++) /* a label before the branch: a loop i..j */
            if (lines[i] && !strncmp(lines[i], target, tl) && lines[i][tl] == ':') {
                memset(in + i, 1, (size_t)(j - i + 1));
                break;
            }
    }
    for (int i = 0; lines && in && i < n; i++) {
        if (in[i] && lines[i]) {
            *shfl += strstr(lines[i], "shfl.sync") != NULL;
            *mma += strstr(lines[i], "mma.sync") != NULL;
        }
        free(lines[i]);
    }
    int ok = f && lines && in;
    free(lines);
    free(in);
    return ok ? 0 : -1;
}

/* The lane kernel (metal/mq_lane.h) on the tensor cores (clang -O3 PTX for
 * sm_80, a proxy for NVRTC's): its fragments filled in the tensor cores'
 * register order (MQ_FRAG_FILL) feed mma.m16n8k16 directly, so the K loop
 * (found as the code between a label and a branch back to it, holding the
 * MMAs) has no shuffle: the only shfl.sync are the epilogue's conversions of
 * the accumulators to Apple's layout, and nothing spills to local memory. */
static void test_lane_ptx(void)
{
    /* lane_gemm (fp4 and u4: two kernels) and lane_trellis (one kernel,
     * whose 32-K scales go on the accumulators' own tensor-core pairs,
     * mq_acc_add_scaled: no shuffle either) */
    static const struct {
        const char *file, *defs;
        int tm, kernels;
    } progs[] = {
        {"lane_gemm.metal", "TILE_M=32 TILE_N=64 TILE_K=128 SG_M=8 SG_N=32 MQ_TILE_PAD=8", 32, 2},
        {"lane_gemm.metal", "TILE_M=16 TILE_N=32 TILE_K=64 SG_M=8 SG_N=32 MQ_TILE_PAD=8", 16, 2},
        {"lane_trellis.metal",
         "TILE_M=16 TILE_N=64 TILE_K=256 SG_M=8 SG_N=32 MQ_TILE_PAD=8 TRELLIS_BITS=3", 16, 1},
    };
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        char err[1024], first[512];
        const char *const defs_i = progs[i].defs;
        mq_cuda_kernel ks[MQ_CUDA_MAX_KERNELS];
        int nks = 0;
        char *cu = mq_cuda_source(progs[i].file, NULL, defs_i, ks, &nks, err, sizeof err);
        CHECK(cu != NULL, "expected the CUDA source of %s: %s", progs[i].file, err);
        if (!cu)
            continue;
        char ptx[] = "/tmp/mq-cuda-ptx-XXXXXX";
        int fd = mkstemp(ptx);
        if (fd < 0) {
            free(cu);
            continue;
        }
        close(fd);
        int rc = compile_one(cu, defs_i, "-O3 -S", ptx, first, sizeof first);
        FILE *f = fopen(ptx, "r");
        char line[512];
        int mma16 = 0, mma8 = 0, shfl = 0, local = 0;
        while (f && fgets(line, sizeof line, f)) {
            mma16 += strstr(line, "mma.sync.aligned.m16n8k16") != NULL;
            mma8 += strstr(line, "mma.sync.aligned.m16n8k8") != NULL;
            shfl += strstr(line, "shfl.sync") != NULL;
            local += strstr(line, "ld.local") || strstr(line, "st.local");
        }
        if (f)
            fclose(f);
        int loop_shfl = 0, loop_mma = 0;
        int lrc = ptx_loop_counts(ptx, &loop_shfl, &loop_mma);
        unlink(ptx);
        CHECK(rc == 0 && lrc == 0 && loop_mma > 0 && loop_shfl == 0,
              "expected the K loop of %s (%s) with its MMAs and no shfl.sync, got %d mma.sync "
              "and %d shfl.sync inside loops (%s)",
              progs[i].file, defs_i, loop_mma, loop_shfl,
              rc ? first : lrc ? "PTX unreadable" : "compiled");
        /* per kernel 2 x 2 x tile_m/8 accumulators, read where the first K
         * share stores them and where the others leave theirs, each
         * element's read a conversion to Apple's layout (2 shuffles): 8 per
         * accumulator; the K loop has none (a shuffle per MMA would be 16
         * per accumulator and K tile) */
        int shfl_max = progs[i].kernels * 2 * 2 * (progs[i].tm / 8) * 8;
        CHECK(rc == 0 && mma16 > 0 && mma8 == 0 && local == 0 && shfl <= shfl_max,
              "expected %s (%s) on mma.m16n8k16 only, no local memory and at most %d "
              "shfl.sync (the epilogue's), got %d m16n8k16, %d m16n8k8, %d shfl.sync, %d "
              "local-memory accesses (%s)",
              progs[i].file, defs_i, shfl_max, mma16, mma8, shfl, local,
              rc ? first : "compiled");
        free(cu);
    }
}

/* MQ_CUDA_MIN_BLOCKS: the entries' launch bounds ask for that many blocks
 * an SM; a value that is not 1-32 is refused, naming it. */
static void test_min_blocks(void)
{
    static const struct {
        const char *value, *want;
    } rows[] = {
        {"2", "__launch_bounds__(MQ_PLAN_THREADS, 2)"},
        {"abc", "MQ_CUDA_MIN_BLOCKS='abc' is not a whole number from 1 to 32"},
        {"0", "MQ_CUDA_MIN_BLOCKS='0'"},
        {"33", "MQ_CUDA_MIN_BLOCKS='33'"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char err[512] = "";
        mq_cuda_kernel ks[MQ_CUDA_MAX_KERNELS];
        int nks = 0;
        setenv("MQ_CUDA_MIN_BLOCKS", rows[i].value, 1);
        char *cu = mq_cuda_source("marlin_gemm_fused.metal", NULL, "", ks, &nks, err, sizeof err);
        CHECK(i == 0 ? cu && strstr(cu, rows[i].want) : !cu && strstr(err, rows[i].want),
              "expected MQ_CUDA_MIN_BLOCKS=%s to give '%s', got %s: %s", rows[i].value,
              rows[i].want, cu ? "a source" : "no source", err);
        free(cu);
    }
    unsetenv("MQ_CUDA_MIN_BLOCKS");
}

static void test_unavailable(void)
{
    mq_error e;
    setenv("MQ_CUDA_LIB", "/nonexistent/libcuda.so.1", 1);
    mq_backend_opts bo = {1};
    mq_backend *b = mq_backend_cuda_open(&bo, &e);
    CHECK(!b && strstr(e.msg, "unavailable:"), "expected cuda unavailable without a driver, got %s",
          b ? "a backend" : e.msg);
    mq_backend_close(b);
    b = mq_backend_open("cuda", &bo, NULL, 0, &e);
    CHECK(!b && strstr(e.msg, "cuda: unavailable"), "expected --backend cuda to say why: %s",
          e.msg);
    char note[1024];
    b = mq_backend_open("auto", &bo, note, sizeof note, &e);
    CHECK(b && !strcmp(b->name, "cpu") && strstr(note, "cuda: unavailable"),
          "expected auto to fall back to the CPU model, saying cuda is unavailable: %s", note);
    mq_backend_close(b);
    unsetenv("MQ_CUDA_LIB");
    /* NVIDIA device names are chips */
    mq_chip_db db;
    char err[512];
    mq_chip c;
    if (mq_chips_load(mq_chips_default_path(), &db, err, sizeof err)) {
        CHECK(0, "chips: %s", err);
        return;
    }
    int rc = mq_chip_from_device(&db, "NVIDIA H100 80GB HBM3", "sm_90", 0, &c, err, sizeof err);
    CHECK(rc == 0 &&
              !strcmp(c.name, "h100") && c.v[MQ_CHIP_GPU_CORES] == 132 &&
              c.v[MQ_CHIP_TG_MEM_PER_CORE_BYTES] > c.v[MQ_CHIP_TG_MEM_BYTES],
          "expected 'NVIDIA H100 80GB HBM3' to be h100 with 132 SMs: %s", err);
    CHECK(mq_chip_from_device(&db, "NVIDIA H200", "sm_90", 0, &c, err, sizeof err) == 0 &&
              !strcmp(c.name, "h200"),
          "expected 'NVIDIA H200' to be h200: %s", err);
    rc = mq_chip_from_device(&db, "NVIDIA A100-SXM4-80GB", "sm_80", 0, &c, err, sizeof err);
    CHECK(rc != 0 &&
              strstr(err, "not in the chips file"),
          "expected an undescribed GPU to be refused, naming it: %s", err);
    rc = mq_chip_from_device(&db, "Apple M4 Max", "applegpu_g16s", 0, &c, err, sizeof err);
    CHECK(rc == 0 &&
              !strcmp(c.name, "m4max") && c.v[MQ_CHIP_TG_MEM_PER_CORE_BYTES] == 0,
          "expected Apple names to map as before, optional fields 0: %s", err);
    mq_chips_free(&db);
}

int main(void)
{
    CHECK(system("command -v clang++ >/dev/null 2>&1") == 0,
          "expected clang++ for the CUDA check (make deps installs clang)");
    test_translation_and_failure();
    test_mma_mappings();
    test_fragment_loads();
    test_lane_ptx();
    test_min_blocks();
    test_unavailable();
    test_every_program();
    return check_done("cuda_prelude");
}
