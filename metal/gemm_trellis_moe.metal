// gemm_trellis_moe.metal - the MoE block of seed 004 section 7: token
// routing through expert_ids and expert_probs, fused SwiGLU over gate_proj,
// up_proj and down_proj, outputs summed weighted by the probabilities; the
// same decomposition and numerics as the CPU model (kernels/moe_run.c), in
// three dispatches:
//   moe_route         one threadgroup: the routing as a row list, each
//                     expert's (token, slot) pairs in token order (a
//                     counting sort, deterministic), and the touched experts
//   gemm_trellis_moe  one threadgroup per (expert, intermediate chunk), the
//                     grid sized for every expert (untouched slots return):
//                     gate and up of the chunk's columns for the expert's
//                     rows (FP32, su on the activations, tscale x sv per
//                     column and group), h = silu(gate) * up rounded to half,
//                     then the chunk's share of down for every hidden column
//                     into the chunk's partial plane
//   moe_combine       one thread per output: the token's experts in slot
//                     order, each the sum of its chunks' partials in chunk
//                     order, times its probability
// Weights: each field of the three projections concatenated in the order
// gate, up, down, each projection's experts back to back (indices
// [E][tiles_k][tiles_n][tile_bytes], tscales [E][groups][N], su [E][K],
// sv [E][N]); one 16-entry codebook per projection. TRELLIS_BITS: 2, 3, 4.
#define MQ_GEMV // only the common helpers of mq_metal.h
#include "mq_metal.h"

#ifndef MOE_THREADS
#define MOE_THREADS 256
#endif
#ifndef MOE_ROWS
#define MOE_ROWS 8 // rows (token, slot) per pass over an expert's weights
#endif

struct MoeParams {
    uint tokens, hidden, inter, experts, top_k, group;
    uint n_levels;
    uint i_chunk; // intermediate columns per chunk (whole groups)
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

kernel void moe_route(device const int *expert_ids [[buffer(1)]],
                      constant MoeParams &p [[buffer(3)]],
                      device uint *route [[buffer(4)]],
                      uint tid [[thread_index_in_threadgroup]])
{
    MoeRoute r = moe_route_view(route, p);
    const uint rows = p.tokens * p.top_k;
    for (uint e = tid; e < p.experts; e += uint(MOE_THREADS)) { // counts
        uint n = 0;
        for (uint i = 0; i < rows; i++)
            n += uint(expert_ids[i]) == e ? 1u : 0u;
        r.offs[e + 1u] = n;
    }
    threadgroup_barrier(mem_flags::mem_device);
    if (tid == 0u) { // offsets and the touched experts, in expert order
        uint at = 0, nt = 0;
        r.offs[0] = 0;
        for (uint e = 0; e < p.experts; e++) {
            const uint n = r.offs[e + 1u];
            if (n != 0u)
                r.touched[nt++] = e;
            at += n;
            r.offs[e + 1u] = at;
        }
        r.ntouched[0] = nt;
    }
    threadgroup_barrier(mem_flags::mem_device);
    for (uint e = tid; e < p.experts; e += uint(MOE_THREADS)) { // each expert's rows in order
        uint row = r.offs[e];
        for (uint i = 0; i < rows; i++)
            if (uint(expert_ids[i]) == e) {
                r.row_token[row] = i / p.top_k;
                r.row_of[i] = row;
                row++;
            }
    }
}

// Projection j's K, N and its arrays' offsets for expert e.
struct MoeProj {
    uint K, N, groups, tiles_n;
    device const uchar *indices;
    device const float *tscales, *su, *sv, *grid;
};

inline MoeProj moe_proj(uint j, uint e, constant MoeParams &p, device const uchar *indices,
                        device const float *tscales, device const float *su,
                        device const float *sv, device const float *grid)
{
    const uint tile_bytes = (16u * 16u * TRELLIS_BITS + 7u) / 8u;
    const uint H = p.hidden, I = p.inter, E = p.experts;
    // gate and up: [hidden -> inter]; down: [inter -> hidden]
    const uint gu_tiles = ((H + 15u) / 16u) * ((I + 15u) / 16u);
    const uint gu_groups = (H + p.group - 1u) / p.group;
    MoeProj q;
    q.K = j == 2u ? I : H;
    q.N = j == 2u ? H : I;
    q.groups = (q.K + p.group - 1u) / p.group;
    q.tiles_n = (q.N + 15u) / 16u;
    const uint tiles = ((q.K + 15u) / 16u) * q.tiles_n;
    // the projections before j: gate and up have the same sizes
    q.indices = indices + size_t(j) * E * gu_tiles * tile_bytes + size_t(e) * tiles * tile_bytes;
    q.tscales = tscales + size_t(j) * E * gu_groups * I + size_t(e) * q.groups * q.N;
    q.su = su + size_t(j) * E * H + size_t(e) * q.K;
    q.sv = sv + size_t(j) * E * I + size_t(e) * q.N;
    q.grid = grid + j * 16u;
    return q;
}

// The codebook entry of an index (indices are validated < n_levels when
// loaded; the clamp keeps a bad one inside the table)
inline float moe_level(MoeProj q, uint idx, uint n_levels)
{
    return q.grid[min(idx, n_levels - 1u)];
}

kernel void gemm_trellis_moe(device const half *x [[buffer(0)]],
                             constant MoeParams &p [[buffer(3)]],
                             device const uint *route_buf [[buffer(4)]],
                             device const uchar *indices [[buffer(5)]],
                             device const float *tscales [[buffer(6)]],
                             device const float *su [[buffer(7)]],
                             device const float *sv [[buffer(8)]],
                             device const float *grid [[buffer(9)]],
                             device half *h [[buffer(10)]],
                             device float *y [[buffer(11)]],
                             uint tg [[threadgroup_position_in_grid]],
                             uint tid [[thread_index_in_threadgroup]])
{
    const uint rows = p.tokens * p.top_k;
    device const uint *row_token = route_buf, *offs = route_buf + 2u * rows;
    device const uint *touched = offs + p.experts + 1u, *ntouched = touched + p.experts;
    const uint ti = tg / p.chunks, c = tg % p.chunks;
    if (ti >= ntouched[0])
        return; // the grid is sized for every expert; this slot has none
    const uint e = touched[ti], off = offs[e], n = offs[e + 1u] - off;
    const uint i0 = c * p.i_chunk, i1 = min(p.inter, i0 + p.i_chunk);
    const MoeProj qg = moe_proj(0u, e, p, indices, tscales, su, sv, grid);
    const MoeProj qu = moe_proj(1u, e, p, indices, tscales, su, sv, grid);
    const MoeProj qd = moe_proj(2u, e, p, indices, tscales, su, sv, grid);
    for (uint r0 = 0; r0 < n; r0 += uint(MOE_ROWS)) {
        const uint nr = min(uint(MOE_ROWS), n - r0);
        // gate and up of the chunk's columns: a thread per column
        for (uint j = i0 + tid; j < i1; j += uint(MOE_THREADS)) {
            float g[MOE_ROWS], u[MOE_ROWS];
            for (uint r = 0; r < uint(MOE_ROWS); r++)
                g[r] = u[r] = 0.0f;
            for (uint gi = 0; gi < qg.groups; gi++) {
                float sg[MOE_ROWS], su_[MOE_ROWS]; // the group's partial sums
                for (uint r = 0; r < uint(MOE_ROWS); r++)
                    sg[r] = su_[r] = 0.0f;
                const uint k1 = min(qg.K, (gi + 1u) * p.group);
                for (uint k = gi * p.group; k < k1; k++) {
                    const float wg = moe_level(qg, mq_trellis_index(qg.indices, qg.tiles_n, k, j),
                                               p.n_levels);
                    const float wu = moe_level(qu, mq_trellis_index(qu.indices, qu.tiles_n, k, j),
                                               p.n_levels);
                    for (uint r = 0; r < nr; r++) {
                        const float a = float(x[row_token[off + r0 + r] * p.hidden + k]);
                        sg[r] += (a * qg.su[k]) * wg;
                        su_[r] += (a * qu.su[k]) * wu;
                    }
                }
                const float fg = qg.tscales[gi * qg.N + j] * qg.sv[j];
                const float fu = qu.tscales[gi * qu.N + j] * qu.sv[j];
                for (uint r = 0; r < nr; r++) {
                    g[r] += sg[r] * fg;
                    u[r] += su_[r] * fu;
                }
            }
            for (uint r = 0; r < nr; r++) // SwiGLU in float, h rounded to half
                h[(off + r0 + r) * p.inter + j] = half(g[r] / (1.0f + metal::exp(-g[r])) * u[r]);
        }
        threadgroup_barrier(mem_flags::mem_device); // every column of h before down reads it
        // the chunk's share of down for every hidden column: a thread per column
        const uint g0 = i0 / p.group, g1 = (i1 + p.group - 1u) / p.group;
        for (uint col = tid; col < p.hidden; col += uint(MOE_THREADS)) {
            float acc[MOE_ROWS];
            for (uint r = 0; r < uint(MOE_ROWS); r++)
                acc[r] = 0.0f;
            for (uint gi = g0; gi < g1; gi++) {
                float s[MOE_ROWS];
                for (uint r = 0; r < uint(MOE_ROWS); r++)
                    s[r] = 0.0f;
                const uint k1 = min(i1, (gi + 1u) * p.group);
                for (uint k = max(i0, gi * p.group); k < k1; k++) {
                    const float wd =
                        moe_level(qd, mq_trellis_index(qd.indices, qd.tiles_n, k, col),
                                  p.n_levels);
                    for (uint r = 0; r < nr; r++)
                        s[r] += (float(h[(off + r0 + r) * p.inter + k]) * qd.su[k]) * wd;
                }
                const float f = qd.tscales[gi * qd.N + col] * qd.sv[col];
                for (uint r = 0; r < nr; r++)
                    acc[r] += s[r] * f;
            }
            for (uint r = 0; r < nr; r++)
                y[(size_t(c) * rows + off + r0 + r) * p.hidden + col] = acc[r];
        }
        threadgroup_barrier(mem_flags::mem_device); // h's rows are reused by the next pass
    }
}

kernel void moe_combine(device const float *probs [[buffer(2)]],
                        constant MoeParams &p [[buffer(3)]],
                        device const uint *route_buf [[buffer(4)]],
                        device const float *y [[buffer(11)]],
                        device float *out [[buffer(12)]],
                        uint gid [[thread_position_in_grid]])
{
    const uint rows = p.tokens * p.top_k;
    if (gid >= p.tokens * p.hidden)
        return;
    const uint t = gid / p.hidden, col = gid % p.hidden;
    device const uint *row_of = route_buf + rows;
    float acc = 0.0f;
    for (uint k = 0; k < p.top_k; k++) {
        const uint r = row_of[t * p.top_k + k];
        float part = 0.0f;
        for (uint c = 0; c < p.chunks; c++)
            part += y[(size_t(c) * rows + r) * p.hidden + col];
        acc += probs[t * p.top_k + k] * part;
    }
    out[gid] = acc;
}
