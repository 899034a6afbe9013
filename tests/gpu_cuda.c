/* gpu_cuda.c - the GPU tests (make test-gpu), for a machine with an NVIDIA
 * GPU, the CUDA driver and NVRTC; CI has none and never runs it. Through
 * the harness, like every backend: every variant x format on the
 * representative candidates of the device's chip (the smallest, seed and
 * largest tiles, split_k 1, 2 and 3 where the variant splits), on ragged
 * and layer-sized shapes, each verified against the float64 reference on
 * the GPU; one candidate per variant also timed (CUDA events, a positive
 * time, no failed repetition); the probes measure a bandwidth and a peak
 * that a GPU can have; a planted defect (a kernel writing one column
 * short) is caught as wrong. Exit 0 when all pass, 1 on a failure, 2 when
 * there is no GPU to test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "chips.h"
#include "measure.h"
#include "msl_program.h"
#include "probes.h"
#include "testdata.h"

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
        mq_chip_from_device(&db, b->device, b->arch, &chip, err, sizeof err)) {
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
    mq_limits lim = mq_chip_limits(&chip);

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
    mq_backend_close(b);
    return check_done("gpu_cuda");
}
