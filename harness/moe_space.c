/* moe_space.c - see moe_space.h: which fused candidates moe-bench measures
 * and the unfused baseline's dense kernels tuned per shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_case.h"
#include "moe_space.h"
#include "msl_program.h"
#include "stats.h"

/* The fused space measured: inner kernels (the streaming path at 1..16 rows
 * a pass up to the most rows an expert gets; when an expert gets more than
 * 16, output tiles first and the streaming path at 16 rows), intermediate
 * splits, gate/up fused or not; legal ones only, in that order (so
 * --max-candidates keeps the likeliest). */
int mq_moe_fused_space(const mq_moe_problem *p, int max_rows, mq_moe_candidate *cs, int cap)
{
    static const int splits[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
    /* the prefill kernel's default first (the unfused baseline's own tile) */
    static const int tiles[][3] = {{64, 64, 32}, {32, 64, 32}, {64, 128, 32}, {128, 64, 64}};
    mq_candidate inner[16];
    int ni = 0;
    for (int i = 0; max_rows > 16 && i < 4; i++) { /* an expert gets more than 16: tiles first */
        inner[ni].variant = MQ_VAR_TRELLIS_PACKED;
        inner[ni++].p = (mq_params){tiles[i][0], tiles[i][1], tiles[i][2], 0, 1};
    }
    for (int tm = max_rows > 16 ? 16 : 1; tm <= 16 && ni < 16; tm *= 2) {
        inner[ni].variant = MQ_VAR_GEMV_TRELLIS;
        inner[ni++].p = (mq_params){tm, 64, 128, 0, 1};
        if (tm >= max_rows)
            break;
    }
    int n = 0;
    for (int i = 0; i < ni; i++)
        for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++)
            for (int f = 1; f >= 0; f--) {
                mq_moe_candidate c = {inner[i], splits[s], f, 0, 0};
                if (n < cap && mq_moe_candidate_check(p, &c, NULL) == MQ_OK)
                    cs[n++] = c;
            }
    return n;
}

/* The second stage of the MSL kernel's search: the best gate/up tile kept,
 * the down kernel's own tile_n (16..128) and simdgroups (1..8) with i_split
 * 1..16, the legal ones not measured yet, at most max. The count. */
int mq_moe_down_stage(const mq_moe_problem *p, const mq_moe_weights *mw,
                      const mq_moe_candidate *best, mq_moe_candidate *cs, int cap, int max)
{
    static const int splits[] = {1, 2, 4, 8, 16};
    int n = 0;
    if (best->inner.variant == MQ_VAR_LANE_TRELLIS)
        return 0; /* the lane block's down runs the inner tile (its i_split is in the space) */
    for (int s = 0; s < 5; s++)
        for (int tn = 16; tn <= 128; tn *= 2)
            for (int sgs = 1; sgs <= 8; sgs *= 2) {
                mq_moe_candidate c = *best;
                c.i_split = splits[s];
                c.down_tile_n = tn;
                c.down_tile_k = 8 * (128 / tn) * sgs;
                if (tn == best->inner.p.tile_n && c.down_tile_k == best->inner.p.tile_k)
                    continue; /* the space had it */
                mq_msl_moe_plan plan;
                if (n < cap && n < max && mq_msl_moe_plan_of(p, mw, &c, NULL, &plan, NULL) == MQ_OK)
                    cs[n++] = c;
            }
    return n;
}

/* The unfused baseline's dense kernels on a device, tuned in this run: for
 * each row-count bucket (powers of two from the fewest rows a touched expert gets in
 * the case's routings, the first bucket taking every count below, up to the most)
 * and each projection shape (gate/up: N=inter K=hidden; down: N=hidden
 * K=inter), every legal decode-path candidate (16 rows a pass above 16
 * rows, where the tile kernels join them) timed on the backend (median device time of 7 runs over
 * experts in rotation) and the fastest kept, as rows of a table for
 * mq_table_lookup, so the baseline runs the best dense kernel of each shape,
 * not a fixed rule. NULL when nothing could be timed (the rule then). */
mq_table *mq_moe_tune_dense(mq_backend *b, const mq_moe_problem *p, const mq_moe_weights *mw,
                            int min_rows, int max_rows, int quiet)
{
    static const int tiles[][4] = {{MQ_VAR_TRELLIS_PACKED, 64, 64, 32},
                                   {MQ_VAR_TRELLIS_PACKED, 32, 64, 32},
                                   {MQ_VAR_TRELLIS_PACKED, 64, 128, 32},
                                   {MQ_VAR_TRELLIS_PACKED, 128, 64, 64},
                                   {MQ_VAR_TRELLIS_DECODE, 32, 128, 32}};
    mq_table_row rows[64];
    int nrows = 0, prev = 0;
    const mq_limits lim = mq_limits_default();
    mq_error e;
    uint64_t seed = 99;
    int n = 1;
    while (n * 2 < min_rows) /* buckets no routing reaches are not tuned: the first row tuned */
        n *= 2;              /* takes every count below it */
    const int first = n;
    for (; prev < max_rows && n <= 4096 && nrows + 2 <= 64; prev = n, n *= 2)
        for (int j = 0; j < 2; j++) {
            int K = j ? p->inter : p->hidden, N = j ? p->hidden : p->inter;
            mq_problem dp = {p->format, n, N, K, p->group};
            uint16_t *A = malloc((size_t)n * K * sizeof *A);
            float *C = malloc((size_t)n * N * sizeof *C);
            for (size_t i = 0; A && i < (size_t)n * K; i++)
                A[i] = mq_float_to_half(
                    (float)((double)(mq_moe_splitmix64(&seed) >> 11) * 0x1.0p-53 - 0.5));
            mq_candidate cs[32];
            int nc = 0;
            for (int t = 0; t < 4; t++) /* above 16 rows: 16 a pass, as the fused kernel */
                for (int sgs = 1; sgs <= 8; sgs *= 2) {
                    int tn = 16 << t;
                    cs[nc].variant = MQ_VAR_GEMV_TRELLIS;
                    cs[nc].p = (mq_params){n < 16 ? n : 16, tn, 8 * (128 / tn) * sgs, 0, 1};
                    nc++;
                }
            for (int t = 0; n > 16 && t < 5; t++) {
                cs[nc].variant = (mq_variant)tiles[t][0];
                cs[nc].p = (mq_params){tiles[t][1], tiles[t][2], tiles[t][3], 0, 1};
                nc++;
            }
            double best = 0;
            mq_candidate bc;
            memset(&bc, 0, sizeof bc);
            for (int ci = 0; A && C && ci < nc; ci++) {
                mq_plan plan;
                if (mq_plan_candidate(&dp, &cs[ci], &lim, &plan, NULL))
                    continue;
                double t[7];
                int k = 0;
                for (int r = 0; r < 7; r++) {
                    const mq_weights *w = &mw->w[j ? MQ_MOE_DOWN : MQ_MOE_GATE][r % (p->experts < 4 ? p->experts : 4)];
                    if (b->run(b, &dp, w, A, C, &cs[ci], &plan, &e))
                        break;
                    double dt = b->device_time ? b->device_time(b) : -1;
                    if (dt < 0)
                        break;
                    t[k++] = dt;
                }
                if (k < 7)
                    continue;
                mq_stats st;
                mq_stats_compute(t, k, &st);
                if (!best || st.median < best) {
                    best = st.median;
                    bc = cs[ci];
                }
            }
            free(A);
            free(C);
            if (!best)
                continue;
            rows[nrows++] = (mq_table_row){p->format, p->group, N, K, n == first ? 1 : prev + 1,
                                           n >= max_rows ? 1 << 30 : n, bc, best, n,
                                           0, 0, 0, 0, 0, 0};
            if (!quiet) {
                char cand[128];
                mq_candidate_str(&bc, cand, sizeof cand);
                fprintf(stderr, "moe-bench: the baseline's dense kernel for %d-%d rows of N=%d K=%d: "
                                "%s (%.4f ms)\n", rows[nrows - 1].m_lo, n, N, K, cand, best * 1e3);
            }
        }
    mq_table *t = NULL;
    if (nrows && mq_table_from_rows("", rows, nrows, &t, &e))
        t = NULL;
    return t;
}
