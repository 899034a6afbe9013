/* tile_decode.h - inline decoders shared by the staged and fused tile
 * engines: each format's 16-entry value table and the extraction of one
 * 16-wide row of trellis indices from a packed 16x16 tile. */
#ifndef MQ_TILE_DECODE_H
#define MQ_TILE_DECODE_H

#include "simd.h"
#include "mq_internal.h"

/* Code -> value before scaling: E2M1 values, u4 integers 0..15, or the
 * trellis grid padded with zeros (so a table lookup never leaves it). */
MQ_INLINE v16f mq_format_lut(const mq_weights *w)
{
    v16f lut = {0};
    if (w->format == MQ_FMT_FP4) {
        for (int i = 0; i < 16; i++)
            lut[i] = mq_fp4_values[i];
    } else if (w->format == MQ_FMT_U4) {
        for (int i = 0; i < 16; i++)
            lut[i] = (float)i;
    } else {
        for (int i = 0; i < w->n_levels && i < 16; i++)
            lut[i] = w->grid[i];
    }
    return lut;
}

/* The 16-bit tables of VPERMW decoding two codes per lane: lut32 entry e
 * = bf16(lut[e % 16]) (e < 32: the fifth index bit does not matter; FP32
 * >> 16 is exact for E2M1 values and 0..15), lut_u4 entry e = bf16(e - 15)
 * (u4's q + 15 - z gives q - z exactly). */
MQ_INLINE void mq_bf16_pair_luts(const float lut_f[16], v16u *lut32, v16u *lut_u4)
{
    for (int i = 0; i < 16; i++) {
        uint32_t b0, b1;
        memcpy(&b0, &lut_f[(2 * i) % 16], 4);
        memcpy(&b1, &lut_f[(2 * i + 1) % 16], 4);
        (*lut32)[i] = (b0 >> 16) | (b1 & 0xffff0000u);
    }
    for (int i = 0; i < 16; i++) {
        float lo = (float)(2 * i - 15), hi = (float)(2 * i + 1 - 15);
        uint32_t b0, b1;
        memcpy(&b0, &lo, 4);
        memcpy(&b1, &hi, 4);
        (*lut_u4)[i] = (b0 >> 16) | (b1 & 0xffff0000u);
    }
}

MQ_INLINE v16f mq_load_f32_n(const float *p, int n)
{
    return (v16f)v16u_load_n((const uint32_t *)(const void *)p, n);
}

/* The scales of group g for columns col..col+cnt-1 (cnt <= 16; the rest of
 * the lanes zero): FP16 scales, or trellis tscale x sv. */
MQ_INLINE v16f mq_group_scales16(const mq_weights *w, int g, int col, int cnt)
{
    size_t at = (size_t)g * w->N + col;
    if (mq_format_is_trellis(w->format))
        return mq_load_f32_n(w->tscales + at, cnt) * mq_load_f32_n(w->sv + col, cnt);
    return v16h_load_n(w->scales + at, cnt);
}

typedef struct {
    const uint8_t *indices;
    int bits, tile_bytes, tiles_n;
} mq_trellis_view;

MQ_INLINE mq_trellis_view mq_trellis_view_of(const mq_weights *w)
{
    mq_trellis_view tv;
    tv.indices = w->indices;
    tv.bits = mq_format_bits(w->format);
    tv.tile_bytes = mq_trellis_tile_bytes(tv.bits);
    tv.tiles_n = (w->N + 15) / 16;
    return tv;
}

/* The 16 indices of row k, columns n0..n0+15 (n0 a multiple of 16). Row lk
 * of a tile is 16*bits bits = 2*bits whole bytes, LSB-first (little-endian
 * hosts: x86-64, Apple Silicon). */
MQ_INLINE v16u mq_trellis_row16(const mq_trellis_view *tv, int k, int n0)
{
    const uint8_t *row = tv->indices +
                         ((size_t)(k / 16) * tv->tiles_n + (size_t)(n0 / 16)) * tv->tile_bytes +
                         (size_t)(k % 16) * 2 * tv->bits;
    /* fixed-size loads (no call, never past the row's own bytes) */
    uint64_t x;
    if (tv->bits == 4) {
        memcpy(&x, row, 8);
    } else if (tv->bits == 2) {
        uint32_t x32;
        memcpy(&x32, row, 4);
        x = x32;
    } else {
        uint32_t x32;
        uint16_t x16;
        memcpy(&x32, row, 4);
        memcpy(&x16, row + 4, 2);
        x = x32 | (uint64_t)x16 << 32;
    }
    uint32_t mask = (1u << tv->bits) - 1u;
#if MQ_HAVE_AVX512
    __m512i xv = _mm512_set1_epi64((long long)x);
    long long b = tv->bits;
    __m512i sh_lo = _mm512_set_epi64(7 * b, 6 * b, 5 * b, 4 * b, 3 * b, 2 * b, b, 0);
    __m512i sh_hi = _mm512_add_epi64(sh_lo, _mm512_set1_epi64(8 * b));
    __m256i lo = _mm512_cvtepi64_epi32(_mm512_srlv_epi64(xv, sh_lo));
    __m256i hi = _mm512_cvtepi64_epi32(_mm512_srlv_epi64(xv, sh_hi));
    __m512i r = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    return (v16u)_mm512_and_si512(r, _mm512_set1_epi32((int)mask));
#else
    v16u r;
    for (int i = 0; i < 16; i++)
        r[i] = (uint32_t)(x >> (i * tv->bits)) & mask;
    return r;
#endif
}

#endif
