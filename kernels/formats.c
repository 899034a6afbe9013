/* formats.c - the weight formats as the seeds define them: the E2M1 table,
 * u4 magic-bias dequant, trellis index packing, and the mq_weights container
 * (allocation, validation at load time, byte counts). The lane layout's
 * arrays are made in layout_lane.c, which sits above this file: they are
 * carried here (free, copy, copies) by their sizes alone, and
 * mq_weights_check, which also checks them, is defined there. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mq_internal.h"

static const char *const format_names[MQ_FMT_COUNT] = {
    "fp4", "u4", "trellis2", "trellis3", "trellis4",
};

const char *mq_format_name(mq_format f)
{
    return (unsigned)f < MQ_FMT_COUNT ? format_names[f] : "?";
}

mq_status mq_format_from_name(const char *name, mq_format *out, mq_error *err)
{
    for (int i = 0; name && i < MQ_FMT_COUNT; i++)
        if (strcmp(name, format_names[i]) == 0) {
            *out = (mq_format)i;
            return mq_ok(err);
        }
    return mq_fail(err, MQ_E_ARG,
                   "unknown format '%s' (known: fp4, u4, trellis2, trellis3, trellis4)",
                   name ? name : "(null)");
}

int mq_format_is_trellis(mq_format f)
{
    return f == MQ_FMT_TRELLIS2 || f == MQ_FMT_TRELLIS3 || f == MQ_FMT_TRELLIS4;
}

int mq_format_bits(mq_format f)
{
    switch (f) {
    case MQ_FMT_TRELLIS2: return 2;
    case MQ_FMT_TRELLIS3: return 3;
    default: return 4;
    }
}

/* FP4 E2M1 -> FP16 (seed 001): normal: S<<15 | (E+14)<<10 | M<<9;
 * E=0, M=1 is the 0.5 subnormal (0x3800); E=0, M=0 is +-0. */
uint16_t mq_fp4_to_half_bits(unsigned code)
{
    unsigned s = (code >> 3) & 1u, e = (code >> 1) & 3u, m = code & 1u;
    unsigned bits = s << 15;
    if (e)
        bits |= ((e + 14u) << 10) | (m << 9);
    else if (m)
        bits |= 14u << 10;
    return (uint16_t)bits;
}

const float mq_fp4_values[16] = {
    0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

float mq_u4_dequant_magic(unsigned q, unsigned zero, uint16_t scale_half)
{
    /* 0x6400 is 1024.0 in FP16; OR-ing q into the low mantissa bits gives
     * 1024 + q exactly, and subtracting 1024 recovers q as a half. */
    float biased = mq_half_to_float((uint16_t)(0x6400u | (q & 0xfu)));
    float v = biased - 1024.0f - (float)zero; /* exact: small integers */
    return v * mq_half_to_float(scale_half);   /* exact in FP32: 5 x 11 bits */
}

int mq_trellis_tile_bytes(int bits)
{
    return (MQ_TRELLIS_TILE * MQ_TRELLIS_TILE * bits + 7) / 8;
}

unsigned mq_trellis_get_index(const uint8_t *tile, int bits, int idx_in_tile)
{
    int off = idx_in_tile * bits, byte = off >> 3, shift = off & 7;
    unsigned v = tile[byte];
    if (shift + bits > 8) /* straddles a byte boundary (3-bit) */
        v |= (unsigned)tile[byte + 1] << 8;
    return (v >> shift) & ((1u << bits) - 1u);
}

void mq_trellis_set_index(uint8_t *tile, int bits, int idx_in_tile, unsigned value)
{
    unsigned mask = (1u << bits) - 1u;
    int off = idx_in_tile * bits, byte = off >> 3, shift = off & 7;
    unsigned v = (value & mask) << shift, m = mask << shift;
    tile[byte] = (uint8_t)((tile[byte] & ~m) | (v & 0xffu));
    if (shift + bits > 8)
        tile[byte + 1] = (uint8_t)((tile[byte + 1] & ~(m >> 8)) | (v >> 8));
}

mq_status mq_check_dims(mq_format f, int K, int N, int group, mq_error *err)
{
    if ((unsigned)f >= MQ_FMT_COUNT)
        return mq_fail(err, MQ_E_ARG, "unknown format id %d", (int)f);
    if (group != 32 && group != 64 && group != 128)
        return mq_fail(err, MQ_E_SHAPE, "group size %d is not one of 32, 64, 128", group);
    if (K <= 0 || N <= 0)
        return mq_fail(err, MQ_E_SHAPE, "K=%d and N=%d must be positive", K, N);
    return mq_check_k(f, K, group, err);
}

int mq_group_count(int K, int group)
{
    return group > 0 ? mq_cdiv(K, group) : 0;
}

mq_status mq_check_k(mq_format f, int K, int group, mq_error *err)
{
    if (mq_format_is_trellis(f)) { /* seed 004: ceil(K / group) groups */
        if (K % MQ_TRELLIS_TILE)
            return mq_fail(err, MQ_E_SHAPE, "K=%d is not a multiple of the %d-row trellis tile",
                           K, MQ_TRELLIS_TILE);
        return MQ_OK;
    }
    if (K % group)
        return mq_fail(err, MQ_E_SHAPE,
                       "K=%d is not a multiple of the group size %d (%s needs whole groups; "
                       "only the trellis formats allow a partial last group)",
                       K, group, mq_format_name(f));
    return MQ_OK;
}

mq_status mq_weights_alloc(mq_weights *w, mq_format f, int K, int N, int group,
                           mq_error *err)
{
    if (!w)
        return mq_fail(err, MQ_E_ARG, "mq_weights_alloc: null weights");
    memset(w, 0, sizeof *w);
    mq_status st = mq_check_dims(f, K, N, group, err);
    if (st)
        return st;
    w->format = f;
    w->K = K;
    w->N = N;
    w->group = group;
    w->owned = 1;
    size_t groups = (size_t)mq_group_count(K, group) * (size_t)N;
    int ok;
    if (!mq_format_is_trellis(f)) {
        w->packed = mq_big_alloc((size_t)(K / 8) * (size_t)N, sizeof *w->packed);
        w->scales = mq_big_alloc(groups, sizeof *w->scales);
        ok = w->packed && w->scales;
        if (f == MQ_FMT_U4) {
            w->zeros = mq_big_alloc(groups, 1);
            ok = ok && w->zeros;
        }
    } else {
        int bits = mq_format_bits(f);
        size_t tiles = (size_t)mq_cdiv(K, MQ_TRELLIS_TILE) * (size_t)mq_cdiv(N, MQ_TRELLIS_TILE);
        w->n_levels = 1 << bits;
        w->indices = mq_big_alloc(tiles, (size_t)mq_trellis_tile_bytes(bits));
        w->tscales = mq_big_alloc(groups, sizeof *w->tscales);
        w->grid = calloc((size_t)w->n_levels, sizeof *w->grid);
        w->su = malloc((size_t)K * sizeof *w->su);
        w->sv = malloc((size_t)N * sizeof *w->sv);
        ok = w->indices && w->tscales && w->grid && w->su && w->sv;
        for (int k = 0; ok && k < K; k++)
            w->su[k] = 1.0f;
        for (int n = 0; ok && n < N; n++)
            w->sv[n] = 1.0f;
    }
    if (!ok) {
        mq_weights_free(w);
        return mq_fail(err, MQ_E_NOMEM, "out of memory for %s weights K=%d N=%d",
                       mq_format_name(f), K, N);
    }
    return mq_ok(err);
}

void mq_weights_free(mq_weights *w)
{
    if (!w || !w->owned)
        return;
    mq_big_free(w->packed);
    mq_big_free(w->scales);
    mq_big_free(w->zeros);
    mq_big_free(w->indices);
    mq_big_free(w->tscales);
    mq_big_free(w->grid);
    mq_big_free(w->su);
    mq_big_free(w->sv);
    mq_big_free(w->lane_codes);
    mq_big_free(w->lane_scales);
    mq_big_free(w->lane_zeros);
    memset(w, 0, sizeof *w);
}

mq_status mq_weights_copy(mq_weights *dst, const mq_weights *src, mq_error *err)
{
    if (!dst || !src)
        return mq_fail(err, MQ_E_ARG, "mq_weights_copy: null weights");
    mq_status st = mq_weights_alloc(dst, src->format, src->K, src->N, src->group, err);
    if (st)
        return st;
    if (mq_format_is_trellis(src->format))
        dst->n_levels = src->n_levels;
    void **sf[MQ_WEIGHT_FIELDS], **df[MQ_WEIGHT_FIELDS];
    size_t sb[MQ_WEIGHT_FIELDS], db[MQ_WEIGHT_FIELDS];
    int nf = mq_weights_all_fields(src, sf, sb);
    mq_weights_all_fields(dst, df, db);
    for (int i = 0; i < nf; i++) {
        if (sb[i] && !db[i] && i >= MQ_WEIGHT_SEED_FIELDS) { /* lane arrays: dst has none yet */
            if (!(*df[i] = mq_big_alloc_raw(1, sb[i]))) {
                mq_weights_free(dst);
                return mq_fail(err, MQ_E_NOMEM, "out of memory for a copy of the lane arrays");
            }
            db[i] = sb[i];
        }
        if (sb[i] && db[i])
            memcpy(*df[i], *sf[i], sb[i]);
    }
    return mq_ok(err);
}

static mq_status check_signs(const float *v, int n, const char *name, mq_error *err)
{
    for (int i = 0; i < n; i++)
        if (v[i] != 1.0f && v[i] != -1.0f)
            return mq_fail(err, MQ_E_WEIGHTS, "sign vector %s[%d] = %g is not +1 or -1",
                           name, i, (double)v[i]);
    return MQ_OK;
}

/* mq_weights_check's rules for the seed arrays (layout_lane.c adds the lane arrays') */
mq_status mq_weights_check_seed(const mq_weights *w, mq_error *err)
{
    if (!w)
        return mq_fail(err, MQ_E_ARG, "null weights");
    mq_status st = mq_check_dims(w->format, w->K, w->N, w->group, err);
    if (st)
        return st;
    int K = w->K, N = w->N, G = mq_group_count(w->K, w->group);
    if (!mq_format_is_trellis(w->format)) {
        if (!w->packed || !w->scales || (w->format == MQ_FMT_U4 && !w->zeros))
            return mq_fail(err, MQ_E_WEIGHTS, "%s weights are missing an array",
                           mq_format_name(w->format));
        for (size_t i = 0; i < (size_t)G * N; i++) {
            if ((w->scales[i] & 0x7c00u) == 0x7c00u)
                return mq_fail(err, MQ_E_WEIGHTS, "scale [group %zu, col %zu] is inf or nan",
                               i / (size_t)N, i % (size_t)N);
            if (w->zeros && w->zeros[i] > 15)
                return mq_fail(err, MQ_E_WEIGHTS,
                               "zero point %u at [group %zu, col %zu] exceeds 15",
                               w->zeros[i], i / (size_t)N, i % (size_t)N);
        }
        return mq_ok(err);
    }
    int bits = mq_format_bits(w->format);
    if (!w->indices || !w->tscales || !w->grid || !w->su || !w->sv)
        return mq_fail(err, MQ_E_WEIGHTS, "%s weights are missing an array",
                       mq_format_name(w->format));
    if (w->n_levels < 1 || w->n_levels > (1 << bits))
        return mq_fail(err, MQ_E_WEIGHTS, "%s grid has %d levels (expected 1..%d)",
                       mq_format_name(w->format), w->n_levels, 1 << bits);
    for (int i = 0; i < w->n_levels; i++)
        if (!isfinite(w->grid[i]))
            return mq_fail(err, MQ_E_WEIGHTS, "grid[%d] is not finite", i);
    for (size_t i = 0; i < (size_t)G * N; i++)
        if (!isfinite(w->tscales[i]))
            return mq_fail(err, MQ_E_WEIGHTS, "scale [group %zu, col %zu] is not finite",
                           i / (size_t)N, i % (size_t)N);
    if ((st = check_signs(w->su, K, "su", err)) || (st = check_signs(w->sv, N, "sv", err)))
        return st;
    int tiles_n = mq_cdiv(N, MQ_TRELLIS_TILE), tb = mq_trellis_tile_bytes(bits);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            const uint8_t *tile = w->indices +
                ((size_t)(k / MQ_TRELLIS_TILE) * tiles_n + n / MQ_TRELLIS_TILE) * tb;
            unsigned idx = mq_trellis_get_index(
                tile, bits, (k % MQ_TRELLIS_TILE) * MQ_TRELLIS_TILE + n % MQ_TRELLIS_TILE);
            if ((int)idx >= w->n_levels)
                return mq_fail(err, MQ_E_WEIGHTS,
                               "trellis index %u at [k=%d, n=%d] is outside the %d-level grid",
                               idx, k, n, w->n_levels);
        }
    return mq_ok(err);
}

int mq_weights_fields(const mq_weights *w, void ***field, size_t *bytes)
{
    size_t K = (size_t)w->K, N = (size_t)w->N, G = (size_t)mq_group_count(w->K, w->group);
    size_t tiles = (size_t)mq_cdiv(w->K, MQ_TRELLIS_TILE) * (size_t)mq_cdiv(w->N, MQ_TRELLIS_TILE);
    int tr = mq_format_is_trellis(w->format);
    mq_weights *m = (mq_weights *)w;
    void **f[8] = {(void **)&m->packed, (void **)&m->scales,  (void **)&m->zeros,
                   (void **)&m->indices, (void **)&m->tscales, (void **)&m->grid,
                   (void **)&m->su,      (void **)&m->sv};
    size_t b[8] = {tr ? 0 : K / 8 * N * 4,
                   tr ? 0 : G * N * 2,
                   w->zeros ? G * N : 0,
                   tr ? tiles * (size_t)mq_trellis_tile_bytes(mq_format_bits(w->format)) : 0,
                   tr ? G * N * 4 : 0,
                   tr ? (size_t)w->n_levels * 4 : 0,
                   tr ? K * 4 : 0,
                   tr ? N * 4 : 0};
    for (int i = 0; i < 8; i++) {
        field[i] = f[i];
        bytes[i] = *f[i] ? b[i] : 0;
    }
    return MQ_WEIGHT_SEED_FIELDS;
}

int mq_weights_all_fields(const mq_weights *w, void ***field, size_t *bytes)
{
    int n = mq_weights_fields(w, field, bytes);
    mq_weights *m = (mq_weights *)w;
    mq_lane_geom g;
    int ok = mq_check_dims(w->format, w->K, w->N, w->group, NULL) == MQ_OK &&
             mq_lane_geom_fill(&g, w->format, w->K, w->N, w->group);
    void **f[3] = {(void **)&m->lane_codes, &m->lane_scales, (void **)&m->lane_zeros};
    size_t b[3] = {ok ? g.code_words * 4 : 0, ok ? g.scale_count * g.scale_size : 0,
                   ok && w->format == MQ_FMT_U4 ? g.scale_count : 0};
    for (int i = 0; i < 3; i++) {
        field[n + i] = f[i];
        bytes[n + i] = *f[i] ? b[i] : 0;
    }
    return n + 3;
}

mq_status mq_weights_copies(const mq_weights *src, int n, mq_weights *out, void **block,
                            mq_error *err)
{
    if (!src || !out || !block || n < 1)
        return mq_fail(err, MQ_E_ARG, "mq_weights_copies: null weights or n=%d", n);
    void **field[MQ_WEIGHT_FIELDS];
    size_t bytes[MQ_WEIGHT_FIELDS], one = 0;
    int nf = mq_weights_all_fields(src, field, bytes);
    for (int i = 0; i < nf; i++)
        one += (bytes[i] + 63) & ~(size_t)63; /* each array 64-byte aligned */
    *block = mq_big_alloc_raw((size_t)n, one); /* every byte read is copied in below */
    if (!*block)
        return mq_fail(err, MQ_E_NOMEM, "out of memory for %d copies of %zu bytes of weights", n,
                       one);
    uint8_t *at = *block;
    for (int c = 0; c < n; c++) {
        out[c] = *src;
        out[c].owned = 0;
        void **dfield[MQ_WEIGHT_FIELDS];
        size_t dbytes[MQ_WEIGHT_FIELDS];
        mq_weights_all_fields(&out[c], dfield, dbytes);
        for (int i = 0; i < nf; i++) {
            if (!bytes[i])
                continue;
            memcpy(at, *field[i], bytes[i]);
            *dfield[i] = at;
            at += (bytes[i] + 63) & ~(size_t)63;
        }
    }
    return mq_ok(err);
}

void mq_weights_copies_free(void *block)
{
    mq_big_free(block);
}

size_t mq_weights_bytes(const mq_weights *w)
{
    size_t K = (size_t)w->K, N = (size_t)w->N, G = (size_t)mq_group_count(w->K, w->group);
    if (!mq_format_is_trellis(w->format))
        return K / 8 * N * 4 + G * N * 2 + (w->format == MQ_FMT_U4 ? G * N : 0);
    int bits = mq_format_bits(w->format);
    size_t tiles = (size_t)mq_cdiv(w->K, 16) * (size_t)mq_cdiv(w->N, 16);
    return tiles * (size_t)mq_trellis_tile_bytes(bits) + G * N * 4 + (K + N) * 4 +
           (size_t)w->n_levels * 4;
}
