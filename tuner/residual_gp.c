/* residual_gp.c - see residual_gp.h. */
#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>

#include "residual_gp.h"

/* The covariance, on the log residual (log measured - log predicted): a
 * constant every candidate shares (the model's scale on this shape: off
 * by e^1 is usual on a chip it was not fitted on), plus a squared
 * exponential in the inputs (log2 units: a tile twice as wide is one),
 * scaled down between variants, plus a timing's noise. The signal's
 * variance, a factor on every length and the share between variants are
 * refitted on each shape's timings (mq_gp_fit); the values here are those
 * before 3 timings. The grids were chosen by replaying the stored spaces
 * of the H100, H200 and both CPU hosts (docs/tuning.md). */
static const struct {
    double constant_var, signal_var, cross_variant, noise_var;
    double length[MQ_GP_DIM];
} gp_settings = {1.0, 0.5, 0.5, 0.0025, {1.0, 1.0, 1.0, 1.2, 1.0}};

void mq_gp_input_of(const mq_candidate *c, mq_gp_input *in)
{
    in->variant = (int)c->variant;
    in->x[0] = log2(c->p.tile_m > 0 ? c->p.tile_m : 1);
    in->x[1] = log2(c->p.tile_n > 0 ? c->p.tile_n : 1);
    in->x[2] = log2(c->p.tile_k > 0 ? c->p.tile_k : 1);
    in->x[3] = log2(1.0 + (c->p.num_threadgroups > 0 ? c->p.num_threadgroups : 0));
    in->x[4] = log2(c->p.split_k > 0 ? c->p.split_k : 1);
}

static double covariance(const mq_gp *g, const mq_gp_input *a, const mq_gp_input *b)
{
    double d2 = 0;
    for (int j = 0; j < MQ_GP_DIM; j++) {
        double d = (a->x[j] - b->x[j]) / (gp_settings.length[j] * g->length_scale);
        d2 += d * d;
    }
    double same = a->variant == b->variant ? 1.0 : g->cross_variant;
    return gp_settings.constant_var + g->signal_var * same * exp(-0.5 * d2);
}

int mq_gp_init(mq_gp *g, int cap)
{
    g->n = 0;
    g->cap = cap;
    g->signal_var = gp_settings.signal_var;
    g->length_scale = 1;
    g->cross_variant = gp_settings.cross_variant;
    g->in = malloc(sizeof *g->in * (size_t)cap);
    g->L = malloc(sizeof *g->L * (size_t)cap * (size_t)cap);
    g->alpha = malloc(sizeof *g->alpha * (size_t)cap);
    g->v = malloc(sizeof *g->v * (size_t)cap);
    if (g->in && g->L && g->alpha && g->v)
        return 0;
    mq_gp_free(g);
    return -1;
}

void mq_gp_free(mq_gp *g)
{
    free(g->in);
    free(g->L);
    free(g->alpha);
    free(g->v);
    g->in = NULL;
    g->L = g->alpha = g->v = NULL;
    g->n = g->cap = 0;
}

/* Condition on the observations with g's signal variance and length
 * scale: 0 and the log marginal likelihood in *lml, or -1. */
static int fit_one(mq_gp *g, const mq_gp_input *in, const double *resid, int n, double *lml)
{
    g->n = 0;
    if (n <= 0)
        return 0;
    if (n > g->cap)
        return -1;
    for (int i = 0; i < n; i++) {
        g->in[i] = in[i];
        for (int j = 0; j <= i; j++) {
            double k = covariance(g, &in[i], &in[j]) + (i == j ? gp_settings.noise_var : 0);
            g->L[(size_t)i * g->cap + j] = g->L[(size_t)j * g->cap + i] = k;
        }
    }
    gsl_matrix_view L = gsl_matrix_view_array_with_tda(g->L, (size_t)n, (size_t)n,
                                                       (size_t)g->cap);
    gsl_vector_const_view r = gsl_vector_const_view_array(resid, (size_t)n);
    gsl_vector_view a = gsl_vector_view_array(g->alpha, (size_t)n);
    gsl_error_handler_t *old = gsl_set_error_handler_off(); /* a failure is returned */
    int rc = gsl_linalg_cholesky_decomp1(&L.matrix) ||
             gsl_linalg_cholesky_solve(&L.matrix, &r.vector, &a.vector);
    gsl_set_error_handler(old);
    if (rc)
        return -1;
    g->n = n;
    double quad = 0, logdet = 0;
    for (int i = 0; i < n; i++) {
        quad += resid[i] * g->alpha[i];
        logdet += log(g->L[(size_t)i * g->cap + i]);
    }
    *lml = -0.5 * quad - logdet;
    return 0;
}

int mq_gp_fit(mq_gp *g, const mq_gp_input *in, const double *resid, int n)
{
    /* the signal's variance and length scale that explain the shape's
     * timings best (type-II maximum likelihood over a small grid: R&W
     * section 5.4), refitted on every new timing */
    static const double sv[] = {0.1, 0.5, 2.0}, ls[] = {1.0, 2.5, 5.0};
    static const double cv[] = {0.2, 0.5, 0.8};
    double best = -INFINITY, bsv = gp_settings.signal_var, bls = 1, bcv = gp_settings.cross_variant,
           lml;
    for (int a = 0; n >= 3 && a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++) {
                g->signal_var = sv[a];
                g->length_scale = ls[b];
                g->cross_variant = cv[c];
                if (fit_one(g, in, resid, n, &lml) == 0 && lml > best) {
                    best = lml;
                    bsv = sv[a];
                    bls = ls[b];
                    bcv = cv[c];
                }
            }
    g->signal_var = bsv;
    g->length_scale = bls;
    g->cross_variant = bcv;
    return fit_one(g, in, resid, n, &lml);
}

void mq_gp_predict(mq_gp *g, const mq_gp_input *in, double *mean, double *sd)
{
    double prior = gp_settings.constant_var + g->signal_var;
    if (!g->n) {
        *mean = 0;
        *sd = sqrt(prior);
        return;
    }
    double m = 0;
    for (int i = 0; i < g->n; i++) {
        g->v[i] = covariance(g, in, &g->in[i]);
        m += g->v[i] * g->alpha[i];
    }
    gsl_matrix_const_view L = gsl_matrix_const_view_array_with_tda(g->L, (size_t)g->n,
                                                                   (size_t)g->n, (size_t)g->cap);
    gsl_vector_view v = gsl_vector_view_array(g->v, (size_t)g->n);
    gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, &L.matrix, &v.vector);
    double var = prior;
    for (int i = 0; i < g->n; i++)
        var -= g->v[i] * g->v[i];
    *mean = m;
    *sd = sqrt(var > 1e-12 ? var : 1e-12);
}

double mq_gp_expected_improvement(double best, double mean, double sd)
{
    double z = (best - mean) / sd;
    double cdf = 0.5 * erfc(-z / sqrt(2.0));
    double pdf = exp(-0.5 * z * z) / sqrt(2.0 * M_PI);
    return (best - mean) * cdf + sd * pdf;
}
