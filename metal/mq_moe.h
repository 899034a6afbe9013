// mq_moe.h - what every kernel of the MoE block reads of the launch: its
// MoeParams (backends/msl_program.h's mq_msl_moe_params, field for field)
// and the route list moe_route writes (metal/gemm_trellis_moe.metal). Shared
// by the seed-layout block (gemm_trellis_moe.metal) and the lane-layout one
// (lane_trellis_moe.metal), which run the same route, gather and combine.
#ifndef MQ_MOE_H
#define MQ_MOE_H

#include "mq_meet.h"

struct MoeParams {
    uint tokens, hidden, inter, experts, top_k, group;
    uint n_levels;
    uint i_chunk; // intermediate columns per chunk of down (whole groups)
    uint chunks;  // i_split
    uint combine_in_down; // 1: down's threadgroups meet and the last sums the outputs
                          // (moe_combine_meet; the lane block at decode), 0: moe_combine
};

// The route buffer: row_token [rows], row_of [rows], offs [experts + 1],
// touched [experts], ntouched [1] (uint each).
struct MoeRoute {
    device uint *row_token, *row_of, *offs, *touched, *ntouched;
};

inline MoeRoute moe_route_view(device uint *route, constant MoeParams &p)
{
    const uint rows = p.tokens * p.top_k;
    MoeRoute r;
    r.row_token = route;
    r.row_of = route + rows;
    r.offs = route + 2u * rows;
    r.touched = r.offs + p.experts + 1u;
    r.ntouched = r.touched + p.experts;
    return r;
}


// Slot s of the touched experts (moe_route's list, read only): its expert
// e, the first of its rows in the route order and how many it has; false
// past the touched ones.
inline bool moe_slot(device const uint *route, constant MoeParams &p, uint s, thread uint &e,
                     thread uint &first, thread uint &count)
{
    device const uint *offs = route + 2u * p.tokens * p.top_k;
    device const uint *touched = offs + p.experts + 1u;
    if (s >= touched[p.experts]) // ntouched
        return false;
    e = touched[s];
    first = offs[e];
    count = offs[e + 1u] - first;
    return true;
}

// Token t's output at column col: its experts' partials in slot order,
// each the sum of its chunks' partial planes in chunk order, times its
// probability (moe_combine's arithmetic, and moe_combine_meet's).
inline float moe_combine_one(device const float *probs, constant MoeParams &p,
                             device const uint *route_buf, MQ_COHERENT device const float *y,
                             uint t, uint col)
{
    const uint rows = p.tokens * p.top_k;
    device const uint *row_of = route_buf + rows;
    float acc = 0.0f;
    for (uint k0 = 0; k0 < p.top_k; k0 += 4u) {
        uint r[4];
        float part[4];
        MQ_UNROLL
        for (uint j = 0; j < 4u; j++) {
            r[j] = row_of[t * p.top_k + metal::min(k0 + j, p.top_k - 1u)];
            part[j] = 0.0f;
        }
        for (uint c = 0; c < p.chunks; c++) {
            MQ_UNROLL
            for (uint j = 0; j < 4u; j++)
                part[j] += MQ_LOAD_DEVICE_SCOPE(y + (size_t(c) * rows + r[j]) * p.hidden + col);
        }
        MQ_UNROLL
        for (uint j = 0; j < 4u; j++)
            if (k0 + j < p.top_k)
                acc += probs[t * p.top_k + k0 + j] * part[j];
    }
    return acc;
}

// The combine inside down (combine_in_down): after this threadgroup's
// partials are in y (stored by any of its threads, or none), arrive at the
// counter of its columns [c0, c1), which `parts` threadgroups share (every
// one of the down grid with these columns, those with no rows too); the
// last writes out for every token over those columns. Saves the combine's
// dispatch: a few us a step at decode (docs/performance.md). flag: as
// mq_meet_last's.
inline void moe_combine_meet(device const float *probs, constant MoeParams &p,
                             device const uint *route_buf, MQ_COHERENT device const float *y,
                             device float *out, MQ_COHERENT device atomic_uint *cnt, uint parts,
                             uint c0, uint c1, threadgroup uint *flag, uint tid, uint threads)
{
    if (!mq_meet_last(cnt, parts, flag, tid))
        return;
    const uint w = c1 - c0;
    for (uint q = tid; q < p.tokens * w; q += threads) {
        const uint t = q / w, col = c0 + q % w;
        out[size_t(t) * p.hidden + col] = moe_combine_one(probs, p, route_buf, y, t, col);
    }
}

#endif
