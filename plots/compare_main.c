/* compare_main.c - the compare command: two results files (a baseline and
 * a new run), each benchmark present in both judged by Mann-Whitney U on
 * its raw samples plus a minimum effect size; a table, a geometric-mean
 * summary and an optional Markdown report. Exit 1 when anything regressed,
 * 0 otherwise, 2 on bad input. */
#include <csv.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "atomic_file.h"
#include "cli.h"
#include "compare_ab.h"
#include "regress.h"
#include "results.h"
#include "run_compare.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: compare BASE.csv NEW.csv [options]\n"
            "       compare --median-of OUT.csv RUN.csv...   (a baseline from several runs)\n"
            "       compare --ab DIR [options]   (an A/B night's rounds: compare --ab --help)\n"
            "Compares every benchmark (chip, backend, problem, candidate) measured ok in both\n"
            "results files: Mann-Whitney U on the raw samples and a minimum effect size.\n"
            "Exit status: 1 when anything regressed, 0 otherwise, 2 on bad input.\n\n"
            "  --alpha A          significance level (default 0.01)\n"
            "  --min-effect E     smallest |new/base - 1| that counts (default 0.05)\n"
            "  --min-samples N    fewer samples on a side: unreliable (default 5)\n"
            "  --report FILE.md   also write a Markdown report (atomically)\n"
            "  --history FILE     append a summary row (date, files, counts, geometric mean)\n"
            "  --rerun-list FILE  write bench arguments that re-measure each regressed\n"
            "                     benchmark, one line each (the nightly's confirmation pass)\n\n"
            "--median-of writes OUT.csv with, for every benchmark ok in all the runs, the row\n"
            "whose median is the median of the runs' (so no single run sets the bar).\n\n"
            "example:\n"
            "  compare results/nightly/2026-11-20.csv results/nightly/2026-11-21.csv "
            "--report /tmp/r.md\n");
}

/* One summary row per comparison, for the nightly history (a header first
 * when the file is new). One write, so rows never interleave or tear. */
static int append_history(int fd, const char *path, const char *const files[2], int np,
                          const int counts[4], double geo)
{
    char date[32], nums[6][32], err[4400];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    snprintf(nums[0], 32, "%d", np);
    for (int i = 0; i < 4; i++)
        snprintf(nums[1 + i], 32, "%d",
                 counts[i == 0 ? MQ_REGRESSED : i == 1 ? MQ_IMPROVED : i == 2 ? MQ_SAME
                                                                             : MQ_UNRELIABLE]);
    snprintf(nums[5], 32, "%.5f", geo);
    const char *fields[9] = {date, files[0], files[1], nums[0], nums[1],
                             nums[2], nums[3], nums[4], nums[5]};
    long cut = 0;
    int bad = mq_append_csv_row(fd, path,
                                "date,base,new,benchmarks,regressed,improved,same,unreliable,"
                                "geomean_new_over_base\n",
                                fields, 9, &cut, err, sizeof err);
    /* a torn last row (a crash or a full disk mid-append) was cut off first,
     * so this row does not glue onto it */
    if (cut > 0)
        fprintf(stderr, "compare: %s: cut off a torn last line (%ld bytes) before appending\n",
                path, cut);
    if (bad)
        fprintf(stderr, "compare: %s\n", err);
    return bad ? -1 : 0;
}

/* One line of bench arguments per regressed benchmark (each benchmark once),
 * so that a confirmation pass can re-measure exactly those. */
static int write_rerun_list(FILE *f, const char *tmp, const char *path,
                            const mq_run_pair *pairs, int np, char *err, size_t errlen)
{
    for (int i = 0; i < np; i++) {
        if (pairs[i].c.verdict != MQ_REGRESSED)
            continue;
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= pairs[j].c.verdict == MQ_REGRESSED && mq_result_same_key(pairs[j].n, pairs[i].n);
        if (seen)
            continue;
        const mq_result *r = pairs[i].n;
        const mq_params *q = &r->c.p;
        fprintf(f, "--chip %s --backend %s --shape %dx%dx%d --formats %s --group %d --candidate "
                   "'%s %d %d %d %d %d'\n",
                r->chip, r->backend, r->p.M, r->p.N, r->p.K, mq_format_name(r->p.format),
                r->p.group, mq_variant_get(r->c.variant)->name, q->tile_m, q->tile_n, q->tile_k,
                q->num_threadgroups, q->split_k);
    }
    return mq_atomic_commit(f, tmp, path, err, errlen);
}

/* compare --median-of OUT RUN...: write a baseline from several runs. */
static int median_of(int argc, char **argv)
{
    if (argc < 4)
        return mq_cli_fail("compare", "--median-of needs OUT.csv and at least one run", "");
    const char *out = argv[2];
    int nruns = argc - 3;
    mq_results *runs = calloc((size_t)nruns, sizeof *runs);
    char err[4400], tmp[4200];
    int rc = runs ? 0 : 2, loaded = 0;
    for (int i = 0; rc == 0 && i < nruns; i++, loaded++)
        if (mq_results_load(argv[3 + i], &runs[i], err, sizeof err)) {
            fprintf(stderr, "compare: %s\n", err);
            rc = 2;
        }
    const mq_result **rows = NULL;
    int n = 0;
    if (rc == 0 && mq_results_median_of(runs, nruns, &rows, &n)) {
        fprintf(stderr, "compare: out of memory\n");
        rc = 2;
    }
    if (rc == 0 && n == 0) {
        fprintf(stderr, "compare: no benchmark is ok in all %d runs\n", nruns);
        rc = 2;
    }
    if (rc == 0) { /* a new results file under a temporary name, then renamed */
        mq_clean_stale_tmp(out);
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", out, (int)getpid());
        unlink(tmp);
        mq_results_writer w = {.fd = -1};
        rc = mq_results_open(tmp, &w, err, sizeof err) ? 2 : 0;
        for (int i = 0; rc == 0 && i < n; i++)
            rc = mq_results_append(&w, rows[i], err, sizeof err) ? 2 : 0;
        if (rc == 0 && fsync(w.fd)) {
            snprintf(err, sizeof err, "%s: cannot write: %s", tmp, strerror(errno));
            rc = 2;
        }
        mq_results_close(&w);
        if (rc == 0 && rename(tmp, out)) {
            snprintf(err, sizeof err, "%s: cannot write: %s", out, strerror(errno));
            rc = 2;
        }
        if (rc) {
            fprintf(stderr, "compare: %s\n", err);
            unlink(tmp);
        } else {
            printf("compare: %s: %d benchmarks, each the median of %d runs\n", out, n, nruns);
        }
    }
    free(rows);
    for (int i = 0; i < loaded; i++)
        mq_results_free(&runs[i]);
    free(runs);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--median-of"))
        return median_of(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "--ab"))
        return mq_compare_ab_main(argc, argv);
    const char *files[3] = {NULL, NULL, NULL}, *report = NULL, *history = NULL, *rerun = NULL;
    int nfiles = 0;
    mq_regress_opts o = mq_regress_defaults();
    const mq_arg args[] = {
        MQ_OPT_DOUBLE("--alpha", &o.alpha, 1e-12, 0.5, "bad --alpha"),
        MQ_OPT_DOUBLE("--min-effect", &o.min_effect, 0, 10, "bad --min-effect"),
        MQ_OPT_INT("--min-samples", &o.min_samples, 2, 1000000, "bad --min-samples"),
        MQ_OPT_STR("--report", &report),
        MQ_OPT_STR("--history", &history),
        MQ_OPT_STR("--rerun-list", &rerun),
    };
    int prc = mq_args_parse("compare", argc, argv, 1, args, sizeof args / sizeof args[0], files,
                            3, &nfiles);
    if (prc == 1)
        usage(stdout);
    if (prc)
        return prc == 1 ? 0 : prc;
    if (nfiles == 3)
        return mq_cli_fail("compare", "a third file", files[2]);
    if (nfiles != 2) {
        fprintf(stderr, "compare: expected two results files, BASE.csv and NEW.csv (see --help)\n");
        return 2;
    }
    mq_results base, cur;
    char err[1024], note[1024];
    if (mq_results_load(files[0], &base, err, sizeof err)) {
        fprintf(stderr, "compare: %s\n", err);
        return 2;
    }
    if (mq_results_load(files[1], &cur, err, sizeof err)) {
        fprintf(stderr, "compare: %s\n", err);
        mq_results_free(&base);
        return 2;
    }
    /* every output is opened before anything is printed: a bad path is one
     * line and exit 2, with nothing half done */
    char rtmp[4300], ltmp[4300];
    FILE *rf = NULL, *lf = NULL;
    int hfd = -1;
    if ((report && !(rf = mq_atomic_open(report, rtmp, sizeof rtmp, err, sizeof err))) ||
        (rerun && !(lf = mq_atomic_open(rerun, ltmp, sizeof ltmp, err, sizeof err)))) {
        fprintf(stderr, "compare: %s\n", err);
        mq_atomic_abort(rf, rtmp);
        mq_results_free(&base);
        mq_results_free(&cur);
        return 2;
    }
    if (history && (hfd = open(history, O_RDWR | O_CREAT | O_APPEND, 0644)) < 0) {
        fprintf(stderr, "compare: %s: cannot open for appending: %s\n", history,
                strerror(errno));
        mq_atomic_abort(rf, rtmp);
        mq_atomic_abort(lf, ltmp);
        mq_results_free(&base);
        mq_results_free(&cur);
        return 2;
    }
    /* rows a crash tore off are dropped, and said to be */
    if (mq_results_torn_note(&base, files[0], note, sizeof note))
        fprintf(stderr, "compare: %s\n", note);
    if (mq_results_torn_note(&cur, files[1], note, sizeof note))
        fprintf(stderr, "compare: %s\n", note);
    mq_run_comparison cmp;
    if (mq_compare_runs(&base, &cur, &o, &cmp)) {
        fprintf(stderr, "compare: out of memory\n");
        mq_results_free(&base);
        mq_results_free(&cur);
        return 2;
    }
    const mq_run_pair *pairs = cmp.pairs;
    const int np = cmp.n, *counts = cmp.counts;
    const double geo = cmp.geomean;
    for (int i = 0; i < np; i++) {
        char name[256];
        mq_result_name(pairs[i].n, name, sizeof name);
        printf("%-10s %+7.1f%%  p=%-9.2g %s\n", mq_verdict_name(pairs[i].c.verdict),
               100 * (pairs[i].c.ratio - 1), pairs[i].c.p, name);
    }
    printf("\n%d benchmarks in both: %d regressed, %d improved, %d same, %d unreliable; "
           "geometric mean new/base %.3f (alpha %g, minimum effect %.0f%%)\n",
           np, counts[MQ_REGRESSED], counts[MQ_IMPROVED], counts[MQ_SAME], counts[MQ_UNRELIABLE],
           geo, o.alpha, 100 * o.min_effect);
    int rc = counts[MQ_REGRESSED] ? 1 : 0;
    if (rf) {
        const char *tmp = rtmp;
        FILE *f = rf;
        {
            fprintf(f, "# Regression report\n\nBaseline `%s`, new `%s`. Mann-Whitney U on the raw "
                       "samples, alpha %g, minimum effect %.0f%%.\n\n",
                    files[0], files[1], o.alpha, 100 * o.min_effect);
            fprintf(f, "**%d regressed, %d improved, %d same, %d unreliable** of %d benchmarks; "
                       "geometric mean new/base **%.3f**.\n\n",
                    counts[MQ_REGRESSED], counts[MQ_IMPROVED], counts[MQ_SAME],
                    counts[MQ_UNRELIABLE], np, geo);
            fprintf(f, "| verdict | change | p | base median ms | new median ms | benchmark |\n"
                       "| --- | --- | --- | --- | --- | --- |\n");
            for (int v = MQ_REGRESSED; v >= 0; v = v == MQ_REGRESSED ? MQ_IMPROVED
                                                  : v == MQ_IMPROVED  ? MQ_UNRELIABLE
                                                  : v == MQ_UNRELIABLE ? MQ_SAME
                                                                       : -1)
                for (int i = 0; i < np; i++) {
                    if ((int)pairs[i].c.verdict != v)
                        continue;
                    char name[256];
                    mq_result_name(pairs[i].n, name, sizeof name);
                    fprintf(f, "| %s | %+.1f%% | %.2g | %.4f | %.4f | %s |\n",
                            mq_verdict_name(pairs[i].c.verdict), 100 * (pairs[i].c.ratio - 1),
                            pairs[i].c.p, pairs[i].b->st.median * 1e3,
                            pairs[i].n->st.median * 1e3, name);
                }
            if (mq_atomic_commit(f, tmp, report, err, sizeof err)) {
                fprintf(stderr, "compare: %s\n", err);
                rc = 2;
            }
        }
    }
    if (hfd >= 0 && append_history(hfd, history, files, np, counts, geo))
        rc = 2;
    if (lf && write_rerun_list(lf, ltmp, rerun, pairs, np, err, sizeof err)) {
        fprintf(stderr, "compare: %s\n", err);
        rc = 2;
    }
    mq_run_comparison_free(&cmp);
    mq_results_free(&base);
    mq_results_free(&cur);
    return rc;
}
