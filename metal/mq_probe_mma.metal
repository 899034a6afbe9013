// mq_probe_mma.metal - the device's peak for the simdgroup matrix multiply
// the kernels use, as the backend maps it (on a Mac the GPU's own; on the
// cuda backend the tensor cores, or the FP32 units with MQ_CUDA_MMA=fp32):
// every simdgroup runs MQ_PROBE_CHAINS independent chains of 8x8x8 FP16
// multiply-accumulates into float, `iters` steps each, from two operands
// loaded once from threadgroup memory, and touches no other memory. Its
// 1024 flops per multiply over the time is the figure the GEMM kernels'
// GFLOP/s are compared with (bench prints it next to the FMA probe).
// mq_probe_mma16 (below) checks the fragment helpers of mq_metal.h instead:
// a correctness probe, run by the tests, not timed.
#include "mq_metal.h"

#define MQ_PROBE_CHAINS 8

kernel void mq_probe_mma(device const half *seed [[buffer(0)]],
                         device float *out [[buffer(1)]],
                         constant uint &iters [[buffer(2)]],
                         uint tid [[thread_index_in_threadgroup]])
{
    threadgroup half ab[128];
    if (tid < 128u)
        ab[tid] = seed[tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_half8x8 a, b;
    simdgroup_load(a, ab, 8);
    simdgroup_load(b, ab + 64, 8);
    simdgroup_float8x8 acc[MQ_PROBE_CHAINS];
    for (uint j = 0; j < MQ_PROBE_CHAINS; j++)
        acc[j] = make_filled_simdgroup_matrix<float, 8, 8>(float(j));
    for (uint i = 0; i < iters; i++)
        for (uint j = 0; j < MQ_PROBE_CHAINS; j++)
            simdgroup_multiply_accumulate(acc[j], a, b, acc[j]);
    float s = 0.0f;
    for (uint j = 0; j < MQ_PROBE_CHAINS; j++)
        s += acc[j].thread_elements()[0] + acc[j].thread_elements()[1];
    if (s == 1234.5f) // never (the seeds are small): keeps every output alive
        out[0] = s;
}

// mq_probe_mma16 - weights dequantized straight into simdgroup fragments
// (MQ_FRAG_LANE, MQ_FRAG_FILL), activations as the right operand through
// transposed loads, and the 16x8x16 step (mq_mma_16x8x16; its last K16
// as two mq_mma_16x8x8), on one simdgroup: one super-block of the lane-major
// layout, C^T = W^T x A^T with W^T 16 n x 64 k, A 8 m x 64 k. Small integer
// values, so every summation order gives the same floats (tests/test_msl_exec.c
// on the executor, tests/gpu_cuda.c on a GPU, bit for bit).
// Buffers (one threadgroup of 32 threads):
//   0 codes  uint [32][4]: word L*4 + a is logical lane L's pairs of atom a
//            (k 16a..16a+15): pair p = h + 2s is fragment (n half h, k half
//            s); its element j, W^T[8h + frag_row(L)][16a + 8s + frag_col(L)
//            + j], is nibble p + 4j, code q meaning q - 8 (frag_row(L) =
//            ((L/4) & 4) + (L/2) % 4, frag_col(L) = ((L/4) & 2) * 2 + (L % 2)
//            * 2: Apple's lane layout)
//   1 act    half [8][64]: A[m][k]
//   2 out    float [16][8]: C^T[n][m] = (n < 8 ? 1 : -2) + sum_k W^T[n][k] A[m][k]
#define MQ_PROBE16_LD 72 // the staged A's row stride: 64 + 8 halves of padding

kernel void mq_probe_mma16(device const uint *codes [[buffer(0)]],
                           device const half *act [[buffer(1)]],
                           device float *out [[buffer(2)]],
                           uint lane [[thread_index_in_simdgroup]])
{
    threadgroup half stage[8 * MQ_PROBE16_LD];
    for (uint i = lane; i < 8u * 64u; i += 32u)
        stage[(i / 64u) * MQ_PROBE16_LD + i % 64u] = act[i];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // this lane's uint4: the codes of logical lane MQ_FRAG_LANE(lane)
    const uint4 cw = ((device const uint4 *)codes)[MQ_FRAG_LANE(lane)];
    const float zb = as_type<float>(8u | 0x4B000000u); // 2^23 + 8: q - 8 exactly
    simdgroup_float8x8 c_up = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
    simdgroup_float8x8 c_lo = make_filled_simdgroup_matrix<float, 8, 8>(-2.0f);
    MQ_UNROLL
    for (uint a = 0; a < 4u; a++) {
        simdgroup_half8x8 w[2][2]; // [n half][k half]
        MQ_UNROLL
        for (uint p = 0; p < 4u; p++) {
            const half2 v = mq_u4_rows(cw[a], p, zb, 1.0f);
            MQ_FRAG_FILL(w[p & 1u][p >> 1], v);
        }
        // A^T's k rows 16a.. and 16a + 8..: B[k][m] = stage[m][k]
        simdgroup_half8x8 b0, b1;
        simdgroup_load(b0, stage + 16u * a, MQ_PROBE16_LD, ulong2(0), true);
        simdgroup_load(b1, stage + 16u * a + 8u, MQ_PROBE16_LD, ulong2(0), true);
        if (a < 3u) {
            mq_mma_16x8x16(c_up, c_lo, w[0][0], w[1][0], w[0][1], w[1][1], b0, b1);
        } else {
            mq_mma_16x8x8(c_up, c_lo, w[0][0], w[1][0], b0);
            mq_mma_16x8x8(c_up, c_lo, w[0][1], w[1][1], b1);
        }
    }
    simdgroup_store(c_up, out, 8);
    simdgroup_store(c_lo, out + 64, 8);
}
