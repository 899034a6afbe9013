/* msl_program.h - the MSL program of a candidate, for every backend that
 * runs the Metal kernels' own source (Metal on a Mac today; an executor on
 * the CPU and NVRTC on NVIDIA GPUs next): which .metal file and kernel
 * function serve a variant and format, the buffers it binds after the common
 * ones, the tuned macros of the candidate, and the source text with its
 * #include lines expanded (runtime compilers have no include path). Builds
 * and is tested anywhere (tests/test_metal.c). */
#ifndef MQ_MSL_PROGRAM_H
#define MQ_MSL_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "metal_source.h"
#include "mq.h"

/* The second dispatch of every split-K candidate: the workspace's slices
 * summed into C (metal/marlin_gemm_fp4_striped.metal, no tuned macros). */
#define MQ_MSL_REDUCE_FILE "marlin_gemm_fp4_striped.metal"
#define MQ_MSL_REDUCE_FUNCTION "marlin_splitk_reduce"

/* The kernels' MqParams (metal/mq_metal.h), field for field. */
typedef struct {
    uint32_t M, N, K, group, m_tiles, n_tiles, k_slices, k_slice_len, num_tgs, work_per_tg,
        n_levels, lane_fold;
} mq_msl_params;

void mq_msl_params_of(const mq_problem *p, const mq_plan *plan, const mq_weights *w,
                      mq_msl_params *out);

/* A weight set's device arrays, in the order backends keep them: what
 * buffer(1) and buffer(2) bind, then the extras a variant names. */
typedef enum {
    MQ_MSL_W_CODES,  /* packed words (fp4/u4) or trellis indices: buffer(1) */
    MQ_MSL_W_SCALES, /* scales (half) or trellis tscales (float): buffer(2) */
    MQ_MSL_W_ZEROS,
    MQ_MSL_W_GRID,
    MQ_MSL_W_SU,
    MQ_MSL_W_SV,
    MQ_MSL_W_LANE_CODES,  /* the lane layout's arrays (kernels/layout_lane.c), present */
    MQ_MSL_W_LANE_SCALES, /* when the weights were prepared for it: a lane-layout */
    MQ_MSL_W_LANE_ZEROS,  /* program binds them where the others bind CODES, SCALES, ZEROS */
    MQ_MSL_W_COUNT
} mq_msl_weight_slot;

/* Each slot's host array and its size in bytes (NULL, 0: the format has
 * none). */
void mq_msl_weight_arrays(const mq_weights *w, const void *ptr[MQ_MSL_W_COUNT],
                          size_t bytes[MQ_MSL_W_COUNT]);

/* The weight slot an extra buffer binds; -1 for the workspace (not a
 * weight array). */
int mq_msl_weight_slot_of(mq_buffer_kind k);

/* What runs a candidate: the source file, the kernel function, and the
 * buffers it binds after the common ones (MQ_BUF_END-terminated), all from
 * the variant's row (kernels/variants.c). */
typedef struct {
    const char *file;
    const char *function;
    mq_buffer_kind extra[6];
    mq_layout layout; /* the weight arrays it reads */
} mq_msl_program;

/* The weight slot a program binds for a seed slot (CODES, SCALES, ZEROS, ...;
 * -1 stays -1): the lane arrays' for a lane-layout program. */
int mq_msl_bind_slot(const mq_msl_program *prog, int slot);

/* Fill out for a candidate; NULL when its variant and format have no
 * kernel. */
const mq_msl_program *mq_msl_program_of(const mq_problem *p, const mq_candidate *c,
                                         mq_msl_program *out);

/* What a backend compiles for a candidate planned by the caller
 * (mq_plan_candidate): the source file in metal/, the kernel function, and
 * the preprocessor definitions ("TILE_M=64 TILE_N=64 ..." separated by
 * spaces, ending with the plan's MQ_PLAN_TG_BYTES and MQ_PLAN_THREADS, which
 * each kernel checks its own against). -1 and a message for a variant or
 * format that has no kernel. */
int mq_metal_program(const mq_problem *p, const mq_candidate *c, const mq_plan *plan,
                     const char **file, const char **function, char *defines, size_t n,
                     char *err, size_t errlen);

/* What a [[buffer(i)]] of a program binds (mq_msl_run_plan.bind): a weight
 * slot (>= 0, MQ_MSL_W_*: the lane arrays' for a lane-layout program), the
 * split-K workspace, or the backend's own buffer (A at 0, C at 3, the
 * parameters at 4). */
enum { MQ_MSL_BIND_OWN = -2, MQ_MSL_BIND_WORKSPACE = -1, MQ_MSL_BINDINGS = 11 };

/* What every backend running the Metal kernels' source needs for one
 * candidate planned by the caller: the plan (the caller's, not a copy: it
 * must outlive this), the program (file, kernel function, the tuned
 * macros), and what each of its buffer indices binds. */
typedef struct {
    const mq_plan *plan;
    const char *file, *function;
    char defines[256];
    mq_msl_program prog;
    int bind[MQ_MSL_BINDINGS], nbind;
} mq_msl_run_plan;

/* out for (p, c, plan); with w, also that w holds the arrays the program
 * reads. MQ_E_ILLEGAL and the reason when no kernel
 * serves the candidate, MQ_E_WEIGHTS when w lacks an array (a lane-layout
 * program on weights never prepared for it). */
mq_status mq_msl_run_plan_of(const mq_problem *p, const mq_candidate *c, const mq_plan *plan,
                             const mq_weights *w, mq_msl_run_plan *out, mq_error *err);

/* A fingerprint of a weight set's shape and contents (512 bytes sampled
 * evenly from each array): cheap enough for every run, and different for a
 * new set allocated where a freed one was, so device copies cached by the
 * host pointer are not reused for other weights. */
uint64_t mq_msl_weights_print(const mq_weights *w);

/* ---- the MoE block (metal/gemm_trellis_moe.metal; msl_moe_plan.c, msl_moe_unfused.c) ---- */

#define MQ_MSL_MOE_FILE "gemm_trellis_moe.metal"

/* The kernels' MoeParams, field for field. */
typedef struct {
    uint32_t tokens, hidden, inter, experts, top_k, group, n_levels, i_chunk, chunks;
} mq_msl_moe_params;

/* Its buffers: x, expert_ids, probs, params, the route list, the weights'
 * five fields (each the three projections concatenated: gate, up, down),
 * h, the partial planes, out; then the unfused baseline's own: the gathered
 * rows, the dense gate and up outputs [2][rows][inter] and down outputs
 * [rows][hidden] (FP16, the dense kernels' C), the dense launches'
 * parameters (one mq_msl_params every MQ_MSL_MOE_DPARAMS_STRIDE bytes);
 * then the lane block's (metal/lane_trellis_moe.metal): the weights' lane
 * codes and scales (kernels/layout_lane.c per expert, the projections
 * concatenated as the seed fields are), its two mq_msl_params (gate/up,
 * down) and, where gate/up's K is split, its workspace: the tiles'
 * counters (lwork_counters bytes at its start, zero before a launch and
 * after it) and the parts' sums (metal/lane_trellis_moe.metal). */
typedef enum {
    MQ_MSL_MOE_X, MQ_MSL_MOE_IDS, MQ_MSL_MOE_PROBS, MQ_MSL_MOE_PARAMS, MQ_MSL_MOE_ROUTE,
    MQ_MSL_MOE_INDICES, MQ_MSL_MOE_TSCALES, MQ_MSL_MOE_SU, MQ_MSL_MOE_SV, MQ_MSL_MOE_GRID,
    MQ_MSL_MOE_H, MQ_MSL_MOE_Y, MQ_MSL_MOE_OUT,
    MQ_MSL_MOE_XG, MQ_MSL_MOE_GU, MQ_MSL_MOE_YH, MQ_MSL_MOE_DPARAMS,
    MQ_MSL_MOE_LCODES, MQ_MSL_MOE_LSCALES, MQ_MSL_MOE_LPARAMS, MQ_MSL_MOE_LWORK,
    MQ_MSL_MOE_NBUF
} mq_msl_moe_buffer;
#define MQ_MSL_MOE_FUSED_NBUF MQ_MSL_MOE_XG /* the fused block binds the ones before */
#define MQ_MSL_MOE_DPARAMS_STRIDE 256
#define MQ_MSL_MOE_LANE_FILE "lane_trellis_moe.metal"

/* Is buffer f a weight field (mq_msl_moe_field fills it from the weights)? */
static inline int mq_msl_moe_is_field(int f)
{
    return (f >= MQ_MSL_MOE_INDICES && f <= MQ_MSL_MOE_GRID) || f == MQ_MSL_MOE_LCODES ||
           f == MQ_MSL_MOE_LSCALES;
}

/* One dispatch: the source file and kernel, its module's defines,
 * threadgroups per grid, threads per threadgroup (every dispatch binds the
 * buffers at their mq_msl_moe_buffer index). */
typedef struct {
    const char *file, *function;
    char defines[256];
    unsigned grid[3], threads;
} mq_msl_dispatch;

#define MQ_MSL_MOE_DISPATCHES 4 /* at most: route, gate/up, down, combine */
/* The lane block's projection dispatches (d[] of mq_msl_moe_plan): gate/up,
 * then down; the seed block has one module for all four. */
#define MQ_MSL_MOE_LANE_GATE_UP 1
#define MQ_MSL_MOE_LANE_DOWN 2

/* What the MSL kernels take of a candidate (legal first:
 * mq_moe_candidate_check). The seed-layout block (inner
 * gemv_trellis_decode, metal/gemm_trellis_moe.metal): tile_m rows a pass,
 * tile_n columns, tile_k of K a threadgroup step, gate and up in one pass
 * over K (fuse_gate_up 1: both projections decoded each step) or two (0:
 * gate, then up, in the same threadgroup; one projection's weights and sums
 * held at a time; SwiGLU stays in that kernel either way), i_split chunks
 * of the intermediate dimension for down, the down kernel's own tile_n and
 * tile_k where set; four dispatches. The lane-layout block (inner
 * lane_trellis, metal/lane_trellis_moe.metal): the dense lane kernel's plan
 * under lim (NULL: mq_limits_default) for each projection at `tokens` rows,
 * down split into i_split K slices, gate and up always two passes of one
 * threadgroup, their K split into the inner split_k parts (threadgroups
 * that meet in the kernel: the last to finish a tile adds the parts up and
 * applies SwiGLU), x read through the route list (no gathered copy); four
 * dispatches (route, gate/up, down, combine), its parameters in lane[].
 * Out: its parameters, the defines of the seed block's module
 * ("TRELLIS_BITS=3 TILE_M=8 TILE_N=64 TILE_K=128 MOE_FUSE=1"; each
 * dispatch carries its own), the dispatches in order (nd), the buffers they
 * bind (the first nbuf) and every buffer's size in bytes.
 * MQ_E_ILLEGAL with the reason for a candidate it cannot run. */
typedef struct {
    mq_msl_moe_params mp;
    char defines[96];
    mq_msl_dispatch d[MQ_MSL_MOE_DISPATCHES];
    int nd, nbuf;
    mq_msl_params lane[2];
    size_t bytes[MQ_MSL_MOE_NBUF];
    size_t lwork_counters; /* bytes of tile counters at MQ_MSL_MOE_LWORK's start (0: none) */
} mq_msl_moe_plan;

mq_status mq_msl_moe_plan_of(const mq_moe_problem *p, const mq_moe_weights *mw,
                             const mq_moe_candidate *c, const mq_limits *lim,
                             mq_msl_moe_plan *out, mq_error *err);
/* After a run: every tile counter of the lane block's workspace (its first
 * plan->lwork_counters bytes, zeroed before the launch) back at zero, or
 * MQ_E_WRONG (a wrong result, not a failure to run) naming the first that
 * is not (the meeting's last part resets
 * it; a counter left set would make the next run's parts miscount). */
mq_status mq_msl_moe_counters_check(const mq_msl_moe_plan *plan, const uint32_t *counters,
                                    mq_error *err);
/* The MSL kernels' candidate space for p under lim (NULL:
 * mq_limits_default), legal ones only, likeliest first, the lane block's
 * and the seed block's in turn (the first N of it hold both). The seed block:
 * tile_m the smallest power of two that holds max_rows rows (at most 16;
 * max_rows 0: every power 1..16), tile_n 16..128, 1..8 simdgroups along K,
 * gate and up in two passes or one, i_split 1, 2, 4, 8, 16 (i_splits 0: 1
 * only). The lane block: tile_m the smallest of 8..64 that holds
 * max_rows (0: 8 and 16), tile_n 64, 128, 32, tile_k 256, 128, 512,
 * gate/up's K in 1, 2, 4, 8 parts, i_split 1, 2, 4, 8 (i_splits 0: 1). The
 * count, at most cap. */
int mq_msl_moe_space(const mq_moe_problem *p, const mq_moe_weights *mw, const mq_limits *lim,
                     int max_rows, int i_splits, mq_moe_candidate *cs, int cap);
/* The unfused baseline for one routing: route, gather, per touched
 * expert the dense kernel of gate, up and down (the one `dense` gives for
 * its rows and shape, mq_table_lookup; NULL: gemv_trellis_decode at up to
 * 16 rows, gemm_trellis_packed 64x64x32 above, the dense rule of the CPU
 * model's baseline), SwiGLU, the weighted sum. A step binds the MoE
 * buffers at their own index (dense 0), or, for a dense kernel, buffer(i)
 * to MoE buffer bind[i] at byte offset off[i] (A, codes, scales, C, params,
 * the variant's extras). dparams: the dense launches' parameters, to be
 * copied into MQ_MSL_MOE_DPARAMS. free() steps and dparams. */
typedef struct {
    const char *file, *function;
    char defines[256];
    unsigned grid[3], threads;
    int dense, nbind;
    int bind[8];
    size_t off[8];
} mq_msl_moe_step;

typedef struct {
    mq_msl_moe_plan base; /* the MoE file's module (defines) and buffer sizes */
    mq_msl_moe_step *steps;
    int nsteps;
    void *dparams;
    size_t dparams_bytes;
} mq_msl_moe_unfused;

mq_status mq_msl_moe_unfused_plan(const mq_moe_problem *p, const mq_moe_weights *mw,
                                  const int32_t *expert_ids, const mq_table *dense,
                                  mq_msl_moe_unfused *out, mq_error *err);
void mq_msl_moe_unfused_free(mq_msl_moe_unfused *u);
/* Weight field f (mq_msl_moe_is_field) in the kernels' layout into dst
 * (mq_msl_moe_field_bytes summed over the projections; the lane fields
 * repacked here, MQ_E_NOMEM or a weight error possible). */
mq_status mq_msl_moe_field(const mq_moe_weights *mw, mq_msl_moe_buffer f, void *dst,
                           mq_error *err);
/* The seed-layout block's plan and fields (msl_moe_plan.c) and the
 * lane-layout block's (msl_moe_lane.c), each through mq_msl_moe_plan_of and
 * mq_msl_moe_field (msl_moe.c). */
mq_status mq_msl_moe_seed_plan(const mq_moe_problem *p, const mq_moe_weights *mw,
                               const mq_moe_candidate *c, mq_msl_moe_plan *out, mq_error *err);
void mq_msl_moe_seed_field(const mq_moe_weights *mw, mq_msl_moe_buffer f, void *dst);
mq_status mq_msl_moe_lane_plan(const mq_moe_problem *p, const mq_moe_weights *mw,
                               const mq_moe_candidate *c, const mq_limits *lim,
                               mq_msl_moe_plan *out, mq_error *err);
mq_status mq_msl_moe_lane_field(const mq_moe_weights *mw, mq_msl_moe_buffer f, void *dst,
                                mq_error *err);
/* K and N of projection j (gate, up: hidden -> inter; down: inter ->
 * hidden), and the bytes of weight field f of projection j for all experts
 * (each field holds the three projections in turn, each the experts in
 * turn; the codebook padded to 16 levels). msl_moe_plan.c. */
void mq_msl_moe_dims(const mq_moe_weights *mw, int j, int *K, int *N);
size_t mq_msl_moe_field_bytes(const mq_moe_weights *mw, mq_msl_moe_buffer f, int j);

#endif
