// mq_fused.h - the fused dequant-GEMM body (seed 002) shared by the fused
// fp4/u4 kernels and the trellis kernels: the A tile is staged in
// threadgroup memory (double-buffered for trellis, as its recipe says), but
// B never is: each simdgroup decodes the 8x8 B sub-tile it is about to use,
// lanes 0-7 one column each (8 K values: one packed word for fp4/u4, 8
// codebook lookups for trellis), into its own 128-byte staging block, and
// synchronizes with simdgroup_barrier only. Accumulators leave as half
// through a 128-byte epilogue block per simdgroup: the staging block itself
// (fused fp4/u4, seed 002), or a block of its own after all the staging
// blocks (trellis, seed 004's epilogue_staging).
#ifndef MQ_FUSED_H
#define MQ_FUSED_H

#include "mq_metal.h"

enum { MQ_DEQ_FP4 = 0, MQ_DEQ_U4 = 1, MQ_DEQ_TRELLIS = 2 };

// Column n's 8 weights for K rows k..k+7 into staging column c.
template <int DEQ>
inline void mq_decode_column(thread const MqWeights &w, constant MqParams &p, uint k, uint n,
                             uint c, threadgroup half *staging)
{
    half v[8];
    if (n >= p.N || k >= p.K) {
        for (uint j = 0; j < 8; j++)
            v[j] = half(0.0h);
    } else if (DEQ == MQ_DEQ_TRELLIS) {
        const uint tiles_n = MQ_CDIV(p.N, 16u);
        for (uint j = 0; j < 8; j++) {
            const uint kk = k + j;
            const uint idx = mq_trellis_index(w.indices, tiles_n, kk, n);
            v[j] = half(w.grid[min(idx, p.n_levels - 1u)] * w.tscales[(kk / p.group) * p.N + n] *
                        w.su[kk] * w.sv[n]);
        }
    } else {
        const uint word = w.packed[(k / 8u) * p.N + n];
        const uint g = (k / p.group) * p.N + n; // 8 | group: one scale for the word
        if (DEQ == MQ_DEQ_U4)
            mq_decode_word_u4(word, w.zeros[g], w.scales[g], v);
        else
            mq_decode_word_fp4(word, w.scales[g], v);
    }
    for (uint j = 0; j < 8; j++)
        staging[j * 8u + c] = v[j];
}

// A_STAGES: 1 (fused fp4/u4) or 2 (trellis: the next A tile loads while
// this one is used). OWN_EPILOGUE: the epilogue block follows the staging
// blocks instead of reusing them.
template <int DEQ, int A_STAGES, bool OWN_EPILOGUE>
inline void mq_fused_gemm(device const half *A, thread const MqWeights &w, device half *C,
                          constant MqParams &p, threadgroup half *smem, uint2 tg, uint tid,
                          uint sg, uint lane)
{
    threadgroup half *As[2] = {smem, smem + (A_STAGES - 1) * TILE_M * TILE_K};
    threadgroup half *staging = smem + A_STAGES * TILE_M * TILE_K + sg * 64u;
    threadgroup half *epilogue = OWN_EPILOGUE ? staging + SIMDGROUPS * 64 : staging;
    const uint row0 = tg.y * uint(TILE_M), col0 = tg.x * uint(TILE_N);
    const uint sg_row = (sg / uint(SG_COLS)) * uint(SG_M), sg_col = (sg % uint(SG_COLS)) * uint(SG_N);
    const uint fm = MQ_MIN(uint(FRAG_M), (uint(TILE_M) - sg_row) / 8u);
    const uint fn = MQ_MIN(uint(FRAG_N), (uint(TILE_N) - sg_col) / 8u);
    simdgroup_float8x8 acc[FRAG_M][FRAG_N];
    mq_zero_acc(acc);
    const uint ktiles = MQ_CDIV(p.K, uint(TILE_K));
    mq_load_a(As[0], A, row0, 0, p.K, p, tid);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint kt = 0; kt < ktiles; kt++) {
        const uint cur = A_STAGES == 2 ? (kt & 1u) : 0u, k0 = kt * uint(TILE_K);
        if (A_STAGES == 2 && kt + 1 < ktiles)
            mq_load_a(As[cur ^ 1u], A, row0, k0 + uint(TILE_K), p.K, p, tid);
        for (uint kk = 0; kk < uint(K_STEPS); kk++) {
            for (uint ni = 0; ni < fn; ni++) {
                if (lane < 8u)
                    mq_decode_column<DEQ>(w, p, k0 + kk * 8u, col0 + sg_col + ni * 8u + lane, lane,
                                          staging);
                simdgroup_barrier(mem_flags::mem_threadgroup);
                simdgroup_half8x8 b;
                simdgroup_load(b, staging, 8);
                for (uint mi = 0; mi < fm; mi++) {
                    simdgroup_half8x8 a;
                    simdgroup_load(a, As[cur] + (sg_row + mi * 8u) * uint(TILE_K) + kk * 8u, TILE_K);
                    simdgroup_multiply_accumulate(acc[mi][ni], a, b, acc[mi][ni]);
                }
                simdgroup_barrier(mem_flags::mem_threadgroup); // staging is rewritten next
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (A_STAGES == 1 && kt + 1 < ktiles) {
            mq_load_a(As[0], A, row0, k0 + uint(TILE_K), p.K, p, tid);
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
    }
    // the epilogue: each fragment as half through the epilogue block
    for (uint mi = 0; mi < fm; mi++)
        for (uint ni = 0; ni < fn; ni++) {
            simdgroup_half8x8 h;
            h.thread_elements()[0] = half(acc[mi][ni].thread_elements()[0]);
            h.thread_elements()[1] = half(acc[mi][ni].thread_elements()[1]);
            simdgroup_store(h, epilogue, 8);
            simdgroup_barrier(mem_flags::mem_threadgroup);
            for (uint e = lane; e < 64u; e += 32u) {
                const uint r = row0 + sg_row + mi * 8u + e / 8u;
                const uint c = col0 + sg_col + ni * 8u + e % 8u;
                if (r < p.M && c < p.N)
                    C[r * p.N + c] = epilogue[e];
            }
            simdgroup_barrier(mem_flags::mem_threadgroup);
        }
}

#endif
