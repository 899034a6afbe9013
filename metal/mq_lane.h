// mq_lane.h - the GEMM body on the lane-major weight layout
// (kernels/layout_lane.c): C^T = W^T x A^T, the weights the left operand
// of every 8x8 simdgroup MMA. Each lane loads one 16-byte word of codes
// per 16 columns x 64 K (a super-block): the codes of its own elements of
// the 16 W^T fragments there, in the fragment order of Apple's
// simdgroup_matrix (MLX's steel GEMM lane coordinates; on NVIDIA the
// register order of mma.m16n8k16's A operand, as IST-DASLab/marlin reorders
// its weights offline). It decodes them in registers straight into the
// fragments (MQ_FRAG_FILL): no threadgroup round trip for the weights. The
// activations are staged in threadgroup memory as in the other kernels and
// read as the right operand through a transposed simdgroup_load.
//
// Work split: a threadgroup covers TILE_M x TILE_N of C; its simdgroups
// take 32 columns each (LANE_SG_COLS of them) and, inside a K tile, one
// super-block each (64 K; trellis 128: LANE_KSG of them), summed through threadgroup
// memory at the end in a fixed order. Where the chip copies asynchronously
// (the NVIDIA chips), the next K tiles' A and weights are in flight in
// threadgroup memory (mq_lane_staged.h); elsewhere (Apple GPUs, the
// executor's default plans) the codes and scales of the next LANE_AHEAD K
// tiles travel in registers (one: on an H100, when it took this path, one
// beat two on 12 of 16 candidates, results/h100/lane/ab-pipeline) and the
// next A tile in a second buffer, in flight while a tile is multiplied. grid (n_tiles, m_tiles, split_k):
// threadgroup z takes K slice z and writes the float workspace slice, summed
// by marlin_splitk_reduce (or C when K is not split).
//
// One body for every format (FMT): fp4 and u4 (lane_gemm.metal), the
// trellis formats (lane_trellis.metal, which defines MQ_LANE_TRELLIS: the
// sizes of its super-blocks and stages are the file's; mq_lane_trellis.h).
#ifndef MQ_LANE_H
#define MQ_LANE_H

#include "mq_async_copy.h"
#include "mq_metal.h"

enum { LANE_FP4 = 0, LANE_U4 = 1, LANE_TRELLIS = 2 };

// A simdgroup's unit of a K tile is one super-block: 64 K (fp4, u4) or 128
// (trellis), LANE_ATOMS 16-K atoms, LANE_HALVES 32-K pieces (a scale each)
#ifdef MQ_LANE_TRELLIS
#define LANE_KSB 128
#define LANE_SB_WORDS LANE_TR_WORDS // uints per 16 columns
#else
#define LANE_KSB 64
#define LANE_SB_WORDS 128
#endif
#define LANE_ATOMS (LANE_KSB / 16)
// LANE_ACC_SCALE: the MMAs take unscaled weights and each window of K one
// scale covers adds its products to the sums times the scales, once per
// output element (mq_lane_acc_add_scaled): trellis always (its levels come
// unscaled from the codebook), fp4 and u4 where the planner asks
// (MQ_PLAN_SCALE_K: at up to 8 rows, where the adds cost less than a
// multiply a weight pair). The window, MQ_PLAN_SCALE_K: the group, at most a
// super-block (trellis 32 K without it): at 16 rows and 128 K, 16 FFMA a
// lane instead of 64. (fp4 and u4 are two kernels of one program, planned
// alike.)
#if defined(MQ_LANE_TRELLIS)
#define LANE_ACC_SCALE(FMT) true
#elif defined(MQ_PLAN_SCALE_K)
#define LANE_ACC_SCALE(FMT) ((FMT) == LANE_U4 || (FMT) == LANE_FP4)
#else
#define LANE_ACC_SCALE(FMT) false
#endif
#ifndef MQ_PLAN_SCALE_K
#define MQ_PLAN_SCALE_K 32
#endif
// fp4's unscaled weights as the MMAs take them where the sums are scaled:
// with the cuda prelude's FP16 pair instructions its bit pairs themselves,
// each code's value x 2^-14 (FP16 subnormals for the codes 0.5: the tensor
// cores take them exactly), so the window's scale is times 2^14 (exact in
// FP32); elsewhere the codes' values (0.5 to 6, exact in FP16: no subnormal
// reaches an Apple MMA) and the scale itself.
#ifdef MQ_PRELUDE_HALF2_OPS
#define LANE_FP4_ACC_UNIT 16384.0f
#else
#define LANE_FP4_ACC_UNIT 1.0f
#endif
#define LANE_SCALE_ATOMS (MQ_PLAN_SCALE_K / 16)
#define LANE_HALVES (LANE_KSB / 32)
// element j of a stage's per-32-K array, and word j of a uint4: selects,
// not an index, so a register however the loops unroll
#define LANE_PICK(a, j)                                                                      \
    ((j) == 0u ? (a)[0] : (j) == 1u ? (a)[1] : (j) == 2u ? (a)[2 % LANE_HALVES] : (a)[LANE_HALVES - 1])
inline uint mq_lane_word(uint4 v, uint j)
{
    return j == 0u ? v.x : j == 1u ? v.y : j == 2u ? v.z : v.w;
}
// acc += part x s, s the FP32 scale of the rows of the lane's pairs: the
// products of a group's unscaled levels scaled once per group and output
// element (on the tensor cores the accumulators' own pairs, no shuffle:
// the cuda prelude's MQ_PRELUDE_ACC_SCALE), not once per weight pair.
inline void mq_lane_acc_add_scaled(thread simdgroup_float8x8 &acc,
                                   thread simdgroup_float8x8 &part, float s)
{
#ifdef MQ_PRELUDE_ACC_SCALE
    metal::mq_acc_add_scaled(acc, part, s);
#else
    acc.thread_elements()[0] += part.thread_elements()[0] * s;
    acc.thread_elements()[1] += part.thread_elements()[1] * s;
#endif
}

#ifdef MQ_LANE_TRELLIS
#include "mq_lane_trellis.h"
// the byte offset of lane w.L's copy in each entry of the pair codebook (a
// bank of its own: any one lane per bank does)
#define LANE_LUT_LANE(w) (((w).L % uint(LANE_LUT_COPIES)) * 4u)
#else
#define LANE_LUT_LANE(w) 0u
#endif
#define LANE_SG_COLS (TILE_N / 32)
#define LANE_KSG (TILE_K / LANE_KSB)
#define LANE_FRAG_M (TILE_M / 8)
// Every accumulator fragment [i][h][mi] of a simdgroup's 32 columns (two
// 16-column blocks i of two 8-column halves h, LANE_FRAG_M 8-row blocks mi),
// and with j each of a lane's two elements of one: unrolled loops, one
// statement (a block) after them.
#define LANE_FOR_FRAGS(i, h, mi)                                                                  \
    MQ_UNROLL for (uint i = 0; i < 2u; i++) MQ_UNROLL for (uint h = 0; h < 2u; h++)                \
        MQ_UNROLL for (uint mi = 0; mi < uint(LANE_FRAG_M); mi++)
#define LANE_FOR_ELEMS(i, h, mi, j) LANE_FOR_FRAGS(i, h, mi) MQ_UNROLL for (uint j = 0; j < 2u; j++)
#ifndef LANE_AHEAD // K tiles of weights in flight ahead of the one multiplied
#define LANE_AHEAD 1
#endif
// the partial sums of the simdgroups kg >= 1: per simdgroup 2 x 2 x
// LANE_FRAG_M fragments of 64 floats, in the threadgroup memory A used
#define LANE_RED_FLOATS ((LANE_KSG - 1) * LANE_SG_COLS * 4 * LANE_FRAG_M * 64)
#define LANE_A_HALVES (TILE_M * A_LD) // one A tile
// K tiles of A and weights staged in threadgroup memory by asynchronous
// copies (mq_lane_staged.h): the planner's count, 0 where the weights travel
// in registers
#if defined(MQ_PLAN_STAGES) && MQ_PLAN_STAGES >= 2
#define LANE_STAGES MQ_PLAN_STAGES
#else
#define LANE_STAGES 0
#endif

static_assert(TILE_N % 32 == 0 && TILE_K % LANE_KSB == 0 && TILE_M % 8 == 0 && TILE_M <= 64,
              "lane tiles: 32 columns per simdgroup, whole super-blocks, up to 64 rows");
static_assert(SIMDGROUPS == LANE_SG_COLS * LANE_KSG, "the lane kernel's simdgroups");
static_assert(MQ_PLAN_SCALE_K % 32 == 0 && LANE_KSB % MQ_PLAN_SCALE_K == 0,
              "a scale window is whole 32-K pieces of a super-block");

// The (row, column) of lane l's first element in an 8x8 fragment (Apple's
// layout; its second element is the next column).
inline uint mq_lane_frag_row(uint l)
{
    return ((l / 4u) & 4u) + (l / 2u) % 4u;
}

inline uint mq_lane_frag_col(uint l)
{
    return ((l / 4u) & 2u) * 2u + (l % 2u) * 2u;
}

// Where a simdgroup reads in the lane layout: its first 16-column block
// nb0, the blocks n16 and super-blocks kbs of the matrix (LANE_KSB each),
// its logical lane L (MQ_FRAG_LANE) and that lane's fragment row lr, the
// group's shift and the groups gp along the padded K.
struct MqLaneAt {
    uint nb0, n16, kbs, L, lr, gshift, gp;
};

// What one K tile's multiply needs of the weights, loaded ahead of it: the
// lane's words of super-block kb for column blocks nb0 and nb0 + 1 (fp4,
// u4: its uint4; trellis: mq_lane_tr_words, cw and cx), and their scales (and
// zero points) for each 32 K of it (one group when the group is 64 or 128,
// one per 32 K at 32): FP16 pairs, or FP32 pairs for trellis (ts).
struct MqLaneStage {
    uint4 cw[2], cx[2];
    half2 sc[2][LANE_HALVES];
    uint zc[2][LANE_HALVES];
    float2 ts[2][LANE_HALVES];
};

// Stage s for super-block kb: zero past N or K (the layout's padding is
// zero too) and when live is false (no such tile in this slice).
template <int FMT>
inline void mq_lane_fetch(thread MqLaneStage &s, device const uint *codes,
                          device const half *scales, device const uchar *zeros,
                          thread const MqLaneAt &w, uint kb, bool live)
{
    MQ_UNROLL
    for (uint i = 0; i < 2u; i++) {
        const uint nb = w.nb0 + i;
        const bool in = live && nb < w.n16 && kb < w.kbs;
        s.cw[i] = uint4(0u);
        s.cx[i] = uint4(0u);
        if (in) { // (an if: strict MSL has no ?: across address spaces)
#ifdef MQ_LANE_TRELLIS
            mq_lane_tr_words(codes + (size_t(nb) * w.kbs + kb) * uint(LANE_SB_WORDS), w.L,
                             s.cw[i], s.cx[i]);
#else
            s.cw[i] = ((device const uint4 *)codes)[(size_t(nb) * w.kbs + kb) * 32u + w.L];
#endif
        }
        MQ_UNROLL
        for (uint hlf = 0; hlf < uint(LANE_HALVES); hlf++) {
            const uint g = (kb * uint(LANE_KSB) + hlf * 32u) >> w.gshift;
            const size_t at = (size_t(nb) * w.gp + g) * 8u + w.lr;
            s.sc[i][hlf] = as_type<half2>(0u);
            s.zc[i][hlf] = 0u;
            s.ts[i][hlf] = float2(0.0f);
            if (in) {
                if (FMT == LANE_TRELLIS)
                    s.ts[i][hlf] = ((device const float2 *)scales)[at];
                else
                    s.sc[i][hlf] = ((device const half2 *)scales)[at];
                if (FMT == LANE_U4)
                    s.zc[i][hlf] = uint(((device const ushort *)zeros)[at]);
            }
        }
    }
}

// The A tile of K tile k0 on its way into As (one of the two buffers):
// begun before the multiply of the current tile, ended after it, then a
// barrier. In the cuda prelude (MQ_PRELUDE_ASYNC_COPY) 16-byte copies that
// hold no register (cp.async) and a wait; elsewhere the registers of
// mq_fetch_a and a store (or, for a tile too large to hold there, the copy
// at the end).
template <typename AS>
inline void mq_a_tile_begin(threadgroup half *As, thread MqARegs &ra, AS A, uint row0, uint k0,
                            uint k_end, constant MqParams &p, uint tid)
{
#ifdef MQ_PRELUDE_ASYNC_COPY
    (void)ra;
    mq_copy_a_tile(As, A, row0, k0, k_end, p, tid);
#else
    (void)As;
    mq_fetch_a(ra, A, row0, k0, k_end, p, tid);
#endif
}

template <typename AS>
inline void mq_a_tile_end(threadgroup half *As, thread const MqARegs &ra, AS A, uint row0,
                          uint k0, uint k_end, constant MqParams &p, uint tid)
{
#ifdef MQ_PRELUDE_ASYNC_COPY
    (void)As, (void)ra, (void)A, (void)row0, (void)k0, (void)k_end, (void)p, (void)tid;
    metal::mq_copy_async_wait();
#else
    mq_put_a(As, ra, A, row0, k0, k_end, p, tid);
#endif
}

// The activations of 16 K at `at` (rows of A, stride A_LD) as the right
// operands of a 16x8x16 step: b_k0, b_k1 the transposes of the 8x8 blocks at
// at and at + 8. The cuda prelude loads them as two 32-bit loads per lane.
inline void mq_right_pair(thread simdgroup_half8x8 &b_k0, thread simdgroup_half8x8 &b_k1,
                          threadgroup const half *at)
{
#ifdef MQ_PRELUDE_RIGHT_PAIR
    metal::mq_load_right_pair(b_k0, b_k1, at, uint(A_LD));
#else
    simdgroup_load(b_k0, at, A_LD, ulong2(0, 0), true);
    simdgroup_load(b_k1, at + 8, A_LD, ulong2(0, 0), true);
#endif
}

// fp4 pair p of a lane word (kernels/layout_lane.c): its two codes'
// magnitudes at bits MAG[p] and MAG[p] + 16, their signs at SGN[p] and SGN[p]
// + 16 (MAG = {0, 3, 8, 11}, SGN = {6, 7, 14, 15}), moved to an FP16 pair's
// bits 9-11 and 15: the pair's values times 2^-14, exactly. With p a
// constant (the loops unroll) pairs 0 and 2 are one shift and one mask, 1 and
// 3 two shifts and two masks: five shifts and six masks a word where the
// nibbles as stored before (p + 4j) took seven and eight.
inline uint mq_lane_fp4_bits(uint w, uint p)
{
    return p == 0u   ? (w << 9) & 0x8E008E00u
           : p == 1u ? ((w << 6) & 0x0E000E00u) | ((w << 8) & 0x80008000u)
           : p == 2u ? (w << 1) & 0x8E008E00u
                     : ((w >> 2) & 0x0E000E00u) | (w & 0x80008000u);
}

// Pair p of the lane's word: weights (k, k + 1) of its column, exactly as
// the fused kernels round them (one FP16 rounding of code x scale). Where
// the backend has FP16 pair instructions (the cuda prelude's
// MQ_PRELUDE_HALF2_OPS) the same values come from two or three of them per
// pair: fp4 as FP16 bit pairs (mq_lane_fp4_bits: value x 2^-14, exact) times
// 2^14 (exact) times the scale (one rounding), or, FOLD, times a scale that
// already holds the 2^14 (mq_lane_fold_scales: exact where every scale is
// under 4, the weights' lane_scales_small), one instruction; u4 as q - z
// times the scale (one rounding), q - z exact by IST-DASLab/marlin's bias
// trick: the even pairs' nibbles (bits 0 and 8 of each half) as (1024 + q) -
// (1024 + z), the odd pairs' (bits 4 and 12) as (1024 + 16 q) / 16 - (64 +
// z) in one fma, so that a word needs one shift (by 8) instead of three.
// Elsewhere (Metal, the executor) in float: mq_fp4_scaled and mq_u4_rows.
// ACC (the sums take the scales, LANE_ACC_SCALE): the weights unscaled, u4's
// q - z, fp4's bit pairs (LANE_FP4_ACC_UNIT says what the sums then owe).
// scales and zeros: the column halves' pair (x and byte 0 for even p, y and
// byte 1 for odd), the pair's own picked here by one byte permute where the
// prelude has it (a per-K-tile table of them made the NVRTC of CUDA 13 take
// minutes).
template <bool U4, bool FOLD, bool ACC>
inline half2 mq_lane_pair(uint word, uint p, half2 scales, uint zeros)
{
    // pair p's scale and zero point: those of its column half, p & 1
#ifdef MQ_PRELUDE_HALF2_OPS
    const uint hi = p & 1u; // (bytes 2-3 of the scale pair, byte 1 of the zero points)
    const uint s2 = metal::mq_prmt(as_type<uint>(scales), 0u, hi ? 0x3232u : 0x1010u);
    if (U4) {
        // the biases 1024 + z (even pairs) and -(64 + z) (odd: 0xD400 | z << 4)
        const uint t = p < 2u ? word : word >> 8;
        const uint q = (p & 1u) == 0u
                           ? metal::mq_hsub2(metal::mq_and_or(t, 0x000F000Fu, 0x64006400u),
                                             metal::mq_prmt(zeros, 0x64646464u, 0x4040u))
                           : metal::mq_hfma2(metal::mq_and_or(t, 0x00F000F0u, 0x64006400u), 0x2C002C00u,
                                             metal::mq_prmt(zeros << 4, 0xD4D4D4D4u, 0x4141u));
        return as_type<half2>(ACC ? q : metal::mq_hmul2(q, s2));
    }
    const uint hb = mq_lane_fp4_bits(word, p);
    if (ACC) // (the sums take the scale and the 2^14: LANE_FP4_ACC_UNIT)
        return as_type<half2>(hb);
    return as_type<half2>(FOLD ? metal::mq_hmul2(hb, s2)
                               : metal::mq_hmul2(metal::mq_hmul2(hb, 0x74007400u), s2));
#else
    const float scale = float((p & 1u) ? scales.y : scales.x);
    if (U4)
        return mq_u4_rows(word, p, as_type<float>(((p & 1u) ? zeros >> 8 : zeros & 0xffu) | 0x4B000000u),
                          ACC ? 1.0f : scale);
    return mq_fp4_scaled(mq_lane_fp4_bits(word, p),
                         ACC ? 16384.0f : FOLD ? scale : scale * 16384.0f);
#endif
}

// FOLD: a stage's fp4 scales times 2^14 (exact: the weights' scales are all
// under 4, MqParams::lane_fold), once per K tile instead of once per pair.
template <bool FOLD>
inline void mq_lane_fold_scales(thread MqLaneStage &s)
{
    if (!FOLD)
        return;
    MQ_UNROLL
    for (uint i = 0; i < 2u; i++) {
        MQ_UNROLL
        for (uint hlf = 0; hlf < 2u; hlf++) {
#ifdef MQ_PRELUDE_HALF2_OPS
            s.sc[i][hlf] = as_type<half2>(metal::mq_hmul2(as_type<uint>(s.sc[i][hlf]), 0x74007400u));
#else
            s.sc[i][hlf].x = half(float(s.sc[i][hlf].x) * 16384.0f);
            s.sc[i][hlf].y = half(float(s.sc[i][hlf].y) * 16384.0f);
#endif
        }
    }
}

// One K tile's multiply: the 16-K atoms of super-block kg of the tile (A at
// As), the weights of stage s decoded into fragments atom by atom. Trellis:
// the levels through the pair codebook lut, multiplied unscaled into part,
// which each window of K one scale covers (LANE_SCALE_ATOMS atoms: the group,
// at most the super-block) adds to acc times the rows' scales
// (mq_lane_acc_add_scaled).
template <int FMT, bool FOLD>
inline void mq_lane_tile(thread simdgroup_float8x8 (&acc)[2][2][LANE_FRAG_M],
                         thread const MqLaneStage &s, threadgroup const half *As, uint kg,
                         threadgroup const uint *lut, uint lut_lane)
{
    // the MMAs' sums: the window's (part) where the products are scaled, else acc
    simdgroup_float8x8 part[2][2][LANE_FRAG_M];
    thread simdgroup_float8x8(&sums)[2][2][LANE_FRAG_M] = LANE_ACC_SCALE(FMT) ? part : acc;
    MQ_UNROLL
    for (uint w = 0; w < uint(LANE_ATOMS); w++) { // the super-block's 16-K atoms
        if (LANE_ACC_SCALE(FMT) && w % uint(LANE_SCALE_ATOMS) == 0u) {
            MQ_UNROLL
            for (uint i = 0; i < 2u; i++) {
                MQ_UNROLL
                for (uint h = 0; h < 2u; h++) {
                    MQ_UNROLL
                    for (uint mi = 0; mi < uint(LANE_FRAG_M); mi++)
                        part[i][h][mi] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
                }
            }
        }
        simdgroup_half8x8 wf[2][2][2]; // [column block][column half][K half]
        MQ_UNROLL
        for (uint i = 0; i < 2u; i++) {
            const half2 sc = LANE_PICK(s.sc[i], w / 2u);
            const uint z = LANE_PICK(s.zc[i], w / 2u);
            const uint word = mq_lane_word(s.cw[i], w % 4u);
            MQ_UNROLL
            for (uint q = 0; q < 4u; q++) { // pair q: column half q & 1, K half q >> 1
                half2 v;
#ifdef MQ_LANE_TRELLIS
                v = mq_lane_tr_pair(lut, mq_lane_tr_entry(s.cw[i], s.cx[i], w, q) | lut_lane);
                (void)word, (void)sc, (void)z;
#else
                (void)lut, (void)lut_lane;
                v = mq_lane_pair<FMT == LANE_U4, FOLD, LANE_ACC_SCALE(FMT)>(word, q, sc, z);
#endif
                MQ_FRAG_FILL(wf[i][q & 1u][q >> 1], v);
            }
        }
        MQ_UNROLL
        for (uint mi = 0; mi < uint(LANE_FRAG_M); mi++) {
            simdgroup_half8x8 b0, b1;
            mq_right_pair(b0, b1, As + mi * 8u * uint(A_LD) + kg * uint(LANE_KSB) + w * 16u);
            MQ_UNROLL
            for (uint i = 0; i < 2u; i++)
                mq_mma_16x8x16(sums[i][0][mi], sums[i][1][mi], wf[i][0][0],
                               wf[i][1][0], wf[i][0][1], wf[i][1][1], b0, b1);
        }
        if (LANE_ACC_SCALE(FMT) &&
            w % uint(LANE_SCALE_ATOMS) == uint(LANE_SCALE_ATOMS) - 1u) { // a scale's K done
            MQ_UNROLL
            for (uint i = 0; i < 2u; i++) {
                // the scale of the window's first 32 K: a slice's last tile
                // copies none past its end (zeros), a window's first is in
                const uint first = (w + 1u - uint(LANE_SCALE_ATOMS)) / 2u;
#ifdef MQ_LANE_TRELLIS
                const float2 ts = LANE_PICK(s.ts[i], first);
#else // fp4, u4: the FP16 pair of the column halves' scales (per
      // component: strict MSL's float2 has no such constructor), fp4's
      // times the unit of its unscaled weights
                const half2 hs = LANE_PICK(s.sc[i], first);
                const float unit = FMT == LANE_FP4 ? LANE_FP4_ACC_UNIT : 1.0f;
                float2 ts;
                ts.x = float(hs.x) * unit;
                ts.y = float(hs.y) * unit;
#endif
                MQ_UNROLL
                for (uint mi = 0; mi < uint(LANE_FRAG_M); mi++) {
                    mq_lane_acc_add_scaled(acc[i][0][mi], part[i][0][mi], ts.x);
                    mq_lane_acc_add_scaled(acc[i][1][mi], part[i][1][mi], ts.y);
                }
            }
        }
    }
}

// The A tile of K tile k0 just put in As by this thread: the trellis signs
// su on its chunks (loaded now: the register path's; the staged loop loads
// them a tile ahead), before the barrier; nothing for fp4, u4.
template <int FMT>
inline void mq_lane_a_landed(threadgroup half *As, device const float *su, uint k0, uint k_end,
                             uint tid)
{
#ifdef MQ_LANE_TRELLIS
    if (FMT == LANE_TRELLIS) {
        MqLaneSigns g;
        mq_lane_signs_load(g, su, k0, k_end, tid);
        mq_lane_a_signs(As, g, k0, k_end, tid);
    }
#else
    (void)As, (void)su, (void)k0, (void)k_end, (void)tid;
#endif
}

#include "mq_lane_staged.h"

// the kernel's threadgroup memory, in halves: the stages or two A tiles,
// reused for the K shares at the end (trellis kernels declare their pair
// codebook beside it)
#if LANE_STAGES
#define LANE_SMEM_HALVES MQ_MAX(LANE_STAGES * LANE_STAGE_HALVES, LANE_RED_FLOATS * 2)
#else
#define LANE_SMEM_HALVES MQ_MAX(2 * LANE_A_HALVES, LANE_RED_FLOATS * 2)
#endif


// The K loop over slice kr with the weights in registers (Apple GPUs, the
// executor's default plan): LANE_AHEAD tiles of them fetched ahead, the A
// tile in two buffers (the next one fills while this one is multiplied).
template <int FMT, bool FOLD, typename AS>
inline void mq_lane_k_loop_registers(thread simdgroup_float8x8 (&acc)[2][2][LANE_FRAG_M],
                                     AS A, device const uint *codes,
                                     device const half *scales, device const uchar *zeros,
                                     device const float *su, threadgroup const uint *lut,
                                     constant MqParams &p, thread const MqLaneAt &w, uint row0,
                                     uint2 kr, threadgroup half *smem, uint tid, uint kg)
{
    // stages: this tile's weights (st[0]) and the next LANE_AHEAD tiles' in flight
    MqLaneStage st[LANE_AHEAD + 1];
    const uint kb0 = kr.x / uint(LANE_KSB) + kg;
    MQ_UNROLL
    for (uint j = 0; j < uint(LANE_AHEAD); j++)
        mq_lane_fetch<FMT>(st[j], codes, scales, zeros, w, kb0 + j * uint(LANE_KSG),
                           kr.x + j * uint(TILE_K) < kr.y);
    MqARegs ra;
    mq_a_tile_begin(smem, ra, A, row0, kr.x, kr.y, p, tid);
    mq_a_tile_end(smem, ra, A, row0, kr.x, kr.y, p, tid);
    mq_lane_a_landed<FMT>(smem, su, kr.x, kr.y, tid);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // at least one pass (zeros for an empty slice: its A and weights read as
    // zero), so every accumulator leaves the loop a product, in the tensor
    // cores' layout where the cuda prelude has one: the epilogue converts
    // them without a test
    uint buf = 0, k0 = kr.x;
    do {
        const uint kn = k0 + uint(TILE_K), kb = k0 / uint(LANE_KSB) + kg;
        threadgroup half *next = smem + (buf ^ 1u) * uint(LANE_A_HALVES);
        if (kn < kr.y) // the next tile's A, in flight during this one's MMAs
            mq_a_tile_begin(next, ra, A, row0, kn, kr.y, p, tid);
        mq_lane_fetch<FMT>(st[LANE_AHEAD], codes, scales, zeros, w,
                           kb + uint(LANE_AHEAD * LANE_KSG), k0 + uint(LANE_AHEAD * TILE_K) < kr.y);
        mq_lane_fold_scales<FOLD>(st[0]);
        mq_lane_tile<FMT, FOLD>(acc, st[0], smem + buf * uint(LANE_A_HALVES), kg, lut,
                                LANE_LUT_LANE(w));
        if (kn < kr.y) {
            mq_a_tile_end(next, ra, A, row0, kn, kr.y, p, tid);
            mq_lane_a_landed<FMT>(next, su, kn, kr.y, tid);
        }
        // the next A in place and this one read by every simdgroup
        threadgroup_barrier(mem_flags::mem_threadgroup);
        MQ_UNROLL
        for (uint j = 0; j < uint(LANE_AHEAD); j++)
            st[j] = st[j + 1];
        buf ^= 1u;
        k0 += uint(TILE_K);
    } while (k0 < kr.y);
}

#include "mq_lane_store.h"

// Where the simdgroup whose first column is col0 reads the lane layout of
// p's weights.
inline MqLaneAt mq_lane_at(constant MqParams &p, uint col0, uint lane)
{
    MqLaneAt w;
    w.nb0 = col0 / 16u;
    w.n16 = MQ_CDIV(p.N, 16u);
    w.kbs = MQ_CDIV(p.K, uint(LANE_KSB));
    w.L = MQ_FRAG_LANE(lane);
    w.lr = mq_lane_frag_row(w.L);
    w.gshift = mq_group_shift(p.group);
    w.gp = (w.kbs * uint(LANE_KSB)) >> w.gshift;
    return w;
}

// The simdgroup's sums over K range kr of the rows from row0 (A: a dense
// operand's pointer, or another source of rows, mq_metal.h's mq_a_base) and
// its 32 columns (w): the K loop of the chip's path (the planner's stages,
// or the weights in registers) from zero accumulators. nbt: the
// threadgroup's first 16-column block.
template <int FMT, typename AS>
inline void mq_lane_sums(thread simdgroup_float8x8 (&acc)[2][2][LANE_FRAG_M],
                         AS A, device const uint *codes,
                         device const half *scales, device const uchar *zeros,
                         device const float *su, threadgroup const uint *lut,
                         constant MqParams &p, thread const MqLaneAt &w, uint row0, uint nbt,
                         uint2 kr, threadgroup half *smem, uint tid, uint sgc, uint kg)
{
    MQ_UNROLL
    for (uint i = 0; i < 2u; i++) {
        MQ_UNROLL
        for (uint h = 0; h < 2u; h++) {
            MQ_UNROLL
            for (uint mi = 0; mi < uint(LANE_FRAG_M); mi++)
                acc[i][h][mi] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
        }
    }
    // fp4 with every scale under 4 folds 2^14 into the scales, where its
    // weights take them (one loop per case: the test is the launch's,
    // outside the loop)
#if LANE_STAGES
    if (FMT == LANE_FP4 && !LANE_ACC_SCALE(FMT) && p.lane_fold != 0u)
        mq_lane_k_loop_staged<FMT, true>(acc, A, codes, scales, zeros, su, lut, p, w, row0, nbt,
                                         kr, smem, tid, sgc, kg);
    else
        mq_lane_k_loop_staged<FMT, false>(acc, A, codes, scales, zeros, su, lut, p, w, row0,
                                          nbt, kr, smem, tid, sgc, kg);
#else
    (void)nbt, (void)sgc;
    if (FMT == LANE_FP4 && !LANE_ACC_SCALE(FMT) && p.lane_fold != 0u)
        mq_lane_k_loop_registers<FMT, true>(acc, A, codes, scales, zeros, su, lut, p, w, row0,
                                            kr, smem, tid, kg);
    else
        mq_lane_k_loop_registers<FMT, false>(acc, A, codes, scales, zeros, su, lut, p, w, row0,
                                             kr, smem, tid, kg);
#endif
}

// The kernel body. Trellis: su the signs, grid the codebook and lut the
// threadgroup memory of its codebook (unused, and may alias smem, for
// fp4 and u4), filled here.
template <int FMT>
inline void mq_lane_gemm(device const half *A, device const uint *codes,
                         device const half *scales, device const uchar *zeros, device half *C,
                         constant MqParams &p, device float *workspace, threadgroup half *smem,
                         device const float *grid, device const float *su,
                         threadgroup uint *lut, uint3 tg, uint tid, uint sg, uint lane)
{
#ifdef MQ_LANE_TRELLIS
    mq_lane_lut_fill(lut, grid, p.n_levels, tid); // read after the first barrier below
#else
    (void)grid;
#endif
    const uint sgc = sg % uint(LANE_SG_COLS), kg = sg / uint(LANE_SG_COLS);
    const uint row0 = tg.y * uint(TILE_M), col0 = tg.x * uint(TILE_N) + sgc * 32u;
    const MqLaneAt w = mq_lane_at(p, col0, lane);
    simdgroup_float8x8 acc[2][2][LANE_FRAG_M];
    mq_lane_sums<FMT>(acc, A, codes, scales, zeros, su, lut, p, w, row0, tg.x * uint(TILE_N / 16),
                      mq_k_range(p, tg.z), smem, tid, sgc, kg);
    threadgroup float *red = (threadgroup float *)smem;
    mq_lane_shares_put(acc, red, sgc, kg, lane);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (kg == 0u)
        mq_lane_store(acc, red, sgc, lane, row0, col0, p, C,
                      workspace + size_t(tg.z) * p.M * p.N);
}

#endif
