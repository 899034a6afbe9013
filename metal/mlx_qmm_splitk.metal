// mlx_qmm_splitk.metal - MLX's qmm_t with split-K (seed 003), for FP4
// (mlx_qmm_splitk_fp4) and u4 (mlx_qmm_splitk_u4): grid (n_tiles, m_tiles,
// split_k); threadgroup z takes K slice z (slices start on multiples of the
// plan's aligned slice length, the last takes the unaligned remainder),
// stages single-buffered A and dequantized B tiles (padded rows; the next
// tile fetched into registers while this one is multiplied), 16x16 per
// simdgroup, and writes its partial sums to workspace[z] (or C when split_k is 1).
// The slices are summed by marlin_splitk_reduce (marlin_gemm_fp4_striped.metal).
#include "mq_metal.h"

#define MLX_SMEM MQ_STAGED_SMEM(TILE_M * A_LD + TILE_K * B_LD)

template <bool U4>
inline void mlx_qmm_body(device const half *A, device const uint *packed,
                         device const half *scales, device const uchar *zeros, device half *C,
                         constant MqParams &p, device float *workspace, threadgroup half *smem,
                         uint3 tg, uint tid, uint sg, uint lane)
{
    static_assert(MLX_SMEM * 2 >= SIMDGROUPS * 256, "the epilogue scratch fits in smem");
    threadgroup half *As = smem, *Bs = smem + TILE_M * A_LD;
    const uint row0 = tg.y * uint(TILE_M), col0 = tg.x * uint(TILE_N);
    const uint sg_row = (sg / uint(SG_COLS)) * uint(SG_M), sg_col = (sg % uint(SG_COLS)) * uint(SG_N);
    const uint2 kr = mq_k_range(p, tg.z);
    simdgroup_float8x8 acc[FRAG_M][FRAG_N];
    mq_zero_acc(acc);
    MqARegs ra;
    MqBRegs rb;
    mq_fetch_a(ra, A, row0, kr.x, kr.y, p, tid);
    mq_fetch_b<U4>(rb, packed, scales, zeros, kr.x, col0, kr.y, p, tid);
    for (uint k0 = kr.x; k0 < kr.y; k0 += uint(TILE_K)) {
        mq_put_a(As, ra, A, row0, k0, kr.y, p, tid);
        mq_put_b<U4>(Bs, rb, packed, scales, zeros, k0, col0, kr.y, p, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (k0 + uint(TILE_K) < kr.y) { // the next tile's loads, in flight during the MMAs
            mq_fetch_a(ra, A, row0, k0 + uint(TILE_K), kr.y, p, tid);
            mq_fetch_b<U4>(rb, packed, scales, zeros, k0 + uint(TILE_K), col0, kr.y, p, tid);
        }
        mq_mma_staged(acc, As, Bs, sg_row, sg_col);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    threadgroup float *scratch = (threadgroup float *)smem + sg * 64u;
    if (p.k_slices == 1)
        mq_store_acc(acc, scratch, lane, row0, col0, sg_row, sg_col, p.M, p.N, C, nullptr);
    else
        mq_store_acc(acc, scratch, lane, row0, col0, sg_row, sg_col, p.M, p.N, nullptr,
                     workspace + size_t(tg.z) * p.M * p.N);
}

kernel void mlx_qmm_splitk_fp4(device const half *A [[buffer(0)]],
                               device const uint *packed [[buffer(1)]],
                               device const half *scales [[buffer(2)]],
                               device half *C [[buffer(3)]],
                               constant MqParams &p [[buffer(4)]],
                               device float *workspace [[buffer(5)]],
                               uint3 tg [[threadgroup_position_in_grid]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]],
                               uint lane [[thread_index_in_simdgroup]])
{
    threadgroup half smem[MLX_SMEM]; // threadgroup memory is declared in the kernel itself
    MQ_CHECK_PLAN(sizeof(smem));
    mlx_qmm_body<false>(A, packed, scales, nullptr, C, p, workspace, smem, tg, tid, sg, lane);
}

kernel void mlx_qmm_splitk_u4(device const half *A [[buffer(0)]],
                              device const uint *packed [[buffer(1)]],
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
    threadgroup half smem[MLX_SMEM];
    MQ_CHECK_PLAN(sizeof(smem));
    mlx_qmm_body<true>(A, packed, scales, zeros, C, p, workspace, smem, tg, tid, sg, lane);
}
