/* compare_main.c - the compare command: two results files (a baseline and
 * a new run), each benchmark present in both judged by Mann-Whitney U on
 * its raw samples plus a minimum effect size; a table, a geometric-mean
 * summary and an optional Markdown report. Exit 1 when anything regressed,
 * 0 otherwise, 2 on bad input: then one line on stderr, nothing on stdout,
 * and no output written (every output is opened and checked first, the
 * table printed only once all of them are in place). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#define HISTORY_HEADER                                                                         \
    "date,base,new,benchmarks,regressed,improved,same,unreliable,geomean_new_over_base\n"

/* What compare writes besides its table. Every one is opened, and checked,
 * before anything is computed or printed; the temporary files are settled
 * on the disk before the history row goes in, and renamed last. */
typedef struct {
    const char *report, *history, *rerun;
    FILE *rf, *lf;
    char rtmp[4300], ltmp[4300];
    int hfd, hcreated;
} outputs;

/* Give up: temporary files removed, a history this run created removed. */
static void outputs_abort(outputs *o)
{
    if (o->rf)
        mq_atomic_abort(o->rf, o->rtmp);
    if (o->lf)
        mq_atomic_abort(o->lf, o->ltmp);
    o->rf = o->lf = NULL;
    if (o->hfd >= 0)
        mq_append_abort(o->hfd, o->history, o->hcreated);
    o->hfd = -1;
}

/* The history first (a results file or a link given as --history is
 * refused before anything else is made), then the report and rerun list
 * under temporary names. -1 with a message, nothing left behind. */
static int outputs_open(outputs *o, char *err, size_t errlen)
{
    o->hfd = -1;
    if (o->history && (o->hfd = mq_history_open(o->history, "compare", HISTORY_HEADER,
                                                &o->hcreated, err, errlen)) < 0)
        return -1;
    if ((o->report && (mq_output_replaceable(o->report, err, errlen) ||
                       !(o->rf = mq_atomic_open(o->report, o->rtmp, sizeof o->rtmp, err, errlen)))) ||
        (o->rerun && (mq_output_replaceable(o->rerun, err, errlen) ||
                      !(o->lf = mq_atomic_open(o->rerun, o->ltmp, sizeof o->ltmp, err, errlen))))) {
        outputs_abort(o);
        return -1;
    }
    return 0;
}

/* One summary row per comparison, for the nightly history (a header first
 * when the file is new). One write, so rows never interleave or tear; a
 * torn last row (a crash or a full disk mid-append) is cut off first, and
 * said to be on notes. */
static int append_history(int fd, const char *path, const char *const files[2], int np,
                          const int counts[4], double geo, FILE *notes, char *err,
                          size_t errlen)
{
    char date[32], nums[6][32];
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
    int bad = mq_append_csv_row(fd, path, HISTORY_HEADER, fields, 9, &cut, err, errlen);
    if (cut > 0)
        fprintf(notes, "compare: %s: cut off a torn last line (%ld bytes) before appending\n",
                path, cut);
    return bad ? -1 : 0;
}

/* Put every output in place: the temporary files settled (a full disk
 * stops here, with every old file as it was), the history row appended
 * (whole or not at all), then the renames. -1 with a message. */
static int outputs_finish(outputs *o, const char *const files[2], const mq_run_comparison *cmp,
                          FILE *notes, char *err, size_t errlen)
{
    if (mq_output_settle(&o->rf, o->rtmp, o->report, err, errlen) ||
        mq_output_settle(&o->lf, o->ltmp, o->rerun, err, errlen)) {
        outputs_abort(o);
        return -1;
    }
    if (o->hfd >= 0) {
        int fd = o->hfd;
        o->hfd = -1;
        if (append_history(fd, o->history, files, cmp->n, cmp->counts, cmp->geomean, notes, err,
                           errlen)) {
            /* a history this run made goes while its lock is still held */
            mq_append_abort(fd, o->history, o->hcreated);
            outputs_abort(o);
            return -1;
        }
        close(fd);
    }
    FILE *rf = o->rf, *lf = o->lf;
    o->rf = o->lf = NULL;
    int bad = rf && mq_atomic_commit(rf, o->rtmp, o->report, err, errlen);
    if (lf && (bad ? (mq_atomic_abort(lf, o->ltmp), 0)
                   : mq_atomic_commit(lf, o->ltmp, o->rerun, err, errlen)))
        bad = 1;
    return bad ? -1 : 0;
}

/* One line of bench arguments per regressed benchmark (each benchmark once),
 * so that a confirmation pass can re-measure exactly those. */
static void write_rerun_list(FILE *f, const mq_run_pair *pairs, int np)
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
}

/* The Markdown report: the summary, then every benchmark, regressions first. */
static void write_report(FILE *f, const char *const files[2], const mq_regress_opts *o,
                         const mq_run_comparison *cmp)
{
    const mq_run_pair *pairs = cmp->pairs;
    const int *counts = cmp->counts;
    fprintf(f, "# Regression report\n\nBaseline `%s`, new `%s`. Mann-Whitney U on the raw "
               "samples, alpha %g, minimum effect %.0f%%.\n\n",
            files[0], files[1], o->alpha, 100 * o->min_effect);
    fprintf(f, "**%d regressed, %d improved, %d same, %d unreliable** of %d benchmarks; "
               "geometric mean new/base **%.3f**.\n\n",
            counts[MQ_REGRESSED], counts[MQ_IMPROVED], counts[MQ_SAME], counts[MQ_UNRELIABLE],
            cmp->n, cmp->geomean);
    fprintf(f, "| verdict | change | p | base median ms | new median ms | benchmark |\n"
               "| --- | --- | --- | --- | --- | --- |\n");
    static const mq_verdict order[4] = {MQ_REGRESSED, MQ_IMPROVED, MQ_UNRELIABLE, MQ_SAME};
    for (int v = 0; v < 4; v++)
        for (int i = 0; i < cmp->n; i++) {
            if (pairs[i].c.verdict != order[v])
                continue;
            char name[256];
            mq_result_name(pairs[i].n, name, sizeof name);
            fprintf(f, "| %s | %+.1f%% | %.2g | %.4f | %.4f | %s |\n",
                    mq_verdict_name(pairs[i].c.verdict), 100 * (pairs[i].c.ratio - 1),
                    pairs[i].c.p, pairs[i].b->st.median * 1e3, pairs[i].n->st.median * 1e3, name);
        }
}

/* compare --median-of OUT RUN...: write a baseline from several runs. */
static int median_of(int argc, char **argv)
{
    if (argc < 4)
        return mq_cli_fail("compare", "--median-of needs OUT.csv and at least one run", "");
    const char *out = argv[2];
    int nruns = argc - 3;
    mq_results *runs = calloc((size_t)nruns, sizeof *runs);
    char err[4400];
    int rc = runs ? 0 : 2, loaded = 0;
    if (!runs)
        fprintf(stderr, "compare: out of memory\n");
    if (rc == 0 && mq_output_replaceable(out, err, sizeof err)) {
        fprintf(stderr, "compare: %s\n", err);
        rc = 2;
    }
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
    /* a new results file under a temporary name from mkstemp, then renamed */
    if (rc == 0 && mq_results_write(out, rows, n, err, sizeof err)) {
        fprintf(stderr, "compare: %s\n", err);
        rc = 2;
    }
    if (rc == 0)
        printf("compare: %s: %d benchmarks, each the median of %d runs\n", out, n, nruns);
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
    const char *files[3] = {NULL, NULL, NULL};
    outputs out = {.hfd = -1};
    int nfiles = 0;
    mq_regress_opts o = mq_regress_defaults();
    const mq_arg args[] = {
        MQ_OPT_DOUBLE("--alpha", &o.alpha, 1e-12, 0.5, "bad --alpha"),
        MQ_OPT_DOUBLE("--min-effect", &o.min_effect, 0, 10, "bad --min-effect"),
        MQ_OPT_INT("--min-samples", &o.min_samples, 2, 1000000, "bad --min-samples"),
        MQ_OPT_STR("--report", &out.report),
        MQ_OPT_STR("--history", &out.history),
        MQ_OPT_STR("--rerun-list", &out.rerun),
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
    char err[4400], note[1024];
    if (mq_results_load(files[0], &base, err, sizeof err)) {
        fprintf(stderr, "compare: %s\n", err);
        return 2;
    }
    if (mq_results_load(files[1], &cur, err, sizeof err)) {
        fprintf(stderr, "compare: %s\n", err);
        mq_results_free(&base);
        return 2;
    }
    /* the table and the notes are kept until every output is in place: an
     * error is then one line on stderr, and nothing on stdout */
    char *text = NULL, *notes = NULL;
    size_t tlen = 0, nlen = 0;
    FILE *so = open_memstream(&text, &tlen), *sn = open_memstream(&notes, &nlen);
    mq_run_comparison cmp = {0};
    int rc = 2;
    if (!so || !sn) {
        snprintf(err, sizeof err, "out of memory");
    } else if (outputs_open(&out, err, sizeof err) == 0) {
        if (mq_compare_runs(&base, &cur, &o, &cmp)) {
            snprintf(err, sizeof err, "out of memory");
            outputs_abort(&out);
        } else {
            rc = 0;
        }
    }
    if (rc == 0) {
        /* rows a crash tore off are dropped, and said to be */
        for (int i = 0; i < 2; i++)
            if (mq_results_torn_note(i ? &cur : &base, files[i], note, sizeof note))
                fprintf(sn, "compare: %s\n", note);
        for (int i = 0; i < cmp.n; i++) {
            char name[256];
            mq_result_name(cmp.pairs[i].n, name, sizeof name);
            fprintf(so, "%-10s %+7.1f%%  p=%-9.2g %s\n", mq_verdict_name(cmp.pairs[i].c.verdict),
                    100 * (cmp.pairs[i].c.ratio - 1), cmp.pairs[i].c.p, name);
        }
        fprintf(so, "\n%d benchmarks in both: %d regressed, %d improved, %d same, %d unreliable; "
                    "geometric mean new/base %.3f (alpha %g, minimum effect %.0f%%)\n",
                cmp.n, cmp.counts[MQ_REGRESSED], cmp.counts[MQ_IMPROVED], cmp.counts[MQ_SAME],
                cmp.counts[MQ_UNRELIABLE], cmp.geomean, o.alpha, 100 * o.min_effect);
        if (out.rf)
            write_report(out.rf, files, &o, &cmp);
        if (out.lf)
            write_rerun_list(out.lf, cmp.pairs, cmp.n);
        rc = outputs_finish(&out, files, &cmp, sn, err, sizeof err) ? 2
             : cmp.counts[MQ_REGRESSED]                             ? 1
                                                                    : 0;
    }
    if (so)
        fclose(so);
    if (sn)
        fclose(sn);
    if (rc == 2) {
        fprintf(stderr, "compare: %s\n", err);
    } else {
        fputs(notes, stderr);
        fwrite(text, 1, tlen, stdout);
    }
    free(text);
    free(notes);
    mq_run_comparison_free(&cmp);
    mq_results_free(&base);
    mq_results_free(&cur);
    return rc;
}
