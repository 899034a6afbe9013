// mq_gemv.h - the decode path's body (marlin_gemv_decode.metal for fp4
// and u4, gemv_trellis_decode.metal for the trellis formats) (M up to 16 rows per
// threadgroup): no simdgroup matrices and no threadgroup staging, the
// weights streamed once at the width the memory system wants.
//
//   - Each lane owns 4 adjacent columns and 8 K values of a step: one
//     16-byte load of 4 packed words (fp4/u4, [K/8][N] as the other kernels
//     read it), or 8 rows of 4 indices (trellis: the tile's 8 rows, BITS
//     16-byte loads, shared by the 4 lanes of its columns). Lanes along N come first
//     (TILE_N / 4 of them, so a simdgroup reads TILE_N * 4 contiguous bytes
//     per packed row), the rest of the 32 lanes and the threadgroup's
//     simdgroups split the K step (TILE_K = 8 K x 32 lanes x simdgroups /
//     (TILE_N / 4)).
//   - GEMV_PREFETCH: each step's weights and scales are loaded one step
//     ahead, while the step before is decoded.
//   - Decoding stays in registers and in float: fp4 codes become FP16 bit
//     patterns two at a time ((c & 7) << 9 | (c & 8) << 12 is the code's
//     value times 2^-14, exact, subnormals included; the 2^14 goes into the
//     scale), u4 codes become q - z exactly through the 0x4B000000 float
//     magic (2^23 + q, minus 2^23 + z), trellis indices look up a codebook
//     copied to threadgroup memory once (a register table indexed at run
//     time would live in memory on either compiler anyway): at 2 and 3 bits
//     two codes per load from a table of every pair of levels
//     (gemv_trellis_lut), at 4 bits the 16 levels one code per load.
//   - Scales leave the inner loop: each column's 8-term dot product is
//     scaled once (fp4/u4 scale; trellis tscale x sv), trellis su signs are
//     folded into the activations. Every product of an activation and a
//     code value is exact in float, so the sums round no more than the
//     matrix kernels' (harness/measure.c's bound).
//   - K partials meet by simd_shuffle_xor across the lanes along K, then
//     across simdgroups in threadgroup memory, in a fixed order.
// The grid is (n tiles, m tiles), as the 2D kernels'.
#ifndef MQ_GEMV_H
#define MQ_GEMV_H

#define MQ_GEMV 1
#include "mq_metal.h"

#define GEMV_LN (TILE_N / 4)   // lanes along N, 4 columns each
#define GEMV_LK (32 / GEMV_LN) // lanes along K, 8 K each
#ifndef GEMV_PREFETCH
#define GEMV_PREFETCH 1 // the next K step's loads issued before this one's decode
#endif

static_assert(TILE_M >= 1 && TILE_M <= 16, "the decode path holds 1..16 rows in registers");
static_assert(TILE_N == 16 || TILE_N == 32 || TILE_N == 64 || TILE_N == 128,
              "a simdgroup spans TILE_N columns, 4 per lane");
static_assert(TILE_K % (8 * GEMV_LK) == 0 && SIMDGROUPS >= 1,
              "each simdgroup takes 8 K x its lanes along K of a step");

enum { GEMV_FP4 = 0, GEMV_U4 = 1, GEMV_TRELLIS = 2 };

// The trellis lookup table in threadgroup memory. BITS <= 3: pairs of
// levels, entry e = (cb[e % L], cb[e / L]) for L = 2^BITS, i.e. the two
// codes of adjacent columns as they sit in a tile row, looked up by one
// 8-byte load; 16 copies, entry e of copy j at float2 e x 16 + j, and lane
// l reads copy l % 16, so whatever the codes the 16 lanes of a half
// simdgroup read 16 different 8-byte bank pairs of a 32-bank memory (one
// table: several entries of one bank pair per load). 2 KB at 2 bits, 8 KB
// at 3. BITS = 4: the 16 levels (256 pairs x 16 copies would be 32 KB).
#define GEMV_LUT_PAIRS(bits) ((bits) <= 3)
#define GEMV_LUT_COPIES 16u
#define GEMV_LUT_FLOATS(bits) (GEMV_LUT_PAIRS(bits) ? 2 * 16 << (2 * (bits)) : 16)

// Fill lut (GEMV_LUT_FLOATS(BITS) floats) from the grid's n_levels levels
// (an index at or above them reads the last level: indices are validated
// when loaded, the clamp keeps a bad one inside the table), all threads of
// the threadgroup taking part; a barrier must follow.
template <int BITS>
inline void gemv_trellis_lut(threadgroup float *lut, device const float *grid, uint n_levels,
                             uint tid)
{
    const uint L = 1u << BITS;
    if (GEMV_LUT_PAIRS(BITS)) {
        for (uint i = tid; i < 16u * L * L; i += uint(THREADS)) {
            const uint e = i / GEMV_LUT_COPIES;
            lut[2u * i] = grid[min(e % L, n_levels - 1u)];
            lut[2u * i + 1u] = grid[min(e / L, n_levels - 1u)];
        }
    } else {
        for (uint i = tid; i < 16u; i += uint(THREADS))
            lut[i] = grid[min(i, n_levels - 1u)];
    }
}

// The 8 activations at A + at .. at + 7 (one 16-byte load) as floats.
inline void gemv_load_a(device const half *A, uint at, thread float *a)
{
    const uint4 v = *(device const uint4 *)(A + at);
    for (uint i = 0; i < 4u; i++) {
        const uint x = v[i];
        a[2u * i] = float(as_type<half>(ushort(x & 0xffffu)));
        a[2u * i + 1u] = float(as_type<half>(ushort(x >> 16)));
    }
}

// FP4 E2M1 codes of one packed word, k0..k0+7, as value x 2^-14: nibbles j
// and j + 4 sit 16 bits apart, so one shift serves both halves of an FP16
// pair (exponent and mantissa bits to 9..11, the sign to 15).
inline void gemv_fp4_word(uint w, thread float *q)
{
    for (uint j = 0; j < 4u; j++) {
        const uint t = w >> (4u * j);
        const uint hb = ((t << 9) & 0x0E000E00u) | ((t << 12) & 0x80008000u);
        q[j] = float(as_type<half>(ushort(hb & 0xffffu)));
        q[j + 4u] = float(as_type<half>(ushort(hb >> 16)));
    }
}

// u4 codes of one packed word as q - z, exactly: the float 2^23 + q minus
// zb = 2^23 + z. (Two at a time through the 0x6400 half2 magic and one
// packed subtraction measured no better on the H100: 1.10x at N=14336
// K=4096, 0.90-1.00x at N=4096 K=14336, M=1; and with more rows the
// compiler converted the pairs at every row's products and spilled.)
inline void gemv_u4_word(uint w, float zb, thread float *q)
{
    for (uint j = 0; j < 8u; j++)
        q[j] = as_type<float>(((w >> (4u * j)) & 0xfu) | 0x4B000000u) - zb;
}

// A trellis tile set is 16 rows x 16 columns of BITS-bit indices, LSB-first
// (seed 004's packing): 8 rows of a tile are 16 x BITS contiguous bytes,
// 16-byte aligned, loaded as BITS uint4 (the 4 lanes of a tile's columns
// load the same bytes). The 4 indices of row r (0..7) at columns
// 4j..4j+3 start at bit 16 BITS r + 4 BITS j; d = 4 BITS j is the lane's
// part, the rest is known when unrolled, and the 4 BITS bits never reach
// past the word after the first: a 64-bit window.
template <int BITS>
inline uint gemv_trellis_row(thread const uint4 *tv, uint r, uint d)
{
    const uint sb = r * 16u * uint(BITS);
    const uint w0 = sb / 32u, w1 = min(w0 + 1u, 4u * uint(BITS) - 1u);
    const ulong x = ulong(tv[w0 / 4u][int(w0 % 4u)]) | (ulong(tv[w1 / 4u][int(w1 % 4u)]) << 32);
    return uint(x >> ((sb % 32u) + d));
}

// One K step's loads for a lane: its weights (a packed word per column, or
// the trellis tile rows), its columns' scales, u4's zero points, trellis su.
struct GemvStep {
    uint4 wv;
    uint4 tv[4]; // BITS used
    float sc[4];
    float zb[4];
    float4 su0, su1;
    uint k;
    bool ok;
};

// Step s of the lane's (k = k_lo + s x TILE_K + kl): issued, not waited on.
template <int DEQ, int BITS>
inline void gemv_load_step(thread const MqWeights &w, uint N, uint k_lo, uint k_hi, uint gshift,
                           uint n0, bool cols, uint kl, thread const float *colf, uint s,
                           thread GemvStep &st)
{
    const uint tiles_n = (N + 15u) / 16u;
    const uint k = k_lo + s * uint(TILE_K) + kl;
    st.k = k;
    st.ok = cols && k < k_hi;
    if (!st.ok)
        return;
    const uint g = (k >> gshift) * N + n0;
    if (DEQ == GEMV_TRELLIS) {
        device const uint4 *blk = (device const uint4 *)(
            w.indices + ((k / 16u) * tiles_n + n0 / 16u) * (32u * uint(BITS)) +
            (k % 16u) * (2u * uint(BITS)));
        for (uint i = 0; i < uint(BITS); i++)
            st.tv[i] = blk[i];
        const float4 ts = *(device const float4 *)(w.tscales + g);
        for (uint c = 0; c < 4u; c++)
            st.sc[c] = ts[int(c)] * colf[c];
        st.su0 = *(device const float4 *)(w.su + k);
        st.su1 = *(device const float4 *)(w.su + k + 4u);
    } else {
        st.wv = *(device const uint4 *)(w.packed + (k / 8u) * N + n0);
        const uint2 sh = *(device const uint2 *)(w.scales + g);
        for (uint c = 0; c < 4u; c++) {
            const uint bits = (sh[int(c / 2u)] >> (16u * (c % 2u))) & 0xffffu;
            st.sc[c] = float(as_type<half>(ushort(bits))) * colf[c];
        }
        if (DEQ == GEMV_U4) {
            const uint z4 = *(device const uint *)(w.zeros + g);
            for (uint c = 0; c < 4u; c++)
                st.zb[c] = 8388608.0f + float((z4 >> (8u * c)) & 0xffu);
        }
    }
}

// A loaded step decoded and multiplied into acc (see mq_gemv_acc).
template <int DEQ, int BITS, bool PAIRS>
inline void gemv_use_step(device const half *A, uint ld, uint row0, thread const uint *tok,
                          uint rows, uint n0, threadgroup const float *lut, uint lut_lo,
                          thread const GemvStep &st, thread float (*acc)[4])
{
    if (!st.ok)
        return;
    float q[4][8];
    uint tr[8];
    if (DEQ == GEMV_TRELLIS)
        for (uint r = 0; r < 8u; r++)
            tr[r] = gemv_trellis_row<BITS>(st.tv, r, uint(BITS) * (n0 % 16u));
    if (DEQ == GEMV_TRELLIS && PAIRS) {
        // columns 2j and 2j + 1 of row r: one pair entry, its byte
        // offset e x 16 copies x 8 bytes + the lane's copy
        for (uint r = 0; r < 8u; r++)
            for (uint j = 0; j < 2u; j++) {
                const uint e = (tr[r] >> (2u * uint(BITS) * j)) & ((1u << (2 * BITS)) - 1u);
                const float2 v = *(threadgroup const float2 *)(
                    (threadgroup const char *)lut + ((e << 7) | lut_lo));
                q[2u * j][r] = v.x;
                q[2u * j + 1u][r] = v.y;
            }
    } else {
        for (uint c = 0; c < 4u; c++) {
            if (DEQ == GEMV_FP4)
                gemv_fp4_word(st.wv[int(c)], q[c]);
            else if (DEQ == GEMV_U4)
                gemv_u4_word(st.wv[int(c)], st.zb[c], q[c]);
            else
                for (uint r = 0; r < 8u; r++)
                    q[c][r] = lut[(tr[r] >> (uint(BITS) * c)) & ((1u << BITS) - 1u)];
        }
    }
    for (uint m = 0; m < uint(TILE_M); m++) {
        if (m >= rows)
            break;
        float a[8];
        gemv_load_a(A, (tok ? tok[m] : row0 + m) * ld + st.k, a);
        if (DEQ == GEMV_TRELLIS)
            for (uint r = 0; r < 4u; r++) {
                a[r] *= st.su0[int(r)];
                a[r + 4u] *= st.su1[int(r)];
            }
        for (uint c = 0; c < 4u; c++) {
            float dot = 0.0f;
            for (uint r = 0; r < 8u; r++)
                dot = metal::fma(a[r], q[c][r], dot);
            acc[m][c] = metal::fma(dot, st.sc[c], acc[m][c]);
        }
    }
}

// One lane's share of rows x 4 columns over K in [k_lo, k_hi): acc[m][c]
// += the products of row m of A (leading dimension ld: row0 + m, or tok[m]
// where tok is given, e.g. the MoE kernels' gathered tokens) with columns
// n0..n0+3, on this lane's steps (k = k_lo + kl, + TILE_K ...); rows past
// `rows` are not touched. cols: the lane has columns (N % 4 == 0: all 4 or
// none). lut: the trellis table (gemv_trellis_lut; PAIRS: its pair form,
// read at the copy of `lane`), else unused. With GEMV_PREFETCH the next
// step's weights are loaded before this step's are used, so a lane has a
// step's loads in flight while it decodes.
template <int DEQ, int BITS, bool PAIRS = false>
inline void mq_gemv_acc(device const half *A, uint ld, uint row0, thread const uint *tok, uint rows,
                        thread const MqWeights &w, uint N, uint k_lo, uint k_hi, uint gshift,
                        uint n0, bool cols, uint kl, threadgroup const float *lut, uint lane,
                        thread float (*acc)[4])
{
    static_assert(!PAIRS || GEMV_LUT_PAIRS(BITS), "pairs of levels at 2 and 3 bits only");
    // the byte offset of this lane's copy of pair entry 0
    const uint lut_lo = (lane % GEMV_LUT_COPIES) * 8u;
    float colf[4] = {1.0f, 1.0f, 1.0f, 1.0f}; // per column: 2^14 (fp4), sv (trellis)
    for (uint c = 0; c < 4u; c++) {
        if (DEQ == GEMV_FP4)
            colf[c] = 16384.0f;
        else if (DEQ == GEMV_TRELLIS && cols)
            colf[c] = w.sv[n0 + c];
    }
    const uint steps = (k_hi - k_lo + uint(TILE_K) - 1u) / uint(TILE_K);
#if GEMV_PREFETCH
    GemvStep cur, nxt;
    gemv_load_step<DEQ, BITS>(w, N, k_lo, k_hi, gshift, n0, cols, kl, colf, 0u, cur);
    for (uint s = 0; s < steps; s++) {
        if (s + 1u < steps)
            gemv_load_step<DEQ, BITS>(w, N, k_lo, k_hi, gshift, n0, cols, kl, colf, s + 1u, nxt);
        gemv_use_step<DEQ, BITS, PAIRS>(A, ld, row0, tok, rows, n0, lut, lut_lo, cur, acc);
        cur = nxt;
    }
#else
    for (uint s = 0; s < steps; s++) {
        GemvStep cur;
        gemv_load_step<DEQ, BITS>(w, N, k_lo, k_hi, gshift, n0, cols, kl, colf, s, cur);
        gemv_use_step<DEQ, BITS, PAIRS>(A, ld, row0, tok, rows, n0, lut, lut_lo, cur, acc);
    }
#endif
}

// acc summed over the lanes along K: every lane gets its columns' sums.
inline void mq_gemv_lane_sum(thread float (*acc)[4])
{
    for (uint off = uint(GEMV_LN); off < 32u; off *= 2u)
        for (uint m = 0; m < uint(TILE_M); m++)
            for (uint c = 0; c < 4u; c++)
                acc[m][c] += simd_shuffle_xor(acc[m][c], ushort(off));
}

// After mq_gemv_lane_sum: the simdgroup's sums into red [SIMDGROUPS][TILE_M]
// [TILE_N] (the lanes along K 0 write), to be added by mq_gemv_red_sum
// after a barrier.
inline void mq_gemv_red_put(thread float (*acc)[4], threadgroup float *red, uint sg, uint lane)
{
    const uint ln = lane % uint(GEMV_LN), lk = lane / uint(GEMV_LN);
    if (lk == 0u)
        for (uint m = 0; m < uint(TILE_M); m++)
            for (uint c = 0; c < 4u; c++)
                red[(sg * uint(TILE_M) + m) * uint(TILE_N) + ln * 4u + c] = acc[m][c];
}

// Element i (= m x TILE_N + column) summed over the simdgroups in order.
inline float mq_gemv_red_sum(threadgroup const float *red, uint i)
{
    float s = red[i];
    for (uint g = 1; g < uint(SIMDGROUPS); g++)
        s += red[g * uint(TILE_M * TILE_N) + i];
    return s;
}

template <int DEQ, int BITS>
inline void mq_gemv(device const half *A, thread const MqWeights &w, device half *C,
                    constant MqParams &p, threadgroup float *red, threadgroup const float *lut,
                    uint2 tg, uint tid, uint sg, uint lane)
{
    const uint N = p.N, K = p.K;
    const uint ln = lane % uint(GEMV_LN), lk = lane / uint(GEMV_LN);
    const uint col0 = tg.x * uint(TILE_N), n0 = col0 + ln * 4u, row0 = tg.y * uint(TILE_M);
    const uint rows = min(uint(TILE_M), p.M - row0);
    const bool cols = n0 < N; // N % 4 == 0: all 4 columns or none
    const uint kl = sg * (8u * uint(GEMV_LK)) + lk * 8u;
    float acc[TILE_M][4];
    for (uint m = 0; m < uint(TILE_M); m++)
        for (uint c = 0; c < 4u; c++)
            acc[m][c] = 0.0f;
    mq_gemv_acc<DEQ, BITS, DEQ == GEMV_TRELLIS && GEMV_LUT_PAIRS(BITS)>(
        A, K, row0, nullptr, rows, w, N, 0u, K, mq_group_shift(p.group), n0, cols, kl, lut, lane,
        acc);
    // the lanes along K, then the simdgroups
    mq_gemv_lane_sum(acc);
#if SIMDGROUPS > 1
    if (cols)
        mq_gemv_red_put(acc, red, sg, lane);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < uint(TILE_M * TILE_N); i += uint(THREADS)) {
        const uint m = i / uint(TILE_N), n = col0 + i % uint(TILE_N);
        if (m < rows && n < N)
            C[(row0 + m) * N + n] = half(mq_gemv_red_sum(red, i));
    }
#else
    (void)red;
    (void)tid;
    if (lk == 0u && cols)
        for (uint m = 0; m < rows; m++)
            for (uint c = 0; c < 4u; c++)
                C[(row0 + m) * N + n0 + c] = half(acc[m][c]);
#endif
}

// the reduction's threadgroup memory (none with one simdgroup)
#if SIMDGROUPS > 1
#define GEMV_RED_DECL threadgroup float red[SIMDGROUPS * TILE_M * TILE_N];
#define GEMV_RED_BYTES sizeof(red)
#else
#define GEMV_RED_DECL threadgroup float *red = nullptr;
#define GEMV_RED_BYTES 0
#endif

#define GEMV_POSITIONS                                                                    \
    uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]], \
        uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]]

#endif
