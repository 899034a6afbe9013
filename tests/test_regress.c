/* test_regress.c - trust in the regression detector: A/A comparisons (the
 * same distribution twice) report no regression in at least 19 of 20
 * trials; a planted 10% slowdown is caught in at least 19 of 20; fewer than
 * the minimum samples is "unreliable". The noise is this machine's: samples
 * are drawn (with replacement) from timings recorded here by bench. */
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ab_compare.h"
#include "check.h"
#include "paired.h"
#include "regress.h"
#include "results.h"
#include "run_compare.h"
#include "testdata.h"

static double draw(const double *pool, int n, uint32_t *st)
{
    *st = *st * 1664525u + 1013904223u;
    return pool[(*st >> 8) % (uint32_t)n];
}

static mq_result row(int M, const double *samples, int n)
{
    mq_result r;
    memset(&r, 0, sizeof r);
    mq_result_stamp(&r);
    snprintf(r.chip, sizeof r.chip, "host");
    snprintf(r.backend, sizeof r.backend, "cpu");
    r.p = (mq_problem){MQ_FMT_FP4, M, 4096, 4096, 128};
    r.c = (mq_candidate){MQ_VAR_FUSED_FP4, {8, 1024, 128, 0, 1}};
    snprintf(r.status, sizeof r.status, "ok");
    r.samples = (double *)samples;
    r.nsamples = r.st.n = n;
    double s[64];
    memcpy(s, samples, sizeof(double) * (size_t)n);
    for (int i = 1; i < n; i++) /* median for the row */
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    r.st.median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    return r;
}

static int run(const char *prog, const char *const *args)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(127);
        execv(prog, (char *const *)args);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* path's first n - 1 bytes as a string ("" when it cannot be read). */
static void read_text(const char *path, char *text, size_t n)
{
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(text, 1, n - 1, f) : 0;
    if (f)
        fclose(f);
    text[len] = '\0';
}

static void remove_dir(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* compare on a hand-made pair of files: one benchmark each of same,
 * regressed (+20%), improved (-20%) and unreliable (3 samples). */
static void test_compare_command(const char *compare)
{
    char dir[] = "/tmp/mq-test-regress-XXXXXX", err[512];
    if (!mkdtemp(dir))
        return;
    char base[600], cur[600], rep[600];
    snprintf(base, sizeof base, "%s/base.csv", dir);
    snprintf(cur, sizeof cur, "%s/new.csv", dir);
    snprintf(rep, sizeof rep, "%s/report.md", dir);
    double a[20], same[20], slow[20], fast[20];
    for (int i = 0; i < 20; i++) {
        a[i] = 1e-3 * (1 + 0.01 * ((i * 7) % 20));
        same[i] = 1e-3 * (1 + 0.01 * ((i * 3) % 20));
        slow[i] = a[i] * 1.2;
        fast[i] = a[i] * 0.8;
    }
    mq_results_writer w;
    mq_results_open(base, &w, err, sizeof err);
    for (int M = 1; M <= 4; M++) {
        mq_result r = row(M, a, M == 4 ? 3 : 20);
        mq_results_append(&w, &r, err, sizeof err);
    }
    mq_results_close(&w);
    mq_results_open(cur, &w, err, sizeof err);
    const double *news[4] = {same, slow, fast, slow};
    for (int M = 1; M <= 4; M++) {
        mq_result r = row(M, news[M - 1], M == 4 ? 3 : 20);
        mq_results_append(&w, &r, err, sizeof err);
    }
    mq_results_close(&w);
    const char *args[] = {compare, base, cur, "--report", rep, NULL};
    CHECK(run(compare, args) == 1, "a regression makes compare exit 1");
    char text[8192];
    read_text(rep, text, sizeof text);
    CHECK(strstr(text, "**1 regressed, 1 improved, 1 same, 1 unreliable** of 4") != NULL,
          "the Markdown report counts one of each verdict");
    CHECK(strstr(text, "| regressed | +20.0% |") != NULL, "the report lists the +20%% regression");
    const char *same_args[] = {compare, base, base, NULL};
    CHECK(run(compare, same_args) == 0, "a file against itself: exit 0");
    const char *bad_args[] = {compare, base, "/nonexistent.csv", NULL};
    CHECK(run(compare, bad_args) == 2, "a missing file: exit 2");
    remove_dir(dir);
}

/* Links planted where a writer of predictable temporary names would write
 * (OUT.tmp.PID for the next 300 process ids) lead to a file outside the
 * output directory: compare --report, --rerun-list and --median-of write
 * only through names they made (mkstemp), so that file stays as it was and
 * each output is a file of its own. */
static void test_compare_planted(const char *compare)
{
    char dir[] = "/tmp/mq-test-plant-XXXXXX", err[512];
    if (!mkdtemp(dir))
        return;
    char outside[600], base[600], cur[600], out[600], rep[700], rer[700], med[700], ln[800];
    snprintf(outside, sizeof outside, "%s/outside.txt", dir);
    snprintf(base, sizeof base, "%s/base.csv", dir);
    snprintf(cur, sizeof cur, "%s/new.csv", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(rep, sizeof rep, "%s/r.md", out);
    snprintf(rer, sizeof rer, "%s/r.txt", out);
    snprintf(med, sizeof med, "%s/m.csv", out);
    FILE *f = fopen(outside, "w");
    if (f) {
        fputs("outside, must stay\n", f);
        fclose(f);
    }
    double a[20], slow[20];
    for (int i = 0; i < 20; i++) {
        a[i] = 1e-3 * (1 + 0.01 * ((i * 7) % 20));
        slow[i] = a[i] * 1.2;
    }
    mq_result rb = row(1, a, 20), rn = row(1, slow, 20);
    const mq_result *pb = &rb, *pn = &rn;
    CHECK(mq_results_write(base, &pb, 1, err, sizeof err) == 0 &&
              mq_results_write(cur, &pn, 1, err, sizeof err) == 0 && mkdir(out, 0755) == 0,
          "the planted-link test's files: %s", err);
    int planted = 0;
    for (long p = (long)getpid() + 1; p <= (long)getpid() + 300; p++) {
        const char *outs[3] = {rep, rer, med};
        for (int k = 0; k < 3; k++) {
            snprintf(ln, sizeof ln, "%s.tmp.%ld", outs[k], p);
            planted += symlink(outside, ln) == 0;
        }
    }
    CHECK(planted == 900, "900 links planted, got %d", planted);
    const char *args[] = {compare, base, cur, "--report", rep, "--rerun-list", rer, NULL};
    CHECK(run(compare, args) == 1, "compare through planted links: exit 1 (a regression)");
    const char *margs[] = {compare, "--median-of", med, base, cur, NULL};
    CHECK(run(compare, margs) == 0, "compare --median-of through planted links: exit 0");
    char text[256];
    read_text(outside, text, sizeof text);
    CHECK(!strcmp(text, "outside, must stay\n"), "the file the links lead to is unchanged: '%.40s'",
          text);
    const char *outs[3] = {rep, rer, med};
    for (int k = 0; k < 3; k++) {
        struct stat sb;
        CHECK(lstat(outs[k], &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0,
              "%s is a file of its own, written", outs[k]);
    }
    remove_dir(dir);
}

/* The baseline from several runs: per benchmark and occurrence, the row
 * with the median of the runs' medians; one missing from a run is left out. */
static void test_median_of(void)
{
    static const double med[3][3] = {{1.0, 5.0, 9.0}, {3.0, 4.0, 7.0}, {2.0, 6.0, 8.0}};
    mq_result rows[3][3];
    mq_results runs[3];
    double smp[1] = {0};
    for (int q = 0; q < 3; q++) {
        for (int i = 0; i < 3; i++) {
            /* rows 0 and 1 share a key (a layer repeated in a suite); row 2
             * is another shape, missing from run 2 */
            rows[q][i] = row(i == 2 ? 2 : 1, smp, 1);
            rows[q][i].st.median = med[q][i];
        }
        runs[q].r = rows[q];
        runs[q].n = q == 2 ? 2 : 3;
    }
    const mq_result **out;
    int n;
    CHECK(mq_results_median_of(runs, 3, &out, &n) == 0 && n == 2,
          "expected two benchmarks ok in all three runs, got %d", n);
    if (n == 2)
        CHECK(out[0]->st.median == 2.0 && out[1]->st.median == 5.0,
              "expected the medians 2 (of 1, 3, 2) and 5 (of 5, 4, 6) by occurrence, got %g %g",
              out[0]->st.median, out[1]->st.median);
    free(out);
}

/* The paired verdict on hand-checked numbers: four rounds of B/A 1.10,
 * 1.12, 1.09, 1.11 give log ratios of mean 0.0998 and standard deviation
 * 0.01168, t = 17.1 on 3 degrees of freedom (p = 0.00044), the 99% interval
 * exp(0.0998 -+ 5.841 x 0.005842) = 1.0679 .. 1.1433. */
static void test_paired(void)
{
    mq_paired_opts o = mq_paired_defaults();
    mq_paired_result r;
    const double a[4] = {1, 2, 3, 4}, slow[4] = {1.10, 2 * 1.12, 3 * 1.09, 4 * 1.11};
    mq_paired_judge(a, slow, 4, &o, &r);
    CHECK(r.verdict == MQ_REGRESSED, "a steady +10%% over 4 rounds: regressed, got %s",
          mq_verdict_name(r.verdict));
    CHECK(fabs(r.ratio - 1.1050) < 0.0005, "expected the ratio 1.1050, got %.4f", r.ratio);
    CHECK(r.p > 0.0003 && r.p < 0.0006, "expected p = 0.00044, got %.5f", r.p);
    CHECK(fabs(r.ci_lo - 1.0679) < 0.0005 && fabs(r.ci_hi - 1.1433) < 0.0005,
          "expected the 99%% interval 1.0679 .. 1.1433, got %.4f .. %.4f", r.ci_lo, r.ci_hi);
    CHECK(r.detectable > 0.03 && r.detectable < 0.10,
          "tonight's scatter (sd 0.0117) detects less than 10%%, more than the 3%% floor: got %.3f",
          r.detectable);
    const double fast[4] = {1 / 1.10, 2 / 1.12, 3 / 1.09, 4 / 1.11};
    mq_paired_judge(a, fast, 4, &o, &r);
    CHECK(r.verdict == MQ_IMPROVED, "a steady -10%%: improved, got %s", mq_verdict_name(r.verdict));
    const double tiny[4] = {1.010, 2 * 1.011, 3 * 1.009, 4 * 1.010};
    mq_paired_judge(a, tiny, 4, &o, &r);
    CHECK(r.verdict == MQ_SAME && r.p < o.alpha,
          "a significant +1%% is below the 3%% minimum effect: same, got %s (p %.2g)",
          mq_verdict_name(r.verdict), r.p);
    const double aa[4] = {1.05, 2 * 0.96, 3 * 1.03, 4 * 0.97};
    mq_paired_judge(a, aa, 4, &o, &r);
    CHECK(r.verdict == MQ_SAME, "A/A scatter of +-5%%: same, got %s", mq_verdict_name(r.verdict));
    double r4 = r.detectable;
    const double a8[8] = {1, 2, 3, 4, 1, 2, 3, 4},
                 b8[8] = {1.05, 2 * 0.96, 3 * 1.03, 4 * 0.97, 1.05, 2 * 0.96, 3 * 1.03, 4 * 0.97};
    mq_paired_judge(a8, b8, 8, &o, &r);
    CHECK(r.detectable < r4, "the same scatter over 8 rounds detects a smaller slowdown than over "
                             "4: got %.3f, then %.3f", r4, r.detectable);
    mq_paired_judge(a, slow, 2, &o, &r);
    CHECK(r.verdict == MQ_UNRELIABLE, "2 rounds, fewer than the 3 required: unreliable, got %s",
          mq_verdict_name(r.verdict));
    const double bad[4] = {1.1, 0, 3.3, 4.4};
    mq_paired_judge(a, bad, 4, &o, &r);
    CHECK(r.rounds == 3, "a round with a zero time is left out: expected 3 rounds, got %d",
          r.rounds);
}

/* mq_ab_open_count: which verdicts leave a slowdown open */
static void test_open_count(void)
{
    mq_ab_bench b[4] = {0};
    const mq_verdict v[4] = {MQ_SAME, MQ_REGRESSED, MQ_IMPROVED, MQ_UNRELIABLE};
    const double hi[4] = {1.20, 5.0, 0.95, 1.0};
    for (int i = 0; i < 4; i++) {
        b[i].r.verdict = v[i];
        b[i].r.ci_hi = hi[i];
    }
    mq_ab_comparison c = {.bench = b, .n = 4};
    CHECK(mq_ab_open_count(&c, 0.10) == 2,
          "fraction 0.10: the same one reaching 1.20 and the unreliable one are open, got %d",
          mq_ab_open_count(&c, 0.10));
    CHECK(mq_ab_open_count(&c, 0.30) == 1,
          "fraction 0.30: only the unreliable one is open (a regression never is), got %d",
          mq_ab_open_count(&c, 0.30));
    c.n = 3;
    CHECK(mq_ab_open_count(&c, 0.20) == 1,
          "an interval reaching exactly 1 + fraction is open, got %d", mq_ab_open_count(&c, 0.20));
}

/* compare --ab on hand-made rounds: three benchmarks (same, +10%, -10%) over
 * three rounds with a little scatter; then --bench, and bad directories. */
static void test_compare_ab_command(const char *compare)
{
    char dir[] = "/tmp/mq-test-ab-XXXXXX", err[512], path[700], rep[700];
    if (!mkdtemp(dir))
        return;
    static const double scale[3] = {1.0, 1.10, 1 / 1.10}, jitter[3] = {1.004, 0.997, 1.0};
    double smp[1] = {0};
    for (int r = 1; r <= 3; r++)
        for (int side = 0; side < 2; side++) {
            snprintf(path, sizeof path, "%s/%c.%d.csv", dir, side ? 'b' : 'a', r);
            mq_results_writer w;
            mq_results_open(path, &w, err, sizeof err);
            for (int M = 1; M <= 3; M++) {
                mq_result x = row(M, smp, 1);
                x.st.median = 1e-3 * M * (side ? scale[M - 1] * jitter[(r + M) % 3] : 1.0);
                mq_results_append(&w, &x, err, sizeof err);
            }
            mq_results_close(&w);
        }
    snprintf(rep, sizeof rep, "%s/ab.md", dir);
    const char *args[] = {compare, "--ab", dir, "--report", rep, NULL};
    CHECK(run(compare, args) == 1, "a steady +10%% over three rounds makes compare --ab exit 1");
    char text[8192];
    read_text(rep, text, sizeof text);
    CHECK(strstr(text, "**1 regressed, 1 improved, 1 same, 0 unreliable** of 3") != NULL,
          "the A/B report counts one regressed, one improved, one same");
    CHECK(strstr(text, "| regressed | 1.100 |") != NULL, "the report lists B/A 1.100");
    const char *one[] = {compare, "--ab", dir, "--bench", "M=1 ", NULL};
    CHECK(run(compare, one) == 0, "--bench naming the unchanged benchmark: exit 0");
    const char *loose[] = {compare, "--ab", dir, "--bench", "M=1 ", "--rule-out", "0.5", NULL};
    CHECK(run(compare, loose) == 0,
          "--rule-out 0.5 on the unchanged benchmark (interval within +2%%): exit 0, good");
    const char *tight[] = {compare, "--ab", dir, "--bench", "M=1 ", "--rule-out", "0.001", NULL};
    CHECK(run(compare, tight) == 3,
          "--rule-out 0.001 that three rounds of 0.3%% scatter cannot rule out: exit 3");
    const char *reg[] = {compare, "--ab", dir, "--rule-out", "0.001", NULL};
    CHECK(run(compare, reg) == 1, "a regression decides before --rule-out: exit 1");
    const char *none[] = {compare, "--ab", dir, "--bench", "no such", NULL};
    CHECK(run(compare, none) == 2, "--bench naming nothing: exit 2");
    snprintf(path, sizeof path, "%s/b.3.csv", dir);
    unlink(path);
    CHECK(run(compare, args) == 2, "round 3 without its B side: exit 2");
    snprintf(path, sizeof path, "%s/a.2.csv", dir);
    unlink(path);
    CHECK(run(compare, args) == 2, "a single round (a.2.csv gone): exit 2");
    const char *nodir[] = {compare, "--ab", "/nonexistent-ab", NULL};
    CHECK(run(compare, nodir) == 2, "a directory without rounds: exit 2");
    remove_dir(dir);
}

int main(int argc, char **argv)
{
    test_median_of();
    (void)argc;
    char self[4096], compare[4200];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(compare, sizeof compare, "%s/../compare", dirname(self));
    test_compare_command(compare);
    test_compare_planted(compare);
    test_paired();
    test_open_count();
    test_compare_ab_command(compare);
    char err[512];
    mq_results rs;
    const char *path = MQ_SOURCE_DIR "/tests/data/bench-llama3-8b-host.csv";
    if (mq_results_load(path, &rs, err, sizeof err)) {
        CHECK(0, "recorded samples: %s", err);
        return check_done("regress");
    }
    /* a typical recorded candidate: the median relative MAD of those with at
     * least 30 samples */
    const mq_result *cands[4096];
    int nc = 0;
    for (int i = 0; i < rs.n && nc < 4096; i++)
        if (rs.r[i].nsamples >= 30)
            cands[nc++] = &rs.r[i];
    for (int i = 1; i < nc; i++) /* insertion sort by relative MAD */
        for (int j = i; j > 0 && cands[j]->st.mad / cands[j]->st.median <
                                     cands[j - 1]->st.mad / cands[j - 1]->st.median; j--) {
            const mq_result *t = cands[j];
            cands[j] = cands[j - 1];
            cands[j - 1] = t;
        }
    const mq_result *pool = nc ? cands[nc / 2] : NULL;
    CHECK(pool != NULL, "a recorded candidate with 30 or more samples");
    if (pool)
        printf("noise: MAD %.1f%% of the median, %d samples recorded by bench on this host\n",
               100 * pool->st.mad / pool->st.median, pool->nsamples);
    if (!pool) {
        mq_results_free(&rs);
        return check_done("regress");
    }
    mq_regress_opts o = mq_regress_defaults();
    uint32_t st = 2026;
    int n = 30, aa_regressed = 0, caught = 0;
    double a[30], b[30];
    for (int trial = 0; trial < 20; trial++) {
        for (int i = 0; i < n; i++) {
            a[i] = draw(pool->samples, pool->nsamples, &st);
            b[i] = draw(pool->samples, pool->nsamples, &st);
        }
        mq_comparison c;
        mq_compare_samples(a, n, b, n, &o, &c);
        aa_regressed += c.verdict == MQ_REGRESSED;
        for (int i = 0; i < n; i++)
            b[i] *= 1.10;
        mq_compare_samples(a, n, b, n, &o, &c);
        caught += c.verdict == MQ_REGRESSED;
    }
    CHECK(aa_regressed <= 1, "A/A: at most 1 false regression in 20 trials, got %d (noise: MAD "
                             "%.1f%% of the median over %d recorded samples)",
          aa_regressed, 100 * pool->st.mad / pool->st.median, pool->nsamples);
    CHECK(caught >= 19, "a planted 10%% slowdown is caught in at least 19 of 20 trials, got %d",
          caught);

    mq_comparison c;
    double three[3] = {1, 1.1, 1.2}, slow[3] = {2, 2.1, 2.2};
    mq_compare_samples(three, 3, slow, 3, &o, &c);
    CHECK(c.verdict == MQ_UNRELIABLE, "3 samples each: unreliable, not a verdict (got %s)",
          mq_verdict_name(c.verdict));
    double x[10], y[10];
    for (int i = 0; i < 10; i++) {
        x[i] = 1.0 + 0.01 * i;
        y[i] = x[i];
    }
    mq_compare_samples(x, 10, y, 10, &o, &c);
    CHECK(c.verdict == MQ_SAME && c.p > 0.99 && c.ratio == 1, "identical samples: same, p = 1");
    for (int i = 0; i < 10; i++)
        y[i] = x[i] * 0.8;
    mq_compare_samples(x, 10, y, 10, &o, &c);
    CHECK(c.verdict == MQ_IMPROVED && c.p < 0.01, "20%% faster, no overlap: improved (p %.2g)",
          c.p);
    for (int i = 0; i < 10; i++)
        y[i] = x[i] * 1.02;
    mq_compare_samples(x, 10, y, 10, &o, &c);
    CHECK(c.verdict == MQ_SAME, "2%% slower is below the 5%% minimum effect: same (got %s)",
          mq_verdict_name(c.verdict));
    mq_results_free(&rs);
    return check_done("regress");
}
