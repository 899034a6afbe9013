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

/* The nightly runs of dir (YYYY-MM-DD*.csv), sorted by name into *names
 * (*nn of them). 0, -1 out of memory, -2 none (err); *names is the
 * caller's to free in every case. */
static int list_runs(const char *dir, char ***names, int *nn, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    int rc = 0;
    struct dirent *e;
    while (d && rc == 0 && (e = readdir(d))) {
        if (!is_run_file(e->d_name))
            continue;
        char **nw = realloc(*names, sizeof *nw * (size_t)(*nn + 1));
        if (!nw || !(nw[*nn] = strdup(e->d_name)))
            rc = -1;
        if (nw)
            *names = nw;
        if (rc == 0)
            (*nn)++;
    }
    if (d)
        closedir(d);
    if (rc == 0 && *nn == 0) {
        snprintf(err, errlen, "%s: no nightly runs (YYYY-MM-DD*.csv) to draw", dir);
        rc = -2;
    }
    if (*nn > 1)
        qsort(*names, (size_t)*nn, sizeof **names, str_cmp);
    return rc;
}

/* One night: its run against the baseline, and when they ran, its
 * confirmation pass against the baseline and its A/B's verdicts. */
typedef struct {
    mq_results cur, conf;
    mq_run_comparison cmp, ccmp;
    mq_ab_rounds *ab; /* rounds=0 when the night had no A/B */
    mq_ab_comparison abc;
    int have_conf, have_ab;
} night;

/* Night `name` of dir loaded and compared: the run (its date into date),
 * the confirmation pass DIR/confirm/RUN.csv and the A/B DIR/ab/RUN (RUN
 * without .csv: its rounds) where they are there. 0 (free with
 * night_free), -1 out of memory, -2 a bad file (err); nothing is held
 * after a failure. */
static int night_load(night *nt, const char *dir, const char *name, const mq_results *base,
                      const mq_regress_opts *o, char *date, size_t datelen, char *err,
                      size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (mq_results_load(path, &nt->cur, err, errlen))
        return -2;
    snprintf(date, datelen, "%s", nt->cur.n ? nt->cur.r[0].date : "");
    if (mq_compare_runs(base, &nt->cur, o, &nt->cmp)) {
        mq_results_free(&nt->cur);
        return -1;
    }
    /* the night's confirmation pass, when it ran: DIR/confirm/RUN.csv */
    struct stat sb;
    snprintf(path, sizeof path, "%s/confirm/%s", dir, name);
    nt->have_conf = stat(path, &sb) == 0;
    if (nt->have_conf && (mq_results_load(path, &nt->conf, err, errlen) ||
                          mq_compare_runs(base, &nt->conf, o, &nt->ccmp))) {
        mq_results_free(&nt->conf);
        mq_run_comparison_free(&nt->cmp);
        mq_results_free(&nt->cur);
        return -2;
    }
    /* the night's A/B, when it ran: DIR/ab/RUN (without .csv) holds its
     * rounds, and its verdicts are the night's */
    static mq_ab_rounds ab;
    nt->ab = &ab;
    snprintf(path, sizeof path, "%s/ab/%.*s", dir, (int)strlen(name) - 4, name);
    nt->have_ab = stat(path, &sb) == 0;
    if (nt->have_ab) {
        mq_paired_opts po = mq_paired_defaults();
        if (mq_ab_load(path, nt->ab, err, errlen) ||
            mq_ab_compare(nt->ab->a, nt->ab->b, nt->ab->rounds, &po, NULL, &nt->abc)) {
            mq_ab_rounds_free(nt->ab);
            mq_run_comparison_free(&nt->ccmp);
            mq_results_free(&nt->conf);
            mq_run_comparison_free(&nt->cmp);
            mq_results_free(&nt->cur);
            return -2;
        }
    }
    return 0;
}

static void night_free(night *nt)
{
    mq_ab_comparison_free(&nt->abc);
    mq_ab_rounds_free(nt->ab);
    mq_run_comparison_free(&nt->ccmp);
    mq_results_free(&nt->conf);
    mq_run_comparison_free(&nt->cmp);
    mq_results_free(&nt->cur);
}

/* Night k's verdicts into the series (of nn runs; only benchmarks whose
 * name contains filter): the A/B's where it ran, a stored-baseline
 * regression it did not see, or one the confirmation pass did not repeat,
 * unconfirmed. Its regressions counted into *regressed, the geometric mean
 * of its judged ratios (NAN: none) into *geomean. 0, or -1 out of memory. */
static int night_verdicts(const night *nt, int k, int nn, const char *filter, bench_series **bs,
                          int *nb, int *regressed, double *geomean)
{
    const mq_run_comparison *cmp = &nt->cmp, *ccmp = &nt->ccmp;
    const mq_ab_comparison *abc = &nt->abc;
    int rc = 0;
    double lg = 0;
    int judged = 0;
    for (int i = 0; rc == 0 && i < cmp->n; i++) {
        char name[256];
        mq_result_name(cmp->pairs[i].n, name, sizeof name);
        if (filter && !strstr(name, filter))
            continue;
        int repeat = 1;
        for (int j = 0; j < i; j++)
            repeat += mq_result_same_key(cmp->pairs[j].n, cmp->pairs[i].n);
        int b = bench_index(bs, nb, cmp->pairs[i].n, repeat, nn);
        if (b < 0) {
            rc = -1;
            break;
        }
        bench_series *s = &(*bs)[b];
        s->ratio[k] = cmp->pairs[i].c.ratio;
        s->verdict[k] = (int)cmp->pairs[i].c.verdict;
        if (nt->have_conf && cmp->pairs[i].c.verdict == MQ_REGRESSED) {
            int repeated = 0;
            for (int j = 0; j < ccmp->n; j++)
                repeated |= mq_result_same_key(ccmp->pairs[j].n, cmp->pairs[i].n) &&
                            ccmp->pairs[j].c.verdict == MQ_REGRESSED;
            if (!repeated)
                s->verdict[k] = UNCONFIRMED;
        }
        /* the A/B's verdict; a stored regression it did not see is unconfirmed */
        if (nt->have_ab) {
            int v = MQ_UNRELIABLE;
            for (int j = 0, seen = 0; j < abc->n; j++)
                if (mq_result_same_key(abc->bench[j].row, cmp->pairs[i].n) && ++seen == repeat)
                    v = (int)abc->bench[j].r.verdict;
            s->verdict[k] = v == MQ_REGRESSED || v == MQ_IMPROVED ? v
                            : cmp->pairs[i].c.verdict == MQ_REGRESSED ? UNCONFIRMED
                                                                      : MQ_SAME;
        }
        *regressed += s->verdict[k] == MQ_REGRESSED;
        if (cmp->pairs[i].c.verdict != MQ_UNRELIABLE) {
            lg += log(cmp->pairs[i].c.ratio);
            judged++;
        }
    }
    *geomean = judged ? exp(lg / judged) : NAN;
    return rc;
}

/* The ratio above which the latest run's (of nn) regressions are
 * labelled: the fifth largest (INFINITY when it has none). */
static double label_cut(const bench_series *bs, int nb, int nn)
{
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
    return cut;
}

/* The blocks (see history_data.h) of nb series over nn runs, and the
 * info. */
static void write_blocks(const bench_series *bs, int nb, char (*dates)[32], int nn,
                         const double *gm, const int *greg, FILE *lines, FILE *marks,
                         FILE *geo, mq_plot_history_info *info)
{
    double cut = label_cut(bs, nb, nn);
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
    char **names = NULL;
    int nn = 0;
    int rc = list_runs(dir, &names, &nn, err, errlen);
    bench_series *bs = NULL;
    int nb = 0;
    char(*dates)[32] = calloc((size_t)(nn ? nn : 1), sizeof *dates);
    double *gm = calloc((size_t)(nn ? nn : 1), sizeof *gm);
    int *greg = calloc((size_t)(nn ? nn : 1), sizeof *greg);
    if (!dates || !gm || !greg)
        rc = -1;
    for (int k = 0; rc == 0 && k < nn; k++) {
        night nt = {0};
        rc = night_load(&nt, dir, names[k], &base, o, dates[k], sizeof dates[k], err, errlen);
        if (rc)
            break;
        rc = night_verdicts(&nt, k, nn, filter, &bs, &nb, &greg[k], &gm[k]);
        night_free(&nt);
    }
    if (rc == 0 && nb == 0) {
        snprintf(err, errlen, "%s: no benchmark%s%s%s in both the baseline and the runs", dir,
                 filter ? " matching '" : "", filter ? filter : "", filter ? "'" : "");
        rc = -2;
    }
    if (rc == 0)
        write_blocks(bs, nb, dates, nn, gm, greg, lines, marks, geo, info);
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
