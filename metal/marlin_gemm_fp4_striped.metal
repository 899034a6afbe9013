// marlin_gemm_fp4_striped.metal - the striped K-parallel FP4 kernel (seed
// 000) and its reduction. A 1D grid of num_tgs threadgroups; each takes a
// contiguous range of work_per_tg work units of the column-major tile order
// times k_slices (unit u: tile u / k_slices, K slice u % k_slices; tile t:
// row t % m_tiles, column t / m_tiles), single-buffered A and B tiles
// (padded rows; the next K tile fetched into registers while this one is
// multiplied).
// With one slice the tile goes straight to C; otherwise each slice writes
// its partial sums to workspace[slice][M][N] (FP32, no atomics) and
// marlin_splitk_reduce, a second dispatch, sums the slices in order into C
// (deterministic, as the seed recommends for Metal).
#include "mq_metal.h"

kernel void marlin_gemm_fp4_striped(device const half *A [[buffer(0)]],
                                    device const uint *packed [[buffer(1)]],
                                    device const half *scales [[buffer(2)]],
                                    device half *C [[buffer(3)]],
                                    constant MqParams &p [[buffer(4)]],
                                    device float *workspace [[buffer(5)]],
                                    uint tg [[threadgroup_position_in_grid]],
                                    uint tid [[thread_index_in_threadgroup]],
                                    uint sg [[simdgroup_index_in_threadgroup]],
                                    uint lane [[thread_index_in_simdgroup]])
{
    threadgroup half smem[MQ_STAGED_SMEM(TILE_M * A_LD + TILE_K * B_LD)];
    MQ_CHECK_PLAN(sizeof(smem));
    threadgroup half *As = smem, *Bs = smem + TILE_M * A_LD;
    MqARegs ra;
    MqBRegs rb;
    threadgroup float *scratch = (threadgroup float *)smem + sg * 64u;
    const uint sg_row = (sg / uint(SG_COLS)) * uint(SG_M), sg_col = (sg % uint(SG_COLS)) * uint(SG_N);
    const uint total = p.m_tiles * p.n_tiles * p.k_slices;
    const uint begin = tg * p.work_per_tg, end = min(begin + p.work_per_tg, total);
    for (uint u = begin; u < end; u++) {
        const uint tile = u / p.k_slices, slice = u % p.k_slices;
        const uint row0 = (tile % p.m_tiles) * uint(TILE_M), col0 = (tile / p.m_tiles) * uint(TILE_N);
        const uint2 kr = mq_k_range(p, slice);
        simdgroup_float8x8 acc[FRAG_M][FRAG_N];
        mq_zero_acc(acc);
        mq_fetch_a(ra, A, row0, kr.x, kr.y, p, tid);
        mq_fetch_b<false>(rb, packed, scales, nullptr, kr.x, col0, kr.y, p, tid);
        for (uint k0 = kr.x; k0 < kr.y; k0 += uint(TILE_K)) {
            mq_put_a(As, ra, A, row0, k0, kr.y, p, tid);
            mq_put_b<false>(Bs, rb, packed, scales, nullptr, k0, col0, kr.y, p, tid);
            threadgroup_barrier(mem_flags::mem_threadgroup);
            if (k0 + uint(TILE_K) < kr.y) { // the next tile's loads, in flight during the MMAs
                mq_fetch_a(ra, A, row0, k0 + uint(TILE_K), kr.y, p, tid);
                mq_fetch_b<false>(rb, packed, scales, nullptr, k0 + uint(TILE_K), col0, kr.y, p,
                                  tid);
            }
            mq_mma_staged(acc, As, Bs, sg_row, sg_col);
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        if (p.k_slices == 1)
            mq_store_acc(acc, scratch, lane, row0, col0, sg_row, sg_col, p.M, p.N, C, nullptr);
        else
            mq_store_acc(acc, scratch, lane, row0, col0, sg_row, sg_col, p.M, p.N, nullptr,
                         workspace + size_t(slice) * p.M * p.N);
        threadgroup_barrier(mem_flags::mem_threadgroup); // scratch shares the tiles' memory
    }
}

// The second dispatch of every split-K variant: C = sum over slices of the
// workspace, in slice order, one thread per output element.
kernel void marlin_splitk_reduce(device const float *workspace [[buffer(0)]],
                                 device half *C [[buffer(1)]],
                                 constant MqParams &p [[buffer(2)]],
                                 uint gid [[thread_position_in_grid]])
{
    const uint elems = p.M * p.N;
    if (gid >= elems)
        return;
    float sum = 0.0f;
    for (uint s = 0; s < p.k_slices; s++)
        sum += workspace[size_t(s) * elems + gid];
    C[gid] = half(sum);
}
