/* candidate_grid.c - see candidate_grid.h. */
#include <stdio.h>

#include "candidate_grid.h"

static const int tile_ms[] = {8, 16, 32, 64, 128};
static const int tile_ns[] = {32, 64, 128, 256, 512, 1024};
static const int tile_ks[] = {16, 32, 64, 128, 256};
static const int splits[] = {1, 2, 3, 4, 8};
static const int tg_per_core[] = {1, 2, 4, 8};
#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

static int cdiv(int a, int b) { return (a + b - 1) / b; }

/* Why a tile is pointless for this problem (a smaller tile of the grid
 * already covers the dimension), or NULL. */
static const char *oversized(const mq_problem *p, const mq_params *q, char *buf, size_t n)
{
    if (q->tile_m / 2 >= p->M && q->tile_m / 2 >= tile_ms[0])
        snprintf(buf, n, "tile_m=%d: tile_m=%d already covers M=%d", q->tile_m, q->tile_m / 2,
                 p->M);
    else if (q->tile_n / 2 >= p->N && q->tile_n / 2 >= tile_ns[0])
        snprintf(buf, n, "tile_n=%d: tile_n=%d already covers N=%d", q->tile_n, q->tile_n / 2,
                 p->N);
    else if (q->tile_k / 2 >= p->K && q->tile_k / 2 >= tile_ks[0])
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
        for (int a = 0; a < COUNT(tile_ms); a++)
            for (int b = 0; b < COUNT(tile_ns); b++)
                for (int k = 0; k < COUNT(tile_ks); k++)
                    for (int s = 0; s < nsplit; s++) {
                        mq_candidate c = {(mq_variant)v,
                                          {tile_ms[a], tile_ns[b], tile_ks[k], 0, splits[s]}};
                        char why[256];
                        const char *sr = oversized(p, &c.p, why, sizeof why);
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
