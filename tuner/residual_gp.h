/* residual_gp.h - what the guided search believes about one shape's
 * untimed candidates: the cost model's prediction, corrected by a Gaussian
 * process on the log of measured / predicted time of the candidates timed
 * so far (Rasmussen and Williams, "Gaussian Processes for Machine
 * Learning", 2006, ch. 2: the posterior mean and variance, eq. 2.25-2.26).
 * A candidate's inputs are its tunables on a log2 scale; two candidates of
 * one variant are more alike than two of different variants, and all share
 * an unknown constant (the model's scale on this shape). The search asks
 * for the candidate with the largest expected improvement (Jones, Schonlau
 * and Welch, J. Global Optimization 13, 1998) of log time. */
#ifndef MQ_RESIDUAL_GP_H
#define MQ_RESIDUAL_GP_H

#include "mq.h"

#define MQ_GP_DIM 5

typedef struct {
    double x[MQ_GP_DIM];
    int variant;
} mq_gp_input;

typedef struct {
    int n, cap;
    mq_gp_input *in;
    double *L;     /* the Cholesky factor of the n x n covariance (cap x cap storage) */
    double *alpha; /* covariance^-1 residuals */
    double *v;     /* scratch, n */
    double signal_var, length_scale, cross_variant; /* as fitted on the observations */
} mq_gp;

/* A candidate's inputs: log2 of its tiles, threadgroups and split-K. */
void mq_gp_input_of(const mq_candidate *c, mq_gp_input *in);
/* Room for cap observations: 0, or -1 on out of memory. */
int mq_gp_init(mq_gp *g, int cap);
void mq_gp_free(mq_gp *g);
/* Condition on n <= cap observations (inputs, log residuals): 0, or -1
 * when the covariance is not positive definite (not expected: it has a
 * noise term). */
int mq_gp_fit(mq_gp *g, const mq_gp_input *in, const double *resid, int n);
/* The posterior mean and standard deviation of an input's log residual. */
void mq_gp_predict(mq_gp *g, const mq_gp_input *in, double *mean, double *sd);
/* Expected improvement below best of a normal (mean, sd) value. */
double mq_gp_expected_improvement(double best, double mean, double sd);

#endif
