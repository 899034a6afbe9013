/* tile_staged.c - the staged tile engine (marlin_gemm_fp4, the striped
 * kernel, MLX split-K): per K step, the A tile and the whole dequantized B
 * tile are written to threadgroup memory (here: per-worker FP32 buffers),
 * then a register-blocked micro-kernel multiplies them. */
#include <string.h>

#include "simd.h"
#include "mq_internal.h"

/* acc[MR rows][ncols] += a[MR][kk] * b[kk][ncols]; ncols a multiple of 16,
 * kk a multiple of 8. Two 16-lane vectors per row; with few rows, SETS
 * accumulator sets take k in turn, so enough independent FMA chains cover
 * the FMA latency (a GPU hides it with other threads). */
MQ_INLINE void micro_kernel(const int MR, const float *a, int lda, const float *b, int ldb,
                            int kk, float *c, int ldc, int ncols)
{
    const int SETS = MR <= 2 ? 4 : MR <= 4 ? 2 : 1;
    int j = 0;
    for (; j + 32 <= ncols; j += 32) {
        v16f acc[8][2];
        for (int r = 0; r < MR; r++) {
            acc[r][0] = v16f_load(c + (size_t)r * ldc + j);
            acc[r][1] = v16f_load(c + (size_t)r * ldc + j + 16);
        }
        for (int r = MR; r < SETS * MR; r++)
            acc[r][0] = acc[r][1] = v16f_splat(0);
        for (int k = 0; k < kk; k += SETS)
            for (int s = 0; s < SETS; s++) {
                v16f b0 = v16f_load(b + (size_t)(k + s) * ldb + j);
                v16f b1 = v16f_load(b + (size_t)(k + s) * ldb + j + 16);
                for (int r = 0; r < MR; r++) {
                    float ar = a[(size_t)r * lda + k + s];
                    acc[s * MR + r][0] += ar * b0;
                    acc[s * MR + r][1] += ar * b1;
                }
            }
        for (int s = 1; s < SETS; s++)
            for (int r = 0; r < MR; r++) {
                acc[r][0] += acc[s * MR + r][0];
                acc[r][1] += acc[s * MR + r][1];
            }
        for (int r = 0; r < MR; r++) {
            v16f_store(c + (size_t)r * ldc + j, acc[r][0]);
            v16f_store(c + (size_t)r * ldc + j + 16, acc[r][1]);
        }
    }
    for (; j < ncols; j += 16) {
        v16f acc[8];
        for (int r = 0; r < MR; r++)
            acc[r] = v16f_load(c + (size_t)r * ldc + j);
        for (int r = MR; r < SETS * MR; r++)
            acc[r] = v16f_splat(0);
        for (int k = 0; k < kk; k += SETS)
            for (int s = 0; s < SETS; s++) {
                v16f b0 = v16f_load(b + (size_t)(k + s) * ldb + j);
                for (int r = 0; r < MR; r++)
                    acc[s * MR + r] += a[(size_t)r * lda + k + s] * b0;
            }
        for (int s = 1; s < SETS; s++)
            for (int r = 0; r < MR; r++)
                acc[r] += acc[s * MR + r];
        for (int r = 0; r < MR; r++)
            v16f_store(c + (size_t)r * ldc + j, acc[r]);
    }
}

static void multiply_tile(const float *a, int lda, const float *b, int ldb, int kk, float *c,
                          int ldc, int mv)
{
    int r = 0;
    for (; r + 8 <= mv; r += 8)
        micro_kernel(8, a + (size_t)r * lda, lda, b, ldb, kk, c + (size_t)r * ldc, ldc, ldb);
    const float *ar = a + (size_t)r * lda;
    float *cr = c + (size_t)r * ldc;
    switch (mv - r) {
    case 7: micro_kernel(7, ar, lda, b, ldb, kk, cr, ldc, ldb); break;
    case 6: micro_kernel(6, ar, lda, b, ldb, kk, cr, ldc, ldb); break;
    case 5: micro_kernel(5, ar, lda, b, ldb, kk, cr, ldc, ldb); break;
    case 4: micro_kernel(4, ar, lda, b, ldb, kk, cr, ldc, ldb); break;
    case 3: micro_kernel(3, ar, lda, b, ldb, kk, cr, ldc, ldb); break;
    case 2: micro_kernel(2, ar, lda, b, ldb, kk, cr, ldc, ldb); break;
    case 1: micro_kernel(1, ar, lda, b, ldb, kk, cr, ldc, ldb); break;
    default: break;
    }
}

void mq_tile_staged(const mq_tile_job *job, mq_scratch *s, int row0, int col0, int k0, int k1,
                    float *out, int ldo)
{
    const mq_problem *p = job->p;
    int mv = mq_min(job->tile_m, p->M - row0), nv = mq_min(job->tile_n, p->N - col0);
    int ldc = (nv + 15) & ~15, lda = job->tile_k;
    memset(s->acc, 0, sizeof(float) * (size_t)mv * (size_t)ldc);
    for (int kb = k0; kb < k1; kb += job->tile_k) {
        int kk = mq_min(job->tile_k, k1 - kb);
        mq_load_a_tile(job->A, p->K, row0, mv, kb, kk, s->a_tile, lda);
        mq_dequant_b_tile(job->w, kb, kk, col0, nv, s->b_tile, ldc);
        multiply_tile(s->a_tile, lda, s->b_tile, ldc, kk, s->acc, ldc, mv);
    }
    mq_store_tile(s->acc, ldc, mv, nv, out, ldo);
}
