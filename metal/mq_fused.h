// mq_fused.h - the fused dequant-GEMM body (seed 002) shared by the fused
// fp4/u4 kernels and the trellis kernels: the A tile is staged in
// threadgroup memory (double-buffered for trellis, as its recipe says; rows
// padded by MQ_TILE_PAD; the next tile fetched into registers while this
// one is multiplied), but B never is: each simdgroup decodes the 8x8 B
// sub-tile it is about to use into its own 128-byte staging block, all 32
// lanes at once (lane l: column l % 8, K rows 2 (l / 8) and the next: half
// of one packed word, or two codebook lookups for trellis), and the loads
// of the next sub-tile are issued before the barrier that hands this one to
// the MMA; simdgroup_barrier only. Accumulators leave as half through a
// 128-byte epilogue block per simdgroup: the staging block itself (fused
// fp4/u4, seed 002), or a block of its own after all the staging blocks
// (trellis, seed 004's epilogue_staging).
#ifndef MQ_FUSED_H
#define MQ_FUSED_H

#include "mq_metal.h"

enum { MQ_DEQ_FP4 = 0, MQ_DEQ_U4 = 1, MQ_DEQ_TRELLIS = 2 };

// What one lane loads for its two weights of a sub-tile: fp4/u4 the packed
// word shifted to its two codes, the group's scale and zero point; trellis
// the two indices, the group's scale, su of both rows and sv of the column.
// ok: inside K and N (else the weights are zero).
struct MqPairRaw {
    uint bits;
    half scale;
    uchar zero;
    uint i0, i1;
    float ts, su0, su1, sv;
    bool ok;
};

// The loads for weights (k + j, n) and (k + j + 1, n), k the sub-tile's
// first K row (a multiple of 8), j even.
template <int DEQ>
inline MqPairRaw mq_fetch_pair(thread const MqWeights &w, constant MqParams &p, uint k, uint n,
                               uint j)
{
    MqPairRaw r;
    r.bits = 0u;
    r.scale = half(0.0h);
    r.zero = 0;
    r.i0 = r.i1 = 0u;
    r.ts = r.su0 = r.su1 = r.sv = 0.0f;
    r.ok = n < p.N && k < p.K;
    if (!r.ok)
        return r;
    if (DEQ == MQ_DEQ_TRELLIS) {
        const uint tiles_n = MQ_CDIV(p.N, 16u), kk = k + j;
        r.i0 = mq_trellis_index(w.indices, tiles_n, kk, n);
        r.i1 = mq_trellis_index(w.indices, tiles_n, kk + 1u, n);
        r.ts = w.tscales[mq_group_of(kk, p) * p.N + n]; // 16 | group: one scale for the pair
        r.su0 = w.su[kk];
        r.su1 = w.su[kk + 1u];
        r.sv = w.sv[n];
    } else {
        const uint g = mq_group_of(k, p) * p.N + n; // 8 | group: one scale for the word
        r.bits = w.packed[(k / 8u) * p.N + n] >> (4u * j);
        r.scale = w.scales[g];
        if (DEQ == MQ_DEQ_U4)
            r.zero = w.zeros[g];
    }
    return r;
}

// The pair's two weights into rows j, j + 1 of staging column c.
template <int DEQ>
inline void mq_decode_pair(thread const MqPairRaw &r, thread const MqWeights &w,
                           constant MqParams &p, uint c, uint j, threadgroup half *staging)
{
    half v0 = half(0.0h), v1 = half(0.0h);
    if (r.ok) {
        if (DEQ == MQ_DEQ_TRELLIS) {
            v0 = half(w.grid[min(r.i0, p.n_levels - 1u)] * r.ts * r.su0 * r.sv);
            v1 = half(w.grid[min(r.i1, p.n_levels - 1u)] * r.ts * r.su1 * r.sv);
        } else if (DEQ == MQ_DEQ_U4) {
            v0 = mq_u4_to_half(r.bits & 0xfu, r.zero) * r.scale;
            v1 = mq_u4_to_half((r.bits >> 4) & 0xfu, r.zero) * r.scale;
        } else {
            v0 = mq_fp4_to_half(r.bits & 0xfu) * r.scale;
            v1 = mq_fp4_to_half((r.bits >> 4) & 0xfu) * r.scale;
        }
    }
    staging[j * 8u + c] = v0;
    staging[(j + 1u) * 8u + c] = v1;
}

// A_STAGES: 1 (fused fp4/u4) or 2 (trellis: the next A tile is stored into
// the other buffer before the K tile's closing barrier). OWN_EPILOGUE: the
// epilogue block follows the staging blocks instead of reusing them.
template <int DEQ, int A_STAGES, bool OWN_EPILOGUE>
inline void mq_fused_gemm(device const half *A, thread const MqWeights &w, device half *C,
                          constant MqParams &p, threadgroup half *smem, uint2 tg, uint tid,
                          uint sg, uint lane)
{
    threadgroup half *As[2] = {smem, smem + (A_STAGES - 1) * TILE_M * A_LD};
    threadgroup half *staging = smem + A_STAGES * TILE_M * A_LD + sg * 64u;
    threadgroup half *epilogue = OWN_EPILOGUE ? staging + SIMDGROUPS * 64 : staging;
    const uint row0 = tg.y * uint(TILE_M), col0 = tg.x * uint(TILE_N);
    const uint sg_row = (sg / uint(SG_COLS)) * uint(SG_M), sg_col = (sg % uint(SG_COLS)) * uint(SG_N);
    // the simdgroup's fragment columns inside the tile (all FRAG_N but at a ragged edge)
    const uint fn = MQ_MIN(uint(FRAG_N), (uint(TILE_N) - sg_col) / 8u);
    const uint lc = lane % 8u, lj = (lane / 8u) * 2u; // the lane's column and rows of a sub-tile
    const uint n0 = col0 + sg_col + lc;
    simdgroup_float8x8 acc[FRAG_M][FRAG_N];
    mq_zero_acc(acc);
    const uint ktiles = MQ_CDIV(p.K, uint(TILE_K));
    MqARegs ra;
    mq_fetch_a(ra, A, row0, 0, p.K, p, tid);
    mq_put_a(As[0], ra, A, row0, 0, p.K, p, tid);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    MqPairRaw raw = mq_fetch_pair<DEQ>(w, p, 0, n0, lj);
    for (uint kt = 0; kt < ktiles; kt++) {
        const uint cur = A_STAGES == 2 ? (kt & 1u) : 0u, k0 = kt * uint(TILE_K);
        const uint k1 = k0 + uint(TILE_K);
        const bool more = kt + 1 < ktiles;
        if (more) // the next A tile's loads, in flight during this tile's work
            mq_fetch_a(ra, A, row0, k1, p.K, p, tid);
        for (uint kk = 0; kk < uint(K_STEPS); kk++) {
            MQ_UNROLL
            for (uint ni = 0; ni < uint(FRAG_N); ni++) {
                if (!MQ_FRAG_IN_N(sg_col, ni))
                    continue;
                mq_decode_pair<DEQ>(raw, w, p, lc, lj, staging);
                // the next sub-tile's loads (the next column block, else the next
                // 8 K rows), issued before the barrier
                const bool last_col = ni + 1u >= fn;
                raw = mq_fetch_pair<DEQ>(w, p, k0 + kk * 8u + (last_col ? 8u : 0u),
                                         n0 + (last_col ? 0u : (ni + 1u) * 8u), lj);
                simdgroup_barrier(mem_flags::mem_threadgroup);
                simdgroup_half8x8 b;
                simdgroup_load(b, staging, 8);
                MQ_UNROLL
                for (uint mi = 0; mi < uint(FRAG_M); mi++) {
                    if (!MQ_FRAG_IN_M(sg_row, mi))
                        continue;
                    simdgroup_half8x8 a;
                    simdgroup_load(a, As[cur] + (sg_row + mi * 8u) * uint(A_LD) + kk * 8u, A_LD);
                    simdgroup_multiply_accumulate(acc[mi][ni], a, b, acc[mi][ni]);
                }
                simdgroup_barrier(mem_flags::mem_threadgroup); // staging is rewritten next
            }
        }
        if (A_STAGES == 2 && more) // the other buffer was last read before the previous barrier
            mq_put_a(As[cur ^ 1u], ra, A, row0, k1, p.K, p, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (A_STAGES == 1 && more) {
            mq_put_a(As[0], ra, A, row0, k1, p.K, p, tid);
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
    }
    // the epilogue: each fragment as half through the epilogue block
    MQ_UNROLL
    for (uint mi = 0; mi < uint(FRAG_M); mi++) {
        MQ_UNROLL
        for (uint ni = 0; ni < uint(FRAG_N); ni++) {
            if (!MQ_FRAG_IN_M(sg_row, mi) || !MQ_FRAG_IN_N(sg_col, ni))
                continue;
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
}

#endif
