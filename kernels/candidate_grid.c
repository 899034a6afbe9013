/* candidate_grid.c - see candidate_grid.h. */
#include <stdio.h>

#include "candidate_grid.h"

static const int splits[] = {1, 2, 3, 4, 8};
static const int tg_per_core[] = {1, 2, 4, 8};
#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

/* The tiles tried, per dequant strategy: the matrix kernels' 8x8 multiples,
 * the decode path's rows in registers (1..16), columns per simdgroup
 * (16..128) and K per threadgroup step (its simdgroups' share), and the
 * lane kernel's. */
typedef struct {
    const int *m, *n, *k;
    int nm, nn, nk;
} tile_lists;
static const int mat_ms[] = {8, 16, 32, 64, 128};
static const int mat_ns[] = {32, 64, 128, 256, 512, 1024};
static const int mat_ks[] = {16, 32, 64, 128, 256};
static const int gemv_ms[] = {1, 2, 4, 8, 16};
static const int gemv_ns[] = {16, 32, 64, 128};
static const int gemv_ks[] = {16, 32, 64, 128, 256, 512, 1024};
static const tile_lists mat_tiles = {mat_ms, mat_ns, mat_ks, COUNT(mat_ms), COUNT(mat_ns),
                                     COUNT(mat_ks)};
static const tile_lists gemv_tiles = {gemv_ms, gemv_ns, gemv_ks, COUNT(gemv_ms),
                                      COUNT(gemv_ns), COUNT(gemv_ks)};
/* the lane kernel: up to 64 rows of accumulators, 32 columns per
 * simdgroup, whole 64-K super-blocks */
static const int lane_ms[] = {8, 16, 32, 64};
static const int lane_ns[] = {32, 64, 128};
static const int lane_ks[] = {64, 128, 256, 512};
static const tile_lists lane_tiles = {lane_ms, lane_ns, lane_ks, COUNT(lane_ms), COUNT(lane_ns),
                                      COUNT(lane_ks)};

static int cdiv(int a, int b) { return (a + b - 1) / b; }

/* Why a tile is pointless for this problem (a smaller tile of the grid
 * already covers the dimension), or NULL. */
static const char *oversized(const mq_problem *p, const mq_params *q, const tile_lists *t,
                             char *buf, size_t n)
{
    if (q->tile_m / 2 >= p->M && q->tile_m / 2 >= t->m[0])
        snprintf(buf, n, "tile_m=%d: tile_m=%d already covers M=%d", q->tile_m, q->tile_m / 2,
                 p->M);
    else if (q->tile_n / 2 >= p->N && q->tile_n / 2 >= t->n[0])
        snprintf(buf, n, "tile_n=%d: tile_n=%d already covers N=%d", q->tile_n, q->tile_n / 2,
                 p->N);
    else if (q->tile_k / 2 >= p->K && q->tile_k / 2 >= t->k[0])
        snprintf(buf, n, "tile_k=%d: tile_k=%d already covers K=%d", q->tile_k, q->tile_k / 2,
                 p->K);
    else
        return NULL;
    return buf;
}

int mq_candidate_grid(const mq_problem *p, int cores, int seed_only, mq_grid_visit visit,
                      void *ctx)
{
    int rc = 0;
    for (int v = 0; v < mq_variant_count(); v++) {
        if (!mq_variant_serves((mq_variant)v, p->format))
            continue;
        const mq_variant_info *vi = mq_variant_get((mq_variant)v);
        if (seed_only) {
            mq_candidate c = {(mq_variant)v, vi->defaults};
            if ((rc = visit(&c, NULL, ctx)) != 0)
                return rc;
            continue;
        }
        int nsplit = vi->schedule == MQ_SCHED_GRID2D ? 1 : COUNT(splits);
        const tile_lists *t = vi->dequant == MQ_DEQ_GEMV   ? &gemv_tiles
                              : vi->dequant == MQ_DEQ_LANE ? &lane_tiles
                                                           : &mat_tiles;
        for (int a = 0; a < t->nm; a++)
            for (int b = 0; b < t->nn; b++)
                for (int k = 0; k < t->nk; k++)
                    for (int s = 0; s < nsplit; s++) {
                        mq_candidate c = {(mq_variant)v, {t->m[a], t->n[b], t->k[k], 0, splits[s]}};
                        char why[256];
                        const char *sr = oversized(p, &c.p, t, why, sizeof why);
                        if ((rc = visit(&c, sr, ctx)) != 0)
                            return rc;
                        if (vi->schedule != MQ_SCHED_STRIPED)
                            continue;
                        /* one threadgroup per work unit (above), then multiples of the cores */
                        int units = cdiv(p->M, c.p.tile_m) * cdiv(p->N, c.p.tile_n) * c.p.split_k;
                        for (int t = 0; t < COUNT(tg_per_core); t++) {
                            c.p.num_threadgroups = cores * tg_per_core[t];
                            if (c.p.num_threadgroups == units)
                                continue; /* the same as one per unit */
                            if ((rc = visit(&c, sr, ctx)) != 0)
                                return rc;
                        }
                    }
    }
    return 0;
}
