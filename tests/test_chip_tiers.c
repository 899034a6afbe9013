/* test_chip_tiers.c - the Apple tier functions (tuner/chip_tiers.h): a fit
 * recovers coefficients planted in synthetic figures; the shipped figures'
 * held-out rows are predicted within 1.2x and the chips file carries the
 * fit's relative rates; bad figure files are refused with the file, line and
 * field named. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "chip_tiers.h"

static const char *chips(void) { return mq_chips_default_path(); }

/* Write text to a fresh temporary file; its path into path. */
static int write_tmp(const char *text, char *path, size_t n)
{
    snprintf(path, n, "/tmp/mq-tiers-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return -1;
    }
    fputs(text, f);
    return fclose(f);
}

#define HEADER "chip,workload,bytes_per_token,flops_per_token,prefill_tps,decode_tps,role,source\n"

/* Figures whose share and efficiency are exactly exp(b . x) on 12 chips of
 * the shipped file: the fit must give b back. */
static void test_recovers_planted(void)
{
    static const char *names[] = {"m1", "m1pro", "m1max", "m1ultra", "m2", "m2max",
                                  "m2ultra60", "m3", "m3pro14", "m3max30", "m4pro", "m4max"};
    const double bs[MQ_TIER_NX] = {0.9, -0.25, 0.12, -0.3, 0.05};
    const double be[MQ_TIER_NX] = {-0.6, 0.05, -0.05, -0.04, 0.04};
    char *text = malloc(8192), path[64], err[600];
    size_t at = (size_t)snprintf(text, 8192, HEADER);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        mq_chip c;
        double x[MQ_TIER_NX], ls = 0, le = 0;
        CHECK(mq_chip_load_named(chips(), names[i], &c, err, sizeof err) == 0 &&
                  mq_tier_describe(&c, x) == 0,
              "chip %s of the shipped file is an Apple GPU: %s", names[i], err);
        for (int j = 0; j < MQ_TIER_NX; j++) {
            ls += bs[j] * x[j];
            le += be[j] * x[j];
        }
        /* bytes 1e9 and flops 1e12 a token: tps = share x GB/s, eff x TFLOPS */
        double peak = fmax(c.v[MQ_CHIP_FP16_TFLOPS], c.v[MQ_CHIP_FP32_TFLOPS]);
        at += (size_t)snprintf(text + at, 8192 - at, "%s,w,1e9,1e12,%.17g,%.17g,fit,planted\n",
                               names[i], exp(le) * peak, exp(ls) * c.v[MQ_CHIP_MEM_BW_GBS]);
    }
    CHECK(write_tmp(text, path, sizeof path) == 0, "a temporary file can be written");
    mq_llm_figures lf;
    mq_tiers t;
    int rc = mq_llm_figures_load(path, chips(), &lf, err, sizeof err);
    CHECK(rc == 0, "the planted figures load: %s", err);
    if (rc == 0) {
        CHECK(mq_tiers_fit(&lf, &t, err, sizeof err) == 0, "the planted figures fit: %s", err);
        for (int j = 0; j < MQ_TIER_NX; j++)
            CHECK(fabs(t.share[j] - bs[j]) < 1e-6 && fabs(t.eff[j] - be[j]) < 1e-6,
                  "coefficient %d back: share %.6f eff %.6f, got %.6f %.6f", j, bs[j], be[j],
                  t.share[j], t.eff[j]);
        mq_llm_figures_free(&lf);
    }
    unlink(path);
    free(text);
}

/* The shipped figures: every held-out prediction within 1.2x, and the chips
 * file's decode_bw_rel / prefill_rel the fit's (what `model tiers` checks). */
static void test_shipped(void)
{
    char err[600];
    mq_llm_figures lf;
    mq_tiers t;
    int rc = mq_llm_figures_load(MQ_SOURCE_DIR "/harness/llm-figures.csv", chips(), &lf, err,
                                 sizeof err);
    CHECK(rc == 0, "harness/llm-figures.csv loads: %s", err);
    if (rc)
        return;
    CHECK(mq_tiers_fit(&lf, &t, err, sizeof err) == 0, "the shipped figures fit: %s", err);
    int nchk = 0;
    for (int i = 0; i < lf.n; i++) {
        const mq_llm_figure *f = &lf.f[i];
        double x[MQ_TIER_NX], s, e;
        mq_tier_describe(&f->chip, x);
        mq_tiers_predict(&t, x, &s, &e);
        double rs = s / mq_llm_figure_share(f), re = e / mq_llm_figure_eff(f);
        if (f->role != MQ_TIER_CHECK)
            continue;
        nchk++;
        CHECK(fabs(log(rs)) <= log(1.2) && fabs(log(re)) <= log(1.2),
              "held-out %s (line %d) predicted within 1.2x: decode %.3fx, prefill %.3fx",
              f->chip.name, f->line, rs, re);
    }
    CHECK(nchk >= 8, "at least 8 held-out figures, got %d", nchk);
    mq_chip_db db;
    CHECK(mq_chips_load(chips(), &db, err, sizeof err) == 0, "the chips file loads: %s", err);
    mq_chip ref;
    double xref[MQ_TIER_NX];
    CHECK(mq_chip_find(&db, MQ_TIER_REFERENCE, 0, &ref, err, sizeof err) == 0 &&
              mq_tier_describe(&ref, xref) == 0,
          "the reference chip %s is in the chips file", MQ_TIER_REFERENCE);
    int napple = 0;
    for (int i = 0; i < db.n; i++) {
        const mq_chip *c = &db.chips[i];
        double x[MQ_TIER_NX], b, p;
        if (mq_tier_describe(c, x))
            continue;
        napple++;
        mq_tiers_relative(&t, x, xref, &b, &p);
        CHECK(fabs(c->v[MQ_CHIP_DECODE_BW_REL] - b) <= 0.0005 + 1e-9 &&
                  fabs(c->v[MQ_CHIP_PREFILL_REL] - p) <= 0.0005 + 1e-9 && b <= 1 && p <= 1,
              "%s: decode_bw_rel %.3f prefill_rel %.3f as the fit gives (model tiers), the "
              "file says %.3f %.3f", c->name, b, p, c->v[MQ_CHIP_DECODE_BW_REL],
              c->v[MQ_CHIP_PREFILL_REL]);
    }
    CHECK(napple >= 30, "every Apple chip checked (at least 30), got %d", napple);
    mq_chips_free(&db);
    mq_llm_figures_free(&lf);
}

/* One bad file: refused, the message naming what expect says. */
static void refuses(const char *text, const char *expect)
{
    char path[64], err[600] = "";
    mq_llm_figures lf;
    CHECK(write_tmp(text, path, sizeof path) == 0, "a temporary file can be written");
    int rc = mq_llm_figures_load(path, chips(), &lf, err, sizeof err);
    CHECK(rc == -1 && strstr(err, expect) && strstr(err, path) && !strchr(err, '\n'),
          "refused with one line naming the file and '%s', got rc %d: %s", expect, rc, err);
    if (rc == 0)
        mq_llm_figures_free(&lf);
    unlink(path);
}

static void test_bad_input(void)
{
    refuses(HEADER "m9,w,1e9,1e12,100,20,fit,src\n", "chip");
    refuses(HEADER "h100,w,1e9,1e12,100,20,fit,src\n", "not an Apple GPU");
    refuses(HEADER "m1,w,1e9,1e12,-5,20,fit,src\n", "prefill_tps");
    refuses(HEADER "m1,w,nan,1e12,100,20,fit,src\n", "bytes_per_token");
    refuses(HEADER "m1,w,1e9,1e12,100,20,maybe,src\n", "role");
    refuses(HEADER "m1,w,1e9,1e12,100,20,fit,\n", "source");
    refuses(HEADER "m1,,1e9,1e12,100,20,fit,src\n", "workload");
    refuses("chip,workload,bytes_per_token,prefill_tps,decode_tps,role,source\n"
            "m1,w,1e9,100,20,fit,src\n", "flops_per_token");
    refuses(HEADER "m1,w,1e9,1e12,100,90,fit,src\n", "decode"); /* 90 GB/s of 68 */
    refuses(HEADER, "no figures");
    /* too few fit rows: loads, does not fit */
    char path[64], err[600];
    mq_llm_figures lf;
    mq_tiers t;
    CHECK(write_tmp(HEADER "m1,w,1e9,1e12,1,50,fit,src\nm2,w,1e9,1e12,1,70,fit,src\n", path,
                    sizeof path) == 0 &&
              mq_llm_figures_load(path, chips(), &lf, err, sizeof err) == 0,
          "two figures load: %s", err);
    CHECK(mq_tiers_fit(&lf, &t, err, sizeof err) == -1 && strstr(err, "too few"),
          "two fit figures are too few to fit, got: %s", err);
    mq_llm_figures_free(&lf);
    unlink(path);
}

int main(void)
{
    test_recovers_planted();
    test_shipped();
    test_bad_input();
    return check_done("chip_tiers");
}
