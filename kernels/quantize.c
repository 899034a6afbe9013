/* quantize.c - quantizers from float weights into each format (so tests and
 * benchmarks run on realistic data), and exact dequantization to float64. */
#include <math.h>
#include <stdlib.h>

#include "mq_internal.h"

void mq_trellis_default_grid(int bits, float *grid)
{
    int L = 1 << bits;
    for (int i = 0; i < L; i++)
        grid[i] = (float)(2 * i + 1 - L) / (float)(L - 1);
}

static uint16_t half_scale(double s)
{
    if (s > 65504.0)
        s = 65504.0;
    return mq_float_to_half((float)s);
}

/* The E2M1 code nearest to x (ties to the smaller magnitude; zero is +0):
 * the magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6 split at their midpoints. */
static unsigned nearest_fp4(double x)
{
    static const double mid[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
    double a = fabs(x);
    unsigned m = 0;
    while (m < 7 && a > mid[m])
        m++;
    return m && x < 0 ? m | 8u : m;
}

static void quantize_fp4(const float *W, mq_weights *w)
{
    int K = w->K, N = w->N, g = w->group;
    for (int gi = 0; gi < K / g; gi++)
        for (int n = 0; n < N; n++) {
            double amax = 0;
            for (int k = gi * g; k < (gi + 1) * g; k++)
                amax = fmax(amax, fabs((double)W[(size_t)k * N + n]));
            uint16_t sh = half_scale(amax / 6.0);
            double s = mq_half_to_float(sh);
            w->scales[(size_t)gi * N + n] = sh;
            for (int k = gi * g; k < (gi + 1) * g; k++) {
                unsigned code = s > 0 ? nearest_fp4(W[(size_t)k * N + n] / s) : 0;
                w->packed[(size_t)(k / 8) * N + n] |= code << (4 * (k % 8));
            }
        }
}

static void quantize_u4(const float *W, mq_weights *w)
{
    int K = w->K, N = w->N, g = w->group;
    for (int gi = 0; gi < K / g; gi++)
        for (int n = 0; n < N; n++) {
            double lo = 0, hi = 0; /* the range always holds zero */
            for (int k = gi * g; k < (gi + 1) * g; k++) {
                double x = W[(size_t)k * N + n];
                lo = fmin(lo, x);
                hi = fmax(hi, x);
            }
            double range = hi - lo;
            uint16_t sh = half_scale(range > 0 ? range / 15.0 : 1.0);
            double s = mq_half_to_float(sh);
            if (s == 0) { /* range below the smallest half: keep exact zeros */
                sh = mq_float_to_half(1.0f);
                s = 1.0;
            }
            double z = fmin(15.0, fmax(0.0, nearbyint(-lo / s)));
            w->scales[(size_t)gi * N + n] = sh;
            w->zeros[(size_t)gi * N + n] = (uint8_t)z;
            for (int k = gi * g; k < (gi + 1) * g; k++) {
                double q = fmin(15.0, fmax(0.0, nearbyint(W[(size_t)k * N + n] / s + z)));
                w->packed[(size_t)(k / 8) * N + n] |= (uint32_t)q << (4 * (k % 8));
            }
        }
}

static void quantize_trellis(const float *W, mq_weights *w)
{
    int K = w->K, N = w->N, g = w->group, bits = mq_format_bits(w->format);
    int tiles_n = mq_cdiv(N, MQ_TRELLIS_TILE), tb = mq_trellis_tile_bytes(bits);
    double gmax = 0;
    for (int i = 0; i < w->n_levels; i++)
        gmax = fmax(gmax, fabs((double)w->grid[i]));
    for (int gi = 0; gi < mq_group_count(K, g); gi++)
        for (int n = 0; n < N; n++) {
            double amax = 0;
            int kend = (gi + 1) * g < K ? (gi + 1) * g : K; /* a partial last group */
            for (int k = gi * g; k < kend; k++)
                amax = fmax(amax, fabs((double)W[(size_t)k * N + n]));
            float s = gmax > 0 ? (float)(amax / gmax) : 0.0f;
            w->tscales[(size_t)gi * N + n] = s;
            for (int k = gi * g; k < kend; k++) {
                double x = s > 0 ? W[(size_t)k * N + n] * w->su[k] * w->sv[n] / s : 0.0;
                unsigned best = 0;
                double bd = INFINITY;
                for (int i = 0; i < w->n_levels; i++) {
                    double d = fabs(x - (double)w->grid[i]);
                    if (d < bd) {
                        bd = d;
                        best = (unsigned)i;
                    }
                }
                uint8_t *tile = w->indices +
                    ((size_t)(k / MQ_TRELLIS_TILE) * tiles_n + n / MQ_TRELLIS_TILE) * tb;
                mq_trellis_set_index(tile, bits,
                                     (k % MQ_TRELLIS_TILE) * MQ_TRELLIS_TILE + n % MQ_TRELLIS_TILE,
                                     best);
            }
        }
}

mq_status mq_quantize(mq_format f, const float *W, int K, int N, int group,
                      const mq_trellis_opts *topts, mq_weights *out, mq_error *err)
{
    if (!W || !out)
        return mq_fail(err, MQ_E_ARG, "mq_quantize: null weights");
    mq_status st = mq_weights_alloc(out, f, K, N, group, err);
    if (st)
        return st;
    if (f == MQ_FMT_FP4) {
        quantize_fp4(W, out);
    } else if (f == MQ_FMT_U4) {
        quantize_u4(W, out);
    } else {
        int bits = mq_format_bits(f);
        if (topts && topts->grid) {
            if (topts->n_levels < 1 || topts->n_levels > (1 << bits)) {
                mq_weights_free(out);
                return mq_fail(err, MQ_E_ARG, "trellis grid of %d levels for %d bits",
                               topts->n_levels, bits);
            }
            out->n_levels = topts->n_levels;
            for (int i = 0; i < out->n_levels; i++)
                out->grid[i] = topts->grid[i];
        } else {
            mq_trellis_default_grid(bits, out->grid);
        }
        for (int k = 0; topts && topts->su && k < K; k++)
            out->su[k] = topts->su[k];
        for (int n = 0; topts && topts->sv && n < N; n++)
            out->sv[n] = topts->sv[n];
        quantize_trellis(W, out);
    }
    st = mq_weights_check(out, err);
    if (st)
        mq_weights_free(out);
    return st;
}

/* The scales of group g as float64, converted once per group rather than
 * once per element (fp4/u4 keep FP16 scales). */
static void group_scales(const mq_weights *w, int g, double *out)
{
    size_t gi = (size_t)g * w->N;
    for (int n = 0; n < w->N; n++)
        out[n] = mq_format_is_trellis(w->format) ? (double)w->tscales[gi + n]
                                                 : (double)mq_half_to_float(w->scales[gi + n]);
}

/* Row k of the dequantized matrix, exactly, in float64; s holds the scales
 * of k's group (group_scales). */
static void dequant_row(const mq_weights *w, int k, const double *s, double *row)
{
    int N = w->N;
    size_t gi = (size_t)(k / w->group) * N;
    if (w->format == MQ_FMT_FP4 || w->format == MQ_FMT_U4) {
        const uint32_t *pk = w->packed + (size_t)(k / 8) * N;
        int sh = 4 * (k % 8);
        for (int n = 0; n < N; n++) {
            unsigned code = (pk[n] >> sh) & 0xfu;
            row[n] = w->format == MQ_FMT_FP4
                         ? (double)mq_fp4_values[code] * s[n]
                         : ((double)code - (double)w->zeros[gi + n]) * s[n];
        }
        return;
    }
    int bits = mq_format_bits(w->format), tb = mq_trellis_tile_bytes(bits);
    int tiles_n = mq_cdiv(N, MQ_TRELLIS_TILE);
    const uint8_t *trow = w->indices + (size_t)(k / MQ_TRELLIS_TILE) * tiles_n * tb;
    for (int n = 0; n < N; n++) {
        unsigned idx = mq_trellis_get_index(trow + (size_t)(n / MQ_TRELLIS_TILE) * tb, bits,
                                            (k % MQ_TRELLIS_TILE) * MQ_TRELLIS_TILE +
                                                n % MQ_TRELLIS_TILE);
        row[n] = (double)w->grid[idx] * s[n] * (double)w->su[k] * (double)w->sv[n];
    }
}

mq_status mq_dequantize(const mq_weights *w, double *W, mq_error *err)
{
    mq_status st = mq_weights_check(w, err);
    if (st)
        return st;
    if (!W)
        return mq_fail(err, MQ_E_ARG, "mq_dequantize: null output");
    double *s = malloc(sizeof *s * (size_t)w->N);
    if (!s)
        return mq_fail(err, MQ_E_NOMEM, "out of memory dequantizing");
    for (int k = 0; k < w->K; k++) {
        if (k % w->group == 0)
            group_scales(w, k / w->group, s);
        dequant_row(w, k, s, W + (size_t)k * w->N);
    }
    free(s);
    return mq_ok(err);
}

mq_status mq_reference_gemm(const mq_weights *w, const uint16_t *A, int M, double *C,
                            double *abs_out, mq_error *err)
{
    mq_status st = mq_weights_check(w, err);
    if (st)
        return st;
    if (!A || !C || M <= 0)
        return mq_fail(err, MQ_E_ARG, "mq_reference_gemm: null array or M=%d", M);
    int K = w->K, N = w->N;
    double *row = malloc((size_t)N * sizeof *row);
    double *a = malloc((size_t)M * K * sizeof *a);
    double *s = malloc((size_t)N * sizeof *s);
    if (!row || !a || !s) {
        free(row);
        free(a);
        free(s);
        return mq_fail(err, MQ_E_NOMEM, "out of memory for the reference GEMM");
    }
    for (size_t i = 0; i < (size_t)M * K; i++)
        a[i] = mq_half_to_float(A[i]);
    for (size_t i = 0; i < (size_t)M * N; i++) {
        C[i] = 0;
        if (abs_out)
            abs_out[i] = 0;
    }
    for (int k = 0; k < K; k++) {
        if (k % w->group == 0)
            group_scales(w, k / w->group, s);
        dequant_row(w, k, s, row);
        for (int m = 0; m < M; m++) {
            double am = a[(size_t)m * K + k];
            double *c = C + (size_t)m * N;
            for (int n = 0; n < N; n++)
                c[n] += am * row[n];
            if (abs_out) {
                double *ab = abs_out + (size_t)m * N;
                for (int n = 0; n < N; n++)
                    ab[n] += fabs(am * row[n]);
            }
        }
    }
    free(row);
    free(a);
    free(s);
    return mq_ok(err);
}
