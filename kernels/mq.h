/* mq.h - public API of the runtime library (libmq): quantized weight formats
 * (fp4, u4, trellis2/3/4), problems and candidates, legality checks with
 * reasons, the float64 reference GEMM, and the CPU model of every kernel
 * variant of the seed designs, run on a persistent worker pool.
 *
 * Conventions: activations A are FP16 bit patterns, row-major [M, K];
 * outputs C are FP32, row-major [M, N]; kernels accumulate in FP32.
 * No function here exits or aborts on bad input: each returns an mq_status
 * and, when given an mq_error, a one-line message naming the problem. */
#ifndef MQ_H
#define MQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ----------------------------------------------------------- */

typedef enum {
    MQ_OK = 0,
    MQ_E_ARG,        /* a null pointer or an out-of-range argument */
    MQ_E_SHAPE,      /* a bad problem shape (M, N, K, group) */
    MQ_E_WEIGHTS,    /* weights that do not match their format or the problem */
    MQ_E_ILLEGAL,    /* a candidate that this problem and these limits refuse */
    MQ_E_NOMEM,      /* an allocation failed */
    MQ_E_SYSTEM,     /* the OS refused something (threads) */
    MQ_E_WRONG       /* a kernel broke what its run must leave behind (a device backend's
                      * check after the launch: a meeting's counter left set); the run
                      * counts as a wrong result, not as a failure to run */
} mq_status;

typedef struct {
    mq_status code;
    char msg[256];
} mq_error;

const char *mq_status_name(mq_status s);

#if defined(__GNUC__)
#define MQ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MQ_PRINTF(a, b)
#endif
/* Fill err (if non-null) with code and a formatted message; returns code.
 * For tools built on the library, so their errors read the same way. */
mq_status mq_fail(mq_error *err, mq_status code, const char *fmt, ...) MQ_PRINTF(3, 4);

/* ---- FP16 ------------------------------------------------------------- */

float mq_half_to_float(uint16_t h);
uint16_t mq_float_to_half(float f); /* round to nearest even, saturates to inf */

/* ---- formats ---------------------------------------------------------- */

typedef enum {
    MQ_FMT_FP4 = 0,   /* E2M1 codes + FP16 group scales */
    MQ_FMT_U4,        /* 4-bit codes + FP16 scale + integer zero point per group */
    MQ_FMT_TRELLIS2,  /* codebook indices in 16x16 tiles, 2 bits */
    MQ_FMT_TRELLIS3,
    MQ_FMT_TRELLIS4,
    MQ_FMT_COUNT
} mq_format;

const char *mq_format_name(mq_format f);
mq_status mq_format_from_name(const char *name, mq_format *out, mq_error *err);
int mq_format_is_trellis(mq_format f);
int mq_format_bits(mq_format f);

/* The seed's E2M1 -> FP16 table (bit patterns), code 0..15. */
uint16_t mq_fp4_to_half_bits(unsigned code);
/* u4 dequant the way the Metal kernels do it: (0x6400 | q) as half - 1024,
 * minus the zero point, times the scale; returned as FP32. */
float mq_u4_dequant_magic(unsigned q, unsigned zero, uint16_t scale_half);

#define MQ_TRELLIS_TILE 16

/* packed bytes of one 16x16 trellis tile: 64, 96, 128 for 2, 3, 4 bits */
int mq_trellis_tile_bytes(int bits);
/* index idx_in_tile (0..255, row-major k*16+n) of a packed tile, LSB-first */
unsigned mq_trellis_get_index(const uint8_t *tile, int bits, int idx_in_tile);
void mq_trellis_set_index(uint8_t *tile, int bits, int idx_in_tile, unsigned value);

/* Weights of one [K, N] matrix. fp4/u4 use packed, scales (and zeros for u4);
 * trellis formats use indices, tscales, grid, su, sv. */
typedef struct {
    mq_format format;
    int K, N, group;
    uint32_t *packed;   /* fp4, u4: [K/8][N], 8 codes along K, lowest nibble first */
    uint16_t *scales;   /* fp4, u4: FP16 bits [K/group][N] */
    uint8_t *zeros;     /* u4: [K/group][N], 0..15 */
    uint8_t *indices;   /* trellis: [tiles_k][tiles_n][tile_bytes] */
    float *tscales;     /* trellis: FP32 [K/group][N] */
    float *grid;        /* trellis: codebook, n_levels entries */
    int n_levels;       /* trellis: 1 .. 2^bits */
    float *su;          /* trellis: [K], each +1 or -1 */
    float *sv;          /* trellis: [N], each +1 or -1 */
    /* The lane-major layout (MQ_LAYOUT_LANE, below), made from the arrays
     * above by mq_weights_prepare_lane; NULL when not prepared. */
    uint32_t *lane_codes; /* every format: [N16][KB][words per super-block] */
    void *lane_scales;    /* fp4, u4: FP16 bits; trellis: FP32 tscales x sv; [N16][Gp][8][2] */
    uint8_t *lane_zeros;  /* u4: zero points, indexed as lane_scales */
    int lane_scales_small; /* fp4: every scale finite and under 4 in magnitude (set with the
                            * lane arrays): x 2^14 is exact in FP16, so a decode may fold
                            * the 2^14 of its code trick into the scale */
    int owned;          /* arrays allocated by mq_weights_alloc (and the lane arrays) */
} mq_weights;

/* Allocate zeroed arrays for a format and shape (trellis: n_levels = 2^bits). */
mq_status mq_weights_alloc(mq_weights *w, mq_format f, int K, int N, int group, mq_error *err);
void mq_weights_free(mq_weights *w);
/* Keep up to `bytes` of freed large weight arrays for reuse by later
 * allocations in this process (default 0: none kept), so a caller that sets
 * up many weights in turn reuses pages the OS has already zeroed and mapped
 * instead of faulting in fresh ones. 0 releases what is kept. */
void mq_weights_cache_limit(size_t bytes);
/* n copies of src in one block of memory (*block; mq_weights_copies_free
 * gives it back), out[i] borrowing its arrays (owned = 0: mq_weights_free
 * leaves them). One block per set, so sets of similar size reuse each
 * other's pages through mq_weights_cache_limit. */
mq_status mq_weights_copies(const mq_weights *src, int n, mq_weights *out, void **block,
                            mq_error *err);
void mq_weights_copies_free(void *block);
/* The seed arrays of w in a fixed order (packed, scales, zeros, indices,
 * tscales, grid, su, sv): field[i] points at w's pointer, bytes[i] its size
 * (0: absent in this format). Returns the count, MQ_WEIGHT_SEED_FIELDS (8).
 * Everything a weight set is made of: what a file stores (the lane arrays
 * are derived from these, mq_weights_prepare_lane). */
#define MQ_WEIGHT_SEED_FIELDS 8
int mq_weights_fields(const mq_weights *w, void ***field, size_t *bytes);
/* The same followed by the lane arrays (lane_codes, lane_scales,
 * lane_zeros; bytes 0 when not prepared): MQ_WEIGHT_FIELDS (11) in all.
 * What mq_weights_copy, mq_weights_copies and mq_weights_free carry. */
#define MQ_WEIGHT_FIELDS 11
int mq_weights_all_fields(const mq_weights *w, void ***field, size_t *bytes);
/* Deep copy into dst (owned by dst); used to rotate weights past the caches. */
mq_status mq_weights_copy(mq_weights *dst, const mq_weights *src, mq_error *err);
/* Validate weights as loaded: shape, group, zero points <= 15, trellis
 * indices < n_levels, sign vectors exactly +-1, finite scales. Lane arrays,
 * when present, must be complete for the format and zero in every padding
 * slot (codes, scales and zeros past N and past K); their other slots are
 * not compared with the seed arrays (that is a repack: prepare again). */
mq_status mq_weights_check(const mq_weights *w, mq_error *err);
/* Bytes the kernels read for the weights (codes + scales + zeros/signs). */
size_t mq_weights_bytes(const mq_weights *w);

/* ---- the lane-major weight layout: mq_lane_layout.h ---------------------- */
#include "mq_lane_layout.h"

/* ---- problems and the reference --------------------------------------- */

typedef struct {
    mq_format format;
    int M, N, K, group;
} mq_problem;

mq_status mq_problem_check(const mq_problem *p, mq_error *err);

/* Groups along K: ceil(K / group). The trellis formats (seed 004) allow a
 * partial last group (K a multiple of the 16-row trellis tile); fp4 and u4
 * need K to be a multiple of the group. */
int mq_group_count(int K, int group);
/* K's rule for a format and group (the above); MQ_E_SHAPE naming it. */
mq_status mq_check_k(mq_format f, int K, int group, mq_error *err);

/* C[m][n] = sum_k A[m][k] * W[k][n] in float64 over exactly dequantized
 * weights. abs_out (may be NULL) gets sum_k |A||W|, for error bounds. */
mq_status mq_reference_gemm(const mq_weights *w, const uint16_t *A, int M,
                            double *C, double *abs_out, mq_error *err);

/* ---- variants and candidates ------------------------------------------ */

typedef enum {
    MQ_VAR_MARLIN_FP4 = 0,       /* 2D grid, double-buffered staged B tile */
    MQ_VAR_MARLIN_FP4_STRIPED,   /* 1D stripes x k_parallel, workspace + reduce */
    MQ_VAR_FUSED_FP4,            /* 2D grid, dequant in the inner loop */
    MQ_VAR_FUSED_U4,
    MQ_VAR_TRELLIS_PACKED,       /* trellis prefill, 64x64 by default */
    MQ_VAR_TRELLIS_DECODE,       /* trellis decode, 32x128 by default */
    MQ_VAR_MLX_SPLITK,           /* grid x split_k slices, then a sum */
    MQ_VAR_GEMV_DECODE,          /* fp4/u4 decode: no MMA, 16-byte loads, K over lanes */
    MQ_VAR_GEMV_TRELLIS,         /* the same for the trellis formats */
    MQ_VAR_LANE_GEMM,            /* fp4/u4 on the lane layout: codes straight into fragments */
    MQ_VAR_LANE_TRELLIS,         /* the same for the trellis formats, a pair codebook */
    MQ_VAR_COUNT                 /* the built-in variants; mq_variant_count() counts all */
} mq_variant;

typedef enum { MQ_SCHED_GRID2D, MQ_SCHED_STRIPED, MQ_SCHED_SPLITK } mq_schedule;
/* STAGED: B dequantized into threadgroup tiles; FUSED: decoded per 8x8
 * sub-tile for simdgroup matrices; GEMV: no matrices and no staging, each
 * lane decodes the 4 columns x 8 K of one 16-byte load in registers (the
 * decode path, M up to 16) */
/* LANE: the weights read from the lane-major layout (kernels/layout_lane.c),
 * each lane's codes decoded straight into its MMA fragments */
typedef enum { MQ_DEQ_STAGED, MQ_DEQ_FUSED, MQ_DEQ_GEMV, MQ_DEQ_LANE } mq_dequant_mode;

typedef struct {
    int tile_m, tile_n, tile_k;
    int num_threadgroups; /* striped: the 1D grid; others: 0 (fixed by the grid) */
    int split_k;          /* striped: k_parallel; mlx_splitk: slices; others 1 */
} mq_params;

typedef struct {
    mq_variant variant;
    mq_params p;
} mq_candidate;

/* Device buffers a variant's MSL kernel binds after the common ones (0 A,
 * 1 packed/indices, 2 scales/tscales, 3 C, 4 params), in order from 5; a u4
 * kernel binds its zero points after these. */
typedef enum {
    MQ_BUF_END = 0,
    MQ_BUF_WORKSPACE, /* the FP32 split-K workspace */
    MQ_BUF_GRID,      /* trellis codebook */
    MQ_BUF_SU,        /* trellis sign vectors */
    MQ_BUF_SV,
    MQ_BUF_ZEROS,     /* u4 zero points (added for u4 by the program layer) */
} mq_buffer_kind;

/* A variant is one row of this: what the CPU model, the planner, the space,
 * the tables and the MSL program layer need to know of it. */
typedef struct {
    const char *name;          /* the seed's kernel name */
    const char *enum_name;     /* "MQ_VAR_..." for generated C tables; NULL: its index */
    unsigned formats;          /* bit (1u << mq_format) per served format */
    mq_schedule schedule;
    mq_dequant_mode dequant;
    int a_stages, b_stages;    /* threadgroup-memory buffers of A and B tiles */
    int tile_pad;              /* halves added to each A and B tile row (bank conflicts);
                                * the kernels get it as MQ_TILE_PAD */
    int sg_m, sg_n;            /* output region of one simdgroup */
    int staging_bytes_per_sg;  /* per-simdgroup B staging (fused) */
    int epilogue_bytes_per_sg;
    int scratch_in_tiles_per_sg; /* epilogue scratch that reuses the tiles' memory: the
                                  * threadgroup holds at least simdgroups x this */
    int tile_quantum;          /* tile_n and tile_k must be multiples of this */
    mq_params defaults;        /* the seed's own configuration */
    const char *msl_file;      /* its kernel source in metal/ */
    const char *msl_function;  /* its kernel function; "%s" stands for the format's name */
    mq_buffer_kind msl_buffers[4]; /* extra buffers, MQ_BUF_END-terminated */
    const char *summary;
    mq_layout layout;          /* the weight arrays its kernel reads (SEED unless said) */
} mq_variant_info;

/* Every variant: the seeds' (mq_variant's constants) and any registered. */
int mq_variant_count(void);
const mq_variant_info *mq_variant_get(mq_variant v);
mq_status mq_variant_from_name(const char *name, mq_variant *out, mq_error *err);
int mq_variant_serves(mq_variant v, mq_format f);
/* Add a variant with an existing schedule and dequant strategy (its kernel
 * source in metal/): the row is checked (a new name, formats, schedule,
 * simdgroup region, tile quantum, defaults) and gets the next id. Register
 * before any use, from one thread. MQ_E_ARG with the reason otherwise. */
mq_status mq_variant_register(const mq_variant_info *row, mq_variant *id, mq_error *err);

/* The decode path's (MQ_DEQ_GEMV) largest tile_m: accumulator rows in registers. */
#define MQ_GEMV_MAX_ROWS 16

/* Hardware limits a candidate must respect (from the chip description). */
typedef struct {
    int tg_mem_bytes;         /* threadgroup memory per threadgroup */
    int max_threads_per_tg;
    int simd_width;
    int cores;                /* GPU cores (0: unknown): the lookup's occupancy, the lane MoE
                               * space's pruning of gate/up parts */
    int async_copy_stages;    /* K tiles a kernel may keep in flight through asynchronous
                               * device-to-threadgroup copies (cp.async on NVIDIA sm_80+);
                               * 0: the chip has no such copy (Apple GPUs) */
} mq_limits;

mq_limits mq_limits_default(void); /* Apple GPUs: 32 KiB, 1024, 32, no async copy */

/* What a legal candidate turns into: the work decomposition. */
typedef struct {
    int m_tiles, n_tiles;
    int k_slices;          /* split_k (1 when K is not split) */
    int k_unit;            /* K slices start on multiples of this */
    int k_slice_len;       /* length of every K slice but the last */
    int k_last_len;        /* length of the last K slice (takes the remainder) */
    int grid_x, grid_y, grid_z;
    int threadgroups;      /* threadgroups of the main dispatch */
    int work_units;        /* striped: m_tiles*n_tiles*k_slices */
    int work_per_tg;       /* striped: ceil(work_units / threadgroups) */
    int simdgroups, threads_per_tg, tg_mem_bytes;
    int stages;            /* lane kernel: K tiles of A and weights in threadgroup memory,
                            * filled by asynchronous copies (0: weights in registers) */
    int scale_k;           /* lane kernel: K one scaled add of the sums covers (the group,
                            * at most a super-block); 0: the weights carry their scales */
    int dispatches;        /* 1, or 2 with a reduction pass */
    size_t workspace_bytes;/* partial sums (FP32) */
} mq_plan;

/* Check a candidate against a problem and limits; on success fill plan.
 * A refused candidate gives MQ_E_ILLEGAL and the reason in err. */
mq_status mq_plan_candidate(const mq_problem *p, const mq_candidate *c,
                            const mq_limits *lim, mq_plan *plan, mq_error *err);

/* The seed kernels' own rule (2D 64x64, trellis decode when M <= 16). */
mq_candidate mq_default_candidate(const mq_problem *p);

/* Format a candidate as "variant tm=64 tn=64 tk=32 tg=0 sk=1". */
int mq_candidate_str(const mq_candidate *c, char *buf, size_t n);

/* ---- running ---------------------------------------------------------- */

typedef struct mq_ctx mq_ctx;

/* threads <= 0: one worker per online host core. The pool is persistent. */
mq_status mq_ctx_create(int threads, mq_ctx **out, mq_error *err);
void mq_ctx_destroy(mq_ctx *ctx);
int mq_ctx_threads(const mq_ctx *ctx);

/* Stream `bytes` at buf through the context's workers in one dispatch
 * (threads x 4 chunks, handed out as mq_gemm hands out threadgroups); buf
 * NULL or bytes 0: the same dispatch reading nothing. Returns a sum of the
 * words read (so the reads stay). What a kernel reading that many bytes on
 * these workers could reach: the CPU backend's sized read probe. */
float mq_ctx_read(mq_ctx *ctx, const void *buf, size_t bytes);

/* One processed work unit, recorded when a trace is set (tests, explain). */
typedef struct {
    int tg, tile_row, tile_col, k_slice;
} mq_trace_entry;

/* Record every work unit the kernels process into buf (up to cap entries;
 * *count gets the number recorded). NULL buf turns tracing off. */
void mq_ctx_set_trace(mq_ctx *ctx, mq_trace_entry *buf, int cap, int *count);

/* C = A x W with a candidate (NULL: mq_default_candidate) under limits
 * (NULL: mq_limits_default). The weights' contents are trusted: validate
 * them once when they are loaded (mq_weights_check; mq_quantize does). A
 * context runs one GEMM at a time. */
mq_status mq_gemm(mq_ctx *ctx, const mq_problem *p, const mq_weights *w,
                  const uint16_t *A, float *C, const mq_candidate *c,
                  const mq_limits *lim, mq_error *err);

/* mq_gemm for a candidate the caller planned already (mq_plan_candidate on
 * this problem and candidate): a layer run many times, or a benchmark's
 * repetitions, plan once. MQ_E_ARG when the plan's tiles and K slices do
 * not cover this problem with this candidate's tiles. */
mq_status mq_gemm_planned(mq_ctx *ctx, const mq_problem *p, const mq_weights *w,
                          const uint16_t *A, float *C, const mq_candidate *c,
                          const mq_plan *plan, mq_error *err);

/* ---- mixture of experts: gemm_trellis_moe (seed 004, section 7) ------- */

/* One MoE block: `tokens` rows of x [tokens][hidden] (FP16), each routed to
 * top_k of `experts` experts; expert e computes
 *   down_e(silu(gate_e(x)) * up_e(x))
 * with gate/up [hidden -> inter] and down [inter -> hidden] in one trellis
 * format, and a token's output is the sum over its experts of that times
 * the routing probability. */
typedef struct {
    mq_format format; /* trellis2, trellis3 or trellis4 */
    int tokens, hidden, inter, experts, top_k, group;
} mq_moe_problem;

mq_status mq_moe_problem_check(const mq_moe_problem *p, mq_error *err);

typedef enum { MQ_MOE_GATE = 0, MQ_MOE_UP, MQ_MOE_DOWN, MQ_MOE_PROJS } mq_moe_proj;
const char *mq_moe_proj_name(mq_moe_proj j);

/* Per-expert weights in the seed's contiguous layout: for each projection,
 * every array holds the experts back to back (indices [E][tiles_k][tiles_n]
 * [tile_bytes], tscales [E][groups][N], su [E][K], sv [E][N]) and one
 * codebook serves all experts of the projection; w[j][e] is expert e of
 * projection j as an mq_weights view into them (not owned). */
typedef struct {
    mq_format format;
    int experts, hidden, inter, group;
    uint8_t *indices[MQ_MOE_PROJS];
    float *tscales[MQ_MOE_PROJS], *su[MQ_MOE_PROJS], *sv[MQ_MOE_PROJS];
    float *grid[MQ_MOE_PROJS];
    mq_weights *w[MQ_MOE_PROJS]; /* [experts] views */
} mq_moe_weights;

/* Allocate zeroed weights (signs +1, the default codebook) for p's format,
 * sizes and experts (tokens and top_k are not used). */
mq_status mq_moe_weights_alloc(mq_moe_weights *mw, const mq_moe_problem *p, mq_error *err);
void mq_moe_weights_free(mq_moe_weights *mw);
/* Copy one expert's projection into place from weights of the same format,
 * shape and group (e.g. mq_quantize's), whose codebook must equal the
 * projection's (set it first with mq_moe_weights_set_grid). */
mq_status mq_moe_weights_set(mq_moe_weights *mw, mq_moe_proj j, int expert,
                             const mq_weights *src, mq_error *err);
mq_status mq_moe_weights_set_grid(mq_moe_weights *mw, mq_moe_proj j, const float *grid,
                                  int n_levels, mq_error *err);
/* Synthetic weights for benchmarks: uniform indices, scales so that a
 * projection of unit-variance inputs keeps unit variance, random signs;
 * the same seed gives the same weights. */
void mq_moe_weights_fill_random(mq_moe_weights *mw, uint64_t seed);
/* Validate every expert of every projection (mq_weights_check's rules),
 * naming the projection and expert at fault. */
mq_status mq_moe_weights_check(const mq_moe_weights *mw, mq_error *err);
/* Bytes of the experts `routing` touches (what a decode step must read). */
size_t mq_moe_weights_bytes_touched(const mq_moe_weights *mw, const int32_t *expert_ids,
                                    int tokens, int top_k);

/* Routing: expert_ids and probs, [tokens][top_k] each. Valid when every id
 * is in [0, experts), a token's ids are distinct, every probability is
 * finite and not negative; MQ_E_ARG names the token and slot otherwise. */
mq_status mq_moe_routing_check(const mq_moe_problem *p, const int32_t *expert_ids,
                               const float *probs, mq_error *err);

typedef enum {
    MQ_ROUTE_UNIFORM = 0, /* top_k distinct experts, each equally likely */
    MQ_ROUTE_ZIPF,        /* expert r drawn with weight 1/(r+1)^s (s = zipf_s) */
    MQ_ROUTE_ONE,         /* every token to experts 0..top_k-1: one expert holds all tokens */
    MQ_ROUTE_KINDS
} mq_route_kind;

const char *mq_route_kind_name(mq_route_kind k);
mq_status mq_route_kind_from_name(const char *name, mq_route_kind *out, mq_error *err);
/* A reproducible routing (the same seed, the same routing): experts as the
 * kind says, probabilities a softmax of random logits over the chosen. */
mq_status mq_moe_routing_generate(const mq_moe_problem *p, mq_route_kind kind, double zipf_s,
                                  uint64_t seed, int32_t *expert_ids, float *probs,
                                  mq_error *err);

/* Tokens per expert: the most any expert gets, the mean over experts and
 * how many experts get at least one. */
typedef struct {
    int max_tokens, touched;
    double mean_tokens;
} mq_moe_routing_summary;

mq_moe_routing_summary mq_moe_routing_summarize(const mq_moe_problem *p,
                                                const int32_t *expert_ids);

/* The block in float64 over exactly dequantized weights: out [tokens]
 * [hidden]. bound (may be NULL) gets, per output, how far a kernel that
 * computes gate and up in FP32 (hidden products), SwiGLU in FP32, rounds h
 * to FP16, computes down in FP32 (inter products) and sums the experts in
 * FP32 may be from it. */
mq_status mq_moe_reference(const mq_moe_problem *p, const mq_moe_weights *mw,
                           const uint16_t *x, const int32_t *expert_ids, const float *probs,
                           double *out, double *bound, mq_error *err);
/* The same for a path's arithmetic, half_mid flags: MQ_MOE_HALF_WEIGHTS,
 * its weights are FP16 (staged or decoded so: the tile kernels' B tiles,
 * the lane block's levels); MQ_MOE_HALF_STORES, it stores gate, up and each
 * expert's down output as FP16 between its passes (the unfused baseline on
 * a GPU: the dense kernels' C is FP16). */
#define MQ_MOE_HALF_WEIGHTS 1
#define MQ_MOE_HALF_STORES 2
mq_status mq_moe_reference_arith(const mq_moe_problem *p, const mq_moe_weights *mw,
                                 const uint16_t *x, const int32_t *expert_ids, const float *probs,
                                 int half_mid, double *out, double *bound, mq_error *err);

/* How the CPU model runs the block. inner: the dense kernel each expert's
 * rows run through (gemv_trellis_decode: tile_m rows per pass over the
 * weights, streaming; gemm_trellis_packed / _decode: output tiles); i_split:
 * the intermediate dimension cut into this many chunks of whole groups,
 * one work unit per touched expert and chunk, each giving the down
 * projection a partial sum; fuse_gate_up: 1, one unit computes gate, up,
 * SwiGLU and its chunk of down (one dispatch); 0, gate and up are separate
 * units of a first dispatch and SwiGLU + down a second. The MSL lane
 * block (inner lane_trellis) takes inner.p.split_k as gate/up's parts of K
 * (threadgroups that meet in the kernel); every other inner kernel, 1. */
typedef struct {
    mq_candidate inner;
    int i_split;
    int fuse_gate_up;
    /* the MSL kernel only: the down projection's own tile_n and tile_k (0:
     * the inner kernel's); the CPU model refuses them */
    int down_tile_n, down_tile_k;
} mq_moe_candidate;

/* Check a candidate; MQ_E_ILLEGAL with the reason. */
mq_status mq_moe_candidate_check(const mq_moe_problem *p, const mq_moe_candidate *c,
                                 mq_error *err);
int mq_moe_candidate_str(const mq_moe_candidate *c, char *buf, size_t n);
/* The inverse of mq_moe_candidate_str: "gemm_trellis_moe[VARIANT tm=.. tn=..
 * tk=.. tg=.. sk=..] i_split=.. fuse_gate_up=.. [down=TNxTK]" (a results
 * file's candidate column) into c, whole (trailing blanks allowed); legal
 * or not is mq_moe_candidate_check's. MQ_E_ARG naming the text otherwise. */
mq_status mq_moe_candidate_parse(const char *s, mq_moe_candidate *c, mq_error *err);
/* Intermediate columns per chunk of a legal candidate: i_split chunks of
 * whole groups (the tile engine: whole K tiles too), the last taking the
 * rest. */
int mq_moe_chunk_len(const mq_moe_problem *p, const mq_moe_candidate *c);
/* A sensible candidate for p (decode: the streaming kernel, the
 * intermediate split to fill the workers; prefill: tiles). */
mq_moe_candidate mq_moe_default_candidate(const mq_moe_problem *p, int threads);

/* out [tokens][hidden] FP32 = the block, fused (gemm_trellis_moe). Routing
 * and weights are trusted: check them once when they are made. */
mq_status mq_moe_run(mq_ctx *ctx, const mq_moe_problem *p, const mq_moe_weights *mw,
                     const uint16_t *x, const int32_t *expert_ids, const float *probs,
                     float *out, const mq_moe_candidate *c, mq_error *err);
/* The unfused baseline: per touched expert, its tokens gathered into a
 * dense FP16 block, gate and up through mq_gemm (dense: `dense` for every
 * call, or NULL: the context's table, else the decode kernel up to 16 rows
 * and the prefill kernel above), SwiGLU as its own pass to FP16, down
 * through mq_gemm, and the probability-weighted sum as its own pass. */
mq_status mq_moe_run_unfused(mq_ctx *ctx, const mq_moe_problem *p, const mq_moe_weights *mw,
                             const uint16_t *x, const int32_t *expert_ids, const float *probs,
                             float *out, const mq_candidate *dense, mq_error *err);

/* ---- dispatch tables and the runtime lookup --------------------------- */

#define MQ_TABLE_SCHEMA 1

/* One row: for (format, group, N, K) and m_lo <= M <= m_hi, run c. Rows
 * with N = K = 0 are the chip's default per format (and group). A row with
 * experts > 0 is the MoE block's (gemm_trellis_moe): for (format, group,
 * hidden = N, inter = K, experts, top_k) and m_lo <= tokens <= m_hi, run
 * c as its inner kernel with i_split and fuse_gate_up; the dense lookup
 * never answers with one. */
typedef struct {
    mq_format format;
    int group, N, K, m_lo, m_hi;
    mq_candidate c;
    double expected_s;
    int expected_m;  /* the M expected_s was measured (or predicted) at; 0: not known */
    int experts, top_k, i_split, fuse_gate_up; /* MoE rows only; 0 otherwise */
    int down_tile_n, down_tile_k;              /* MoE rows: the MSL down tile (0: none) */
} mq_table_row;

typedef struct mq_table mq_table;

typedef enum {
    MQ_LOOKUP_EXACT,   /* this (format, group, N, K) and M range */
    MQ_LOOKUP_MODEL,   /* no row of this shape: the table's cost model chose. Among
                          the candidates the table's rows give for this M, each
                          predicted for the asked shape and scaled by how far the
                          model was from its measured time where the table measured
                          it, the lowest; none legal: the lowest prediction over the
                          whole candidate grid */
    MQ_LOOKUP_NEAREST, /* the nearest shape (log N, log K) of the format and group;
                          with lim->cores known, tile_n rescaled to keep its number
                          of column tiles when that fills the cores more evenly */
    MQ_LOOKUP_DEFAULT, /* the chip's default for the format */
    MQ_LOOKUP_BUILTIN  /* no table answer: the seed kernels' rule */
} mq_lookup_level;

const char *mq_lookup_level_name(mq_lookup_level l);

/* The MoE block's candidate for p from the table's MoE rows: EXACT, the
 * row of this (format, group, hidden, inter, experts, top_k) covering its
 * tokens; NEAREST, the covering row of the format and group nearest in
 * (log hidden, log inter, log experts / top_k); a row's candidate must be
 * legal for p (mq_moe_candidate_check); else BUILTIN,
 * mq_moe_default_candidate(p, threads). */
mq_moe_candidate mq_table_lookup_moe(const mq_table *t, const mq_moe_problem *p, int threads,
                                     mq_lookup_level *level);
/* The table's MoE rows (mq_table_rows gives the dense ones). */
int mq_table_moe_rows(const mq_table *t, const mq_table_row **rows);

/* The kernel build of this library: a checksum of the kernel sources and
 * of each backend's translation of them ("k" CRC "-" size, hex), or
 * "unknown" when built without the Makefile. */
const char *mq_kernel_build(void);

/* Load a table file written by tune. chip (may be NULL) must match the
 * table's; a newer schema, another chip or a malformed row is refused. */
mq_status mq_table_load(const char *path, const char *chip, mq_table **out, mq_error *err);
/* A table from rows compiled in (the header tune generates). */
mq_status mq_table_from_rows(const char *chip, const mq_table_row *rows, int n, mq_table **out,
                             mq_error *err);
void mq_table_free(mq_table *t);
const char *mq_table_chip(const mq_table *t);
/* The kernel build the table's picks were measured or verified on ("":
 * the table does not say; tables before 2026-11-27). A runtime compares it
 * with mq_kernel_build(): another build's picks may no longer be fast. */
const char *mq_table_kernel_build(const mq_table *t);
int mq_table_rows(const mq_table *t, const mq_table_row **rows);

/* The candidate for a problem (t may be NULL), legal under lim (NULL:
 * Apple defaults); *level (may be NULL) says which level answered. */
mq_candidate mq_table_lookup(const mq_table *t, const mq_problem *p, const mq_limits *lim,
                             mq_lookup_level *level);

/* One entry of the cost model a table carries: a figure of the chip
 * (kind "chip", named as chips.csv names it), a model coefficient (kind
 * "term", named as model.csv names it, with its variant's name, "" for a
 * shared term) or a compiled kernel's factor (kind "kernel": name the
 * format, variant, the tile in tile_m/n/k). tune writes them into the table file ("# cost-model:"
 * lines) and into the generated header. */
typedef struct {
    const char *kind, *name, *variant;
    double value;
    int tile_m, tile_n, tile_k; /* kind "kernel": the kernel's tile (name: its format) */
} mq_table_param;

/* Give a table its chip's figures and the model's coefficients: a shape no
 * row has is then chosen by the model (MQ_LOOKUP_MODEL) instead of copied
 * from a neighbour. Every chip figure the model needs must be given; an
 * unknown name or a negative or non-finite value is refused (the table is
 * unchanged). */
mq_status mq_table_set_model(mq_table *t, const mq_table_param *params, int n, mq_error *err);
int mq_table_has_model(const mq_table *t);

/* mq_gemm with a NULL candidate asks this table (NULL: the seed rule); a
 * context remembers its last answers, so a model choice is made once per
 * problem. */
void mq_ctx_set_table(mq_ctx *ctx, const mq_table *t);

#ifdef __cplusplus
}
#endif
#endif
