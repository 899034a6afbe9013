/* replay.c - see replay.h. */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "replay.h"

const int mq_replay_checkpoints[MQ_REPLAY_NCHECK] = {5, 10, 15, 20, 40, 80};
static const char *const strategy_name[MQ_REPLAY_NSTRATEGY] = {"guided", "random"};

int mq_replay_parse_strategies(const char *s, unsigned *mask, char *err, size_t errlen)
{
    *mask = 0;
    while (*s) {
        size_t n = strcspn(s, ",");
        int k = -1;
        for (int i = 0; i < MQ_REPLAY_NSTRATEGY && k < 0; i++)
            if (n == strlen(strategy_name[i]) && !strncmp(s, strategy_name[i], n))
                k = i;
        if (k < 0 && n == 3 && !strncmp(s, "all", 3)) {
            *mask |= (1u << MQ_REPLAY_NSTRATEGY) - 1;
        } else if (k < 0) {
            snprintf(err, errlen, "bad --strategy '%.*s' (expected guided, random or all)",
                     (int)n, s);
            return -1;
        } else {
            *mask |= 1u << k;
        }
        s += n + (s[n] == ',');
    }
    if (!*mask) {
        snprintf(err, errlen, "bad --strategy '' (expected guided, random or all)");
        return -1;
    }
    return 0;
}

/* One search of one space: the regret after each checkpoint (INFINITY
 * while nothing ok was found) and the evaluations to within 3% and 1%
 * (0: not within the budget). */
typedef struct {
    double regret[MQ_REPLAY_NCHECK];
    int to3, to1;
} run_outcome;

/* A space: one problem's candidates as the rows measured them. */
typedef struct {
    mq_problem p;
    char backend[16];
    mq_cand *cs;
    int n, base[MQ_BASE_COUNT]; /* filled by mq_tune_candidates_from_rows, unused here */
    double best;
} space;

/* Search one space once: the candidate list in the seed's order, the
 * tuner's rows and model cleared (cold), the stored times as measurements. */
static int run_once(mq_tuner *T, const space *sp, mq_replay_strategy st, int seed, gsl_rng *rng,
                    run_outcome *out)
{
    int n = sp->n, budget = T->o->evals < n ? T->o->evals : n;
    size_t *perm = malloc(sizeof *perm * (size_t)n);
    mq_cand *cs = malloc(sizeof *cs * (size_t)n);
    double *t = malloc(sizeof *t * (size_t)n), *trace = malloc(sizeof *trace * (size_t)n);
    if (!perm || !cs || !t || !trace) {
        free(perm), free(cs), free(t), free(trace);
        return -1;
    }
    for (int i = 0; i < n; i++)
        perm[i] = (size_t)i;
    gsl_rng_set(rng, (unsigned long)seed);
    gsl_ran_shuffle(rng, perm, (size_t)n, sizeof *perm);
    for (int i = 0; i < n; i++) {
        cs[i] = sp->cs[perm[i]];
        t[i] = cs[i].time;
        cs[i].time = -1;
        cs[i].measured = 0;
    }
    T->rows.n = 0;
    T->guide_fitted = 0;
    T->guide_rows = 0;
    T->replay_cs = cs;
    T->replay_t = t;
    T->trace = trace;
    T->ntrace = 0;
    if (st == MQ_REPLAY_GUIDED)
        mq_tune_search_guided(T, &sp->p, cs, n);
    else
        for (int i = 0; i < budget && !T->failed; i++)
            mq_tune_measure(T, &sp->p, &cs[i]);
    double found = INFINITY;
    int k = 0;
    out->to3 = out->to1 = 0;
    for (int e = 0; e < T->ntrace; e++) {
        if (trace[e] > 0 && trace[e] < found)
            found = trace[e];
        if (!out->to3 && found <= 1.03 * sp->best)
            out->to3 = e + 1;
        if (!out->to1 && found <= 1.01 * sp->best)
            out->to1 = e + 1;
        while (k < MQ_REPLAY_NCHECK && mq_replay_checkpoints[k] == e + 1)
            out->regret[k++] = found / sp->best - 1;
    }
    for (; k < MQ_REPLAY_NCHECK; k++) /* a checkpoint past the space's size */
        out->regret[k] = found / sp->best - 1;
    T->replay_t = NULL;
    T->trace = NULL;
    free(perm), free(cs), free(t), free(trace);
    return T->failed ? -1 : 0;
}

/* The spaces of rs: the problems measured on T's chip (of T's formats and
 * group), per backend, with at least min ok candidates. -1 on out of memory. */
static int find_spaces(const mq_tuner *T, const mq_results *rs, int min, space **out, int *nout)
{
    space *sp = NULL;
    int n = 0, cap = 0;
    for (int i = 0; i < rs->n; i++) {
        const mq_result *r = &rs->r[i];
        if (strcmp(r->chip, T->chip->name) || r->p.group != T->o->group ||
            !(T->o->formats & (1u << r->p.format)))
            continue;
        int seen = 0;
        for (int k = 0; k < n && !seen; k++)
            seen = !strcmp(sp[k].backend, r->backend) && !memcmp(&sp[k].p, &r->p, sizeof r->p);
        if (seen)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            space *g = realloc(sp, sizeof *g * (size_t)cap);
            if (!g)
                goto oom;
            sp = g;
        }
        space *s = &sp[n];
        memset(s, 0, sizeof *s);
        s->p = r->p;
        snprintf(s->backend, sizeof s->backend, "%s", r->backend);
        s->cs = mq_tune_candidates_from_rows(&r->p, T->chip, rs, r->backend, &s->n, s->base);
        if (!s->cs)
            goto oom;
        int ok = 0;
        s->best = INFINITY;
        for (int k = 0; k < s->n; k++)
            if (s->cs[k].time > 0) {
                ok++;
                s->best = fmin(s->best, s->cs[k].time);
            }
        if (ok >= min)
            n++;
        else
            free(s->cs);
    }
    *out = sp;
    *nout = n;
    return 0;
oom:
    for (int k = 0; k < n; k++)
        free(sp[k].cs);
    free(sp);
    return -1;
}

/* The median of v[0..n) (sorted in place); INFINITY stays INFINITY. */
static double median(double *v, int n)
{
    gsl_sort(v, 1, (size_t)n);
    return gsl_stats_median_from_sorted_data(v, 1, (size_t)n);
}

/* One strategy's summary line over all its runs. */
static void print_summary(FILE *out, const char *name, const run_outcome *r, int nrun,
                          int budget, double *scratch)
{
    fprintf(out, "%-8s", name);
    for (int k = 0; k < MQ_REPLAY_NCHECK; k++) {
        if (mq_replay_checkpoints[k] > budget)
            continue;
        for (int i = 0; i < nrun; i++)
            scratch[i] = r[i].regret[k];
        fprintf(out, " %7.1f%%", 100 * median(scratch, nrun));
    }
    for (int w = 0; w < 2; w++) {
        for (int i = 0; i < nrun; i++) {
            int e = w ? r[i].to1 : r[i].to3;
            scratch[i] = e ? e : INFINITY;
        }
        double m = median(scratch, nrun);
        if (isfinite(m))
            fprintf(out, " %8.1f", m);
        else
            fprintf(out, " %7s%d", ">", budget);
    }
    fprintf(out, "\n");
}

/* The trace file: a row per space, strategy and seed. */
static void trace_row(FILE *f, const space *sp, const char *strategy, int seed,
                      const run_outcome *r)
{
    fprintf(f, "%s,%d,%s,%s,%d,%d,%d,%d,%d,%.9g", strategy, seed, sp->backend,
            mq_format_name(sp->p.format), sp->p.M, sp->p.N, sp->p.K, sp->p.group, sp->n,
            sp->best);
    for (int k = 0; k < MQ_REPLAY_NCHECK; k++)
        fprintf(f, ",%.6g", r->regret[k]);
    fprintf(f, ",%d,%d\n", r->to3, r->to1);
}

int mq_tune_replay(mq_tuner *T, const mq_replay_opts *o, FILE *out)
{
    char err[4400], tmp[4400];
    mq_results rs;
    if (mq_results_load(o->path, &rs, err, sizeof err)) {
        fprintf(stderr, "tune: %s\n", err);
        return 2;
    }
    space *sp = NULL;
    int nsp = 0, rc = 2;
    FILE *tf = NULL;
    run_outcome *runs = NULL;
    double *scratch = NULL;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!rng || find_spaces(T, &rs, o->min_candidates, &sp, &nsp)) {
        fprintf(stderr, "tune: out of memory replaying %s\n", o->path);
        goto done;
    }
    if (!nsp) {
        fprintf(stderr, "tune: %s: no problem of chip %s (group %d) with %d or more candidates "
                        "measured ok: nothing to replay\n",
                o->path, T->chip->name, T->o->group, o->min_candidates);
        goto done;
    }
    if (o->trace && !(tf = mq_atomic_open(o->trace, tmp, sizeof tmp, err, sizeof err))) {
        fprintf(stderr, "tune: %s\n", err);
        goto done;
    }
    int nrun = nsp * o->seeds;
    runs = malloc(sizeof *runs * (size_t)nrun);
    scratch = malloc(sizeof *scratch * (size_t)nrun);
    if (!runs || !scratch) {
        fprintf(stderr, "tune: out of memory replaying %s\n", o->path);
        goto done;
    }
    if (tf) {
        fprintf(tf, "strategy,seed,backend,format,M,N,K,group,candidates,best_s");
        for (int k = 0; k < MQ_REPLAY_NCHECK; k++)
            fprintf(tf, ",regret_%d", mq_replay_checkpoints[k]);
        fprintf(tf, ",evals_3pct,evals_1pct\n");
    }
    fprintf(out, "replay of %s: %d spaces of chip %s, %d seeds each, budget %d evaluations, "
                 "median regret (best found / best - 1) after\n",
            o->path, nsp, T->chip->name, o->seeds, T->o->evals);
    fprintf(out, "%-8s", "strategy");
    for (int k = 0; k < MQ_REPLAY_NCHECK; k++)
        if (mq_replay_checkpoints[k] <= T->o->evals)
            fprintf(out, " %8d", mq_replay_checkpoints[k]);
    fprintf(out, " %8s %8s\n", "to 3%", "to 1%");
    for (int st = 0; st < MQ_REPLAY_NSTRATEGY; st++) {
        if (!(o->strategies & (1u << st)))
            continue;
        for (int s = 0; s < nsp; s++)
            for (int seed = 1; seed <= o->seeds; seed++) {
                run_outcome *r = &runs[s * o->seeds + seed - 1];
                if (run_once(T, &sp[s], (mq_replay_strategy)st, seed, rng, r)) {
                    fprintf(stderr, "tune: out of memory replaying %s\n", o->path);
                    goto done;
                }
                if (tf)
                    trace_row(tf, &sp[s], strategy_name[st], seed, r);
            }
        print_summary(out, strategy_name[st], runs, nrun, T->o->evals, scratch);
    }
    if (tf) {
        FILE *f = tf;
        tf = NULL;
        if (mq_atomic_commit(f, tmp, o->trace, err, sizeof err)) {
            fprintf(stderr, "tune: %s\n", err);
            goto done;
        }
    }
    rc = 0;
done:
    if (tf)
        mq_atomic_abort(tf, tmp);
    for (int s = 0; s < nsp; s++)
        free(sp[s].cs);
    free(sp);
    free(runs);
    free(scratch);
    gsl_rng_free(rng);
    mq_results_free(&rs);
    return rc;
}
