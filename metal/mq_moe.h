// mq_moe.h - what every kernel of the MoE block reads of the launch: its
// MoeParams (backends/msl_program.h's mq_msl_moe_params, field for field)
// and the route list moe_route writes (metal/gemm_trellis_moe.metal). Shared
// by the seed-layout block (gemm_trellis_moe.metal) and the lane-layout one
// (lane_trellis_moe.metal), which run the same route, gather and combine.
#ifndef MQ_MOE_H
#define MQ_MOE_H

struct MoeParams {
    uint tokens, hidden, inter, experts, top_k, group;
    uint n_levels;
    uint i_chunk; // intermediate columns per chunk of down (whole groups)
    uint chunks;  // i_split
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

#endif
