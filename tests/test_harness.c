/* test_harness.c - the harness's parts: statistics on synthetic samples,
 * chips as data (the shipped file and its binned parts, unknown names,
 * broken files, like: overrides, chains, cycles), the
 * candidate space on two chips (hand-counted), the results store (round
 * trip; truncated, malformed and newer-schema files refused with their line),
 * a deliberately wrong kernel recorded as wrong and never ranked, and FP16
 * output held to the bound of its arithmetic. The sized read and the
 * weight cache are test_bench_io.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* mkdtemp: macOS declares it here only */

#include "check.h"
#include "chips.h"
#include "measure.h"
#include "results.h"
#include "space.h"
#include "stats.h"
#include "testdata.h"

static char tmpdir[] = "/tmp/mq-test-harness-XXXXXX";

static const char *tmp_path(const char *name)
{
    static char buf[8][512];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void test_stats(void)
{
    double s[100];
    for (int i = 0; i < 100; i++) /* 1..100 in a scrambled order */
        s[i] = (double)((i * 37) % 100 + 1);
    mq_stats st;
    mq_stats_compute(s, 100, &st);
    CHECK(st.median == 50.5, "median of 1..100 is 50.5, got %g", st.median);
    CHECK(fabs(st.p10 - 10.9) < 1e-12 && fabs(st.p90 - 90.1) < 1e-12,
          "p10 10.9 and p90 90.1 (GSL linear quantiles), got %g and %g", st.p10, st.p90);
    CHECK(st.mad == 25.0, "MAD of 1..100 is 25, got %g", st.mad);
    /* ranks 50 -+ 1.96*sqrt(100)/2 = 40.2 .. 59.8 -> 40th and 60th values */
    CHECK(st.ci_lo == 40 && st.ci_hi == 60, "95%% CI of the median [40, 60], got [%g, %g]",
          st.ci_lo, st.ci_hi);
    CHECK(fabs(mq_stats_ci_rel(&st) - 10.0 / 50.5) < 1e-12, "relative half-width 10/50.5");
    double few[3] = {3, 1, 2};
    mq_stats_compute(few, 3, &st);
    CHECK(st.median == 2 && st.ci_lo == 1 && st.ci_hi == 3,
          "with 3 samples the CI is the whole range [1, 3], got [%g, %g]", st.ci_lo, st.ci_hi);
    double same[20];
    for (int i = 0; i < 20; i++)
        same[i] = 7.0;
    mq_stats_compute(same, 20, &st);
    CHECK(st.mad == 0 && mq_stats_ci_rel(&st) == 0, "constant samples: MAD 0, CI width 0");
}

static void test_chips(void)
{
    char err[1024];
    mq_chip_db db;
    CHECK(mq_chips_load(mq_chips_default_path(), &db, err, sizeof err) == 0,
          "the shipped chips file loads: %s", err);
    CHECK(db.n == 32, "32 chips described (m1 .. m4max, m3ultra, 15 binned parts, h100, h200), "
          "got %d",
          db.n);
    mq_chip c;
    CHECK(mq_chip_find(&db, "m4max", 0, &c, err, sizeof err) == 0 &&
              c.v[MQ_CHIP_GPU_CORES] == 40 && c.v[MQ_CHIP_MEM_BW_GBS] == 546 &&
              !strcmp(c.arch, "applegpu_g16s"),
          "m4max: 40 cores, 546 GB/s, applegpu_g16s");
    /* every binned part: like a full part, named it plus its core count, fewer cores, no
     * more bandwidth, the same arch and FP32 per core */
    int binned = 0;
    for (int i = 0; i < db.n; i++) {
        const mq_chip *b = &db.chips[i];
        mq_chip f;
        char want[64];
        if (!b->like[0] || mq_chip_find(&db, b->like, 0, &f, err, sizeof err))
            continue;
        binned++;
        snprintf(want, sizeof want, "%s%d", b->like, (int)b->v[MQ_CHIP_GPU_CORES]);
        double per = b->v[MQ_CHIP_FP32_TFLOPS] / b->v[MQ_CHIP_GPU_CORES] /
                     (f.v[MQ_CHIP_FP32_TFLOPS] / f.v[MQ_CHIP_GPU_CORES]);
        CHECK(!f.like[0] && !strcmp(b->name, want) && !strcmp(b->arch, f.arch) &&
                  b->v[MQ_CHIP_GPU_CORES] < f.v[MQ_CHIP_GPU_CORES] &&
                  b->v[MQ_CHIP_MEM_BW_GBS] <= f.v[MQ_CHIP_MEM_BW_GBS] && fabs(per - 1) < 0.02,
              "binned %s (like %s): named %s, fewer cores, FP32 per core %.3f of its base",
              b->name, b->like, want, per);
    }
    CHECK(binned == 15, "15 binned parts, each like a chip of the file, got %d", binned);
    CHECK(mq_chip_has_binned_parts(&db, "m4max") && !mq_chip_has_binned_parts(&db, "m4max32") &&
              !mq_chip_has_binned_parts(&db, "h100"),
          "m4max has binned parts; m4max32 and h100 have none");
    int sourced = 1;
    for (int i = 0; i < db.n; i++)
        for (int f = 0; f < MQ_CHIP_NFIELDS; f++)
            sourced &= db.chips[i].source[f][0] != '\0';
    CHECK(sourced, "every figure of every chip names its source");
    CHECK(strstr(db.chips[0].source[MQ_CHIP_RESIDENT_TGS_PER_CORE], "ASSUMED") != NULL,
          "resident threadgroups per core is marked as an assumption");
    CHECK(mq_chip_find(&db, "m5ultra", 0, &c, err, sizeof err) != 0 &&
              strstr(err, "unknown chip 'm5ultra'") && strstr(err, "m4max") &&
              strstr(err, "host"),
          "an unknown chip lists the known ones: '%s'", err);
    mq_chips_free(&db);

    write_file(tmp_path("chips1.csv"), "chip,field,value,source\n"
                                       "toy,gpu_cores,5,made up\n"
                                       "toy,tg_mem_bytes,lots,made up\n");
    CHECK(mq_chips_load(tmp_path("chips1.csv"), &db, err, sizeof err) != 0 &&
              strstr(err, "chips1.csv:3:") && strstr(err, "'lots'"),
          "a bad value names the file and line: '%s'", err);
    write_file(tmp_path("chips2.csv"), "chip,field,value,source\ntoy,gpu_cores,5,made up\n");
    CHECK(mq_chips_load(tmp_path("chips2.csv"), &db, err, sizeof err) != 0 &&
              strstr(err, "chip toy has no tg_mem_bytes"),
          "a chip missing a field is refused: '%s'", err);
    CHECK(mq_chips_load(tmp_path("nope.csv"), &db, err, sizeof err) != 0 &&
              strstr(err, "nope.csv: cannot open"),
          "a missing chips file is refused: '%s'", err);
}

/* like: every field of the chip named, then the chip's own rows, whatever
 * the order of the rows and along a chain; a cycle or an unknown name is
 * refused naming the file and line. */
static void test_chip_likes(void)
{
    static const char head[] = "chip,field,value,source\n",
                      big[] = "big,arch,applegpu_g99s,doc\nbig,gpu_cores,40,spec\n"
                              "big,tg_mem_bytes,32768,spec\nbig,max_threads_per_tg,1024,spec\n"
                              "big,simd_width,32,spec\nbig,resident_tgs_per_core,4,guess\n"
                              "big,mem_bw_gbs,546,spec\nbig,fp32_tflops,16,spec\n"
                              "big,fp16_tflops,16,spec\nbig,l2_bytes,0,none\n"
                              "big,slc_bytes,0,none\n";
    char text[2048], err[1024];
    mq_chip_db db;
    mq_chip a, b;
    /* the chain first, its base last: big24 <- big32 <- big */
    snprintf(text, sizeof text, "%sbig24,like,big32,chain\nbig24,gpu_cores,24,own\n"
             "big32,gpu_cores,32,bin\nbig32,like,big,binned\nbig32,mem_bw_gbs,410,bin\n%s",
             head, big);
    write_file(tmp_path("likes1.csv"), text);
    int rc = mq_chips_load(tmp_path("likes1.csv"), &db, err, sizeof err);
    CHECK(rc == 0 && mq_chip_find(&db, "big32", 0, &a, err, sizeof err) == 0 &&
              mq_chip_find(&db, "big24", 0, &b, err, sizeof err) == 0,
          "a file of likes loads: %s", err);
    CHECK(!rc && a.v[MQ_CHIP_GPU_CORES] == 32 && a.v[MQ_CHIP_MEM_BW_GBS] == 410 &&
              !strcmp(a.source[MQ_CHIP_MEM_BW_GBS], "bin") && a.v[MQ_CHIP_FP32_TFLOPS] == 16 &&
              !strcmp(a.source[MQ_CHIP_FP32_TFLOPS], "spec") && !strcmp(a.arch, "applegpu_g99s") &&
              !strcmp(a.like, "big"),
          "big32: its own cores and bandwidth, big's FP32 with big's source, big's arch");
    CHECK(!rc && b.v[MQ_CHIP_GPU_CORES] == 24 && b.v[MQ_CHIP_MEM_BW_GBS] == 410 &&
              b.v[MQ_CHIP_SIMD_WIDTH] == 32 && !strcmp(b.arch, "applegpu_g99s"),
          "big24 (like big32, like big): 24 cores, big32's 410 GB/s, big's SIMD width and arch");
    /* snapshots hold the resolved figures, not the like */
    CHECK(!rc && mq_chip_write(tmp_path("snap.csv"), &b, err, sizeof err) == 0 &&
              mq_chip_snapshot_load(tmp_path("snap.csv"), &a, err, sizeof err) == 0 &&
              a.v[MQ_CHIP_GPU_CORES] == 24 && !a.like[0],
          "a chip of likes as a snapshot reads back: %s", err);
    if (!rc)
        mq_chips_free(&db);
    static const struct {
        const char *rows, *want;
    } bad[] = { /* each after the head and big's 11 rows: line 13 onwards */
        {"x,like,y,a\ny,like,x,b\n", ".csv:14: y is like x, which is like y: a cycle"},
        {"s,like,s,a\n", ".csv:13: s is like s: a cycle"},
        {"x,like,y,a\ny,like,z,b\nz,like,x,c\nw,like,x,d\n", "which is like"},
        {"c,like,nosuch,a\n", ".csv:13: c is like 'nosuch', which is not a chip of this file"},
        {"c,like,big,a\nc,like,big,b\n", ".csv:14: like of c is given twice"},
        {"Big2,like,big,a\n", ".csv:13: bad chip name 'Big2' (lower-case letters"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "likes-bad%zu.csv", i);
        snprintf(text, sizeof text, "%s%s%s", head, big, bad[i].rows);
        write_file(tmp_path(name), text);
        CHECK(mq_chips_load(tmp_path(name), &db, err, sizeof err) != 0 &&
                  strstr(err, bad[i].want) && !strchr(err, '\n'),
              "expected '%s' to be refused with '%s', got '%s'", bad[i].rows, bad[i].want, err);
    }
}

static int count_reason(const mq_space *s, mq_variant v, const char *needle)
{
    int n = 0;
    for (int i = 0; i < s->n; i++)
        n += s->e[i].c.variant == v && !s->e[i].legal && strstr(s->e[i].reason, needle);
    return n;
}

static void test_space(void)
{
    char err[1024];
    mq_chip m4, toy = td_toy_chip();
    if (mq_chip_load_named(mq_chips_default_path(), "m4max", &m4, err, sizeof err)) {
        CHECK(0, "chips for the space test: %s", err);
        return;
    }
    /* fp4, M=1, N=32, K=64, group 32. By hand: tile_m 8 only (16/2 >= 1),
     * tile_n 32 only, tile_k 16/32/64 (128/2 >= 64). marlin and fused: 3
     * each. mlx: K slices start on max(tile_k, 32): tk16 and tk32 give 2
     * slices (split 1, 2), tk64 one (split 1): 5. striped: the same 5 with
     * one threadgroup per work unit; the core multiples (5.. or 40..) all
     * exceed the 1-2 work units. The decode path: tile_m 1 only, tile_n 16
     * (tile_k a multiple of 64: 64) and 32 (32, 64): 3. The lane kernel:
     * tile_m 8, tile_n 32, tile_k 64, one slice: 1. 20 legal on m4max;
     * toy5 refuses marlin 8x32x64, double-buffered 2*(8*64 + 64*32)*2 =
     * 10240 B > 8192: 19. */
    mq_problem tiny = {MQ_FMT_FP4, 1, 32, 64, 32};
    mq_space a, b;
    CHECK(mq_space_enumerate(&tiny, &m4, MQ_SPACE_FULL, &a) == 0 &&
              mq_space_enumerate(&tiny, &toy, MQ_SPACE_FULL, &b) == 0,
          "enumerate");
    CHECK(a.legal == 20 && b.legal == 19, "20 legal on m4max and 19 on toy5, got %d, %d",
          a.legal, b.legal);
    /* rows padded by 8 halves (the default): 2*2*(8*72 + 64*40) = 12544 B */
    const int pad8 = mq_variant_get(MQ_VAR_MARLIN_FP4)->tile_pad;
    char want8[64];
    snprintf(want8, sizeof want8, "threadgroup memory %d B",
             2 * 2 * (8 * (64 + pad8) + 64 * (32 + pad8)));
    CHECK(count_reason(&b, MQ_VAR_MARLIN_FP4, want8) == 1,
          "toy5's one extra refusal is marlin 8x32x64's %s", want8 + 19);
    /* every grid point is listed: marlin/fused 5*6*5 = 150 each, mlx 150*5,
     * striped 150*5 splits*(1 + 4 core multiples, minus those equal to the
     * work units: none here, units <= 8 < 10), the decode path 5*4*7, the
     * lane kernel 4*3*4 tiles x 5 splits */
    int expect = 150 + 150 + 750 + 150 * 5 * 5 + 140 + 240;
    CHECK(a.n == expect && b.n == expect, "%d grid points listed, got %d and %d", expect, a.n,
          b.n);
    CHECK(count_reason(&a, MQ_VAR_MARLIN_FP4, "already covers M=1") == 120,
          "marlin: tile_m 16..128 rejected as covering M=1: 4*6*5 = 120, got %d",
          count_reason(&a, MQ_VAR_MARLIN_FP4, "already covers M=1"));
    CHECK(count_reason(&a, MQ_VAR_MLX_SPLITK, "exceeds the 2 aligned K slices") == 3 * 2,
          "mlx: split 3, 4, 8 refused for tk16 and tk32");
    mq_space_free(&a);
    mq_space_free(&b);

    /* a larger problem: toy5's 8 KiB budget and 256 threads refuse what m4max takes */
    mq_problem big = {MQ_FMT_FP4, 128, 1024, 1024, 128};
    CHECK(mq_space_enumerate(&big, &m4, MQ_SPACE_FULL, &a) == 0 &&
              mq_space_enumerate(&big, &toy, MQ_SPACE_FULL, &b) == 0,
          "enumerate big");
    CHECK(b.legal < a.legal, "toy5 allows fewer candidates than m4max (%d < %d)", b.legal,
          a.legal);
    int tg_mem = 0, threads = 0, found_m4 = 0;
    for (int i = 0; i < b.n; i++) {
        tg_mem += !b.e[i].legal && strstr(b.e[i].reason, "exceeds the budget 8192 B") != NULL;
        threads += !b.e[i].legal && strstr(b.e[i].reason, "exceed the limit 256") != NULL;
    }
    /* 64x64x32 double-buffered: 16384 B (19456 B with rows padded by 8
     * halves), legal on m4max, over toy5's 8 KiB */
    const int pad = mq_variant_get(MQ_VAR_MARLIN_FP4)->tile_pad;
    char want[64];
    snprintf(want, sizeof want, "threadgroup memory %d B", 16384 + 2 * 2 * (64 + 32) * pad);
    for (int i = 0; i < a.n; i++) {
        const mq_candidate *c = &a.e[i].c;
        if (c->variant == MQ_VAR_MARLIN_FP4 && c->p.tile_m == 64 && c->p.tile_n == 64 &&
            c->p.tile_k == 32) {
            found_m4 = a.e[i].legal && !b.e[i].legal && strstr(b.e[i].reason, want);
        }
    }
    CHECK(tg_mem > 0 && threads > 0,
          "toy5 rejects for threadgroup memory (%d) and threads (%d) with reasons", tg_mem,
          threads);
    CHECK(found_m4, "marlin 64x64x32: legal on m4max, refused on toy5 for its %s", want + 19);
    /* striped: thread-group counts are multiples of the chip's cores */
    int m4_40 = 0, toy_5 = 0;
    for (int i = 0; i < a.n; i++)
        m4_40 += a.e[i].c.variant == MQ_VAR_MARLIN_FP4_STRIPED && a.e[i].c.p.num_threadgroups &&
                 a.e[i].c.p.num_threadgroups % 40 == 0;
    for (int i = 0; i < b.n; i++)
        toy_5 += b.e[i].c.variant == MQ_VAR_MARLIN_FP4_STRIPED && b.e[i].c.p.num_threadgroups &&
                 b.e[i].c.p.num_threadgroups % 5 == 0;
    CHECK(m4_40 > 0 && toy_5 > 0, "striped counts in multiples of 40 (m4max) and 5 (toy5)");
    mq_space_free(&a);
    mq_space_free(&b);
    mq_space seed;
    int seeded = mq_space_enumerate(&big, &m4, MQ_SPACE_SEED, &seed);
    CHECK(seeded == 0 && seed.n == 6 && seed.legal == 6,
          "seed space for fp4: the 6 fp4 variants' own configurations, got %d (%d legal)",
          seed.n, seed.legal);
    mq_space_free(&seed);
}

static mq_result sample_result(int M, const char *status, double median)
{
    static double samples[3] = {1e-3, 2e-3, 3e-3};
    mq_result r;
    memset(&r, 0, sizeof r);
    mq_result_stamp(&r);
    snprintf(r.chip, sizeof r.chip, "host");
    snprintf(r.backend, sizeof r.backend, "cpu");
    r.p = (mq_problem){MQ_FMT_U4, M, 64, 128, 32};
    r.c = (mq_candidate){MQ_VAR_FUSED_U4, {8, 64, 32, 0, 1}};
    snprintf(r.status, sizeof r.status, "%s", status);
    if (!strcmp(status, "ok")) {
        r.samples = samples;
        r.nsamples = 3;
        r.st.n = 3;
        r.st.median = median;
    } else {
        snprintf(r.error, sizeof r.error, "3 of 64 outputs outside the bound, \"quoted\"");
    }
    return r;
}

/* The resume lookup, indexed or not: the first own row of a key in file
 * order, never another host's, NULL for a key no row has. */
static void test_find_own_index(void)
{
    mq_result rows[5];
    rows[0] = sample_result(1, "ok", 1e-3);
    snprintf(rows[0].host, sizeof rows[0].host, "another-host");
    rows[1] = sample_result(4, "ok", 2e-3);
    rows[2] = sample_result(1, "ok", 3e-3); /* key of row 0, this host: the answer */
    rows[3] = sample_result(1, "ok", 4e-3); /* the same key again, later */
    rows[4] = sample_result(2, "wrong", 0);
    mq_results rs = {rows, 5, 0, 0, NULL, 2};
    mq_result key = sample_result(1, "ok", 0), absent = sample_result(3, "ok", 0);
    for (int indexed = 0; indexed < 2; indexed++) {
        if (indexed)
            CHECK(mq_results_index(&rs) == 0, "index 5 rows");
        const mq_result *r = mq_results_find_own(&rs, &key);
        CHECK(r == &rows[2], "%s lookup: the first own row of the key (row 3), got row %d",
              indexed ? "an indexed" : "a linear", r ? (int)(r - rows) + 1 : 0);
        CHECK(mq_results_find_own(&rs, &absent) == NULL,
              "%s lookup: NULL for a key no row has", indexed ? "an indexed" : "a linear");
    }
    free(rs.by_key); /* the rows are this function's */
}

static void test_results_store(void)
{
    char err[1024];
    const char *path = tmp_path("results.csv");
    mq_results_writer w;
    CHECK(mq_results_open(path, &w, err, sizeof err) == 0, "create a results file: %s", err);
    mq_result r1 = sample_result(1, "ok", 2e-3), r2 = sample_result(2, "wrong", 0);
    CHECK(mq_results_append(&w, &r1, err, sizeof err) == 0 &&
              mq_results_append(&w, &r2, err, sizeof err) == 0,
          "append two rows");
    mq_results_close(&w);
    mq_results rs;
    CHECK(mq_results_load(path, &rs, err, sizeof err) == 0 && rs.n == 2, "load them back: %s",
          err);
    if (rs.n == 2) {
        CHECK(mq_result_same_key(&rs.r[0], &r1) && rs.r[0].nsamples == 3 &&
                  rs.r[0].samples[2] == 3e-3 && rs.r[0].st.median == 2e-3,
              "row 1 round-trips with its samples");
        CHECK(!strcmp(rs.r[1].status, "wrong") && !strcmp(rs.r[1].error, r2.error),
              "row 2 keeps status wrong and its quoted, comma-bearing error");
        CHECK(mq_results_find_own(&rs, &r1) != NULL,
              "the same build on the same host finds its own row (for --resume)");
    }
    mq_results_free(&rs);
    /* reopening appends after validating */
    CHECK(mq_results_open(path, &w, err, sizeof err) == 0, "reopen: %s", err);
    mq_result r3 = sample_result(4, "ok", 1e-3);
    mq_results_append(&w, &r3, err, sizeof err);
    mq_results_close(&w);
    CHECK(mq_results_load(path, &rs, err, sizeof err) == 0 && rs.n == 3, "3 rows after reopen");
    mq_results_free(&rs);

    /* broken files: read the good one and damage copies of it */
    FILE *f = fopen(path, "r");
    char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    static char damaged[20000];
    memcpy(damaged, text, len - 5); /* cut the last line short, no newline */
    damaged[len - 5] = '\0';
    write_file(tmp_path("truncated.csv"), damaged);
    /* a torn last line (an append cut short) is dropped, the rows before it kept */
    err[0] = '\0';
    int torn_ok = mq_results_load(tmp_path("truncated.csv"), &rs, err, sizeof err) == 0;
    CHECK(torn_ok && rs.n == 2 && rs.torn_line == 5 && rs.torn_bytes > 0,
          "a torn last line is dropped and its 2 whole rows kept, line 5 reported: rc %d, %d "
          "rows, torn line %d ('%s')",
          torn_ok ? 0 : -1, torn_ok ? rs.n : -1, torn_ok ? rs.torn_line : -1, err);
    if (torn_ok) {
        char note[512];
        CHECK(mq_results_torn_note(&rs, "truncated.csv", note, sizeof note) &&
                  strstr(note, "kept 2 rows; dropped its torn last line 5"),
              "the note says what was kept and dropped: '%s'", note);
        mq_results_free(&rs);
    }
    snprintf(damaged, sizeof damaged, "%s\"1\",\"0.2.0\",\"unterminated\n", text);
    write_file(tmp_path("malformed.csv"), damaged);
    CHECK(mq_results_load(tmp_path("malformed.csv"), &rs, err, sizeof err) != 0 &&
              strstr(err, "malformed.csv:6: malformed CSV"),
          "an unterminated quote is refused with its line: '%s'", err);
    snprintf(damaged, sizeof damaged, "%s\"1\",\"x\"\n", text);
    write_file(tmp_path("short.csv"), damaged);
    CHECK(mq_results_load(tmp_path("short.csv"), &rs, err, sizeof err) != 0 &&
              strstr(err, "short.csv:6: 2 fields, expected 32"),
          "a short row is refused with its line: '%s'", err);
    char *second = strchr(strchr(text, '\n') + 1, '\n') + 1; /* first data row */
    snprintf(damaged, sizeof damaged, "%.*s\"4\"%s", (int)(second - text), text,
             strchr(second, ','));
    write_file(tmp_path("newer.csv"), damaged);
    CHECK(mq_results_load(tmp_path("newer.csv"), &rs, err, sizeof err) != 0 &&
              strstr(err, "newer.csv:3: schema 4 is newer than this tool's 3"),
          "a newer schema (4) is refused: '%s'", err);
    CHECK(mq_results_open(tmp_path("newer.csv"), &w, err, sizeof err) != 0,
          "and nothing is appended to it");
}

/* The test-only wrong kernel: the CPU model, then one output nudged. */
static mq_status wrong_run(mq_backend *b, const mq_problem *p, const mq_weights *w,
                           const uint16_t *A, float *C, const mq_candidate *c,
                           const mq_plan *plan, mq_error *err)
{
    mq_backend *cpu = b->state;
    mq_status st = cpu->run(cpu, p, w, A, C, c, plan, err);
    C[0] += 0.01f;
    return st;
}

/* A backend whose kernels store C as FP16 (as the Metal kernels do): the
 * CPU model's output rounded to half. fault: one output from its neighbour
 * column as well (a planted indexing bug). */
static int half_fault;
static mq_status half_run(mq_backend *b, const mq_problem *p, const mq_weights *w,
                          const uint16_t *A, float *C, const mq_candidate *c,
                          const mq_plan *plan, mq_error *err)
{
    mq_backend *cpu = b->state;
    mq_status st = cpu->run(cpu, p, w, A, C, c, plan, err);
    for (long i = 0; i < (long)p->M * p->N; i++)
        C[i] = mq_half_to_float(mq_float_to_half(C[i]));
    if (half_fault)
        C[1] = C[2];
    return st;
}

/* Verification follows the backend's arithmetic: FP16 output is held to
 * the FP16 bound (the FP32 one would call correct kernels wrong), and a
 * planted bug is still caught under it. */
static void test_half_output_bound(void)
{
    mq_error e;
    mq_backend_opts bo = {2};
    mq_backend *cpu = mq_backend_cpu_open(&bo, &e);
    mq_problem p = {MQ_FMT_U4, 4, 64, 64, 32}; /* a short K: FP16 rounding dominates */
    mq_bench_problem bp;
    memset(&bp, 0, sizeof bp);
    CHECK(cpu && mq_bench_problem_setup(&bp, &p, 1, NULL, 0, &e) == 0, "set up: %s", e.msg);
    static mq_measurement m;
    mq_measure_opts o = mq_measure_defaults();
    o.max_reps = 0; /* verify only */
    mq_candidate c = {MQ_VAR_FUSED_U4, {8, 64, 64, 0, 1}};
    mq_backend half = {.name = "half", .run = half_run, .state = cpu};
    half_fault = 0;
    mq_measure(&half, &bp, &c, NULL, &o, &m);
    CHECK(!strcmp(m.status, "wrong"),
          "FP16 output judged by the FP32 bound is 'wrong' (the defect this fixes; got %s, "
          "worst %.3g x)",
          m.status, m.worst_ratio);
    half.arith.half_output = 1;
    mq_measure(&half, &bp, &c, NULL, &o, &m);
    CHECK(!strcmp(m.status, "verified"),
          "FP16 output within the FP16 bound of its arithmetic is verified (got %s: %s)", m.status,
          m.error);
    half.arith.half_weights = 1;
    mq_measure(&half, &bp, &c, NULL, &o, &m);
    CHECK(!strcmp(m.status, "verified"), "and under the half-weights bound too (got %s)", m.status);
    half_fault = 1;
    mq_measure(&half, &bp, &c, NULL, &o, &m);
    CHECK(!strcmp(m.status, "wrong") && strstr(m.error, "FP16/FP32 bound"),
          "a planted wrong column is still caught under the FP16 bound (got %s: %s)", m.status,
          m.error);
    double fp32 = mq_verify_bound(384, 10.0, 1.0, NULL);
    mq_backend_arith ho = {0, 1};
    CHECK(fabs(fp32 - 771 * ldexp(1.0, -24) * 10.0) < 1e-18 &&
              mq_verify_bound(384, 10.0, 1.0, &ho) > fp32 + ldexp(1.0, -11),
          "the FP32 bound is (2K+3)u sum|a*w| and FP16 storage adds at least h |ref|");
    mq_bench_problem_free(&bp);
    mq_backend_close(cpu);
}

static void test_wrong_kernel(void)
{
    mq_error e;
    mq_backend_opts bo = {2};
    mq_backend *cpu = mq_backend_cpu_open(&bo, &e);
    mq_backend wrong = {.name = "wrong", .run = wrong_run, .state = cpu};
    mq_problem p = {MQ_FMT_U4, 4, 64, 256, 64};
    mq_bench_problem bp;
    memset(&bp, 0, sizeof bp);
    CHECK(mq_bench_problem_setup(&bp, &p, 1, NULL, 0, &e) == 0, "set up: %s", e.msg);
    static mq_measurement m;
    mq_measure_opts o = mq_measure_defaults();
    o.budget_s = 0.01;
    mq_candidate c = {MQ_VAR_FUSED_U4, {8, 64, 64, 0, 1}};
    mq_measure(&wrong, &bp, &c, NULL, &o, &m);
    CHECK(!strcmp(m.status, "wrong") && m.nsamples == 0 && m.st.median == 0,
          "the wrong kernel is recorded as wrong with no time (status %s, %d samples)",
          m.status, m.nsamples);
    mq_measure(cpu, &bp, &c, NULL, &o, &m);
    CHECK(!strcmp(m.status, "ok") && m.nsamples >= 5 && m.st.median > 0,
          "the same candidate on the real backend is ok and timed (%d samples)", m.nsamples);
    mq_bench_problem_free(&bp);
    mq_backend_close(cpu);

    /* ranking: a wrong row never wins, whatever its recorded time */
    mq_result rows[3] = {sample_result(1, "ok", 5e-3), sample_result(1, "wrong", 0),
                         sample_result(1, "ok", 4e-3)};
    rows[1].st.median = 1e-9;
    rows[2].c.p.tile_n = 32;
    mq_results rs = {.r = rows, .n = 3};
    const mq_result *best = mq_results_best(&rs, "host", "cpu", &rows[0].p);
    CHECK(best == &rows[2], "the best is the fastest ok row, never the wrong one");
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_stats();
    test_chips();
    test_chip_likes();
    test_space();
    test_results_store();
    test_find_own_index();
    test_wrong_kernel();
    test_half_output_bound();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_done("harness");
}
