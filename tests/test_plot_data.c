/* test_plot_data.c - what the plots show, checked without gnuplot: the
 * occupancy and split-K curves keep the fastest candidate at each x and
 * the model curve is the lower envelope of its predictions; roofline
 * intensities and rates worked by hand; the model scatter's quality; the
 * nightly history's ratios, verdicts and labels on a hand-made directory of
 * runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "history_data.h"
#include "plot_data.h"
#include "results.h"
#include "testdata.h"
#include "work_features.h"

/* The 5-core toy chip with the Apple threadgroup-memory budget, so that the
 * seed tiles fit. */
static mq_chip roomy_chip(void)
{
    mq_chip c = td_toy_chip();
    c.v[MQ_CHIP_TG_MEM_BYTES] = 32768;
    c.v[MQ_CHIP_MAX_THREADS_PER_TG] = 1024;
    mq_chip_set_limits(&c);
    return c;
}

static mq_result row(mq_problem p, mq_candidate c, double median)
{
    mq_result r;
    memset(&r, 0, sizeof r);
    mq_result_stamp(&r);
    snprintf(r.chip, sizeof r.chip, "toy5");
    snprintf(r.backend, sizeof r.backend, "cpu");
    snprintf(r.status, sizeof r.status, "ok");
    r.p = p;
    r.c = c;
    r.st.median = median;
    return r;
}

/* Read the blocks back: n points of block b into xs/ys. */
static int read_block(const char *text, int b, double *xs, double *ys, int cap)
{
    const char *s = text;
    for (int k = 0; k < b; k++) { /* skip b datasets (each ends in "\n\n\n") */
        s = strstr(s, "\n\n\n");
        if (!s)
            return -1;
        s += 3;
    }
    int n = 0;
    while (*s && *s != '\n' && n < cap) {
        if (sscanf(s, "%lf %lf", &xs[n], &ys[n]) == 2 && !isnan(xs[n]))
            n++;
        s = strchr(s, '\n');
        if (!s)
            break;
        s++;
    }
    return n;
}

static char *capture(FILE *f)
{
    long n = ftell(f);
    rewind(f);
    char *t = calloc((size_t)n + 1, 1);
    if (t && fread(t, 1, (size_t)n, f) != (size_t)n)
        t[0] = 0;
    return t;
}

static void test_occupancy(void)
{
    mq_chip chip = roomy_chip();
    mq_problem p = {MQ_FMT_FP4, 1, 1024, 1024, 128};
    /* two candidates at the same occupancy (tile_n 128 and the striped one
     * with the same threadgroup count), another split_k */
    mq_candidate a = {MQ_VAR_MARLIN_FP4, {8, 128, 32, 0, 1}};
    mq_candidate b = {MQ_VAR_MARLIN_FP4, {8, 128, 16, 0, 1}};
    mq_candidate c = {MQ_VAR_MARLIN_FP4_STRIPED, {8, 128, 32, 10, 2}};
    mq_features fa, fb, fc;
    CHECK(mq_features_compute(&p, &a, &chip, &fa, NULL) == MQ_OK &&
              mq_features_compute(&p, &b, &chip, &fb, NULL) == MQ_OK &&
              mq_features_compute(&p, &c, &chip, &fc, NULL) == MQ_OK,
          "expected the three hand-picked candidates to be legal on the toy chip");
    CHECK(fa.threadgroups == fb.threadgroups, "expected a and b at the same occupancy (%g, %g)",
          fa.threadgroups, fb.threadgroups);
    mq_result rs[3] = {row(p, a, 2e-3), row(p, b, 1e-3), row(p, c, 3e-3)};
    const mq_result *ptr[3] = {&rs[0], &rs[1], &rs[2]};
    mq_plot_src s = {chip, NULL, ptr, 3};
    FILE *f = tmpfile();
    mq_plot_series_info si;
    char err[256];
    CHECK(mq_plot_occupancy_data(&s, &p, f, &si, err, sizeof err) == 0, "occupancy data: %s", err);
    char *text = capture(f);
    CHECK(si.nseries == 2 && !strcmp(si.labels, "1 2"),
          "expected two series labelled '1 2' (split_k), got %d '%s'", si.nseries, si.labels);
    double x[8], y[8];
    int n = read_block(text, 0, x, y, 8);
    CHECK(n == 1 && fabs(x[0] - fa.threadgroups / 5) < 1e-12 && fabs(y[0] - 1.0) < 1e-12,
          "expected split_k=1 measured: one point at %g TGs/core, 1 ms (the faster of two), got "
          "%d points, first (%g, %g)",
          fa.threadgroups / 5, n, x[0], y[0]);
    n = read_block(text, 2, x, y, 8);
    CHECK(n == 1 && fabs(x[0] - 2.0) < 1e-12 && fabs(y[0] - 3.0) < 1e-12,
          "expected split_k=2 measured: (10 TGs / 5 cores = 2, 3 ms), got %d points (%g, %g)", n,
          x[0], y[0]);
    CHECK(read_block(text, 1, x, y, 8) == 0 && si.model_points == 0,
          "expected no model points without a model");
    free(text);
    fclose(f);

    /* with a model: its curve lies on or under every candidate's prediction */
    /* dispatch, traffic, compute, split-K, wave, 3 dequant, chain K step */
    mq_model m = td_model((const double[]){2e-6, 1, 1, 1, 1e-7, 0, 0, 0, 1e-8}, 9);
    s.model = &m;
    f = tmpfile();
    CHECK(mq_plot_occupancy_data(&s, &p, f, &si, err, sizeof err) == 0, "with model: %s", err);
    text = capture(f);
    double mx[256], my[256];
    int nm = read_block(text, 1, mx, my, 256);
    CHECK(nm > 1 && si.model_points > nm - 1,
          "expected a model curve of several occupancies for split_k=1, got %d", nm);
    int under = 1;
    for (int i = 0; i < nm; i++)
        if (fabs(mx[i] - fa.threadgroups / 5) < 1e-12)
            under &= my[i] <= 1e3 * fmin(mq_model_predict(&m, &fa), mq_model_predict(&m, &fb)) +
                                  1e-12;
    CHECK(under, "expected the model curve at a's occupancy at or below a's and b's predictions");
    int sorted = 1;
    for (int i = 1; i < nm; i++)
        sorted &= mx[i] > mx[i - 1];
    CHECK(sorted, "expected one model point per occupancy, ascending");
    free(text);
    fclose(f);

    mq_problem other = {MQ_FMT_FP4, 7, 1024, 1024, 128};
    s.model = NULL;
    f = tmpfile();
    CHECK(mq_plot_occupancy_data(&s, &other, f, &si, err, sizeof err) == -1 &&
              strstr(err, "nothing to draw"),
          "expected 'nothing to draw' for a shape without rows or model, got '%s'", err);
    fclose(f);
}

static void test_splitk(void)
{
    mq_chip chip = roomy_chip();
    mq_result rs[4];
    for (int i = 0; i < 4; i++) {
        mq_problem p = {MQ_FMT_FP4, i < 2 ? 1 : 4, 1024, 2048, 128};
        mq_candidate c = {MQ_VAR_MARLIN_FP4_STRIPED, {8, 128, 32, 10, i % 2 ? 4 : 1}};
        rs[i] = row(p, c, 1e-3 * (i + 1));
    }
    mq_problem big = {MQ_FMT_FP4, 64, 1024, 2048, 128};
    mq_result r64 = row(big, rs[0].c, 1.0);
    const mq_result *ptr[5] = {&rs[0], &rs[1], &rs[2], &rs[3], &r64};
    mq_plot_src s = {chip, NULL, ptr, 5};
    FILE *f = tmpfile();
    mq_plot_series_info si;
    char err[256];
    CHECK(mq_plot_splitk_data(&s, MQ_FMT_FP4, 1024, 2048, 128, 16, f, &si, err, sizeof err) == 0,
          "splitk data: %s", err);
    CHECK(si.nseries == 2 && !strcmp(si.labels, "M=1 M=4"),
          "expected the series M=1 M=4 (M=64 is not small), got '%s'", si.labels);
    char *text = capture(f);
    double x[4], y[4];
    int n = read_block(text, 2, x, y, 4);
    CHECK(n == 2 && x[0] == 1 && x[1] == 4 && fabs(y[0] - 3) < 1e-12 && fabs(y[1] - 4) < 1e-12,
          "expected M=4: (1, 3 ms), (4, 4 ms), got %d points", n);
    free(text);
    fclose(f);
}

static void test_roofline_and_model(void)
{
    mq_chip chip = roomy_chip();
    mq_problem p = {MQ_FMT_FP4, 1, 4096, 4096, 128};
    mq_candidate c = {MQ_VAR_MARLIN_FP4, {8, 128, 32, 0, 1}};
    mq_result rs[2] = {row(p, c, 1e-3), row(p, c, 2e-3)};
    const mq_result *ptr[2] = {&rs[0], &rs[1]};
    mq_plot_src s = {chip, NULL, ptr, 2};
    FILE *f = tmpfile();
    char err[256];
    CHECK(mq_plot_roofline_data(&s, f, err, sizeof err) == 1, "expected one shape: %s", err);
    char *text = capture(f);
    /* fp4 g=128: 0.5 + 2/128 bytes per weight; 8650752 + 2*4096 + 2*4096 bytes */
    double ai, gf, gb, flops = 2.0 * 4096 * 4096, bytes = 8650752.0 + 16384;
    const char *b1 = strstr(text, "\n\n\n");
    CHECK(b1 && sscanf(b1 + 3, "%lf %lf %lf", &ai, &gf, &gb) == 3 &&
              fabs(ai - flops / bytes) < 1e-4 * ai && fabs(gf - flops / 1e-3 / 1e9) < 1e-3 &&
              fabs(gb - bytes / 1e-3 / 1e9) < 1e-3,
          "expected the fastest row at I = %.4f, %.3f GFLOP/s, %.3f GB/s", flops / bytes,
          flops / 1e-3 / 1e9, bytes / 1e-3 / 1e9);
    free(text);
    fclose(f);

    mq_plot_series_info si;
    double mape, rho, lo, hi;
    f = tmpfile();
    CHECK(mq_plot_model_data(&s, f, &si, &mape, &rho, &lo, &hi, err, sizeof err) == -1 &&
              strstr(err, "no cost model"),
          "expected the model plot to refuse without a model, got '%s'", err);
    fclose(f);
    /* rows whose times are the model's own predictions: MAPE 0, Spearman 1 */
    mq_model m = td_model((const double[]){1e-6, 1, 1, 0, 0, 0, 0, 0, 1e-8}, 9);
    mq_candidate cs[3] = {{MQ_VAR_MARLIN_FP4, {8, 128, 32, 0, 1}},
                          {MQ_VAR_MARLIN_FP4, {8, 64, 32, 0, 1}},
                          {MQ_VAR_MARLIN_FP4, {8, 128, 16, 0, 1}}};
    mq_result mr[3];
    const mq_result *mp[3];
    for (int i = 0; i < 3; i++) {
        mq_features ft;
        CHECK(mq_features_compute(&p, &cs[i], &chip, &ft, NULL) == MQ_OK,
              "expected candidate %d legal on the toy chip", i);
        mr[i] = row(p, cs[i], mq_model_predict(&m, &ft));
        mp[i] = &mr[i];
    }
    mq_plot_src ms = {chip, &m, mp, 3};
    f = tmpfile();
    CHECK(mq_plot_model_data(&ms, f, &si, &mape, &rho, &lo, &hi, err, sizeof err) == 3 && mape < 1e-12 &&
              fabs(rho - 1) < 1e-12 && !strcmp(si.labels, "fp4"),
          "expected 3 rows, MAPE 0, Spearman 1, one series fp4; got MAPE %g rho %g '%s' (%s)",
          mape, rho, si.labels, err);
    fclose(f);
}

/* A run file with one benchmark per M (1, 2), samples scaled by slow[M-1]. */
static void write_run(const char *path, const char *date, const double slow[2])
{
    mq_results_writer w;
    char err[512];
    unlink(path);
    if (mq_results_open(path, &w, err, sizeof err)) {
        CHECK(0, "cannot open %s: %s", path, err);
        return;
    }
    for (int m = 1; m <= 2; m++) {
        double smp[20];
        for (int i = 0; i < 20; i++)
            smp[i] = 1e-3 * slow[m - 1] * (1 + 0.002 * ((i * 7) % 11));
        mq_result r = row((mq_problem){MQ_FMT_FP4, m, 4096, 4096, 128},
                          (mq_candidate){MQ_VAR_FUSED_FP4, {8, 1024, 128, 0, 1}}, 1e-3 * slow[m - 1]);
        snprintf(r.date, sizeof r.date, "%s", date);
        r.samples = smp;
        r.nsamples = r.st.n = 20;
        mq_results_append(&w, &r, err, sizeof err);
    }
    mq_results_close(&w);
}

static void test_history(void)
{
    char dir[] = "/tmp/mq-history-XXXXXX", path[256];
    if (!mkdtemp(dir)) {
        CHECK(0, "cannot make a temporary directory");
        return;
    }
    const double same[2] = {1, 1}, slower[2] = {1, 1.2};
    snprintf(path, sizeof path, "%s/baseline.csv", dir);
    write_run(path, "2026-11-19T02:00:00Z", same);
    snprintf(path, sizeof path, "%s/2026-11-20.csv", dir);
    write_run(path, "2026-11-20T02:00:00Z", same);
    snprintf(path, sizeof path, "%s/2026-11-21.csv", dir);
    write_run(path, "2026-11-21T02:00:00Z", slower);
    FILE *l = tmpfile(), *m = tmpfile(), *g = tmpfile();
    mq_plot_history_info hi;
    mq_regress_opts o = mq_regress_defaults();
    char err[512];
    CHECK(mq_plot_history_data(dir, NULL, &o, l, m, g, &hi, err, sizeof err) == 0,
          "history: %s", err);
    CHECK(hi.nbench == 2 && hi.nruns == 2 && hi.regressed_latest == 1 &&
              !strcmp(hi.first, "2026-11-20T02:00:00Z") && !strcmp(hi.last, "2026-11-21T02:00:00Z"),
          "expected 2 benchmarks, 2 runs, 1 regression in the latest, dates in order; got %d %d "
          "%d %s %s",
          hi.nbench, hi.nruns, hi.regressed_latest, hi.first, hi.last);
    char *marks = capture(m), *geo = capture(g);
    CHECK(strstr(marks, "2026-11-21T02:00:00Z 1.2 1 \"fp4 M=2 4096x4096 marlin_gemm_fused_fp4\""),
          "expected the M=2 regression of the latest run marked and labelled, got '%s'", marks);
    double g1, g2;
    int r1, r2;
    CHECK(sscanf(geo, "%*s %lf %d %*s %lf %d", &g1, &r1, &g2, &r2) == 4 && fabs(g1 - 1) < 1e-9 &&
              fabs(g2 - sqrt(1.2)) < 1e-5 && r1 == 0 && r2 == 1,
          "expected geometric means 1 and sqrt(1.2) with 0 and 1 regressed, got '%s'", geo);
    free(marks);
    free(geo);
    fclose(l);
    fclose(m);
    fclose(g);
    /* a confirmation pass that did not repeat the regression: hollow mark */
    char cdir[200];
    snprintf(cdir, sizeof cdir, "%s/confirm", dir);
    mkdir(cdir, 0755);
    snprintf(path, sizeof path, "%s/2026-11-21.csv", cdir);
    write_run(path, "2026-11-21T02:05:00Z", same);
    l = tmpfile(), m = tmpfile(), g = tmpfile();
    CHECK(mq_plot_history_data(dir, NULL, &o, l, m, g, &hi, err, sizeof err) == 0,
          "history with a confirmation pass: %s", err);
    marks = capture(m);
    geo = capture(g);
    CHECK(strstr(marks, "2026-11-21T02:00:00Z 1.2 3 \"\"") && hi.regressed_latest == 0 &&
              strstr(geo, "2026-11-21T02:00:00Z 1.09545 0"),
          "expected the unrepeated regression marked 3, unlabelled, not counted; got '%s' '%s'",
          marks, geo);
    free(marks);
    free(geo);
    fclose(l);
    fclose(m);
    fclose(g);
    unlink(path);
    rmdir(cdir);
    /* the night's A/B (ab/2026-11-21: 3 rounds): it finds M=1 steadily 10%
     * slower and M=2 unchanged, so its verdicts replace the stored ones: M=1
     * regressed, the stored M=2 regression unconfirmed */
    char adir[200], apath[300];
    snprintf(adir, sizeof adir, "%s/ab", dir);
    mkdir(adir, 0755);
    snprintf(adir, sizeof adir, "%s/ab/2026-11-21", dir);
    mkdir(adir, 0755);
    for (int r = 1; r <= 3; r++) {
        const double bslow[2] = {1.10 * (1 + 0.003 * r), 1 + 0.002 * (r % 2)};
        snprintf(apath, sizeof apath, "%s/a.%d.csv", adir, r);
        write_run(apath, "2026-11-21T02:00:00Z", same);
        snprintf(apath, sizeof apath, "%s/b.%d.csv", adir, r);
        write_run(apath, "2026-11-21T02:00:00Z", bslow);
    }
    l = tmpfile(), m = tmpfile(), g = tmpfile();
    CHECK(mq_plot_history_data(dir, NULL, &o, l, m, g, &hi, err, sizeof err) == 0,
          "history with an A/B night: %s", err);
    marks = capture(m);
    CHECK(strstr(marks, "2026-11-21T02:00:00Z 1 1 \"fp4 M=1 4096x4096 marlin_gemm_fused_fp4\"") &&
              strstr(marks, "2026-11-21T02:00:00Z 1.2 3 \"\"") && hi.regressed_latest == 1,
          "expected the A/B's M=1 regression marked 1 and labelled, the stored M=2 regression "
          "it did not see marked 3; got '%s'",
          marks);
    free(marks);
    fclose(l);
    fclose(m);
    fclose(g);
    for (int r = 1; r <= 3; r++)
        for (int side = 0; side < 2; side++) {
            snprintf(apath, sizeof apath, "%s/%c.%d.csv", adir, side ? 'b' : 'a', r);
            unlink(apath);
        }
    rmdir(adir);
    snprintf(adir, sizeof adir, "%s/ab", dir);
    rmdir(adir);
    l = tmpfile(), m = tmpfile(), g = tmpfile();
    CHECK(mq_plot_history_data(dir, "trellis", &o, l, m, g, &hi, err, sizeof err) == -1 &&
              strstr(err, "matching 'trellis'"),
          "expected a filter matching nothing to be an error naming it, got '%s'", err);
    fclose(l);
    fclose(m);
    fclose(g);
    for (int i = 0; i < 3; i++) {
        static const char *const names[] = {"baseline.csv", "2026-11-20.csv", "2026-11-21.csv"};
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    l = tmpfile(), m = tmpfile(), g = tmpfile();
    CHECK(mq_plot_history_data(dir, NULL, &o, l, m, g, &hi, err, sizeof err) == -1 &&
              strstr(err, "baseline.csv"),
          "expected a missing baseline to be an error naming it, got '%s'", err);
    fclose(l);
    fclose(m);
    fclose(g);
    rmdir(dir);
}

int main(void)
{
    test_occupancy();
    test_splitk();
    test_roofline_and_model();
    test_history();
    return check_done("plot_data");
}
