/* work_features.c - see work_features.h. Residency: a core holds as many
 * threadgroups as its threadgroup memory and threads allow (the core's own
 * figures where the chip gives them), capped by the chip's resident count. The busiest core's share of the
 * threadgroups sets the compute critical path; every threadgroup's loads
 * count toward memory traffic (no cache reuse across threadgroups); the
 * floor counts only what no schedule can avoid. */
#include <math.h>

#include "work_features.h"

double mq_weight_bytes_per_element(mq_format f, int group)
{
    if (mq_format_is_trellis(f))
        return mq_format_bits(f) / 8.0 + 4.0 / group;
    return 0.5 + 2.0 / group + (f == MQ_FMT_U4 ? 1.0 / group : 0.0);
}

mq_status mq_features_compute(const mq_problem *p, const mq_candidate *c, const mq_chip *chip,
                              mq_features *f, mq_error *err)
{
    mq_limits lim = mq_chip_limits(chip);
    mq_plan plan;
    mq_status st = mq_plan_candidate(p, c, &lim, &plan, err);
    if (st == MQ_OK)
        mq_features_from_plan(p, c, &plan, chip, f);
    return st;
}

void mq_features_from_plan(const mq_problem *p, const mq_candidate *c, const mq_plan *pl,
                           const mq_chip *chip, mq_features *f)
{
    const mq_plan plan = *pl;
    const mq_limits lim = mq_chip_limits(chip);
    double cores = chip->v[MQ_CHIP_GPU_CORES];
    /* a core's own memory and thread limits where the chip gives them (an
     * SM: 228 KB and 2048 threads), else the threadgroup's (Apple GPUs) */
    double core_mem = chip->v[MQ_CHIP_TG_MEM_PER_CORE_BYTES] > 0
                          ? chip->v[MQ_CHIP_TG_MEM_PER_CORE_BYTES] : lim.tg_mem_bytes;
    double core_threads = chip->v[MQ_CHIP_MAX_THREADS_PER_CORE] > 0
                              ? chip->v[MQ_CHIP_MAX_THREADS_PER_CORE] : lim.max_threads_per_tg;
    double by_mem = plan.tg_mem_bytes > 0 ? floor(core_mem / (double)plan.tg_mem_bytes)
                                          : chip->v[MQ_CHIP_RESIDENT_TGS_PER_CORE];
    double by_threads = floor(core_threads / (double)plan.threads_per_tg);
    double resident = fmin(chip->v[MQ_CHIP_RESIDENT_TGS_PER_CORE], fmin(by_mem, by_threads));
    f->p = *p;
    f->variant = (int)c->variant;
    f->resident_per_core = resident < 1 ? 1 : resident;
    f->threadgroups = plan.threadgroups;
    f->threads_per_tg = plan.threads_per_tg;
    f->slots = cores * f->resident_per_core;
    f->waves = ceil(f->threadgroups / f->slots);
    f->last_wave_fill = (f->threadgroups - (f->waves - 1) * f->slots) / f->slots;
    f->units_per_tg = plan.work_per_tg;
    f->tgs_per_core = ceil(f->threadgroups / cores);
    double k_len = (double)p->K / plan.k_slices; /* mean K per work unit */
    double tm = c->p.tile_m, tn = c->p.tile_n, tk = c->p.tile_k;
    double bpe = mq_weight_bytes_per_element(p->format, p->group);
    f->flops_per_unit = 2.0 * tm * tn * k_len;
    f->bytes_per_unit = bpe * tn * k_len + 2.0 * tm * k_len + 4.0 * tm * tn;
    double units = (double)plan.work_units;
    f->total_flops = units * f->flops_per_unit;
    f->total_bytes = units * f->bytes_per_unit;
    f->splitk_bytes = plan.k_slices > 1 ? 2.0 * plan.k_slices * p->M * (double)p->N * 4.0 : 0.0;
    f->dispatches = plan.dispatches;
    double units_core = f->tgs_per_core * f->units_per_tg;
    /* the longest K slice sets a unit's steps on the critical path */
    double ksteps_unit = ceil(fmax(plan.k_slice_len, plan.k_last_len) / tk);
    f->ksteps_core = units_core * ksteps_unit;
    f->row_pieces_core = units_core * k_len / 8.0;
    /* the busiest core's threadgroups run in rounds of `resident` */
    f->units_chain = ceil(f->tgs_per_core / f->resident_per_core) * f->units_per_tg;
    f->ksteps_chain = f->units_chain * ksteps_unit;
    f->thread_work_chain = f->ksteps_chain * tm * tn * tk / f->threads_per_tg;
    double sgs = ceil(f->threads_per_tg / fmax(lim.simd_width, 1));
    f->sg_steps_core = f->ksteps_core * sgs;
    f->chain_sg = f->ksteps_chain * sgs;
    f->unit_out_chain = f->units_chain * tm * tn / f->threads_per_tg;
    f->thread_work_sg = f->thread_work_chain * sgs;
    int cls = p->format == MQ_FMT_FP4 ? 0 : p->format == MQ_FMT_U4 ? 1 : 2;
    for (int i = 0; i < 3; i++)
        f->dequant_core[i] = i == cls ? units_core * tn * k_len : 0.0;
    double core_flops = chip->v[MQ_CHIP_FP32_TFLOPS] * 1e12 / cores;
    double peak = fmax(chip->v[MQ_CHIP_FP32_TFLOPS], chip->v[MQ_CHIP_FP16_TFLOPS]) * 1e12;
    double bw = chip->v[MQ_CHIP_MEM_BW_GBS] * 1e9;
    f->unique_bytes = bpe * (double)p->N * p->K + 2.0 * p->M * (double)p->K +
                      2.0 * p->M * (double)p->N + f->splitk_bytes;
    f->useful_flops = 2.0 * p->M * (double)p->N * p->K;
    f->floor_s = fmax(f->unique_bytes / bw, f->useful_flops / peak);
    f->compute_s = units_core * f->flops_per_unit / core_flops;
    f->memory_s = f->total_bytes / bw;
    f->splitk_s = f->splitk_bytes / bw;
}
