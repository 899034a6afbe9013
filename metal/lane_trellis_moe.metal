// lane_trellis_moe.metal - the MoE block's projections on the trellis lane
// layout (mq_lane.h, mq_lane_trellis.h): the dense lane_trellis kernel's K
// loop run per touched expert, between the seed block's route and combine
// (gemm_trellis_moe.metal; backends/msl_moe_lane.c plans the four
// dispatches):
//   lane_trellis_moe_gate_up  grid (inter / TILE_N, row tiles, experts x
//                             parts): for TILE_M of one touched expert's
//                             rows (the route order), their tokens' rows
//                             of x read through the route list as the A
//                             tile is loaded (no gather pass), gate over
//                             part p of hidden (the plan's K slice p; one
//                             part: all of it), then up, each through the
//                             lane K loop with its own signs and pair
//                             codebook; with several parts each writes its
//                             sums to the workspace and the last to arrive
//                             adds them up (mq_meet.h); h = silu(gate) x
//                             up in FP32, rounded to half
//   lane_trellis_moe_down     grid (hidden / TILE_N, row tiles, experts x
//                             chunks): down over chunk c of the
//                             intermediate dimension (the plan's K slice c)
//                             into partial plane c, which moe_combine sums
// A threadgroup past its expert's rows, or a slot past the touched experts,
// returns at once. Each projection's MqParams (lp: M = the most rows one
// expert can hold, the tokens; its N, K, group, K slices) is the dense
// planner's, so the K loop, its stages and the threadgroup memory are the
// dense kernel's. gate/up's A rows past the expert's own read as zero;
// down's (h) are its neighbours' (or h's padding of `tokens` rows) and are
// never stored.
// The split gate/up's workspace (the parts of K that meet in mq_meet.h):
// one counter per output tile (column tile, row tile, slot), then the
// parts' FP32 sums [k_slices][gate, up][rows][inter], rows in the route
// order (backends/msl_moe_lane.c sizes it the same way).
// Weights: each lane array of the three projections concatenated in the
// order gate, up, down, each projection's experts back to back (codes
// [E][N16][KB][words], scales [E][N16][Gp][8][2] FP32 tscales x sv), the
// seed block's su [E][K] and the codebooks, 16 floats per projection.
#define MQ_LANE 1
#define MQ_LANE_TRELLIS 1
#include "mq_lane.h"
#include "mq_meet.h"
#include "mq_moe.h"

// The gate/up pass's A: each row of one expert's block is a token's row
// of x, through the route list (the gather folded into the A loads; the
// A loads of mq_lane.h ask mq_metal.h's mq_a_base, mq_a_row_at and
// mq_a_rows of it). A row past the expert's count reads its last row's
// token (a valid address; the copy is skipped anyway: past mq_a_rows).
struct MoeARows {
    device const half *x;         // the tokens' activations [tokens][hidden]
    device const uint *row_token; // the route order's tokens, from the expert's first row
    uint count;                   // the expert's rows
};

inline device const half *mq_a_base(MoeARows a)
{
    return a.x;
}

inline uint mq_a_row_at(MoeARows a, uint r, constant MqParams &p)
{
    return a.row_token[metal::min(r, a.count - 1u)] * p.K;
}

inline uint mq_a_rows(MoeARows a, constant MqParams &p)
{
    (void)p;
    return a.count;
}

struct MoeGuWork {
    MQ_COHERENT device atomic_uint *cnt;
    MQ_COHERENT device float *sums;
};

inline MoeGuWork moe_gu_work(MQ_COHERENT device float *work, constant MoeParams &mp,
                             constant MqParams &q)
{
    const uint slots = metal::min(mp.tokens * mp.top_k, mp.experts);
    const uint counters = q.n_tiles * q.m_tiles * slots;
    MoeGuWork w;
    w.cnt = (MQ_COHERENT device atomic_uint *)work;
    w.sums = work + MQ_CDIV(counters, 4u) * 4u;
    return w;
}

// The lane kernels' parameters of gate/up (hidden -> inter) and down
// (inter -> hidden): backends/msl_program.h's mq_msl_params, twice.
struct MqLaneMoeParams {
    MqParams gu, dn;
};

// Projection j's arrays for expert e.
struct MoeLaneProj {
    device const uint *codes;
    device const float *scales, *su, *grid;
};

// 32-bit words of codes and FP32 scales of one expert's projection (the
// lane geometry of kernels/layout_lane.c)
inline uint moe_lane_words(constant MqParams &q)
{
    return MQ_CDIV(q.N, 16u) * MQ_CDIV(q.K, uint(LANE_KSB)) * uint(LANE_SB_WORDS);
}

inline uint moe_lane_scales(constant MqParams &q)
{
    const uint kp = MQ_CDIV(q.K, uint(LANE_KSB)) * uint(LANE_KSB);
    return MQ_CDIV(q.N, 16u) * (kp >> mq_group_shift(q.group)) * 16u;
}

inline MoeLaneProj moe_lane_proj(uint j, uint e, constant MoeParams &mp,
                                 constant MqLaneMoeParams &lp, device const uint *codes,
                                 device const float *scales, device const float *su,
                                 device const float *grid)
{
    // the projections before j: gate and up have the same sizes
    const uint E = mp.experts, gw = moe_lane_words(lp.gu), gs = moe_lane_scales(lp.gu);
    const uint w = j == 2u ? moe_lane_words(lp.dn) : gw;
    const uint s = j == 2u ? moe_lane_scales(lp.dn) : gs;
    const uint K = j == 2u ? mp.inter : mp.hidden;
    MoeLaneProj q;
    q.codes = codes + size_t(j) * E * gw + size_t(e) * w;
    q.scales = scales + size_t(j) * E * gs + size_t(e) * s;
    q.su = su + size_t(j) * E * mp.hidden + size_t(e) * K;
    q.grid = grid + j * 16u;
    return q;
}

// The totals of projection q over K range kr for the rows from row0 of A
// and this simdgroup's 32 columns (kg = 0's; the others' shares summed in),
// the codebook filled first. Ends with a barrier: the threadgroup memory
// is free for the next pass.
template <typename AS>
inline void moe_lane_pass(thread float (&v)[2][2][LANE_FRAG_M][2], MoeLaneProj q, AS A,
                          constant MqParams &p, uint3 tg, uint2 kr,
                          uint row0, threadgroup half *smem, threadgroup uint *lut, uint tid,
                          uint sg, uint lane)
{
    const uint sgc = sg % uint(LANE_SG_COLS), kg = sg / uint(LANE_SG_COLS);
    const MqLaneAt w = mq_lane_at(p, tg.x * uint(TILE_N) + sgc * 32u, lane);
    mq_lane_lut_fill(lut, q.grid, p.n_levels, tid); // read after the K loop's first barrier
    simdgroup_float8x8 acc[2][2][LANE_FRAG_M];
    mq_lane_sums<LANE_TRELLIS>(acc, A, q.codes, (device const half *)q.scales, nullptr, q.su,
                               lut, p, w, row0, tg.x * uint(TILE_N / 16), kr, smem, tid, sgc,
                               kg);
    threadgroup float *red = (threadgroup float *)smem;
    mq_lane_shares_put(acc, red, sgc, kg, lane);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (kg == 0u)
        mq_lane_totals(acc, red, sgc, lane, v);
    threadgroup_barrier(mem_flags::mem_threadgroup);
}

// Where element (i, h, mi, j) of a lane's totals lands: its row in the
// tile and its column.
inline uint moe_lane_row(uint mi, uint j, uint lane)
{
    return mi * 8u + mq_lane_frag_col(lane) + j;
}

inline uint moe_lane_col(uint3 tg, uint sg, uint i, uint h, uint lane)
{
    return tg.x * uint(TILE_N) + (sg % uint(LANE_SG_COLS)) * 32u + i * 16u + h * 8u +
           mq_lane_frag_row(lane);
}

// K split into parts: this part's sums of gate and up (g, u) into its
// planes of the workspace, then the tile's meeting; false in a part that
// did not arrive last. In the last one, g and u become the sums of every
// part, added in part order (the same whichever arrived last).
inline bool moe_gu_meet(thread float (&g)[2][2][LANE_FRAG_M][2],
                        thread float (&u)[2][2][LANE_FRAG_M][2], MQ_COHERENT device float *work,
                        constant MoeParams &mp, constant MqParams &q, uint3 tg, uint part,
                        uint first, uint count, uint row0, threadgroup uint *flag, uint tid,
                        uint sg, uint lane)
{
    const MoeGuWork w = moe_gu_work(work, mp, q);
    const size_t plane = size_t(mp.tokens) * mp.top_k * mp.inter;
    const uint parts = q.k_slices;
    if (sg < uint(LANE_SG_COLS)) {
        LANE_FOR_ELEMS(i, hh, mi, j) {
            const uint n = moe_lane_col(tg, sg, i, hh, lane), m = row0 + moe_lane_row(mi, j, lane);
            const size_t at = size_t(2u * part) * plane + size_t(first + m) * mp.inter + n;
            if (m < count && n < mp.inter) {
                w.sums[at] = g[i][hh][mi][j];
                w.sums[at + plane] = u[i][hh][mi][j];
            }
        }
    }
    const uint tile = ((tg.z / parts) * q.m_tiles + tg.y) * q.n_tiles + tg.x;
    if (!mq_meet_last(w.cnt + tile, parts, flag, tid))
        return false;
    if (sg >= uint(LANE_SG_COLS)) // kg > 0: their shares are in kg = 0's sums
        return true;
    LANE_FOR_ELEMS(i, hh, mi, j) {
        const uint n = moe_lane_col(tg, sg, i, hh, lane), m = row0 + moe_lane_row(mi, j, lane);
        float gs = 0.0f, us = 0.0f;
        if (m < count && n < mp.inter) {
            MQ_COHERENT device float *at = w.sums + size_t(first + m) * mp.inter + n;
            for (uint p = 0; p < parts; p++, at += 2u * plane) {
                gs += MQ_LOAD_DEVICE_SCOPE(at);
                us += MQ_LOAD_DEVICE_SCOPE(at + plane);
            }
        }
        g[i][hh][mi][j] = gs;
        u[i][hh][mi][j] = us;
    }
    return true;
}

kernel void lane_trellis_moe_gate_up(device const half *x [[buffer(0)]],
                                     constant MoeParams &mp [[buffer(3)]],
                                     device const uint *route [[buffer(4)]],
                                     device const float *su [[buffer(7)]],
                                     device const float *grid [[buffer(9)]],
                                     device half *h [[buffer(10)]],
                                     device const uint *codes [[buffer(17)]],
                                     device const float *scales [[buffer(18)]],
                                     constant MqLaneMoeParams &lp [[buffer(19)]],
                                     MQ_COHERENT device float *work [[buffer(20)]],
                                     uint3 tg [[threadgroup_position_in_grid]],
                                     uint tid [[thread_index_in_threadgroup]],
                                     uint sg [[simdgroup_index_in_threadgroup]],
                                     uint lane [[thread_index_in_simdgroup]])
{
    threadgroup half smem[LANE_SMEM_HALVES];
    threadgroup uint lut[LANE_LUT_ENTRIES * LANE_LUT_COPIES];
    MQ_CHECK_PLAN(sizeof(smem) + sizeof(lut));
    const uint parts = lp.gu.k_slices, part = tg.z % parts;
    uint e = 0, first = 0, count = 0;
    const uint row0 = tg.y * uint(TILE_M);
    if (!moe_slot(route, mp, tg.z / parts, e, first, count) || row0 >= count)
        return;
    const MoeARows A = {x, route + first, count};
    float g[2][2][LANE_FRAG_M][2], u[2][2][LANE_FRAG_M][2];
    moe_lane_pass(g, moe_lane_proj(0u, e, mp, lp, codes, scales, su, grid), A, lp.gu, tg,
                  mq_k_range(lp.gu, part), row0, smem, lut, tid, sg, lane);
    moe_lane_pass(u, moe_lane_proj(1u, e, mp, lp, codes, scales, su, grid), A, lp.gu, tg,
                  mq_k_range(lp.gu, part), row0, smem, lut, tid, sg, lane);
    if (parts > 1u && !moe_gu_meet(g, u, work, mp, lp.gu, tg, part, first, count, row0, lut,
                                   tid, sg, lane))
        return; // another part finishes the tile
    if (sg >= uint(LANE_SG_COLS)) // kg > 0: their shares are in the totals
        return;
    LANE_FOR_ELEMS(i, hh, mi, j) {
        const uint n = moe_lane_col(tg, sg, i, hh, lane), m = row0 + moe_lane_row(mi, j, lane);
        const float gv = g[i][hh][mi][j], uv = u[i][hh][mi][j];
        if (m < count && n < mp.inter)
            h[size_t(first + m) * mp.inter + n] = half(gv / (1.0f + metal::exp(-gv)) * uv);
    }
}

kernel void lane_trellis_moe_down(constant MoeParams &mp [[buffer(3)]],
                                  device const uint *route [[buffer(4)]],
                                  device const float *su [[buffer(7)]],
                                  device const float *grid [[buffer(9)]],
                                  device const half *h [[buffer(10)]],
                                  device float *y [[buffer(11)]],
                                  device const uint *codes [[buffer(17)]],
                                  device const float *scales [[buffer(18)]],
                                  constant MqLaneMoeParams &lp [[buffer(19)]],
                                  uint3 tg [[threadgroup_position_in_grid]],
                                  uint tid [[thread_index_in_threadgroup]],
                                  uint sg [[simdgroup_index_in_threadgroup]],
                                  uint lane [[thread_index_in_simdgroup]])
{
    threadgroup half smem[LANE_SMEM_HALVES];
    threadgroup uint lut[LANE_LUT_ENTRIES * LANE_LUT_COPIES];
    MQ_CHECK_PLAN(sizeof(smem) + sizeof(lut));
    const uint chunks = lp.dn.k_slices, c = tg.z % chunks;
    uint e = 0, first = 0, count = 0;
    const uint row0 = tg.y * uint(TILE_M);
    if (!moe_slot(route, mp, tg.z / chunks, e, first, count) || row0 >= count)
        return;
    float v[2][2][LANE_FRAG_M][2];
    moe_lane_pass(v, moe_lane_proj(2u, e, mp, lp, codes, scales, su, grid),
                  h + size_t(first) * mp.inter, lp.dn, tg, mq_k_range(lp.dn, c), row0, smem, lut,
                  tid, sg, lane);
    if (sg >= uint(LANE_SG_COLS))
        return;
    const size_t plane = size_t(c) * mp.tokens * mp.top_k;
    LANE_FOR_ELEMS(i, hh, mi, j) {
        const uint n = moe_lane_col(tg, sg, i, hh, lane), m = row0 + moe_lane_row(mi, j, lane);
        if (m < count && n < mp.hidden)
            y[(plane + first + m) * mp.hidden + n] = v[i][hh][mi][j];
    }
}
