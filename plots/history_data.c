/* history_data.c - see history_data.h: every nightly run of a directory
 * compared with its baseline (run_compare.c), one series per benchmark. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ab_compare.h"
#include "history_data.h"
#include "run_compare.h"

static int is_run_file(const char *name)
{
    size_t n = strlen(name);
    if (n < 14 || strcmp(name + n - 4, ".csv"))
        return 0;
    for (int i = 0; i < 10; i++)
        if (i == 4 || i == 7 ? name[i] != '-' : (name[i] < '0' || name[i] > '9'))
            return 0;
    return 1;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A regression of a run that its night's confirmation pass did not repeat. */
#define UNCONFIRMED 100

/* A benchmark of the history: its name and its ratio/verdict per run. */
typedef struct {
    char name[256], label[96];
    double *ratio; /* NAN where the run lacks it */
    int *verdict;
} bench_series;

static int bench_index(bench_series **bs, int *nb, const mq_result *r, int repeat, int nruns)
{
    char name[256];
    mq_result_name(r, name, sizeof name);
    if (repeat > 1) {
        size_t l = strlen(name);
        snprintf(name + l, sizeof name - l, " (repeat %d)", repeat);
    }
    for (int i = 0; i < *nb; i++)
        if (!strcmp((*bs)[i].name, name))
            return i;
    bench_series *n = realloc(*bs, sizeof *n * (size_t)(*nb + 1));
    if (!n)
        return -1;
    *bs = n;
    bench_series *b = &n[*nb];
    snprintf(b->name, sizeof b->name, "%s", name);
    snprintf(b->label, sizeof b->label, "%s M=%d %dx%d %s%s", mq_format_name(r->p.format), r->p.M,
             r->p.N, r->p.K, mq_variant_get(r->c.variant)->name, repeat > 1 ? " (repeat)" : "");
    b->ratio = malloc(sizeof *b->ratio * (size_t)nruns);
    b->verdict = calloc((size_t)nruns, sizeof *b->verdict);
    if (!b->ratio || !b->verdict) {
        free(b->ratio);
        free(b->verdict);
        return -1;
    }
    for (int i = 0; i < nruns; i++)
        b->ratio[i] = NAN;
    return (*nb)++;
}

int mq_plot_history_data(const char *dir, const char *filter, const mq_regress_opts *o,
                         FILE *lines, FILE *marks, FILE *geo, mq_plot_history_info *info,
                         char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    char path[4200];
    snprintf(path, sizeof path, "%s/baseline.csv", dir);
    mq_results base;
    if (mq_results_load(path, &base, err, errlen))
        return -1;
    DIR *d = opendir(dir);
    char **names = NULL;
    int nn = 0, rc = 0;
    struct dirent *e;
    while (d && rc == 0 && (e = readdir(d))) {
        if (!is_run_file(e->d_name))
            continue;
        char **nw = realloc(names, sizeof *nw * (size_t)(nn + 1));
        if (!nw || !(nw[nn] = strdup(e->d_name)))
            rc = -1;
        if (nw)
            names = nw;
        if (rc == 0)
            nn++;
    }
    if (d)
        closedir(d);
    if (rc == 0 && nn == 0) {
        snprintf(err, errlen, "%s: no nightly runs (YYYY-MM-DD*.csv) to draw", dir);
        rc = -2;
    }
    if (nn > 1)
        qsort(names, (size_t)nn, sizeof *names, str_cmp);
    bench_series *bs = NULL;
    int nb = 0;
    char(*dates)[32] = calloc((size_t)(nn ? nn : 1), sizeof *dates);
    double *gm = calloc((size_t)(nn ? nn : 1), sizeof *gm);
    int *greg = calloc((size_t)(nn ? nn : 1), sizeof *greg);
    if (!dates || !gm || !greg)
        rc = -1;
    for (int k = 0; rc == 0 && k < nn; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        mq_results cur;
        if (mq_results_load(path, &cur, err, errlen)) {
            rc = -2;
            break;
        }
        snprintf(dates[k], sizeof dates[k], "%s", cur.n ? cur.r[0].date : "");
        mq_run_comparison cmp;
        if (mq_compare_runs(&base, &cur, o, &cmp)) {
            mq_results_free(&cur);
            rc = -1;
            break;
        }
        /* the night's confirmation pass, when it ran: DIR/confirm/RUN.csv */
        mq_results conf = {0};
        mq_run_comparison ccmp = {0};
        struct stat sb;
        snprintf(path, sizeof path, "%s/confirm/%s", dir, names[k]);
        int have_conf = stat(path, &sb) == 0;
        if (have_conf && (mq_results_load(path, &conf, err, errlen) ||
                          mq_compare_runs(&base, &conf, o, &ccmp))) {
            mq_results_free(&conf);
            mq_run_comparison_free(&cmp);
            mq_results_free(&cur);
            rc = -2;
            break;
        }
        /* the night's A/B, when it ran: DIR/ab/RUN (without .csv) holds its
         * rounds, and its verdicts are the night's */
        static mq_ab_rounds ab;
        mq_ab_comparison abc = {0};
        snprintf(path, sizeof path, "%s/ab/%.*s", dir, (int)strlen(names[k]) - 4, names[k]);
        int have_ab = stat(path, &sb) == 0;
        if (have_ab) {
            mq_paired_opts po = mq_paired_defaults();
            if (mq_ab_load(path, &ab, err, errlen) ||
                mq_ab_compare(ab.a, ab.b, ab.rounds, &po, NULL, &abc)) {
                mq_ab_rounds_free(&ab);
                mq_run_comparison_free(&ccmp);
                mq_results_free(&conf);
                mq_run_comparison_free(&cmp);
                mq_results_free(&cur);
                rc = -2;
                break;
            }
        }
        double lg = 0;
        int judged = 0;
        for (int i = 0; rc == 0 && i < cmp.n; i++) {
            char name[256];
            mq_result_name(cmp.pairs[i].n, name, sizeof name);
            if (filter && !strstr(name, filter))
                continue;
            int repeat = 1;
            for (int j = 0; j < i; j++)
                repeat += mq_result_same_key(cmp.pairs[j].n, cmp.pairs[i].n);
            int b = bench_index(&bs, &nb, cmp.pairs[i].n, repeat, nn);
            if (b < 0) {
                rc = -1;
                break;
            }
            bs[b].ratio[k] = cmp.pairs[i].c.ratio;
            bs[b].verdict[k] = (int)cmp.pairs[i].c.verdict;
            if (have_conf && cmp.pairs[i].c.verdict == MQ_REGRESSED) {
                int repeated = 0;
                for (int j = 0; j < ccmp.n; j++)
                    repeated |= mq_result_same_key(ccmp.pairs[j].n, cmp.pairs[i].n) &&
                                ccmp.pairs[j].c.verdict == MQ_REGRESSED;
                if (!repeated)
                    bs[b].verdict[k] = UNCONFIRMED;
            }
            if (have_ab) { /* the A/B's verdict; a stored regression it did not see is unconfirmed */
                int v = MQ_UNRELIABLE;
                for (int j = 0, seen = 0; j < abc.n; j++)
                    if (mq_result_same_key(abc.bench[j].row, cmp.pairs[i].n) && ++seen == repeat)
                        v = (int)abc.bench[j].r.verdict;
                bs[b].verdict[k] = v == MQ_REGRESSED || v == MQ_IMPROVED ? v
                                   : cmp.pairs[i].c.verdict == MQ_REGRESSED ? UNCONFIRMED
                                                                            : MQ_SAME;
            }
            greg[k] += bs[b].verdict[k] == MQ_REGRESSED;
            if (cmp.pairs[i].c.verdict != MQ_UNRELIABLE) {
                lg += log(cmp.pairs[i].c.ratio);
                judged++;
            }
        }
        gm[k] = judged ? exp(lg / judged) : NAN;
        mq_ab_comparison_free(&abc);
        mq_ab_rounds_free(&ab);
        mq_run_comparison_free(&ccmp);
        mq_results_free(&conf);
        mq_run_comparison_free(&cmp);
        mq_results_free(&cur);
    }
    if (rc == 0 && nb == 0) {
        snprintf(err, errlen, "%s: no benchmark%s%s%s in both the baseline and the runs", dir,
                 filter ? " matching '" : "", filter ? filter : "", filter ? "'" : "");
        rc = -2;
    }
    if (rc == 0) {
        /* the ratio above which the latest run's regressions are labelled:
         * the fifth largest */
        double cut = INFINITY, top[5] = {0};
        int ntop = 0;
        for (int b = 0; b < nb; b++) {
            double r = bs[b].ratio[nn - 1];
            if (bs[b].verdict[nn - 1] != MQ_REGRESSED || isnan(r))
                continue;
            int j = ntop < 5 ? ntop++ : 4;
            if (j == 4 && ntop == 5 && r <= top[4])
                continue;
            top[j] = r;
            for (; j > 0 && top[j] > top[j - 1]; j--) {
                double t = top[j];
                top[j] = top[j - 1];
                top[j - 1] = t;
            }
        }
        if (ntop)
            cut = top[ntop - 1];
        for (int b = 0; b < nb; b++) {
            for (int k = 0; k < nn; k++)
                if (!isnan(bs[b].ratio[k]))
                    fprintf(lines, "%s %.6g\n", dates[k], bs[b].ratio[k]);
            fprintf(lines, "\n\n");
            for (int k = 0; k < nn; k++) {
                int v = bs[b].verdict[k];
                if (isnan(bs[b].ratio[k]) ||
                    (v != MQ_REGRESSED && v != MQ_IMPROVED && v != UNCONFIRMED))
                    continue;
                int show = k == nn - 1 && v == MQ_REGRESSED && bs[b].ratio[k] >= cut;
                fprintf(marks, "%s %.6g %d \"%s\"\n", dates[k], bs[b].ratio[k],
                        v == MQ_REGRESSED ? 1 : v == MQ_IMPROVED ? 2 : 3,
                        show ? bs[b].label : "");
                info->regressed_latest += show;
            }
        }
        for (int k = 0; k < nn; k++)
            if (!isnan(gm[k]))
                fprintf(geo, "%s %.6g %d\n", dates[k], gm[k], greg[k]);
        info->nbench = nb;
        info->nruns = nn;
        snprintf(info->first, sizeof info->first, "%s", dates[0]);
        snprintf(info->last, sizeof info->last, "%s", dates[nn - 1]);
    }
    if (rc == -1)
        snprintf(err, errlen, "out of memory");
    for (int b = 0; b < nb; b++) {
        free(bs[b].ratio);
        free(bs[b].verdict);
    }
    free(bs);
    for (int i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    free(dates);
    free(gm);
    free(greg);
    mq_results_free(&base);
    return rc ? -1 : 0;
}
