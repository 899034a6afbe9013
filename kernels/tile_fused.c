/* tile_fused.c - the fused tile engine (marlin_gemm_fused_fp4/_u4, trellis
 * prefill and decode): B is never staged as a tile. Each 16-column slice of
 * packed B is decoded in registers (the CPU analogue of the per-simdgroup
 * 8x8 staging) and used at once by every row of the A tile. Scales are
 * applied once per group: sum_k a*w*s = s * sum_k a*w, where w is the code's
 * value (fp4) or q - z (u4, subtracted per weight before the product, as
 * seeds 001/002 dequantize: a weight whose code is its zero point is exactly
 * zero, never the difference of two rounded sums).
 *
 * Where the CPU has VDPBF16PS, fp4/u4 products take it: every code value is
 * exact in bf16, and each FP16 activation is split exactly into two bf16
 * parts (a = hi + lo, hi = a truncated to bf16, lo = the 3 bits left), so
 * a*w = hi*w + lo*w with exact products and FP32 rounding after each, like
 * an FMA; the decode then needs one 16-bit permute per pair of k. */
#include <string.h>

#include "simd.h"
#include "tile_decode.h"
#include "mq_internal.h"

/* Two accumulator sets (k and k+4) when the registers allow it. */
#define DUAL(MR, NV) ((MR) <= 4 && (MR) * (NV) <= 8)

typedef struct {
    const mq_weights *w;
    const float *a;      /* A tile rows (FP32), row stride lda, column 0 = k_base */
    int lda, k_base;
    int gs, seg;         /* the group segment [gs, gs+seg) */
    int col;             /* absolute first column of this block */
    int ncols;           /* valid columns from col (may be < 16*NV at the edge) */
    float *acc;          /* accumulators at (row block, col block), stride ldc */
    int ldc;
    const uint32_t *apairs; /* bf16 path: per row and 8 k, 4 hi then 4 lo pairs */
    int kp_end;          /* packed rows of B: prefetch stays below this */
    v16f lut;
    v16u lut32;          /* fp4/u4: bf16 halves of lut, twice (v16f_lut16_pair) */
    v16u lut_u4;         /* u4, BF16 path: entry e = bf16(e - 15), e < 32 */
    const float *lut_f;
    mq_trellis_view tv;
} fused_args;

/* Columns valid in vector v of a block. */
MQ_INLINE int lane_count(const fused_args *f, int v) { return mq_min(16, f->ncols - 16 * v); }

MQ_INLINE void apply_scales(const int MR, const int NV, const fused_args *f,
                            v16f partial[8][4])
{
    for (int v = 0; v < NV; v++) {
        v16f sc = mq_group_scales16(f->w, f->gs / f->w->group, f->col + 16 * v, lane_count(f, v));
        for (int r = 0; r < MR; r++) {
            float *c = f->acc + (size_t)r * f->ldc + 16 * v;
            v16f_store(c, v16f_load(c) + partial[r][v] * sc);
        }
    }
}

#if MQ_HAVE_BF16DOT
/* One packed row (8 k) into the partials with VDPBF16PS: lane = bf16 pair
 * (w[k+j], w[k+j+4]) against the pairs (a[k+j], a[k+j+4]), high then low. */
MQ_INLINE void q4_row(const int MR, const int NV, const int U4, const fused_args *f,
                      const v16u *words, const v16u *zidx, int kp, v16f partial[8][4])
{
    const uint32_t *ap = f->apairs + (kp * 8 - f->k_base);
    int set = DUAL(MR, NV) ? MR : 0;
    for (int j = 0; j < 4; j++) {
        v16u wp[4];
        for (int v = 0; v < NV; v++)
            /* u4: the index q + 15 - z (0..30) into bf16(e - 15) gives q - z
             * exactly, both half-lanes in one permute */
            wp[v] = U4 ? v16u_lut16_pair_bf16(
                             f->lut_u4, ((words[v] >> (uint32_t)(4 * j)) & 0x000f000fu) + zidx[v])
                       : v16u_lut16_pair_bf16(f->lut32, words[v] >> (uint32_t)(4 * j));
        for (int r = 0; r < MR; r++) {
            v16u hi = (v16u){0} + ap[(size_t)r * f->lda + j];
            v16u lo = (v16u){0} + ap[(size_t)r * f->lda + 4 + j];
            for (int v = 0; v < NV; v++) {
                partial[r][v] = v16f_dot_bf16(partial[r][v], wp[v], hi);
                partial[set + r][v] = v16f_dot_bf16(partial[set + r][v], wp[v], lo);
            }
        }
    }
}
#else
/* One packed row (8 k) into the partials with FP32 FMAs; one 16-bit permute
 * decodes nibbles j (low half-lanes) and j+4 (high half-lanes). */
MQ_INLINE void q4_row(const int MR, const int NV, const int U4, const fused_args *f,
                      const v16u *words, const v16f *zv, int kp, v16f partial[8][4])
{
    const float *a = f->a + (kp * 8 - f->k_base);
    int set = DUAL(MR, NV) ? MR : 0; /* k and k+4 in separate chains */
    for (int j = 0; j < 4; j++) {
        v16f lo[4], hi[4];
        for (int v = 0; v < NV; v++) {
            v16f_lut16_pair(f->lut32, f->lut_f, words[v] >> (uint32_t)(4 * j), &lo[v], &hi[v]);
            if (U4) { /* the weight is q - z, exactly */
                lo[v] -= zv[v];
                hi[v] -= zv[v];
            }
        }
        for (int r = 0; r < MR; r++) {
            float a0 = a[(size_t)r * f->lda + j], a4 = a[(size_t)r * f->lda + j + 4];
            for (int v = 0; v < NV; v++) {
                partial[r][v] += a0 * lo[v];
                partial[set + r][v] += a4 * hi[v];
            }
        }
    }
}
#endif

/* The K loop of block_q4; FULL and U4 (constants) drop the edge masks and
 * select the zero points. */
MQ_INLINE void q4_loop(const int MR, const int NV, const int FULL, const int U4,
                       const fused_args *f, v16f partial[8][4])
{
    const mq_weights *w = f->w;
    int cnt[4];
    v16f zv[4]; /* u4: the group's zero points of the block's columns */
    size_t g = (size_t)(f->gs / w->group) * w->N + f->col;
    for (int v = 0; v < NV; v++) {
        cnt[v] = FULL ? 16 : lane_count(f, v);
        zv[v] = U4 ? v16b_load_n(w->zeros + g + 16 * v, lane_count(f, v)) : v16f_splat(0);
    }
#if MQ_HAVE_BF16DOT
    v16u zidx[4]; /* u4: 15 - z in both half-lanes */
    for (int v = 0; v < NV; v++)
        zidx[v] = (15u - __builtin_convertvector(zv[v], v16u)) * 0x00010001u;
#define Q4_ZERO zidx
#else
#define Q4_ZERO zv
#endif
    for (int kp = f->gs / 8; kp < (f->gs + f->seg) / 8; kp++) {
        const uint32_t *pk = w->packed + (size_t)kp * w->N + f->col;
        if (kp + PREFETCH_ROWS < f->kp_end)
            for (int v = 0; v < NV; v++)
                MQ_PREFETCH_L2(pk + (size_t)PREFETCH_ROWS * w->N + 16 * v);
        v16u words[4];
        for (int v = 0; v < NV; v++)
            words[v] = FULL ? *(const v16u_u *)(pk + 16 * v) : v16u_load_n(pk + 16 * v, cnt[v]);
        q4_row(MR, NV, U4, f, words, Q4_ZERO, kp, partial);
    }
#undef Q4_ZERO
}

/* fp4 / u4: one packed word holds 8 consecutive k of a column. */
MQ_INLINE void block_q4(const int MR, const int NV, const fused_args *f)
{
    v16f partial[8][4];
    for (int r = 0; r < (DUAL(MR, NV) ? 2 * MR : MR); r++)
        for (int v = 0; v < NV; v++)
            partial[r][v] = v16f_splat(0);
    int u4 = f->w->format == MQ_FMT_U4, full = f->ncols >= 16 * NV;
    if (u4 && full)
        q4_loop(MR, NV, 1, 1, f, partial);
    else if (u4)
        q4_loop(MR, NV, 0, 1, f, partial);
    else if (full)
        q4_loop(MR, NV, 1, 0, f, partial);
    else
        q4_loop(MR, NV, 0, 0, f, partial);
    if (DUAL(MR, NV))
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++)
                partial[r][v] += partial[MR + r][v];
    apply_scales(MR, NV, f, partial);
}

/* trellis: one 16-wide row of indices per k; A rows already carry su[k]. */
MQ_INLINE void block_trellis(const int MR, const int NV, const fused_args *f)
{
    v16f partial[8][4];
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++)
            partial[r][v] = v16f_splat(0);
    for (int k = f->gs; k < f->gs + f->seg; k++) {
        v16f d[4];
        for (int v = 0; v < NV; v++)
            d[v] = v16f_lut16(f->lut, mq_trellis_row16(&f->tv, k, f->col + 16 * v));
        const float *a = f->a + (k - f->k_base);
        for (int r = 0; r < MR; r++) {
            float ar = a[(size_t)r * f->lda];
            for (int v = 0; v < NV; v++)
                partial[r][v] += ar * d[v];
        }
    }
    apply_scales(MR, NV, f, partial);
}

typedef void (*block_fn)(const fused_args *);
#define BLOCK_FNS(MR, NV)                                                                     \
    static void q4_##MR##_##NV(const fused_args *f) { block_q4(MR, NV, f); }                 \
    static void tr_##MR##_##NV(const fused_args *f) { block_trellis(MR, NV, f); }
#define BLOCK_ROW(MR) BLOCK_FNS(MR, 1) BLOCK_FNS(MR, 2) BLOCK_FNS(MR, 4)
BLOCK_ROW(1) BLOCK_ROW(2) BLOCK_ROW(3) BLOCK_ROW(4)
BLOCK_ROW(5) BLOCK_ROW(6) BLOCK_ROW(7) BLOCK_ROW(8)
#define ROW_ENTRY(P, MR) {NULL, P##_##MR##_1, P##_##MR##_2, NULL, P##_##MR##_4}
static const block_fn q4_fns[9][5] = {
    {NULL}, ROW_ENTRY(q4, 1), ROW_ENTRY(q4, 2), ROW_ENTRY(q4, 3), ROW_ENTRY(q4, 4),
    ROW_ENTRY(q4, 5), ROW_ENTRY(q4, 6), ROW_ENTRY(q4, 7), ROW_ENTRY(q4, 8),
};
static const block_fn tr_fns[9][5] = {
    {NULL}, ROW_ENTRY(tr, 1), ROW_ENTRY(tr, 2), ROW_ENTRY(tr, 3), ROW_ENTRY(tr, 4),
    ROW_ENTRY(tr, 5), ROW_ENTRY(tr, 6), ROW_ENTRY(tr, 7), ROW_ENTRY(tr, 8),
};

/* Scales (and zero points) of group g for the tile's columns, into L2: one
 * short row per group, too sparse for the hardware prefetcher. */
static void prefetch_group_params(const mq_weights *w, int g, int col0, int nv)
{
    if (g >= mq_group_count(w->K, w->group))
        return;
    size_t at = (size_t)g * w->N + col0;
    for (int n = 0; n < nv; n += 32) {
        if (w->scales)
            MQ_PREFETCH_L2(w->scales + at + n);
        if (w->tscales)
            MQ_PREFETCH_L2(w->tscales + at + n);
        if (w->zeros && n % 64 == 0)
            MQ_PREFETCH_L2(w->zeros + at + n);
    }
}

/* The first PREFETCH_ROWS packed rows of a tile's K range: the steady-state
 * prefetch only reaches rows PREFETCH_ROWS ahead. */
static void prefetch_first_rows(const mq_weights *w, int k0, int k1, int col0, int nv)
{
    if (!w->packed)
        return;
    for (int kp = k0 / 8; kp < k1 / 8 && kp < k0 / 8 + PREFETCH_ROWS; kp++)
        for (int n = 0; n < nv; n += 16)
            MQ_PREFETCH_L2(w->packed + (size_t)kp * w->N + col0 + n);
}

void mq_tile_fused(const mq_tile_job *job, mq_scratch *s, int row0, int col0, int k0, int k1,
                   float *out, int ldo)
{
    const mq_problem *p = job->p;
    const mq_weights *w = job->w;
    int trellis = mq_format_is_trellis(w->format);
    int mv = mq_min(job->tile_m, p->M - row0), nv = mq_min(job->tile_n, p->N - col0);
    /* A trellis index row is decoded once per k (no 8-codes-per-word reuse as
     * in fp4/u4), so past one register block of rows the decode is staged
     * and shared by every row of the tile, as the prefill kernel shares its
     * per-simdgroup staging across the simdgroup's 32 rows. */
    if (trellis && mv > 8) {
        mq_tile_staged(job, s, row0, col0, k0, k1, out, ldo);
        return;
    }
    int ldc = (nv + 15) & ~15, lda = job->tile_k, nvec = ldc / 16;
    const block_fn(*fns)[5] = trellis ? tr_fns : q4_fns;
    /* registers: MR*NV accumulators; fewer rows leave room for more columns */
    int mr_full = mq_min(mv, 8);
    int nv_full = mr_full <= 4 ? 4 : 2;
    fused_args f;
    f.w = w;
    f.lda = lda;
    f.ldc = ldc;
    f.lut = mq_format_lut(w);
    float lut_f[16];
    memcpy(lut_f, &f.lut, sizeof lut_f);
    f.lut_f = lut_f;
    mq_bf16_pair_luts(lut_f, &f.lut32, &f.lut_u4);
    f.kp_end = p->K / 8;
    if (trellis)
        f.tv = mq_trellis_view_of(w);
    memset(s->acc, 0, sizeof(float) * (size_t)mv * (size_t)ldc);
    prefetch_first_rows(w, k0, k1, col0, nv);
    for (int kb = k0; kb < k1; kb += job->tile_k) {
        int kk = mq_min(job->tile_k, k1 - kb);
        mq_load_a_tile(job->A, p->K, row0, mv, kb, kk, s->a_tile, lda);
        if (trellis) /* fold the row signs into A: sum_k (a*su) * grid * ... */
            for (int r = 0; r < mv; r++)
                for (int k = 0; k < kk; k++)
                    s->a_tile[(size_t)r * lda + k] *= w->su[kb + k];
#if MQ_HAVE_BF16DOT
        if (!trellis)
            mq_split_a_bf16(s->a_tile, lda, mv, kk, (uint32_t *)s->b_tile);
#endif
        f.k_base = kb;
        f.seg = mq_min(p->group, kk);
        for (f.gs = kb; f.gs < kb + kk; f.gs += f.seg) {
            f.seg = mq_min(f.seg, kb + kk - f.gs); /* a partial last group */
            prefetch_group_params(w, f.gs / p->group + 2, col0, nv);
            for (int v0 = 0; v0 < nvec;) {
                int nvb = nv_full;
                while (nvb > nvec - v0)
                    nvb /= 2;
                f.col = col0 + 16 * v0;
                f.ncols = nv - 16 * v0;
                for (int r0 = 0; r0 < mv; r0 += mr_full) {
                    int mr = mq_min(mr_full, mv - r0);
                    f.a = s->a_tile + (size_t)r0 * lda;
                    f.apairs = (const uint32_t *)s->b_tile + (size_t)r0 * lda;
                    f.acc = s->acc + (size_t)r0 * ldc + 16 * v0;
                    fns[mr][nvb](&f);
                }
                v0 += nvb;
            }
        }
    }
    mq_store_tile(s->acc, ldc, mv, nv, out, ldo);
}
