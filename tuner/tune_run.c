/* tune_run.c - see tune_run.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_store.h"
#include "moe_rows.h"
#include "version.h"
#include "probes.h"
#include "summary.h"
#include "tune_run.h"

/* How far a guided pick is from this build's exhaustive rows of the same
 * problem, when every candidate has one. */
typedef struct {
    int n;
    double sum, max;
} gap_stats;

/* The guided search, then the rules' picks it did not reach, for the
 * table's speedups over them: --evals timings in all, as many of them the
 * search's as the rules leave (their picks are not the search's first
 * timings: tuner/search.c). */
static void search_then_rules(mq_tuner *T, const mq_problem *p, mq_cand *cs, int n,
                              const int *base)
{
    int rules = 0;
    for (int b = 0; b < MQ_BASE_COUNT; b++) {
        int dup = 0;
        for (int c = 0; c < b; c++)
            dup |= base[c] == base[b];
        rules += base[b] >= 0 && !dup;
    }
    mq_tune_opts o = *T->o;
    const mq_tune_opts *keep = T->o;
    o.evals = o.evals > rules + 1 ? o.evals - rules : 1;
    T->o = &o;
    mq_tune_search_guided(T, p, cs, n);
    T->o = keep;
    for (int b = 0; b < MQ_BASE_COUNT && !T->failed; b++)
        if (base[b] >= 0 && !cs[base[b]].measured)
            mq_tune_measure(T, p, &cs[base[b]]);
}

/* Measured: time candidates (guided or all), pick the fastest verified.
 * Returns the pick's index or -1; 2 in *rc when the run cannot go on. */
static int pick_measured(mq_tuner *T, const mq_suite *suite, int s, const mq_problem *p,
                         mq_cand *cs, int n, const int *base, double *fraction, gap_stats *gap,
                         int *rc)
{
    int msame[64], pick = -1;
    int nsame = mq_shapes_ms_sharing(suite->s, suite->n, s, p->N, p->K, msame, 64);
    mq_error e;
    if (mq_bench_problem_setup(&T->bp, p, 0, msame, nsame, &e)) {
        fprintf(stderr, "tune: %s\n", e.msg);
        *rc = 2;
        return -1;
    }
    int before = T->timed + T->reused;
    if (T->o->exhaustive)
        for (int i = 0; i < n && !T->failed; i++)
            mq_tune_measure(T, p, &cs[i]);
    else
        search_then_rules(T, p, cs, n, base);
    *fraction += (double)(T->timed + T->reused - before) / n;
    for (int i = 0; i < n; i++)
        if (cs[i].time > 0 && (pick < 0 || cs[i].time < cs[pick].time))
            pick = i;
    if (T->o->exhaustive || pick < 0 || !T->own.n)
        return pick;
    double ex = INFINITY;
    int have = 0;
    for (int i = 0; i < T->own.n; i++) {
        const mq_result *r = &T->own.r[i];
        if (!strcmp(r->status, "ok") && !memcmp(&r->p, p, sizeof *p)) {
            have++;
            ex = fmin(ex, r->st.median);
        }
    }
    if (have >= n && ex > 0) {
        double g = cs[pick].time / ex - 1;
        gap->sum += g;
        gap->max = fmax(gap->max, g);
        gap->n++;
    }
    return pick;
}

/* Predicted: rank every candidate by the model; the best that verifies on
 * the backend (the CPU model) is the pick. */
static int pick_predicted(mq_tuner *T, const mq_suite *suite, int s, const mq_problem *p,
                          const mq_model *pred, mq_cand *cs, int n, const int *base,
                          double *btime, int *rc)
{
    for (int i = 0; i < n; i++)
        cs[i].time = mq_model_predict(pred, &cs[i].f);
    for (int b = 0; b < MQ_BASE_COUNT; b++) /* the rules' predicted times */
        btime[b] = base[b] >= 0 ? cs[base[b]].time : -1;
    int msame[64];
    int nsame = mq_shapes_ms_sharing(suite->s, suite->n, s, p->N, p->K, msame, 64);
    mq_error e;
    if (mq_bench_problem_setup(&T->bp, p, 1, msame, nsame, &e)) {
        fprintf(stderr, "tune: %s\n", e.msg);
        *rc = 2;
        return -1;
    }
    mq_measure_opts vo = T->o->mo;
    vo.max_reps = 0; /* verify only */
    for (int tries = 0; tries < n; tries++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (cs[i].time > 0 && (best < 0 || cs[i].time < cs[best].time))
                best = i;
        if (best < 0)
            return -1;
        static mq_measurement m;
        mq_measure(T->be, &T->bp, &cs[best].c, T->lim, &vo, &m);
        if (!strcmp(m.status, "verified"))
            return best;
        cs[best].time = -1; /* wrong on the CPU model: never chosen */
    }
    return -1;
}

/* From rows (--from-results): every candidate the rows measured joins the
 * model's rows; the fastest ok one is the pick. */
static int pick_from_rows(mq_tuner *T, const mq_cand *cs, int n)
{
    int pick = -1;
    for (int i = 0; i < n; i++) {
        if (cs[i].time <= 0)
            continue;
        if (mq_tune_keep_row(T, &cs[i].f, cs[i].time))
            return -1;
        T->reused++;
        if (pick < 0 || cs[i].time < cs[pick].time)
            pick = i;
    }
    return pick;
}

/* Write the set into this run's generation and publish it in one step. */
static int publish(mq_tuner *T, const mq_table_entry *ent, int nent, const mq_model *fit,
                   const char *fit_note, int measured, const char *dir, mq_table_set *ts)
{
    char tpath[4400], hpath[4400], mpath[4400], cpath[4400], err[4400];
    const char *source = measured ? "measured" : "predicted";
    const char *backend = T->from ? T->from_backend : T->be->name;
    const char *kbuild = fit->kernel_build;
    mq_table_set_path(ts, "table.csv", tpath, sizeof tpath);
    mq_table_set_path(ts, "table.h", hpath, sizeof hpath);
    mq_table_set_path(ts, "model.csv", mpath, sizeof mpath);
    mq_table_set_path(ts, "chip.csv", cpath, sizeof cpath);
    if (nent < 0 ||
        mq_table_write_csv(tpath, T->chip->name, backend, source, kbuild, ent, nent, T->chip->v,
                           fit, err, sizeof err) ||
        mq_table_write_header(hpath, T->chip->name, source, kbuild, ent, nent, T->chip->v, fit,
                              err, sizeof err) ||
        mq_model_write(mpath, fit, T->chip->name, fit_note, err, sizeof err) ||
        mq_chip_write(cpath, T->chip, err, sizeof err) ||
        mq_table_set_commit(ts, err, sizeof err)) {
        fprintf(stderr, "tune: %s; the table in %s stays as it was\n",
                nent < 0 ? "out of memory" : err, dir);
        return 2;
    }
    return 0;
}

int mq_tune_work(const mq_tune_opts *o, const mq_suite *suite, const mq_chip *chip,
                 int estimate, mq_work_list *w)
{
    memset(w, 0, sizeof *w);
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int s = 0; (o->formats & (1u << f)) && s < suite->n; s++) {
            int repeat = 0; /* two layers of one shape are one problem */
            for (int t = 0; t < s && !repeat; t++)
                repeat = suite->s[t].M == suite->s[s].M && suite->s[t].N == suite->s[s].N &&
                         suite->s[t].K == suite->s[s].K;
            if (repeat)
                continue;
            mq_work_unit u = {.p = {(mq_format)f, suite->s[s].M, suite->s[s].N, suite->s[s].K,
                                    o->group},
                              .whole = 1};
            int n = 0, base[MQ_BASE_COUNT];
            mq_cand *cs = estimate ? mq_tune_candidates(&u.p, chip, &n, base) : NULL;
            if (estimate && !cs)
                return -1;
            free(cs);
            u.rows = o->exhaustive || o->evals > n ? n : o->evals;
            u.cost_us = u.rows * mq_work_candidate_cost_us(&u.p, &o->mo);
            u.setup_us = mq_work_setup_cost_us(&u.p);
            if (mq_work_add(w, &u))
                return -1;
        }
    return 0;
}

/* What the suite's problems leave for the table and the summary. */
typedef struct {
    mq_choice *choices; /* [nprob] */
    int nchoice, nprob, unverified;
    int from_rows;      /* candidates whose rows came from --from-results */
    double fraction;    /* of each problem's space timed, summed */
    gap_stats gap;
} tune_tally;

/* --moe-results' rows, read before anything is measured (a file that
 * cannot serve stops the run): their count, or -1 (said on stderr). */
static int read_moe_rows(mq_tuner *T, int measured, mq_table_entry **moe)
{
    char err[4600];
    int nmoe;
    if (!measured) {
        fprintf(stderr, "tune: --moe-results: %s's table is predicted; MoE rows come from "
                        "moe-bench on the machine tune measures\n", T->chip->name);
        return -1;
    }
    if ((nmoe = mq_moe_table_entries(T->o->moe_results, T->be->name, T->be->device,
                                     mq_host_name(), moe, NULL, err, sizeof err)) < 0) {
        fprintf(stderr, "tune: --moe-results: %s\n", err);
        return -1;
    }
    return nmoe;
}

/* Problem p's pick (from rows, measured or predicted) added to the tally's
 * choices, or a problem without a verified candidate said and counted. -1
 * when p has no candidates to pick from (nothing done); 0 otherwise, 2 in
 * *rc when the run cannot go on. */
static int tune_problem(mq_tuner *T, const mq_suite *suite, mq_problem p, int measured,
                        const mq_model *pred, tune_tally *tl, int *rc)
{
    int s = 0; /* the problem's first shape */
    while (s < suite->n - 1 && !(suite->s[s].M == p.M && suite->s[s].N == p.N &&
                                 suite->s[s].K == p.K))
        s++;
    int n, base[MQ_BASE_COUNT];
    mq_cand *cs = T->from ? mq_tune_candidates_from_rows(&p, T->chip, T->from,
                                                         T->from_backend, &n, base)
                          : mq_tune_candidates(&p, T->chip, &n, base);
    if (!cs)
        return -1;
    double btime[MQ_BASE_COUNT];
    int pick = T->from  ? pick_from_rows(T, cs, n)
               : measured ? pick_measured(T, suite, s, &p, cs, n, base, &tl->fraction,
                                          &tl->gap, rc)
                        : pick_predicted(T, suite, s, &p, pred, cs, n, base, btime, rc);
    tl->from_rows += T->from ? n : 0;
    for (int b = 0; measured && b < MQ_BASE_COUNT; b++)
        btime[b] = base[b] >= 0 ? cs[base[b]].time : -1;
    if (pick >= 0) {
        mq_choice *c = &tl->choices[tl->nchoice++];
        c->p = p;
        c->c = cs[pick].c;
        c->expected_s = cs[pick].time;
        c->measured = measured;
        for (int b = 0; b < MQ_BASE_COUNT; b++)
            c->speedup[b] = btime[b] > 0 ? btime[b] / cs[pick].time : 0;
    } else if (!T->failed && !*rc) {
        fprintf(stderr, "tune: %s M=%d N=%d K=%d: no candidate verified%s\n",
                mq_format_name(p.format), p.M, p.N, p.K,
                T->from ? " (no ok row in --from-results)" : "");
        tl->unverified++;
    }
    free(cs);
    return 0;
}

/* The picks made: the model fitted (measured, with rows enough) and its
 * quality on held-out rows, the table built (the nmoe MoE rows after the
 * dense ones), the set published, the summary printed. 0; 1 when some
 * shapes had no verified candidate; 2 when the set could not be written. */
static int publish_tally(mq_tuner *T, const tune_tally *tl, const mq_table_entry *moe,
                         int nmoe, int measured, const mq_model *pred, const char *pred_note,
                         const char *dir, mq_table_set *ts, double t0)
{
    mq_model fit = *pred;
    char fit_note[4608], err[512];
    snprintf(fit_note, sizeof fit_note, "%s", pred_note);
    if (measured && !T->o->keep_model && T->rows.n >= 4 * MQ_MODEL_NSHARED &&
        mq_model_fit_holdout(T->rows.f, T->rows.t, T->rows.n, 0.2, &fit, err,
                             sizeof err) == 0)
        snprintf(fit_note, sizeof fit_note, "fitted on %d rows measured on %s", fit.n_fit,
                 T->chip->name);
    /* the kernels the set describes: this build's, or those of the rows it
     * was built from ("" for rows of schema 1 and 2, which do not say) */
    snprintf(fit.kernel_build, sizeof fit.kernel_build, "%s",
             T->from ? T->from_kernel_build : mq_kernel_build());
    mq_table_entry *ent = NULL;
    int nent = mq_table_build(tl->choices, tl->nchoice, &ent);
    if (nent >= 0 && nmoe > 0) { /* the MoE rows after the dense ones */
        mq_table_entry *all = realloc(ent, sizeof *ent * (size_t)(nent + nmoe));
        if (all) {
            memcpy(all + nent, moe, sizeof *moe * (size_t)nmoe);
            ent = all;
            nent += nmoe;
        } else {
            nent = -1;
        }
    }
    int rc = publish(T, ent, nent, &fit, fit_note, measured, dir, ts);
    free(ent);
    if (rc)
        return rc;
    char tpath[4200], hpath[4200];
    snprintf(tpath, sizeof tpath, "%s/table.csv", dir);
    snprintf(hpath, sizeof hpath, "%s/table.h", dir);
    mq_tune_summary sum = {.choices = tl->choices,
                           .nchoice = tl->nchoice,
                           .nent = nent,
                           .chip = T->chip->name,
                           .source = measured ? "measured" : "predicted",
                           .table_csv = tpath,
                           .table_h = hpath,
                           .fit = &fit,
                           .fit_note = fit_note,
                           .measured = measured,
                           .timed = T->timed,
                           .reused = T->reused,
                           .space_fraction = tl->fraction / tl->nchoice,
                           .seconds = mq_now() - t0,
                           .gap_n = tl->gap.n,
                           .gap_mean = tl->gap.n ? tl->gap.sum / tl->gap.n : 0,
                           .gap_max = tl->gap.max,
                           .from_rows = tl->from_rows};
    mq_tune_print_summary(&sum);
    if (tl->unverified) {
        fprintf(stderr, "tune: %d of %d shapes had no verified candidate (listed above): the "
                        "table has the other %d\n",
                tl->unverified, tl->nprob, tl->nchoice);
        return 1;
    }
    return 0;
}

int mq_tune_suite(mq_tuner *T, const mq_suite *suite, const mq_work_list *work, int shard,
                  int measured, const mq_model *pred, const char *pred_note, const char *dir,
                  mq_table_set *ts)
{
    const mq_tune_opts *o = T->o;
    int rc = 0, nmoe = 0;
    mq_table_entry *moe = NULL;
    tune_tally tl = {NULL, 0, 0, 0, 0, 0, {0, 0, 0}};
    for (int i = 0; i < work->n; i++)
        tl.nprob += work->u[i].shard == shard;
    tl.choices = calloc((size_t)(tl.nprob ? tl.nprob : 1), sizeof *tl.choices);
    int tty = isatty(fileno(stderr)) && !o->quiet;
    double t0 = mq_now();
    if (!tl.choices) {
        fprintf(stderr, "tune: out of memory\n");
        rc = 2;
        goto done;
    }
    /* the MoE rows first: a file that cannot serve stops the run before it measures */
    if (o->moe_results && (nmoe = read_moe_rows(T, measured, &moe)) < 0) {
        rc = 2;
        goto done;
    }
    for (int i = 0; i < work->n; i++) {
        if (work->u[i].shard != shard ||
            tune_problem(T, suite, work->u[i].p, measured, pred, &tl, &rc) < 0)
            continue;
        if (tty) {
            double el = mq_now() - t0;
            fprintf(stderr, "\r[%d/%d shapes] ETA %ds ", tl.nchoice, tl.nprob,
                    tl.nchoice ? (int)(el / tl.nchoice * (tl.nprob - tl.nchoice)) : 0);
        }
        if (T->failed || rc) {
            rc = 2; /* a row could not be stored (said by mq_tune_measure) */
            goto done;
        }
    }
    if (tty)
        fputc('\n', stderr);
    mq_bench_problem_free(&T->bp);
    if (work->nshards > 1) { /* a shard's rows are a part: merge, then --from-results */
        fprintf(stderr, "tune: shard %d/%d: %d of %d problems measured (%d timed, %d reused), "
                        "%d without a verified candidate; no table is written: merge the "
                        "shards' results and run tune --from-results\n",
                shard, work->nshards, tl.nprob, work->n, T->timed, T->reused, tl.unverified);
        rc = tl.unverified ? 1 : 0;
        goto done;
    }
    if (tl.nchoice == 0) {
        fprintf(stderr, "tune: no shape has a verified candidate: nothing is written, the table "
                        "in %s stays as it was\n",
                dir);
        rc = 1;
        goto done;
    }
    rc = publish_tally(T, &tl, moe, nmoe, measured, pred, pred_note, dir, ts, t0);
done:
    mq_bench_problem_free(&T->bp);
    free(moe);
    free(tl.choices);
    return rc;
}
