// mq_lane_trellis.h - what the lane kernel (mq_lane.h) does differently for
// the trellis formats (lane_trellis.metal, MQ_LANE_TRELLIS): a super-block
// is 16 columns x 128 K (kernels/layout_lane.c), 16, 24 or 32 bytes per
// lane, of which a simdgroup's 64-K unit (LANE_KSB) takes one half; a pair's
// two indices sit next to each other, so one lookup in a pair codebook
// (LANE_LUT_ENTRIES float2 in threadgroup memory, built from the grid at the
// start) gives both levels; the scale (FP32 tscale x sv, the layout's
// lane_scales) multiplies them in float and the pair is rounded to FP16 once,
// exactly as the fused trellis kernels round grid x tscale x su x sv; the
// signs su are put on the activations instead (the A tile's sign bits
// flipped once per K tile in threadgroup memory: su is +-1, so the products
// are the same bits).
#ifndef MQ_LANE_TRELLIS_H
#define MQ_LANE_TRELLIS_H

#include "mq_metal.h"

#define LANE_LUT_ENTRIES (1 << (2 * TRELLIS_BITS)) // pair codes: 16, 64, 256
#define LANE_TR_WORDS (64 * TRELLIS_BITS)          // uints of a 16 x 128 super-block

// Entry c of the pair codebook: the levels of the pair whose code is c (b=2:
// idx0 | idx1 << 2; b=4: idx0 | idx1 << 4; b=3: the low two bits of each as
// b=2, then bit 2 of idx0 and of idx1 at bits 4 and 5), clamped to the
// codebook (indices are validated < n_levels when loaded; the clamp keeps a
// bad one inside the table).
inline void mq_lane_lut_fill(threadgroup float2 *lut, device const float *grid, uint n_levels,
                             uint tid)
{
    for (uint c = tid; c < uint(LANE_LUT_ENTRIES); c += uint(THREADS)) {
#if TRELLIS_BITS == 3
        const uint i0 = (c & 3u) | ((c >> 2) & 4u), i1 = ((c >> 2) & 3u) | ((c >> 3) & 4u);
#else
        const uint i0 = c & ((1u << TRELLIS_BITS) - 1u), i1 = c >> TRELLIS_BITS;
#endif
        lut[c] = float2(grid[min(i0, n_levels - 1u)], grid[min(i1, n_levels - 1u)]);
    }
}

// Lane L's words of half h (K 64h..64h+63) of the super-block at sb: b=4 the
// uint4 of plane h; b=2 and b=3 words 2h and 2h + 1 of the lane's uint4 (x,
// y), b=3 also the lane's word h of the bit-2 plane (z).
inline uint4 mq_lane_tr_words(device const uint *sb, uint h, uint L)
{
#if TRELLIS_BITS == 4
    return ((device const uint4 *)(sb + h * 128u))[L];
#else
    const uint2 lo = ((device const uint2 *)sb)[L * 2u + h];
    uint hi = 0u;
#if TRELLIS_BITS == 3
    hi = sb[128u + L * 2u + h];
#endif
    return uint4(lo.x, lo.y, hi, 0u);
#endif
}

// The same from a super-block copied into threadgroup memory (loaded as
// float4 bits and uints: the types every compiler of this source loads from
// there whole).
inline uint4 mq_lane_tr_words_tg(threadgroup const uint *sb, uint h, uint L)
{
#if TRELLIS_BITS == 4
    return as_type<uint4>(((threadgroup const float4 *)(sb + h * 128u))[L]);
#else
    uint hi = 0u;
#if TRELLIS_BITS == 3
    hi = sb[128u + L * 2u + h];
#endif
    return uint4(sb[L * 4u + 2u * h], sb[L * 4u + 2u * h + 1u], hi, 0u);
#endif
}

// The code of pair q (column half q & 1, K half q >> 1) of 16-K atom w of
// the unit's words cw.
inline uint mq_lane_tr_code(uint4 cw, uint w, uint q)
{
#if TRELLIS_BITS == 4
    const uint word = w == 0u ? cw.x : w == 1u ? cw.y : w == 2u ? cw.z : cw.w;
    return (word >> (8u * q)) & 0xffu;
#else
    const uint word = w < 2u ? cw.x : cw.y;
    uint c = (word >> (16u * (w & 1u) + 4u * q)) & 0xfu;
#if TRELLIS_BITS == 3
    c |= ((cw.z >> (8u * w + 2u * q)) & 3u) << 4;
#endif
    return c;
#endif
}

// The pair's two weights: its levels times the column's scale in float,
// rounded to FP16 once.
inline half2 mq_lane_tr_pair(threadgroup const float2 *lut, uint code, float scale)
{
    const float2 g = lut[code];
    return half2(half(g.x * scale), half(g.y * scale));
}

// The signs su on the A tile at As (K tile k0, slice end k_end): each thread
// flips the sign bits of the 16-byte chunks it put there itself (the chunks
// i = tid + j x THREADS of mq_put_a and mq_copy_a_tile), after they landed
// and before the barrier that shows them to the others. Chunks from k_end on
// are zero and their su is not read.
inline void mq_lane_a_signs(threadgroup half *As, device const float *su, uint k0, uint k_end,
                            uint tid)
{
    for (uint i = tid; i < uint(A_CHUNKS); i += uint(THREADS)) {
        const uint k = k0 + mq_a_chunk_k(i);
        if (k >= k_end)
            continue;
        const float4 s0 = *(device const float4 *)(su + k);
        const float4 s1 = *(device const float4 *)(su + k + 4u);
        const uint4 m = uint4(
            ((as_type<uint>(s0.x) >> 16) & 0x8000u) | (as_type<uint>(s0.y) & 0x80000000u),
            ((as_type<uint>(s0.z) >> 16) & 0x8000u) | (as_type<uint>(s0.w) & 0x80000000u),
            ((as_type<uint>(s1.x) >> 16) & 0x8000u) | (as_type<uint>(s1.y) & 0x80000000u),
            ((as_type<uint>(s1.z) >> 16) & 0x8000u) | (as_type<uint>(s1.w) & 0x80000000u));
        threadgroup float4 *at =
            (threadgroup float4 *)(As + mq_a_chunk_row(i) * uint(A_LD) + mq_a_chunk_k(i));
        const uint4 v = as_type<uint4>(*at); // (per component: vectors here have no operators)
        *at = as_type<float4>(uint4(v.x ^ m.x, v.y ^ m.y, v.z ^ m.z, v.w ^ m.w));
    }
}

#endif
