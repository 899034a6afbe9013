// marlin_gemm_fused.metal - the fused dequant-GEMM kernels (seed 002) for
// FP4 (marlin_gemm_fused_fp4) and u4 with zero points
// (marlin_gemm_fused_u4): 2D grid (n_tiles, m_tiles), the A tile in
// threadgroup memory, B decoded per simdgroup in registers (mq_fused.h).
// Threadgroup memory: TILE_M x A_LD halves (rows padded by MQ_TILE_PAD) +
// 128 B per simdgroup (5632 B at 64x64x32 with a pad of 8).
#include "mq_fused.h"

#define MQ_FUSED_SMEM (TILE_M * A_LD + SIMDGROUPS * 64)

kernel void marlin_gemm_fused_fp4(device const half *A [[buffer(0)]],
                                  device const uint *packed [[buffer(1)]],
                                  device const half *scales [[buffer(2)]],
                                  device half *C [[buffer(3)]],
                                  constant MqParams &p [[buffer(4)]],
                                  uint2 tg [[threadgroup_position_in_grid]],
                                  uint tid [[thread_index_in_threadgroup]],
                                  uint sg [[simdgroup_index_in_threadgroup]],
                                  uint lane [[thread_index_in_simdgroup]])
{
    threadgroup half smem[MQ_FUSED_SMEM];
    MQ_CHECK_PLAN(sizeof(smem));
    MqWeights w = {packed, scales, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    mq_fused_gemm<MQ_DEQ_FP4, 1, false>(A, w, C, p, smem, tg, tid, sg, lane);
}

kernel void marlin_gemm_fused_u4(device const half *A [[buffer(0)]],
                                 device const uint *packed [[buffer(1)]],
                                 device const half *scales [[buffer(2)]],
                                 device half *C [[buffer(3)]],
                                 constant MqParams &p [[buffer(4)]],
                                 device const uchar *zeros [[buffer(5)]],
                                 uint2 tg [[threadgroup_position_in_grid]],
                                 uint tid [[thread_index_in_threadgroup]],
                                 uint sg [[simdgroup_index_in_threadgroup]],
                                 uint lane [[thread_index_in_simdgroup]])
{
    threadgroup half smem[MQ_FUSED_SMEM];
    MQ_CHECK_PLAN(sizeof(smem));
    MqWeights w = {packed, scales, zeros, nullptr, nullptr, nullptr, nullptr, nullptr};
    mq_fused_gemm<MQ_DEQ_U4, 1, false>(A, w, C, p, smem, tg, tid, sg, lane);
}
