// lane_gemm.metal - GEMM on the lane-major weight layout (mq_lane.h) for
// FP4 (lane_gemm_fp4) and u4 with zero points (lane_gemm_u4): grid
// (n_tiles, m_tiles, split_k), each lane decoding its own 16-byte words of
// codes straight into the weight fragments. Threadgroup memory: two A
// tiles (TILE_M x A_LD halves each), or, where the planner stages the
// weights (MQ_PLAN_STAGES), that many stage buffers (mq_lane_staged.h);
// reused at the end for the K shares of the simdgroups (LANE_RED_FLOATS
// floats), whichever is larger.
#define MQ_LANE 1
#include "mq_lane.h"

kernel void lane_gemm_fp4(device const half *A [[buffer(0)]],
                          device const uint *codes [[buffer(1)]],
                          device const half *scales [[buffer(2)]],
                          device half *C [[buffer(3)]],
                          constant MqParams &p [[buffer(4)]],
                          device float *workspace [[buffer(5)]],
                          uint3 tg [[threadgroup_position_in_grid]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint sg [[simdgroup_index_in_threadgroup]],
                          uint lane [[thread_index_in_simdgroup]])
{
    threadgroup half smem[LANE_SMEM_HALVES];
    MQ_CHECK_PLAN(sizeof(smem));
    mq_lane_gemm<LANE_FP4>(A, codes, scales, nullptr, C, p, workspace, smem, nullptr, nullptr,
                           (threadgroup uint *)smem, tg, tid, sg, lane);
}

kernel void lane_gemm_u4(device const half *A [[buffer(0)]],
                         device const uint *codes [[buffer(1)]],
                         device const half *scales [[buffer(2)]],
                         device half *C [[buffer(3)]],
                         constant MqParams &p [[buffer(4)]],
                         device float *workspace [[buffer(5)]],
                         device const uchar *zeros [[buffer(6)]],
                         uint3 tg [[threadgroup_position_in_grid]],
                         uint tid [[thread_index_in_threadgroup]],
                         uint sg [[simdgroup_index_in_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]])
{
    threadgroup half smem[LANE_SMEM_HALVES];
    MQ_CHECK_PLAN(sizeof(smem));
    mq_lane_gemm<LANE_U4>(A, codes, scales, zeros, C, p, workspace, smem, nullptr, nullptr,
                          (threadgroup uint *)smem, tg, tid, sg, lane);
}
