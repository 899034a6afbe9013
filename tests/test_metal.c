/* test_metal.c - the Metal side as far as Linux allows: every distinct
 * legal program (each MSL kernel, expanded as the backend hands it to Metal,
 * with the tuned macros of every legal candidate of every described Apple
 * chip; the NVIDIA chips' programs are tests/test_cuda_prelude.c's),
 * translated as the executor translates it, passes clang++ -fsyntax-only
 * against backends/msl_cpu/metal_stdlib in its strict mode (address spaces
 * real, FP16 the Apple target's own, an arm64-apple target); a planted typo,
 * a type error, a simdgroup_load from thread memory and a device pointer
 * used as threadgroup memory fail it; the backend builds here and
 * reports itself unavailable, and "auto" falls back to the CPU model saying
 * so (on a Mac the backend opens and "auto" takes it); device names, core
 * counts and architecture names map to chips. Under make sanitize and make
 * portable ($MQ_TEST_REPEAT) the strict check takes a covering subset of the
 * programs (mq_test_subset), saying so as skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "chips.h"
#include "measure.h"
#include "backend.h"
#include "chips.h"
#include "msl_exec.h"
#include "msl_program.h"
#include "space.h"
#include "testdata.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

/* The strict check's compiler and flags: an Apple target, freestanding
 * (no host headers), metal_stdlib with address spaces made real. */
#define STRICT_CXX                                                                              \
    "clang++ -target arm64-apple-macos13 -ffreestanding -nostdinc++ -std=c++17 -fsyntax-only "   \
    "-x c++ -DMQ_MSL_STRICT -Wall -Wextra -Werror -Wno-unknown-attributes "                     \
    "-Wno-unused-parameter -isystem "

/* Write MSL source as the executor translates it; -1 on failure. */
static int write_translated(const char *path, const char *src)
{
    char *t = mq_msl_translate(src);
    FILE *f = t ? fopen(path, "w") : NULL;
    int rc = f && fputs(t, f) >= 0 ? 0 : -1;
    if (f && fclose(f))
        rc = -1;
    free(t);
    return rc;
}

/* The strict syntax check of a source text with -D definitions; the exit
 * status (0: it compiles) and the first error line in first_error. */
static int syntax_check(const char *src, const char *defines, char *first_error, size_t n)
{
    char path[] = "/tmp/mq-metal-XXXXXX", log[64], cmd[2048];
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    if (write_translated(path, src))
        return -1;
    snprintf(log, sizeof log, "%s.log", path);
    size_t used = (size_t)snprintf(cmd, sizeof cmd, STRICT_CXX "%s", mq_msl_include_dir());
    char d[64];
    const char *s = defines;
    int k;
    while (sscanf(s, " %63s%n", d, &k) == 1 && used < sizeof cmd - 100) {
        used += (size_t)snprintf(cmd + used, sizeof cmd - used, " -D%s", d);
        s += k;
    }
    snprintf(cmd + used, sizeof cmd - used, " %s > %s 2>&1", path, log);
    int st = system(cmd);
    first_error[0] = 0;
    FILE *l = fopen(log, "r");
    char line[512];
    while (l && fgets(line, sizeof line, l))
        if (strstr(line, "error")) {
            line[strcspn(line, "\n")] = 0;
            snprintf(first_error, n, "%s", line);
            break;
        }
    if (l)
        fclose(l);
    unlink(path);
    unlink(log);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The syntax check of many programs at once: each source file expanded
 * once, one clang++ per program, as many at a time as there are cores
 * (xargs -P); a failed program fails with its macros and first error. */
static int sweep(const mq_test_program *ps, int np)
{
    char dir[] = "/tmp/mq-metal-sweep-XXXXXX", path[256], err[512];
    if (!mkdtemp(dir))
        return np;
    snprintf(path, sizeof path, "%s/cmds", dir);
    FILE *cmds = fopen(path, "w");
    const char *files[16];
    int nfiles = 0, bad = 0;
    for (int i = 0; cmds && i < np; i++) {
        int fi = 0;
        while (fi < nfiles && strcmp(files[fi], ps[i].file))
            fi++;
        if (fi == nfiles && nfiles < 16) { /* the expanded source, once per file */
            char *src = mq_metal_source(ps[i].file, err, sizeof err);
            CHECK(src && !strstr(src, "#include \"") && strstr(src, "struct MqParams"),
                  "expected metal/%s with its headers expanded: %s", ps[i].file,
                  src ? "an #include is left" : err);
            snprintf(path, sizeof path, "%s/%d.metal", dir, nfiles);
            CHECK(src && write_translated(path, src) == 0, "expected to write %s", path);
            free(src);
            files[nfiles++] = ps[i].file;
        }
        fprintf(cmds, STRICT_CXX "%s", mq_msl_include_dir());
        mq_test_define_flags(cmds, ps[i].defines);
        fprintf(cmds, " %s/%d.metal > %s/%d.log 2>&1 || touch %s/%d.bad\n", dir, fi, dir, i, dir,
                i);
    }
    if (cmds)
        fclose(cmds);
    bad += mq_test_run_programs(dir, ps, np, "pass the syntax check");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        bad++;
    return bad;
}

/* Under make sanitize or make portable (mq_test_repeat), ps cut down in
 * place to mq_test_subset's programs; the count left (np otherwise). */
static int repeat_subset(mq_test_program *ps, int np)
{
    static char keep[4096];
    if (!mq_test_repeat() || np <= 0 || np > 4096)
        return np;
    mq_test_subset(ps, np, keep);
    int n = 0;
    for (int i = 0; i < np; i++)
        if (keep[i])
            ps[n++] = ps[i];
    return n;
}

static void test_syntax(void)
{
    CHECK(system("command -v clang++ >/dev/null 2>&1") == 0,
          "expected clang++ for the MSL syntax check (make deps installs clang)");
    mq_chip chip;
    char err[512];
    if (mq_chip_load_named(mq_chips_default_path(), "m4max", &chip, err, sizeof err)) {
        CHECK(0, "m4max: %s", err);
        return;
    }
    /* every distinct legal program of the Apple chips */
    static mq_test_program ps[4096];
    int per_variant[MQ_VAR_COUNT][MQ_FMT_COUNT] = {{0}}, missing = 0;
    int np = mq_test_programs("applegpu", ps, 4096, per_variant, &missing);
    CHECK(np >= 0 && missing == 0, "expected a Metal program for every legal candidate: %d missing",
          missing);
    if (np < 0)
        np = 0;
    for (int v = 0; v < MQ_VAR_COUNT; v++)
        for (int f = 0; f < MQ_FMT_COUNT; f++)
            if (mq_variant_serves((mq_variant)v, (mq_format)f))
                CHECK(per_variant[v][f] > 0, "expected legal %s candidates for %s",
                      mq_variant_get((mq_variant)v)->name, mq_format_name((mq_format)f));
    /* under make sanitize and make portable (mq_test_repeat) clang, which
     * checks the same text whatever the build, checks mq_test_subset's
     * covering subset (every file expanded and translated); make test: all */
    int nc = repeat_subset(ps, np);
    int bad = sweep(ps, nc);
    CHECK(bad == 0, "expected every distinct legal program to pass the syntax check: %d failed", bad);
    CHECK(np >= 300 && np < 4096, "expected every distinct legal program checked (hundreds), got %d",
          np);
    printf("metal: %d of %d distinct legal programs compiled, %d failed\n", nc, np, bad);
    if (nc < np)
        check_skip(mq_test_repeat(), "the strict syntax check of %d of the %d Apple programs (clang "
                                     "checks the same text whatever this build: make test checks "
                                     "all)", np - nc, np);
    /* the helpers that no candidate names: the reduction lives in the striped
     * file (checked above); the zero helper has its own */
    char *src = mq_metal_source("marlin_zero_reduction.metal", err, sizeof err);
    char first[512];
    CHECK(src && syntax_check(src, "", first, sizeof first) == 0,
          "expected marlin_zero_reduction.metal to pass: %s", src ? first : err);
    free(src);
    /* the MoE block (no candidate of the GEMM space names it): every program of
     * its space at every trellis width */
    int nm = 0;
    for (int bits = 2; bits <= 4; bits++) {
        mq_moe_problem mp = {(mq_format)(MQ_FMT_TRELLIS2 + bits - 2), 1, 2048, 768, 8, 2, 128};
        mq_moe_weights mw;
        mq_error e;
        if (mq_moe_weights_alloc(&mw, &mp, &e)) {
            CHECK(0, "MoE weights for the program sweep: %s", e.msg);
            continue;
        }
        /* Apple's plans and h100's (the lane block's staged K loop) under
         * Apple's 32 KB, which the strict check holds every program to */
        mq_chip h100;
        char cerr[256];
        const mq_limits apple = mq_limits_default();
        const mq_limits *lims[2] = {&apple, NULL};
        if (mq_chip_load_named(mq_chips_default_path(), "h100", &h100, cerr, sizeof cerr) == 0) {
            h100.lim.tg_mem_bytes = apple.tg_mem_bytes;
            lims[1] = &h100.lim;
        }
        CHECK(lims[1] != NULL, "h100: %s", cerr);
        for (int l = 0; l < 2 && lims[l]; l++) {
            mq_moe_candidate cs[256];
            int nc = mq_msl_moe_space(&mp, &mw, lims[l], 0, 0, cs, 256);
            for (int i = 0; i < nc && nm < 4090; i++) {
                mq_msl_moe_plan plan;
                mq_msl_moe_plan_of(&mp, &mw, &cs[i], lims[l], &plan, NULL);
                int lane = cs[i].inner.variant == MQ_VAR_LANE_TRELLIS;
                if (l && !lane)
                    continue; /* (the seed block's plan does not depend on the chip) */
                /* the seed block: one module; the lane block: its two kernels' */
                for (int d = lane ? MQ_MSL_MOE_LANE_GATE_UP : 0;
                     d <= (lane ? MQ_MSL_MOE_LANE_DOWN : 0); d++) {
                    snprintf(ps[nm].file, sizeof ps[nm].file, "%s",
                             lane ? plan.d[d].file : MQ_MSL_MOE_FILE);
                    snprintf(ps[nm].defines, sizeof ps[nm].defines, "%s",
                             lane ? plan.d[d].defines : plan.defines);
                    nm++;
                }
            }
        }
        mq_moe_weights_free(&mw);
    }
    CHECK(nm >= 150, "expected the MoE kernel's whole space (5 row counts x 4 widths x up to 4 "
                     "simdgroup counts x 3 trellis widths), got %d programs", nm);
    /* under a repeat, the subset of the fused and of the unfused (MOE_FUSE=0)
     * programs apart: mq_test_subset tells them by file and width only */
    int nd = nm;
    if (mq_test_repeat()) {
        static mq_test_program part[2][4096];
        int n2[2] = {0, 0};
        for (int i = 0; i < nm; i++) {
            int fused = strstr(ps[i].defines, "MOE_FUSE=1") != NULL;
            part[fused][n2[fused]++] = ps[i];
        }
        nd = 0;
        for (int f = 0; f < 2; f++) {
            int k = repeat_subset(part[f], n2[f]);
            memcpy(ps + nd, part[f], sizeof ps[0] * (size_t)k);
            nd += k;
        }
    }
    bad = sweep(ps, nd);
    CHECK(bad == 0, "expected every MoE program to pass the syntax check: %d failed", bad);
    printf("metal: %d of %d MoE programs compiled, %d failed\n", nd, nm, bad);
    if (nd < nm)
        check_skip(mq_test_repeat(), "the strict syntax check of %d of the %d MoE programs "
                                     "(likewise: make test checks all)", nm - nd, nm);

    /* the check can fail: a typo and a half/float type error */
    src = mq_metal_source("marlin_gemm_fused.metal", err, sizeof err);
    if (src) {
        char *at = strstr(src, "simdgroup_multiply_accumulate(acc");
        if (at)
            memcpy(at, "simdgroup_multiply_acumulate ", 29);
        CHECK(at && syntax_check(src, "", first, sizeof first) != 0 &&
                  strstr(first, "simdgroup_multiply_acumulate"),
              "expected a planted typo to fail the check naming it, got '%s'", first);
        free(src);
    }
    src = mq_metal_source("marlin_gemm_fp4.metal", err, sizeof err);
    if (src) {
        char *at = strstr(src, "as_type<half>(ushort(bits))");
        if (at)
            memcpy(at, "as_type<half>(uint  (bits))", 27);
        CHECK(at && syntax_check(src, "", first, sizeof first) != 0 && strstr(first, "as_type"),
              "expected as_type between different sizes to fail the check, got '%s'", first);
        free(src);
    }
    /* address spaces are real: a simdgroup_load from thread memory, and a
     * device pointer used as threadgroup memory, do not compile */
    src = mq_metal_source("marlin_gemm_fused.metal", err, sizeof err);
    if (src) {
        char *bad = NULL;
        const char *from = "simdgroup_load(b, staging, 8);";
        char *at = strstr(src, from);
        if (at && (bad = malloc(strlen(src) + 64)))
            sprintf(bad, "%.*sthread half loc[64] = {}; simdgroup_load(b, loc, 8);%s",
                    (int)(at - src), src, at + strlen(from));
        CHECK(bad && syntax_check(bad, "", first, sizeof first) != 0 &&
                  strstr(first, "simdgroup_load"),
              "expected a simdgroup_load from thread memory to fail the check, got '%s'", first);
        free(bad);
        free(src);
    }
    src = mq_metal_source("marlin_gemm_fp4.metal", err, sizeof err);
    if (src) {
        char *at = strstr(src, "threadgroup half *As[2] = {smem,");
        if (at)
            memcpy(at, "threadgroup half *As[2] = {C   ,", 32);
        CHECK(at && syntax_check(src, "", first, sizeof first) != 0,
              "expected a device pointer used as threadgroup memory to fail the check, got '%s'",
              first);
        free(src);
    }
    CHECK(syntax_check("#include \"mq_metal.h\"\n", "TILE_M=12", first, sizeof first) != 0,
          "expected a tile that is not a multiple of 8 to fail (static_assert)");
}

static void test_backend_here(void)
{
    char note[512] = "";
    mq_error e;
    mq_backend_opts bo = {1};
#ifdef __APPLE__
    /* a Mac has the GPU: the backend opens and describes it, auto takes it
     * (the smoke suite runs on it in tests/test_metal_standin.sh) */
    mq_backend *g = mq_backend_open("auto", &bo, note, sizeof note, &e);
    CHECK(g && !strcmp(g->name, "metal") && !strncmp(g->device, "Apple ", 6),
          "expected auto to take this Mac's GPU (metal, an Apple device), got %s '%s' (%s)",
          g ? g->name : "NULL", g ? g->device : "", g ? note : e.msg);
    mq_backend_close(g);
    return;
#endif
    mq_backend *m = mq_backend_metal_open(&bo, &e);
    const char *why = e.msg;
    CHECK(m == NULL && !strncmp(why, "unavailable: ", 13) && strstr(why, "Metal"),
          "expected the Metal backend to report itself unavailable on Linux, got '%s'", why);
    mq_backend_close(m);
    m = mq_backend_open("metal", &bo, note, sizeof note, &e);
    CHECK(m == NULL && strstr(why, "metal: unavailable"),
          "expected --backend metal to refuse with the reason, got '%s'", why);
    mq_backend *a = mq_backend_open("auto", &bo, note, sizeof note, &e);
    CHECK(a && !strcmp(a->name, "cpu") && strstr(note, "timing on the CPU model instead"),
          "expected auto to fall back to the CPU model and say so, got %s '%s'",
          a ? a->name : "NULL", note);
    mq_backend_close(a);
}

static void test_device_chips(void)
{
    mq_chip_db db;
    char err[512];
    if (mq_chips_load(mq_chips_default_path(), &db, err, sizeof err)) {
        CHECK(0, "chips: %s", err);
        return;
    }
    static const struct {
        const char *name, *arch;
        int cores; /* the IORegistry's gpu-core-count; 0: unknown */
        const char *chip;
    } cases[] = {
        {"Apple M4 Max", "applegpu_g16s", 0, "m4max"}, /* the name decides */
        {"Apple M4 Max", "applegpu_g16s", 40, "m4max"},
        {"Apple M4 Max", "applegpu_g16s", 32, "m4max32"}, /* the binned part */
        {"Apple M2 Pro", "applegpu_g14s", 0, "m2pro"},
        {"Apple M1", "applegpu_g13g", 7, "m17"},
        {"Apple M1 Ultra", "", 0, "m1ultra"},              /* no architecture name (older macOS) */
        {"Some Future GPU", "applegpu_g13g", 0, "m1"},     /* the only full g13g */
        {"Some Future GPU", "applegpu_g15g", 0, "m3"},
        {"Some Future GPU", "applegpu_g16s", 20, "m4pro"}, /* the count tells Pro from Max */
        {"Some Future GPU", "applegpu_g16s", 32, "m4max32"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mq_chip c;
        int rc = mq_chip_from_device(&db, cases[i].name, cases[i].arch, cases[i].cores, &c, err,
                                     sizeof err);
        CHECK(rc == 0 && !strcmp(c.name, cases[i].chip),
              "expected '%s' (%s, %d cores) to be %s, got %s", cases[i].name, cases[i].arch,
              cases[i].cores, cases[i].chip, rc ? err : c.name);
    }
    mq_chip c;
    int rc = mq_chip_from_device(&db, "Apple M4 Max", "applegpu_g16s", 32, &c, err, sizeof err);
    CHECK(rc == 0 && c.v[MQ_CHIP_MEM_BW_GBS] == 410 && c.v[MQ_CHIP_GPU_CORES] == 32,
          "expected the 32-core M4 Max's 410 GB/s, not the 40-core part's 546: %s", err);
    /* a count the family lacks: its members' counts, not another family's */
    rc = mq_chip_from_device(&db, "Apple M4 Max", "applegpu_g16s", 36, &c, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "device 'Apple M4 Max' has 36 GPU cores; ") &&
              strstr(err, "chips.csv has m4max with 40, m4max32 with 32: add a row, or name a "
                          "chip with --chip") && !strchr(err, '\n'),
          "expected an unlisted core count to name the counts the file has, got '%s'", err);
    rc = mq_chip_from_device(&db, "Apple M4 Pro", "applegpu_g16s", 40, &c, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "m4pro with 20, m4pro16 with 16:") && !strstr(err, "m4max"),
          "expected a 40-core 'M4 Pro' to be refused within its family, got '%s'", err);
    CHECK(mq_chip_from_device(&db, "Unknown", "applegpu_g16s", 36, &c, err, sizeof err) == -1 &&
              strstr(err, "(applegpu_g16s) has 36 GPU cores; ") && strstr(err, "m4max32 with 32"),
          "expected an architecture without that count to list its chips' counts, got '%s'", err);
    /* the family: chips whose likes lead to the named chip and whose names start with its
     * name (other, 16 cores, is like big but no big...) */
    mq_chip hand[4];
    memset(hand, 0, sizeof hand);
    static const char *const hn[] = {"big", "big32", "big24", "other"},
                             *const hl[] = {"", "big", "big32", "big"};
    for (int i = 0; i < 4; i++) {
        snprintf(hand[i].name, sizeof hand[i].name, "%s", hn[i]);
        snprintf(hand[i].like, sizeof hand[i].like, "%s", hl[i]);
        hand[i].v[MQ_CHIP_GPU_CORES] = 40 - 8 * i;
    }
    mq_chip_db hdb = {hand, 4, ""};
    CHECK(mq_chip_from_device(&hdb, "Apple Big", "", 24, &c, err, sizeof err) == 0 &&
              !strcmp(c.name, "big24"),
          "expected big24 (like big32, like big) for a 24-core 'Apple Big': %s", err);
    CHECK(mq_chip_from_device(&hdb, "Apple Big", "", 16, &c, err, sizeof err) == -1 &&
              strstr(err, "the chips file has big with 40, big32 with 32, big24 with 24:") &&
              !strstr(err, "other"),
          "expected 'other' (like big, not named big...) outside the family, got '%s'", err);
    CHECK(mq_chip_from_device(&db, "Unknown", "applegpu_g16s", 0, &c, err, sizeof err) == -1 &&
              strstr(err, "m4pro") && strstr(err, "m4max") && strstr(err, "--chip"),
          "expected a shared architecture to name its chips and ask for --chip, got '%s'", err);
    CHECK(mq_chip_from_device(&db, "Unknown", "applegpu_g99x", 0, &c, err, sizeof err) == -1 &&
              strstr(err, "not in the chips file"),
          "expected an unknown architecture to be refused, got '%s'", err);
    mq_chips_free(&db);
}

int main(void)
{
    test_device_chips();
    test_backend_here();
    test_syntax();
    return check_done("metal");
}
