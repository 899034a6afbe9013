/* layout_lane.c - the lane-major weight layout (issue 40). The seeds' layouts
 * ([K/8][N] words, 16x16 trellis tiles) make a simdgroup gather the codes of
 * an 8x8 weight fragment from many places and shuffle them into lanes; here
 * they are re-packed once so that each lane finds the codes of its own
 * fragment pairs for 16 columns x 64 K (trellis: x 128 K) in one 16-byte
 * load (trellis: 16, 24, 32 bytes), the way IST-DASLab/marlin re-orders its
 * weights offline (marlin/__init__.py, _get_perms) for the tensor cores'
 * operand layout, but for Apple's simdgroup-matrix fragment layout (MLX,
 * steel/gemm/mma.h, BaseMMAFrag::get_coord), which the cuda prelude maps to
 * mma.m16n8k16 by a fixed lane permutation. This file holds the geometry,
 * the forward map (mq_lane_locate), the repack from the seed arrays and its
 * exact inverse, and mq_weights_check (formats.c's seed rules, then the lane
 * arrays' padding): this file sits above formats.c, which sizes the lane
 * arrays through mq_internal.h alone. kernels/mq.h states the layout. */
#include <string.h>

#include "mq_internal.h"

/* ---- Apple's 8x8 fragment: lane l holds (frag_row(l), frag_col(l) + j) ---- */

static int frag_row(int l) { return ((l >> 2) & 4) + ((l >> 1) & 3); }
static int frag_col(int l) { return ((l >> 2) & 2) * 2 + (l & 1) * 2; }
/* the lane owning element (r, c) */
static int frag_lane(int r, int c)
{
    return (r & 4) * 4 + (c & 4) * 2 + (r & 3) * 2 + ((c & 3) >> 1);
}

const char *mq_layout_name(mq_layout l)
{
    switch (l) {
    case MQ_LAYOUT_SEED: return "seed";
    case MQ_LAYOUT_LANE: return "lane";
    }
    return "?";
}

mq_status mq_lane_geometry(mq_format f, int K, int N, int group, mq_lane_geom *g,
                           mq_error *err)
{
    if (!g)
        return mq_fail(err, MQ_E_ARG, "mq_lane_geometry: null geometry");
    memset(g, 0, sizeof *g);
    mq_status st = mq_check_dims(f, K, N, group, err);
    if (st)
        return st;
    if (!mq_lane_geom_fill(g, f, K, N, group))
        return mq_fail(err, MQ_E_SHAPE, "K=%d, N=%d: too large for the lane layout", K, N);
    return mq_ok(err);
}

/* ---- slots: (column block nb, super-block kb, lane L, pair q, element j) ----
 * pair q = 4a + p: atom a (16 K) of the super-block, fragment p = h + 2s;
 * q < ksb / 4 (16 for fp4/u4, 32 for trellis). */

/* the (k, n) a slot holds: the inverse map */
static void slot_kn(const mq_lane_geom *g, int nb, int kb, int L, int q, int j, int *k, int *n)
{
    int p = q & 3, a = q >> 2;
    *k = kb * g->ksb + 16 * a + 8 * (p >> 1) + frag_col(L) + j;
    *n = 16 * nb + 8 * (p & 1) + frag_row(L);
}

static size_t scale_index(const mq_lane_geom *g, int grp, int n)
{
    return (((size_t)(n >> 4) * (size_t)g->gp + (size_t)grp) * 8 + (size_t)(n & 7)) * 2 +
           (size_t)((n >> 3) & 1);
}

/* fp4 pair p's magnitude and sign bits in each 16-bit half of its word:
 * the decode (metal/mq_lane.h, mq_lane_fp4_bits) shifts them to an FP16's
 * bits 9-11 and 15 with five shifts and six masks for the word's four
 * pairs, where contiguous nibbles need seven shifts and eight masks. The
 * positions are the cheapest of all placements by that count (pairs 0 and 2
 * need one shift for both parts; no placement gives more than two such). */
static const int fp4_mag_bit[4] = {0, 3, 8, 11}, fp4_sign_bit[4] = {6, 7, 14, 15};

/* word t (0-5) of trellis3 lane L's six in the super-block at base: its
 * uint4 of the first 128 words, then its uint2 of the next 64 */
static size_t tr3_word(size_t base, int L, int t)
{
    return base + (t < 4 ? (size_t)L * 4 + (size_t)t : 128 + (size_t)L * 2 + (size_t)(t - 4));
}

/* the bits of a slot in lane_codes (section 2 and 3 of the design) */
static void slot_bits(const mq_lane_geom *g, int nb, int kb, int L, int q, int j,
                      mq_lane_slot *s)
{
    size_t base = ((size_t)nb * (size_t)g->kb + (size_t)kb) * (size_t)g->sb_words;
    s->hi_word = 0;
    s->hi_bit = -1;
    s->hi_width = 1;
    s->hi_shift = 0;
    if (g->format == MQ_FMT_FP4) { /* word a of the lane's uint4, split at MAG, SGN */
        s->word = s->hi_word = base + (size_t)L * 4 + (size_t)(q >> 2);
        s->bit = fp4_mag_bit[q & 3] + 16 * j;
        s->width = 3;
        s->hi_bit = fp4_sign_bit[q & 3] + 16 * j;
        s->hi_shift = 3;
    } else if (!mq_format_is_trellis(g->format)) { /* u4: word a, nibble p + 4j */
        s->word = base + (size_t)L * 4 + (size_t)(q >> 2);
        s->bit = 4 * ((q & 3) + 4 * j);
        s->width = 4;
    } else if (g->bits == 4) { /* two uint4 planes of 128 words, a byte per pair */
        s->word = base + (size_t)(q >> 4) * 128 + (size_t)L * 4 + (size_t)((q >> 2) & 3);
        s->bit = 8 * (q & 3) + 4 * j;
        s->width = 4;
    } else if (g->bits == 3) {
        /* six bits a pair, one after the other through the lane's six
         * words (tr3_word): pair q's code idx0 | idx1 << 3 at bit 6q of
         * that run, so the decode takes it with a shift and a mask (a
         * funnel shift where it runs into the next word) */
        int at = 6 * q + 3 * j, t = at / 32;
        s->word = tr3_word(base, L, t);
        s->bit = at % 32;
        s->width = s->bit + 3 > 32 ? 32 - s->bit : 3;
        if (s->width < 3) {
            s->hi_word = tr3_word(base, L, t + 1);
            s->hi_bit = 0;
            s->hi_width = 3 - s->width;
            s->hi_shift = s->width;
        }
    } else { /* b=2: a nibble per pair */
        s->word = base + (size_t)L * 4 + (size_t)(q >> 3);
        s->bit = 4 * (q & 7) + 2 * j;
        s->width = 2;
    }
}

void mq_lane_locate(const mq_lane_geom *g, int k, int n, mq_lane_slot *s)
{
    int nb = n >> 4, r = n & 15, kb = k / g->ksb, kr = k % g->ksb;
    int c = k & 7, p = (r >> 3) | (((kr >> 3) & 1) << 1);
    slot_bits(g, nb, kb, frag_lane(r & 7, c), 4 * (kr >> 4) + p, c & 1, s);
    s->scale = scale_index(g, k / g->group, n);
}

static unsigned slot_get(const uint32_t *codes, const mq_lane_slot *s)
{
    unsigned v = (codes[s->word] >> s->bit) & ((1u << s->width) - 1u);
    if (s->hi_bit >= 0)
        v |= ((codes[s->hi_word] >> s->hi_bit) & ((1u << s->hi_width) - 1u)) << s->hi_shift;
    return v;
}

/* into zeroed words */
static void slot_put(uint32_t *codes, const mq_lane_slot *s, unsigned v)
{
    codes[s->word] |= (v & ((1u << s->width) - 1u)) << s->bit;
    if (s->hi_bit >= 0)
        codes[s->hi_word] |= ((v >> s->hi_shift) & ((1u << s->hi_width) - 1u)) << s->hi_bit;
}

/* ---- the seed's codes ---- */

/* the byte offset in indices of the trellis tile holding (k, n) */
static size_t seed_tile(const mq_weights *w, int k, int n)
{
    size_t tiles_n = (size_t)mq_cdiv(w->N, MQ_TRELLIS_TILE);
    size_t tb = (size_t)mq_trellis_tile_bytes(mq_format_bits(w->format));
    return ((size_t)(k / MQ_TRELLIS_TILE) * tiles_n + (size_t)(n / MQ_TRELLIS_TILE)) * tb;
}

static int seed_in_tile(int k, int n)
{
    return (k % MQ_TRELLIS_TILE) * MQ_TRELLIS_TILE + n % MQ_TRELLIS_TILE;
}

static mq_status check_sv(const mq_weights *w, mq_error *err)
{
    if (!w->grid || !w->su || !w->sv)
        return mq_fail(err, MQ_E_WEIGHTS, "%s weights are missing grid, su or sv",
                       mq_format_name(w->format));
    for (int n = 0; n < w->N; n++)
        if (w->sv[n] != 1.0f && w->sv[n] != -1.0f)
            return mq_fail(err, MQ_E_WEIGHTS,
                           "sign vector sv[%d] = %g is not +1 or -1 (the lane scales fold it in)",
                           n, (double)w->sv[n]);
    return MQ_OK;
}

/* ---- seed -> lane ---- */

/* w's lane arrays, zeroed: the present ones refilled, else allocated (owned w) */
static mq_status lane_arrays(mq_weights *w, const mq_lane_geom *g, mq_error *err)
{
    int u4 = w->format == MQ_FMT_U4;
    if (w->lane_codes && w->lane_scales && (!u4 || w->lane_zeros)) {
        memset(w->lane_codes, 0, g->code_words * sizeof(uint32_t));
        memset(w->lane_scales, 0, g->scale_count * g->scale_size);
        if (u4)
            memset(w->lane_zeros, 0, g->scale_count);
        return MQ_OK;
    }
    if (!w->owned)
        return mq_fail(err, MQ_E_ARG,
                       "weights that borrow their arrays (owned = 0) cannot get new lane arrays: "
                       "prepare the weights they were copied from");
    mq_big_free(w->lane_codes);
    mq_big_free(w->lane_scales);
    mq_big_free(w->lane_zeros);
    w->lane_codes = mq_big_alloc(g->code_words, sizeof(uint32_t));
    w->lane_scales = mq_big_alloc(g->scale_count, g->scale_size);
    w->lane_zeros = u4 ? mq_big_alloc(g->scale_count, 1) : NULL;
    if (w->lane_codes && w->lane_scales && (!u4 || w->lane_zeros))
        return MQ_OK;
    mq_big_free(w->lane_codes);
    mq_big_free(w->lane_scales);
    mq_big_free(w->lane_zeros);
    w->lane_codes = NULL;
    w->lane_scales = w->lane_zeros = NULL;
    return mq_fail(err, MQ_E_NOMEM, "out of memory for the lane arrays of %s weights K=%d N=%d",
                   mq_format_name(w->format), w->K, w->N);
}

static void put_codes(mq_weights *w, const mq_lane_geom *g)
{
    mq_lane_slot s;
    if (!mq_format_is_trellis(w->format)) {
        for (int k8 = 0; k8 < w->K / 8; k8++)
            for (int n = 0; n < w->N; n++) {
                uint32_t word = w->packed[(size_t)k8 * (size_t)w->N + (size_t)n];
                for (int i = 0; i < 8; i++) {
                    mq_lane_locate(g, 8 * k8 + i, n, &s);
                    slot_put(w->lane_codes, &s, (word >> (4 * i)) & 15u);
                }
            }
        return;
    }
    for (int k = 0; k < w->K; k++)
        for (int n = 0; n < w->N; n++) {
            mq_lane_locate(g, k, n, &s);
            slot_put(w->lane_codes, &s,
                     mq_trellis_get_index(w->indices + seed_tile(w, k, n), g->bits,
                                          seed_in_tile(k, n)));
        }
}

static void put_scales(mq_weights *w, const mq_lane_geom *g)
{
    int G = mq_group_count(w->K, w->group), N = w->N;
    w->lane_scales_small = w->format == MQ_FMT_FP4;
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < N; n++) {
            size_t at = scale_index(g, gi, n), from = (size_t)gi * (size_t)N + (size_t)n;
            if (mq_format_is_trellis(w->format)) {
                ((float *)w->lane_scales)[at] = w->tscales[from] * w->sv[n]; /* exact: +-1 */
                continue;
            }
            ((uint16_t *)w->lane_scales)[at] = w->scales[from];
            /* |s| < 4: the FP16 magnitude bits below 4.0's (0x4400) */
            if ((w->scales[from] & 0x7fffu) >= 0x4400u)
                w->lane_scales_small = 0;
            if (w->format == MQ_FMT_U4)
                w->lane_zeros[at] = w->zeros[from];
        }
}

mq_status mq_weights_prepare_lane_part(mq_weights *w, int parts, mq_error *err)
{
    if (!w)
        return mq_fail(err, MQ_E_ARG, "mq_weights_prepare_lane: null weights");
    mq_lane_geom g;
    mq_status st = mq_lane_geometry(w->format, w->K, w->N, w->group, &g, err);
    if (st)
        return st;
    int tr = mq_format_is_trellis(w->format);
    if (tr ? !w->indices || !w->tscales
           : !w->packed || !w->scales || (w->format == MQ_FMT_U4 && !w->zeros))
        return mq_fail(err, MQ_E_WEIGHTS, "%s weights are missing a seed array to repack",
                       mq_format_name(w->format));
    if (tr && (st = check_sv(w, err)))
        return st;
    if (parts == (MQ_LANE_CODES | MQ_LANE_SCALES)) {
        if ((st = lane_arrays(w, &g, err)))
            return st;
    } else if (parts == MQ_LANE_CODES && w->lane_codes) {
        memset(w->lane_codes, 0, g.code_words * sizeof(uint32_t));
    } else if (parts == MQ_LANE_SCALES && w->lane_scales &&
               (w->format != MQ_FMT_U4 || w->lane_zeros)) {
        memset(w->lane_scales, 0, g.scale_count * g.scale_size);
        if (w->format == MQ_FMT_U4)
            memset(w->lane_zeros, 0, g.scale_count);
    } else if (parts == MQ_LANE_CODES || parts == MQ_LANE_SCALES) {
        return mq_fail(err, MQ_E_ARG,
                       "mq_weights_prepare_lane_part: the %s part alone needs its lane arrays in "
                       "place (only both parts are allocated)",
                       parts == MQ_LANE_CODES ? "codes" : "scales");
    } else {
        return mq_fail(err, MQ_E_ARG,
                       "mq_weights_prepare_lane_part: parts %d is not MQ_LANE_CODES, "
                       "MQ_LANE_SCALES or both",
                       parts);
    }
    if (parts & MQ_LANE_CODES)
        put_codes(w, &g);
    if (parts & MQ_LANE_SCALES)
        put_scales(w, &g);
    return mq_ok(err);
}

mq_status mq_weights_prepare_lane(mq_weights *w, mq_error *err)
{
    return mq_weights_prepare_lane_part(w, MQ_LANE_CODES | MQ_LANE_SCALES, err);
}

/* ---- lane -> seed ---- */

static void get_codes(const mq_weights *src, mq_weights *dst, const mq_lane_geom *g)
{
    int tr = mq_format_is_trellis(g->format), pairs = g->ksb / 4;
    mq_lane_slot s;
    for (int nb = 0; nb < g->n16; nb++)
        for (int kb = 0; kb < g->kb; kb++)
            for (int L = 0; L < 32; L++)
                for (int q = 0; q < pairs; q++)
                    for (int j = 0; j < 2; j++) {
                        int k, n;
                        slot_kn(g, nb, kb, L, q, j, &k, &n);
                        if (k >= g->K || n >= g->N)
                            continue; /* padding */
                        slot_bits(g, nb, kb, L, q, j, &s);
                        unsigned v = slot_get(src->lane_codes, &s);
                        if (tr)
                            mq_trellis_set_index(dst->indices + seed_tile(dst, k, n), g->bits,
                                                 seed_in_tile(k, n), v);
                        else
                            dst->packed[(size_t)(k >> 3) * (size_t)g->N + (size_t)n] |=
                                (uint32_t)v << (4 * (k & 7));
                    }
}

static void get_scales(const mq_weights *src, mq_weights *dst, const mq_lane_geom *g)
{
    int G = mq_group_count(g->K, g->group), N = g->N;
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < N; n++) {
            size_t at = scale_index(g, gi, n), to = (size_t)gi * (size_t)N + (size_t)n;
            if (mq_format_is_trellis(g->format)) {
                dst->tscales[to] = ((const float *)src->lane_scales)[at] * src->sv[n];
                continue;
            }
            dst->scales[to] = ((const uint16_t *)src->lane_scales)[at];
            if (g->format == MQ_FMT_U4)
                dst->zeros[to] = src->lane_zeros[at];
        }
}

mq_status mq_weights_from_lane(const mq_weights *src, mq_weights *dst, mq_error *err)
{
    if (!src || !dst || src == dst)
        return mq_fail(err, MQ_E_ARG, "mq_weights_from_lane: null or identical weights");
    mq_lane_geom g;
    mq_status st = mq_lane_geometry(src->format, src->K, src->N, src->group, &g, err);
    if (st)
        return st;
    if (!src->lane_codes || !src->lane_scales || (src->format == MQ_FMT_U4 && !src->lane_zeros))
        return mq_fail(err, MQ_E_WEIGHTS,
                       "weights are not prepared for the lane layout (mq_weights_prepare_lane)");
    int tr = mq_format_is_trellis(src->format);
    if (tr && (st = check_sv(src, err)))
        return st;
    if (tr && (src->n_levels < 1 || src->n_levels > 1 << g.bits))
        return mq_fail(err, MQ_E_WEIGHTS, "%s grid has %d levels (expected 1..%d)",
                       mq_format_name(src->format), src->n_levels, 1 << g.bits);
    if ((st = mq_weights_alloc(dst, src->format, src->K, src->N, src->group, err)))
        return st;
    if (tr) {
        dst->n_levels = src->n_levels;
        memcpy(dst->grid, src->grid, (size_t)src->n_levels * sizeof(float));
        memcpy(dst->su, src->su, (size_t)src->K * sizeof(float));
        memcpy(dst->sv, src->sv, (size_t)src->N * sizeof(float));
    }
    get_codes(src, dst, &g);
    get_scales(src, dst, &g);
    return mq_ok(err);
}

/* ---- checks and sizes ---- */

/* every padding code of super-block (nb, kb) is 0 */
static mq_status check_block_padding(const mq_weights *w, const mq_lane_geom *g, int nb, int kb,
                                     mq_error *err)
{
    mq_lane_slot s;
    for (int L = 0; L < 32; L++)
        for (int q = 0; q < g->ksb / 4; q++)
            for (int j = 0; j < 2; j++) {
                int k, n;
                slot_kn(g, nb, kb, L, q, j, &k, &n);
                if (k < g->K && n < g->N)
                    continue;
                slot_bits(g, nb, kb, L, q, j, &s);
                unsigned v = slot_get(w->lane_codes, &s);
                if (v)
                    return mq_fail(err, MQ_E_WEIGHTS,
                                   "lane_codes padding at k=%d, n=%d (word %zu, bit %d) holds "
                                   "%u, expected 0 (K=%d, N=%d)",
                                   k, n, s.word, s.bit, v, g->K, g->N);
            }
    return MQ_OK;
}

static mq_status check_scale_padding(const mq_weights *w, const mq_lane_geom *g, int nb,
                                     int g0, mq_error *err)
{
    int G = mq_group_count(g->K, g->group);
    for (int gi = g0; gi < g->gp; gi++)
        for (int c = 0; c < 16; c++) {
            int n = 16 * nb + c;
            if (gi < G && n < g->N)
                continue;
            size_t at = scale_index(g, gi, n);
            const unsigned char *b = (const unsigned char *)w->lane_scales + at * g->scale_size;
            int nonzero = w->lane_zeros && w->lane_zeros[at];
            for (size_t i = 0; i < g->scale_size; i++)
                nonzero |= b[i];
            if (nonzero)
                return mq_fail(err, MQ_E_WEIGHTS,
                               "lane %s padding at group %d, n=%d is not 0 (K=%d, N=%d, %d groups)",
                               w->lane_zeros && w->lane_zeros[at] ? "zeros" : "scales", gi, n,
                               g->K, g->N, G);
        }
    return MQ_OK;
}

/* MQ_OK when w has no lane arrays, or all of its format's with every
 * padding slot zero; else MQ_E_WEIGHTS naming the slot. Only the padded
 * super-blocks and scale rows are read: O(N + K) words. */
static mq_status check_lane_arrays(const mq_weights *w, mq_error *err)
{
    if (!w->lane_codes && !w->lane_scales && !w->lane_zeros)
        return mq_ok(err);
    mq_lane_geom g;
    mq_status st = mq_lane_geometry(w->format, w->K, w->N, w->group, &g, err);
    if (st)
        return st;
    int u4 = w->format == MQ_FMT_U4;
    if (!w->lane_codes || !w->lane_scales || u4 != (w->lane_zeros != NULL))
        return mq_fail(err, MQ_E_WEIGHTS,
                       "%s lane arrays are incomplete: codes %s, scales %s, zeros %s (expected %s)",
                       mq_format_name(w->format), w->lane_codes ? "present" : "absent",
                       w->lane_scales ? "present" : "absent", w->lane_zeros ? "present" : "absent",
                       u4 ? "all three" : "codes and scales, no zeros");
    int G = mq_group_count(g.K, g.group), last_n = g.N % 16 != 0, last_k = g.kp > g.K;
    for (int nb = 0; nb < g.n16; nb++) {
        int pad_n = last_n && nb == g.n16 - 1;
        for (int kb = pad_n ? 0 : g.kb - last_k; kb < g.kb; kb++)
            if ((st = check_block_padding(w, &g, nb, kb, err)))
                return st;
        if ((st = check_scale_padding(w, &g, nb, pad_n ? 0 : G, err)))
            return st;
    }
    return mq_ok(err);
}

/* Defined here, above formats.c (which holds the seed arrays' rules), so
 * that it can check the lane arrays too. */
mq_status mq_weights_check(const mq_weights *w, mq_error *err)
{
    mq_status st = mq_weights_check_seed(w, err);
    return st ? st : check_lane_arrays(w, err);
}

size_t mq_weights_bytes_layout(const mq_weights *w, mq_layout layout)
{
    if (layout == MQ_LAYOUT_SEED)
        return mq_weights_bytes(w);
    mq_lane_geom g;
    if (layout != MQ_LAYOUT_LANE || mq_lane_geometry(w->format, w->K, w->N, w->group, &g, NULL))
        return 0;
    size_t b = g.code_words * sizeof(uint32_t) + g.scale_count * g.scale_size;
    if (w->format == MQ_FMT_U4)
        b += g.scale_count;
    if (mq_format_is_trellis(w->format)) /* the kernel binds grid and su; sv is in the scales */
        b += (size_t)w->K * sizeof(float) + (size_t)w->n_levels * sizeof(float);
    return b;
}
