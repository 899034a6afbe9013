// lane_trellis.metal - GEMM on the lane-major weight layout (mq_lane.h) for
// the trellis formats, TRELLIS_BITS 2, 3 or 4: the lane kernel's body with
// 128-K super-blocks, a pair codebook in threadgroup memory and the signs su
// on the activations (mq_lane_trellis.h); grid (n_tiles, m_tiles, split_k)
// as lane_gemm. Threadgroup memory: lane_gemm's (two A tiles, or the
// planner's stages of A, codes and FP32 scales; reused for the K shares of
// the simdgroups) and the pair codebook, 4^TRELLIS_BITS half2 in
// LANE_LUT_COPIES copies (mq_lane_trellis.h).
#define MQ_LANE 1
#define MQ_LANE_TRELLIS 1
#include "mq_lane.h"

kernel void lane_trellis(device const half *A [[buffer(0)]],
                         device const uint *codes [[buffer(1)]],
                         device const float *scales [[buffer(2)]],
                         device half *C [[buffer(3)]],
                         constant MqParams &p [[buffer(4)]],
                         device float *workspace [[buffer(5)]],
                         device const float *grid [[buffer(6)]],
                         device const float *su [[buffer(7)]],
                         uint3 tg [[threadgroup_position_in_grid]],
                         uint tid [[thread_index_in_threadgroup]],
                         uint sg [[simdgroup_index_in_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]])
{
    threadgroup half smem[LANE_SMEM_HALVES];
    threadgroup uint lut[LANE_LUT_ENTRIES * LANE_LUT_COPIES];
    MQ_CHECK_PLAN(sizeof(smem) + sizeof(lut));
    mq_lane_gemm<LANE_TRELLIS>(A, codes, (device const half *)scales, nullptr, C, p, workspace,
                               smem, grid, su, lut, tg, tid, sg, lane);
}
