// mq_probe_mma.metal - the device's peak for the simdgroup matrix multiply
// the kernels use, as the backend maps it (on a Mac the GPU's own; on the
// cuda backend the tensor cores, or the FP32 units with MQ_CUDA_MMA=fp32):
// every simdgroup runs MQ_PROBE_CHAINS independent chains of 8x8x8 FP16
// multiply-accumulates into float, `iters` steps each, from two operands
// loaded once from threadgroup memory, and touches no other memory. Its
// 1024 flops per multiply over the time is the figure the GEMM kernels'
// GFLOP/s are compared with (bench prints it next to the FMA probe).
#include <metal_stdlib>
using namespace metal;

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
