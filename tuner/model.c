/* model.c - see model.h. */
#include <gsl/gsl_blas.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

const char *mq_model_kind_name(mq_model_kind k)
{
    return k == MQ_MODEL_ROOFLINE ? "roofline" : "linear";
}

void mq_model_predictors(const mq_features *f, double x[MQ_MODEL_NPARAM])
{
    x[0] = 1.0;
    x[1] = f->dispatches;
    x[2] = f->compute_s;
    x[3] = f->memory_s;
    x[4] = f->splitk_s;
    x[5] = f->waves;
    x[6] = f->ksteps_core;
    x[7] = f->row_pieces_core;
}

static double predict_x(mq_model_kind kind, const double *th, const double *x)
{
    if (kind == MQ_MODEL_LINEAR) {
        double t = 0;
        for (int j = 0; j < MQ_MODEL_NPARAM; j++)
            t += th[j] * x[j];
        return t;
    }
    return th[0] + th[1] * x[1] + fmax(th[2] * x[2], th[3] * x[3]) + th[4] * x[4] +
           th[5] * x[5] + th[6] * x[6] + th[7] * x[7];
}

double mq_model_predict(const mq_model *m, const mq_features *f)
{
    double x[MQ_MODEL_NPARAM];
    mq_model_predictors(f, x);
    return predict_x(m->kind, m->theta, x);
}

/* Robust linear fit of relative error: rows scaled by 1/t, target 1. */
static int fit_linear(const double *X, const double *t, int n, double *theta)
{
    gsl_matrix *A = gsl_matrix_alloc((size_t)n, MQ_MODEL_NPARAM);
    gsl_vector *y = gsl_vector_alloc((size_t)n);
    gsl_vector *c = gsl_vector_alloc(MQ_MODEL_NPARAM);
    gsl_matrix *cov = gsl_matrix_alloc(MQ_MODEL_NPARAM, MQ_MODEL_NPARAM);
    gsl_multifit_robust_workspace *w =
        gsl_multifit_robust_alloc(gsl_multifit_robust_bisquare, (size_t)n, MQ_MODEL_NPARAM);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < MQ_MODEL_NPARAM; j++)
            gsl_matrix_set(A, (size_t)i, (size_t)j, X[i * MQ_MODEL_NPARAM + j] / t[i]);
        gsl_vector_set(y, (size_t)i, 1.0);
    }
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int st = gsl_multifit_robust(A, y, c, cov, w);
    gsl_set_error_handler(old);
    /* a rank-deficient design (a predictor constant or zero on every row)
     * still yields a least-squares solution; only a hard failure counts */
    int ok = st == GSL_SUCCESS || st == GSL_EMAXITER;
    for (int j = 0; ok && j < MQ_MODEL_NPARAM; j++)
        theta[j] = gsl_vector_get(c, (size_t)j);
    gsl_multifit_robust_free(w);
    gsl_matrix_free(A);
    gsl_matrix_free(cov);
    gsl_vector_free(y);
    gsl_vector_free(c);
    return ok ? 0 : -1;
}

typedef struct {
    const double *X, *t;
    int n;
} nl_data;

static int roofline_residuals(const gsl_vector *th, void *data, gsl_vector *r)
{
    const nl_data *d = data;
    double p[MQ_MODEL_NPARAM];
    for (int j = 0; j < MQ_MODEL_NPARAM; j++)
        p[j] = gsl_vector_get(th, (size_t)j);
    for (int i = 0; i < d->n; i++)
        gsl_vector_set(r, (size_t)i,
                       predict_x(MQ_MODEL_ROOFLINE, p, d->X + i * MQ_MODEL_NPARAM) / d->t[i] -
                           1.0);
    return GSL_SUCCESS;
}

/* The roofline by active sets: given the slopes, each row is compute- or
 * memory-bound; with that split the model is linear (C on compute rows, M on
 * memory rows), fitted robustly; repeat until no row changes side. Then a
 * nonlinear least-squares polish from there. */
static int fit_roofline(const double *X, const double *t, int n, double *theta)
{
    double *Xs = malloc(sizeof(double) * (size_t)n * MQ_MODEL_NPARAM);
    char *mem = calloc((size_t)n, 1);
    if (!Xs || !mem) {
        free(Xs);
        free(mem);
        return -1;
    }
    double c_slope = 1.0, m_slope = 1.0; /* start: the ideal times */
    int rc = 0;
    for (int iter = 0; iter < 50; iter++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const double *x = X + i * MQ_MODEL_NPARAM;
            char is_mem = m_slope * x[3] > c_slope * x[2];
            changed += iter == 0 || is_mem != mem[i];
            mem[i] = is_mem;
            double *xs = Xs + i * MQ_MODEL_NPARAM;
            memcpy(xs, x, sizeof(double) * MQ_MODEL_NPARAM);
            xs[2] = is_mem ? 0.0 : x[2];
            xs[3] = is_mem ? x[3] : 0.0;
        }
        if (!changed)
            break;
        if ((rc = fit_linear(Xs, t, n, theta)) != 0)
            break;
        c_slope = theta[2] > 0 ? theta[2] : 1e-9;
        m_slope = theta[3] > 0 ? theta[3] : 1e-9;
    }
    free(Xs);
    free(mem);
    if (rc)
        return rc;
    nl_data d = {X, t, n};
    gsl_multifit_nlinear_fdf fdf;
    memset(&fdf, 0, sizeof fdf);
    fdf.f = roofline_residuals;
    fdf.df = NULL; /* finite differences: the max() has no derivative at the kink */
    fdf.n = (size_t)n;
    fdf.p = MQ_MODEL_NPARAM;
    fdf.params = &d;
    gsl_multifit_nlinear_parameters params = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &params, (size_t)n,
                                   MQ_MODEL_NPARAM);
    gsl_vector_view x0 = gsl_vector_view_array(theta, MQ_MODEL_NPARAM);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int info = 0;
    int st = gsl_multifit_nlinear_init(&x0.vector, &fdf, w);
    if (st == GSL_SUCCESS)
        st = gsl_multifit_nlinear_driver(100, 1e-10, 1e-10, 1e-12, NULL, NULL, &info, w);
    gsl_set_error_handler(old);
    if (st == GSL_SUCCESS || st == GSL_EMAXITER || st == GSL_ENOPROG) {
        gsl_vector *x = gsl_multifit_nlinear_position(w);
        for (int j = 0; j < MQ_MODEL_NPARAM; j++)
            theta[j] = gsl_vector_get(x, (size_t)j);
    }
    gsl_multifit_nlinear_free(w);
    return 0;
}

int mq_model_fit(mq_model_kind kind, const mq_features *f, const double *t, int n,
                 mq_model *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    if (n < 2 * MQ_MODEL_NPARAM) {
        snprintf(err, errlen, "%d measured rows are too few to fit %d parameters (need %d)", n,
                 MQ_MODEL_NPARAM, 2 * MQ_MODEL_NPARAM);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!(t[i] > 0)) {
            snprintf(err, errlen, "row %d has a non-positive time %g", i, t[i]);
            return -1;
        }
    double *X = malloc(sizeof(double) * (size_t)n * MQ_MODEL_NPARAM);
    if (!X) {
        snprintf(err, errlen, "out of memory fitting %d rows", n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        mq_model_predictors(&f[i], X + i * MQ_MODEL_NPARAM);
    int rc = kind == MQ_MODEL_LINEAR ? fit_linear(X, t, n, out->theta)
                                     : fit_roofline(X, t, n, out->theta);
    free(X);
    if (rc)
        snprintf(err, errlen, "the %s fit failed on %d rows", mq_model_kind_name(kind), n);
    out->n_fit = n;
    return rc;
}

void mq_model_quality(const mq_model *m, const mq_features *f, const double *t, int n,
                      double *mape, double *spearman)
{
    double *pred = malloc(sizeof(double) * (size_t)n * 3);
    double sum = 0;
    for (int i = 0; pred && i < n; i++) {
        pred[i] = mq_model_predict(m, &f[i]);
        sum += fabs(pred[i] - t[i]) / t[i];
    }
    *mape = n ? sum / n : NAN;
    *spearman = pred && n > 1 ? gsl_stats_spearman(pred, 1, t, 1, (size_t)n, pred + n) : NAN;
    free(pred);
}

int mq_model_fit_holdout(mq_model_kind kind, const mq_features *f, const double *t, int n,
                         double holdout, mq_model *out, char *err, size_t errlen)
{
    int k = holdout > 0 ? (int)lround(1.0 / holdout) : n + 1;
    if (k < 2)
        k = 2;
    mq_features *ff = malloc(sizeof *ff * (size_t)n), *hf = malloc(sizeof *hf * (size_t)n);
    double *ft = malloc(sizeof *ft * (size_t)n), *ht = malloc(sizeof *ht * (size_t)n);
    int nf = 0, nh = 0, rc = -1;
    if (ff && hf && ft && ht) {
        for (int i = 0; i < n; i++) {
            if (i % k == k - 1) {
                hf[nh] = f[i];
                ht[nh++] = t[i];
            } else {
                ff[nf] = f[i];
                ft[nf++] = t[i];
            }
        }
        rc = mq_model_fit(kind, ff, ft, nf, out, err, errlen);
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
    return rc;
}
