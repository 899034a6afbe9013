/* baselines.c - see baselines.h. */
#include "baselines.h"

static const char *const names[MQ_BASE_COUNT] = {"seed", "stripe", "mlx"};

const char *mq_baseline_name(mq_baseline b)
{
    return (unsigned)b < MQ_BASE_COUNT ? names[b] : "?";
}

static int cdiv(int a, int b) { return (a + b - 1) / b; }

static int legal(const mq_problem *p, const mq_chip *chip, const mq_candidate *c)
{
    mq_plan plan;
    return mq_plan_candidate(p, c, &chip->lim, &plan, NULL) == MQ_OK;
}

int mq_baseline_candidate(mq_baseline b, const mq_problem *p, const mq_chip *chip,
                          mq_candidate *out)
{
    int cores = (int)chip->v[MQ_CHIP_GPU_CORES];
    mq_candidate c;
    if (b == MQ_BASE_SEED) {
        c = mq_default_candidate(p);
    } else if (b == MQ_BASE_STRIPE) {
        if (!mq_variant_serves(MQ_VAR_MARLIN_FP4_STRIPED, p->format))
            return -1;
        c = (mq_candidate){MQ_VAR_MARLIN_FP4_STRIPED, {64, 64, 32, 0, 1}};
        int tiles = cdiv(p->M, 64) * cdiv(p->N, 64);
        int kpar = 1;
        if (tiles < cores) { /* seed 000, 3.1: engage the idle cores by splitting K */
            kpar = cores / tiles;
            if (kpar > p->K / 32)
                kpar = p->K / 32;
        }
        for (c.p.split_k = kpar < 1 ? 1 : kpar; c.p.split_k > 1; c.p.split_k--) {
            c.p.num_threadgroups = 0;
            if (legal(p, chip, &c))
                break;
        }
        int units = tiles * c.p.split_k;
        int tg = (double)p->M * p->N > 1e6 ? 4 * cores : 2 * cores;
        c.p.num_threadgroups = tg < units ? tg : units;
    } else if (b == MQ_BASE_MLX) {
        if (!mq_variant_serves(MQ_VAR_MLX_SPLITK, p->format))
            return -1;
        c = (mq_candidate){MQ_VAR_MLX_SPLITK, {32, 32, 32, 0, 1}};
        int tiles = cdiv(p->M, 32) * cdiv(p->N, 32);
        int sk = 512 / tiles;
        if (sk < 1)
            sk = 1;
        while (sk > 1 && p->K % (sk * p->group) != 0)
            sk--;
        c.p.split_k = sk;
    } else {
        return -1;
    }
    if (!legal(p, chip, &c))
        return -1;
    *out = c;
    return 0;
}
