/* work_features.h - what the cost model sees of a candidate: its work
 * decomposition on a chip (threadgroups, residency, waves, work per
 * threadgroup, flops and bytes, split-K traffic, dispatches), the physical
 * floor no kernel can beat (the unique bytes at the chip's bandwidth, the
 * useful flops at its peak) and the counts the fitted terms scale
 * (tuner/model.h): traffic and compute at the chip's peaks, the K steps on
 * a slot's critical path and on the busiest core, the per-thread work of
 * those steps, the weights the busiest core dequantizes per format. */
#ifndef MQ_FEATURES_H
#define MQ_FEATURES_H

#include "chips.h"
#include "mq.h"

typedef struct {
    mq_problem p;             /* the problem (held-out splits group rows by shape) */
    int variant;              /* the candidate's (per-variant terms of the model) */
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

/* Features of a legal candidate; MQ_E_ILLEGAL (with the reason) otherwise. */
mq_status mq_features_compute(const mq_problem *p, const mq_candidate *c, const mq_chip *chip,
                              mq_features *out, mq_error *err);

/* The same from a plan already made (mq_plan_candidate on the chip's
 * limits, e.g. a space entry's): the plan is computed once and carried. */
void mq_features_from_plan(const mq_problem *p, const mq_candidate *c, const mq_plan *plan,
                           const mq_chip *chip, mq_features *out);

/* Stored bytes per weight element of a format and group (codes + scales +
 * zero points; trellis: indices + FP32 scales). */
double mq_weight_bytes_per_element(mq_format f, int group);

#endif
