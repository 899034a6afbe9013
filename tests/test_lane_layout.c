/* test_lane_layout.c - the lane-major weight layout (kernels/layout_lane.c)
 * bit for bit: every code where the design puts it (Apple's 8x8 fragment
 * owners, the tensor-core permutation), padding zero, seed -> lane -> seed
 * bit for bit, the staged copies' pieces, refusals, and each part of the
 * repack alone (codes; scales with u4's zero points) equal to the whole. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mq.h"

/* Apple's 8x8 fragment as MLX's BlockMMA writes it: lane -> its pair's row, col */
static void mlx_coord(int lane, int *row, int *col)
{
    int qid = lane / 4;
    *row = (qid & 4) + (lane / 2) % 4;
    *col = (qid & 2) * 2 + (lane % 2) * 2;
}

static unsigned lane_rand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* seed weights with every code, scale and sign random (padding bits zero) */
static int lane_weights(mq_format f, int K, int N, int group, unsigned seed, mq_weights *w)
{
    mq_error err;
    if (mq_weights_alloc(w, f, K, N, group, &err) != MQ_OK)
        return -1;
    size_t G = (size_t)mq_group_count(K, group) * (size_t)N;
    if (!mq_format_is_trellis(f)) {
        for (size_t i = 0; i < (size_t)(K / 8) * (size_t)N; i++)
            w->packed[i] = (uint32_t)lane_rand(&seed) << 16 ^ lane_rand(&seed);
        for (size_t i = 0; i < G; i++) {
            unsigned h = lane_rand(&seed) & 0xffffu;
            if ((h & 0x7c00u) == 0x7c00u) /* finite: inf and nan become normal */
                h &= 0xbfffu;
            w->scales[i] = (uint16_t)(i % 7 == 3 ? 0x8000u : h); /* -0 too */
            if (w->zeros)
                w->zeros[i] = (uint8_t)(lane_rand(&seed) & 15u);
        }
        return 0;
    }
    int bits = mq_format_bits(f), tiles_n = (N + 15) / 16, tb = mq_trellis_tile_bytes(bits);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            mq_trellis_set_index(w->indices + ((size_t)(k / 16) * tiles_n + n / 16) * tb, bits,
                                 (k % 16) * 16 + n % 16, lane_rand(&seed));
    for (size_t i = 0; i < G; i++)
        w->tscales[i] =
            i % 5 == 2 ? -0.0f : ((float)(lane_rand(&seed) & 0xffff) - 32768.0f) / 4096.0f;
    for (int i = 0; i < w->n_levels; i++)
        w->grid[i] = (float)i - 3.5f;
    for (int k = 0; k < K; k++)
        w->su[k] = lane_rand(&seed) & 1 ? -1.0f : 1.0f;
    for (int n = 0; n < N; n++)
        w->sv[n] = lane_rand(&seed) & 1 ? -1.0f : 1.0f;
    return 0;
}

static unsigned seed_code(const mq_weights *w, int k, int n)
{
    if (!mq_format_is_trellis(w->format))
        return (w->packed[(size_t)(k / 8) * w->N + n] >> (4 * (k % 8))) & 15u;
    int bits = mq_format_bits(w->format), tb = mq_trellis_tile_bytes(bits);
    const uint8_t *tile = w->indices + ((size_t)(k / 16) * ((w->N + 15) / 16) + n / 16) * tb;
    return mq_trellis_get_index(tile, bits, (k % 16) * 16 + n % 16);
}

static unsigned slot_code(const mq_weights *w, const mq_lane_slot *s)
{
    unsigned v = (w->lane_codes[s->word] >> s->bit) & ((1u << s->width) - 1u);
    if (s->hi_bit >= 0)
        v |= ((w->lane_codes[s->hi_word] >> s->hi_bit) & ((1u << s->hi_width) - 1u)) << s->hi_shift;
    return v;
}

/* the lane scale (trellis: tscale x sv) and zero of (group gi, n), as bits */
static int scale_matches(const mq_weights *w, const mq_lane_slot *s, int gi, int n)
{
    size_t i = (size_t)gi * w->N + n;
    if (mq_format_is_trellis(w->format)) {
        float want = w->tscales[i] * w->sv[n], got = ((const float *)w->lane_scales)[s->scale];
        return memcmp(&want, &got, sizeof got) == 0;
    }
    return ((const uint16_t *)w->lane_scales)[s->scale] == w->scales[i] &&
           (!w->zeros || w->lane_zeros[s->scale] == w->zeros[i]);
}

/* Every (k, n) read through mq_lane_locate equals the seed's code and scale;
 * no two codes share a bit and every bit no code uses (padding) is zero. */
static void lane_check_locate(const mq_weights *w, const mq_lane_geom *g, const char *name)
{
    uint32_t *used = calloc(g->code_words, sizeof *used);
    unsigned char *sused = calloc(g->scale_count, 1);
    size_t bad = 0, badscale = 0, shared = 0, nbits = 0, padbits = 0, padscales = 0;
    for (int k = 0; k < w->K; k++)
        for (int n = 0; n < w->N; n++) {
            mq_lane_slot s;
            mq_lane_locate(g, k, n, &s);
            bad += slot_code(w, &s) != seed_code(w, k, n);
            badscale += !scale_matches(w, &s, k / w->group, n);
            sused[s.scale] = 1;
            for (int b = 0; b < s.width + (s.hi_bit >= 0 ? s.hi_width : 0); b++) {
                size_t word = b < s.width ? s.word : s.hi_word;
                uint32_t m = 1u << (b < s.width ? s.bit + b : s.hi_bit + b - s.width);
                shared += (used[word] & m) != 0;
                used[word] |= m;
                nbits++;
            }
        }
    for (size_t i = 0; i < g->code_words; i++)
        padbits += (size_t)__builtin_popcount(w->lane_codes[i] & ~used[i]);
    for (size_t i = 0; i < g->scale_count; i++) {
        unsigned char z[4] = {0};
        if (!sused[i])
            padscales += memcmp((const char *)w->lane_scales + i * g->scale_size, z,
                                g->scale_size) != 0 || (w->lane_zeros && w->lane_zeros[i]);
    }
    CHECK(bad == 0 && badscale == 0,
          "%s: every (k, n) through mq_lane_locate gives the seed's code and scale: %zu codes, "
          "%zu scales differ", name, bad, badscale);
    CHECK(shared == 0 && nbits == (size_t)w->K * w->N * g->bits,
          "%s: K*N*bits = %zu distinct code bits, got %zu bits of which %zu shared", name,
          (size_t)w->K * w->N * g->bits, nbits, shared);
    CHECK(padbits == 0 && padscales == 0,
          "%s: the padding is zero: %zu padding code bits set, %zu padding scales not 0", name,
          padbits, padscales);
    free(used);
    free(sused);
}

/* the code of pair q, element j in lane L's bytes of a super-block at word
 * base, by the design's formulas (section 2: fp4/u4; section 3: trellis) */
static unsigned lane_bytes_code(const uint32_t *c, mq_format f, size_t base, int L, int q, int j)
{
    switch (f) {
    case MQ_FMT_TRELLIS2:
        return (c[base + L * 4 + (q >> 3)] >> (4 * (q & 7) + 2 * j)) & 3u;
    case MQ_FMT_TRELLIS3:
    { /* the lane's six words as one 192-bit run: code j of pair q at bit 6q + 3j */
        uint64_t run[3];
        for (int i = 0; i < 3; i++) {
            int t0 = 2 * i, t1 = 2 * i + 1;
            run[i] = (uint64_t)c[base + (t1 < 4 ? L * 4 + t1 : 128 + L * 2 + t1 - 4)] << 32 |
                     c[base + (t0 < 4 ? L * 4 + t0 : 128 + L * 2 + t0 - 4)];
        }
        int at = 6 * q + 3 * j;
        unsigned v = (unsigned)(run[at / 64] >> (at % 64)) & 7u;
        if (at % 64 > 61) /* runs into the next 64 bits */
            v = (v | (unsigned)(run[at / 64 + 1] << (64 - at % 64))) & 7u;
        return v;
    }
    case MQ_FMT_TRELLIS4:
        return (c[base + (q >> 4) * 128 + L * 4 + ((q >> 2) & 3)] >> (8 * (q & 3) + 4 * j)) & 15u;
    case MQ_FMT_FP4: { /* word a = q / 4: magnitude at MAG[p] + 16j, sign at SGN[p] + 16j */
        static const int mag[4] = {0, 3, 8, 11}, sign[4] = {6, 7, 14, 15};
        uint32_t word = c[base + L * 4 + (q >> 2)];
        return ((word >> (mag[q & 3] + 16 * j)) & 7u) |
               ((word >> (sign[q & 3] + 16 * j)) & 1u) << 3;
    }
    default: /* u4, the lane's uint4: word a = q / 4, nibble p + 4j */
        return (c[base + L * 4 + (q >> 2)] >> (4 * ((q & 3) + 4 * j))) & 15u;
    }
}

/* Each lane's bytes of each super-block hold exactly the pairs of its
 * fragments: fragment p = h + 2s of atom a, the pair of MLX's coordinates. */
static void lane_check_fragments(const mq_weights *w, const mq_lane_geom *g, const char *name)
{
    int tr = mq_format_is_trellis(w->format), ksb = tr ? 128 : 64;
    int words = tr ? 64 * mq_format_bits(w->format) : 128, kbs = (w->K + ksb - 1) / ksb;
    size_t bad = 0, codes = 0;
    for (int nb = 0; nb < (w->N + 15) / 16; nb++)
        for (int kb = 0; kb < kbs; kb++) {
            size_t base = ((size_t)nb * kbs + kb) * words;
            for (int L = 0; L < 32; L++) {
                int row, col;
                mlx_coord(L, &row, &col);
                for (int q = 0; q < ksb / 4; q++)
                    for (int j = 0; j < 2; j++) {
                        int a = q >> 2, p = q & 3;
                        int n = 16 * nb + 8 * (p & 1) + row;
                        int k = kb * ksb + 16 * a + 8 * (p >> 1) + col + j;
                        unsigned want = k < w->K && n < w->N ? seed_code(w, k, n) : 0;
                        bad += lane_bytes_code(w->lane_codes, w->format, base, L, q, j) != want;
                        codes++;
                    }
            }
        }
    CHECK(bad == 0 && codes * g->bits == g->code_words * 32 && g->sb_words == words &&
              g->kb == kbs,
          "%s: each lane's %d bytes of a super-block hold exactly the pairs of its %d fragments "
          "(MLX coordinates; %zu codes fill %zu words): %zu differ", name,
          tr ? 8 * mq_format_bits(w->format) : 16, ksb / 4, codes, g->code_words, bad);
}

/* seed -> lane -> seed: rebuilt from the lane arrays alone, memcmp-equal */
static void lane_check_round_trip(const mq_weights *w, const char *name)
{
    static const char *const fields[] = {"packed", "scales", "zeros", "indices",
                                         "tscales", "grid", "su", "sv"};
    mq_weights v = *w, back;
    mq_error err;
    v.owned = 0;
    v.packed = NULL;
    v.scales = NULL;
    v.zeros = NULL;
    v.indices = NULL;
    v.tscales = NULL;
    CHECK(mq_weights_from_lane(&v, &back, &err) == MQ_OK, "%s: mq_weights_from_lane: %s", name,
          err.msg);
    if (err.code != MQ_OK)
        return;
    void **fa[MQ_WEIGHT_FIELDS], **fb[MQ_WEIGHT_FIELDS];
    size_t ba[MQ_WEIGHT_FIELDS], bb[MQ_WEIGHT_FIELDS];
    int nf = mq_weights_fields(w, fa, ba);
    mq_weights_fields(&back, fb, bb);
    int first = -1;
    for (int i = 0; i < nf && first < 0; i++)
        if (ba[i] != bb[i] || (ba[i] && memcmp(*fa[i], *fb[i], ba[i])))
            first = i;
    CHECK(nf == MQ_WEIGHT_SEED_FIELDS && first < 0 && back.n_levels == w->n_levels &&
              !back.lane_codes,
          "%s: seed -> lane -> seed equal on all %d seed arrays (and no lane arrays); first "
          "difference: %s", name, nf, first < 0 ? "none" : fields[first]);
    mq_weights_free(&back);
}

/* copies (one block, deep) carry the lane arrays; a non-owned copy is
 * refilled in place, an owned one re-prepared the same */
static void lane_check_copies(mq_weights *w, const char *name)
{
    mq_weights out[2], deep;
    void *block;
    mq_error err;
    void **fa[MQ_WEIGHT_FIELDS], **fb[MQ_WEIGHT_FIELDS];
    size_t ba[MQ_WEIGHT_FIELDS], bb[MQ_WEIGHT_FIELDS];
    int nf = mq_weights_all_fields(w, fa, ba), bad = 0;
    CHECK(nf == MQ_WEIGHT_FIELDS && ba[MQ_WEIGHT_SEED_FIELDS] && ba[MQ_WEIGHT_SEED_FIELDS + 1] &&
              !ba[MQ_WEIGHT_SEED_FIELDS + 2] == (w->format != MQ_FMT_U4),
          "%s: mq_weights_all_fields lists 11 arrays, the lane ones present (zeros for u4 only)",
          name);
    if (mq_weights_copies(w, 2, out, &block, &err) != MQ_OK) {
        CHECK(0, "%s: mq_weights_copies of prepared weights: %s", name, err.msg);
        return;
    }
    if (mq_weights_copy(&deep, w, &err) != MQ_OK) {
        CHECK(0, "%s: mq_weights_copy of prepared weights: %s", name, err.msg);
        mq_weights_copies_free(block);
        return;
    }
    for (int c = 0; c < 3; c++) {
        mq_weights *x = c < 2 ? &out[c] : &deep;
        mq_weights_all_fields(x, fb, bb);
        for (int i = MQ_WEIGHT_SEED_FIELDS; i < nf; i++)
            bad += ba[i] != bb[i] || (ba[i] && (*fa[i] == *fb[i] || memcmp(*fa[i], *fb[i], ba[i])));
    }
    CHECK(bad == 0, "%s: both block copies and the deep copy hold their own equal lane arrays: "
          "%d differ", name, bad);
    uint32_t first = out[0].lane_codes[0];
    out[0].lane_codes[0] ^= 1u;
    CHECK(mq_weights_prepare_lane(&out[0], &err) == MQ_OK && out[0].lane_codes[0] == first &&
              mq_weights_check(&out[0], &err) == MQ_OK,
          "%s: a borrowed copy with lane arrays is refilled in place: %s", name, err.msg);
    mq_weights_copies_free(block);
    CHECK(mq_weights_prepare_lane(&deep, &err) == MQ_OK &&
              !memcmp(deep.lane_codes, w->lane_codes, ba[MQ_WEIGHT_SEED_FIELDS]),
          "%s: preparing again gives the same lane codes: %s", name, err.msg);
    mq_weights_free(&deep);
}

/* mq_weights_check refuses a padding code bit or scale that is not zero */
static void lane_check_refusals(mq_weights *w, const mq_lane_geom *g, const char *name)
{
    mq_error err;
    CHECK(mq_weights_check(w, &err) == MQ_OK, "%s: prepared weights pass mq_weights_check: %s",
          name, err.msg);
    int pad_k = g->kp > w->K, pad_n = w->N % 16 != 0;
    for (int t = 0; t < 2; t++) {
        if (!(t ? pad_k : pad_n))
            continue;
        mq_lane_slot s;
        int k = t ? w->K : 0, n = t ? 0 : w->N;
        char want[64];
        snprintf(want, sizeof want, "padding at k=%d, n=%d", k, n);
        mq_lane_locate(g, k, n, &s);
        w->lane_codes[s.word] ^= 1u << s.bit;
        CHECK(mq_weights_check(w, &err) == MQ_E_WEIGHTS && strstr(err.msg, want),
              "%s: a set padding bit is refused with \"%s\", got: %s", name, want, err.msg);
        w->lane_codes[s.word] ^= 1u << s.bit;
    }
    if (pad_n) {
        mq_lane_slot s;
        mq_lane_locate(g, 0, w->N, &s);
        unsigned char *b = (unsigned char *)w->lane_scales + s.scale * g->scale_size;
        b[0] ^= 1;
        CHECK(mq_weights_check(w, &err) == MQ_E_WEIGHTS && strstr(err.msg, "scales padding"),
              "%s: a padding scale that is not 0 is refused, got: %s", name, err.msg);
        b[0] ^= 1;
    }
    CHECK(mq_weights_check(w, &err) == MQ_OK, "%s: restored weights pass again: %s", name,
          err.msg);
}

/* Each part of the repack alone, into arrays of a borrowed view (as the
 * MoE block fills its one-array fields), equals that part of the whole
 * repack in w; the other part's pointer stays NULL; a part whose array is
 * absent is refused. */
static void lane_check_parts(const mq_weights *w, const mq_lane_geom *g, const char *name)
{
    mq_error err;
    size_t cb = g->code_words * 4, sb = g->scale_count * g->scale_size;
    int u4 = w->format == MQ_FMT_U4;
    unsigned char *codes = malloc(cb), *scales = malloc(sb), *zeros = malloc(g->scale_count);
    if (!codes || !scales || !zeros) {
        CHECK(0, "%s: memory", name);
        free(codes), free(scales), free(zeros);
        return;
    }
    memset(codes, 0x5a, cb), memset(scales, 0x5a, sb), memset(zeros, 0x5a, g->scale_count);
    mq_weights v = *w;
    v.owned = 0;
    v.lane_codes = (uint32_t *)(void *)codes;
    v.lane_scales = NULL;
    v.lane_zeros = NULL;
    int ok = mq_weights_prepare_lane_part(&v, MQ_LANE_CODES, &err) == MQ_OK;
    CHECK(ok && !memcmp(codes, w->lane_codes, cb) && !v.lane_scales,
          "%s: the codes alone are the whole repack's codes (%s)", name, ok ? "" : err.msg);
    v.lane_codes = NULL;
    v.lane_scales = (void *)scales;
    v.lane_zeros = u4 ? zeros : NULL;
    ok = mq_weights_prepare_lane_part(&v, MQ_LANE_SCALES, &err) == MQ_OK;
    CHECK(ok && !memcmp(scales, w->lane_scales, sb) &&
              (!u4 || !memcmp(zeros, w->lane_zeros, g->scale_count)) && !v.lane_codes,
          "%s: the scales%s alone are the whole repack's (%s)", name, u4 ? " and zeros" : "",
          ok ? "" : err.msg);
    v.lane_scales = NULL;
    CHECK(mq_weights_prepare_lane_part(&v, MQ_LANE_SCALES, &err) == MQ_E_ARG &&
              strstr(err.msg, "scales part alone") && strstr(err.msg, "in place"),
          "%s: the scales part without its array is refused: '%s'", name, err.msg);
    CHECK(mq_weights_prepare_lane_part(&v, MQ_LANE_CODES, &err) == MQ_E_ARG &&
              strstr(err.msg, "codes part alone"),
          "%s: the codes part without its array is refused: '%s'", name, err.msg);
    if (u4) {
        v.lane_scales = (void *)scales;
        v.lane_zeros = NULL;
        CHECK(mq_weights_prepare_lane_part(&v, MQ_LANE_SCALES, &err) == MQ_E_ARG,
              "%s: u4's scales part without its zero points' array is refused: '%s'", name,
              err.msg);
        v.lane_scales = NULL;
    }
    CHECK(mq_weights_prepare_lane_part(&v, 4, &err) == MQ_E_ARG && strstr(err.msg, "parts 4"),
          "%s: parts 4 is refused, named: '%s'", name, err.msg);
    free(codes), free(scales), free(zeros);
}

static void lane_case(mq_format f, int group, int N, int K)
{
    char name[64];
    snprintf(name, sizeof name, "%s g%d N=%d K=%d", mq_format_name(f), group, N, K);
    mq_weights w;
    mq_lane_geom g;
    mq_error err;
    if (lane_weights(f, K, N, group, (unsigned)(K * 31 + N * 7 + group + f), &w)) {
        CHECK(0, "%s: allocating the test weights", name);
        return;
    }
    CHECK(mq_weights_prepare_lane(&w, &err) == MQ_OK && w.lane_codes && w.lane_scales &&
              (f == MQ_FMT_U4) == (w.lane_zeros != NULL),
          "%s: mq_weights_prepare_lane fills codes, scales (and u4's zeros): %s", name, err.msg);
    CHECK(mq_lane_geometry(f, K, N, group, &g, &err) == MQ_OK, "%s: geometry: %s", name, err.msg);
    int tr = mq_format_is_trellis(f), ksb = tr ? 128 : 64;
    int kp = (K + ksb - 1) / ksb * ksb, n16 = (N + 15) / 16;
    CHECK(g.kp == kp && g.gp * group == kp && g.n16 == n16 &&
              g.scale_count == (size_t)n16 * g.gp * 16,
          "%s: geometry Kp=%d, Gp=%d, N16=%d, %d scales; got %d, %d, %d, %zu", name, kp, kp / group,
          n16, n16 * (kp / group) * 16, g.kp, g.gp, g.n16, g.scale_count);
    if (!w.lane_codes) {
        mq_weights_free(&w);
        return;
    }
    lane_check_locate(&w, &g, name);
    lane_check_fragments(&w, &g, name);
    lane_check_round_trip(&w, name);
    lane_check_copies(&w, name);
    lane_check_refusals(&w, &g, name);
    lane_check_parts(&w, &g, name);
    size_t lane = g.code_words * 4 + g.scale_count * g.scale_size +
                  (f == MQ_FMT_U4 ? g.scale_count : 0) +
                  (tr ? (size_t)K * 4 + (size_t)w.n_levels * 4 : 0);
    int same = !tr && N % 16 == 0 && K % 64 == 0;
    CHECK(mq_weights_bytes_layout(&w, MQ_LAYOUT_LANE) == lane &&
              mq_weights_bytes_layout(&w, MQ_LAYOUT_SEED) == mq_weights_bytes(&w) &&
              (!same || lane == mq_weights_bytes(&w)),
          "%s: lane bytes %zu (the seed's %zu when 16 | N and 64 | K), got %zu", name, lane,
          mq_weights_bytes(&w), mq_weights_bytes_layout(&w, MQ_LAYOUT_LANE));
    mq_weights_free(&w);
}

static void test_lane_layout(void)
{
    /* section 1's table: the lane owning (r, c..c+1), c = 0, 2, 4, 6, and the
     * tensor-core permutation pi(t) = lane of (t/4, 2(t%4)) */
    static const int owner[8][4] = {{0, 1, 8, 9},     {2, 3, 10, 11},   {4, 5, 12, 13},
                                    {6, 7, 14, 15},   {16, 17, 24, 25}, {18, 19, 26, 27},
                                    {20, 21, 28, 29}, {22, 23, 30, 31}};
    static const int pi[32] = {0,  1,  8,  9,  2,  3,  10, 11, 4,  5,  12, 13, 6,  7,  14, 15,
                               16, 17, 24, 25, 18, 19, 26, 27, 20, 21, 28, 29, 22, 23, 30, 31};
    mq_lane_geom g;
    mq_lane_slot s;
    mq_error err;
    int bad = 0, badpi = 0;
    CHECK(mq_lane_geometry(MQ_FMT_FP4, 64, 16, 32, &g, &err) == MQ_OK, "fp4 16x64 geometry: %s",
          err.msg);
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++) { /* fp4, block 0: word = lane * 4 + atom */
            mq_lane_locate(&g, c, r, &s);
            int row, col;
            mlx_coord(owner[r][c / 2], &row, &col);
            bad += (int)(s.word / 4) != owner[r][c / 2] || row != r || col != (c & 6);
        }
    for (int t = 0; t < 32; t++) {
        mq_lane_locate(&g, 2 * (t % 4), t / 4, &s);
        int closed = (t & 17) | ((t & 2) << 2) | ((t >> 1) & 6);
        badpi += (int)(s.word / 4) != pi[t] || pi[t] != closed;
    }
    CHECK(bad == 0,
          "the 8x8 fragment owners are section 1's table and MLX's coordinates: %d differ", bad);
    CHECK(badpi == 0, "pi(t) = frag_lane(t/4, 2(t%%4)) equals its closed form and list: %d differ",
          badpi);
    CHECK(!strcmp(mq_layout_name(MQ_LAYOUT_SEED), "seed") &&
              !strcmp(mq_layout_name(MQ_LAYOUT_LANE), "lane"),
          "layout names seed, lane");
    static const int shapes[][2] = {{16, 64}, {40, 96}, {8, 128}, {20, 192},
                                    {48, 208}, {40, 256}, {64, 4096}}; /* N, K */
    static const int groups[] = {32, 64, 128};
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int gi = 0; gi < 3; gi++)
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
                if (mq_check_k((mq_format)f, shapes[i][1], groups[gi], NULL) == MQ_OK)
                    lane_case((mq_format)f, groups[gi], shapes[i][0], shapes[i][1]);
    mq_weights w, back;
    CHECK(lane_weights(MQ_FMT_U4, 64, 16, 32, 1, &w) == 0, "u4 weights");
    CHECK(mq_weights_from_lane(&w, &back, &err) == MQ_E_WEIGHTS && strstr(err.msg, "not prepared"),
          "unprepared weights are refused by mq_weights_from_lane: %s", err.msg);
    mq_weights view = w;
    view.owned = 0;
    CHECK(mq_weights_prepare_lane(&view, &err) == MQ_E_ARG && !view.lane_codes,
          "borrowed weights without lane arrays are refused new ones: %s", err.msg);
    mq_weights_free(&w);
}

int main(void)
{
    test_lane_layout();
    return check_done("lane_layout");
}
