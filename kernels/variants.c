/* variants.c - the kernel variants of the seeds as data (formats served,
 * schedule, dequant strategy, threadgroup-memory recipe, defaults), and the
 * legality check that turns a candidate into a work decomposition (mq_plan)
 * or refuses it with a reason. */
#include <stdio.h>
#include <string.h>

#include "mq_internal.h"

#define FMT(f) (1u << (f))
#define TRELLIS_FMTS (FMT(MQ_FMT_TRELLIS2) | FMT(MQ_FMT_TRELLIS3) | FMT(MQ_FMT_TRELLIS4))

/* Threadgroup memory recipes follow the seeds' budgets (FP16 tiles):
 * marlin_gemm_fp4 64x64x32 double-buffered = 16384 B; fused = 4096 + 4*128 =
 * 4608 B; trellis prefill = 8192 + 512 + 512 = 9216 B; plus, by default, 8
 * halves (16 bytes, as MLX's steel GEMM pads its tiles) at the end of every
 * A and B tile row against bank conflicts: 19456 B, 5632 B and 11264 B.
 * metal/mq_metal.h takes the pad as MQ_TILE_PAD and the planner counts it.
 * Measured on the H100 (cuda backend, M=512 N=4096 K=14336, BENCHMARKS
 * "Issue 15"): the staged kernels 1.04-1.64x faster with the pad than
 * without, the fused ones 0.94-1.11x; a build with -DMQ_TILE_PAD_HALVES=0
 * keeps the seeds' unpadded tiles. Up to MAX_VARIANTS rows: the seeds' below, then any
 * mq_variant_register adds. */
#ifndef MQ_TILE_PAD_HALVES
#define MQ_TILE_PAD_HALVES 8
#endif
#define MAX_VARIANTS 32
static mq_variant_info variants[MAX_VARIANTS] = {
    [MQ_VAR_MARLIN_FP4] = {
        .name = "marlin_gemm_fp4", .enum_name = "MQ_VAR_MARLIN_FP4",
        .formats = FMT(MQ_FMT_FP4), .schedule = MQ_SCHED_GRID2D, .dequant = MQ_DEQ_STAGED,
        .a_stages = 2, .b_stages = 2, .tile_pad = MQ_TILE_PAD_HALVES, .sg_m = 32, .sg_n = 32,
        .tile_quantum = 8,
        .scratch_in_tiles_per_sg = 256,
        .defaults = {64, 64, 32, 0, 1},
        .msl_file = "marlin_gemm_fp4.metal", .msl_function = "marlin_gemm_fp4",
        .summary = "2D grid; A and dequantized B tiles staged, double-buffered"},
    [MQ_VAR_MARLIN_FP4_STRIPED] = {
        .name = "marlin_gemm_fp4_striped", .enum_name = "MQ_VAR_MARLIN_FP4_STRIPED",
        .formats = FMT(MQ_FMT_FP4), .schedule = MQ_SCHED_STRIPED, .dequant = MQ_DEQ_STAGED,
        .a_stages = 1, .b_stages = 1, .tile_pad = MQ_TILE_PAD_HALVES, .sg_m = 32, .sg_n = 32,
        .tile_quantum = 8,
        .scratch_in_tiles_per_sg = 256,
        .defaults = {64, 64, 32, 0, 1},
        .msl_file = "marlin_gemm_fp4_striped.metal", .msl_function = "marlin_gemm_fp4_striped",
        .msl_buffers = {MQ_BUF_WORKSPACE},
        .summary = "1D stripes over column-major tiles x k_parallel; partials to a workspace, "
                   "then a reduction pass"},
    [MQ_VAR_FUSED_FP4] = {
        .name = "marlin_gemm_fused_fp4", .enum_name = "MQ_VAR_FUSED_FP4",
        .formats = FMT(MQ_FMT_FP4), .schedule = MQ_SCHED_GRID2D, .dequant = MQ_DEQ_FUSED,
        .a_stages = 1, .tile_pad = MQ_TILE_PAD_HALVES, .sg_m = 32, .sg_n = 32,
        .staging_bytes_per_sg = 128, .tile_quantum = 8,
        .defaults = {64, 64, 32, 0, 1},
        .msl_file = "marlin_gemm_fused.metal", .msl_function = "marlin_gemm_fused_fp4",
        .summary = "2D grid; B dequantized in registers per 8x8 sub-tile"},
    [MQ_VAR_FUSED_U4] = {
        .name = "marlin_gemm_fused_u4", .enum_name = "MQ_VAR_FUSED_U4",
        .formats = FMT(MQ_FMT_U4), .schedule = MQ_SCHED_GRID2D, .dequant = MQ_DEQ_FUSED,
        .a_stages = 1, .tile_pad = MQ_TILE_PAD_HALVES, .sg_m = 32, .sg_n = 32,
        .staging_bytes_per_sg = 128, .tile_quantum = 8,
        .defaults = {64, 64, 32, 0, 1},
        .msl_file = "marlin_gemm_fused.metal", .msl_function = "marlin_gemm_fused_u4",
        .summary = "2D grid; u4 magic-bias dequant in registers, zero points"},
    [MQ_VAR_TRELLIS_PACKED] = {
        .name = "gemm_trellis_packed", .enum_name = "MQ_VAR_TRELLIS_PACKED",
        .formats = TRELLIS_FMTS, .schedule = MQ_SCHED_GRID2D, .dequant = MQ_DEQ_FUSED,
        /* B staging and epilogue blocks of their own (metal/mq_fused.h) */
        .a_stages = 2, .tile_pad = MQ_TILE_PAD_HALVES, .sg_m = 32, .sg_n = 32, .staging_bytes_per_sg = 128,
        .epilogue_bytes_per_sg = 128, .tile_quantum = 16, .defaults = {64, 64, 32, 0, 1},
        .msl_file = "gemm_trellis.metal", .msl_function = "gemm_trellis_packed",
        .msl_buffers = {MQ_BUF_GRID, MQ_BUF_SU, MQ_BUF_SV},
        .summary = "trellis prefill: fused codebook dequant, 64x64 tiles"},
    [MQ_VAR_TRELLIS_DECODE] = {
        .name = "gemm_trellis_packed_decode", .enum_name = "MQ_VAR_TRELLIS_DECODE",
        .formats = TRELLIS_FMTS, .schedule = MQ_SCHED_GRID2D, .dequant = MQ_DEQ_FUSED,
        /* B staging and epilogue blocks of their own (metal/mq_fused.h) */
        .a_stages = 2, .tile_pad = MQ_TILE_PAD_HALVES, .sg_m = 32, .sg_n = 32, .staging_bytes_per_sg = 128,
        .epilogue_bytes_per_sg = 128, .tile_quantum = 16, .defaults = {32, 128, 32, 0, 1},
        .msl_file = "gemm_trellis.metal", .msl_function = "gemm_trellis_packed_decode",
        .msl_buffers = {MQ_BUF_GRID, MQ_BUF_SU, MQ_BUF_SV},
        .summary = "trellis decode: fused codebook dequant, 32x128 tiles"},
    [MQ_VAR_MLX_SPLITK] = {
        .name = "mlx_qmm_splitk", .enum_name = "MQ_VAR_MLX_SPLITK",
        .formats = FMT(MQ_FMT_FP4) | FMT(MQ_FMT_U4), .schedule = MQ_SCHED_SPLITK,
        .dequant = MQ_DEQ_STAGED, .a_stages = 1, .b_stages = 1, .tile_pad = MQ_TILE_PAD_HALVES,
        .sg_m = 16, .sg_n = 16,
        .tile_quantum = 8, .scratch_in_tiles_per_sg = 256,
        .defaults = {32, 32, 32, 0, 1},
        .msl_file = "mlx_qmm_splitk.metal", .msl_function = "mlx_qmm_splitk_%s",
        .msl_buffers = {MQ_BUF_WORKSPACE},
        .summary = "MLX qmm_t split-K: grid x split_k slices, partials, then a sum"},
    /* The decode path (not a seed's): no simdgroup matrices, no staging.
     * Each lane loads 16 bytes (8 K x 4 columns of packed words) per step,
     * decodes them in registers and multiplies them
     * by the activations of up to 16 rows; a threadgroup covers tile_n
     * columns and tile_k of K per step, its simdgroups splitting K, finished
     * by simd_shuffle_xor and a threadgroup reduction. sg_m/sg_n are unused
     * (the planner's GEMV rule counts the simdgroups). */
    [MQ_VAR_GEMV_DECODE] = {
        .name = "marlin_gemv_decode", .enum_name = "MQ_VAR_GEMV_DECODE",
        .formats = FMT(MQ_FMT_FP4) | FMT(MQ_FMT_U4), .schedule = MQ_SCHED_GRID2D,
        .dequant = MQ_DEQ_GEMV, .sg_m = 8, .sg_n = 8, .tile_quantum = 16,
        .defaults = {4, 64, 128, 0, 1},
        .msl_file = "marlin_gemv_decode.metal", .msl_function = "marlin_gemv_decode_%s",
        .summary = "decode GEMV: 16-byte loads, dequant in registers, K over lanes and "
                   "simdgroups"},
    [MQ_VAR_GEMV_TRELLIS] = {
        .name = "gemv_trellis_decode", .enum_name = "MQ_VAR_GEMV_TRELLIS",
        .formats = TRELLIS_FMTS, .schedule = MQ_SCHED_GRID2D, .dequant = MQ_DEQ_GEMV,
        .sg_m = 8, .sg_n = 8, .tile_quantum = 16, .defaults = {4, 64, 128, 0, 1},
        .msl_file = "gemv_trellis_decode.metal", .msl_function = "gemv_trellis_decode_%s",
        .msl_buffers = {MQ_BUF_GRID, MQ_BUF_SU, MQ_BUF_SV},
        .summary = "trellis decode GEMV: codebook in threadgroup memory, su on the "
                   "activations, sv x scale per 8 K"},
    /* The lane layout (kernels/layout_lane.c; metal/mq_lane.h): C^T = W^T A^T
     * with the weights the left operand of every MMA, each lane's codes one
     * 16-byte load per 16 columns x 64 K decoded straight into its fragments
     * (IST-DASLab/marlin's offline reordering, on Apple's fragment layout).
     * A simdgroup covers 32 columns and one 64-K super-block of a K tile;
     * grid x split_k as mlx_qmm_splitk. sg_m/sg_n are unused (lane_plan). */
    [MQ_VAR_LANE_GEMM] = {
        .name = "lane_gemm", .enum_name = "MQ_VAR_LANE_GEMM",
        .formats = FMT(MQ_FMT_FP4) | FMT(MQ_FMT_U4), .schedule = MQ_SCHED_SPLITK,
        .dequant = MQ_DEQ_LANE, .layout = MQ_LAYOUT_LANE, .a_stages = 2,
        .tile_pad = MQ_TILE_PAD_HALVES, .sg_m = 8, .sg_n = 32, .tile_quantum = 32,
        .defaults = {16, 64, 128, 0, 1},
        .msl_file = "lane_gemm.metal", .msl_function = "lane_gemm_%s",
        .msl_buffers = {MQ_BUF_WORKSPACE},
        .summary = "lane layout: 16-byte code loads per lane into the MMA fragments, A "
                   "staged, K over simdgroups and split_k slices"},
    /* lane_gemm's body on the trellis formats' lane layout (128-K
     * super-blocks; metal/mq_lane_trellis.h): each lane's 16, 24 or 32 bytes
     * per 16 columns x 128 K, a pair's two levels one lookup in a pair
     * codebook in threadgroup memory, the FP32 scales applied to the
     * products once per 32 K, the signs su put on the A tile. */
    [MQ_VAR_LANE_TRELLIS] = {
        .name = "lane_trellis", .enum_name = "MQ_VAR_LANE_TRELLIS",
        .formats = TRELLIS_FMTS, .schedule = MQ_SCHED_SPLITK,
        .dequant = MQ_DEQ_LANE, .layout = MQ_LAYOUT_LANE, .a_stages = 2,
        .tile_pad = MQ_TILE_PAD_HALVES, .sg_m = 8, .sg_n = 32, .tile_quantum = 32,
        .defaults = {16, 64, 128, 0, 1},
        .msl_file = "lane_trellis.metal", .msl_function = "lane_trellis",
        .msl_buffers = {MQ_BUF_WORKSPACE, MQ_BUF_GRID, MQ_BUF_SU},
        .summary = "lane layout, trellis: 16-32-byte index loads per lane, a pair codebook in "
                   "threadgroup memory, scales on the products per 32 K, su on A, split_k"},
};
static int nvariants = MQ_VAR_COUNT;

int mq_variant_count(void)
{
    return nvariants;
}

const mq_variant_info *mq_variant_get(mq_variant v)
{
    return (unsigned)v < (unsigned)nvariants ? &variants[v] : NULL;
}

mq_status mq_variant_register(const mq_variant_info *row, mq_variant *id, mq_error *err)
{
    mq_variant dup;
    if (!row || !row->name || !*row->name)
        return mq_fail(err, MQ_E_ARG, "a variant needs a name");
    if (mq_variant_from_name(row->name, &dup, NULL) == MQ_OK)
        return mq_fail(err, MQ_E_ARG, "variant '%s' exists already", row->name);
    if (nvariants == MAX_VARIANTS)
        return mq_fail(err, MQ_E_ARG, "no room for variant '%s' (at most %d)", row->name,
                       MAX_VARIANTS);
    if (!row->formats || row->formats >= (1u << MQ_FMT_COUNT))
        return mq_fail(err, MQ_E_ARG, "variant '%s' serves no known format", row->name);
    if ((unsigned)row->schedule > MQ_SCHED_SPLITK || (unsigned)row->dequant > MQ_DEQ_LANE ||
        (unsigned)row->layout > MQ_LAYOUT_LANE)
        return mq_fail(err, MQ_E_ARG, "variant '%s': unknown schedule or dequant strategy",
                       row->name);
    if (row->sg_m < 8 || row->sg_n < 8 || row->sg_m % 8 || row->sg_n % 8 ||
        row->tile_quantum < 1 || row->a_stages < 0 || row->b_stages < 0)
        return mq_fail(err, MQ_E_ARG,
                       "variant '%s': simdgroup region %dx%d (multiples of 8), tile quantum %d",
                       row->name, row->sg_m, row->sg_n, row->tile_quantum);
    variants[nvariants] = *row;
    *id = (mq_variant)nvariants++;
    return mq_ok(err);
}

mq_status mq_variant_from_name(const char *name, mq_variant *out, mq_error *err)
{
    char known[512] = "";
    for (int i = 0; i < nvariants; i++) {
        if (name && strcmp(name, variants[i].name) == 0) {
            *out = (mq_variant)i;
            return mq_ok(err);
        }
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, variants[i].name, sizeof known - strlen(known) - 1);
    }
    return mq_fail(err, MQ_E_ARG, "unknown variant '%s' (known: %s)", name ? name : "(null)",
                   known);
}

int mq_variant_serves(mq_variant v, mq_format f)
{
    const mq_variant_info *vi = mq_variant_get(v);
    return vi && (unsigned)f < MQ_FMT_COUNT && (vi->formats & FMT(f));
}

mq_limits mq_limits_default(void)
{
    mq_limits l = {32768, 1024, 32, 0, 0};
    return l;
}

mq_status mq_problem_check(const mq_problem *p, mq_error *err)
{
    if (!p)
        return mq_fail(err, MQ_E_ARG, "null problem");
    if ((unsigned)p->format >= MQ_FMT_COUNT)
        return mq_fail(err, MQ_E_ARG, "unknown format id %d", (int)p->format);
    if (p->M <= 0 || p->N <= 0 || p->K <= 0)
        return mq_fail(err, MQ_E_SHAPE, "M=%d N=%d K=%d: every dimension must be positive",
                       p->M, p->N, p->K);
    if (p->group != 32 && p->group != 64 && p->group != 128)
        return mq_fail(err, MQ_E_SHAPE, "group size %d is not one of 32, 64, 128", p->group);
    mq_status st = mq_check_k(p->format, p->K, p->group, err);
    return st ? st : mq_ok(err);
}

static mq_status check_tile(const char *what, int v, int quantum, mq_error *err)
{
    if (v < quantum || v > MQ_MAX_TILE || v % quantum)
        return mq_fail(err, MQ_E_ILLEGAL, "%s=%d must be a multiple of %d in [%d, %d]", what,
                       v, quantum, quantum, MQ_MAX_TILE);
    return MQ_OK;
}

/* The decode path's rules (metal/marlin_gemv_decode.metal): a lane holds
 * tile_m rows of accumulators for 4 columns, a simdgroup spans the tile's
 * columns (tile_n / 4 lanes) and 8 K per lane along the rest of its 32
 * lanes, the threadgroup's simdgroups split tile_k, and their partial sums
 * meet in threadgroup memory (none with one simdgroup); the trellis kernel
 * keeps its codebook (16 floats) there too. */
static mq_status gemv_plan(const mq_problem *p, const mq_params *q, const mq_limits *lim,
                           mq_plan *plan, mq_error *err)
{
    if (q->tile_m > MQ_GEMV_MAX_ROWS)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "tile_m=%d: the decode path holds at most %d rows in registers", q->tile_m,
                       MQ_GEMV_MAX_ROWS);
    if (q->tile_n > 128 || 128 % q->tile_n)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "tile_n=%d: one simdgroup spans the decode path's columns, 4 per lane, "
                       "so tile_n is 16, 32, 64 or 128",
                       q->tile_n);
    if (lim->simd_width != 32)
        return mq_fail(err, MQ_E_ILLEGAL, "the decode path needs 32-lane simdgroups, not %d",
                       lim->simd_width);
    int k_per_sg = 8 * (32 / (q->tile_n / 4));
    if (q->tile_k % k_per_sg)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "tile_k=%d must be a multiple of %d (8 K per lane x %d lanes along K "
                       "at tile_n=%d)",
                       q->tile_k, k_per_sg, k_per_sg / 8, q->tile_n);
    if (p->N % 4)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "N=%d: the decode path loads 4 columns' words at once (16 bytes), so "
                       "N must be a multiple of 4",
                       p->N);
    plan->simdgroups = q->tile_k / k_per_sg;
    plan->tg_mem_bytes = (plan->simdgroups > 1 ? plan->simdgroups * q->tile_m * q->tile_n * 4 : 0) +
                         (mq_format_is_trellis(p->format) ? 16 * 4 : 0);
    return MQ_OK;
}

/* The lane layout's sizes per format, as metal/mq_lane.h and
 * mq_lane_staged.h lay a stage out: K of a super-block (the unit of the
 * copies), its bytes per 16-column block, the bytes of a scale pair (8
 * pairs per 32 K of a block), the zero-point bytes per 32 K of a block (a
 * fp4 stage holds them too, unused), and the trellis pair codebook (4^bits
 * half2; b=3's in 32 copies, one a bank: mq_lane_trellis.h). */
typedef struct {
    int sb_k, sb_bytes, scale_pair_bytes, zero_half_bytes, lut_bytes;
} lane_sizes;

static const lane_sizes lane_sizes_of[MQ_FMT_COUNT] = {
    [MQ_FMT_FP4] = {64, 512, 4, 16, 0},          [MQ_FMT_U4] = {64, 512, 4, 16, 0},
    [MQ_FMT_TRELLIS2] = {128, 512, 8, 0, 16 * 4}, [MQ_FMT_TRELLIS3] = {128, 768, 8, 0, 64 * 4 * 32},
    [MQ_FMT_TRELLIS4] = {128, 1024, 8, 0, 256 * 4},
};

/* The lane kernel's rules (metal/mq_lane.h): a simdgroup takes 32 columns
 * (two 16-column blocks of the layout) and one super-block of each K tile
 * (64 K; trellis 128), keeping tile_m / 8 x 4 accumulator fragments; the A tile is staged
 * in a_stages buffers (rows padded: the next one fills while a tile is
 * multiplied), and at the end the simdgroups past the first K share leave
 * their sums in the same threadgroup memory. Where the chip copies device
 * memory into threadgroup memory asynchronously (async_copy_stages), each of
 * `stages` buffers holds a K tile's A and its weights (lane_sizes_of: fp4
 * codes 512 B per 16-column block and super-block, its scales 2 x 32 B and
 * zero points 2 x 16 B), as many as fit up to the chip's count and at least
 * two; otherwise the weights travel in registers. The trellis kernels add
 * their pair codebook. */
static mq_status lane_plan(const mq_problem *p, const mq_params *q, const mq_variant_info *vi,
                           const mq_limits *lim, mq_plan *plan, mq_error *err)
{
    if (q->tile_m > 64)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "tile_m=%d: the lane kernel keeps at most 64 rows of accumulators",
                       q->tile_m);
    if (lim->simd_width != 32)
        return mq_fail(err, MQ_E_ILLEGAL, "the lane kernel needs 32-lane simdgroups, not %d",
                       lim->simd_width);
    const lane_sizes *z = &lane_sizes_of[p->format];
    if (q->tile_k % z->sb_k)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "tile_k=%d must be whole super-blocks of %d K (the %s lane layout)",
                       q->tile_k, z->sb_k, mq_format_name(p->format));
    /* a simdgroup per 32 columns and super-block of the K tile */
    int cols = q->tile_n / 32, ksg = q->tile_k / z->sb_k, nb = q->tile_n / 16;
    plan->simdgroups = cols * ksg;
    int a_tile = 2 * q->tile_m * (q->tile_k + vi->tile_pad);
    int red = (ksg - 1) * cols * 4 * (q->tile_m / 8) * 64 * 4;
    int stage = a_tile + nb * ksg * (z->sb_bytes + z->sb_k / 32 * (z->scale_pair_bytes * 8 +
                                                                   z->zero_half_bytes));
    plan->stages = 0;
    /* the sums scaled once per window one scale covers, not the weights: the
     * trellis formats always (their levels come unscaled from the codebook),
     * fp4 and u4 at up to 8 rows, where the adds cost less than a multiply
     * a weight pair (u4 on an H100 1.03-1.05x at M=1; at 16 rows 0.99-1.02x,
     * so not there; fp4's MMAs then take its codes' values, metal/mq_lane.h's
     * LANE_FP4_ACC_UNIT) */
    plan->scale_k = mq_format_is_trellis(p->format) || q->tile_m <= 8
                        ? mq_min(p->group, z->sb_k)
                        : 0;
    /* the staged copies index the codes in 32 bits */
    double code_uints = (double)mq_cdiv(p->N, 16) * mq_cdiv(p->K, z->sb_k) * (z->sb_bytes / 4);
    for (int s = code_uints < 4294967296.0 ? lim->async_copy_stages : 0; s >= 2 && !plan->stages;
         s--)
        if (mq_max(s * stage, red) + z->lut_bytes <= lim->tg_mem_bytes)
            plan->stages = s;
    plan->tg_mem_bytes = (plan->stages ? mq_max(plan->stages * stage, red)
                                       : mq_max(vi->a_stages * a_tile, red)) +
                         z->lut_bytes;
    return MQ_OK;
}

mq_status mq_plan_candidate(const mq_problem *p, const mq_candidate *c, const mq_limits *lim,
                            mq_plan *plan, mq_error *err)
{
    mq_status st = mq_problem_check(p, err);
    if (st)
        return st;
    if (!c || !plan)
        return mq_fail(err, MQ_E_ARG, "null candidate or plan");
    mq_limits dl = mq_limits_default();
    if (!lim)
        lim = &dl;
    const mq_variant_info *vi = mq_variant_get(c->variant);
    if (!vi)
        return mq_fail(err, MQ_E_ARG, "unknown variant id %d", (int)c->variant);
    if (!mq_variant_serves(c->variant, p->format))
        return mq_fail(err, MQ_E_ILLEGAL, "%s does not serve format %s", vi->name,
                       mq_format_name(p->format));
    const mq_params *q = &c->p;
    const int gemv = vi->dequant == MQ_DEQ_GEMV;
    /* tile_m: simdgroup matrices are 8x8 (the decode path has none: any
     * row count); tile_n, tile_k: the format's quantum (8 codes per packed
     * word, or the 16x16 trellis tile). */
    if ((st = check_tile("tile_m", q->tile_m, gemv ? 1 : 8, err)) ||
        (st = check_tile("tile_n", q->tile_n, vi->tile_quantum, err)) ||
        (st = check_tile("tile_k", q->tile_k, vi->tile_quantum, err)))
        return st;
    /* the CPU model's per-worker buffers (no GPU tile this large fits anyway) */
    int area = mq_max(q->tile_m * q->tile_n, mq_max(q->tile_m, q->tile_n) * q->tile_k);
    if (area > MQ_MAX_TILE_AREA)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "tile %dx%dx%d needs a %d-element block, more than the CPU model's %d",
                       q->tile_m, q->tile_n, q->tile_k, area, MQ_MAX_TILE_AREA);
    if (p->group % q->tile_k && q->tile_k % p->group)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "tile_k=%d and group %d: one must divide the other so tiles do not "
                       "straddle scale groups",
                       q->tile_k, p->group);
    memset(plan, 0, sizeof *plan);
    if (gemv) {
        if ((st = gemv_plan(p, q, lim, plan, err)))
            return st;
    } else if (vi->dequant == MQ_DEQ_LANE) {
        if ((st = lane_plan(p, q, vi, lim, plan, err)))
            return st;
    } else {
        plan->simdgroups = mq_cdiv(q->tile_m, vi->sg_m) * mq_cdiv(q->tile_n, vi->sg_n);
        /* FP16 tiles, or the epilogue's scratch where it reuses them and needs
         * more (many simdgroups over a thin K tile), plus per-simdgroup buffers */
        int tiles = 2 * (vi->a_stages * q->tile_m * (q->tile_k + vi->tile_pad) +
                         vi->b_stages * q->tile_k * (q->tile_n + vi->tile_pad));
        plan->tg_mem_bytes =
            mq_max(tiles, plan->simdgroups * vi->scratch_in_tiles_per_sg) +
            plan->simdgroups * (vi->staging_bytes_per_sg + vi->epilogue_bytes_per_sg);
    }
    plan->threads_per_tg = plan->simdgroups * lim->simd_width;
    if (plan->threads_per_tg > lim->max_threads_per_tg)
        return mq_fail(err, MQ_E_ILLEGAL, "%d threads per threadgroup exceed the limit %d",
                       plan->threads_per_tg, lim->max_threads_per_tg);
    if (plan->tg_mem_bytes > lim->tg_mem_bytes)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "threadgroup memory %d B (%s %dx%dx%d) exceeds the budget %d B",
                       plan->tg_mem_bytes, vi->name, q->tile_m, q->tile_n, q->tile_k,
                       lim->tg_mem_bytes);

    plan->m_tiles = mq_cdiv(p->M, q->tile_m);
    plan->n_tiles = mq_cdiv(p->N, q->tile_n);
    if (q->split_k < 1)
        return mq_fail(err, MQ_E_ILLEGAL, "split_k=%d must be at least 1", q->split_k);
    if (q->split_k > 1 && vi->schedule == MQ_SCHED_GRID2D)
        return mq_fail(err, MQ_E_ILLEGAL, "%s does not split K (split_k=%d)", vi->name,
                       q->split_k);
    /* K slices start on multiples of k_unit so no slice begins inside a scale
     * group or a K tile; the last slice takes the remainder, and its end need
     * not be aligned (the unaligned last partition MLX's reviewers asked for). */
    plan->k_unit = mq_max(q->tile_k, p->group);
    int units = mq_cdiv(p->K, plan->k_unit);
    if (q->split_k > units)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "split_k=%d exceeds the %d aligned K slices of K=%d (slices start on "
                       "multiples of %d)",
                       q->split_k, units, p->K, plan->k_unit);
    int per = units / q->split_k; /* every slice non-empty; the last takes the rest */
    plan->k_slices = q->split_k;
    plan->k_slice_len = per * plan->k_unit;
    plan->k_last_len = p->K - (q->split_k - 1) * plan->k_slice_len;

    int grid_total = plan->m_tiles * plan->n_tiles * (vi->schedule == MQ_SCHED_SPLITK ? q->split_k : 1);
    if (vi->schedule == MQ_SCHED_STRIPED) {
        plan->work_units = plan->m_tiles * plan->n_tiles * q->split_k;
        int tgs = q->num_threadgroups ? q->num_threadgroups : plan->work_units;
        if (tgs < 0 || tgs > plan->work_units)
            return mq_fail(err, MQ_E_ILLEGAL,
                           "num_threadgroups=%d must be in [1, %d] (the work units)", tgs,
                           plan->work_units);
        plan->threadgroups = tgs;
        plan->work_per_tg = mq_cdiv(plan->work_units, tgs);
        plan->grid_x = tgs;
        plan->grid_y = plan->grid_z = 1;
    } else {
        if (q->num_threadgroups && q->num_threadgroups != grid_total)
            return mq_fail(err, MQ_E_ILLEGAL,
                           "%s fixes num_threadgroups by its grid (%d), not %d", vi->name,
                           grid_total, q->num_threadgroups);
        plan->threadgroups = grid_total;
        plan->work_units = grid_total;
        plan->work_per_tg = 1;
        plan->grid_x = plan->n_tiles;
        plan->grid_y = plan->m_tiles;
        plan->grid_z = vi->schedule == MQ_SCHED_SPLITK ? q->split_k : 1;
    }
    plan->dispatches = q->split_k > 1 ? 2 : 1;
    plan->workspace_bytes =
        q->split_k > 1 ? (size_t)q->split_k * (size_t)p->M * (size_t)p->N * sizeof(float) : 0;
    return mq_ok(err);
}

mq_candidate mq_default_candidate(const mq_problem *p)
{
    mq_variant v = MQ_VAR_MARLIN_FP4;
    if (p && p->format == MQ_FMT_U4)
        v = MQ_VAR_FUSED_U4;
    else if (p && mq_format_is_trellis(p->format))
        v = p->M <= 16 ? MQ_VAR_TRELLIS_DECODE : MQ_VAR_TRELLIS_PACKED;
    mq_candidate c = {v, variants[v].defaults};
    return c;
}

int mq_candidate_str(const mq_candidate *c, char *buf, size_t n)
{
    const mq_variant_info *vi = mq_variant_get(c->variant);
    return snprintf(buf, n, "%s tm=%d tn=%d tk=%d tg=%d sk=%d", vi ? vi->name : "?",
                    c->p.tile_m, c->p.tile_n, c->p.tile_k, c->p.num_threadgroups,
                    c->p.split_k);
}
