// gemm_trellis_moe.metal - the MoE block of seed 004 section 7: token
// routing through expert_ids and expert_probs, fused SwiGLU over gate_proj,
// up_proj and down_proj, outputs summed weighted by the probabilities; the
// numerics of the CPU model (kernels/moe_run.c), in four dispatches:
//   moe_route              one threadgroup: the routing as a row list, each
//                          expert's (token, slot) pairs in token order (a
//                          counting sort, deterministic, its offsets from a
//                          scan in threadgroup memory), and the touched
//                          experts
//   gemm_trellis_moe       grid (inter / TILE_N, experts): gate and up of
//                          TILE_N intermediate columns for every row of one
//                          touched expert (untouched slots return), FP32,
//                          h = silu(gate) * up rounded to half; MOE_FUSE=1
//                          decodes both projections in each K step (one
//                          pass), MOE_FUSE=0 gate then up (two passes over
//                          K through the dense kernel's body, one
//                          projection's weights and sums live at a time)
//   gemm_trellis_moe_down  grid (hidden / TILE_N, experts, i_split): the
//                          down projection of those rows over one chunk of
//                          the intermediate dimension into the chunk's
//                          partial plane
//   moe_combine            one thread per output: the token's experts in
//                          slot order, each the sum of its chunks' partials
//                          in chunk order, times its probability
// and the glue of the unfused baseline, which runs the dense trellis kernels
// per expert and projection between them (backends/msl_program.c plans it):
//   moe_gather             each expert's rows of x into one dense block
//   moe_swiglu             h = silu(gate) * up from the dense kernels' FP16
//                          outputs, rounded to half
//   moe_weighted_sum       the token's experts' FP16 down outputs times
//                          their probabilities, in slot order
// Both projection kernels stream the weights as the decode path does
// (metal/mq_gemv.h, whose K loop and reductions they call, but for the
// one-pass gate/up): each lane owns 4 columns and 8 K of a step, one tile
// row's 8 rows of indices per BITS 16-byte loads, the codebooks in
// threadgroup memory, su folded into the activations, tscale x sv once per
// column and 8 K; lanes along K and the simdgroups split K, meeting by
// simd_shuffle_xor and threadgroup memory in a fixed order. TILE_M rows
// (token, slot) share each pass over the weights. Weights: each field of
// the three projections concatenated in the order gate, up, down, each
// projection's experts back to back (indices [E][tiles_k][tiles_n]
// [tile_bytes], tscales [E][groups][N], su [E][K], sv [E][N]); one 16-entry
// codebook per projection. TRELLIS_BITS: 2, 3, 4.
#include "mq_gemv.h"
#include "mq_moe.h"

#ifndef MOE_FUSE
#define MOE_FUSE 1
#endif

// Routing rows staged in threadgroup memory, four to an element (more
// are read from device memory where they are).
#define MOE_ROUTE_TG_ROWS 1024u

// How many of the rows chose expert e: the staged copy four rows a load
// (padded with ~0u, no expert), else device memory a row at a time.
inline uint moe_route_count(device const int *ids, threadgroup const float4 *ids4, bool staged,
                            uint rows, uint e)
{
    uint n = 0;
    if (staged)
        for (uint q = 0; q < MQ_CDIV(rows, 4u); q++) {
            const uint4 v = as_type<uint4>(ids4[q]);
            n += uint(v.x == e) + uint(v.y == e) + uint(v.z == e) + uint(v.w == e);
        }
    else
        for (uint i = 0; i < rows; i++)
            n += uint(ids[i]) == e ? 1u : 0u;
    return n;
}

// Row i (the route order's `row`) is expert e's.
inline void moe_route_put(MoeRoute r, constant MoeParams &p, uint i, thread uint &row)
{
    r.row_token[row] = i / p.top_k;
    r.row_of[i] = row;
    row++;
}

// Expert e's n rows in (token, slot) order from row `at` on.
inline void moe_route_rows(MoeRoute r, constant MoeParams &p, device const int *ids,
                           threadgroup const float4 *ids4, bool staged, uint rows, uint e,
                           uint at, uint n)
{
    uint row = at;
    if (staged)
        for (uint q = 0; row < at + n; q++) {
            const uint4 v = as_type<uint4>(ids4[q]);
            if (v.x == e)
                moe_route_put(r, p, 4u * q, row);
            if (v.y == e)
                moe_route_put(r, p, 4u * q + 1u, row);
            if (v.z == e)
                moe_route_put(r, p, 4u * q + 2u, row);
            if (v.w == e)
                moe_route_put(r, p, 4u * q + 3u, row);
        }
    else
        for (uint i = 0; row < at + n; i++)
            if (uint(ids[i]) == e)
                moe_route_put(r, p, i, row);
}

// The routing as a row list: a counting sort by expert, stable in (token,
// slot) order. Each thread owns a contiguous run of experts and counts
// their rows; a scan over the threads in threadgroup memory gives each run
// its first row and its first touched slot, so no thread walks all the
// experts (a serial walk over 128 experts took 12 us on an H100), and each
// thread then writes its own experts' offsets, touched slots and rows.
kernel void moe_route(device const int *expert_ids [[buffer(1)]],
                      constant MoeParams &p [[buffer(3)]],
                      device uint *route [[buffer(4)]],
                      uint tid [[thread_index_in_threadgroup]])
{
    threadgroup float4 ids4[MOE_ROUTE_TG_ROWS / 4u]; // (uint4 bits: a type every compiler
                                                     // of this source moves whole)
    threadgroup uint scan_rows[THREADS];
    threadgroup uint scan_touched[THREADS];
    MoeRoute r = moe_route_view(route, p);
    const uint rows = p.tokens * p.top_k;
    const bool staged = rows <= MOE_ROUTE_TG_ROWS;
    if (staged)
        for (uint q = tid; q < MQ_CDIV(rows, 4u); q += uint(THREADS)) {
            uint4 v;
            v.x = uint(expert_ids[4u * q]);
            v.y = 4u * q + 1u < rows ? uint(expert_ids[4u * q + 1u]) : ~0u;
            v.z = 4u * q + 2u < rows ? uint(expert_ids[4u * q + 2u]) : ~0u;
            v.w = 4u * q + 3u < rows ? uint(expert_ids[4u * q + 3u]) : ~0u;
            ids4[q] = as_type<float4>(v);
        }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint per = MQ_CDIV(p.experts, uint(THREADS));
    const uint e0 = metal::min(tid * per, p.experts), e1 = metal::min(e0 + per, p.experts);
    uint n_rows = 0, n_touched = 0;
    for (uint e = e0; e < e1; e++) {
        const uint n = moe_route_count(expert_ids, ids4, staged, rows, e);
        r.offs[e + 1u] = n; // (this thread reads it back below)
        n_rows += n;
        n_touched += n != 0u ? 1u : 0u;
    }
    scan_rows[tid] = n_rows;
    scan_touched[tid] = n_touched;
    for (uint d = 1; d < uint(THREADS); d <<= 1) { // inclusive scans over the threads
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint a = tid >= d ? scan_rows[tid - d] : 0u;
        const uint t = tid >= d ? scan_touched[tid - d] : 0u;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        scan_rows[tid] += a;
        scan_touched[tid] += t;
    }
    uint at = scan_rows[tid] - n_rows, slot = scan_touched[tid] - n_touched;
    if (tid == 0u)
        r.offs[0] = 0;
    if (tid == uint(THREADS) - 1u)
        r.ntouched[0] = scan_touched[tid];
    for (uint e = e0; e < e1; e++) { // offsets, touched slots and rows, in expert order
        const uint n = r.offs[e + 1u];
        if (n != 0u)
            r.touched[slot++] = e;
        moe_route_rows(r, p, expert_ids, ids4, staged, rows, e, at, n);
        at += n;
        r.offs[e + 1u] = at;
    }
}

// Projection j's K, N and its arrays for expert e.
struct MoeProj {
    uint K, N, tiles_n;
    device const uchar *indices;
    device const float *tscales, *su, *sv;
};

inline MoeProj moe_proj(uint j, uint e, constant MoeParams &p, device const uchar *indices,
                        device const float *tscales, device const float *su,
                        device const float *sv)
{
    const uint tile_bytes = 32u * uint(TRELLIS_BITS);
    const uint H = p.hidden, I = p.inter, E = p.experts;
    // gate and up: [hidden -> inter]; down: [inter -> hidden]
    const uint gu_tiles = (H / 16u) * (I / 16u);
    const uint gu_groups = (H + p.group - 1u) / p.group;
    MoeProj q;
    q.K = j == 2u ? I : H;
    q.N = j == 2u ? H : I;
    q.tiles_n = q.N / 16u;
    const uint tiles = (q.K / 16u) * q.tiles_n, groups = (q.K + p.group - 1u) / p.group;
    // the projections before j: gate and up have the same sizes
    q.indices = indices + size_t(j) * E * gu_tiles * tile_bytes + size_t(e) * tiles * tile_bytes;
    q.tscales = tscales + size_t(j) * E * gu_groups * I + size_t(e) * groups * q.N;
    q.su = su + size_t(j) * E * H + size_t(e) * q.K;
    q.sv = sv + size_t(j) * E * I + size_t(e) * q.N;
    return q;
}

// One lane's share of a K step of projection q: the 8 x 4 codebook values
// of its columns n0..n0+3 at k..k+7, the 4 columns' tscale x sv, the 8 su.
struct MoeStep {
    float w[4][8], sc[4], sgn[8];
};

inline void moe_load_step(MoeProj q, uint k, uint n0, uint gshift, thread const float *colf,
                          threadgroup const float *cb, thread MoeStep &s)
{
    device const uint4 *blk = (device const uint4 *)(
        q.indices + ((k / 16u) * q.tiles_n + n0 / 16u) * (32u * uint(TRELLIS_BITS)) +
        (k % 16u) * (2u * uint(TRELLIS_BITS)));
    uint4 tv[TRELLIS_BITS];
    for (uint i = 0; i < uint(TRELLIS_BITS); i++)
        tv[i] = blk[i];
    const float4 ts = *(device const float4 *)(q.tscales + (k >> gshift) * q.N + n0);
    const float4 s0 = *(device const float4 *)(q.su + k);
    const float4 s1 = *(device const float4 *)(q.su + k + 4u);
    for (uint r = 0; r < 4u; r++) {
        s.sgn[r] = s0[int(r)];
        s.sgn[r + 4u] = s1[int(r)];
        s.sc[r] = ts[int(r)] * colf[r];
    }
    for (uint r = 0; r < 8u; r++) {
        const uint tr = gemv_trellis_row<TRELLIS_BITS>(tv, r, uint(TRELLIS_BITS) * (n0 % 16u));
        for (uint c = 0; c < 4u; c++)
            s.w[c][r] = cb[(tr >> (uint(TRELLIS_BITS) * c)) & ((1u << TRELLIS_BITS) - 1u)];
    }
}

// acc[m][c] += (sum over the step's 8 K of a x su x w) x tscale x sv
inline void moe_fma_step(thread const MoeStep &s, thread const float *a, thread float *acc)
{
    float as[8];
    for (uint r = 0; r < 8u; r++)
        as[r] = a[r] * s.sgn[r];
    for (uint c = 0; c < 4u; c++) {
        float dot = 0.0f;
        for (uint r = 0; r < 8u; r++)
            dot = metal::fma(as[r], s.w[c][r], dot);
        acc[c] = metal::fma(dot, s.sc[c], acc[c]);
    }
}

// MOE_FUSE=0: one projection (gate or up) of the pass's rows over all of
// hidden through the dense kernel's K loop, summed over the lanes and put
// in red for mq_gemv_red_sum after a barrier.
inline void moe_proj_sums(device const half *x, thread const uint *tok, uint nr,
                          thread const MqWeights &w, constant MoeParams &p, uint gshift, uint n0,
                          bool cols, uint kl, threadgroup const float *cb, threadgroup float *red,
                          uint sg, uint lane)
{
    float acc[TILE_M][4];
    for (uint m = 0; m < uint(TILE_M); m++)
        for (uint c = 0; c < 4u; c++)
            acc[m][c] = 0.0f;
    mq_gemv_acc<GEMV_TRELLIS, TRELLIS_BITS>(x, p.hidden, 0u, tok, nr, w, p.inter, 0u, p.hidden,
                                            gshift, n0, cols, kl, cb, acc);
    mq_gemv_lane_sum(acc);
    mq_gemv_red_put(acc, red, sg, lane);
}

// Gate's sums, put in red by every simdgroup, finished into gsum (red is
// free again after it).
inline void moe_keep_gate(threadgroup const float *red, threadgroup float *gsum, uint tid)
{
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < uint(TILE_M * TILE_N); i += uint(THREADS))
        gsum[i] = mq_gemv_red_sum(red, i);
    threadgroup_barrier(mem_flags::mem_threadgroup);
}

#define MOE_RED_FLOATS (SIMDGROUPS * TILE_M * TILE_N)

kernel void gemm_trellis_moe(device const half *x [[buffer(0)]],
                             constant MoeParams &p [[buffer(3)]],
                             device const uint *route_buf [[buffer(4)]],
                             device const uchar *indices [[buffer(5)]],
                             device const float *tscales [[buffer(6)]],
                             device const float *su [[buffer(7)]],
                             device const float *sv [[buffer(8)]],
                             device const float *grid [[buffer(9)]],
                             device half *h [[buffer(10)]], GEMV_POSITIONS)
{
    threadgroup float cb[32];                          // gate's codebook, then up's
    threadgroup float red[MOE_RED_FLOATS];             // the simdgroups' partials
    threadgroup float gsum[TILE_M * TILE_N];           // gate, finished
    if (tid < 32u)
        cb[tid] = grid[(tid / 16u) * 16u + min(tid % 16u, p.n_levels - 1u)];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint rows = p.tokens * p.top_k;
    device const uint *row_token = route_buf, *offs = route_buf + 2u * rows;
    device const uint *touched = offs + p.experts + 1u, *ntouched = touched + p.experts;
    if (tg.y >= ntouched[0])
        return; // the grid is sized for every expert; this slot has none
    const uint e = touched[tg.y], off = offs[e], n = offs[e + 1u] - off;
    const MoeProj qg = moe_proj(0u, e, p, indices, tscales, su, sv);
    const MoeProj qu = moe_proj(1u, e, p, indices, tscales, su, sv);
    const uint ln = lane % uint(GEMV_LN), lk = lane / uint(GEMV_LN);
    const uint col0 = tg.x * uint(TILE_N), n0 = col0 + ln * 4u;
    const bool cols = n0 < p.inter; // inter % 16 == 0: all 4 columns or none
    const uint kl = sg * (8u * uint(GEMV_LK)) + lk * 8u, gshift = mq_group_shift(p.group);
#if MOE_FUSE
    float cg[4] = {1.0f, 1.0f, 1.0f, 1.0f}, cu[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    for (uint c = 0; c < 4u && cols; c++) {
        cg[c] = qg.sv[n0 + c];
        cu[c] = qu.sv[n0 + c];
    }
#else
    const MqWeights wg = {nullptr, nullptr, nullptr, qg.indices, qg.tscales, grid, qg.su, qg.sv};
    const MqWeights wu = {nullptr, nullptr, nullptr, qu.indices, qu.tscales, grid, qu.su, qu.sv};
#endif
    for (uint r0 = 0; r0 < n; r0 += uint(TILE_M)) {
        const uint nr = min(uint(TILE_M), n - r0);
        uint tok[TILE_M];
        for (uint m = 0; m < uint(TILE_M); m++)
            tok[m] = row_token[off + r0 + min(m, nr - 1u)];
#if MOE_FUSE
        float ag[TILE_M][4], au[TILE_M][4];
        for (uint m = 0; m < uint(TILE_M); m++)
            for (uint c = 0; c < 4u; c++)
                ag[m][c] = au[m][c] = 0.0f;
        for (uint k = kl; cols && k < p.hidden; k += uint(TILE_K)) {
            MoeStep sg_, su_;
            moe_load_step(qg, k, n0, gshift, cg, cb, sg_);
            moe_load_step(qu, k, n0, gshift, cu, cb + 16, su_);
            for (uint m = 0; m < uint(TILE_M); m++) {
                if (m >= nr)
                    break;
                float a[8];
                gemv_load_a(x, tok[m] * p.hidden + k, a);
                moe_fma_step(sg_, a, ag[m]);
                moe_fma_step(su_, a, au[m]);
            }
        }
        mq_gemv_lane_sum(ag);
        mq_gemv_lane_sum(au);
        mq_gemv_red_put(ag, red, sg, lane);
        moe_keep_gate(red, gsum, tid);
        mq_gemv_red_put(au, red, sg, lane);
#else
        // gate, then up: the dense kernel's K loop once per projection
        moe_proj_sums(x, tok, nr, wg, p, gshift, n0, cols, kl, cb, red, sg, lane);
        moe_keep_gate(red, gsum, tid);
        moe_proj_sums(x, tok, nr, wu, p, gshift, n0, cols, kl, cb + 16, red, sg, lane);
#endif
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint i = tid; i < uint(TILE_M * TILE_N); i += uint(THREADS)) {
            const uint m = i / uint(TILE_N), col = col0 + i % uint(TILE_N);
            if (m < nr && col < p.inter) { // SwiGLU in float, h rounded to half
                const float g = gsum[i], u = mq_gemv_red_sum(red, i);
                h[size_t(off + r0 + m) * p.inter + col] = half(g / (1.0f + metal::exp(-g)) * u);
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup); // red is reused by the next pass
    }
}

kernel void gemm_trellis_moe_down(constant MoeParams &p [[buffer(3)]],
                                  device const uint *route_buf [[buffer(4)]],
                                  device const uchar *indices [[buffer(5)]],
                                  device const float *tscales [[buffer(6)]],
                                  device const float *su [[buffer(7)]],
                                  device const float *sv [[buffer(8)]],
                                  device const float *grid [[buffer(9)]],
                                  device const half *h [[buffer(10)]],
                                  device float *y [[buffer(11)]],
                                  uint3 tg3 [[threadgroup_position_in_grid]],
                                  uint tid [[thread_index_in_threadgroup]],
                                  uint sg [[simdgroup_index_in_threadgroup]],
                                  uint lane [[thread_index_in_simdgroup]])
{
    threadgroup float cb[16];
    threadgroup float red[MOE_RED_FLOATS];
    if (tid < 16u)
        cb[tid] = grid[32u + min(tid, p.n_levels - 1u)];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint rows = p.tokens * p.top_k;
    device const uint *offs = route_buf + 2u * rows;
    device const uint *touched = offs + p.experts + 1u, *ntouched = touched + p.experts;
    if (tg3.y >= ntouched[0])
        return;
    const uint e = touched[tg3.y], off = offs[e], n = offs[e + 1u] - off, c = tg3.z;
    const uint i0 = c * p.i_chunk, i1 = min(p.inter, i0 + p.i_chunk);
    const MoeProj qd = moe_proj(2u, e, p, indices, tscales, su, sv);
    const MqWeights wd = {nullptr, nullptr, nullptr, qd.indices, qd.tscales, grid, qd.su, qd.sv};
    const uint ln = lane % uint(GEMV_LN), lk = lane / uint(GEMV_LN);
    const uint col0 = tg3.x * uint(TILE_N), n0 = col0 + ln * 4u;
    const bool cols = n0 < p.hidden;
    const uint kl = sg * (8u * uint(GEMV_LK)) + lk * 8u, gshift = mq_group_shift(p.group);
    for (uint r0 = 0; r0 < n; r0 += uint(TILE_M)) {
        const uint nr = min(uint(TILE_M), n - r0);
        float acc[TILE_M][4];
        for (uint m = 0; m < uint(TILE_M); m++)
            for (uint k = 0; k < 4u; k++)
                acc[m][k] = 0.0f;
        mq_gemv_acc<GEMV_TRELLIS, TRELLIS_BITS>(h, p.inter, off + r0, nullptr, nr, wd, p.hidden,
                                                i0, i1, gshift, n0, cols, kl, cb, acc);
        mq_gemv_lane_sum(acc);
        mq_gemv_red_put(acc, red, sg, lane);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint i = tid; i < uint(TILE_M * TILE_N); i += uint(THREADS)) {
            const uint m = i / uint(TILE_N), col = col0 + i % uint(TILE_N);
            if (m < nr && col < p.hidden)
                y[(size_t(c) * rows + off + r0 + m) * p.hidden + col] = mq_gemv_red_sum(red, i);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}

// Each token's experts are read four at a time: their rows and
// probabilities first, then their partials, so the loads of four experts
// are in flight together rather than one expert's chain after another's
// (the partials' sum is in slot order and chunk order as before).
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
                part[j] += y[(size_t(c) * rows + r[j]) * p.hidden + col];
        }
        MQ_UNROLL
        for (uint j = 0; j < 4u; j++)
            if (k0 + j < p.top_k)
                acc += probs[t * p.top_k + k0 + j] * part[j];
    }
    out[gid] = acc;
}

// ---- the unfused baseline's glue ------------------------------------------

kernel void moe_gather(device const half *x [[buffer(0)]], constant MoeParams &p [[buffer(3)]],
                       device const uint *route_buf [[buffer(4)]],
                       device half *xg [[buffer(13)]], uint gid [[thread_position_in_grid]])
{
    const uint per_row = p.hidden / 8u; // 16-byte pieces
    if (gid >= p.tokens * p.top_k * per_row)
        return;
    const uint row = gid / per_row, k = (gid % per_row) * 8u;
    const uint4 v = *(device const uint4 *)(x + size_t(route_buf[row]) * p.hidden + k);
    device uint *d = (device uint *)(xg + size_t(row) * p.hidden + k);
    for (uint i = 0; i < 4u; i++)
        d[i] = v[i];
}

kernel void moe_swiglu(constant MoeParams &p [[buffer(3)]], device half *h [[buffer(10)]],
                       device const half *gu [[buffer(14)]], uint gid [[thread_position_in_grid]])
{
    const uint n = p.tokens * p.top_k * p.inter;
    if (gid >= n)
        return;
    const float g = float(gu[gid]), u = float(gu[n + gid]);
    h[gid] = half(g / (1.0f + metal::exp(-g)) * u);
}

kernel void moe_weighted_sum(device const float *probs [[buffer(2)]],
                             constant MoeParams &p [[buffer(3)]],
                             device const uint *route_buf [[buffer(4)]],
                             device float *out [[buffer(12)]],
                             device const half *yh [[buffer(15)]],
                             uint gid [[thread_position_in_grid]])
{
    const uint rows = p.tokens * p.top_k;
    if (gid >= p.tokens * p.hidden)
        return;
    const uint t = gid / p.hidden, col = gid % p.hidden;
    device const uint *row_of = route_buf + rows;
    float acc = 0.0f;
    for (uint k = 0; k < p.top_k; k++)
        acc += probs[t * p.top_k + k] * float(yh[size_t(row_of[t * p.top_k + k]) * p.hidden + col]);
    out[gid] = acc;
}
