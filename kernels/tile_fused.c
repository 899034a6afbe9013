/* tile_fused.c - the fused tile engine (marlin_gemm_fused_fp4/_u4, trellis
 * prefill and decode): B is never staged as a tile. Each 16-column slice of
 * packed B is decoded in registers (the CPU analogue of the per-simdgroup
 * 8x8 staging) and used at once by every row of the A tile. Scales are
 * applied once per group: sum_k a*q*s = s * sum_k a*q, and for u4
 * sum_k a*(q-z)*s = s * (sum_k a*q - z * sum_k a). */
#include "simd.h"
#include "tile_decode.h"
#include "mq_internal.h"

typedef struct {
    const mq_weights *w;
    const float *a;      /* A tile rows (FP32), row stride lda, column 0 = k_base */
    int lda, k_base;
    int gs, seg;         /* the group segment [gs, gs+seg) */
    int col;             /* absolute first column of this block */
    int ncols;           /* valid columns from col (may be < 16*NV at the edge) */
    float *acc;          /* accumulators at (row block, col block), stride ldc */
    int ldc;
    v16f lut;
    mq_trellis_view tv;
} fused_args;

/* Columns valid in vector v of a block. */
MQ_INLINE int lane_count(const fused_args *f, int v) { return mq_min(16, f->ncols - 16 * v); }

MQ_INLINE void apply_scales(const int MR, const int NV, const fused_args *f,
                            v16f partial[8][4], const float *asum)
{
    const mq_weights *w = f->w;
    size_t g = (size_t)(f->gs / w->group) * w->N + f->col;
    for (int v = 0; v < NV; v++) {
        int cnt = lane_count(f, v);
        v16f sc, z = v16f_splat(0);
        if (mq_format_is_trellis(w->format)) {
            sc = mq_load_f32_n(w->tscales + g + 16 * v, cnt) *
                 mq_load_f32_n(w->sv + f->col + 16 * v, cnt);
        } else {
            sc = v16h_load_n(w->scales + g + 16 * v, cnt);
            if (w->format == MQ_FMT_U4)
                z = v16b_load_n(w->zeros + g + 16 * v, cnt);
        }
        for (int r = 0; r < MR; r++) {
            float *c = f->acc + (size_t)r * f->ldc + 16 * v;
            v16f_store(c, v16f_load(c) + (partial[r][v] - z * asum[r]) * sc);
        }
    }
}

/* fp4 / u4: one packed word holds 8 consecutive k of a column. */
MQ_INLINE void block_q4(const int MR, const int NV, const fused_args *f)
{
    const mq_weights *w = f->w;
    v16f partial[8][4];
    float asum[8] = {0};
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++)
            partial[r][v] = v16f_splat(0);
    for (int kp = f->gs / 8; kp < (f->gs + f->seg) / 8; kp++) {
        const uint32_t *pk = w->packed + (size_t)kp * w->N + f->col;
        v16u words[4];
        for (int v = 0; v < NV; v++)
            words[v] = v16u_load_n(pk + 16 * v, lane_count(f, v));
        const float *a = f->a + (kp * 8 - f->k_base);
        for (int j = 0; j < 8; j++) {
            v16f d[4];
            for (int v = 0; v < NV; v++)
                d[v] = v16f_lut16(f->lut, words[v] >> (uint32_t)(4 * j));
            for (int r = 0; r < MR; r++) {
                float ar = a[(size_t)r * f->lda + j];
                for (int v = 0; v < NV; v++)
                    partial[r][v] += ar * d[v];
            }
        }
    }
    if (w->format == MQ_FMT_U4)
        for (int r = 0; r < MR; r++)
            for (int k = f->gs; k < f->gs + f->seg; k++)
                asum[r] += f->a[(size_t)r * f->lda + (k - f->k_base)];
    apply_scales(MR, NV, f, partial, asum);
}

/* trellis: one 16-wide row of indices per k; A rows already carry su[k]. */
MQ_INLINE void block_trellis(const int MR, const int NV, const fused_args *f)
{
    v16f partial[8][4];
    const float asum[8] = {0};
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
    apply_scales(MR, NV, f, partial, asum);
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

void mq_tile_fused(const mq_tile_job *job, mq_scratch *s, int row0, int col0, int k0, int k1,
                   float *out, int ldo)
{
    const mq_problem *p = job->p;
    const mq_weights *w = job->w;
    int trellis = mq_format_is_trellis(w->format);
    int mv = mq_min(job->tile_m, p->M - row0), nv = mq_min(job->tile_n, p->N - col0);
    int ldc = (nv + 15) & ~15, lda = job->tile_k, nvec = ldc / 16;
    const block_fn(*fns)[5] = trellis ? tr_fns : q4_fns;
    /* registers: MR*NV accumulators; fewer rows leave room for more columns */
    int mr_full = mq_min(mv, 8), nv_full = mr_full <= 4 ? 4 : 2;
    fused_args f;
    f.w = w;
    f.lda = lda;
    f.ldc = ldc;
    f.lut = mq_format_lut(w);
    if (trellis)
        f.tv = mq_trellis_view_of(w);
    for (int r = 0; r < mv; r++)
        for (int c = 0; c < ldc; c++)
            s->acc[(size_t)r * ldc + c] = 0.0f;
    for (int kb = k0; kb < k1; kb += job->tile_k) {
        int kk = mq_min(job->tile_k, k1 - kb);
        mq_load_a_tile(job->A, p->K, row0, mv, kb, kk, s->a_tile, lda);
        if (trellis) /* fold the row signs into A: sum_k (a*su) * grid * ... */
            for (int r = 0; r < mv; r++)
                for (int k = 0; k < kk; k++)
                    s->a_tile[(size_t)r * lda + k] *= w->su[kb + k];
        f.k_base = kb;
        f.seg = mq_min(p->group, kk);
        for (f.gs = kb; f.gs < kb + kk; f.gs += f.seg) {
            for (int v0 = 0; v0 < nvec;) {
                int nvb = nvec - v0 >= nv_full ? nv_full : 1;
                f.col = col0 + 16 * v0;
                f.ncols = nv - 16 * v0;
                for (int r0 = 0; r0 < mv; r0 += mr_full) {
                    int mr = mq_min(mr_full, mv - r0);
                    f.a = s->a_tile + (size_t)r0 * lda;
                    f.acc = s->acc + (size_t)r0 * ldc + 16 * v0;
                    fns[mr][nvb](&f);
                }
                v0 += nvb;
            }
        }
    }
    for (int r = 0; r < mv; r++)
        for (int c = 0; c < nv; c++)
            out[(size_t)r * ldo + c] = s->acc[(size_t)r * ldc + c];
}
