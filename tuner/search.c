/* search.c - see search.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "grow.h"
#include "residual_gp.h"
#include "search.h"
#include "space.h"

int mq_rows_add(mq_rowset *r, const mq_features *f, double t)
{
    int fcap = r->cap;
    if (mq_grow(&r->f, &fcap, r->n + 1, sizeof *r->f, 1024) ||
        mq_grow(&r->t, &r->cap, r->n + 1, sizeof *r->t, 1024))
        return -1; /* f may have grown alone: r->cap stays what both hold */
    r->f[r->n] = *f;
    r->t[r->n++] = t;
    return 0;
}

int mq_tune_keep_row(mq_tuner *T, const mq_features *f, double t)
{
    if (mq_rows_add(&T->rows, f, t) == 0)
        return 0;
    fprintf(stderr, "tune: out of memory keeping the measured rows for the model\n");
    T->failed = 1;
    return -1;
}

/* Time one candidate (or take this build's earlier row); -1 when not ok. */
double mq_tune_measure(mq_tuner *T, const mq_problem *p, mq_cand *c)
{
    if (T->replay_t) { /* replayed: the stored time, nothing run */
        c->measured = 1;
        c->time = T->replay_t[c - T->replay_cs];
        T->timed++;
        T->trace[T->ntrace++] = c->time;
        if (c->time > 0 && c->f.floor_s > 0)
            (void)mq_tune_keep_row(T, &c->f, c->time);
        return c->time;
    }
    mq_result key;
    memset(&key, 0, sizeof key);
    snprintf(key.chip, sizeof key.chip, "%s", T->chip->name);
    snprintf(key.backend, sizeof key.backend, "%s", T->be->name);
    key.p = *p;
    key.c = c->c;
    c->measured = 1;
    const mq_result *old = T->o->resume ? mq_results_find_own(&T->own, &key) : NULL;
    if (old) {
        T->reused++;
        c->time = strcmp(old->status, "ok") ? -1 : old->st.median;
    } else {
        static mq_measurement m;
        mq_measure(T->be, &T->bp, &c->c, T->lim, &T->o->mo, &m);
        T->kernel_s += m.kernel_s;
        T->timed++;
        mq_result_from_measurement(&key, &m);
        char err[4400];
        if (mq_results_append(&T->w, &key, err, sizeof err)) {
            /* the file keeps every row before this one; a run whose rows
             * cannot be stored stops rather than time on unrecorded */
            fprintf(stderr, "tune: %s\n", err);
            T->failed = 1;
        }
        c->time = strcmp(m.status, "ok") ? -1 : m.st.median;
    }
    if (c->time > 0)
        (void)mq_tune_keep_row(T, &c->f, c->time); /* a failure stops the run (T->failed) */
    return c->time;
}

/* Index of a candidate in the list, or -1. */
int mq_tune_find(const mq_cand *cs, int n, const mq_candidate *c)
{
    for (int i = 0; i < n; i++)
        if (cs[i].c.variant == c->variant && !memcmp(&cs[i].c.p, &c->p, sizeof c->p))
            return i;
    return -1;
}

/* The legal candidates of a problem with their features, plus the
 * baselines (added when outside the grid); base[b] is each baseline's index
 * (-1 when the rule does not serve the format). */
mq_cand *mq_tune_candidates(const mq_problem *p, const mq_chip *chip, int *n_out, int *base)
{
    mq_space sp;
    if (mq_space_enumerate(p, chip, MQ_SPACE_FULL, &sp))
        return NULL;
    mq_cand *cs = calloc((size_t)sp.legal + MQ_BASE_COUNT + 1, sizeof *cs);
    int n = 0;
    for (int i = 0; cs && i < sp.n; i++) {
        if (!sp.e[i].legal)
            continue;
        cs[n].c = sp.e[i].c;
        cs[n].time = -1;
        mq_features_from_plan(p, &cs[n].c, &sp.e[i].plan, chip, &cs[n].f);
        n++;
    }
    mq_space_free(&sp);
    for (int b = 0; cs && b < MQ_BASE_COUNT; b++) {
        mq_candidate bc;
        base[b] = -1;
        if (mq_baseline_candidate((mq_baseline)b, p, chip, &bc))
            continue;
        base[b] = mq_tune_find(cs, n, &bc);
        if (base[b] < 0) { /* a rule's pick outside the grid joins the list */
            cs[n].c = bc;
            cs[n].time = -1;
            mq_features_compute(p, &bc, chip, &cs[n].f, NULL);
            base[b] = n++;
        }
    }
    *n_out = n;
    return cs;
}

mq_cand *mq_tune_candidates_from_rows(const mq_problem *p, const mq_chip *chip,
                                      const mq_results *rs, const char *backend, int *n_out,
                                      int *base)
{
    int n = 0;
    mq_cand *cs = calloc((size_t)rs->n + MQ_BASE_COUNT + 1, sizeof *cs);
    for (int i = 0; cs && i < rs->n; i++) {
        const mq_result *r = &rs->r[i];
        if (strcmp(r->chip, chip->name) || strcmp(r->backend, backend) ||
            memcmp(&r->p, p, sizeof *p))
            continue;
        int k = mq_tune_find(cs, n, &r->c);
        if (k < 0) {
            k = n++;
            cs[k].c = r->c;
            cs[k].time = -1;
            cs[k].measured = 1;
            if (mq_features_compute(p, &r->c, chip, &cs[k].f, NULL) != MQ_OK)
                memset(&cs[k].f, 0, sizeof cs[k].f); /* today's planner refuses it: unpriced */
        }
        /* of a key measured twice, the faster ok row; a wrong row never counts */
        if (!strcmp(r->status, "ok") && (cs[k].time < 0 || r->st.median < cs[k].time))
            cs[k].time = r->st.median;
    }
    for (int b = 0; cs && b < MQ_BASE_COUNT; b++) {
        mq_candidate bc;
        base[b] = mq_baseline_candidate((mq_baseline)b, p, chip, &bc) ? -1
                                                                        : mq_tune_find(cs, n, &bc);
    }
    *n_out = n;
    return cs;
}

/* The guide is refitted once the rows have grown by 1/GUIDE_GROWTH since
 * its last fit. Why: a refit on every 4th timing cost 15 s of a 66 s tune of
 * llama3-8b on the 2-core VM (632 rows at the end, each refit on them all),
 * and a fit on 600 rows moves little with 4 more; this shape's own
 * deviations are the Gaussian process's to learn. */
#define GUIDE_GROWTH 8

/* The guide: the run's model refitted on the rows so far (cold on the
 * run's first fit, warm after; see GUIDE_GROWTH), or the prior (the default
 * coefficients on this chip's figures, or a transferred model) while the
 * rows are too few. Each candidate's log predicted time into lp. */
static void guide_predict(mq_tuner *T, const mq_cand *cs, int n, double *lp)
{
    char err[256];
    if (!T->guide && !(T->guide = malloc(sizeof *T->guide)))
        T->guide_fitted = 0; /* out of memory: the prior guides */
    int have = T->guide && T->guide_fitted;
    if (T->guide && T->rows.n >= 2 * MQ_MODEL_NSHARED &&
        (!T->guide_fitted || T->rows.n >= T->guide_rows + T->guide_rows / GUIDE_GROWTH)) {
        int rc = T->guide_fitted
                     ? mq_model_refit(T->rows.f, T->rows.t, T->rows.n, T->guide, err, sizeof err)
                     : mq_model_fit_rounds(T->rows.f, T->rows.t, T->rows.n, 1, T->guide, err,
                                           sizeof err);
        have = T->guide_fitted = rc == 0;
        T->guide_rows = T->rows.n;
    }
    const mq_model *gm = have ? T->guide : T->prior;
    double lo = INFINITY;
    for (int i = 0; i < n; i++) {
        double pt = gm ? mq_model_predict(gm, &cs[i].f) : 1.0 + i;
        lp[i] = pt > 0 && isfinite(pt) && cs[i].f.floor_s > 0 ? log(pt) : NAN;
        lo = fmin(lo, lp[i]);
    }
    /* a candidate the model cannot price (stored rows of a kernel today's
     * planner refuses: no features) is believed as fast as the fastest
     * predicted, with the uncertainty of every other */
    for (int i = 0; i < n; i++)
        if (isnan(lp[i]))
            lp[i] = isfinite(lo) ? lo : 0;
}

/* Timings before each untried variant gets one. */
#define VARIANT_SWEEP_AFTER 12

/* The next candidate to time. Once `done` reaches VARIANT_SWEEP_AFTER, or
 * the timings left (`left`) are no more than the variants not yet timed,
 * each of those gets one first (its fastest as believed): a model wrong
 * about a whole variant (a new kernel, another chip) would otherwise never
 * learn it, and every variant is timed when the budget allows. Else the
 * largest expected improvement on best (the guide's fastest while nothing
 * is timed). -1 when every candidate is timed. */
static int next_pick(const mq_cand *cs, int n, const mq_gp_input *in, const double *lp,
                     mq_gp *gp, double best, int done, int left)
{
    unsigned tried = 0, present = 0;
    for (int i = 0; i < n; i++) {
        unsigned bit = 1u << (cs[i].c.variant & 31);
        present |= bit;
        if (cs[i].measured || cs[i].c.variant >= 32) /* (a 33rd variant: no sweep) */
            tried |= bit;
    }
    int untried = 0;
    for (unsigned u = present & ~tried; u; u &= u - 1)
        untried++;
    int sweep = untried > 0 && (done >= VARIANT_SWEEP_AFTER || left <= untried);
    for (int untried_only = sweep; untried_only >= 0; untried_only--) {
        int pick = -1;
        double top = -INFINITY;
        for (int i = 0; i < n; i++) {
            if (cs[i].measured || (untried_only && (tried >> (cs[i].c.variant & 31) & 1)))
                continue;
            double m = 0, sd = 1;
            if (gp)
                mq_gp_predict(gp, &in[i], &m, &sd);
            double score = untried_only || !isfinite(best)
                               ? -(lp[i] + m)
                               : mq_gp_expected_improvement(best, lp[i] + m, sd);
            if (score > top) {
                top = score;
                pick = i;
            }
        }
        if (pick >= 0)
            return pick;
    }
    return -1;
}

/* A local step: every LOCAL_EVERY-th timing from the LOCAL_AFTER-th on. */
#define LOCAL_AFTER 8
#define LOCAL_EVERY 4

/* The local step's pick: of the untimed candidates of the incumbent's (the
 * fastest timed) variant that differ from it by one step in one tunable (a
 * tile, the threadgroups or split-K doubled or halved: 1 in the GP's log2
 * inputs), the one believed fastest; -1 when none is left. Why: where the
 * model is off by 20-30% across the space (a CPU host), expected
 * improvement keeps spreading its timings over the space's far corners
 * while the best candidate is usually a neighbour of the incumbent. Replayed
 * on the stored spaces (docs/tuning.md), this step took the 16-core CPU's
 * median timings to within 3% from 22 to 10 and left the GPUs' at 8. */
static int local_pick(const mq_cand *cs, int n, const mq_gp_input *in, const double *lp,
                      mq_gp *gp)
{
    int inc = -1;
    for (int i = 0; i < n; i++)
        if (cs[i].measured && cs[i].time > 0 && (inc < 0 || cs[i].time < cs[inc].time))
            inc = i;
    int pick = -1;
    double top = INFINITY;
    for (int i = 0; inc >= 0 && i < n; i++) {
        if (cs[i].measured || cs[i].c.variant != cs[inc].c.variant)
            continue;
        double d = 0;
        for (int j = 0; j < MQ_GP_DIM; j++)
            d += fabs(in[i].x[j] - in[inc].x[j]);
        if (d > 1.01) /* log2(1 + threadgroups): 16 -> 32 is 0.96 */
            continue;
        double m = 0, sd = 1;
        if (gp)
            mq_gp_predict(gp, &in[i], &m, &sd);
        if (lp[i] + m < top) {
            top = lp[i] + m;
            pick = i;
        }
    }
    return pick;
}

/* Guided search: from the first timing on, the next candidate is the one
 * with the largest expected improvement of log time, believing the guide's
 * prediction times a Gaussian process fitted on this shape's timings
 * (residual_gp.h). The first is the guide's fastest. The guide predicts
 * anew every 4 timings (refitted when the rows have grown: GUIDE_GROWTH).
 * From the 8th timing on, every 4th is a local step (local_pick) instead. No fixed first picks: the
 * rules' picks are candidates like any other (the caller times them after
 * the search, for the table's speedups). Deterministic: ties go to the
 * earlier candidate in the list. */
void mq_tune_search_guided(mq_tuner *T, const mq_problem *p, mq_cand *cs, int n)
{
    int budget = T->o->evals < n ? T->o->evals : n, done = 0;
    double *lp = malloc(sizeof *lp * (size_t)n), *resid = malloc(sizeof *resid * (size_t)n);
    mq_gp_input *in = malloc(sizeof *in * (size_t)n), *obs = malloc(sizeof *obs * (size_t)n);
    mq_gp gp = {0};
    if (!lp || !resid || !in || !obs || mq_gp_init(&gp, n)) {
        /* out of memory: the candidates in list order */
        for (int i = 0; i < n && done < budget && !T->failed; i++)
            if (!cs[i].measured) {
                mq_tune_measure(T, p, &cs[i]);
                done++;
            }
        goto out;
    }
    for (int i = 0; i < n; i++)
        mq_gp_input_of(&cs[i].c, &in[i]);
    while (done < budget && !T->failed) {
        if (done % 4 == 0)
            guide_predict(T, cs, n, lp);
        int no = 0;
        double best = INFINITY;
        for (int i = 0; i < n; i++)
            if (cs[i].measured && cs[i].time > 0) {
                obs[no] = in[i];
                resid[no++] = log(cs[i].time) - lp[i];
                best = fmin(best, log(cs[i].time));
            }
        int gp_ok = mq_gp_fit(&gp, obs, resid, no) == 0;
        int pick = -1;
        if (done >= LOCAL_AFTER && done % LOCAL_EVERY == 0)
            pick = local_pick(cs, n, in, lp, gp_ok ? &gp : NULL);
        if (pick < 0)
            pick = next_pick(cs, n, in, lp, gp_ok ? &gp : NULL, best, done, budget - done);
        if (pick < 0)
            break;
        mq_tune_measure(T, p, &cs[pick]);
        done++;
    }
out:
    mq_gp_free(&gp);
    free(lp);
    free(resid);
    free(in);
    free(obs);
}

/* Fit the model on DIR/measured.csv: a results file of rows measured on a
 * backend that is the chip itself (any backend but the CPU model), e.g.
 * copied from a Mac's bench run. Returns the rows fitted (0: no such file or
 * too few rows, pred untouched) or -1 on a broken file. */
int mq_tune_stored_model(const char *path, const mq_chip *chip, mq_model *pred, char *err,
                        size_t errlen)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return 0;
    mq_results rs;
    if (mq_results_load(path, &rs, err, errlen))
        return -1;
    mq_rowset rows = {0};
    for (int i = 0; i < rs.n; i++) {
        const mq_result *r = &rs.r[i];
        mq_features f;
        if (strcmp(r->status, "ok") || strcmp(r->chip, chip->name) || !strcmp(r->backend, "cpu") ||
            mq_features_compute(&r->p, &r->c, chip, &f, NULL) != MQ_OK)
            continue;
        if (mq_rows_add(&rows, &f, r->st.median)) {
            snprintf(err, errlen, "%s: out of memory reading its rows", path);
            mq_results_free(&rs);
            free(rows.f);
            free(rows.t);
            return -1;
        }
    }
    mq_results_free(&rs);
    int n = 0;
    mq_model m;
    char why[256];
    if (rows.n >= 4 * MQ_MODEL_NSHARED &&
        mq_model_fit_holdout(rows.f, rows.t, rows.n, 0.2, &m, why,
                             sizeof why) == 0) {
        *pred = m;
        n = m.n_fit;
    }
    free(rows.f);
    free(rows.t);
    return n;
}

