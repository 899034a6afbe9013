/* model.c - see model.h. */
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* The rows as the fit sees them: only the columns some row uses (a
 * variant never measured has none), X row-major n x p. */
typedef struct {
    const double *X, *t, *floor;
    int n, p;
} fit_data;

/* residuals (floor + sum phi_j^2 x_j) / t - 1 and their Jacobian */
static int fit_f(const gsl_vector *phi, void *data, gsl_vector *r)
{
    const fit_data *d = data;
    for (int i = 0; i < d->n; i++) {
        const double *x = d->X + (size_t)i * d->p;
        double s = d->floor[i];
        for (int j = 0; j < d->p; j++) {
            double p = gsl_vector_get(phi, (size_t)j);
            s += p * p * x[j];
        }
        gsl_vector_set(r, (size_t)i, s / d->t[i] - 1.0);
    }
    return GSL_SUCCESS;
}

static int fit_df(const gsl_vector *phi, void *data, gsl_matrix *J)
{
    const fit_data *d = data;
    for (int i = 0; i < d->n; i++)
        for (int j = 0; j < d->p; j++)
            gsl_matrix_set(J, (size_t)i, (size_t)j,
                           2.0 * gsl_vector_get(phi, (size_t)j) * d->X[(size_t)i * d->p + j] /
                               d->t[i]);
    return GSL_SUCCESS;
}

/* A start for the constrained fit: the unconstrained least-squares
 * solution of the relative residuals (GSL, truncated SVD), each
 * coefficient clipped from below to a small share of what would explain
 * the rows' mean time alone (a zero start would never move: phi = 0 has no
 * gradient). */
static void start_point(const fit_data *d, double *theta)
{
    size_t n = (size_t)d->n, p = (size_t)d->p;
    gsl_matrix *A = gsl_matrix_alloc(n, p), *cov = gsl_matrix_alloc(p, p);
    gsl_vector *y = gsl_vector_alloc(n), *c = gsl_vector_alloc(p);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc(n, p);
    double xmean[MQ_MODEL_NTERM] = {0}, tmean = 0, chisq;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < p; j++) {
            double x = d->X[i * p + j];
            gsl_matrix_set(A, i, j, x / d->t[i]);
            xmean[j] += x / (double)n;
        }
        gsl_vector_set(y, i, 1.0 - d->floor[i] / d->t[i]);
        tmean += d->t[i] / (double)n;
    }
    size_t rank;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int st = gsl_multifit_linear_tsvd(A, y, 1e-12, c, cov, &chisq, &rank, w);
    gsl_set_error_handler(old);
    for (size_t j = 0; j < p; j++) {
        double small = 1e-3 * tmean / xmean[j];
        double v = st == GSL_SUCCESS ? gsl_vector_get(c, j) : 0.0;
        theta[j] = isfinite(v) && v > small ? v : small;
    }
    gsl_multifit_linear_free(w);
    gsl_matrix_free(A);
    gsl_matrix_free(cov);
    gsl_vector_free(y);
    gsl_vector_free(c);
}

int mq_model_fit(const mq_features *f, const double *t, int n, mq_model *out, char *err,
                 size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->mape = out->spearman = NAN;
    for (int i = 0; i < n; i++)
        if (!(t[i] > 0) || !isfinite(t[i])) {
            snprintf(err, errlen, "row %d has a non-positive time %g", i, t[i]);
            return -1;
        }
    double *Xall = malloc(sizeof(double) * (size_t)(n ? n : 1) * MQ_MODEL_NTERM);
    double *fl = malloc(sizeof(double) * (size_t)(n ? n : 1));
    int active[MQ_MODEL_NTERM], p = 0;
    if (!Xall || !fl) {
        free(Xall);
        free(fl);
        snprintf(err, errlen, "out of memory fitting %d rows", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        mq_model_terms(&f[i], Xall + (size_t)i * MQ_MODEL_NTERM);
        fl[i] = f[i].floor_s;
    }
    for (int j = 0; j < MQ_MODEL_NTERM; j++) {
        int used = 0;
        for (int i = 0; i < n && !used; i++)
            used = Xall[(size_t)i * MQ_MODEL_NTERM + j] > 0;
        if (used)
            active[p++] = j;
    }
    if (n < 2 * p || p == 0) {
        snprintf(err, errlen, "%d measured rows are too few to fit %d terms (need %d)", n, p,
                 2 * (p ? p : 1));
        free(Xall);
        free(fl);
        return -1;
    }
    double *X = Xall; /* compacted in place: column active[j] -> j */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < p; j++)
            X[(size_t)i * p + j] = Xall[(size_t)i * MQ_MODEL_NTERM + active[j]];
    fit_data d = {X, t, fl, n, p};
    double theta[MQ_MODEL_NTERM], phi[MQ_MODEL_NTERM];
    start_point(&d, theta);
    for (int j = 0; j < p; j++)
        phi[j] = sqrt(theta[j]);
    gsl_multifit_nlinear_fdf fdf;
    memset(&fdf, 0, sizeof fdf);
    fdf.f = fit_f;
    fdf.df = fit_df;
    fdf.n = (size_t)n;
    fdf.p = (size_t)p;
    fdf.params = &d;
    gsl_multifit_nlinear_parameters params = gsl_multifit_nlinear_default_parameters();
    params.scale = gsl_multifit_nlinear_scale_more; /* terms span 1e-9 .. 1e2 */
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &params, (size_t)n, (size_t)p);
    gsl_vector_view x0 = gsl_vector_view_array(phi, (size_t)p);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int info = 0;
    int st = w ? gsl_multifit_nlinear_init(&x0.vector, &fdf, w) : GSL_ENOMEM;
    if (st == GSL_SUCCESS)
        st = gsl_multifit_nlinear_driver(300, 1e-9, 1e-12, 1e-12, NULL, NULL, &info, w);
    gsl_set_error_handler(old);
    int rc = 0;
    if (st == GSL_SUCCESS || st == GSL_EMAXITER || st == GSL_ENOPROG) {
        gsl_vector *x = gsl_multifit_nlinear_position(w);
        for (int j = 0; j < p; j++) {
            double v = gsl_vector_get(x, (size_t)j);
            out->theta[active[j]] = v * v;
        }
    } else {
        snprintf(err, errlen, "the fit failed on %d rows (%s)", n, gsl_strerror(st));
        rc = -1;
    }
    if (w)
        gsl_multifit_nlinear_free(w);
    free(Xall);
    free(fl);
    out->n_fit = n;
    return rc;
}

void mq_model_quality(const mq_model *m, const mq_features *f, const double *t, int n,
                      double *mape, double *spearman)
{
    double *pred = malloc(sizeof(double) * (size_t)(n ? n : 1) * 3);
    double sum = 0;
    for (int i = 0; pred && i < n; i++) {
        pred[i] = mq_model_predict(m, &f[i]);
        sum += fabs(pred[i] - t[i]) / t[i];
    }
    *mape = n ? sum / n : NAN;
    *spearman = pred && n > 1 ? gsl_stats_spearman(pred, 1, t, 1, (size_t)n, pred + n) : NAN;
    free(pred);
}

int mq_model_holdout_rows(const mq_features *f, int n, double holdout, char *held)
{
    int k = holdout > 0 ? (int)lround(1.0 / holdout) : n + 1;
    if (k < 2)
        k = 2;
    int ns = 0, *first = malloc(sizeof *first * (size_t)(n ? n : 1)),
        *which = malloc(sizeof *which * (size_t)(n ? n : 1));
    if (!first || !which) {
        free(first);
        free(which);
        return -1;
    }
    for (int i = 0; i < n; i++) { /* shapes in order of first appearance */
        int s = 0;
        while (s < ns && (f[first[s]].p.N != f[i].p.N || f[first[s]].p.K != f[i].p.K))
            s++;
        if (s == ns)
            first[ns++] = i;
        which[i] = s;
    }
    for (int i = 0; i < n; i++)
        held[i] = ns >= 2 ? which[i] % k == k - 1 || (ns < k && which[i] == ns - 1)
                          : i % k == k - 1;
    free(first);
    free(which);
    return 0;
}

int mq_model_fit_holdout(const mq_features *f, const double *t, int n, double holdout,
                         mq_model *out, char *err, size_t errlen)
{
    mq_features *ff = malloc(sizeof *ff * (size_t)(n ? n : 1)),
                *hf = malloc(sizeof *hf * (size_t)(n ? n : 1));
    double *ft = malloc(sizeof *ft * (size_t)(n ? n : 1)),
           *ht = malloc(sizeof *ht * (size_t)(n ? n : 1));
    char *held = malloc((size_t)(n ? n : 1));
    int nf = 0, nh = 0, rc = -1;
    if (ff && hf && ft && ht && held && mq_model_holdout_rows(f, n, holdout, held) == 0) {
        for (int i = 0; i < n; i++) {
            if (held[i]) {
                hf[nh] = f[i];
                ht[nh++] = t[i];
            } else {
                ff[nf] = f[i];
                ft[nf++] = t[i];
            }
        }
        rc = mq_model_fit(ff, ft, nf, out, err, errlen);
        if (rc == 0) {
            out->n_holdout = nh;
            mq_model_quality(out, hf, ht, nh, &out->mape, &out->spearman);
        }
    } else {
        snprintf(err, errlen, "out of memory");
    }
    free(ff);
    free(hf);
    free(ft);
    free(ht);
    free(held);
    return rc;
}
