// marlin_gemm_fp4.metal - the 2D-grid FP4 kernel (seed 001): one
// threadgroup per TILE_M x TILE_N output tile, grid (n_tiles, m_tiles); the
// A tile and the dequantized B tile are staged in threadgroup memory,
// double-buffered, and the next K tile is fetched into registers before
// this tile's MMAs are issued and stored (B dequantized) into the other
// buffer after them, so its loads are in flight while the simdgroups
// multiply and one barrier per K tile suffices. Threadgroup memory:
// 2 x (TILE_M x A_LD + TILE_K x B_LD) halves (rows padded by MQ_TILE_PAD;
// 18 KB at 64x64x32 with a pad of 8).
#include "mq_metal.h"

kernel void marlin_gemm_fp4(device const half *A [[buffer(0)]],
                            device const uint *packed [[buffer(1)]],
                            device const half *scales [[buffer(2)]],
                            device half *C [[buffer(3)]],
                            constant MqParams &p [[buffer(4)]],
                            uint2 tg [[threadgroup_position_in_grid]],
                            uint tid [[thread_index_in_threadgroup]],
                            uint sg [[simdgroup_index_in_threadgroup]],
                            uint lane [[thread_index_in_simdgroup]])
{
    // one block: [A0 | A1 | B0 | B1]; the epilogue reuses it as scratch
    threadgroup half smem[MQ_STAGED_SMEM(2 * (TILE_M * A_LD + TILE_K * B_LD))];
    MQ_CHECK_PLAN(sizeof(smem));
    threadgroup half *As[2] = {smem, smem + TILE_M * A_LD};
    threadgroup half *Bs[2] = {smem + 2 * TILE_M * A_LD, smem + 2 * TILE_M * A_LD + TILE_K * B_LD};
    const uint row0 = tg.y * uint(TILE_M), col0 = tg.x * uint(TILE_N);
    const uint sg_row = (sg / uint(SG_COLS)) * uint(SG_M), sg_col = (sg % uint(SG_COLS)) * uint(SG_N);
    simdgroup_float8x8 acc[FRAG_M][FRAG_N];
    mq_zero_acc(acc);
    const uint ktiles = MQ_CDIV(p.K, uint(TILE_K));
    MqARegs ra;
    MqBRegs rb;
    // prologue: the first K tile into buffer 0
    mq_fetch_a(ra, A, row0, 0, p.K, p, tid);
    mq_fetch_b<false>(rb, packed, scales, nullptr, 0, col0, p.K, p, tid);
    mq_put_a(As[0], ra, A, row0, 0, p.K, p, tid);
    mq_put_b<false>(Bs[0], rb, packed, scales, nullptr, 0, col0, p.K, p, tid);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint kt = 0; kt < ktiles; kt++) {
        const uint cur = kt & 1u, k1 = (kt + 1) * uint(TILE_K);
        const bool more = kt + 1 < ktiles;
        if (more) { // the next tile's loads, in flight during the MMAs
            mq_fetch_a(ra, A, row0, k1, p.K, p, tid);
            mq_fetch_b<false>(rb, packed, scales, nullptr, k1, col0, p.K, p, tid);
        }
        mq_mma_staged(acc, As[cur], Bs[cur], sg_row, sg_col);
        if (more) { // the other buffer was last read before the previous barrier
            mq_put_a(As[cur ^ 1u], ra, A, row0, k1, p.K, p, tid);
            mq_put_b<false>(Bs[cur ^ 1u], rb, packed, scales, nullptr, k1, col0, p.K, p, tid);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    // the epilogue: each simdgroup's 8x8 float scratch in the tiles' memory
    threadgroup float *scratch = (threadgroup float *)smem + sg * 64u;
    mq_store_acc(acc, scratch, lane, row0, col0, sg_row, sg_col, p.M, p.N, C, nullptr);
}
