/* mq_lane_layout.h - the lane-major weight layout's part of the library's
 * interface (kernels/layout_lane.c): which arrays a kernel reads, the
 * layout's geometry, where a weight's code lives, the repack and its
 * inverse. Included by mq.h where its types are defined; include mq.h. */
#ifndef MQ_LANE_LAYOUT_H
#define MQ_LANE_LAYOUT_H

/* Which arrays of mq_weights a kernel reads: SEED, the seeds' packed /
 * scales / zeros / indices / tscales (+ grid, su, sv); LANE, lane_codes /
 * lane_scales / lane_zeros (+ grid, su for trellis). */
typedef enum { MQ_LAYOUT_SEED = 0, MQ_LAYOUT_LANE } mq_layout;
const char *mq_layout_name(mq_layout l); /* "seed", "lane" ("?" otherwise) */

/* LANE: W^T (n rows, k columns) cut into super-blocks of 16 columns x KSB K
 * (KSB 64 for fp4/u4, 128 for trellis), column blocks outermost, K inside.
 * In a super-block, lane L of a simdgroup holds, for each 16 x 16 atom a and
 * each of its four 8x8 fragments p = h + 2s (h: columns 8h.., s: K 8s..),
 * the pair (n = 8h + frag_row(L), k = 16a + 8s + frag_col(L) + j), j = 0, 1,
 * Apple's (and MLX's) simdgroup-matrix fragment layout: one 16-byte load
 * (trellis: 16, 24, 32 bytes) gives a lane the codes of 16 fragments.
 * u4: word a of the lane's uint4, nibble p + 4j (Marlin's interleave).
 * fp4: word a too, but each code split where the decode wants it: its
 * magnitude (bits 0-2) at bit MAG[p] + 16j, its sign (bit 3) at SGN[p] + 16j,
 * MAG = {0, 3, 8, 11}, SGN = {6, 7, 14, 15}: a shift (pairs 0, 2: one shift
 * and one mask for both) puts them at an FP16's bits 9-11 and 15.
 * trellis, pair q = 4a + p, the pair's two indices adjacent (one pair-LUT
 * field): b=2 word L*4 + q/8, bits 4(q%8) + 2j; b=4 word (q/16)*128 + L*4 +
 * (q/4)%4, bits 8(q%4) + 4j; b=3 the lane's six words (L*4 .. L*4 + 3,
 * then 128 + L*2, 128 + L*2 + 1) as one 192-bit run, idx_j of pair q at bit
 * 6q + 3j of it (a code may run into the next word). Scales (and u4 zeros): [N16][Gp][8][2], the
 * pair (column n, n + 8) of each group and row n % 8 adjacent; trellis scales
 * are tscales x sv (exact: sv is +-1). Padding: the code of every (k, n)
 * with n >= N or k >= K is 0, the scale and zero of every column n >= N or
 * group past ceil(K / group) is 0. fp4/u4 padded K rows are whole groups, so
 * their weights are +0; in a trellis partial last group they are grid[0] x
 * the group's scale, so a kernel must read A as zero from K on. */
typedef struct {
    mq_format format;
    int K, N, group;
    int bits;           /* code bits: 4 (fp4, u4), 2, 3, 4 (trellis) */
    int ksb;            /* K of one super-block: 64 (fp4, u4), 128 (trellis) */
    int n16, kb;        /* 16-column blocks, super-blocks along K */
    int kp, gp;         /* padded K (kb x ksb) and its groups (kp / group) */
    int sb_words;       /* 32-bit words per super-block: 128 (fp4, u4), 64 x bits */
    size_t code_words;  /* lane_codes: n16 x kb x sb_words */
    size_t scale_count; /* lane_scales (and lane_zeros) entries: n16 x gp x 16 */
    size_t scale_size;  /* bytes of one scale: 2 (FP16), 4 (trellis FP32) */
} mq_lane_geom;

/* The lane layout's sizes for a format and shape (MQ_E_SHAPE as
 * mq_weights_alloc refuses them). */
mq_status mq_lane_geometry(mq_format f, int K, int N, int group, mq_lane_geom *g,
                           mq_error *err);

/* Where the code of weight (k, n) lives, k < kp, n < 16 n16 (padding too). */
typedef struct {
    size_t word;  /* lane_codes[word] holds the code (fp4: its magnitude; trellis3: its low
                   * bits where the code runs into the next word) */
    int bit;      /* from this bit */
    int width;    /* this many bits: 4 (u4, trellis4), 3 (fp4, trellis3), 2 (trellis2);
                   * trellis3 fewer where it runs on */
    size_t hi_word; /* fp4: the word of the sign; trellis3: the next word */
    int hi_bit;     /* from this bit; -1 where the code has no second part */
    int hi_width;   /* this many bits: 1 (fp4), 1 or 2 (trellis3) */
    int hi_shift;   /* their place in the code: 3 (fp4, the sign), trellis3 width */
    size_t scale;   /* lane_scales (and lane_zeros) index of (k / group, n) */
} mq_lane_slot;
void mq_lane_locate(const mq_lane_geom *g, int k, int n, mq_lane_slot *s);

/* Fill w's lane arrays from its seed arrays (allocated when absent, which
 * needs owned weights; refilled in place when present), padding zero.
 * Done once, when weights are prepared: O(K N). */
mq_status mq_weights_prepare_lane(mq_weights *w, mq_error *err);
/* One part of it: MQ_LANE_CODES, MQ_LANE_SCALES (with u4's zero points) or
 * both (= mq_weights_prepare_lane). A part alone is refilled in place and
 * needs its arrays present (a view whose lane arrays are one device
 * buffer's, as the MoE block's fields, which hold one array each: each is
 * repacked once). */
enum { MQ_LANE_CODES = 1, MQ_LANE_SCALES = 2 };
mq_status mq_weights_prepare_lane_part(mq_weights *w, int parts, mq_error *err);
/* dst (allocated here, owned, no lane arrays) gets the seed arrays rebuilt
 * bit for bit from src's lane arrays and grid, n_levels, su, sv (src's seed
 * arrays are not read and may be NULL). Trellis tile bits past N come back
 * zero, as mq_weights_alloc makes them. */
mq_status mq_weights_from_lane(const mq_weights *src, mq_weights *dst, mq_error *err);
/* Bytes a kernel reading this layout reads (padding included); SEED is
 * mq_weights_bytes. LANE: codes + scales (+ zeros) (+ trellis grid and su). */
size_t mq_weights_bytes_layout(const mq_weights *w, mq_layout layout);

/* Quantize float weights W [K][N] (row-major) into a format.
 * fp4: scale = absmax/6 per group and column, nearest E2M1 code.
 * u4: asymmetric min/max, scale = (max-min)/15, integer zero point.
 * trellis: signs su, sv (NULL: all +1), grid (NULL: the default grid of
 * mq_trellis_default_grid), scale = absmax/max|grid|, nearest grid level. */
typedef struct {
    const float *su, *sv, *grid;
    int n_levels;
} mq_trellis_opts;

mq_status mq_quantize(mq_format f, const float *W, int K, int N, int group,
                      const mq_trellis_opts *topts, mq_weights *out, mq_error *err);
/* Exact dequantization to float64 W [K][N]. */
mq_status mq_dequantize(const mq_weights *w, double *W, mq_error *err);
/* The default trellis codebook: 2^bits levels evenly spaced, symmetric, max 1. */
void mq_trellis_default_grid(int bits, float *grid);

#endif
