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

#define MQ_CDIV(a, b) (((a) + (b) - 1) / (b))
#define MQ_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MQ_MAX(a, b) ((a) > (b) ? (a) : (b))
// a simdgroup's share of the tile, in 8x8 fragments
#define SG_ROWS MQ_CDIV(TILE_M, SG_M)
#define SG_COLS MQ_CDIV(TILE_N, SG_N)
#ifdef MQ_GEMV // the decode path: each simdgroup takes 1024 / TILE_N of a K step
#define SIMDGROUPS (TILE_N * TILE_K / 1024)
#else
#define SIMDGROUPS (SG_ROWS * SG_COLS)
#endif
#define THREADS (SIMDGROUPS * 32)
#define FRAG_M (MQ_MIN(SG_M, TILE_M) / 8)
#define FRAG_N (MQ_MIN(SG_N, TILE_N) / 8)
#define K_STEPS (TILE_K / 8)
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
};

// The weights of one kernel, whichever format (unused pointers are null).
struct MqWeights {
    device const uint *packed;
    device const half *scales;
    device const uchar *zeros;
    device const uchar *indices;
    device const float *tscales, *grid, *su, *sv;
};

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

// Eight FP4 or u4 weights of one packed word (k0..k0+7 of column n), scaled.
inline void mq_decode_word_fp4(uint word, half scale, thread half *out)
{
    for (uint i = 0; i < 8; i++)
        out[i] = mq_fp4_to_half((word >> (4u * i)) & 0xfu) * scale;
}

inline void mq_decode_word_u4(uint word, uint zero, half scale, thread half *out)
{
    for (uint i = 0; i < 8; i++)
        out[i] = mq_u4_to_half((word >> (4u * i)) & 0xfu, zero) * scale;
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
    for (uint mi = 0; mi < FRAG_M && sg_row + mi * 8u < uint(TILE_M); mi++)
        for (uint ni = 0; ni < FRAG_N && sg_col + ni * 8u < uint(TILE_N); ni++) {
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

inline void mq_zero_acc(thread simdgroup_float8x8 (&acc)[FRAG_M][FRAG_N])
{
    for (uint mi = 0; mi < FRAG_M; mi++)
        for (uint ni = 0; ni < FRAG_N; ni++)
            acc[mi][ni] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
}

// The K range [k_begin, k_end) of slice s: slices start on multiples of the
// plan's k_slice_len; the last takes the remainder (unaligned end allowed).
inline uint2 mq_k_range(constant MqParams &p, uint s)
{
    uint b = s * p.k_slice_len;
    uint e = (s + 1u == p.k_slices) ? p.K : b + p.k_slice_len;
    return uint2(b, e);
}

// Cooperative load of the A tile [TILE_M][TILE_K] at (row0, k0) into
// threadgroup memory, zero outside M and below k_end.
inline void mq_load_a(threadgroup half *As, device const half *A, uint row0, uint k0, uint k_end,
                      constant MqParams &p, uint tid)
{
    for (uint i = tid; i < uint(TILE_M * TILE_K); i += uint(THREADS)) {
        uint r = row0 + i / uint(TILE_K), k = k0 + i % uint(TILE_K);
        As[i] = (r < p.M && k < k_end) ? A[r * p.K + k] : half(0.0h);
    }
}

// Cooperative dequantization of the B tile [TILE_K][TILE_N] at (k0, col0)
// into threadgroup memory (the staged variants): one packed word (8 K
// values of one column) per thread step; zero outside N and below k_end.
template <bool U4>
inline void mq_stage_b(threadgroup half *Bs, device const uint *packed, device const half *scales,
                       device const uchar *zeros, uint k0, uint col0, uint k_end,
                       constant MqParams &p, uint tid)
{
    const uint words = uint(TILE_K / 8) * uint(TILE_N);
    for (uint i = tid; i < words; i += uint(THREADS)) {
        uint kw = i / uint(TILE_N), c = i % uint(TILE_N);
        uint k = k0 + kw * 8u, n = col0 + c;
        half v[8];
        if (n < p.N && k < k_end) {
            uint word = packed[(k / 8u) * p.N + n];
            uint g = (k / p.group) * p.N + n;
            if (U4)
                mq_decode_word_u4(word, zeros[g], scales[g], v);
            else
                mq_decode_word_fp4(word, scales[g], v);
        } else {
            for (uint j = 0; j < 8; j++)
                v[j] = half(0.0h);
        }
        for (uint j = 0; j < 8; j++) // rows past k_end inside the word are zero too
            Bs[(kw * 8u + j) * uint(TILE_N) + c] = (k + j < k_end) ? v[j] : half(0.0h);
    }
}

// One K tile of multiply-accumulate from staged A and B tiles (fragments
// past the tile's edge skipped, as in mq_store_acc).
inline void mq_mma_staged(thread simdgroup_float8x8 (&acc)[FRAG_M][FRAG_N],
                          threadgroup const half *As, threadgroup const half *Bs, uint sg_row,
                          uint sg_col)
{
    const uint fm = MQ_MIN(uint(FRAG_M), (uint(TILE_M) - sg_row) / 8u);
    const uint fn = MQ_MIN(uint(FRAG_N), (uint(TILE_N) - sg_col) / 8u);
    for (uint kk = 0; kk < uint(K_STEPS); kk++) {
        simdgroup_half8x8 b[FRAG_N];
        for (uint ni = 0; ni < fn; ni++)
            simdgroup_load(b[ni], Bs + (kk * 8u) * uint(TILE_N) + sg_col + ni * 8u, TILE_N);
        for (uint mi = 0; mi < fm; mi++) {
            simdgroup_half8x8 a;
            simdgroup_load(a, As + (sg_row + mi * 8u) * uint(TILE_K) + kk * 8u, TILE_K);
            for (uint ni = 0; ni < fn; ni++)
                simdgroup_multiply_accumulate(acc[mi][ni], a, b[ni], acc[mi][ni]);
        }
    }
}

#endif // MQ_GEMV

#endif
