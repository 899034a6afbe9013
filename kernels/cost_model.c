/* cost_model.c - see cost_model.h. Residency: a core holds as many
 * threadgroups as its threadgroup memory and threads allow (the core's own
 * figures where the chip gives them), capped by the chip's resident count.
 * The busiest core's share of the threadgroups sets the compute critical
 * path; every threadgroup's loads count toward memory traffic (no cache
 * reuse across threadgroups); the floor counts only what no schedule can
 * avoid. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cost_model.h"

const char *const mq_chip_field_names[MQ_CHIP_NFIELDS] = {
    [MQ_CHIP_GPU_CORES] = "gpu_cores",
    [MQ_CHIP_TG_MEM_BYTES] = "tg_mem_bytes",
    [MQ_CHIP_MAX_THREADS_PER_TG] = "max_threads_per_tg",
    [MQ_CHIP_SIMD_WIDTH] = "simd_width",
    [MQ_CHIP_RESIDENT_TGS_PER_CORE] = "resident_tgs_per_core",
    [MQ_CHIP_MEM_BW_GBS] = "mem_bw_gbs",
    [MQ_CHIP_FP32_TFLOPS] = "fp32_tflops",
    [MQ_CHIP_FP16_TFLOPS] = "fp16_tflops",
    [MQ_CHIP_L2_BYTES] = "l2_bytes",
    [MQ_CHIP_SLC_BYTES] = "slc_bytes",
    [MQ_CHIP_TG_MEM_PER_CORE_BYTES] = "tg_mem_per_core_bytes",
    [MQ_CHIP_MAX_THREADS_PER_CORE] = "max_threads_per_core",
    [MQ_CHIP_TENSOR_FP16_TFLOPS] = "tensor_fp16_tflops",
    [MQ_CHIP_ASYNC_COPY_STAGES] = "async_copy_stages",
    [MQ_CHIP_DECODE_BW_REL] = "decode_bw_rel",
    [MQ_CHIP_PREFILL_REL] = "prefill_rel",
};

mq_limits mq_limits_of_figures(const double fig[MQ_CHIP_NFIELDS])
{
    mq_limits l = {(int)fig[MQ_CHIP_TG_MEM_BYTES], (int)fig[MQ_CHIP_MAX_THREADS_PER_TG],
                   (int)fig[MQ_CHIP_SIMD_WIDTH], (int)fig[MQ_CHIP_GPU_CORES],
                   (int)fig[MQ_CHIP_ASYNC_COPY_STAGES]};
    return l;
}

double mq_weight_bytes_per_element(mq_format f, int group)
{
    if (mq_format_is_trellis(f))
        return mq_format_bits(f) / 8.0 + 4.0 / group;
    return 0.5 + 2.0 / group + (f == MQ_FMT_U4 ? 1.0 / group : 0.0);
}

void mq_features_of(const mq_problem *p, const mq_candidate *c, const mq_plan *pl,
                    const double fig[MQ_CHIP_NFIELDS], mq_features *f)
{
    const mq_plan plan = *pl;
    const mq_limits lim = mq_limits_of_figures(fig);
    double cores = fig[MQ_CHIP_GPU_CORES];
    /* a core's own memory and thread limits where the chip gives them (an
     * SM: 228 KB and 2048 threads), else the threadgroup's (Apple GPUs) */
    double core_mem = fig[MQ_CHIP_TG_MEM_PER_CORE_BYTES] > 0
                          ? fig[MQ_CHIP_TG_MEM_PER_CORE_BYTES] : lim.tg_mem_bytes;
    double core_threads = fig[MQ_CHIP_MAX_THREADS_PER_CORE] > 0
                              ? fig[MQ_CHIP_MAX_THREADS_PER_CORE] : lim.max_threads_per_tg;
    double by_mem = plan.tg_mem_bytes > 0 ? floor(core_mem / (double)plan.tg_mem_bytes)
                                          : fig[MQ_CHIP_RESIDENT_TGS_PER_CORE];
    double by_threads = floor(core_threads / (double)plan.threads_per_tg);
    double resident = fmin(fig[MQ_CHIP_RESIDENT_TGS_PER_CORE], fmin(by_mem, by_threads));
    f->p = *p;
    f->variant = (int)c->variant;
    f->tile_m = c->p.tile_m;
    f->tile_n = c->p.tile_n;
    f->tile_k = c->p.tile_k;
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
    /* the rates the chip sustains: its tier's relative rates where given
     * (0: as advertised) */
    double bw_share = fig[MQ_CHIP_DECODE_BW_REL] > 0 ? fig[MQ_CHIP_DECODE_BW_REL] : 1.0;
    double eff = fig[MQ_CHIP_PREFILL_REL] > 0 ? fig[MQ_CHIP_PREFILL_REL] : 1.0;
    double core_flops = eff * fig[MQ_CHIP_FP32_TFLOPS] * 1e12 / cores;
    double peak = eff * fmax(fig[MQ_CHIP_FP32_TFLOPS], fig[MQ_CHIP_FP16_TFLOPS]) * 1e12;
    double bw = bw_share * fig[MQ_CHIP_MEM_BW_GBS] * 1e9;
    f->unique_bytes = bpe * (double)p->N * p->K + 2.0 * p->M * (double)p->K +
                      2.0 * p->M * (double)p->N + f->splitk_bytes;
    f->useful_flops = 2.0 * p->M * (double)p->N * p->K;
    f->floor_s = fmax(f->unique_bytes / bw, f->useful_flops / peak);
    f->compute_s = units_core * f->flops_per_unit / core_flops;
    f->memory_s = f->total_bytes / bw;
    f->splitk_s = f->splitk_bytes / bw;
}

static const char *const term_names[MQ_MODEL_NSHARED] = {
    "dispatch",    "traffic",    "compute",         "splitk",      "wave",        "dequant_fp4",
    "dequant_u4",  "dequant_trellis", "chain_kstep", "core_sg_step", "thread_work",
    "chain_sg",    "work_sg",     "chain_unit",      "unit_out",
};
static const char *const term_units[MQ_MODEL_NSHARED] = {
    "s per dispatch", "x traffic at peak bandwidth", "x busiest core's flops at peak",
    "x split-K traffic at peak bandwidth", "s per wave",
    "s per FP4 weight on the busiest core", "s per INT4 weight on the busiest core",
    "s per trellis weight on the busiest core", "s per K step on a slot's critical path",
    "s per SIMD-group K step on the busiest core",
    "s per multiply-add per thread on the critical path",
    "s per K step x SIMD group of a threadgroup on the critical path",
    "s per multiply-add per thread x SIMD group on the critical path",
    "s per work unit on the critical path",
    "s per accumulator stored per thread on the critical path",
};

static int shared_of(int j)
{
    return j < MQ_MODEL_NSHARED ? j
                                : MQ_MODEL_NSHARED - MQ_MODEL_NVTERM +
                                      (j - MQ_MODEL_NSHARED) % MQ_MODEL_NVTERM;
}

const char *mq_model_term_name(int j)
{
    return j >= 0 && j < MQ_MODEL_NTERM ? term_names[shared_of(j)] : "?";
}

const char *mq_model_term_unit(int j)
{
    return j >= 0 && j < MQ_MODEL_NTERM ? term_units[shared_of(j)] : "?";
}

int mq_model_term_variant(int j)
{
    return j < MQ_MODEL_NSHARED ? -1 : (j - MQ_MODEL_NSHARED) / MQ_MODEL_NVTERM;
}

void mq_model_terms(const mq_features *f, double x[MQ_MODEL_NTERM])
{
    memset(x, 0, sizeof(double) * MQ_MODEL_NTERM);
    x[0] = f->dispatches;
    x[1] = f->memory_s;
    x[2] = f->compute_s;
    x[3] = f->splitk_s;
    x[4] = f->waves;
    x[5] = f->dequant_core[0];
    x[6] = f->dequant_core[1];
    x[7] = f->dequant_core[2];
    x[8] = f->ksteps_chain;
    x[9] = f->sg_steps_core;
    x[10] = f->thread_work_chain;
    x[11] = f->chain_sg;
    x[12] = f->thread_work_sg;
    x[13] = f->units_chain;
    x[14] = f->unit_out_chain;
    if (f->variant >= 0 && f->variant < MQ_MODEL_MAXVAR)
        for (int k = 0; k < MQ_MODEL_NVTERM; k++)
            x[MQ_MODEL_NSHARED + f->variant * MQ_MODEL_NVTERM + k] =
                x[MQ_MODEL_NSHARED - MQ_MODEL_NVTERM + k];
}

static double predict_x(const double *th, double floor_s, const double *x)
{
    double t = floor_s;
    for (int j = 0; j < MQ_MODEL_NTERM; j++)
        if (x[j] != 0)
            t += fmax(th[j], 0.0) * x[j];
    return t;
}

double mq_model_predict_terms(const mq_model *m, const mq_features *f)
{
    double x[MQ_MODEL_NTERM];
    mq_model_terms(f, x);
    return predict_x(m->theta, f->floor_s, x);
}

double mq_model_predict(const mq_model *m, const mq_features *f)
{
    double t = mq_model_predict_terms(m, f);
    double k = mq_model_kernel_factor(m, f->variant, (int)f->p.format, f->tile_m, f->tile_n,
                                      f->tile_k);
    return f->floor_s + k * (t - f->floor_s);
}

static int kernel_cmp(const mq_kernel_factor *a, const mq_kernel_factor *b)
{
    int d[5] = {a->variant - b->variant, a->format - b->format, a->tile_m - b->tile_m,
                a->tile_n - b->tile_n, a->tile_k - b->tile_k};
    for (int i = 0; i < 5; i++)
        if (d[i])
            return d[i] < 0 ? -1 : 1;
    return 0;
}

/* The index of key in m->kernel, or -(insertion point) - 1. */
static int kernel_find(const mq_model *m, const mq_kernel_factor *key)
{
    int lo = 0, hi = m->n_kernel;
    while (lo < hi) {
        int mid = (lo + hi) / 2, c = kernel_cmp(&m->kernel[mid], key);
        if (!c)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -lo - 1;
}

/* The index of a kernel's factor in m->kernel, or -1. */
static int kernel_index(const mq_model *m, int variant, int format, int tile_m, int tile_n,
                        int tile_k)
{
    if (!m->n_kernel || variant < 0 || variant > 255 || format < 0 || format > 255)
        return -1;
    mq_kernel_factor key = {(unsigned char)variant, (unsigned char)format,
                            (unsigned short)tile_m, (unsigned short)tile_n,
                            (unsigned short)tile_k, 0, 0};
    int i = kernel_find(m, &key);
    return i >= 0 ? i : -1;
}

double mq_model_kernel_factor(const mq_model *m, int variant, int format, int tile_m,
                              int tile_n, int tile_k)
{
    int i = kernel_index(m, variant, format, tile_m, tile_n, tile_k);
    return i >= 0 ? m->kernel[i].factor : 1.0;
}

int mq_model_has_kernel(const mq_model *m, int variant, int format, int tile_m, int tile_n,
                        int tile_k)
{
    return kernel_index(m, variant, format, tile_m, tile_n, tile_k) >= 0;
}

int mq_model_set_kernel_factor(mq_model *m, const mq_kernel_factor *k)
{
    if (!(k->factor > 0) || !isfinite(k->factor))
        return -1;
    int i = kernel_find(m, k);
    if (i >= 0) {
        m->kernel[i] = *k;
        return 0;
    }
    if (m->n_kernel >= MQ_MODEL_MAXKERNEL)
        return -1;
    i = -i - 1;
    memmove(&m->kernel[i + 1], &m->kernel[i], sizeof *k * (size_t)(m->n_kernel - i));
    m->kernel[i] = *k;
    m->n_kernel++;
    return 0;
}

int mq_model_term_index(const char *term, int variant)
{
    for (int j = 0; j < MQ_MODEL_NTERM; j++)
        if (mq_model_term_variant(j) == variant && !strcmp(mq_model_term_name(j), term))
            return j;
    return -1;
}

void mq_kernel_factor_key(const mq_kernel_factor *k, char *buf, size_t n)
{
    snprintf(buf, n, "%s:%dx%dx%d", mq_format_name((mq_format)k->format), k->tile_m, k->tile_n,
             k->tile_k);
}

int mq_kernel_factor_parse(const char *key, int variant, double factor, mq_kernel_factor *out,
                           char *why, size_t n)
{
    char fmt[32], extra[2];
    int tm, tn, tk;
    mq_format f;
    mq_error e;
    if (sscanf(key, "%31[^:]:%dx%dx%d%1s", fmt, &tm, &tn, &tk, extra) != 4) {
        snprintf(why, n, "kernel '%s': expected FORMAT:TILE_MxTILE_NxTILE_K", key);
        return -1;
    }
    if (mq_format_from_name(fmt, &f, &e)) {
        snprintf(why, n, "kernel '%s': %s", key, e.msg);
        return -1;
    }
    if (tm < 1 || tn < 1 || tk < 1 || tm > 65535 || tn > 65535 || tk > 65535 || variant < 0 ||
        variant > 255) {
        snprintf(why, n, "kernel '%s': a tile outside 1..65535 or no variant", key);
        return -1;
    }
    if (!(factor > 0) || !isfinite(factor)) {
        snprintf(why, n, "kernel '%s': factor %g is not finite and positive", key, factor);
        return -1;
    }
    *out = (mq_kernel_factor){(unsigned char)variant, (unsigned char)f, (unsigned short)tm,
                              (unsigned short)tn, (unsigned short)tk, 0, (float)factor};
    return 0;
}
