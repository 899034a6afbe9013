// mq_lane_trellis.h - what the lane kernel (mq_lane.h) does differently for
// the trellis formats (lane_trellis.metal, MQ_LANE_TRELLIS): a super-block
// is 16 columns x 128 K (kernels/layout_lane.c), 16, 24 or 32 bytes per
// lane, a simdgroup's unit of a K tile (LANE_KSB). A pair's two indices sit
// next to each other, so one lookup in a pair codebook (4^bits half2 in
// threadgroup memory, the grid's levels rounded to FP16, built when the
// kernel starts; trellis3's in LANE_LUT_COPIES copies) gives both; the MMAs
// take these unscaled levels, and each 32 K's products are scaled once per
// output element by the FP32 scale (tscale x sv, the layout's lane_scales)
// and added to the sums. Each weight is then its level rounded to FP16 times
// the exact scale: the relative error the verification bound allows a weight
// rounded to FP16 (harness/measure.c), as the fused trellis kernels' FP16
// grid x tscale x su x sv has; scaling every pair instead (two FP32 products
// and a conversion per pair) made the kernel 1.28-1.31x slower on an H100
// (results/h100/lane/trellis). The signs su are put on the activations (the
// A tile's sign bits flipped once per K tile in threadgroup memory: su is
// +-1, so the products are the same bits).
#ifndef MQ_LANE_TRELLIS_H
#define MQ_LANE_TRELLIS_H

#include "mq_metal.h"

#define LANE_LUT_ENTRIES (1 << (2 * TRELLIS_BITS)) // pair codes: 16, 64, 256
// Copies of the codebook, entry c's copies side by side, lane l reading
// copy l % LANE_LUT_COPIES (its byte offset or-ed into the entry's, whose
// low bits are zero: LANE_LUT_LANE in mq_lane.h). b=3: 32 copies (8 KiB)
// give each lane its own bank, so a simdgroup's 32 lookups are one
// shared-memory wavefront whatever codes they hold (one copy of 64 entries
// spans two words a bank: two wavefronts whenever two lanes want the two
// words of one bank). b=2's 16 entries take one word of half the banks, so
// one copy never conflicts; b=4 keeps one copy too (32 would be 32 KiB).
#if TRELLIS_BITS == 3
#define LANE_LUT_SHIFT 5
#else
#define LANE_LUT_SHIFT 0
#endif
#define LANE_LUT_COPIES (1 << LANE_LUT_SHIFT)
#define LANE_TR_WORDS (64 * TRELLIS_BITS)          // uints of a 16 x 128 super-block

// Entry c of the pair codebook: the levels of the pair whose code is c
// (idx0 | idx1 << bits), each rounded to FP16, as a half2's bits; clamped to
// the codebook (indices are validated < n_levels when loaded; the clamp
// keeps a bad one inside the table).
inline void mq_lane_lut_fill(threadgroup uint *lut, device const float *grid, uint n_levels,
                             uint tid)
{
    for (uint e = tid; e < uint(LANE_LUT_ENTRIES * LANE_LUT_COPIES); e += uint(THREADS)) {
        const uint c = e >> LANE_LUT_SHIFT;
        const uint i0 = c & ((1u << TRELLIS_BITS) - 1u), i1 = c >> TRELLIS_BITS;
        half2 v; // (set per component: strict MSL's vectors have no such constructor)
        v.x = half(grid[min(i0, n_levels - 1u)]);
        v.y = half(grid[min(i1, n_levels - 1u)]);
        lut[e] = as_type<uint>(v);
    }
}

// Lane L's words of the super-block at sb: b=2 its uint4 (cw), b=3 its
// uint4 and its uint2 of the 64 words after the first 128 (cx.xy: the six
// words its codes run through), b=4 its uint4 of each plane (cw, cx).
inline void mq_lane_tr_words(device const uint *sb, uint L, thread uint4 &cw, thread uint4 &cx)
{
    cw = ((device const uint4 *)sb)[L];
#if TRELLIS_BITS == 4
    cx = ((device const uint4 *)(sb + 128u))[L];
#elif TRELLIS_BITS == 3
    const uint2 hi = ((device const uint2 *)(sb + 128u))[L];
    cx.x = hi.x; // (set per component: strict MSL's vectors have no such constructor)
    cx.y = hi.y;
#endif
}

// The same from a super-block copied into threadgroup memory (loaded as
// float4 and float2 bits: whole, with no bank conflict).
inline void mq_lane_tr_words_tg(threadgroup const uint *sb, uint L, thread uint4 &cw,
                                thread uint4 &cx)
{
    cw = as_type<uint4>(((threadgroup const float4 *)sb)[L]);
#if TRELLIS_BITS == 4
    cx = as_type<uint4>(((threadgroup const float4 *)(sb + 128u))[L]);
#elif TRELLIS_BITS == 3
    const uint2 hi = as_type<uint2>(((threadgroup const float2 *)(sb + 128u))[L]);
    cx.x = hi.x;
    cx.y = hi.y;
#endif
}

// (x >> s) & m for a shift s that may be negative (a left shift): s is a
// constant once the loops unroll, so one shift and one mask.
inline uint mq_lane_bits_at(uint x, int s, uint m)
{
    return (s >= 0 ? x >> uint(s) : x << uint(-s)) & m;
}

// Word t (0-5) of the lane's six trellis3 words: cw, then cx.x and cx.y.
inline uint mq_lane_tr_word6(uint4 cw, uint4 cx, uint t)
{
    return t < 4u ? mq_lane_word(cw, t) : t == 4u ? cx.x : cx.y;
}

// The byte offset in the pair codebook of the entry of pair q (column half
// q & 1, K half q >> 1) of 16-K atom w (0-7) of the super-block's words
// (kernels/layout_lane.c, slot_bits): its code times 4 LANE_LUT_COPIES
// (the caller ors in its lane's copy), one shift and one mask (w and q are
// constants once the loops unroll). trellis3's six-bit codes run through
// the lane's six words, pair 4w + q at bit 6 (4w + q): where one runs into
// the next word, a funnel shift of the two (one instruction on NVIDIA's
// SHF). The split planes before (the low two bits of each index, then a
// plane of their third bits) took two shifts, two masks and an or a pair.
inline uint mq_lane_tr_entry(uint4 cw, uint4 cx, uint w, uint q)
{
    const int up = 2 + LANE_LUT_SHIFT; // code x 4 x copies
#if TRELLIS_BITS == 4
    const uint word = w < 4u ? mq_lane_word(cw, w) : mq_lane_word(cx, w - 4u);
    return mq_lane_bits_at(word, int(8u * q) - up, 0xffu << up);
#elif TRELLIS_BITS == 3
    const uint at = 24u * w + 6u * q, t = at / 32u, s = at % 32u;
    const uint x = mq_lane_tr_word6(cw, cx, t);
    if (s + 6u <= 32u)
        return mq_lane_bits_at(x, int(s) - up, 0x3fu << up);
    // (s is 28 or 30 here: both shifts in range)
    return ((x >> (s - uint(up))) | (mq_lane_tr_word6(cw, cx, t + 1u) << (32u + uint(up) - s))) &
           (0x3fu << up);
#else
    return mq_lane_bits_at(mq_lane_word(cw, w / 2u), int(16u * (w % 2u) + 4u * q) - up,
                           0xfu << up);
#endif
}

// The pair's two levels (FP16) from its entry's byte offset: one lookup.
inline half2 mq_lane_tr_pair(threadgroup const uint *lut, uint entry)
{
    return as_type<half2>(*(threadgroup const uint *)((threadgroup const uchar *)lut + entry));
}

// The signs su of the K where this thread's 16-byte A chunks start, 8
// floats: every chunk i = tid + j x THREADS of a thread (mq_put_a,
// mq_copy_a_tile) sits at the same K of the tile, since THREADS (32 per
// 32 columns and 128-K super-block) is a multiple of a tile row's TILE_K / 8
// chunks, so one load serves them all. The staged K loop loads a tile's signs
// one tile ahead, plain loads in flight while the tile before is multiplied:
// loaded as the A tile landed, before the barrier, they left every K tile
// waiting on one device-memory round trip.
struct MqLaneSigns {
    float4 s0, s1;
};
static_assert(THREADS % (TILE_K / 8) == 0, "a thread's A chunks share one K of the tile");

// The signs of K tile k0 (slice end k_end) for this thread's chunks; zeros
// past the slice (whose chunks are zero and keep their bits).
inline void mq_lane_signs_load(thread MqLaneSigns &g, device const float *su, uint k0,
                               uint k_end, uint tid)
{
    const uint k = k0 + mq_a_chunk_k(tid);
    g.s0 = float4(0.0f);
    g.s1 = float4(0.0f);
    if (k < k_end) {
        g.s0 = *(device const float4 *)(su + k);
        g.s1 = *(device const float4 *)(su + k + 4u);
    }
}

// The signs g (mq_lane_signs_load of the same tile) on the A tile at As (K
// tile k0, slice end k_end): each thread flips the sign bits of the chunks it
// put there itself, after they landed and before the barrier that shows them
// to the others. Chunks from k_end on are zero and stay so.
inline void mq_lane_a_signs(threadgroup half *As, thread const MqLaneSigns &g, uint k0,
                            uint k_end, uint tid)
{
    if (k0 + mq_a_chunk_k(tid) >= k_end)
        return;
    // (per component: the executor's vectors have no operators, strict MSL's
    // no such constructor)
    const uint m0 = ((as_type<uint>(g.s0.x) >> 16) & 0x8000u) | (as_type<uint>(g.s0.y) & 0x80000000u);
    const uint m1 = ((as_type<uint>(g.s0.z) >> 16) & 0x8000u) | (as_type<uint>(g.s0.w) & 0x80000000u);
    const uint m2 = ((as_type<uint>(g.s1.x) >> 16) & 0x8000u) | (as_type<uint>(g.s1.y) & 0x80000000u);
    const uint m3 = ((as_type<uint>(g.s1.z) >> 16) & 0x8000u) | (as_type<uint>(g.s1.w) & 0x80000000u);
    MQ_UNROLL
    for (uint j = 0, i = tid; j < uint(A_PER_THREAD); j++, i += uint(THREADS)) {
        if (A_CHUNKS % THREADS != 0 && i >= uint(A_CHUNKS))
            break;
        threadgroup float4 *at =
            (threadgroup float4 *)(As + mq_a_chunk_row(i) * uint(A_LD) + mq_a_chunk_k(i));
        uint4 v = as_type<uint4>(*at);
        v.x ^= m0;
        v.y ^= m1;
        v.z ^= m2;
        v.w ^= m3;
        *at = as_type<float4>(v);
    }
}

#endif
