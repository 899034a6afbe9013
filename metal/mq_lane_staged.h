// mq_lane_staged.h - the lane kernel's K loop with its weights staged
// through threadgroup memory, for chips that copy device memory there
// without registers (the planner's stages, MQ_PLAN_STAGES >= 2, from the
// chip's async_copy_stages: cp.async on NVIDIA sm_80 and later). Each of
// LANE_STAGES buffers holds one K tile: its A tile, the lane words of its
// codes, their scales and zero points; the copies of tile t + LANE_STAGES - 1
// are issued while tile t is multiplied, and one barrier per tile both
// publishes a landed tile and frees the buffer read the step before. This is
// IST-DASLab/marlin's pipeline (four stages, its STAGES), on the lane layout:
// the registers hold only the tile being decoded, so more bytes are in flight
// than the register path (mq_lane.h's LANE_AHEAD) can keep. Where the copies
// are plain loads and stores (the executor) the path computes the same sums
// and is checked there with an NVIDIA chip's plan. The trellis formats
// (MQ_LANE_TRELLIS) copy 128-K super-blocks and FP32 scales, and put the
// signs su on each A tile as it lands.
#ifndef MQ_LANE_STAGED_H
#define MQ_LANE_STAGED_H

#define LANE_NB (TILE_N / 16) // 16-column blocks of the threadgroup's tile
#define LANE_SB_PIECES (LANE_SB_WORDS / 4) // 16-byte pieces of a block's super-block
#define LANE_STAGE_CODES (LANE_NB * LANE_KSG * LANE_SB_PIECES) // per stage
// 16-byte pieces of scales per stage: 8 pairs per block, super-block and 32
// K (FP16: 32 B, 2 pieces; trellis FP32: 64 B, 4); of zero points (u4), 8
// ushort (16 B) each
#ifdef MQ_LANE_TRELLIS
#define LANE_SCALE_PIECES 4
#else
#define LANE_SCALE_PIECES 2
#endif
#define LANE_STAGE_SCALE_CHUNKS (LANE_NB * LANE_KSG * LANE_HALVES * LANE_SCALE_PIECES)
#ifdef MQ_LANE_TRELLIS
#define LANE_STAGE_ZERO_CHUNKS 0
#else // (fp4 stages hold them too, unused: the planner counts them)
#define LANE_STAGE_ZERO_CHUNKS (LANE_NB * LANE_KSG * 2)
#endif
#define LANE_STAGE_HALVES                                                                    \
    (LANE_A_HALVES + (LANE_STAGE_CODES + LANE_STAGE_SCALE_CHUNKS + LANE_STAGE_ZERO_CHUNKS) * 8)

static_assert(LANE_A_HALVES % 8 == 0, "a stage's parts start on 16 bytes");

// Each thread's share of `count` 16-byte copies: piece i = tid + j x THREADS.
#define LANE_FOR_PIECES(count, i)                                                            \
    MQ_UNROLL                                                                                \
    for (uint j = 0, i = tid; j < uint(MQ_CDIV(count, THREADS)); j++, i += uint(THREADS))     \
        if ((count) % THREADS == 0 || i < uint(count))
#define LANE_COPIES(count) MQ_MAX(MQ_CDIV(count, THREADS), 1)
// no K reaches it: the K offset of a piece past M or N (K < 2^31)
#define LANE_NEVER 0x7fffffffu

// A thread's copies of every K tile, worked out once before the K loop: for
// each of its pieces the offset that does not move with the tile (*_at) and
// the K inside the tile it starts at (*_k; LANE_NEVER past M or N). A tile's
// copy is then an add, a compare and a select. Recomputed per tile from the
// piece's index, the 64-bit addresses were a third of the K loop on an H100
// (16x64x256 fp4: 99 of its 303 instructions a tile and warp).
struct MqLaneCopies {
    uint a_at[LANE_COPIES(A_CHUNKS)], a_k[LANE_COPIES(A_CHUNKS)];
    uint c_at[LANE_COPIES(LANE_STAGE_CODES)], c_k[LANE_COPIES(LANE_STAGE_CODES)];
    uint s_at[LANE_COPIES(LANE_STAGE_SCALE_CHUNKS)], s_k[LANE_COPIES(LANE_STAGE_SCALE_CHUNKS)];
    uint z_at[LANE_COPIES(LANE_STAGE_ZERO_CHUNKS)], z_k[LANE_COPIES(LANE_STAGE_ZERO_CHUNKS)];
};

// The copies of this thread for the threadgroup's rows from row0 and its
// 16-column blocks from nbt (the layout's order: block, super-block, piece;
// scales block, super-block, 32 K, piece; zero points block, super-block,
// 32 K, in bytes).
template <int FMT, typename AS>
inline void mq_lane_copies_init(thread MqLaneCopies &cp, AS A, constant MqParams &p,
                                thread const MqLaneAt &w, uint row0, uint nbt, uint tid)
{
    LANE_FOR_PIECES(A_CHUNKS, i) {
        const uint r = row0 + mq_a_chunk_row(i);
        cp.a_at[j] = mq_a_row_at(A, r, p) + mq_a_chunk_k(i);
        cp.a_k[j] = r < mq_a_rows(A, p) ? mq_a_chunk_k(i) : LANE_NEVER;
    }
    LANE_FOR_PIECES(LANE_STAGE_CODES, i) {
        const uint b = i / uint(LANE_SB_PIECES), nb = nbt + b / uint(LANE_KSG);
        const uint bk = b % uint(LANE_KSG);
        cp.c_at[j] = (nb * w.kbs + bk) * uint(LANE_SB_WORDS) + (i % uint(LANE_SB_PIECES)) * 4u;
        cp.c_k[j] = nb < w.n16 ? bk * uint(LANE_KSB) : LANE_NEVER;
    }
    LANE_FOR_PIECES(LANE_STAGE_SCALE_CHUNKS, i) {
        const uint q = i / uint(LANE_SCALE_PIECES), b = q / uint(LANE_HALVES);
        const uint nb = nbt + b / uint(LANE_KSG), bk = b % uint(LANE_KSG);
        cp.s_at[j] = (nb * w.gp * uint(LANE_SCALE_PIECES) + i % uint(LANE_SCALE_PIECES)) * 8u;
        cp.s_k[j] = nb < w.n16 ? bk * uint(LANE_KSB) + (q % uint(LANE_HALVES)) * 32u : LANE_NEVER;
    }
    if (FMT == LANE_U4) {
        LANE_FOR_PIECES(LANE_STAGE_ZERO_CHUNKS, i) {
            const uint b = i / 2u, nb = nbt + b / uint(LANE_KSG), bk = b % uint(LANE_KSG);
            cp.z_at[j] = nb * w.gp * 16u;
            cp.z_k[j] = nb < w.n16 ? bk * uint(LANE_KSB) + (i % 2u) * 32u : LANE_NEVER;
        }
    }
}

// Issue the copies of the K tile at k0 (of the slice ending at k_end) into
// stage buffer sb: zeros past M, N and the slice (the layout's padding is
// zero too).
template <int FMT, typename AS>
inline void mq_lane_stage_issue(threadgroup half *sb, AS A,
                                device const uint *codes, device const half *scales,
                                device const uchar *zeros, thread const MqLaneCopies &cp,
                                uint gshift, uint k0, uint k_end, uint tid)
{
    // (32-bit offsets, as the other kernels' A and B: when the copies were
    // first staged, 64-bit arithmetic per copy was a fifth of the loop's
    // instructions on an H100; the planner keeps weights of 2^32 uints of
    // codes or more on the register path)
    const uint left = k0 < k_end ? k_end - k0 : 0u; // a piece at K offset k is in if k < left
    LANE_FOR_PIECES(A_CHUNKS, i) {
        const bool in = cp.a_k[j] < left;
        mq_copy16(sb + mq_a_chunk_row(i) * uint(A_LD) + mq_a_chunk_k(i),
                  mq_a_base(A) + (in ? cp.a_at[j] + k0 : 0u), in);
    }
    threadgroup half *cs = sb + uint(LANE_A_HALVES);
    threadgroup half *ss = cs + uint(LANE_STAGE_CODES) * 8u;
    threadgroup half *zs = ss + uint(LANE_STAGE_SCALE_CHUNKS) * 8u;
    const uint kw = (k0 / uint(LANE_KSB)) * uint(LANE_SB_WORDS);
    LANE_FOR_PIECES(LANE_STAGE_CODES, i) {
        const bool in = cp.c_k[j] < left;
        mq_copy16(cs + i * 8u, (device const half *)(codes + (in ? cp.c_at[j] + kw : 0u)), in);
    }
    LANE_FOR_PIECES(LANE_STAGE_SCALE_CHUNKS, i) {
        const bool in = cp.s_k[j] < left;
        const uint g = (k0 + cp.s_k[j]) >> gshift;
        mq_copy16(ss + i * 8u, scales + (in ? cp.s_at[j] + g * uint(LANE_SCALE_PIECES * 8) : 0u),
                  in);
    }
    if (FMT == LANE_U4) {
        LANE_FOR_PIECES(LANE_STAGE_ZERO_CHUNKS, i) {
            const bool in = cp.z_k[j] < left;
            const uint g = (k0 + cp.z_k[j]) >> gshift;
            mq_copy16(zs + i * 8u, (device const half *)(zeros + (in ? cp.z_at[j] + g * 16u : 0u)),
                      in);
        }
    }
}

// What simdgroup (sgc, kg) multiplies of stage buffer sb: the words, scales
// and zero points of lane L (fragment row lr) of its two column blocks, in
// its super-block kg of the tile.
template <int FMT>
inline void mq_lane_stage_read(thread MqLaneStage &s, threadgroup const half *sb, uint sgc,
                               uint kg, thread const MqLaneAt &w)
{
    // (the words as float4 bits and the scales as uint: the types every
    // compiler of this source loads from threadgroup memory whole)
    threadgroup const float4 *cs = (threadgroup const float4 *)(sb + uint(LANE_A_HALVES));
    threadgroup const uint *ss = (threadgroup const uint *)(cs + uint(LANE_STAGE_CODES));
    threadgroup const ushort *zs = (threadgroup const ushort *)(ss + uint(LANE_STAGE_SCALE_CHUNKS) * 4u);
    MQ_UNROLL
    for (uint i = 0; i < 2u; i++) {
        const uint b = (sgc * 2u + i) * uint(LANE_KSG) + kg; // (block, super-block)
        s.cx[i] = uint4(0u);
#ifdef MQ_LANE_TRELLIS
        mq_lane_tr_words_tg((threadgroup const uint *)(cs + b * uint(LANE_SB_PIECES)), w.L,
                            s.cw[i], s.cx[i]);
#else
        s.cw[i] = as_type<uint4>(cs[b * 32u + w.L]);
#endif
        MQ_UNROLL
        for (uint hlf = 0; hlf < uint(LANE_HALVES); hlf++) {
            const uint at = (b * uint(LANE_HALVES) + hlf) * 8u + w.lr; // the pair's index
            if (FMT == LANE_TRELLIS) {
                s.ts[i][hlf].x = as_type<float>(ss[at * 2u]); // (vectors set per component:
                s.ts[i][hlf].y = as_type<float>(ss[at * 2u + 1u]); // strict MSL's constructors)
                s.sc[i][hlf] = as_type<half2>(0u);
            } else {
                s.sc[i][hlf] = as_type<half2>(ss[at]);
                s.ts[i][hlf] = float2(0.0f);
            }
            s.zc[i][hlf] = FMT == LANE_U4 ? uint(zs[at]) : 0u;
        }
    }
}

// The K loop over slice kr: LANE_STAGES - 1 tiles issued ahead (at least one
// pass: were a slice empty, which the planner never makes, it would multiply
// the zeros its first tile's copies fill in), the copies drained and the
// buffers free for the K-share reduction at the end.
template <int FMT, bool FOLD, typename AS>
inline void mq_lane_k_loop_staged(thread simdgroup_float8x8 (&acc)[2][2][LANE_FRAG_M],
                                  AS A, device const uint *codes,
                                  device const half *scales, device const uchar *zeros,
                                  device const float *su, threadgroup const uint *lut,
                                  constant MqParams &p, thread const MqLaneAt &w, uint row0,
                                  uint nbt, uint2 kr, threadgroup half *smem, uint tid, uint sgc,
                                  uint kg)
{
    const uint tiles = kr.y > kr.x ? MQ_CDIV(kr.y - kr.x, uint(TILE_K)) : 1u;
    MqLaneCopies cp;
    mq_lane_copies_init<FMT>(cp, A, p, w, row0, nbt, tid);
    MQ_UNROLL
    for (uint s = 0; s + 1u < uint(LANE_STAGES); s++) {
        const uint k0 = kr.x + s * uint(TILE_K);
        if (s == 0u || k0 < kr.y)
            mq_lane_stage_issue<FMT>(smem + s * uint(LANE_STAGE_HALVES), A, codes, scales, zeros,
                                     cp, w.gshift, k0, kr.y, tid);
        mq_copy_commit();
    }
    // the buffers read (rd) and filled (wr) this step, as offsets into smem
    uint rd = 0, wr = (uint(LANE_STAGES) - 1u) * uint(LANE_STAGE_HALVES);
    const uint ring = uint(LANE_STAGES) * uint(LANE_STAGE_HALVES);
#ifdef MQ_LANE_TRELLIS
    MqLaneSigns sgn; // trellis: the signs of tile t, loaded during tile t - 1
    mq_lane_signs_load(sgn, su, kr.x, kr.y, tid);
#else
    (void)su;
#endif
    for (uint t = 0; t < tiles; t++) {
        const uint k0 = kr.x + t * uint(TILE_K);
        mq_copy_wait(uint(LANE_STAGES) - 2u);
#ifdef MQ_LANE_TRELLIS
        // this thread's copies of tile t landed: its signs on its A chunks,
        // and the next tile's signs in flight
        mq_lane_a_signs(smem + rd, sgn, k0, kr.y, tid);
        mq_lane_signs_load(sgn, su, k0 + uint(TILE_K), kr.y, tid);
#endif
        // tile t landed for every thread, and every simdgroup is done with
        // the buffer of tile t - 1, which the next copies fill
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint kn = k0 + (uint(LANE_STAGES) - 1u) * uint(TILE_K);
        if (kn < kr.y)
            mq_lane_stage_issue<FMT>(smem + wr, A, codes, scales, zeros, cp, w.gshift, kn, kr.y,
                                     tid);
        mq_copy_commit();
        MqLaneStage st;
        mq_lane_stage_read<FMT>(st, smem + rd, sgc, kg, w);
        mq_lane_fold_scales<FOLD>(st);
        mq_lane_tile<FMT, FOLD>(acc, st, smem + rd, kg, lut, LANE_LUT_LANE(w));
        rd = rd + uint(LANE_STAGE_HALVES) == ring ? 0u : rd + uint(LANE_STAGE_HALVES);
        wr = wr + uint(LANE_STAGE_HALVES) == ring ? 0u : wr + uint(LANE_STAGE_HALVES);
    }
    mq_copy_wait(0u);
    threadgroup_barrier(mem_flags::mem_threadgroup);
}

#endif
