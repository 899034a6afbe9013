/* cuda_probe.c - the cuda backend's device probes (cuda_state.h): the read
 * bandwidth of a streaming kernel (1 GiB, and cold reads of a given size
 * timed as a candidate is), the FP32 FMA peak, and the simdgroup-matrix
 * peak as this build maps it (metal/mq_probe_mma.metal through the
 * prelude); the figures the tools report GPU results against. Apart from
 * cuda.c because the probes measure the device, not a candidate: kernels,
 * launch shapes and timing loops of their own. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "cuda_state.h"

/* Plain CUDA (no prelude): a streaming read of 16-byte words, every
 * thread's words XOR-ed into a value written only when it matches a key
 * (never), so nothing is optimized away; and eight independent FMA chains
 * per thread. */
static const char probe_source[] =
    "struct u4 { unsigned x, y, z, w; };\n"
    "extern \"C\" __global__ void mq_probe_read(const u4 *p, unsigned long long n, unsigned key,\n"
    "                                           unsigned *out)\n"
    "{\n"
    "    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "    unsigned acc = 0;\n"
    "    for (; i < n; i += stride) {\n"
    "        u4 v = p[i];\n"
    "        acc ^= v.x ^ v.y ^ v.z ^ v.w;\n"
    "    }\n"
    "    if (acc == key)\n"
    "        out[0] = acc;\n"
    "}\n"
    "extern \"C\" __global__ void mq_probe_fma(float *out, int iters, float a, float b)\n"
    "{\n"
    "    float x[8];\n"
    "    for (int j = 0; j < 8; j++)\n"
    "        x[j] = threadIdx.x * 0.001f + j;\n"
    "    for (int i = 0; i < iters; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 8; j++)\n"
    "            x[j] = __fmaf_rn(x[j], a, b);\n"
    "    float s = 0;\n"
    "    for (int j = 0; j < 8; j++)\n"
    "        s += x[j];\n"
    "    if (s == 1234.5f)\n"
    "        out[0] = s;\n"
    "}\n"
    "extern \"C\" __global__ void mq_spin(long long cycles)\n"
    "{\n"
    "    long long t0 = clock64();\n"
    "    while (clock64() - t0 < cycles)\n"
    "        ;\n"
    "}\n";

static mq_status time_launch(cuda_state *s, CUfunction fn, unsigned grid, unsigned threads,
                             void **args, double *sec, mq_error *err)
{
    mq_status st; /* queued behind the spin kernel as the runs are, where they are */
    if (s->queued && !s->idle_now && (st = mq_cuda_spin(s, err)))
        return st;
    CU(s->api.EventRecord(s->ev0, NULL), "cuEventRecord");
    CU(s->api.LaunchKernel(fn, grid, 1, 1, threads, 1, 1, 0, NULL, args, NULL), "a probe");
    CU(s->api.EventRecord(s->ev1, NULL), "cuEventRecord");
    CU(s->api.EventSynchronize(s->ev1), "a probe");
    float ms = 0;
    CU(s->api.EventElapsedTime(&ms, s->ev0, s->ev1), "cuEventElapsedTime");
    *sec = ms * 1e-3;
    return MQ_OK;
}

/* The probe module's two kernels, compiled on first use. */
static mq_status probe_functions(cuda_state *s, CUfunction *rd, CUfunction *fm, mq_error *err)
{
    char msg[1024];
    CU(s->api.CtxSetCurrent(s->ctx), "cuCtxSetCurrent");
    if (!s->probe_mod) {
        size_t n;
        char *cubin = mq_cuda_compile(s, "mq_probes.cu", probe_source, "", 0, &n, msg, sizeof msg);
        if (!cubin)
            return mq_fail(err, MQ_E_ARG, "cuda: %s", msg);
        CUresult r = s->api.ModuleLoadData(&s->probe_mod, cubin);
        free(cubin);
        if (r)
            return mq_cuda_fail(s, err, r, "loading the probes");
    }
    CU(s->api.ModuleGetFunction(rd, s->probe_mod, "mq_probe_read"), "mq_probe_read");
    CU(s->api.ModuleGetFunction(fm, s->probe_mod, "mq_probe_fma"), "mq_probe_fma");
    return MQ_OK;
}

mq_status mq_cuda_spin(cuda_state *s, mq_error *err)
{
    CUfunction rd, fm, spin;
    mq_status st = probe_functions(s, &rd, &fm, err);
    if (st)
        return st;
    CU(s->api.ModuleGetFunction(&spin, s->probe_mod, "mq_spin"), "mq_spin");
    long long cycles = 100000; /* ~50 us at 2 GHz: more than a launch's host latency */
    void *args[] = {&cycles};
    CU(s->api.LaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), "the spin kernel");
    return MQ_OK;
}

/* A read of the weights' own size, cold, timed like a candidate: enough
 * copies that each is evicted (twice the L2) before it is read again, each
 * read one launch of the streaming probe between two events; and the same
 * launch with nothing to read. Medians of 15 after one pass of warm-ups. */
mq_status mq_cuda_probe_read_at(mq_backend *b, size_t bytes, double *gbs, double *empty_s,
                                mq_error *err)
{
    cuda_state *s = b->state;
    CUfunction rd, fm;
    mq_status st = probe_functions(s, &rd, &fm, err);
    if (st)
        return st;
    size_t stride = (bytes + 4095) & ~(size_t)4095;
    size_t copies = mq_cold_copies(stride, b->cache_bytes);
    if (stride == 0 || copies * stride > ((size_t)4 << 30))
        return mq_fail(err, MQ_E_ARG, "cuda: a %zu-byte read probe does not fit in 4 GiB of copies",
                       bytes);
    CUdeviceptr buf, res;
    CU(s->api.MemAlloc(&buf, copies * stride), "cuMemAlloc (the sized read probe)");
    CUresult r = s->api.MemAlloc(&res, 16);
    if (!r)
        r = s->api.MemsetD8(buf, 0x5a, copies * stride);
    if (r) {
        s->api.MemFree(buf);
        return mq_cuda_fail(s, err, r, "the sized read probe's buffers");
    }
    /* the best of three launch shapes (2, 4 or 8 blocks of 512 per SM), so
     * the probe is not held back by one shape that suits big reads */
    enum { REPS = 15 };
    double t_read[REPS], t_empty[REPS], best_read = 1e30, best_empty = 1e30;
    unsigned key = 0x12345678u;
    for (unsigned per_sm = 2; per_sm <= 8 && st == MQ_OK; per_sm *= 2) {
        unsigned grid = (unsigned)s->sms * per_sm;
        for (size_t i = 0; i < copies + REPS && st == MQ_OK; i++) {
            CUdeviceptr p = buf + (i % copies) * stride;
            unsigned long long words = bytes / 16, none = 0;
            void *ra[] = {&p, &words, &key, &res}, *ea[] = {&p, &none, &key, &res};
            double t = 0, te = 0;
            st = time_launch(s, rd, grid, 512, ra, &t, err);
            if (st == MQ_OK)
                st = time_launch(s, rd, grid, 512, ea, &te, err);
            if (st == MQ_OK && i >= copies) {
                t_read[i - copies] = t;
                t_empty[i - copies] = te;
            }
        }
        if (st == MQ_OK) {
            gsl_sort(t_read, 1, REPS);
            gsl_sort(t_empty, 1, REPS);
            best_read = fmin(best_read, gsl_stats_median_from_sorted_data(t_read, 1, REPS));
            best_empty = fmin(best_empty, gsl_stats_median_from_sorted_data(t_empty, 1, REPS));
        }
    }
    s->api.MemFree(buf);
    s->api.MemFree(res);
    if (st)
        return st;
    *gbs = (double)(bytes / 16 * 16) / best_read / 1e9;
    *empty_s = best_empty;
    return MQ_OK;
}

/* The simdgroup-matrix peak as this build maps it (metal/mq_probe_mma.metal
 * through the prelude): 4 blocks of 8 simdgroups per SM, 8 chains each, the
 * best of 5 launches after one warm-up. */
static mq_status probe_mma(cuda_state *s, double *gflops, mq_error *err)
{
    CUmodule mod = mq_cuda_module_for(s, "mq_probe_mma.metal", "", err);
    if (!mod)
        return err->code;
    CUfunction fn;
    CU(s->api.ModuleGetFunction(&fn, mod, "mq_cuda_entry_mq_probe_mma"), "mq_probe_mma");
    CUdeviceptr seed, res, it;
    CU(s->api.MemAlloc(&seed, 256 + 16 + 16), "cuMemAlloc (the MMA probe)");
    res = seed + 256;
    it = seed + 272;
    uint16_t h[128];
    for (int i = 0; i < 128; i++) /* small FP16 values: 2^-8 (i % 8 + 1) */
        h[i] = (uint16_t)(0x1c00 + (i % 8) * 0x80);
    unsigned iters = 4096;
    CUresult r = s->api.MemcpyHtoD(seed, h, sizeof h);
    if (!r)
        r = s->api.MemcpyHtoD(it, &iters, sizeof iters);
    mq_status st = MQ_OK;
    if (r)
        st = mq_cuda_fail(s, err, r, "the MMA probe's buffers");
    cuda_buffer_args g = {{seed, res, it}};
    void *args[] = {&g};
    double best = 1e30, t;
    unsigned grid = (unsigned)s->sms * 4u;
    for (int i = 0; i < 6 && st == MQ_OK; i++)
        if ((st = time_launch(s, fn, grid, 256, args, &t, err)) == MQ_OK && i && t < best)
            best = t;
    s->api.MemFree(seed);
    if (st == MQ_OK) /* 8 simdgroups x 8 chains x iters x 8x8x8 multiply-adds per block */
        *gflops = 2.0 * 512 * 8 * 8 * (double)iters * grid / best / 1e9;
    return st;
}

mq_status mq_cuda_probe(mq_backend *b, mq_device_probe *out, mq_error *err)
{
    cuda_state *s = b->state;
    memset(out, 0, sizeof *out);
    CUfunction rd, fm;
    mq_status pst = probe_functions(s, &rd, &fm, err);
    if (pst)
        return pst;
    /* read: 1 GiB, far past any L2, best of 8 passes after one warm-up */
    size_t bytes = (size_t)1 << 30;
    CUdeviceptr buf, res;
    CU(s->api.MemAlloc(&buf, bytes), "cuMemAlloc (the read probe)");
    CUresult r = s->api.MemAlloc(&res, 16);
    if (!r)
        r = s->api.MemsetD8(buf, 0x5a, bytes);
    if (r) {
        s->api.MemFree(buf);
        return mq_cuda_fail(s, err, r, "the read probe's buffers");
    }
    unsigned long long words = bytes / 16;
    unsigned key = 0x12345678u;
    void *ra[] = {&buf, &words, &key, &res};
    double best = 1e30, t;
    mq_status st = MQ_OK;
    for (int i = 0; i < 9 && st == MQ_OK; i++)
        if ((st = time_launch(s, rd, (unsigned)s->sms * 8u, 512, ra, &t, err)) == MQ_OK && i && t < best)
            best = t;
    if (st == MQ_OK)
        out->read_gbs = bytes / best / 1e9;
    out->read_bytes = bytes;
    /* FMA: 8 chains x iters per thread, 8 blocks of 512 threads per SM */
    int iters = 8192;
    float fa = 0.999f, fb = 0.001f;
    void *fa_args[] = {&res, &iters, &fa, &fb};
    best = 1e30;
    for (int i = 0; i < 6 && st == MQ_OK; i++)
        if ((st = time_launch(s, fm, (unsigned)s->sms * 8u, 512, fa_args, &t, err)) == MQ_OK && i && t < best)
            best = t;
    if (st == MQ_OK)
        out->fma_gflops = 2.0 * 8 * iters * (double)s->sms * 8 * 512 / best / 1e9;
    s->api.MemFree(buf);
    s->api.MemFree(res);
    if (st == MQ_OK)
        st = probe_mma(s, &out->mma_gflops, err);
    return st;
}
