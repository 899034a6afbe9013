/* public_figures.c - see public_figures.h. */
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candidate_grid.h"
#include "figures_file.h"
#include "numparse.h"
#include "public_figures.h"
#include "work_features.h"

/* The cost of a dispatch and the latency of a K step on a slot's critical
 * path: what a published pair of one small-M GEMM with and without split-K
 * (one more dispatch, a K slice a fraction as long) pins down. */
const char *const mq_public_fit_terms[MQ_PUBLIC_NFIT] = {"dispatch", "chain_kstep"};

static const char *const columns[] = {"chip",     "format",  "group",  "M",
                                      "N",        "K",       "variant", "tile_m",
                                      "tile_n",   "tile_k",  "num_threadgroups", "split_k",
                                      "published_ms", "role", "source"};
#define NCOL ((int)(sizeof columns / sizeof *columns))

void mq_public_figures_free(mq_public_figures *pf)
{
    free(pf->f);
    pf->f = NULL;
    pf->n = 0;
}

static int parse_row(const char *path, const mq_csv_row *r, const int *col, void *ctx,
                     void *elem, char *err, size_t errlen)
{
    const char *chips = ctx;
    mq_public_figure *f = elem;
    const char *v[NCOL];
    char why[200];
    for (int j = 0; j < NCOL; j++)
        v[j] = mq_figure_field(r, col, j);
    memset(f, 0, sizeof *f);
    f->line = r->line;
    char cerr[600];
    if (mq_chip_load_named(chips, v[0], &f->chip, cerr, sizeof cerr)) {
        snprintf(err, errlen, "%s:%d: chip: %s", path, r->line, cerr);
        return -1;
    }
    mq_error e;
    if (mq_format_from_name(v[1], &f->p.format, &e) != MQ_OK) {
        snprintf(err, errlen, "%s:%d: format: %s", path, r->line, e.msg);
        return -1;
    }
    int *ints[] = {&f->p.group, &f->p.M, &f->p.N, &f->p.K};
    for (int j = 0; j < 4; j++)
        if (mq_parse_int(v[2 + j], 1, 1 << 24, ints[j], why, sizeof why)) {
            snprintf(err, errlen, "%s:%d: %s: %s", path, r->line, columns[2 + j], why);
            return -1;
        }
    f->best = !strcmp(v[6], "best");
    if (!f->best) {
        mq_variant var;
        if (mq_variant_from_name(v[6], &var, &e) != MQ_OK) {
            snprintf(err, errlen, "%s:%d: variant: %s (or 'best')", path, r->line, e.msg);
            return -1;
        }
        f->c.variant = var;
        int *pi[] = {&f->c.p.tile_m, &f->c.p.tile_n, &f->c.p.tile_k, &f->c.p.num_threadgroups,
                     &f->c.p.split_k};
        for (int j = 0; j < 5; j++)
            if (mq_parse_int(v[7 + j], 0, 1 << 20, pi[j], why, sizeof why)) {
                snprintf(err, errlen, "%s:%d: %s: %s", path, r->line, columns[7 + j], why);
                return -1;
            }
    }
    double ms;
    if (mq_parse_double(v[12], 1e-6, 1e6, &ms, why, sizeof why)) {
        snprintf(err, errlen, "%s:%d: published_ms: %s", path, r->line, why);
        return -1;
    }
    f->published_s = ms * 1e-3;
    static const char *const roles[] = {"check", "fit", "compare"};
    f->role = -1;
    for (int j = 0; j < 3; j++)
        if (!strcmp(v[13], roles[j]))
            f->role = j;
    if (f->role < 0) {
        snprintf(err, errlen, "%s:%d: role: '%s' is not 'fit', 'check' or 'compare'", path,
                 r->line, v[13]);
        return -1;
    }
    if (!v[14][0]) {
        snprintf(err, errlen, "%s:%d: source: empty (every figure names where it was published)",
                 path, r->line);
        return -1;
    }
    snprintf(f->source, sizeof f->source, "%s", v[14]);
    mq_features feat;
    if (mq_problem_check(&f->p, &e) != MQ_OK) {
        snprintf(err, errlen, "%s:%d: shape: %s", path, r->line, e.msg);
        return -1;
    }
    if (!f->best && mq_features_compute(&f->p, &f->c, &f->chip, &feat, &e) != MQ_OK) {
        snprintf(err, errlen, "%s:%d: the candidate is not legal on %s: %s", path, r->line,
                 f->chip.name, e.msg);
        return -1;
    }
    return 0;
}

int mq_public_figures_load(const char *path, const char *chips_path, mq_public_figures *out,
                           char *err, size_t errlen)
{
    void *f;
    int rc = mq_figures_read(path, columns, NCOL, sizeof *out->f, parse_row, (void *)chips_path,
                             &f, &out->n, err, errlen);
    out->f = f;
    return rc;
}

typedef struct {
    const mq_public_figure *f;
    const mq_model *m;
    mq_candidate best;
    double best_s;
} best_walk;

static int visit(const mq_candidate *c, const char *pointless, void *ctx)
{
    best_walk *w = ctx;
    mq_features feat;
    if (pointless || mq_features_compute(&w->f->p, c, &w->f->chip, &feat, NULL) != MQ_OK)
        return 0;
    double s = mq_model_predict(w->m, &feat);
    if (s < w->best_s) {
        w->best_s = s;
        w->best = *c;
    }
    return 0;
}

double mq_public_predict(const mq_public_figure *f, const mq_model *m, mq_candidate *chosen)
{
    mq_features feat;
    if (!f->best) {
        if (chosen)
            *chosen = f->c;
        return mq_features_compute(&f->p, &f->c, &f->chip, &feat, NULL) == MQ_OK
                   ? mq_model_predict(m, &feat)
                   : -1;
    }
    best_walk w = {f, m, {0}, INFINITY};
    mq_candidate_grid(&f->p, (int)f->chip.v[MQ_CHIP_GPU_CORES], 0, visit, &w);
    if (chosen)
        *chosen = w.best;
    return isfinite(w.best_s) ? w.best_s : -1;
}

/* One linear least-squares step on the fit rows for the chosen
 * candidates: minimise sum ((predicted - published) / published)^2 over
 * the fitted terms. A term that comes out negative is dropped (0) and the
 * rest refitted: the model's coefficients are never negative. */
static int solve(const mq_public_figures *pf, const mq_candidate *cand, const int *term,
                 mq_model *m, char *err, size_t errlen)
{
    int use[MQ_PUBLIC_NFIT], nf = 0;
    for (int i = 0; i < pf->n; i++)
        nf += pf->f[i].role == MQ_PUBLIC_FIT;
    for (int k = 0; k < MQ_PUBLIC_NFIT; k++)
        use[k] = 1;
    for (int pass = 0; pass <= MQ_PUBLIC_NFIT; pass++) { /* at most one term dropped a pass */
        int p = 0, idx[MQ_PUBLIC_NFIT];
        for (int k = 0; k < MQ_PUBLIC_NFIT; k++)
            if (use[k])
                idx[p++] = k;
        for (int k = 0; k < MQ_PUBLIC_NFIT; k++)
            if (!use[k])
                m->theta[term[k]] = 0;
        if (p == 0)
            return 0;
        if (nf < p) {
            snprintf(err, errlen, "%d fit figures are too few for %d terms", nf, p);
            return -1;
        }
        gsl_matrix *A = gsl_matrix_alloc((size_t)nf, (size_t)p), *cov = gsl_matrix_alloc((size_t)p, (size_t)p);
        gsl_vector *y = gsl_vector_alloc((size_t)nf), *c = gsl_vector_alloc((size_t)p);
        gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc((size_t)nf, (size_t)p);
        if (!A || !cov || !y || !c || !w) {
            snprintf(err, errlen, "out of memory fitting %d figures", nf);
            return -1;
        }
        size_t r = 0;
        for (int i = 0; i < pf->n; i++) {
            const mq_public_figure *f = &pf->f[i];
            if (f->role != MQ_PUBLIC_FIT)
                continue;
            mq_features feat;
            double x[MQ_MODEL_NTERM];
            mq_features_compute(&f->p, &cand[i], &f->chip, &feat, NULL);
            mq_model_terms(&feat, x);
            double rest = feat.floor_s; /* what the terms not fitted predict */
            for (int j = 0; j < MQ_MODEL_NTERM; j++) {
                int fitted = 0;
                for (int k = 0; k < p; k++)
                    fitted |= j == term[idx[k]];
                if (!fitted && x[j] != 0)
                    rest += fmax(m->theta[j], 0.0) * x[j];
            }
            for (int k = 0; k < p; k++)
                gsl_matrix_set(A, r, (size_t)k, x[term[idx[k]]] / f->published_s);
            gsl_vector_set(y, r, (f->published_s - rest) / f->published_s);
            r++;
        }
        double chisq;
        gsl_error_handler_t *old = gsl_set_error_handler_off();
        int st = gsl_multifit_linear(A, y, c, cov, &chisq, w);
        gsl_set_error_handler(old);
        int neg = -1;
        for (int k = 0; k < p && st == GSL_SUCCESS; k++) {
            double v = gsl_vector_get(c, (size_t)k);
            m->theta[term[idx[k]]] = v;
            if (v < 0 && (neg < 0 || v < gsl_vector_get(c, (size_t)neg)))
                neg = k;
        }
        gsl_matrix_free(A);
        gsl_matrix_free(cov);
        gsl_vector_free(y);
        gsl_vector_free(c);
        gsl_multifit_linear_free(w);
        if (st != GSL_SUCCESS) {
            snprintf(err, errlen, "the fit failed on %d figures (%s)", nf, gsl_strerror(st));
            return -1;
        }
        if (neg < 0)
            return 0;
        use[idx[neg]] = 0;
    }
    return 0;
}

int mq_public_fit(const mq_public_figures *pf, mq_model *m, char *err, size_t errlen)
{
    int term[MQ_PUBLIC_NFIT];
    for (int k = 0; k < MQ_PUBLIC_NFIT; k++)
        if ((term[k] = mq_model_term_index(mq_public_fit_terms[k], -1)) < 0) {
            snprintf(err, errlen, "no model term '%s'", mq_public_fit_terms[k]);
            return -1;
        }
    mq_candidate *cand = calloc((size_t)(pf->n ? pf->n : 1), sizeof *cand);
    if (!cand) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0, changed = 1;
    for (int round = 0; round < 8 && changed && rc == 0; round++) {
        changed = 0;
        for (int i = 0; i < pf->n; i++) {
            mq_candidate c;
            if (mq_public_predict(&pf->f[i], m, &c) < 0) {
                snprintf(err, errlen, "line %d: no legal candidate on %s", pf->f[i].line,
                         pf->f[i].chip.name);
                rc = -1;
                break;
            }
            changed |= round == 0 || memcmp(&c, &cand[i], sizeof c) != 0;
            cand[i] = c;
        }
        if (rc == 0 && changed)
            rc = solve(pf, cand, term, m, err, errlen);
    }
    free(cand);
    return rc;
}
