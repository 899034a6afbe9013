/* mq_internal.h - declarations shared by the library's files but not public:
 * error helpers, the worker pool, per-worker scratch (the CPU model's
 * threadgroup memory) and the tile engines every variant is built from. */
#ifndef MQ_INTERNAL_H
#define MQ_INTERNAL_H

#include "mq.h"

mq_status mq_ok(mq_error *err);

/* formats.c: a format, group and shape mq_weights_alloc accepts, or MQ_E_SHAPE
 * (MQ_E_ARG for an unknown format) naming what is wrong. */
mq_status mq_check_dims(mq_format f, int K, int N, int group, mq_error *err);
/* formats.c: mq_weights_check's rules for the seed arrays; mq_weights_check
 * (layout_lane.c) adds the lane arrays' (padding zero). */
mq_status mq_weights_check_seed(const mq_weights *w, mq_error *err);

static inline int mq_cdiv(int a, int b) { return (a + b - 1) / b; }
static inline int mq_min(int a, int b) { return a < b ? a : b; }
static inline int mq_max(int a, int b) { return a > b ? a : b; }

/* The lane layout's geometry (mq_lane_geom, mq.h) of a shape mq_check_dims
 * accepts; 0 when K or N is too large for it. Arithmetic only, here so that
 * formats.c sizes the lane arrays without calling layout_lane.c (which calls
 * formats.c: no circle of calls, tests/check_cycles.sh). */
static inline int mq_lane_geom_fill(mq_lane_geom *g, mq_format f, int K, int N, int group)
{
    if (K > 0x3fffffff || N > 0x3fffffff)
        return 0;
    int tr = mq_format_is_trellis(f);
    *g = (mq_lane_geom){.format = f, .K = K, .N = N, .group = group};
    g->bits = mq_format_bits(f);
    g->ksb = tr ? 128 : 64;
    g->n16 = mq_cdiv(N, 16);
    g->kb = mq_cdiv(K, g->ksb);
    g->kp = g->kb * g->ksb;
    /* exact: groups of 32 and 64 divide 64; fp4/u4 with group 128 have 128 | K,
     * so kp = K; trellis super-blocks are 128 */
    g->gp = g->kp / group;
    g->sb_words = tr ? 64 * g->bits : 128;
    g->code_words = (size_t)g->n16 * (size_t)g->kb * (size_t)g->sb_words;
    g->scale_count = (size_t)g->n16 * (size_t)g->gp * 16;
    g->scale_size = tr ? sizeof(float) : sizeof(uint16_t);
    return 1;
}

/* ---- worker pool ---- */
typedef struct mq_pool mq_pool;
/* fn(arg, threadgroup_id, worker_id) runs once for every id in [0, count). */
typedef void (*mq_pool_fn)(void *arg, int tg, int worker);
mq_status mq_pool_create(int threads, mq_pool **out, mq_error *err);
void mq_pool_destroy(mq_pool *pool);
/* Run a dispatch and wait for it: the caller is worker 0. */
void mq_pool_run(mq_pool *pool, int count, mq_pool_fn fn, void *arg);

/* ---- what other runners (moe_run.c) use of a context ---- */
#define MQ_CTX_BUFFERS 6
mq_pool *mq_ctx_pool(mq_ctx *ctx);
const mq_table *mq_ctx_table(const mq_ctx *ctx);
/* A buffer of at least `bytes` in slot `slot` (< MQ_CTX_BUFFERS), 64-byte
 * aligned, kept and reused by later calls (its contents are not); NULL when
 * out of memory. */
void *mq_ctx_buffer(mq_ctx *ctx, int slot, size_t bytes);

/* MQ_E_WEIGHTS naming both when MoE weights are not of the problem's
 * format, sizes, experts and group (moe.c). */
mq_status mq_moe_weights_match(const mq_moe_problem *p, const mq_moe_weights *mw,
                               mq_error *err);

/* ---- per-worker scratch: the CPU model's threadgroup memory ---- */
#define MQ_MAX_TILE 1024
/* Each per-worker buffer holds a tile_m x tile_k, tile_k x tile_n or
 * tile_m x tile_n block of FP32 (rows padded by up to 16 columns). */
#define MQ_MAX_TILE_AREA (512 * 512)
#define MQ_SCRATCH_FLOATS (MQ_MAX_TILE_AREA + 16 * MQ_MAX_TILE)
typedef struct {
    float *a_tile;   /* A tile in FP32 (or bf16 pairs) */
    float *b_tile;   /* dequantized B tile, or A as bf16 pairs (fused) */
    float *acc;      /* accumulators */
} mq_scratch;
mq_scratch *mq_ctx_scratch(mq_ctx *ctx, int worker);

/* One output tile over a K range: out[r][c] (row stride ldo) =
 * sum_{k0<=k<k1} A[row0+r][k] * W[k][col0+c] for the valid rows and columns. */
typedef struct {
    const mq_problem *p;
    const mq_weights *w;
    const uint16_t *A;
    int tile_m, tile_n, tile_k;
} mq_tile_job;

void mq_tile_staged(const mq_tile_job *job, mq_scratch *s, int row0, int col0,
                    int k0, int k1, float *out, int ldo);
void mq_tile_fused(const mq_tile_job *job, mq_scratch *s, int row0, int col0,
                   int k0, int k1, float *out, int ldo);

/* The decode path on the CPU (gemv_stream.c): units of K slice x column
 * range, each streaming its weights in memory order; with several slices
 * each writes its own M x N plane of out, summed afterwards in order. */
typedef struct {
    const mq_problem *p;
    const mq_weights *w;
    const uint16_t *A;
    int rows;             /* rows sharing one pass over the weights (tile_m) */
    int slices, groups_per_slice;
    int col_ranges, width; /* width: columns per range, a multiple of 16 */
    float *out;           /* C when slices == 1, else slices planes of M x N */
} mq_gemv_job;

#define MQ_GEMV_REDUCE_CHUNK 4096 /* floats per unit of the slices' sum */

/* Fill slices, groups_per_slice, col_ranges and width for `threads` workers. */
void mq_gemv_schedule(mq_gemv_job *j, int threads);
/* The widest column range whose per-row partial sums stay in L1. */
int mq_gemv_max_cols(int rows);
/* Floats of the slices' planes (0 with one slice). */
size_t mq_gemv_workspace_floats(const mq_gemv_job *j);
/* Run unit `unit` (< slices * col_ranges) with a worker's scratch. */
void mq_gemv_unit(const mq_gemv_job *j, mq_scratch *s, int unit);
/* The same over groups [g0, g1) of K and columns [c0, c0+ncols) (ncols at
 * most mq_gemv_max_cols(rows)), into the M x N plane out (row stride N): a
 * unit of any K and column split. */
void mq_gemv_part(const mq_gemv_job *j, mq_scratch *s, int g0, int g1, int c0, int ncols,
                  float *out);
/* C[i] = sum over slices of out[s][i], for chunk `chunk` of M*N. */
void mq_gemv_reduce(const mq_gemv_job *j, int chunk, float *C);

/* Convert rows [row0, row0+mv) x cols [k0, k0+kk) of FP16 A to FP32 (stride lda_out). */
void mq_load_a_tile(const uint16_t *A, int K, int row0, int mv, int k0, int kk,
                    float *out, int lda_out);

/* A rows (FP32, stride lda) as bf16 pairs for VDPBF16PS (same stride):
 * per 8 k, the pairs (k+j, k+j+4) of the high parts for j = 0..3, then of
 * the low parts (a = hi + lo exactly: FP16 has 11 significant bits). */
void mq_split_a_bf16(const float *a, int lda, int mv, int kk, uint32_t *out);

/* Copy the valid mv x nv corner of an accumulator tile (stride ldc) out. */
void mq_store_tile(const float *acc, int ldc, int mv, int nv, float *out, int ldo);

/* Dequantize W[k0:k0+kk, col0:col0+nv] into out (row stride ldb >= nv,
 * columns nv..ldb zero-filled up to a multiple of 16). */
void mq_dequant_b_tile(const mq_weights *w, int k0, int kk, int col0, int nv,
                       float *out, int ldb);

/* Rows of packed B fetched ahead, into L2: one tile reads a few cache lines
 * per row, rows N words apart, which the hardware prefetcher does not follow.
 * Tuned on Zen 4 (16 to 48 rows all within noise; L1 prefetch was slower). */
#define PREFETCH_ROWS 32
#define MQ_PREFETCH_L2(addr) __builtin_prefetch((addr), 0, 1)

/* E2M1 values as FP32 (exactly the FP16 table). */
extern const float mq_fp4_values[16];

/* big_alloc.c: a weight array, zeroed (2 MiB aligned and THP-hinted from 2
 * MiB up); NULL on overflow or out of memory. mq_big_free takes it, or any
 * malloc'd pointer, back. */
void *mq_big_alloc(size_t count, size_t size);
void *mq_big_alloc_raw(size_t count, size_t size); /* not zeroed */
void mq_big_free(void *p);

#endif
