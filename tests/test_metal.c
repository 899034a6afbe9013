/* test_metal.c - the Metal side as far as Linux allows: every MSL kernel,
 * expanded exactly as the backend hands it to Metal and compiled with the
 * tuned macros of real candidates (the seed configuration and the smallest
 * and largest legal tiles of each variant and format on m4max), passes
 * clang++ -fsyntax-only against tests/metal_compat/metal_stdlib; a planted
 * typo and a planted type error fail it; the backend builds here and
 * reports itself unavailable, and "auto" falls back to the CPU model
 * saying so; device names and architecture names map to chips. */
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
#include "msl_program.h"
#include "space.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

/* clang++ -fsyntax-only on a source text with -D definitions; the exit
 * status (0: it compiles) and the first error line in first_error. */
static int syntax_check(const char *src, const char *defines, char *first_error, size_t n)
{
    char path[] = "/tmp/mq-metal-XXXXXX", log[64], cmd[2048];
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    fputs(src, f);
    fclose(f);
    snprintf(log, sizeof log, "%s.log", path);
    size_t used = (size_t)snprintf(cmd, sizeof cmd,
                                   "clang++ -std=c++17 -fsyntax-only -x c++ -isystem "
                                   "%s/tests/metal_compat -Wall -Wextra -Werror "
                                   "-Wno-unknown-attributes -Wno-unused-parameter",
                                   MQ_SOURCE_DIR);
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

typedef struct {
    char file[64], defines[160];
} program;

/* The distinct programs of the candidates the test compiles. */
static int add_program(program *ps, int n, const mq_problem *p, const mq_candidate *c)
{
    const char *file, *fn;
    char defines[160], err[256];
    if (mq_metal_program(p, c, &file, &fn, defines, sizeof defines, err, sizeof err)) {
        CHECK(0, "expected a Metal program for every legal candidate: %s", err);
        return n;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(ps[i].file, file) && !strcmp(ps[i].defines, defines))
            return n;
    snprintf(ps[n].file, sizeof ps[n].file, "%s", file);
    snprintf(ps[n].defines, sizeof ps[n].defines, "%s", defines);
    return n + 1;
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
    static program ps[256];
    int np = 0;
    int per_variant[MQ_VAR_COUNT][MQ_FMT_COUNT] = {{0}};
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int M = 1; M <= 64; M *= 64) {
            mq_problem p = {(mq_format)f, M, 4096, 4096, 128};
            mq_space sp;
            if (mq_space_enumerate(&p, &chip, MQ_SPACE_FULL, &sp))
                continue;
            /* per variant: the seed's configuration, the smallest and the
             * largest legal tile */
            for (int v = 0; v < MQ_VAR_COUNT; v++) {
                if (!mq_variant_serves((mq_variant)v, p.format))
                    continue;
                int lo = -1, hi = -1;
                for (int i = 0; i < sp.n; i++) {
                    const mq_candidate *c = &sp.e[i].c;
                    if (!sp.e[i].legal || (int)c->variant != v)
                        continue;
                    int area = c->p.tile_m * c->p.tile_n * c->p.tile_k;
                    if (lo < 0 || area < sp.e[lo].c.p.tile_m * sp.e[lo].c.p.tile_n *
                                             sp.e[lo].c.p.tile_k)
                        lo = i;
                    if (hi < 0 || area > sp.e[hi].c.p.tile_m * sp.e[hi].c.p.tile_n *
                                             sp.e[hi].c.p.tile_k)
                        hi = i;
                }
                mq_candidate seed = {(mq_variant)v, mq_variant_get((mq_variant)v)->defaults};
                np = add_program(ps, np, &p, &seed);
                if (lo >= 0)
                    np = add_program(ps, np, &p, &sp.e[lo].c);
                if (hi >= 0)
                    np = add_program(ps, np, &p, &sp.e[hi].c);
                per_variant[v][f] += lo >= 0;
            }
            mq_space_free(&sp);
        }
    for (int v = 0; v < MQ_VAR_COUNT; v++)
        for (int f = 0; f < MQ_FMT_COUNT; f++)
            if (mq_variant_serves((mq_variant)v, (mq_format)f))
                CHECK(per_variant[v][f] > 0, "expected legal %s candidates for %s on m4max",
                      mq_variant_get((mq_variant)v)->name, mq_format_name((mq_format)f));
    for (int i = 0; i < np; i++) {
        char *src = mq_metal_source(ps[i].file, err, sizeof err);
        CHECK(src != NULL, "expected to read metal/%s: %s", ps[i].file, err);
        if (!src)
            continue;
        CHECK(!strstr(src, "#include \"") && strstr(src, "struct MqParams"),
              "expected metal/%s with its headers expanded (no #include \"...\" left)",
              ps[i].file);
        char first[512];
        int rc = syntax_check(src, ps[i].defines, first, sizeof first);
        CHECK(rc == 0, "expected metal/%s with %s to pass the syntax check: %s", ps[i].file,
              ps[i].defines, first);
        free(src);
    }
    CHECK(np >= 20, "expected at least 20 distinct programs checked, got %d", np);
    /* the helpers that no candidate names: the reduction lives in the striped
     * file (checked above); the zero helper has its own */
    char *src = mq_metal_source("marlin_zero_reduction.metal", err, sizeof err);
    char first[512];
    CHECK(src && syntax_check(src, "", first, sizeof first) == 0,
          "expected marlin_zero_reduction.metal to pass: %s", src ? first : err);
    free(src);

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
    CHECK(syntax_check("#include \"mq_metal.h\"\n", "TILE_M=12", first, sizeof first) != 0,
          "expected a tile that is not a multiple of 8 to fail (static_assert)");
}

static void test_backend_here(void)
{
    char note[512] = "";
    mq_error e;
    mq_backend_opts bo = {1};
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
        const char *name, *arch, *chip;
    } cases[] = {
        {"Apple M4 Max", "applegpu_g16s", "m4max"}, /* the name decides */
        {"Apple M2 Pro", "applegpu_g14s", "m2pro"},
        {"Apple M1", "applegpu_g13g", "m1"},
        {"Apple M1 Ultra", "", "m1ultra"},          /* no architecture name (older macOS) */
        {"Some Future GPU", "applegpu_g13g", "m1"}, /* the only g13g */
        {"Some Future GPU", "applegpu_g15g", "m3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mq_chip c;
        int rc = mq_chip_from_device(&db, cases[i].name, cases[i].arch, &c, err, sizeof err);
        CHECK(rc == 0 && !strcmp(c.name, cases[i].chip), "expected '%s' (%s) to be %s, got %s",
              cases[i].name, cases[i].arch, cases[i].chip, rc ? err : c.name);
    }
    mq_chip c;
    CHECK(mq_chip_from_device(&db, "Unknown", "applegpu_g16s", &c, err, sizeof err) == -1 &&
              strstr(err, "m4pro") && strstr(err, "m4max") && strstr(err, "--chip"),
          "expected a shared architecture to name its chips and ask for --chip, got '%s'", err);
    CHECK(mq_chip_from_device(&db, "Unknown", "applegpu_g99x", &c, err, sizeof err) == -1 &&
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
