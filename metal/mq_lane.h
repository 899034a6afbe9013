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
// super-block of 64 K each (LANE_KSG of them), summed through threadgroup
// memory at the end in a fixed order. The codes of the next two K tiles and
// the next A tile are in flight while a tile is multiplied, and each
// super-block's scales are read once. grid (n_tiles, m_tiles, split_k):
// threadgroup z takes K slice z and writes the float workspace slice, summed
// by marlin_splitk_reduce (or C when K is not split).
#ifndef MQ_LANE_H
#define MQ_LANE_H

#include "mq_metal.h"

#define LANE_KSB 64 // K of a super-block
#define LANE_SG_COLS (TILE_N / 32)
#define LANE_KSG (TILE_K / LANE_KSB)
#define LANE_FRAG_M (TILE_M / 8)
// the partial sums of the simdgroups kg >= 1: per simdgroup 2 x 2 x
// LANE_FRAG_M fragments of 64 floats, in the threadgroup memory A used
#define LANE_RED_FLOATS ((LANE_KSG - 1) * LANE_SG_COLS * 4 * LANE_FRAG_M * 64)
#define LANE_SMEM_HALVES MQ_MAX(TILE_M * A_LD, LANE_RED_FLOATS * 2)

static_assert(TILE_N % 32 == 0 && TILE_K % LANE_KSB == 0 && TILE_M % 8 == 0 && TILE_M <= 64,
              "lane tiles: 32 columns per simdgroup, whole super-blocks of 64 K, up to 64 rows");
static_assert(SIMDGROUPS == LANE_SG_COLS * LANE_KSG, "the lane kernel's simdgroups");

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

// The lane's word of super-block (nb, kb) for column blocks nb0 and nb0 + 1:
// zero past N or K (the layout's padding is zero too).
inline void mq_lane_fetch(thread uint4 (&cw)[2], device const uint *codes, uint nb0, uint n16,
                          uint kbs, uint kb, uint L)
{
    MQ_UNROLL
    for (uint i = 0; i < 2u; i++) {
        const uint nb = nb0 + i;
        cw[i] = uint4(0u);
        if (nb < n16 && kb < kbs) // (an if: strict MSL has no ?: across address spaces)
            cw[i] = ((device const uint4 *)codes)[(size_t(nb) * kbs + kb) * 32u + L];
    }
}

// Pair p of the lane's word: weights (k, k + 1) of its column, exactly as
// the fused kernels round them (one FP16 rounding of code x scale). Where
// the backend has FP16 pair instructions (the cuda prelude's
// MQ_PRELUDE_HALF2_OPS) the same values come from two of them per pair: fp4
// codes as FP16 bit pairs (value x 2^-14, exact), times 2^14 (exact), times
// the scale (one rounding); u4 as (1024 + q) - (1024 + z) (exact small
// integers, Marlin's bias trick) times the scale (one rounding). Elsewhere
// (Metal, the executor) in float, as mq_fp4_rows and mq_u4_rows do.
template <bool U4>
inline half2 mq_lane_pair(uint word, uint p, half scale, uint zero)
{
#ifdef MQ_PRELUDE_HALF2_OPS
    const uint t = word >> (4u * p), s2 = uint(as_type<ushort>(scale)) * 0x10001u;
    if (U4) {
        const uint q = (t & 0x000F000Fu) | 0x64006400u, zb = (0x6400u | zero) * 0x10001u;
        return as_type<half2>(metal::mq_hmul2(metal::mq_hsub2(q, zb), s2));
    }
    const uint hb = ((t << 9) & 0x0E000E00u) | ((t << 12) & 0x80008000u);
    return as_type<half2>(metal::mq_hmul2(metal::mq_hmul2(hb, 0x74007400u), s2));
#else
    if (U4)
        return mq_u4_rows(word, p, as_type<float>(zero | 0x4B000000u), float(scale));
    return mq_fp4_rows(word, p, float(scale) * 16384.0f);
#endif
}

// C (k_slices == 1) or the workspace slice tg.z, from the accumulators of
// simdgroup kg = 0 plus the partials the others left in red, in kg order.
inline void mq_lane_store(thread simdgroup_float8x8 (&acc)[2][2][LANE_FRAG_M],
                          threadgroup const float *red, uint sgc, uint lane, uint row0,
                          uint col0, constant MqParams &p, device half *C, device float *ws)
{
    const uint fr = mq_lane_frag_row(lane), fc = mq_lane_frag_col(lane);
    MQ_UNROLL
    for (uint i = 0; i < 2u; i++) {
        MQ_UNROLL
        for (uint h = 0; h < 2u; h++) {
            MQ_UNROLL
            for (uint mi = 0; mi < uint(LANE_FRAG_M); mi++) {
                float v[2] = {acc[i][h][mi].thread_elements()[0],
                              acc[i][h][mi].thread_elements()[1]};
                const uint at = ((i * 2u + h) * uint(LANE_FRAG_M) + mi) * 64u + lane * 2u;
                for (uint q = 1; q < uint(LANE_KSG); q++) {
                    const uint base = ((q - 1u) * uint(LANE_SG_COLS) + sgc) * 4u *
                                      uint(LANE_FRAG_M) * 64u;
                    v[0] += red[base + at];
                    v[1] += red[base + at + 1u];
                }
                const uint n = col0 + i * 16u + h * 8u + fr;
                MQ_UNROLL
                for (uint j = 0; j < 2u; j++) {
                    const uint m = row0 + mi * 8u + fc + j;
                    if (m < p.M && n < p.N) {
                        if (p.k_slices == 1u)
                            C[m * p.N + n] = half(v[j]);
                        else
                            ws[m * p.N + n] = v[j];
                    }
                }
            }
        }
    }
}

template <bool U4>
inline void mq_lane_gemm(device const half *A, device const uint *codes,
                         device const half *scales, device const uchar *zeros, device half *C,
                         constant MqParams &p, device float *workspace, threadgroup half *smem,
                         uint3 tg, uint tid, uint sg, uint lane)
{
    const uint sgc = sg % uint(LANE_SG_COLS), kg = sg / uint(LANE_SG_COLS);
    const uint row0 = tg.y * uint(TILE_M), col0 = tg.x * uint(TILE_N) + sgc * 32u;
    const uint2 kr = mq_k_range(p, tg.z);
    const uint L = MQ_FRAG_LANE(lane), lr = mq_lane_frag_row(L);
    const uint n16 = MQ_CDIV(p.N, 16u), kbs = MQ_CDIV(p.K, uint(LANE_KSB));
    const uint gshift = mq_group_shift(p.group), gp = (kbs * uint(LANE_KSB)) >> gshift;
    const uint nb0 = col0 / 16u;
    simdgroup_float8x8 acc[2][2][LANE_FRAG_M];
    MQ_UNROLL
    for (uint i = 0; i < 2u; i++) {
        MQ_UNROLL
        for (uint h = 0; h < 2u; h++) {
            MQ_UNROLL
            for (uint mi = 0; mi < uint(LANE_FRAG_M); mi++)
                acc[i][h][mi] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
        }
    }
    MqARegs ra;
    uint4 cw[2], cn[2], cn2[2];
    mq_fetch_a(ra, A, row0, kr.x, kr.y, p, tid);
    mq_lane_fetch(cw, codes, nb0, n16, kbs, kr.x / uint(LANE_KSB) + kg, L);
    cn[0] = cn[1] = uint4(0u);
    if (kr.x + uint(TILE_K) < kr.y) // two K tiles of codes in flight
        mq_lane_fetch(cn, codes, nb0, n16, kbs, (kr.x + uint(TILE_K)) / uint(LANE_KSB) + kg, L);
    for (uint k0 = kr.x; k0 < kr.y; k0 += uint(TILE_K)) {
        mq_put_a(smem, ra, A, row0, k0, kr.y, p, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint kn = k0 + uint(TILE_K), kb = k0 / uint(LANE_KSB) + kg;
        if (kn < kr.y) // the next tile's A, in flight during this one's MMAs
            mq_fetch_a(ra, A, row0, kn, kr.y, p, tid);
        cn2[0] = cn2[1] = uint4(0u);
        if (kn + uint(TILE_K) < kr.y) // the codes two tiles ahead
            mq_lane_fetch(cn2, codes, nb0, n16, kbs, (kn + uint(TILE_K)) / uint(LANE_KSB) + kg, L);
        // the super-block's scales (and zero points) once: K 0-31 and 32-63
        // (one group when the group is 64 or 128, two at 32)
        half2 sc[2][2];
        uint zc[2][2];
        MQ_UNROLL
        for (uint i = 0; i < 2u; i++) {
            const bool in = nb0 + i < n16 && kb < kbs;
            MQ_UNROLL
            for (uint hlf = 0; hlf < 2u; hlf++) {
                const uint g = (kb * uint(LANE_KSB) + hlf * 32u) >> gshift;
                const size_t at = (size_t(nb0 + i) * gp + g) * 8u + lr;
                sc[i][hlf] = as_type<half2>(0u);
                zc[i][hlf] = 0u;
                if (in) {
                    sc[i][hlf] = ((device const half2 *)scales)[at];
                    if (U4)
                        zc[i][hlf] = uint(((device const ushort *)zeros)[at]);
                }
            }
        }
        MQ_UNROLL
        for (uint w = 0; w < 4u; w++) { // the super-block's four 16-K atoms
            simdgroup_half8x8 wf[2][2][2]; // [column block][column half][K half]
            MQ_UNROLL
            for (uint i = 0; i < 2u; i++) {
                const half2 s = sc[i][w / 2u];
                const uint z = zc[i][w / 2u];
                const uint word = w == 0u ? cw[i].x : w == 1u ? cw[i].y : w == 2u ? cw[i].z : cw[i].w;
                MQ_UNROLL
                for (uint q = 0; q < 4u; q++) { // pair q: column half q & 1, K half q >> 1
                    const half2 v = mq_lane_pair<U4>(word, q, (q & 1u) ? s.y : s.x,
                                                     (q & 1u) ? z >> 8 : z & 0xffu);
                    MQ_FRAG_FILL(wf[i][q & 1u][q >> 1], v);
                }
            }
            MQ_UNROLL
            for (uint mi = 0; mi < uint(LANE_FRAG_M); mi++) {
                threadgroup const half *at = smem + mi * 8u * uint(A_LD) + kg * uint(LANE_KSB) + w * 16u;
                simdgroup_half8x8 b0, b1;
                simdgroup_load(b0, at, A_LD, ulong2(0, 0), true);
                simdgroup_load(b1, at + 8, A_LD, ulong2(0, 0), true);
                MQ_UNROLL
                for (uint i = 0; i < 2u; i++)
                    mq_mma_16x8x16(acc[i][0][mi], acc[i][1][mi], wf[i][0][0], wf[i][1][0],
                                   wf[i][0][1], wf[i][1][1], b0, b1);
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup); // A is rewritten next
        cw[0] = cn[0];
        cw[1] = cn[1];
        cn[0] = cn2[0];
        cn[1] = cn2[1];
    }
    // the K shares of the simdgroups kg >= 1 into the threadgroup memory A used
    threadgroup float *red = (threadgroup float *)smem;
    if (kg > 0u) {
        const uint base = ((kg - 1u) * uint(LANE_SG_COLS) + sgc) * 4u * uint(LANE_FRAG_M) * 64u;
        MQ_UNROLL
        for (uint i = 0; i < 2u; i++) {
            MQ_UNROLL
            for (uint h = 0; h < 2u; h++) {
                MQ_UNROLL
                for (uint mi = 0; mi < uint(LANE_FRAG_M); mi++) {
                    const uint at = base + ((i * 2u + h) * uint(LANE_FRAG_M) + mi) * 64u + lane * 2u;
                    red[at] = acc[i][h][mi].thread_elements()[0];
                    red[at + 1u] = acc[i][h][mi].thread_elements()[1];
                }
            }
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (kg == 0u)
        mq_lane_store(acc, red, sgc, lane, row0, col0, p, C,
                      workspace + size_t(tg.z) * p.M * p.N);
}

#endif
