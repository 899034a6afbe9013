/* model.h - fitting the cost model (kernels/cost_model.h says what it is):
 * nonlinear least squares on relative error (GSL trust region; theta =
 * phi^2 keeps every term non-negative), alternating with the measured
 * kernels' factors (each kernel's geometric-mean ratio of measured to
 * predicted time above the floor). Quality is measured on held-out shapes:
 * MAPE and Spearman rank correlation. */
#ifndef MQ_MODEL_H
#define MQ_MODEL_H

#include <stddef.h>

#include "work_features.h"

/* Fit on rows (features, measured seconds > 0). -1 and a message when the
 * rows are too few or the fit fails. */
int mq_model_fit(const mq_features *f, const double *t, int n, mq_model *out, char *err,
                 size_t errlen);
/* The coefficients a chip never measured starts from (no kernel factors):
 * documented defaults on top of the floor, with the bandwidth and latency
 * terms fitted on published Apple figures (`model public
 * harness/public-figures.csv` prints the fit; a test keeps the two equal). */
void mq_model_defaults(mq_model *m);
/* The same with at most `rounds` rounds of coefficients then kernel
 * factors (mq_model_fit runs up to 6, stopping when they stop helping). */
int mq_model_fit_rounds(const mq_features *f, const double *t, int n, int rounds, mq_model *out,
                        char *err, size_t errlen);
/* One round (coefficients, then kernel factors) started from m's own
 * coefficients and factors, with a fifth of a cold fit's iterations: the
 * guided search's refit after every few timings, where a cold fit on all
 * the rows so far would cost more than the timings. */
int mq_model_refit(const mq_features *f, const double *t, int n, mq_model *m, char *err,
                   size_t errlen);

/* MAPE and Spearman of a model on rows. */
void mq_model_quality(const mq_model *m, const mq_features *f, const double *t, int n,
                      double *mape, double *spearman);

/* Which rows a held-out check keeps out of the fit: every k-th shape
 * (N, K) in order of first appearance (k = round(1 / holdout)) with all
 * its rows, the last shape when there are fewer than k, every k-th row
 * when there is only one shape. held[i] = 1 for a held-out row; -1 when
 * out of memory. */
int mq_model_holdout_rows(const mq_features *f, int n, double holdout, char *held);

/* Hold out the rows mq_model_holdout_rows picks, fit on the others, and
 * store the quality on the held-out ones in out. */
int mq_model_fit_holdout(const mq_features *f, const double *t, int n, double holdout,
                         mq_model *out, char *err, size_t errlen);

#endif
