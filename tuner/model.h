/* model.h - cost models over candidate features, fitted with GSL on
 * relative error (times span microseconds to seconds):
 *   linear:   t = th0 + th1*D + th2*C + th3*M + th4*R + th5*W + th6*S + th7*P
 *   roofline: t = th0 + th1*D + max(th2*C, th3*M) + th4*R + th5*W + th6*S + th7*P
 * with D dispatches, C the ideal compute time of the busiest core, M the
 * ideal memory time, R the split-K traffic time, W the number of waves, S
 * and P the busiest core's K steps and packed-row pieces.
 * The linear fit is robust (bisquare); the roofline alternates robust
 * linear fits over the rows' compute- or memory-bound sides until no row
 * changes side, then is polished by nonlinear least squares (trust region). Each fit carries its quality on
 * held-out rows: MAPE and Spearman rank correlation. */
#ifndef MQ_MODEL_H
#define MQ_MODEL_H

#include <stddef.h>

#include "work_features.h"

#define MQ_MODEL_NPARAM 8

typedef enum { MQ_MODEL_LINEAR, MQ_MODEL_ROOFLINE } mq_model_kind;

typedef struct {
    mq_model_kind kind;
    double theta[MQ_MODEL_NPARAM];
    int n_fit, n_holdout;
    double mape;      /* mean |predicted - measured| / measured on held-out rows */
    double spearman;  /* rank correlation of predicted and measured, held out */
} mq_model;

const char *mq_model_kind_name(mq_model_kind k);
void mq_model_predictors(const mq_features *f, double x[MQ_MODEL_NPARAM]);
double mq_model_predict(const mq_model *m, const mq_features *f);

/* Fit on rows (features, measured seconds > 0). -1 and a message when the
 * rows are too few or the fit fails. */
int mq_model_fit(mq_model_kind kind, const mq_features *f, const double *t, int n,
                 mq_model *out, char *err, size_t errlen);

/* MAPE and Spearman of a model on rows. */
void mq_model_quality(const mq_model *m, const mq_features *f, const double *t, int n,
                      double *mape, double *spearman);

/* Fit on all rows but every k-th (k = round(1 / holdout)), then measure the
 * quality on the held-out ones and store it in out. */
int mq_model_fit_holdout(mq_model_kind kind, const mq_features *f, const double *t, int n,
                         double holdout, mq_model *out, char *err, size_t errlen);

#endif
