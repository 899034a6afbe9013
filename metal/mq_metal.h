// mq_metal.h - what every MSL kernel of mq shares: the tuned parameters as
// compile-time macros (one source serves every candidate: the Metal backend
// compiles it with -D TILE_M=.. etc. through MTLCompileOptions), the runtime
// parameters of a dispatch, the weight decoders (FP4 E2M1, u4 magic bias,
// trellis codebook indices) and the epilogue that writes accumulators with
// bounds checks. The layouts are the CPU model's (kernels/mq.h):
//   A        half  [M][K] row-major
//   packed   uint  [K/8][N], 8 codes along K per word, lowest nibble first
//   scales   half  [K/group][N]; zeros uchar [K/group][N] (u4)
//   indices  uchar [K/16][N/16][16*16*bits/8] (trellis, LSB-first)
//   tscales  float [K/group][N]; grid float [levels]; su float [K]; sv float [N]
//   C        half  [M][N]; workspace float [split_k][M][N]
#ifndef MQ_METAL_H
#define MQ_METAL_H

#include <metal_stdlib>
using namespace metal;

// ---- the tuned parameters (defaults: the seeds' 64x64x32) ----------------
#ifndef TILE_M
#define TILE_M 64
#endif
#ifndef TILE_N
#define TILE_N 64
#endif
#ifndef TILE_K
#define TILE_K 32
#endif
// the output region of one simdgroup (variant recipe: 32x32, MLX 16x16)
#ifndef SG_M
#define SG_M 32
#endif
#ifndef SG_N
#define SG_N 32
#endif
// trellis bits per index (2, 3 or 4)
#ifndef TRELLIS_BITS
#define TRELLIS_BITS 4
#endif
// halves added to every row of the A and B tiles in threadgroup memory, so
// the rows of one 8x8 fragment fall in different banks (16 bytes, as MLX's
// steel GEMM pads its tiles); the planner counts them (tile_pad)
#ifndef MQ_TILE_PAD
#define MQ_TILE_PAD 0
#endif

// Full unrolling of a loop with a constant trip count, so that fragment
// and register arrays are indexed by constants (no dynamic indexing, no
// spills). Only the fragment and register loops: unrolling the K steps
// too multiplies the code (a 256-deep trellis K tile took NVRTC 97 s) for nothing
// the indexing needs. clang's loop pragma for the Metal compiler and clang, NVRTC's
// unroll, GCC's for the CPU executor built by g++.
#if defined(__CUDACC_RTC__) || defined(__CUDA__)
#define MQ_UNROLL _Pragma("unroll")
#elif defined(__METAL_VERSION__) || defined(__clang__)
#define MQ_UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define MQ_UNROLL _Pragma("GCC unroll 32")
#else
#define MQ_UNROLL
#endif

#define MQ_CDIV(a, b) (((a) + (b) - 1) / (b))
#define MQ_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MQ_MAX(a, b) ((a) > (b) ? (a) : (b))
// a simdgroup's share of the tile, in 8x8 fragments
#define SG_ROWS MQ_CDIV(TILE_M, SG_M)
#define SG_COLS MQ_CDIV(TILE_N, SG_N)
#ifdef MQ_GEMV // the decode path: each simdgroup takes 1024 / TILE_N of a K step
#define SIMDGROUPS (TILE_N * TILE_K / 1024)
#elif defined(MQ_LANE_TRELLIS) // the lane kernel: 32 columns x one super-block each
#define SIMDGROUPS ((TILE_N / 32) * (TILE_K / 128)) // (mq_lane.h: 128 K for trellis,
#elif defined(MQ_LANE)                              //  64 for fp4 and u4)
#define SIMDGROUPS ((TILE_N / 32) * (TILE_K / 64))
#else
#define SIMDGROUPS (SG_ROWS * SG_COLS)
#endif
#define THREADS (SIMDGROUPS * 32)
#define FRAG_M (MQ_MIN(SG_M, TILE_M) / 8)
#define FRAG_N (MQ_MIN(SG_N, TILE_N) / 8)
#define K_STEPS (TILE_K / 8)
// Whether fragment (mi, ni) of the simdgroup at (sg_row, sg_col) lies in
// the tile: always, where the tile is a whole number of simdgroup regions
// (a constant the compiler folds), else checked
#define MQ_FRAG_IN_M(sg_row, mi)                                                             \
    (TILE_M % (FRAG_M * 8) == 0 || (sg_row) + (mi) * 8u < uint(TILE_M))
#define MQ_FRAG_IN_N(sg_col, ni)                                                             \
    (TILE_N % (FRAG_N * 8) == 0 || (sg_col) + (ni) * 8u < uint(TILE_N))
// row strides of the A [TILE_M][TILE_K] and B [TILE_K][TILE_N] tiles
#define A_LD (TILE_K + MQ_TILE_PAD)
#define B_LD (TILE_N + MQ_TILE_PAD)
// Staged kernels: their FP16 tiles (TILE_HALVES halves), which the epilogue
// reuses as each simdgroup's 8x8 float scratch (128 halves): the array holds
// whichever is larger, as the planner counts it (scratch_in_tiles_per_sg)
#define MQ_STAGED_SMEM(TILE_HALVES) MQ_MAX((TILE_HALVES), SIMDGROUPS * 128)

#ifndef MQ_GEMV
static_assert(TILE_M % 8 == 0 && TILE_N % 8 == 0 && TILE_K % 8 == 0,
              "tiles are multiples of the 8x8 simdgroup matrix");
#endif

// The planner's figures for the candidate (kernels/variants.c), which every
// backend passes with the tuned macros: each kernel checks that the
// threadgroup memory it declares and the threads it assumes are what the
// planner counted for occupancy and legality, so the two cannot disagree.
#if defined(MQ_PLAN_TG_BYTES) && defined(MQ_PLAN_THREADS)
#define MQ_CHECK_PLAN(tg_bytes)                                                              \
    static_assert((tg_bytes) == MQ_PLAN_TG_BYTES,                                           \
                  "the kernel's threadgroup memory differs from the planner's");           \
    static_assert(THREADS == MQ_PLAN_THREADS, "the kernel's threads differ from the planner's")
#else
#define MQ_CHECK_PLAN(tg_bytes) static_assert(true, "")
#endif

// ---- the runtime parameters (filled from the CPU model's mq_plan) --------
struct MqParams {
    uint M, N, K, group;
    uint m_tiles, n_tiles;
    uint k_slices;      // split_k
    uint k_slice_len;   // every slice but the last; the last takes the rest
    uint num_tgs;       // striped: the 1D grid
    uint work_per_tg;   // striped: ceil(work units / num_tgs)
    uint n_levels;      // trellis: codebook size
    uint lane_fold;     // fp4, lane layout: every scale under 4 (mq_lane.h folds 2^14 into it)
};

// The weights of one kernel, whichever format (unused pointers are null).
struct MqWeights {
    device const uint *packed;
    device const half *scales;
    device const uchar *zeros;
    device const uchar *indices;
    device const float *tscales, *grid, *su, *sv;
};

// The scale group of K index k: k / group for the group sizes the formats
// allow (32, 64, 128), as a shift. A division by a run-time value is a long
// instruction sequence on a GPU and ran once per packed word (per lane per K
// step in the decode path); the shift's amount is loop-invariant.
inline uint mq_group_shift(uint group)
{
    return group == 128u ? 7u : group == 64u ? 6u : 5u;
}
inline uint mq_group_of(uint k, constant MqParams &p)
{
    return k >> mq_group_shift(p.group);
}

// ---- weight decoders -------------------------------------------------------

// FP4 E2M1 -> half bits (seed 001): normal S<<15 | (E+14)<<10 | M<<9; E=0,
// M=1 is the 0.5 subnormal 0x3800; E=0, M=0 is +-0.
inline half mq_fp4_to_half(uint code)
{
    uint s = (code >> 3) & 1u, e = (code >> 1) & 3u, m = code & 1u;
    uint bits = s << 15;
    if (e != 0)
        bits |= ((e + 14u) << 10) | (m << 9);
    else if (m != 0)
        bits |= 14u << 10;
    return as_type<half>(ushort(bits));
}

// u4 magic bias (seed 001): 0x6400 is 1024.0; OR-ing q into the mantissa
// gives 1024 + q exactly; subtracting 1024 and the zero point recovers
// q - zero as a half, exactly.
inline half mq_u4_to_half(uint q, uint zero)
{
    half biased = as_type<half>(ushort(0x6400u | (q & 0xfu)));
    return biased - half(1024.0h) - half(float(zero));
}

// Two weights of one packed word (column n), rows i and i + 4 of its 8 K
// values, scaled: the same halves as mq_fp4_to_half(code) * scale and
// mq_u4_to_half(q, z) * scale (the exact product rounded to half once), in
// fewer instructions. FP4: codes i and i + 4 sit 16 bits apart, so one
// shift makes an FP16 pair of bit patterns, (c & 7) << 9 | (c & 8) << 12,
// each the code's value x 2^-14 exactly (subnormals included); times
// s = scale x 2^14 in float the product is exact (a 2-bit significand times
// an 11-bit one) and is rounded to half once.
// (mq_fp4_scaled: such an FP16 bit pair times s, each rounded to half once;
// the lane layout's decode makes its bit pairs its own way, mq_lane_fp4_bits.)
inline half2 mq_fp4_scaled(uint hb, float s)
{
    half2 r; // set lane by lane: Metal's half2(x, y) is no constructor of clang's vectors
    r.x = half(float(as_type<half>(ushort(hb & 0xffffu))) * s);
    r.y = half(float(as_type<half>(ushort(hb >> 16))) * s);
    return r;
}

inline half2 mq_fp4_rows(uint word, uint i, float s)
{
    const uint t = (word >> (4u * i));
    return mq_fp4_scaled(((t << 9) & 0x0E000E00u) | ((t << 12) & 0x80008000u), s);
}

// u4: q - z exactly as the float (2^23 + q) - zb, zb = 2^23 + z, times the
// scale s in float (an 8-bit integer times an 11-bit significand: exact),
// rounded to half once.
inline half2 mq_u4_rows(uint word, uint i, float zb, float s)
{
    const uint t = word >> (4u * i);
    half2 r;
    r.x = half((as_type<float>((t & 0xfu) | 0x4B000000u) - zb) * s);
    r.y = half((as_type<float>(((t >> 16) & 0xfu) | 0x4B000000u) - zb) * s);
    return r;
}

// The trellis index of element (k, n): tile (k/16, n/16), element
// (k%16)*16 + n%16, TRELLIS_BITS bits LSB-first (3-bit indices straddle).
inline uint mq_trellis_index(device const uchar *indices, uint tiles_n, uint k, uint n)
{
    const uint tile_bytes = (16u * 16u * TRELLIS_BITS + 7u) / 8u;
    device const uchar *tile = indices + ((k / 16u) * tiles_n + n / 16u) * tile_bytes;
    uint off = ((k % 16u) * 16u + n % 16u) * TRELLIS_BITS;
    uint byte = off >> 3, shift = off & 7u;
    uint v = tile[byte];
    if (shift + TRELLIS_BITS > 8u)
        v |= uint(tile[byte + 1]) << 8;
    return (v >> shift) & ((1u << TRELLIS_BITS) - 1u);
}

#ifndef MQ_GEMV // the simdgroup-matrix kernels' helpers
// ---- the epilogue -------------------------------------------------------------

// Write one simdgroup's FRAG_M x FRAG_N accumulators through an 8x8 float
// scratch of its own: C (half) when C is not null, else the float workspace
// slice ws. The simdgroup's region starts at (sg_row, sg_col) of the tile at
// (tile_r0, tile_c0); fragments past the tile (a tile that is not a
// multiple of the simdgroup region) belong to no one and are skipped, and
// every element is bounds-checked, so ragged M and N need no padding.
inline void mq_store_acc(thread simdgroup_float8x8 (&acc)[FRAG_M][FRAG_N],
                         threadgroup float *scratch, uint lane, uint tile_r0, uint tile_c0,
                         uint sg_row, uint sg_col, uint M, uint N, device half *C,
                         device float *ws)
{
    MQ_UNROLL
    for (uint mi = 0; mi < uint(FRAG_M); mi++) {
        MQ_UNROLL
        for (uint ni = 0; ni < uint(FRAG_N); ni++) {
            if (!MQ_FRAG_IN_M(sg_row, mi) || !MQ_FRAG_IN_N(sg_col, ni))
                continue;
            simdgroup_store(acc[mi][ni], scratch, 8);
            simdgroup_barrier(mem_flags::mem_threadgroup);
            for (uint e = lane; e < 64u; e += 32u) {
                uint r = tile_r0 + sg_row + mi * 8u + e / 8u;
                uint c = tile_c0 + sg_col + ni * 8u + e % 8u;
                if (r < M && c < N) {
                    if (C)
                        C[r * N + c] = half(scratch[e]);
                    else
                        ws[r * N + c] = scratch[e];
                }
            }
            simdgroup_barrier(mem_flags::mem_threadgroup);
        }
    }
}

inline void mq_zero_acc(thread simdgroup_float8x8 (&acc)[FRAG_M][FRAG_N])
{
    MQ_UNROLL
    for (uint mi = 0; mi < uint(FRAG_M); mi++) {
        MQ_UNROLL
        for (uint ni = 0; ni < uint(FRAG_N); ni++)
            acc[mi][ni] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }
}

// The K range [k_begin, k_end) of slice s: slices start on multiples of the
// plan's k_slice_len; the last takes the remainder (unaligned end allowed).
inline uint2 mq_k_range(constant MqParams &p, uint s)
{
    uint b = s * p.k_slice_len;
    uint e = (s + 1u == p.k_slices) ? p.K : b + p.k_slice_len;
    return uint2(b, e);
}

// ---- register-staged tiles ------------------------------------------------------
// Apple GPUs have no asynchronous copy into threadgroup memory, so the
// kernels overlap loads with math by hand: each thread loads its share of
// the next K tile into registers (mq_fetch_*) before the MMAs of this one
// are issued, and stores it into threadgroup memory (mq_put_*) after them.
// Shares: A_REGS 16-byte chunks of A (8 halves each) and B_REGS pairs of
// adjacent columns' packed words of B per thread (wide accesses: one
// instruction moves 8 halves of A, one store 2 values of B). Where a share
// would be too large for registers (few threads over a deep tile), the
// fetch does nothing and the put loads from device memory directly.
#define A_CHUNKS (TILE_M * TILE_K / 8) // 16-byte pieces of the A tile: 8 halves of a row
#define A_PER_THREAD MQ_CDIV(A_CHUNKS, THREADS)
#define B_PAIRS (TILE_K / 8 * TILE_N / 2) // two adjacent columns' words at the same K
#define B_PER_THREAD MQ_CDIV(B_PAIRS, THREADS)
#define MQ_REG_A (A_PER_THREAD <= 2)
#define MQ_REG_B (B_PER_THREAD <= 4)
#define A_REGS (MQ_REG_A ? A_PER_THREAD : 1)
#define B_REGS (MQ_REG_B ? B_PER_THREAD : 1)

static_assert(TILE_K % 8 == 0 && A_LD % 8 == 0, "A tile rows are whole 16-byte chunks");
static_assert(TILE_N % 2 == 0 && B_LD % 2 == 0, "B tile rows hold whole column pairs");

// What a thread holds of the A tile between fetch and put.
struct MqARegs {
    uint4 chunk[A_REGS];
};

// chunk i of the A tile [TILE_M][TILE_K]: row i / (TILE_K / 8) of the
// tile, the 8 halves from K offset 8 (i % (TILE_K / 8)) on
inline uint mq_a_chunk_row(uint i)
{
    return i / uint(TILE_K / 8);
}

inline uint mq_a_chunk_k(uint i)
{
    return (i % uint(TILE_K / 8)) * 8u;
}

// Where the A operand's rows are: a dense A (a pointer) has p.M rows, K
// apart. Another A source (the MoE block's gathered rows, metal/mq_moe.h's
// MoeARows) gives its own overloads; these three are all the A loads ask.
template <typename AS>
inline AS mq_a_base(AS A)
{
    return A;
}

template <typename AS>
inline uint mq_a_row_at(AS A, uint r, constant MqParams &p)
{
    (void)A;
    return r * p.K;
}

template <typename AS>
inline uint mq_a_rows(AS A, constant MqParams &p)
{
    (void)A;
    return p.M;
}

// chunk i of the A tile at (row0, k0), one 16-byte load (K, k0 and k_end
// are multiples of 8, so a chunk is wholly inside or outside); zero
// outside M and from k_end on
inline uint4 mq_a_chunk(device const half *A, uint i, uint row0, uint k0, uint k_end,
                        constant MqParams &p)
{
    const uint r = row0 + mq_a_chunk_row(i), k = k0 + mq_a_chunk_k(i);
    uint4 v = uint4(0u);
    if (i < uint(A_CHUNKS) && r < p.M && k < k_end)
        v = *(device const uint4 *)(A + r * p.K + k);
    return v;
}

// (the same from another source of A rows: apart from the pointer's one
// above, since through this template two of the MMA kernels compiled to
// other PTX, the striped and the MLX split-K ones)
template <typename AS>
inline uint4 mq_a_chunk(AS A, uint i, uint row0, uint k0, uint k_end, constant MqParams &p)
{
    const uint r = row0 + mq_a_chunk_row(i), k = k0 + mq_a_chunk_k(i);
    uint4 v = uint4(0u);
    if (i < uint(A_CHUNKS) && r < mq_a_rows(A, p) && k < k_end)
        v = *(device const uint4 *)(mq_a_base(A) + mq_a_row_at(A, r, p) + k);
    return v;
}

template <typename AS>
inline void mq_fetch_a(thread MqARegs &ra, AS A, uint row0, uint k0, uint k_end,
                       constant MqParams &p, uint tid)
{
    if (!MQ_REG_A)
        return;
    MQ_UNROLL
    for (uint j = 0; j < uint(A_REGS); j++)
        ra.chunk[j] = mq_a_chunk(A, tid + j * uint(THREADS), row0, k0, k_end, p);
}

// The A tile into threadgroup memory (row stride A_LD halves, a multiple of
// 8: each chunk one 16-byte store), from the registers mq_fetch_a filled
// for the same k0, or from device memory.
// (stored as a float4's bits: a vector type every compiler of this source
// stores into threadgroup memory whole)
inline void mq_put_a_chunk(threadgroup half *As, uint i, uint4 v)
{
    *(threadgroup float4 *)(As + mq_a_chunk_row(i) * uint(A_LD) + mq_a_chunk_k(i)) = as_type<float4>(v);
}

template <typename AS>
inline void mq_put_a(threadgroup half *As, thread const MqARegs &ra, AS A, uint row0, uint k0,
                     uint k_end, constant MqParams &p, uint tid)
{
    if (MQ_REG_A) {
        MQ_UNROLL
        for (uint j = 0; j < uint(A_REGS); j++) {
            const uint i = tid + j * uint(THREADS);
            if (i < uint(A_CHUNKS))
                mq_put_a_chunk(As, i, ra.chunk[j]);
        }
    } else {
        for (uint i = tid; i < uint(A_CHUNKS); i += uint(THREADS))
            mq_put_a_chunk(As, i, mq_a_chunk(A, i, row0, k0, k_end, p));
    }
}

// What a thread holds of the B tile between fetch and put: pairs of packed
// words of adjacent columns (8 K values each) with their scales and zero
// points.
struct MqBRegs {
    uint word[B_REGS][2];
    half scale[B_REGS][2];
    uchar zero[B_REGS][2];
};

// word i of the B tile at (k0, col0): kw = i / TILE_N, column i % TILE_N;
// a word outside N or from k_end on reads as zero with scale 0 (decodes to 0)
template <bool U4>
inline void mq_b_word(device const uint *packed, device const half *scales,
                      device const uchar *zeros, uint i, uint k0, uint col0, uint k_end,
                      constant MqParams &p, thread uint &word, thread half &scale,
                      thread uchar &zero)
{
    const uint k = k0 + (i / uint(TILE_N)) * 8u, n = col0 + i % uint(TILE_N);
    word = 0u;
    scale = half(0.0h);
    zero = 0;
    if (i < uint(TILE_K / 8 * TILE_N) && n < p.N && k < k_end) {
        const uint g = mq_group_of(k, p) * p.N + n; // 8 | group: one scale per word
        word = packed[(k / 8u) * p.N + n];
        scale = scales[g];
        if (U4)
            zero = zeros[g];
    }
}

template <bool U4>
inline void mq_fetch_b(thread MqBRegs &rb, device const uint *packed, device const half *scales,
                       device const uchar *zeros, uint k0, uint col0, uint k_end,
                       constant MqParams &p, uint tid)
{
    if (!MQ_REG_B)
        return;
    MQ_UNROLL
    for (uint j = 0; j < uint(B_REGS); j++)
        for (uint h = 0; h < 2u; h++)
            mq_b_word<U4>(packed, scales, zeros, 2u * (tid + j * uint(THREADS)) + h, k0, col0,
                          k_end, p, rb.word[j][h], rb.scale[j][h], rb.zero[j][h]);
}

// Pair q's 16 values, dequantized, into rows kw*8..kw*8+7 of the B tile
// (row stride B_LD, even), columns c and c + 1 (c even): one 4-byte store
// per row, two rows at a time (four values live, not sixteen: registers
// cost resident threadgroups). K, k0 and k_end are multiples of 8 (K of the
// group, slices of the tile or group), so a word is wholly before k_end or
// zero.
template <bool U4>
inline void mq_put_b_pair(threadgroup half *Bs, uint q, uint w0, uint w1, half s0, half s1,
                          uchar z0, uchar z1)
{
    const uint kw = (2u * q) / uint(TILE_N), c = (2u * q) % uint(TILE_N);
    threadgroup half *row = Bs + (kw * 8u) * uint(B_LD) + c;
    const float f0 = U4 ? float(s0) : float(s0) * 16384.0f;
    const float f1 = U4 ? float(s1) : float(s1) * 16384.0f;
    const float zb0 = as_type<float>(uint(z0) | 0x4B000000u);
    const float zb1 = as_type<float>(uint(z1) | 0x4B000000u);
    MQ_UNROLL
    for (uint i = 0; i < 4u; i++) {
        const half2 a = U4 ? mq_u4_rows(w0, i, zb0, f0) : mq_fp4_rows(w0, i, f0);
        const half2 b = U4 ? mq_u4_rows(w1, i, zb1, f1) : mq_fp4_rows(w1, i, f1);
        half2 lo, hi; // rows i and i + 4, columns c and c + 1
        lo.x = a.x;
        lo.y = b.x;
        hi.x = a.y;
        hi.y = b.y;
        *(threadgroup half2 *)(row + i * uint(B_LD)) = lo;
        *(threadgroup half2 *)(row + (i + 4u) * uint(B_LD)) = hi;
    }
}

// The dequantized B tile [TILE_K][TILE_N] at (k0, col0) into threadgroup
// memory, from the registers mq_fetch_b filled for the same k0, or from
// device memory (the staged variants).
template <bool U4>
inline void mq_put_b(threadgroup half *Bs, thread const MqBRegs &rb, device const uint *packed,
                     device const half *scales, device const uchar *zeros, uint k0, uint col0,
                     uint k_end, constant MqParams &p, uint tid)
{
    if (MQ_REG_B) {
        MQ_UNROLL
        for (uint j = 0; j < uint(B_REGS); j++) {
            const uint q = tid + j * uint(THREADS);
            if (q < uint(B_PAIRS))
                mq_put_b_pair<U4>(Bs, q, rb.word[j][0], rb.word[j][1], rb.scale[j][0],
                                  rb.scale[j][1], rb.zero[j][0], rb.zero[j][1]);
        }
    } else {
        for (uint q = tid; q < uint(B_PAIRS); q += uint(THREADS)) {
            uint w[2];
            half sc[2];
            uchar z[2];
            for (uint h = 0; h < 2u; h++)
                mq_b_word<U4>(packed, scales, zeros, 2u * q + h, k0, col0, k_end, p, w[h], sc[h],
                              z[h]);
            mq_put_b_pair<U4>(Bs, q, w[0], w[1], sc[0], sc[1], z[0], z[1]);
        }
    }
}

// One K tile of multiply-accumulate from staged A and B tiles: fragment
// loops to constant bounds, unrolled, fragments past the tile's edge
// skipped by a guard (as in mq_store_acc).
inline void mq_mma_staged(thread simdgroup_float8x8 (&acc)[FRAG_M][FRAG_N],
                          threadgroup const half *As, threadgroup const half *Bs, uint sg_row,
                          uint sg_col)
{
    for (uint kk = 0; kk < uint(K_STEPS); kk++) {
        simdgroup_half8x8 b[FRAG_N];
        MQ_UNROLL
        for (uint ni = 0; ni < uint(FRAG_N); ni++)
            if (MQ_FRAG_IN_N(sg_col, ni))
                simdgroup_load(b[ni], Bs + (kk * 8u) * uint(B_LD) + sg_col + ni * 8u, B_LD);
        MQ_UNROLL
        for (uint mi = 0; mi < uint(FRAG_M); mi++) {
            if (!MQ_FRAG_IN_M(sg_row, mi))
                continue;
            simdgroup_half8x8 a;
            simdgroup_load(a, As + (sg_row + mi * 8u) * uint(A_LD) + kk * 8u, A_LD);
            MQ_UNROLL
            for (uint ni = 0; ni < uint(FRAG_N); ni++)
                if (MQ_FRAG_IN_N(sg_col, ni))
                    simdgroup_multiply_accumulate(acc[mi][ni], a, b[ni], acc[mi][ni]);
        }
    }
}

// ---- weights straight into fragments (the lane-major layout) -------------
// Kernels that dequantize weights into the left operand of the 8x8 MMAs
// (C^T = W^T x A^T) write each lane's pair of a fragment themselves. A
// lane's pair (row frag_row(l), columns frag_col(l) and the next: MLX steel
// gemm's BaseMMAFrag::get_coord, mlx/backend/metal/kernels/steel/gemm/mma.h)
// is "one row, two adjacent columns", as the tensor cores' A-operand pair is
// (PTX ISA, "Matrix Fragments for mma.m16n8k16": row groupID, columns
// 2 threadID_in_group and the next), up to a fixed permutation of the lanes.
// So a lane loads the codes of logical lane MQ_FRAG_LANE(lane) and fills its
// fragments with MQ_FRAG_FILL: on Apple GPUs and the CPU executor the
// identity and thread_elements(); in the cuda prelude (which defines
// MQ_PRELUDE_FRAG_FILL) the permutation and the tensor-core pair, so the
// fragments are A operands with no shuffle. Either way a later
// thread_elements() sees Apple's layout. v is evaluated twice: pass a value.
#ifdef MQ_PRELUDE_FRAG_FILL
#define MQ_FRAG_LANE(l) metal::mq_frag_fill_lane(l)
#define MQ_FRAG_FILL(m, v) metal::mq_frag_fill((m), (v))
#else
#define MQ_FRAG_LANE(l) (l)
#define MQ_FRAG_FILL(m, v) ((m).thread_elements()[0] = (v).x, (m).thread_elements()[1] = (v).y)
#endif

// A 16x8x16 step as four 8x8x8 ones: [c_up; c_lo] += [a_up_k0 a_up_k1;
// a_lo_k0 a_lo_k1] x [b_k0; b_k1], i.e. c_up += a_up_k0 b_k0 + a_up_k1 b_k1
// and c_lo likewise (Apple: in this order). The cuda prelude runs it as one
// mma.sync.m16n8k16, whose A registers a0..a3 are exactly (up, k0), (lo, k0),
// (up, k1), (lo, k1), B's b0, b1 the two K halves and D's rows 0-7 / 8-15
// c_up / c_lo (PTX ISA, mma.m16n8k16 fragment layouts); it sums 16 products
// per step in the tensor core's order, Apple 8 at a time. Operands must be
// simdgroup-uniform (every lane calls it).
inline void mq_mma_16x8x16(thread simdgroup_float8x8 &c_up, thread simdgroup_float8x8 &c_lo,
                           thread const simdgroup_half8x8 &a_up_k0,
                           thread const simdgroup_half8x8 &a_lo_k0,
                           thread const simdgroup_half8x8 &a_up_k1,
                           thread const simdgroup_half8x8 &a_lo_k1,
                           thread const simdgroup_half8x8 &b_k0, thread const simdgroup_half8x8 &b_k1)
{
#ifdef MQ_PRELUDE_FRAG_FILL
    metal::mq_mma_m16n8k16(c_up, c_lo, a_up_k0, a_lo_k0, a_up_k1, a_lo_k1, b_k0, b_k1);
#else
    simdgroup_multiply_accumulate(c_up, a_up_k0, b_k0, c_up);
    simdgroup_multiply_accumulate(c_up, a_up_k1, b_k1, c_up);
    simdgroup_multiply_accumulate(c_lo, a_lo_k0, b_k0, c_lo);
    simdgroup_multiply_accumulate(c_lo, a_lo_k1, b_k1, c_lo);
#endif
}

// Two fragments sharing their right operand: c_up += a_up b, c_lo += a_lo b;
// in the cuda prelude one mma.sync.m16n8k8 whose rows 8-15 are a_lo's (the
// plain simdgroup_multiply_accumulate leaves them zero).
inline void mq_mma_16x8x8(thread simdgroup_float8x8 &c_up, thread simdgroup_float8x8 &c_lo,
                          thread const simdgroup_half8x8 &a_up, thread const simdgroup_half8x8 &a_lo,
                          thread const simdgroup_half8x8 &b)
{
#ifdef MQ_PRELUDE_FRAG_FILL
    metal::mq_mma_m16n8k8(c_up, c_lo, a_up, a_lo, b);
#else
    simdgroup_multiply_accumulate(c_up, a_up, b, c_up);
    simdgroup_multiply_accumulate(c_lo, a_lo, b, c_lo);
#endif
}

#endif // MQ_GEMV

#endif
