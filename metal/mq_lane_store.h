// mq_lane_store.h - the end of the lane kernel (mq_lane.h): the K shares
// of the simdgroups kg >= 1 put in threadgroup memory, simdgroup kg = 0's
// totals over them in kg order, and the store of C or of a split-K
// workspace slice; the MoE block's kernels (lane_trellis_moe.metal) take the
// totals for their own stores. Included by mq_lane.h where its sizes are
// defined.
#ifndef MQ_LANE_STORE_H
#define MQ_LANE_STORE_H

// The K shares of the simdgroups kg >= 1 into the threadgroup memory A used
// (red), for kg = 0's mq_lane_totals after a barrier.
inline void mq_lane_shares_put(thread simdgroup_float8x8 (&acc)[2][2][LANE_FRAG_M],
                               threadgroup float *red, uint sgc, uint kg, uint lane)
{
    if (kg == 0u)
        return;
    const uint base = ((kg - 1u) * uint(LANE_SG_COLS) + sgc) * 4u * uint(LANE_FRAG_M) * 64u;
    LANE_FOR_FRAGS(i, h, mi) {
        const uint at = base + ((i * 2u + h) * uint(LANE_FRAG_M) + mi) * 64u + lane * 2u;
        // (a copy: acc itself keeps the layout it has on every path)
        simdgroup_float8x8 a = acc[i][h][mi];
        red[at] = a.thread_elements()[0];
        red[at + 1u] = a.thread_elements()[1];
    }
}

// The sums of simdgroup kg = 0's columns over the whole K tile: its
// accumulators plus the partials the others left in red, in kg order;
// v[i][h][mi][j] is the lane's element j of fragment [i][h][mi].
inline void mq_lane_totals(thread simdgroup_float8x8 (&acc)[2][2][LANE_FRAG_M],
                           threadgroup const float *red, uint sgc, uint lane,
                           thread float (&v)[2][2][LANE_FRAG_M][2])
{
    LANE_FOR_FRAGS(i, h, mi) {
        v[i][h][mi][0] = acc[i][h][mi].thread_elements()[0];
        v[i][h][mi][1] = acc[i][h][mi].thread_elements()[1];
        const uint at = ((i * 2u + h) * uint(LANE_FRAG_M) + mi) * 64u + lane * 2u;
        for (uint q = 1; q < uint(LANE_KSG); q++) {
            const uint base = ((q - 1u) * uint(LANE_SG_COLS) + sgc) * 4u * uint(LANE_FRAG_M) * 64u;
            v[i][h][mi][0] += red[base + at];
            v[i][h][mi][1] += red[base + at + 1u];
        }
    }
}

// C (k_slices == 1) or the workspace slice tg.z, from the totals of
// simdgroup kg = 0 (mq_lane_totals).
inline void mq_lane_store(thread simdgroup_float8x8 (&acc)[2][2][LANE_FRAG_M],
                          threadgroup const float *red, uint sgc, uint lane, uint row0,
                          uint col0, constant MqParams &p, device half *C, device float *ws)
{
    const uint fr = mq_lane_frag_row(lane), fc = mq_lane_frag_col(lane);
    float v[2][2][LANE_FRAG_M][2];
    mq_lane_totals(acc, red, sgc, lane, v);
    LANE_FOR_ELEMS(i, h, mi, j) {
        const uint n = col0 + i * 16u + h * 8u + fr, m = row0 + mi * 8u + fc + j;
        if (m < p.M && n < p.N) {
            if (p.k_slices == 1u)
                C[m * p.N + n] = half(v[i][h][mi][j]);
            else
                ws[m * p.N + n] = v[i][h][mi][j];
        }
    }
}

#endif
