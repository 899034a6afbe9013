/* compare_ab.c - see compare_ab.h. As plain compare, its outputs (report,
 * history) are opened and checked before anything is computed or printed,
 * and on an error (exit 2) stdout stays empty: the table is printed once
 * they are in place. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ab_compare.h"
#include "args.h"
#include "atomic_file.h"
#include "cli.h"
#include "compare_ab.h"
#include "run_compare.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: compare --ab DIR [options]\n"
            "Judges an A/B night: DIR holds a.1.csv b.1.csv a.2.csv b.2.csv ... (round R: a\n"
            "bench run of the baseline revision A and one of the candidate B, in fresh\n"
            "processes next to each other). Every benchmark ok in a.1.csv gets its\n"
            "per-round ratio B/A; a paired t test on their logs, the geometric-mean ratio\n"
            "with its confidence interval, and the smallest slowdown tonight's scatter\n"
            "could have caught. Regressed: significant and at least the minimum effect.\n"
            "Exit status: 1 when anything regressed, 0 otherwise, 2 on bad input; with\n"
            "--rule-out, 3 when nothing regressed but a slowdown of that size is not ruled\n"
            "out (a benchmark unreliable, or its interval reaching it: add rounds).\n\n"
            "  --alpha A          two-sided significance (default 0.01)\n"
            "  --min-effect E     smallest |B/A - 1| that counts (default 0.03)\n"
            "  --min-rounds N     fewer rounds for a benchmark: unreliable (default 3)\n"
            "  --bench TEXT       judge only the benchmarks whose name contains TEXT\n"
            "  --rule-out F       exit 3 unless every benchmark regressed or its interval\n"
            "                     stays under 1 + F (a bisect step's \"good\" needs this)\n"
            "  --report FILE.md   also write a Markdown report (atomically)\n"
            "  --history FILE     append a summary row (date, revisions, counts,\n"
            "                     geometric mean, median detectable slowdown)\n\n"
            "example:\n"
            "  compare --ab results/nightly/ab/2026-11-24 --report /tmp/ab.md\n");
}

static const char *rev_of(const mq_results *rs)
{
    return rs->n ? rs->r[0].git_rev : "?";
}

#define AB_HISTORY_HEADER                                                                      \
    "date,a_rev,b_rev,rounds,benchmarks,regressed,improved,same,unreliable,geomean_b_over_a,"  \
    "detectable_median\n"

/* One summary row (a header first when the file is new), whole or not at
 * all; fd is closed. -1 with a message. */
static int append_ab_history(const char *path, int fd, const mq_ab_comparison *c,
                             const char *arev, const char *brev, int rounds, char *err,
                             size_t errlen)
{
    char date[32], nums[8][32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    snprintf(nums[0], 32, "%d", rounds);
    snprintf(nums[1], 32, "%d", c->n);
    snprintf(nums[2], 32, "%d", c->counts[MQ_REGRESSED]);
    snprintf(nums[3], 32, "%d", c->counts[MQ_IMPROVED]);
    snprintf(nums[4], 32, "%d", c->counts[MQ_SAME]);
    snprintf(nums[5], 32, "%d", c->counts[MQ_UNRELIABLE]);
    snprintf(nums[6], 32, "%.5f", c->geomean);
    snprintf(nums[7], 32, "%.5f", c->detectable_med);
    const char *f[11] = {date,    arev,    brev,    nums[0], nums[1], nums[2],
                         nums[3], nums[4], nums[5], nums[6], nums[7]};
    return mq_append_csv_row(fd, path, AB_HISTORY_HEADER, f, 11, NULL, err, errlen) ? -1 : 0;
}

static void write_report(FILE *f, const char *dir, const mq_ab_comparison *c,
                         const mq_paired_opts *o, const char *arev, const char *brev, int rounds)
{
    fprintf(f, "# A/B report\n\n`%s`: A = `%s` (the accepted revision), B = `%s`, %d rounds "
               "in alternating fresh processes. Paired t test on the rounds' log(B/A), alpha %g, "
               "minimum effect %.0f%%.\n\n",
            dir, arev, brev, rounds, o->alpha, 100 * o->min_effect);
    fprintf(f, "**%d regressed, %d improved, %d same, %d unreliable** of %d benchmarks; "
               "geometric mean B/A **%.3f**; median smallest detectable slowdown tonight "
               "**%.1f%%**.\n\n",
            c->counts[MQ_REGRESSED], c->counts[MQ_IMPROVED], c->counts[MQ_SAME],
            c->counts[MQ_UNRELIABLE], c->n, c->geomean, 100 * c->detectable_med);
    fprintf(f, "| verdict | B/A | %.0f%% interval | p | detectable | A median ms | rounds' B/A | "
               "benchmark |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
            100 * (1 - o->alpha));
    static const mq_verdict order[4] = {MQ_REGRESSED, MQ_IMPROVED, MQ_UNRELIABLE, MQ_SAME};
    for (int v = 0; v < 4; v++)
        for (int i = 0; i < c->n; i++) {
            const mq_ab_bench *e = &c->bench[i];
            if (e->r.verdict != order[v])
                continue;
            char name[256], rr[64 * 8 + 8] = "";
            mq_result_name(e->row, name, sizeof name);
            for (int r = 0, len = 0; r < e->rounds && len < (int)sizeof rr - 9; r++)
                len += snprintf(rr + len, sizeof rr - (size_t)len, "%s%.3f", r ? " " : "",
                                e->b[r] / e->a[r]);
            fprintf(f, "| %s | %.3f | %.3f-%.3f | %.2g | %.1f%% | %.4f | %s | %s |\n",
                    mq_verdict_name(e->r.verdict), e->r.ratio, e->r.ci_lo, e->r.ci_hi, e->r.p,
                    100 * e->r.detectable, e->a[0] * 1e3, rr, name);
        }
}

/* The verdict lines and the summary, into f (printed once every output is
 * in place). 1 when anything regressed, 0 otherwise; *inconclusive when
 * --rule-out is not met. */
static int print_verdicts(FILE *f, const mq_ab_comparison *c, const mq_paired_opts *o,
                          double rule_out, const char *arev, const char *brev, int rounds,
                          int *inconclusive)
{
    for (int i = 0; i < c->n; i++) {
        const mq_ab_bench *e = &c->bench[i];
        char name[256];
        mq_result_name(e->row, name, sizeof name);
        fprintf(f, "%-10s %+7.1f%% [%+.1f%%, %+.1f%%] p=%-8.2g detectable %4.1f%%  %s\n",
                mq_verdict_name(e->r.verdict), 100 * (e->r.ratio - 1), 100 * (e->r.ci_lo - 1),
                100 * (e->r.ci_hi - 1), e->r.p, 100 * e->r.detectable, name);
    }
    fprintf(f, "\nA/B, %d rounds, A %s, B %s: %d benchmarks: %d regressed, %d improved, %d same, "
               "%d unreliable; geometric mean B/A %.3f; median detectable slowdown %.1f%% "
               "(alpha %g, minimum effect %.0f%%)\n",
            rounds, arev, brev, c->n, c->counts[MQ_REGRESSED], c->counts[MQ_IMPROVED],
            c->counts[MQ_SAME], c->counts[MQ_UNRELIABLE], c->geomean, 100 * c->detectable_med,
            o->alpha, 100 * o->min_effect);
    int rc = c->counts[MQ_REGRESSED] ? 1 : 0;
    int open = rule_out >= 0 && !rc ? mq_ab_open_count(c, rule_out) : 0;
    if (open)
        fprintf(f, "inconclusive: %d of %d benchmarks do not rule out a slowdown of %.1f%% "
                   "(unreliable, or their interval reaches it)\n",
                open, c->n, 100 * rule_out);
    *inconclusive = open > 0;
    return rc;
}

int mq_compare_ab_main(int argc, char **argv)
{
    const char *files[2] = {NULL, NULL}, *report = NULL, *history = NULL, *only = NULL;
    int nfiles = 0;
    mq_paired_opts o = mq_paired_defaults();
    double rule_out = -1;
    const mq_arg args[] = {
        MQ_OPT_DOUBLE("--alpha", &o.alpha, 1e-12, 0.5, "bad --alpha"),
        MQ_OPT_DOUBLE("--min-effect", &o.min_effect, 0, 10, "bad --min-effect"),
        MQ_OPT_INT("--min-rounds", &o.min_rounds, 2, MQ_AB_MAX_ROUNDS, "bad --min-rounds"),
        MQ_OPT_STR("--bench", &only),
        MQ_OPT_DOUBLE("--rule-out", &rule_out, 0, 100, "bad --rule-out"),
        MQ_OPT_STR("--report", &report),
        MQ_OPT_STR("--history", &history),
    };
    int prc = mq_args_parse("compare", argc, argv, 2, args, sizeof args / sizeof args[0], files,
                            2, &nfiles);
    if (prc == 1)
        usage(stdout);
    if (prc)
        return prc == 1 ? 0 : prc;
    if (nfiles != 1) {
        fprintf(stderr, "compare: --ab takes one directory of rounds (see compare --ab --help)\n");
        return 2;
    }
    static mq_ab_rounds ab;
    char err[4400], rtmp[4300];
    if (mq_ab_load(files[0], &ab, err, sizeof err)) {
        fprintf(stderr, "compare: %s\n", err);
        return 2;
    }
    const mq_results *a = ab.a, *b = ab.b;
    int rounds = ab.rounds, rc = 2, hfd = -1, hcreated = 0, inconclusive = 0;
    FILE *rf = NULL;
    char *text = NULL;
    size_t tlen = 0;
    FILE *so = open_memstream(&text, &tlen);
    mq_ab_comparison c = {0};
    /* the history first (a results file, the other mode's history or a link
     * is refused before anything is made), then the report's temporary file */
    int opened = history ? (hfd = mq_history_open(history, "compare --ab", AB_HISTORY_HEADER,
                                                  &hcreated, err, sizeof err)) >= 0
                         : 1;
    if (opened && report)
        opened = !mq_output_replaceable(report, err, sizeof err) &&
                 (rf = mq_atomic_open(report, rtmp, sizeof rtmp, err, sizeof err)) != NULL;
    if (!so)
        snprintf(err, sizeof err, "out of memory");
    else if (opened && mq_ab_compare(a, b, rounds, &o, only, &c))
        snprintf(err, sizeof err, "out of memory");
    else if (opened && only && !c.n)
        snprintf(err, sizeof err, "--bench '%s' names no benchmark of %s", only, files[0]);
    else if (opened)
        rc = 0; /* else err says why */
    const char *arev = rev_of(&a[0]), *brev = rev_of(&b[0]);
    if (rc == 0) {
        rc = print_verdicts(so, &c, &o, rule_out, arev, brev, rounds, &inconclusive);
        if (rf)
            write_report(rf, files[0], &c, &o, arev, brev, rounds);
        /* the report settled on the disk, the row appended, then the rename */
        if (mq_output_settle(&rf, rtmp, report, err, sizeof err))
            rc = 2;
        if (rc < 2 && hfd >= 0) {
            int fd = hfd;
            hfd = -1;
            if (append_ab_history(history, fd, &c, arev, brev, rounds, err, sizeof err)) {
                /* a history this run made goes while its lock is still held */
                mq_append_abort(fd, history, hcreated);
                rc = 2;
            } else {
                close(fd);
            }
        }
        if (rc < 2 && rf) {
            FILE *f = rf;
            rf = NULL; /* closed by the commit */
            if (mq_atomic_commit(f, rtmp, report, err, sizeof err))
                rc = 2;
        }
    }
    if (rf)
        mq_atomic_abort(rf, rtmp);
    if (hfd >= 0)
        mq_append_abort(hfd, history, hcreated);
    if (so)
        fclose(so);
    if (rc == 2)
        fprintf(stderr, "compare: %s\n", err);
    else
        fwrite(text, 1, tlen, stdout);
    free(text);
    mq_ab_comparison_free(&c);
    mq_ab_rounds_free(&ab);
    return rc == 0 && inconclusive ? 3 : rc;
}
