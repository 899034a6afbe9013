/* cost_model.h - the cost model as the runtime needs it: a chip's figures
 * (the MQ_CHIP_* fields of harness/chips.csv), a candidate's work features
 * on a chip (its decomposition, the physical floor no kernel can beat and
 * the counts the fitted terms scale) and the model's prediction
 *   t = floor + sum_j theta_j * x_j + sum_k theta_{k,v} * y_k,
 *   every theta >= 0, every x and y >= 0,
 * with floor = max(unique bytes / bandwidth, useful flops / peak), the
 * bandwidth and peaks scaled by the chip's relative decode and prefill
 * rates where it gives them (its tier's, for Apple chips). The
 * shared terms x: per dispatch (launch), traffic and compute at the peaks
 * (their inefficiency), split-K traffic, waves, the weights dequantized per
 * format class, the K steps on a slot's critical path (latency), the
 * SIMD-group steps on the busiest core (its shared resources), the
 * per-thread work on the critical path, those two times the SIMD groups a
 * barrier waits for, the work units on the critical path and the
 * accumulators each thread stores for them. The last seven again per
 * variant v (y): each variant's code has its own speed per step; a variant
 * never measured gets the shared terms only. No coefficients, fitted or
 * read, can predict below what the chip's bandwidth and peak allow. The
 * fit (GSL) is the tuner's (tuner/model.h); the dispatch table carries the
 * figures and the coefficients, so the lookup can choose with the model
 * (kernels/table.c). */
#ifndef MQ_COST_MODEL_H
#define MQ_COST_MODEL_H

#include <stddef.h>

#include "mq.h"

enum {
    MQ_CHIP_GPU_CORES,
    MQ_CHIP_TG_MEM_BYTES,
    MQ_CHIP_MAX_THREADS_PER_TG,
    MQ_CHIP_SIMD_WIDTH,
    MQ_CHIP_RESIDENT_TGS_PER_CORE,
    MQ_CHIP_MEM_BW_GBS,
    MQ_CHIP_FP32_TFLOPS,
    MQ_CHIP_FP16_TFLOPS,
    MQ_CHIP_L2_BYTES,
    MQ_CHIP_SLC_BYTES,
    /* optional (0 when a chip does not give them: the per-threadgroup
     * figures above then stand for the core's too, as on Apple GPUs) */
    MQ_CHIP_TG_MEM_PER_CORE_BYTES,
    MQ_CHIP_MAX_THREADS_PER_CORE,
    MQ_CHIP_TENSOR_FP16_TFLOPS,
    MQ_CHIP_ASYNC_COPY_STAGES,
    /* the share of its bandwidth a decode and of its peak a prefill sustain
     * on this chip relative to the M3 Max (the chip the default coefficients
     * are fitted on), at most 1 (0 or absent: 1, the figures as advertised):
     * Apple chips' values come from the tier functions fitted on public
     * llama.cpp figures (`model tiers`, tuner/chip_tiers.h) */
    MQ_CHIP_DECODE_BW_REL,
    MQ_CHIP_PREFILL_REL,
    MQ_CHIP_NFIELDS
};

/* Each field's name as chips.csv and the dispatch table spell it. */
extern const char *const mq_chip_field_names[MQ_CHIP_NFIELDS];

/* The limits a candidate must respect on a chip of these figures. */
mq_limits mq_limits_of_figures(const double fig[MQ_CHIP_NFIELDS]);

typedef struct {
    mq_problem p;             /* the problem (held-out splits group rows by shape) */
    int variant;              /* the candidate's (per-variant terms of the model) */
    int tile_m, tile_n, tile_k; /* its tile: with variant and format, the compiled kernel */
    double threadgroups;      /* of the main dispatch */
    double threads_per_tg;
    double resident_per_core; /* min(assumed, TG-memory fit, thread fit), >= 1 */
    double slots;             /* cores x resident */
    double waves;             /* ceil(threadgroups / slots) */
    double last_wave_fill;    /* busy share of the slots in the last wave, (0, 1] */
    double units_per_tg;      /* work units one threadgroup runs (striped > 1) */
    double tgs_per_core;      /* ceil(threadgroups / cores): the busiest core */
    double flops_per_unit;    /* 2 x tile_m x tile_n x K slice: full (padded) tiles */
    double bytes_per_unit;    /* weights of the tile's K slice + A tile + output tile */
    double total_flops, total_bytes;
    double splitk_bytes;      /* partials written, then read by the reduction pass */
    double dispatches;
    /* per-step counts on the busiest core: K steps (a tile load and barrier
     * each) and packed B row pieces (tile_n words each) */
    double ksteps_core, row_pieces_core;
    /* K steps one slot runs in sequence: the latency-bound critical path
     * (the busiest core's threadgroups in rounds of `resident`) */
    double ksteps_chain;
    /* multiply-adds per thread per K step x ksteps_chain: the per-thread
     * work (accumulators, registers) on that path */
    double thread_work_chain;
    /* K steps x SIMD groups of the busiest core's threadgroups: the steps
     * its SIMD groups take in all (a shared resource of the core - local
     * memory, threadgroup memory, the barrier - serves them in turn) */
    double sg_steps_core;
    /* the critical path's K steps and per-thread work x the SIMD groups a
     * threadgroup barrier waits for at each step */
    double chain_sg, thread_work_sg;
    /* work units on the critical path (each starts its accumulators and
     * stores its output tile or partials), and that x the accumulators each
     * thread stores */
    double units_chain, unit_out_chain;
    /* weight elements the busiest core dequantizes, per format class */
    double dequant_core[3];   /* fp4, u4, trellis */
    /* the physics: the bytes every run must move at least (weights, A and
     * the output once, split-K partials written and read), the useful
     * flops, and their times at the chip's peaks */
    double unique_bytes, useful_flops;
    double floor_s;           /* max(unique bytes / bandwidth, useful flops / peak) */
    /* ideal times at the chip's peaks (seconds) */
    double compute_s;         /* the busiest core's flops at its share of the FP32 peak */
    double memory_s;          /* every threadgroup's loads (re-reads too) at the bandwidth */
    double splitk_s;          /* split-K traffic at the memory bandwidth */
} mq_features;

/* Features of a legal candidate from its plan (mq_plan_candidate on the
 * figures' limits) on a chip of these figures. */
void mq_features_of(const mq_problem *p, const mq_candidate *c, const mq_plan *plan,
                    const double fig[MQ_CHIP_NFIELDS], mq_features *out);

/* Stored bytes per weight element of a format and group (codes + scales +
 * zero points; trellis: indices + FP32 scales). */
double mq_weight_bytes_per_element(mq_format f, int group);

#define MQ_MODEL_NSHARED 15  /* shared terms */
#define MQ_MODEL_NVTERM 7    /* per-variant terms: the last seven shared ones again */
#define MQ_MODEL_MAXVAR 32   /* variants (the registry's limit) */
#define MQ_MODEL_NTERM (MQ_MODEL_NSHARED + MQ_MODEL_NVTERM * MQ_MODEL_MAXVAR)

/* A compiled kernel's measured efficiency: the factor its rows' time above
 * the floor runs at, relative to what the terms predict. The terms describe
 * the work a decomposition does; how fast one compiled kernel (variant,
 * format and tile are compile-time constants of its source) runs through
 * that work is a property of the code the compiler made of it (register
 * allocation, spills, unrolling, shared-memory bank conflicts) that no chip
 * figure gives, and the same for every shape. Learned from the fitted rows,
 * applied to shapes the fit never saw; a kernel never measured runs at 1. */
#define MQ_MODEL_MAXKERNEL 2048
typedef struct {
    unsigned char variant, format;
    unsigned short tile_m, tile_n, tile_k;
    unsigned short rows;      /* fitted rows it was learned from */
    float factor;             /* > 0 */
} mq_kernel_factor;

typedef struct {
    double theta[MQ_MODEL_NTERM]; /* shared, then variant-major per-variant */
    int n_kernel;                 /* kernel[] sorted by (variant, format, tiles) */
    mq_kernel_factor kernel[MQ_MODEL_MAXKERNEL];
    int n_fit, n_holdout;
    double mape;      /* mean |predicted - measured| / measured on held-out rows */
    double spearman;  /* rank correlation of predicted and measured, held out */
    char kernel_build[32]; /* the kernels of the rows it was fitted on ("": not said) */
} mq_model;

/* A term's name as model.csv spells it and its unit: j < MQ_MODEL_NSHARED
 * a shared term, else per-variant term (j - NSHARED) % NVTERM of variant
 * (j - NSHARED) / NVTERM (the name is the shared one it repeats). */
const char *mq_model_term_name(int j);
const char *mq_model_term_unit(int j);
int mq_model_term_variant(int j); /* -1: shared */
void mq_model_terms(const mq_features *f, double x[MQ_MODEL_NTERM]);
/* floor + the kernel's factor x the terms; negative coefficients count as
 * 0 (a model never predicts below the floor, whatever a file says). */
double mq_model_predict(const mq_model *m, const mq_features *f);
/* The terms alone (floor + terms, factor 1): what the factors are learned
 * against. */
double mq_model_predict_terms(const mq_model *m, const mq_features *f);

/* A kernel's factor (1 when the model has none for it). */
double mq_model_kernel_factor(const mq_model *m, int variant, int format, int tile_m,
                              int tile_n, int tile_k);
/* Whether the model holds a factor for the kernel (was fitted on its rows). */
int mq_model_has_kernel(const mq_model *m, int variant, int format, int tile_m, int tile_n,
                        int tile_k);
/* Set (or replace) a kernel's factor, keeping kernel[] sorted; -1 when the
 * model is full or the factor is not finite and positive. */
int mq_model_set_kernel_factor(mq_model *m, const mq_kernel_factor *k);
/* A kernel's key as files spell it, "fp4:8x32x16" (format:tile_m x tile_n
 * x tile_k), and back: 0, or -1 and why (unknown format, a tile outside
 * 1..65535, a factor that is not finite and positive). */
void mq_kernel_factor_key(const mq_kernel_factor *k, char *buf, size_t n);
int mq_kernel_factor_parse(const char *key, int variant, double factor, mq_kernel_factor *out,
                           char *why, size_t n);

/* The coefficient index of (term name, variant; -1 shared), or -1. */
int mq_model_term_index(const char *term, int variant);

#endif
