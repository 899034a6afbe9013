/* gpu_cuda.c - the GPU tests (make test-gpu), for a machine with an NVIDIA
 * GPU, the CUDA driver and NVRTC; CI has none and never runs it. Through
 * the harness, like every backend: every variant x format on the
 * representative candidates of the device's chip (the smallest, seed and
 * largest tiles, split_k 1, 2 and 3 where the variant splits), on ragged
 * and layer-sized shapes, each verified against the float64 reference on
 * the GPU; one candidate per variant also timed (CUDA events, a positive
 * time, no failed repetition); the probes measure a bandwidth and a peak
 * that a GPU can have; the fragment helpers of mq_metal.h (mq_probe_mma16:
 * weights filled into the tensor cores' A layout, mma.sync.m16n8k16) equal a
 * host product bit for bit on both mappings; a planted defect (a kernel
 * writing one column short) is caught as wrong. Exit 0 when all pass, 1 on a failure, 2 when
 * there is no GPU to test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* mkdtemp: macOS declares it here only */

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "backend.h"
#include "check.h"
#include "chips.h"
#include "cuda_state.h"
#include "measure.h"
#include "msl_program.h"
#include "probes.h"
#include "testdata.h"

/* The MoE block on the GPU: synthetic weights, each run against the
 * float64 reference within its bound (every output: NaN-poisoned first);
 * then real models' decode steps timed (the device's time of the three
 * dispatches, median of 20 over 8 routings cycled, the best of a few rows
 * per pass and intermediate splits) and their rate over the touched
 * experts' bytes against the read probe. */
static void moe_checks(mq_backend *b, double read_gbs, const mq_limits *lim)
{
    static const struct {
        mq_moe_problem p;
        int rows, split, parts; /* parts: the lane block's gate/up K parts */
        mq_route_kind route;
    } cases[] = {
        {{MQ_FMT_TRELLIS3, 1, 256, 384, 8, 2, 128}, 1, 1, 1, MQ_ROUTE_UNIFORM},
        {{MQ_FMT_TRELLIS3, 1, 256, 384, 8, 2, 128}, 8, 3, 2, MQ_ROUTE_UNIFORM},
        {{MQ_FMT_TRELLIS2, 13, 256, 384, 6, 3, 64}, 8, 2, 2, MQ_ROUTE_ZIPF},
        {{MQ_FMT_TRELLIS4, 20, 256, 384, 4, 1, 128}, 16, 3, 1, MQ_ROUTE_ONE},
        {{MQ_FMT_TRELLIS3, 70, 2880, 2880, 32, 4, 128}, 8, 4, 4, MQ_ROUTE_UNIFORM},
    };
    mq_error e;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const mq_moe_problem *p = &cases[ci].p;
        mq_moe_weights mw;
        if (mq_moe_weights_alloc(&mw, p, &e)) {
            CHECK(0, "MoE weights: %s", e.msg);
            continue;
        }
        mq_moe_weights_fill_random(&mw, 7 + ci);
        size_t R = (size_t)p->tokens * p->top_k, on = (size_t)p->tokens * p->hidden;
        uint16_t *x = malloc(on * 2);
        int32_t *ids = malloc(R * 4);
        float *pr = malloc(R * 4), *out = malloc(on * 4);
        double *ref = malloc(on * 8), *bound = malloc(on * 8);
        td_fill_activations(x, p->tokens, p->hidden, 11 + (uint32_t)ci);
        mq_moe_routing_generate(p, cases[ci].route, 1.5, 13 + ci, ids, pr, &e);
        mq_moe_reference(p, &mw, x, ids, pr, ref, bound, &e);
        mq_moe_candidate c = mq_moe_default_candidate(p, 1);
        c.inner.p.tile_m = cases[ci].rows;
        c.i_split = cases[ci].split;
        mq_msl_moe_plan plan; /* fewer simdgroups where the partials do not fit */
        while (mq_msl_moe_plan_of(p, &mw, &c, NULL, &plan, NULL) == MQ_E_ILLEGAL && c.inner.p.tile_k > 32)
            c.inner.p.tile_k /= 2;
        int st = b->run_moe(b, p, &mw, x, ids, pr, out, &c, NULL, &e);
        double worst = 0;
        long bad = st ? 0 : td_outside(out, ref, bound, on, &worst);
        CHECK(st == 0 && bad == 0,
              "expected gemm_trellis_moe on the GPU (%s, %d tokens, %d experts, top %d, %d rows a "
              "pass, i_split %d) within the bound: %s%ld outside, worst %.3f of it",
              mq_format_name(p->format), p->tokens, p->experts, p->top_k, cases[ci].rows,
              cases[ci].split, st ? e.msg : "", bad, worst);
        printf("gpu_cuda: moe %s %d tokens: %s, worst %.3f of the bound\n",
               mq_format_name(p->format), p->tokens, st ? "error" : bad ? "WRONG" : "ok", worst);
        /* the lane block (the chip's staged plan) against the FP16-level bound */
        double *bound_h = malloc(on * 8), *ref_h = malloc(on * 8);
        mq_moe_reference_arith(p, &mw, x, ids, pr, MQ_MOE_HALF_WEIGHTS, ref_h, bound_h, &e);
        mq_moe_candidate lc;
        memset(&lc, 0, sizeof lc);
        lc.inner.variant = MQ_VAR_LANE_TRELLIS;
        lc.inner.p = (mq_params){cases[ci].rows > 8 ? 16 : 8, 64, 128, 0, cases[ci].parts};
        lc.i_split = cases[ci].split;
        st = b->run_moe(b, p, &mw, x, ids, pr, out, &lc, lim, &e);
        worst = 0;
        bad = st ? 0 : td_outside(out, ref_h, bound_h, on, &worst);
        CHECK(st == 0 && bad == 0,
              "expected the lane block on the GPU (%s, %d tokens, i_split %d, gate/up in %d "
              "parts) within its bound: %s%ld outside, worst %.3f of it",
              mq_format_name(p->format), p->tokens, lc.i_split, cases[ci].parts,
              st ? e.msg : "", bad, worst);
        printf("gpu_cuda: moe lane %s %d tokens, gate/up in %d parts: %s, worst %.3f of the "
               "bound\n",
               mq_format_name(p->format), p->tokens, cases[ci].parts,
               st ? "error" : bad ? "WRONG" : "ok", worst);
        /* the unfused baseline's launches against the FP16-intermediate bound */
        mq_moe_reference_arith(p, &mw, x, ids, pr, MQ_MOE_HALF_WEIGHTS | MQ_MOE_HALF_STORES, ref_h,
                               bound_h, &e);
        st = b->run_moe_unfused(b, p, &mw, x, ids, pr, out, NULL, &e);
        worst = 0;
        bad = st ? 0 : td_outside(out, ref_h, bound_h, on, &worst);
        CHECK(st == 0 && bad == 0,
              "expected the unfused baseline on the GPU (%s, %d tokens) within its bound: %s%ld "
              "outside, worst %.3f of it",
              mq_format_name(p->format), p->tokens, st ? e.msg : "", bad, worst);
        printf("gpu_cuda: moe unfused %s %d tokens: %s, worst %.3f of the bound\n",
               mq_format_name(p->format), p->tokens, st ? "error" : bad ? "WRONG" : "ok", worst);
        free(x), free(ids), free(pr), free(out), free(ref), free(bound), free(bound_h), free(ref_h);
        mq_moe_weights_free(&mw);
    }
    (void)read_gbs; /* real models' steps are timed by moe-bench --backend cuda */
}

/* mq_probe_mma16 (metal/mq_probe_mma.metal, its buffers defined there) on
 * the GPU, with the backend's mapping and with MQ_CUDA_MMA_FP32: lane-major
 * codes dequantized into fragments (MQ_FRAG_LANE, MQ_FRAG_FILL), transposed
 * loads, 16x8x16 and 16x8x8 steps, C^T stored; equal to the host product
 * (small integers: every summation order is exact), every element written
 * (the output starts NaN). The host product reads the codes through Apple's
 * lane layout (MLX steel's get_coord), as tests/test_msl_exec.c does. */
static void probe16_checks(mq_backend *b)
{
    cuda_state *s = b->state;
    uint32_t codes[128];
    uint16_t act[8 * 64];
    float ref[16][8], out[16][8];
    td_probe16_inputs(codes, act, ref);
    static const char *const maps[] = {"", "MQ_CUDA_MMA_FP32"};
    for (int i = 0; i < 2; i++) {
        mq_error e = {0};
        int bad = -1;
        CUdeviceptr buf = 0;
        CUfunction fn;
        CUmodule mod = NULL;
        CUresult r = s->api.CtxSetCurrent(s->ctx);
        if (!r && !(mod = mq_cuda_module_for(s, "mq_probe_mma.metal", maps[i], &e)))
            r = -1;
        if (!r)
            r = s->api.ModuleGetFunction(&fn, mod, "mq_cuda_entry_mq_probe_mma16");
        if (!r)
            r = s->api.MemAlloc(&buf, sizeof codes + sizeof act + sizeof out);
        if (!r)
            r = s->api.MemcpyHtoD(buf, codes, sizeof codes);
        if (!r)
            r = s->api.MemcpyHtoD(buf + sizeof codes, act, sizeof act);
        if (!r) /* NaN: an element no lane stores fails */
            r = s->api.MemsetD8(buf + sizeof codes + sizeof act, 0xff, sizeof out);
        cuda_buffer_args g = {{buf, buf + sizeof codes, buf + sizeof codes + sizeof act}};
        void *args[] = {&g};
        if (!r)
            r = s->api.LaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
        if (!r)
            r = s->api.CtxSynchronize();
        if (!r)
            r = s->api.MemcpyDtoH(out, buf + sizeof codes + sizeof act, sizeof out);
        if (!r) {
            bad = 0;
            for (int n = 0; n < 16; n++)
                for (int m = 0; m < 8; m++)
                    bad += out[n][m] != ref[n][m]; /* NaN differs */
        }
        if (buf)
            s->api.MemFree(buf);
        const char *why = e.msg[0] ? e.msg : "";
        if (r > 0 && s->api.GetErrorString(r, &why))
            why = "a driver error";
        CHECK(r == 0 && bad == 0,
              "expected mq_probe_mma16 on the GPU (%s) to equal the host product C^T = W^T A^T "
              "bit for bit: %s%d of 128 differ",
              i ? "MQ_CUDA_MMA_FP32" : "the backend's mapping", r ? why : "", bad);
        printf("gpu_cuda: mq_probe_mma16 (%s): %s\n", i ? "MQ_CUDA_MMA_FP32" : "default mapping",
               r ? "error" : bad ? "WRONG" : "128 of 128 equal the host product");
    }
}

/* MQ_CUDA_TIMING: a bad value refused by name; queued, a run behind the
 * spin kernel is verified and timed like an idle one, and its device time
 * (the kernel alone) is no longer than the idle run's by more than noise. */
static void timing_checks(const mq_backend_opts *bo, const mq_chip *chip, const mq_limits *lim)
{
    mq_error e;
    setenv("MQ_CUDA_TIMING", "sometimes", 1);
    mq_backend *bad = mq_backend_cuda_open(bo, &e);
    CHECK(!bad && strstr(e.msg, "MQ_CUDA_TIMING must be idle or queued, not 'sometimes'"),
          "expected a bad MQ_CUDA_TIMING refused by name, got %s", bad ? "a backend" : e.msg);
    mq_backend_close(bad);
    double t[2] = {0, 0};
    static const char *const modes[] = {"idle", "queued"};
    mq_problem p = {MQ_FMT_FP4, 16, 4096, 4096, 128};
    mq_candidate c = {MQ_VAR_LANE_GEMM, {16, 64, 64, 0, 4}};
    for (int i = 0; i < 2; i++) {
        setenv("MQ_CUDA_TIMING", modes[i], 1);
        mq_backend *b = mq_backend_cuda_open(bo, &e);
        CHECK(b != NULL, "expected the backend with MQ_CUDA_TIMING=%s: %s", modes[i], e.msg);
        mq_bench_problem bp;
        memset(&bp, 0, sizeof bp);
        mq_measure_opts mo = mq_measure_defaults();
        mo.max_reps = 30;
        mq_measurement m;
        if (b && mq_bench_problem_setup(&bp, &p, 0, NULL, 0, &e) == 0) {
            mq_measure(b, &bp, &c, lim, &mo, &m);
            CHECK(!strcmp(m.status, "ok") && m.st.median > 0,
                  "expected lane_gemm verified and timed with MQ_CUDA_TIMING=%s, got %s %s",
                  modes[i], m.status, m.error);
            /* queued: idle launches after the samples for idle_s; idle: none */
            CHECK(i ? m.idle_s > m.st.median * 0.8 : m.idle_s == 0,
                  "expected idle_s %s with MQ_CUDA_TIMING=%s, got %.1f us (median %.1f us)",
                  i ? "measured and near or above the queued median" : "not measured",
                  modes[i], m.idle_s * 1e6, m.st.median * 1e6);
            t[i] = m.st.median;
        }
        mq_bench_problem_free(&bp);
        mq_backend_close(b);
    }
    unsetenv("MQ_CUDA_TIMING");
    CHECK(t[1] > 0 && t[1] <= t[0] * 1.25,
          "expected the queued time (the kernel alone) no longer than the idle one's, got %.1f "
          "us queued, %.1f idle",
          t[1] * 1e6, t[0] * 1e6);
    printf("gpu_cuda: %s lane_gemm 16x64x64 sk4 on %s: idle %.1f us, queued %.1f us\n",
           "16x4096x4096", chip->name, t[0] * 1e6, t[1] * 1e6);
}

/* The fp4 lane kernel's two decodes on the tensor-core path: scales under 4
 * (the bench's: 2^14 folded into them, one FP16 multiply a pair) and the
 * same weights with every scale x 1024 (lane_scales_small 0: two
 * multiplies), each verified; the staged plan of the chip. */
static void fold_checks(mq_backend *b, const mq_limits *lim)
{
    mq_problem p = {MQ_FMT_FP4, 17, 256, 2048, 128};
    mq_candidate c = {MQ_VAR_LANE_GEMM, {16, 64, 128, 0, 2}};
    mq_bench_problem bp;
    memset(&bp, 0, sizeof bp);
    mq_measure_opts mo = mq_measure_defaults();
    mo.max_reps = 0;
    static mq_measurement m[2];
    int small[2] = {-1, -1};
    mq_error e;
    if (mq_bench_problem_setup(&bp, &p, 1, NULL, 0, &e)) {
        CHECK(0, "set up: %s", e.msg);
        return;
    }
    small[0] = bp.copies[0].lane_scales_small;
    mq_measure(b, &bp, &c, lim, &mo, &m[0]);
    int rc = td_scale_fp4_weights(&bp, 10);
    small[1] = bp.copies[0].lane_scales_small;
    mq_measure(b, &bp, &c, lim, &mo, &m[1]);
    mq_bench_problem_free(&bp);
    CHECK(small[0] == 1 && !strcmp(m[0].status, "verified"),
          "expected the folded fp4 decode (scales under 4: lane_scales_small %d) verified, got "
          "%s %s", small[0], m[0].status, m[0].error);
    CHECK(rc == 0 && small[1] == 0 && !strcmp(m[1].status, "verified"),
          "expected the unfolded fp4 decode (scales x 1024: lane_scales_small %d) verified, got "
          "%s %s", small[1], m[1].status, m[1].error);
}

int main(int argc, char **argv)
{
    mq_error e;
    mq_backend_opts bo = {0};
    mq_backend *b = mq_backend_cuda_open(&bo, &e);
    if (!b) {
        fprintf(stderr, "gpu_cuda: the cuda backend is %s\n", e.msg);
        return 2;
    }
    mq_chip_db db;
    mq_chip chip;
    char err[1024];
    if (mq_chips_load(mq_chips_default_path(), &db, err, sizeof err) ||
        mq_chip_from_device(&db, b->device, b->arch, b->gpu_cores, &chip, err, sizeof err)) {
        fprintf(stderr, "gpu_cuda: %s\n", err);
        return 2;
    }
    mq_chips_free(&db);
    if (argc > 1 && !strcmp(argv[1], "--chip-only")) { /* for scripts/gpu-run.sh */
        printf("%s\n", chip.name);
        mq_backend_close(b);
        return 0;
    }
    printf("gpu_cuda: %s (%s) is chip %s\n", b->device, b->arch, chip.name);
    mq_limits lim = chip.lim;

    /* the probes: figures a GPU can have, measured now */
    mq_device_probe pr;
    double t0 = mq_now();
    int prc = b->probe(b, &pr, &e);
    CHECK(prc == 0, "expected the device probes to run: %s", e.msg);
    if (prc == 0) {
        CHECK(pr.read_gbs > 100 && pr.read_gbs < 1.5 * chip.v[MQ_CHIP_MEM_BW_GBS],
              "expected the read probe between 100 GB/s and 1.5x the datasheet's %.0f, got %.0f",
              chip.v[MQ_CHIP_MEM_BW_GBS], pr.read_gbs);
        CHECK(pr.fma_gflops > 1000 && pr.fma_gflops < 1.5e3 * chip.v[MQ_CHIP_FP32_TFLOPS],
              "expected the FMA probe between 1 TFLOP/s and 1.5x the datasheet's %.1f, got %.0f "
              "GFLOP/s",
              chip.v[MQ_CHIP_FP32_TFLOPS], pr.fma_gflops);
        /* the simdgroup MMA as mapped: on the tensor cores (the default on
         * sm_80+) it must beat the FP32 units; emulated on them, come near */
        const char *mm = getenv("MQ_CUDA_MMA");
        int fp32 = (mm && !strcmp(mm, "fp32")) || atoi(b->arch + 3) < 80; /* sm_NN */
        double lo = fp32 ? 0.3 * pr.fma_gflops : pr.fma_gflops;
        double hi = fmax(chip.v[MQ_CHIP_FP16_TFLOPS], chip.v[MQ_CHIP_TENSOR_FP16_TFLOPS]);
        CHECK(pr.mma_gflops > lo && pr.mma_gflops < 1.5e3 * hi,
              "expected the MMA probe (%s) between %.0f GFLOP/s and 1.5x the datasheet's FP16 "
              "%.1f TFLOP/s, got %.0f GFLOP/s",
              fp32 ? "FP32 units" : "tensor cores", lo, hi, pr.mma_gflops);
        printf("gpu_cuda: probes: read %.0f GB/s (%.0f%% of the datasheet), FMA %.0f GFLOP/s "
               "(%.0f%%), simdgroup MMA %.0f GFLOP/s (%s) (%.1f s)\n",
               pr.read_gbs, 100 * pr.read_gbs / chip.v[MQ_CHIP_MEM_BW_GBS], pr.fma_gflops,
               100 * pr.fma_gflops / 1e3 / chip.v[MQ_CHIP_FP32_TFLOPS], pr.mma_gflops,
               fp32 ? "FP32 units" : "tensor cores", mq_now() - t0);
    }

    probe16_checks(b);
    fold_checks(b, &lim);

    /* the representative set: ragged shapes, small layers and a real one */
    static mq_test_job js[2048];
    int n = 0;
    static const int ms[] = {1, 3, 17, 64};
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int mi = 0; mi < 4; mi++) {
            mq_problem p = {(mq_format)f, ms[mi], 200, 384, 64};
            n = mq_test_pick(&p, &chip, js, n, 2048);
        }
    for (int f = 0; f < MQ_FMT_COUNT; f++) {
        mq_problem p = {(mq_format)f, 16, 4096, 4096, 128};
        n = mq_test_pick(&p, &chip, js, n, 2048);
    }
    for (int f = MQ_FMT_TRELLIS2; f <= MQ_FMT_TRELLIS4; f++) { /* a partial last group */
        mq_problem p = {(mq_format)f, 3, 200, 400, 128};
        n = mq_test_pick(&p, &chip, js, n, 2048);
    }
    mq_bench_problem bp;
    memset(&bp, 0, sizeof bp);
    mq_measure_opts verify = mq_measure_defaults(), timed = verify;
    verify.max_reps = 0;
    timed.budget_s = 0.05;
    static mq_measurement m;
    int ok = 0, times = 0, per_vf[64][MQ_FMT_COUNT] = {{0}}, timed_v[64] = {0};
    t0 = mq_now();
    for (int i = 0; i < n; i++) {
        if (i == 0 || memcmp(&js[i].p, &js[i - 1].p, sizeof js[i].p)) {
            mq_bench_problem_free(&bp);
            memset(&bp, 0, sizeof bp);
            if (mq_bench_problem_setup(&bp, &js[i].p, 1, NULL, 0, &e)) {
                CHECK(0, "set up: %s", e.msg);
                break;
            }
        }
        int v = (int)js[i].c.variant < 64 ? (int)js[i].c.variant : 63;
        int time_it = !timed_v[v] && js[i].p.N == 4096;
        char name[128];
        mq_candidate_str(&js[i].c, name, sizeof name);
        if (getenv("MQ_TEST_VERBOSE")) { /* which launch a hang or a slow compile is in */
            fprintf(stderr, "gpu_cuda: %d/%d %s M=%d N=%d K=%d %s (%.1f s)\n", i + 1, n,
                    mq_format_name(js[i].p.format), js[i].p.M, js[i].p.N, js[i].p.K, name,
                    mq_now() - t0);
        }
        mq_measure(b, &bp, &js[i].c, &lim, time_it ? &timed : &verify, &m);
        const char *want = time_it ? "ok" : "verified";
        CHECK(!strcmp(m.status, want),
              "expected %s M=%d N=%d K=%d g=%d %s on the GPU to match the reference: %s %s",
              mq_format_name(js[i].p.format), js[i].p.M, js[i].p.N, js[i].p.K, js[i].p.group, name,
              m.status, m.error);
        if (!strcmp(m.status, want)) {
            ok++;
            per_vf[v][js[i].p.format]++;
        }
        if (time_it && !strcmp(m.status, "ok")) {
            timed_v[v] = 1;
            times++;
            CHECK(m.nsamples >= 5 && m.st.median > 0 && m.st.median < 1.0,
                  "expected %s timed by CUDA events: %d samples, median %g s", name, m.nsamples,
                  m.st.median);
        }
    }
    mq_bench_problem_free(&bp);
    for (int v = 0; v < mq_variant_count() && v < 64; v++)
        for (int f = 0; f < MQ_FMT_COUNT; f++)
            if (mq_variant_serves((mq_variant)v, (mq_format)f))
                CHECK(per_vf[v][f] >= 3, "expected %s on %s verified on several tiles and Ms, got %d",
                      mq_variant_get((mq_variant)v)->name, mq_format_name((mq_format)f),
                      per_vf[v][f]);
    printf("gpu_cuda: %d launches of %d verified against the float64 reference, %d timed (%.1f s)\n",
           ok, n, times, mq_now() - t0);

    /* a planted defect: the fused kernel's epilogue skips the last column */
    char dir[] = "/tmp/mq-gpu-planted-XXXXXX", cmd[1024];
    if (mkdtemp(dir)) {
        snprintf(cmd, sizeof cmd,
                 "cp %s/*.metal %s/*.h %s/ && sed -i 's/if (r < p.M \\&\\& c < p.N)/if (r < p.M "
                 "\\&\\& c + 1 < p.N)/' %s/mq_fused.h && grep -q 'c + 1 < p.N' %s/mq_fused.h",
                 mq_metal_source_dir(), mq_metal_source_dir(), dir, dir, dir);
        int planted = system(cmd) == 0;
        CHECK(planted, "expected to plant the defect in a copy of metal/ (%s)", dir);
        setenv("MQ_METAL_DIR", dir, 1);
        setenv("MQ_CUDA_CACHE", "/tmp/mq-gpu-planted-cache", 1);
        mq_backend *b2 = mq_backend_cuda_open(&bo, &e);
        mq_problem p = {MQ_FMT_FP4, 3, 200, 384, 64};
        mq_test_job pj[32];
        int npj = mq_test_pick(&p, &chip, pj, 0, 32), k = 0;
        while (k < npj && strcmp(mq_variant_get(pj[k].c.variant)->name, "marlin_gemm_fused_fp4"))
            k++;
        CHECK(k < npj, "expected a legal marlin_gemm_fused_fp4 candidate for the planted defect");
        mq_candidate c = k < npj ? pj[k].c : pj[0].c;
        memset(&bp, 0, sizeof bp);
        if (b2 && planted && mq_bench_problem_setup(&bp, &p, 1, NULL, 0, &e) == 0) {
            mq_measure(b2, &bp, &c, &lim, &verify, &m);
            CHECK(!strcmp(m.status, "wrong"),
                  "expected the planted defect (one column unwritten) to be caught as wrong, got "
                  "%s %s",
                  m.status, m.error);
            printf("gpu_cuda: planted defect: %s (%s)\n", m.status, m.error);
        }
        mq_bench_problem_free(&bp);
        mq_backend_close(b2);
        unsetenv("MQ_METAL_DIR");
        snprintf(cmd, sizeof cmd, "rm -rf %s /tmp/mq-gpu-planted-cache", dir);
        if (system(cmd))
            fprintf(stderr, "gpu_cuda: could not remove %s\n", dir);
    }
    moe_checks(b, prc == 0 ? pr.read_gbs : 0, &lim);
    mq_backend_close(b);
    timing_checks(&bo, &chip, &lim);
    return check_done("gpu_cuda");
}
