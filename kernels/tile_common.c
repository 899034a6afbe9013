/* tile_common.c - the tile steps every variant shares: the A tile load
 * (FP16 -> FP32 "threadgroup memory") and the dequantization of a B tile of
 * any format into an FP32 staging buffer, and the store of a finished tile. */
#include <string.h>

#include "simd.h"
#include "tile_decode.h"
#include "mq_internal.h"

void mq_load_a_tile(const uint16_t *A, int K, int row0, int mv, int k0, int kk, float *out,
                    int lda_out)
{
    for (int r = 0; r < mv; r++) {
        const uint16_t *src = A + (size_t)(row0 + r) * K + k0;
        float *dst = out + (size_t)r * lda_out;
        for (int k = 0; k < kk; k += 16)
            v16f_store_n(dst + k, v16h_load_n(src + k, mq_min(16, kk - k)), kk - k);
    }
}

void mq_store_tile(const float *acc, int ldc, int mv, int nv, float *out, int ldo)
{
    for (int r = 0; r < mv; r++)
        memcpy(out + (size_t)r * ldo, acc + (size_t)r * ldc, sizeof(float) * (size_t)nv);
}

void mq_dequant_b_tile(const mq_weights *w, int k0, int kk, int col0, int nv, float *out,
                       int ldb)
{
    int N = w->N;
    v16f lut = mq_format_lut(w);
    if (!mq_format_is_trellis(w->format)) {
        for (int kp = k0 / 8; kp < (k0 + kk) / 8; kp++) {
            size_t g = (size_t)(kp * 8 / w->group) * N + col0;
            const uint32_t *pk = w->packed + (size_t)kp * N + col0;
            float *dst = out + (size_t)(kp * 8 - k0) * ldb;
            if (kp + PREFETCH_ROWS < w->K / 8)
                for (int n = 0; n < nv; n += 16)
                    MQ_PREFETCH_L2(pk + (size_t)PREFETCH_ROWS * N + n);
            for (int n = 0; n < ldb; n += 16) {
                int cnt = mq_min(16, nv - n);
                if (cnt <= 0) {
                    for (int j = 0; j < 8; j++)
                        v16f_store(dst + (size_t)j * ldb + n, v16f_splat(0));
                    continue;
                }
                v16u words = v16u_load_n(pk + n, cnt);
                v16f sc = v16h_load_n(w->scales + g + n, cnt);
                v16f z = w->format == MQ_FMT_U4 ? v16b_load_n(w->zeros + g + n, cnt)
                                                : v16f_splat(0);
                for (int j = 0; j < 8; j++) {
                    v16f v = v16f_lut16(lut, words >> (uint32_t)(4 * j));
                    v16f_store(dst + (size_t)j * ldb + n, (v - z) * sc);
                }
            }
        }
        return;
    }
    mq_trellis_view tv = mq_trellis_view_of(w);
    for (int k = k0; k < k0 + kk; k++) {
        const float *ts = w->tscales + (size_t)(k / w->group) * N + col0;
        float su = w->su[k];
        float *dst = out + (size_t)(k - k0) * ldb;
        for (int n = 0; n < ldb; n += 16) {
            int cnt = mq_min(16, nv - n);
            if (cnt <= 0) {
                v16f_store(dst + n, v16f_splat(0));
                continue;
            }
            v16f colscale = mq_load_f32_n(ts + n, cnt) * mq_load_f32_n(w->sv + col0 + n, cnt);
            v16f v = v16f_lut16(lut, mq_trellis_row16(&tv, k, col0 + n));
            v16f_store(dst + n, v * colscale * su);
        }
    }
}

/* A rows as bf16 pairs for VDPBF16PS: per 8 k, the pairs (k+j, k+j+4) of
 * the high parts for j = 0..3, then of the low parts. */
void mq_split_a_bf16(const float *a, int lda, int mv, int kk, uint32_t *out)
{
    for (int r = 0; r < mv; r++)
        for (int k8 = 0; k8 < kk; k8 += 8) {
            const float *src = a + (size_t)r * lda + k8;
            uint32_t *dst = out + (size_t)r * lda + k8;
            for (int j = 0; j < 4; j++) {
                uint32_t b0, b4, l0, l4;
                float hi0, hi4, lo0, lo4;
                memcpy(&b0, &src[j], 4);
                memcpy(&b4, &src[j + 4], 4);
                b0 &= 0xffff0000u; /* truncation keeps 8 of FP16's 11 bits */
                b4 &= 0xffff0000u;
                memcpy(&hi0, &b0, 4);
                memcpy(&hi4, &b4, 4);
                lo0 = src[j] - hi0; /* exact: at most 3 significant bits */
                lo4 = src[j + 4] - hi4;
                memcpy(&l0, &lo0, 4);
                memcpy(&l4, &lo4, 4);
                dst[j] = (b0 >> 16) | b4;
                dst[4 + j] = (l0 >> 16) | (l4 & 0xffff0000u);
            }
        }
}
