/* gemv_stream.c - the decode path (marlin_gemv_decode, gemv_trellis_decode)
 * in the CPU model: the weights streamed in memory order by every core.
 *
 * A CPU core keeps many cache lines in flight only when its loads are
 * sequential (the hardware prefetchers follow a stream within a page, not a
 * 64-512 byte piece of each packed row 16-56 KB apart, which is what a
 * 16-128 column tile of [K/8][N] words reads). So the work is cut along K:
 * a unit is a run of whole groups (K slice) x a wide column range (all of N
 * unless the per-row partial sums would leave L1), and reads its packed rows
 * (fp4/u4) or its bands of 16x16 index tiles (trellis) front to back. The K
 * slices' partial outputs are summed afterwards in slice order, so results
 * do not depend on the thread count's timing.
 *
 * Decoding is a register table lookup per 16 codes: one 16-lane permute of
 * FP32 values (VPERMPS reads the low 4 bits of each index, so a packed word
 * shifted by 4j needs no mask; trellis tables repeat every 2^bits entries
 * for the same reason), then an FMA with the activation. (VDPBF16PS with
 * a 16-bit permute, the fused engine's path, measured slower here on a
 * 16-core AVX-512 BF16 host: 4.6 vs 3.8 ms for fp4 M=1 N=4096 K=14336 on
 * one core, 56 vs 83 GB/s on 16.) Trellis index rows
 * (2*bits bytes) become 16 lanes with one byte shuffle, a widening and a
 * variable shift. Numerics are the fused engine's: products summed in FP32
 * within a group, u4 as q - z per weight, the group's scale (trellis:
 * tscale x sv) applied once per group and column, su folded into the
 * activations.
 *
 * Of the candidate's tunables the CPU decode honours tile_m (rows that share
 * one pass over the weights); tile_n and tile_k shape the GPU kernel's
 * simdgroups and have no CPU counterpart. */
#include <stdint.h>
#include <string.h>

#include "simd.h"
#include "tile_decode.h"
#include "mq_internal.h"

/* per-row partial sums kept at most this many floats (16 KB: L1 with the
 * accumulators beside them) */
#define PART_FLOATS 4096
/* software prefetch distance along a packed row, in words (a build-time
 * knob for measuring it) */
#ifndef MQ_GEMV_PREFETCH_WORDS
#define MQ_GEMV_PREFETCH_WORDS 512
#endif
/* A prefetch `bytes` past p: the address is made as an integer (it may lie
 * past the array, where pointer arithmetic would be undefined; a prefetch
 * of any address is harmless). */
#define PREFETCH_AHEAD(p, bytes) \
    __builtin_prefetch((const void *)((uintptr_t)(const void *)(p) + (bytes)), 0, 3)

int mq_gemv_max_cols(int rows)
{
    return mq_max(16, (PART_FLOATS / mq_max(1, rows)) & ~15);
}

void mq_gemv_schedule(mq_gemv_job *j, int threads)
{
    const mq_problem *p = j->p;
    int rows = mq_max(1, mq_min(j->rows, p->M));
    int wmax = mq_gemv_max_cols(rows);
    j->col_ranges = mq_cdiv(p->N, wmax);
    j->width = (mq_cdiv(p->N, j->col_ranges) + 15) & ~15;
    j->col_ranges = mq_cdiv(p->N, j->width);
    int groups = mq_group_count(p->K, p->group);
    int slices = mq_min(groups, mq_max(1, mq_cdiv(2 * threads, j->col_ranges)));
    j->groups_per_slice = mq_cdiv(groups, slices);
    j->slices = mq_cdiv(groups, j->groups_per_slice);
}

size_t mq_gemv_workspace_floats(const mq_gemv_job *j)
{
    return j->slices > 1 ? (size_t)j->slices * j->p->M * j->p->N : 0;
}

/* A rows [m0, m0+mr) at k in [k0, k0+kk) as FP32, times su[k] for trellis. */
static void load_a(const mq_gemv_job *j, int m0, int mr, int k0, int kk, float *a)
{
    mq_load_a_tile(j->A, j->p->K, m0, mr, k0, kk, a, kk);
    if (mq_format_is_trellis(j->w->format))
        for (int m = 0; m < mr; m++)
            for (int k = 0; k < kk; k++)
                a[(size_t)m * kk + k] *= j->w->su[k0 + k];
}

/* acc[m][c] += part[m][c] * scale[c] over the unit's columns, part zeroed. */
static void flush_group(const mq_gemv_job *j, int g, int c0, int ncols, int mr, float *part,
                        float *acc, int ld)
{
    for (int v = 0; v * 16 < ncols; v++) {
        v16f sc = mq_group_scales16(j->w, g, c0 + 16 * v, mq_min(16, ncols - 16 * v));
        for (int m = 0; m < mr; m++) {
            float *pp = part + (size_t)m * ld + 16 * v, *ap = acc + (size_t)m * ld + 16 * v;
            v16f_store(ap, v16f_load(ap) + v16f_load(pp) * sc);
            v16f_store(pp, v16f_splat(0));
        }
    }
}

/* fp4 / u4: packed rows of group g, columns [c0, c0+ncols), into part. */
MQ_INLINE void q4_group(const mq_gemv_job *j, int g, int c0, int ncols, int mr, const float *a,
                        float *part, int ld, const float *zf, v16f lut, const int U4)
{
    const mq_weights *w = j->w;
    int rpg = w->group / 8, nfull = ncols / 16, tail = ncols % 16;
    for (int r = 0; r < rpg; r++) {
        const uint32_t *row = w->packed + (size_t)(g * rpg + r) * w->N + c0;
        for (int v = 0; v <= nfull; v++) {
            if (v == nfull && !tail)
                break;
            PREFETCH_AHEAD(row + 16 * v, 4 * MQ_GEMV_PREFETCH_WORDS);
            v16u wv = v < nfull ? *(const v16u_u *)(row + 16 * v) : v16u_load_n(row + 16 * v, tail);
            v16f d[8];
            v16f z = U4 ? v16f_load(zf + 16 * v) : v16f_splat(0);
            for (int k = 0; k < 8; k++) {
                d[k] = v16f_lut16(lut, wv >> (uint32_t)(4 * k));
                if (U4)
                    d[k] -= z; /* q - z, exactly */
            }
            for (int m = 0; m < mr; m++) {
                const float *am = a + (size_t)m * w->group + 8 * r;
                float *pp = part + (size_t)m * ld + 16 * v;
                v16f s0 = am[0] * d[0], s1 = am[1] * d[1]; /* two chains: latency */
                for (int k = 2; k < 8; k += 2) {
                    s0 += am[k] * d[k];
                    s1 += am[k + 1] * d[k + 1];
                }
                v16f_store(pp, v16f_load(pp) + (s0 + s1));
            }
        }
    }
}

#if MQ_HAVE_AVX512
/* One index row (2*bits bytes, broadcast to every 128-bit lane) into 16
 * lanes with one in-lane byte shuffle: lane i gets the two bytes from byte
 * bits*i/8 (the rest zero), then shifts right by bits*i%8. */
typedef struct {
    __m512i shuf, shift;
} row_decoder;

static row_decoder row_decoder_for(int bits)
{
    uint8_t ctl[64];
    uint32_t sh[16];
    for (int i = 0; i < 16; i++) {
        int bit = bits * i, byte = bit / 8;
        ctl[4 * i] = (uint8_t)byte; /* byte numbers within the lane's own copy */
        ctl[4 * i + 1] = (uint8_t)(byte + 1);
        ctl[4 * i + 2] = ctl[4 * i + 3] = 0x80; /* zero */
        sh[i] = (uint32_t)(bit % 8);
    }
    row_decoder rd;
    rd.shuf = _mm512_loadu_si512(ctl);
    rd.shift = _mm512_loadu_si512(sh);
    return rd;
}

/* FULL: 8 bytes may be read (the row is not the array's last). */
MQ_INLINE v16u index_row(const row_decoder *rd, const uint8_t *row, int bits, const int FULL)
{
    uint64_t x = 0;
    memcpy(&x, row, FULL ? 8 : (size_t)(2 * bits)); /* FULL: a broadcast load */
    __m512i b = _mm512_set1_epi64((long long)x);
    return (v16u)_mm512_srlv_epi32(_mm512_shuffle_epi8(b, rd->shuf), rd->shift);
}
#else
typedef struct {
    int unused;
} row_decoder;

static row_decoder row_decoder_for(int bits)
{
    (void)bits;
    row_decoder rd = {0};
    return rd;
}

MQ_INLINE v16u index_row(const row_decoder *rd, const uint8_t *row, int bits, const int FULL)
{
    (void)rd;
    (void)FULL;
    v16u r;
    for (int i = 0; i < 16; i++) {
        int bit = bits * i;
        uint32_t x = row[bit / 8];
        if (bit % 8 + bits > 8)
            x |= (uint32_t)row[bit / 8 + 1] << 8;
        r[i] = x >> (bit % 8);
    }
    return r;
}
#endif

/* One 16x16 index tile times 16 activations (one row) into part: four
 * chains of four FMAs, spelled out so the sums stay in registers. */
MQ_INLINE void trellis_tile_row1(const row_decoder *rd, const uint8_t *tile, int bits,
                                 const float *am, v16f lut, float *pp, const int FULL)
{
/* rows 0-14 may read 8 bytes (2 bits a code or more: 28 * bits + 8 <= 32 * bits) */
#define TR_D(r) v16f_lut16(lut, index_row(rd, tile + 2 * bits * (r), bits, 1))
    v16f s0 = am[0] * TR_D(0), s1 = am[1] * TR_D(1), s2 = am[2] * TR_D(2), s3 = am[3] * TR_D(3);
    s0 += am[4] * TR_D(4);
    s1 += am[5] * TR_D(5);
    s2 += am[6] * TR_D(6);
    s3 += am[7] * TR_D(7);
    s0 += am[8] * TR_D(8);
    s1 += am[9] * TR_D(9);
    s2 += am[10] * TR_D(10);
    s3 += am[11] * TR_D(11);
    s0 += am[12] * TR_D(12);
    s1 += am[13] * TR_D(13);
    s2 += am[14] * TR_D(14);
    s3 += am[15] * v16f_lut16(lut, index_row(rd, tile + 2 * bits * 15, bits, FULL));
#undef TR_D
    v16f_store(pp, v16f_load(pp) + ((s0 + s1) + (s2 + s3)));
}

/* One 16x16 index tile times 16 activations of `rows` rows (stride lda; at
 * most MR, a count known at compile time at every call, so the sums stay in
 * registers) into part (stride ld): each decoded row of 16 goes at once into
 * every row's FMA chain. A block of fewer rows than MR repeats its last row
 * in the spare chains and stores only its own; below 4 rows each row keeps
 * two chains, so the FMA latency does not bind. */
MQ_INLINE void trellis_tile_rows(const row_decoder *rd, const uint8_t *tile, int bits,
                                 const float *a, int lda, v16f lut, float *part, int ld,
                                 const int MR, int rows, int full)
{
    v16f s[8][2];
    const float *ar[8];
    const int chains = MR < 4 ? 2 : 1;
    for (int m = 0; m < MR; m++) {
        s[m][0] = s[m][1] = v16f_splat(0);
        ar[m] = a + (size_t)(m < rows ? m : rows - 1) * lda;
    }
    const int odd = chains > 1 ? 1 : 0; /* the chain of odd tile rows */
    for (int r = 0; r < 16; r += 2) { /* two rows a step: every chain index a constant */
        v16f d0 = v16f_lut16(lut, index_row(rd, tile + 2 * bits * r, bits, 1));
        v16f d1 = v16f_lut16(lut, full || r < 14
                                      ? index_row(rd, tile + 2 * bits * (r + 1), bits, 1)
                                      : index_row(rd, tile + 2 * bits * (r + 1), bits, 0));
        for (int m = 0; m < MR; m++) {
            s[m][0] += ar[m][r] * d0;
            s[m][odd] += ar[m][r + 1] * d1;
        }
    }
    for (int m = 0; m < rows; m++) {
        float *pp = part + (size_t)m * ld;
        v16f_store(pp, v16f_load(pp) + (chains > 1 ? s[m][0] + s[m][1] : s[m][0]));
    }
}

/* trellis: the 16-row bands of group g, column tiles from c0 / 16, into part. */
static void trellis_group(const mq_gemv_job *j, int g, int kk, int c0, int ncols, int mr,
                          const float *a, float *part, int ld, v16f lut, const row_decoder *rd)
{
    const mq_weights *w = j->w;
    int bits = mq_format_bits(w->format), tb = mq_trellis_tile_bytes(bits);
    int tiles_n = mq_cdiv(w->N, 16), ntiles = mq_cdiv(ncols, 16);
    /* a tile whose 16 rows can all be read 8 bytes at a time: all but the array's last */
    size_t full_tiles = (size_t)mq_cdiv(w->K, 16) * tiles_n - 1;
    for (int band = 0; band < kk / 16; band++) { /* kk < group: seed 004's partial last group */
        int kb = g * (w->group / 16) + band;
        const uint8_t *tile = w->indices + ((size_t)kb * tiles_n + c0 / 16) * tb;
        if (mr == 1) { /* one row: each decoded row of 16 goes straight into an FMA */
            for (int t = 0; t < ntiles; t++, tile += tb) {
                PREFETCH_AHEAD(tile, 4 * MQ_GEMV_PREFETCH_WORDS);
                PREFETCH_AHEAD(tile, 4 * MQ_GEMV_PREFETCH_WORDS + 64);
                if ((size_t)(tile - w->indices) / tb < full_tiles)
                    trellis_tile_row1(rd, tile, bits, a + 16 * band, lut, part + 16 * t, 1);
                else /* the array's last tile: its last row ends the array */
                    trellis_tile_row1(rd, tile, bits, a + 16 * band, lut, part + 16 * t, 0);
            }
            continue;
        }
        for (int t = 0; t < ntiles; t++, tile += tb) {
            PREFETCH_AHEAD(tile, 4 * MQ_GEMV_PREFETCH_WORDS);
            PREFETCH_AHEAD(tile, 4 * MQ_GEMV_PREFETCH_WORDS + 64);
            int full = (size_t)(tile - w->indices) / tb < full_tiles;
            const float *at = a + 16 * band;
            float *pt = part + 16 * t;
            /* rows in blocks of up to 8, each decoded tile row used by all of a block */
            for (int m = 0; m < mr; m += 8) {
                int n = mq_min(8, mr - m);
                const float *am = at + (size_t)m * kk;
                float *pm = pt + (size_t)m * ld;
                if (n > 4)
                    trellis_tile_rows(rd, tile, bits, am, kk, lut, pm, ld, 8, n, full);
                else if (n > 2)
                    trellis_tile_rows(rd, tile, bits, am, kk, lut, pm, ld, 4, n, full);
                else
                    trellis_tile_rows(rd, tile, bits, am, kk, lut, pm, ld, 2, n, full);
            }
        }
    }
}

void mq_gemv_unit(const mq_gemv_job *j, mq_scratch *s, int unit)
{
    const mq_problem *p = j->p;
    int slice = unit / j->col_ranges, range = unit % j->col_ranges;
    int g0 = slice * j->groups_per_slice;
    int g1 = mq_min(g0 + j->groups_per_slice, mq_group_count(p->K, p->group));
    int c0 = range * j->width, ncols = mq_min(j->width, p->N - c0);
    float *out = j->slices > 1 ? j->out + (size_t)slice * p->M * p->N : j->out;
    mq_gemv_part(j, s, g0, g1, c0, ncols, out);
}

void mq_gemv_part(const mq_gemv_job *j, mq_scratch *s, int g0, int g1, int c0, int ncols,
                  float *out)
{
    const mq_problem *p = j->p;
    const mq_weights *w = j->w;
    int ld = (ncols + 15) & ~15, rows = mq_max(1, j->rows);
    int trellis = mq_format_is_trellis(w->format), u4 = w->format == MQ_FMT_U4;
    v16f lut = mq_format_lut(w);
    if (trellis) { /* repeat every 2^bits entries: the permute reads 4 index bits */
        int period = 1 << mq_format_bits(w->format);
        for (int i = period; i < 16; i++)
            lut[i] = lut[i % period];
    }
    row_decoder rd = row_decoder_for(trellis ? mq_format_bits(w->format) : 4);
    for (int m0 = 0; m0 < p->M; m0 += rows) {
        int mr = mq_min(rows, p->M - m0);
        float *part = s->b_tile, *acc = s->acc, *a = s->a_tile, *zf = s->b_tile + (size_t)mr * ld;
        memset(part, 0, sizeof(float) * (size_t)mr * ld);
        memset(acc, 0, sizeof(float) * (size_t)mr * ld);
        for (int g = g0; g < g1; g++) {
            int kk = mq_min(p->group, p->K - g * p->group);
            load_a(j, m0, mr, g * p->group, kk, a);
            if (trellis) {
                trellis_group(j, g, kk, c0, ncols, mr, a, part, ld, lut, &rd);
            } else if (u4) {
                const uint8_t *z = w->zeros + (size_t)g * w->N + c0;
                for (int c = 0; c < ld; c++)
                    zf[c] = c < ncols ? (float)z[c] : 0.0f;
                q4_group(j, g, c0, ncols, mr, a, part, ld, zf, lut, 1);
            } else {
                q4_group(j, g, c0, ncols, mr, a, part, ld, NULL, lut, 0);
            }
            flush_group(j, g, c0, ncols, mr, part, acc, ld);
        }
        mq_store_tile(acc, ld, mr, ncols, out + (size_t)m0 * p->N + c0, p->N);
    }
}

void mq_gemv_reduce(const mq_gemv_job *j, int chunk, float *C)
{
    size_t plane = (size_t)j->p->M * j->p->N;
    size_t i0 = (size_t)chunk * MQ_GEMV_REDUCE_CHUNK;
    size_t i1 = i0 + MQ_GEMV_REDUCE_CHUNK < plane ? i0 + MQ_GEMV_REDUCE_CHUNK : plane;
    size_t i = i0;
    for (; i + 16 <= i1; i += 16) {
        v16f acc = v16f_load(j->out + i);
        for (int s = 1; s < j->slices; s++)
            acc += v16f_load(j->out + (size_t)s * plane + i);
        v16f_store(C + i, acc);
    }
    for (; i < i1; i++) {
        float acc = j->out[i];
        for (int s = 1; s < j->slices; s++)
            acc += j->out[(size_t)s * plane + i];
        C[i] = acc;
    }
}
