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
