/* test_formats.c - the weight formats bit for bit: FP16 conversion, the E2M1
 * table, u4 magic-bias dequant at the extremes, trellis index packing
 * (3-bit indices straddling bytes), validation of bad weights at load,
 * quantize -> dequantize round trips (the lane-major layout: test_lane_layout.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mq.h"
#if defined(__F16C__)
#include <immintrin.h>
#endif

static void test_half(void)
{
    int bad = 0;
    for (unsigned h = 0; h < 65536; h++) {
        float f = mq_half_to_float((uint16_t)h);
        uint16_t back = mq_float_to_half(f);
        int is_nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
        if (!is_nan && back != h)
            bad++;
#if defined(__F16C__)
        float hw = _cvtsh_ss((unsigned short)h);
        if (!is_nan && memcmp(&hw, &f, 4) != 0)
            bad++;
#endif
    }
    CHECK(bad == 0, "every non-NaN half survives half->float->half (and matches F16C): %d bad",
          bad);
    CHECK(mq_float_to_half(1.0f + 1.0f / 2048) == 0x3c00, "1+2^-11 rounds to even 0x3c00");
    CHECK(mq_float_to_half(1.0f + 3.0f / 2048) == 0x3c02, "1+3*2^-11 rounds to even 0x3c02");
    CHECK(mq_float_to_half(70000.0f) == 0x7c00, "70000 overflows to +inf");
    CHECK(mq_float_to_half(5.96046448e-08f) == 0x0001, "2^-24 is the smallest subnormal");
#if defined(__F16C__)
    unsigned seed = 12345;
    int mism = 0;
    for (int i = 0; i < 200000; i++) {
        seed = seed * 1664525u + 1013904223u;
        uint32_t bits = seed;
        float f;
        memcpy(&f, &bits, 4);
        if (isnan(f))
            continue;
        if (mq_float_to_half(f) != _cvtss_sh(f, 0))
            mism++;
    }
    CHECK(mism == 0, "float->half matches F16C round-to-nearest on 200000 random floats: %d "
                     "mismatches", mism);
#endif
}

static void test_fp4_table(void)
{
    /* the seed's table: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (-0 too) */
    static const uint16_t expected[16] = {
        0x0000, 0x3800, 0x3c00, 0x3e00, 0x4000, 0x4200, 0x4400, 0x4600,
        0x8000, 0xb800, 0xbc00, 0xbe00, 0xc000, 0xc200, 0xc400, 0xc600,
    };
    for (unsigned c = 0; c < 16; c++)
        CHECK(mq_fp4_to_half_bits(c) == expected[c], "fp4 code %u -> half 0x%04x, got 0x%04x", c,
              expected[c], mq_fp4_to_half_bits(c));
    CHECK(mq_fp4_to_half_bits(8) == 0x8000, "code 8 is -0 (0x8000)");
    CHECK(mq_half_to_float(mq_fp4_to_half_bits(1)) == 0.5f, "code 1 is the 0.5 subnormal");
}

static void test_u4_magic(void)
{
    /* scales at the extremes: smallest subnormal, smallest normal, 1, largest
     * finite, and negative; zero points 0 and 15 and between */
    static const uint16_t scales[] = {0x0001, 0x0400, 0x3c00, 0x7bff, 0xfbff, 0x8001};
    int bad = 0;
    for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++)
        for (unsigned z = 0; z < 16; z++)
            for (unsigned q = 0; q < 16; q++) {
                double exact = ((double)q - (double)z) * (double)mq_half_to_float(scales[s]);
                float got = mq_u4_dequant_magic(q, z, scales[s]);
                if ((double)got != exact)
                    bad++;
            }
    CHECK(bad == 0, "magic-bias u4 dequant equals (q-z)*s exactly for all q, z and extreme "
                    "scales: %d mismatches", bad);
    CHECK(mq_u4_dequant_magic(0, 15, 0x7bff) == -15.0f * 65504.0f,
          "q=0, z=15, s=65504 gives -982560 (finite in FP32)");
}

static void test_trellis_packing(void)
{
    uint8_t tile[96];
    memset(tile, 0, sizeof tile);
    for (int i = 0; i < 256; i++)
        mq_trellis_set_index(tile, 3, i, (unsigned)(i * 5 + 3) & 7u);
    int bad = 0;
    for (int i = 0; i < 256; i++)
        if (mq_trellis_get_index(tile, 3, i) != ((unsigned)(i * 5 + 3) & 7u))
            bad++;
    CHECK(bad == 0, "3-bit set/get round trip over the 256 indices of a tile: %d bad", bad);
    /* index 2 sits at bits 6..8: low two bits in byte 0 (bits 6,7), high bit in byte 1 */
    memset(tile, 0, sizeof tile);
    mq_trellis_set_index(tile, 3, 2, 5); /* 0b101 */
    CHECK(tile[0] == 0x40 && tile[1] == 0x01,
          "3-bit index 2 = 5 straddles bytes: expected 0x40 0x01, got 0x%02x 0x%02x", tile[0],
          tile[1]);
    CHECK(mq_trellis_get_index(tile, 3, 2) == 5, "straddling index reads back 5");
    /* index 255 ends exactly at the last byte */
    mq_trellis_set_index(tile, 3, 255, 7);
    CHECK(tile[95] == 0xe0, "3-bit index 255 occupies the top 3 bits of byte 95: 0x%02x",
          tile[95]);
    CHECK(mq_trellis_tile_bytes(2) == 64 && mq_trellis_tile_bytes(3) == 96 &&
              mq_trellis_tile_bytes(4) == 128,
          "tile bytes 64/96/128");
    uint8_t t2[64] = {0};
    mq_trellis_set_index(t2, 2, 1, 3);
    CHECK(t2[0] == 0x0c, "2-bit LSB-first: index 1 at bits 2-3, got 0x%02x", t2[0]);
    uint8_t t4[128] = {0};
    mq_trellis_set_index(t4, 4, 1, 9);
    CHECK(t4[0] == 0x90, "4-bit LSB-first: index 1 in the high nibble, got 0x%02x", t4[0]);
}

static void test_validation(void)
{
    mq_weights w;
    mq_error err;
    CHECK(mq_weights_alloc(&w, MQ_FMT_TRELLIS3, 32, 20, 32, &err) == MQ_OK, "alloc trellis3");
    mq_trellis_default_grid(3, w.grid);
    for (int i = 0; i < 20; i++) /* one group (K=32) x 20 columns */
        w.tscales[i] = 1.0f;
    CHECK(mq_weights_check(&w, &err) == MQ_OK, "fresh trellis weights are valid: %s", err.msg);
    w.n_levels = 5; /* a 5-level grid: index 5..7 are outside */
    int tiles_n = 2, tb = 96;
    /* k=17, n=18 lives in tile (1,1) at idx_in_tile 1*16+2 */
    mq_trellis_set_index(w.indices + (size_t)(1 * tiles_n + 1) * tb, 3, 18, 6);
    CHECK(mq_weights_check(&w, &err) == MQ_E_WEIGHTS && strstr(err.msg, "k=17, n=18"),
          "index 6 in a 5-level grid is refused at load, naming k=17, n=18: got '%s'", err.msg);
    mq_trellis_set_index(w.indices + (size_t)(1 * tiles_n + 1) * tb, 3, 18, 4);
    CHECK(mq_weights_check(&w, &err) == MQ_OK, "index 4 < 5 levels is fine: %s", err.msg);
    w.su[3] = 0.5f;
    CHECK(mq_weights_check(&w, &err) == MQ_E_WEIGHTS && strstr(err.msg, "su[3]"),
          "a sign of 0.5 is refused: '%s'", err.msg);
    mq_weights_free(&w);

    CHECK(mq_weights_alloc(&w, MQ_FMT_U4, 64, 8, 32, &err) == MQ_OK, "alloc u4");
    w.zeros[5] = 16;
    CHECK(mq_weights_check(&w, &err) == MQ_E_WEIGHTS && strstr(err.msg, "zero point 16"),
          "zero point 16 is refused: '%s'", err.msg);
    w.zeros[5] = 15;
    w.scales[2] = 0x7c00;
    CHECK(mq_weights_check(&w, &err) == MQ_E_WEIGHTS && strstr(err.msg, "inf"),
          "an infinite scale is refused: '%s'", err.msg);
    mq_weights_free(&w);

    CHECK(mq_weights_alloc(&w, MQ_FMT_FP4, 100, 8, 32, &err) == MQ_E_SHAPE &&
              strstr(err.msg, "not a multiple of the group size"),
          "K=100 with group 32 is refused: '%s'", err.msg);
    CHECK(mq_weights_alloc(&w, MQ_FMT_FP4, 96, 8, 48, &err) == MQ_E_SHAPE,
          "group 48 is refused: '%s'", err.msg);
    mq_format f;
    CHECK(mq_format_from_name("int3", &f, &err) == MQ_E_ARG && strstr(err.msg, "trellis4"),
          "unknown format lists the known ones: '%s'", err.msg);
}

static void test_round_trip(void)
{
    int K = 128, N = 40;
    float *W = malloc(sizeof(float) * K * N);
    double *D = malloc(sizeof(double) * K * N);
    unsigned seed = 7;
    for (int i = 0; i < K * N; i++) {
        seed = seed * 1103515245u + 12345u;
        W[i] = ((float)((seed >> 8) & 0xffff) / 65535.0f - 0.5f) * 2.0f;
    }
    for (int f = 0; f < MQ_FMT_COUNT; f++) {
        mq_weights w;
        mq_error err;
        CHECK(mq_quantize((mq_format)f, W, K, N, 32, NULL, &w, &err) == MQ_OK,
              "quantize %s: %s", mq_format_name((mq_format)f), err.msg);
        CHECK(mq_dequantize(&w, D, &err) == MQ_OK, "dequantize %s", mq_format_name((mq_format)f));
        /* worst case: half a quantization step of the group: range/(2*(levels-1)) */
        int levels = f == MQ_FMT_FP4 ? 16 : 1 << mq_format_bits((mq_format)f);
        double step = f == MQ_FMT_FP4 ? 1.0 / 6.0 : 2.0 / (levels - 1);
        double worst = 0;
        for (int i = 0; i < K * N; i++)
            worst = fmax(worst, fabs(D[i] - W[i]));
        /* fp4's widest gap is 4..6 (2 units of scale absmax/6): half is 1/6 of absmax */
        double bound = (f == MQ_FMT_FP4 ? 1.0 / 6.0 : step / 2.0) * 1.0 * 1.01 + 1e-3;
        CHECK(worst <= bound, "%s round trip error %.4f within half a level step %.4f",
              mq_format_name((mq_format)f), worst, bound);
        mq_weights_free(&w);
    }
    free(W);
    free(D);
}


int main(void)
{
    test_half();
    test_fp4_table();
    test_u4_magic();
    test_trellis_packing();
    test_validation();
    test_round_trip();
    return check_done("formats");
}
