/* simd.h - the small vector vocabulary of the CPU model: 16-lane FP32
 * vectors through GCC/Clang vector extensions (AVX-512 registers when the
 * build targets them, narrower registers otherwise), plus the few operations
 * that need intrinsics (LUT permute, FP16 conversion, masked loads) with a
 * portable fallback for each. */
#ifndef MQ_SIMD_H
#define MQ_SIMD_H

#include <stdint.h>
#include <string.h>

#include "mq.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define MQ_HAVE_AVX512 1
#else
#define MQ_HAVE_AVX512 0
#endif

#define MQ_INLINE static inline __attribute__((always_inline))

typedef float v16f __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64)));
/* unaligned views of memory */
typedef float v16f_u __attribute__((vector_size(64), aligned(4)));
typedef uint32_t v16u_u __attribute__((vector_size(64), aligned(4)));

MQ_INLINE v16f v16f_load(const float *p) { return *(const v16f_u *)p; }
MQ_INLINE void v16f_store(float *p, v16f v) { *(v16f_u *)p = v; }
MQ_INLINE v16f v16f_splat(float x) { return (v16f){0} + x; }

/* Load n (1..16) uint32 from p; lanes n..15 are zero. */
MQ_INLINE v16u v16u_load_n(const uint32_t *p, int n)
{
#if MQ_HAVE_AVX512
    __m512i v = n >= 16 ? _mm512_loadu_si512(p)
                        : _mm512_maskz_loadu_epi32((__mmask16)((1u << n) - 1u), p);
    return (v16u)v;
#else
    v16u v = {0};
    if (n >= 16)
        return *(const v16u_u *)p;
    memcpy(&v, p, (size_t)n * 4);
    return v;
#endif
}

/* Load n (1..16) FP16 values from p as FP32; lanes n..15 are zero. */
MQ_INLINE v16f v16h_load_n(const uint16_t *p, int n)
{
#if MQ_HAVE_AVX512
    __m256i h = n >= 16 ? _mm256_loadu_si256((const __m256i *)p)
                        : _mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1u), p);
    return (v16f)_mm512_cvtph_ps(h);
#else
    v16f v = {0};
    for (int i = 0; i < n && i < 16; i++)
        v[i] = mq_half_to_float(p[i]);
    return v;
#endif
}

/* Load n (1..16) uint8 from p as FP32; lanes n..15 are zero. */
MQ_INLINE v16f v16b_load_n(const uint8_t *p, int n)
{
#if MQ_HAVE_AVX512
    __m128i b = n >= 16 ? _mm_loadu_si128((const __m128i *)p)
                        : _mm_maskz_loadu_epi8((__mmask16)((1u << n) - 1u), p);
    return (v16f)_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b));
#else
    v16f v = {0};
    for (int i = 0; i < n && i < 16; i++)
        v[i] = (float)p[i];
    return v;
#endif
}

/* lut[idx & 15] per lane. */
MQ_INLINE v16f v16f_lut16(v16f lut, v16u idx)
{
#if MQ_HAVE_AVX512
    return (v16f)_mm512_permutexvar_ps((__m512i)idx, (__m512)lut);
#else
    v16f r;
    for (int i = 0; i < 16; i++)
        r[i] = lut[idx[i] & 15u];
    return r;
#endif
}

/* Two 16-lane lookups from one permute of 16-bit lanes: lut32 holds the
 * top halves (bf16 bits) of 16 FP32 values that bf16 represents exactly,
 * twice over (entries i and i+16), so the fifth index bit does not matter.
 * t's low half-lanes index into lo, its high half-lanes into hi; the FP32
 * results are exact. lut[16] is the same table as FP32 for the fallback. */
MQ_INLINE void v16f_lut16_pair(v16u lut32, const float *lut, v16u t, v16f *lo, v16f *hi)
{
#if MQ_HAVE_AVX512
    (void)lut;
    __m512i r = _mm512_permutexvar_epi16((__m512i)t, (__m512i)lut32);
    *lo = (v16f)_mm512_slli_epi32(r, 16);
    *hi = (v16f)_mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
#else
    (void)lut32;
    for (int i = 0; i < 16; i++) {
        (*lo)[i] = lut[t[i] & 15u];
        (*hi)[i] = lut[(t[i] >> 16) & 15u];
    }
#endif
}

#if MQ_HAVE_AVX512 && defined(__AVX512BF16__)
#define MQ_HAVE_BF16DOT 1
/* acc += lo(x)*lo(y) + hi(x)*hi(y) per 32-bit lane of bf16 pairs, each step
 * an FMA rounded in FP32 (VDPBF16PS). */
MQ_INLINE v16f v16f_dot_bf16(v16f acc, v16u x, v16u y)
{
    return (v16f)_mm512_dpbf16_ps((__m512)acc, (__m512bh)(__m512i)x, (__m512bh)(__m512i)y);
}
/* The raw 16-bit permute of v16f_lut16_pair: bf16 pairs (lut[t_lo], lut[t_hi]). */
MQ_INLINE v16u v16u_lut16_pair_bf16(v16u lut32, v16u t)
{
    return (v16u)_mm512_permutexvar_epi16((__m512i)t, (__m512i)lut32);
}
#else
#define MQ_HAVE_BF16DOT 0
#endif

/* Store the first n (1..16) lanes. */
MQ_INLINE void v16f_store_n(float *p, v16f v, int n)
{
    if (n >= 16)
        v16f_store(p, v);
    else
        memcpy(p, &v, (size_t)n * 4);
}

#endif
