/* space.c - see space.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "space.h"

static const int tile_ms[] = {8, 16, 32, 64, 128};
static const int tile_ns[] = {32, 64, 128, 256, 512, 1024};
static const int tile_ks[] = {16, 32, 64, 128, 256};
static const int splits[] = {1, 2, 3, 4, 8};
static const int tg_per_core[] = {1, 2, 4, 8};
#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

static int cdiv(int a, int b) { return (a + b - 1) / b; }

int mq_space_kind_parse(const char *s, mq_space_kind *out)
{
    if (!strcmp(s, "seed"))
        *out = MQ_SPACE_SEED;
    else if (!strcmp(s, "full"))
        *out = MQ_SPACE_FULL;
    else
        return -1;
    return 0;
}

static int add(mq_space *s, int *cap, const mq_problem *p, const mq_limits *lim, mq_candidate c,
               const char *space_reason)
{
    if (s->n == *cap) {
        int nc = *cap ? 2 * *cap : 256;
        mq_space_entry *e = realloc(s->e, sizeof *e * (size_t)nc);
        if (!e)
            return -1;
        s->e = e;
        *cap = nc;
    }
    mq_space_entry *e = &s->e[s->n++];
    memset(e, 0, sizeof *e);
    e->c = c;
    if (space_reason) {
        snprintf(e->reason, sizeof e->reason, "%s", space_reason);
        return 0;
    }
    mq_error err;
    if (mq_plan_candidate(p, &c, lim, &e->plan, &err) == MQ_OK) {
        e->legal = 1;
        s->legal++;
    } else {
        snprintf(e->reason, sizeof e->reason, "%s", err.msg);
    }
    return 0;
}

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

int mq_space_enumerate(const mq_problem *p, const mq_chip *chip, mq_space_kind kind,
                       mq_space *out)
{
    memset(out, 0, sizeof *out);
    int cap = 0, cores = (int)chip->v[MQ_CHIP_GPU_CORES];
    mq_limits lim = mq_chip_limits(chip);
    for (int v = 0; v < mq_variant_count(); v++) {
        if (!mq_variant_serves((mq_variant)v, p->format))
            continue;
        const mq_variant_info *vi = mq_variant_get((mq_variant)v);
        if (kind == MQ_SPACE_SEED) {
            mq_candidate c = {(mq_variant)v, vi->defaults};
            if (add(out, &cap, p, &lim, c, NULL))
                goto oom;
            continue;
        }
        int nsplit = vi->schedule == MQ_SCHED_GRID2D ? 1 : COUNT(splits);
        for (int a = 0; a < COUNT(tile_ms); a++)
            for (int b = 0; b < COUNT(tile_ns); b++)
                for (int k = 0; k < COUNT(tile_ks); k++)
                    for (int s = 0; s < nsplit; s++) {
                        mq_params q = {tile_ms[a], tile_ns[b], tile_ks[k], 0, splits[s]};
                        char why[256];
                        const char *sr = oversized(p, &q, why, sizeof why);
                        if (vi->schedule != MQ_SCHED_STRIPED) {
                            if (add(out, &cap, p, &lim, (mq_candidate){(mq_variant)v, q}, sr))
                                goto oom;
                            continue;
                        }
                        /* one threadgroup per work unit, then multiples of the cores */
                        int units = cdiv(p->M, q.tile_m) * cdiv(p->N, q.tile_n) * q.split_k;
                        if (add(out, &cap, p, &lim, (mq_candidate){(mq_variant)v, q}, sr))
                            goto oom;
                        for (int t = 0; t < COUNT(tg_per_core); t++) {
                            q.num_threadgroups = cores * tg_per_core[t];
                            if (q.num_threadgroups == units)
                                continue; /* the same as one per unit */
                            if (add(out, &cap, p, &lim, (mq_candidate){(mq_variant)v, q}, sr))
                                goto oom;
                        }
                    }
    }
    return 0;
oom:
    mq_space_free(out);
    return -1;
}

void mq_space_free(mq_space *s)
{
    free(s->e);
    memset(s, 0, sizeof *s);
}
