/* model.h - the cost model: a candidate's time is its physical floor plus
 * fitted terms that can only add to it,
 *   t = floor + sum_j theta_j * x_j + sum_k theta_{k,v} * y_k,
 *   every theta >= 0, every x and y >= 0
 * with floor = max(unique bytes / bandwidth, useful flops / peak) at the
 * chip's own figures (tuner/work_features.h). The shared terms x: per
 * dispatch (launch), traffic and compute at the peaks (their
 * inefficiency), split-K traffic, waves, the weights dequantized per format
 * class, the K steps on a slot's critical path (latency), the SIMD-group
 * steps on the busiest core (its shared resources), the per-thread work on
 * the critical path, those two times the SIMD groups a barrier waits for,
 * the work units on the critical path and the accumulators each thread
 * stores for them. The last seven again per variant v (y): each
 * variant's code has its own speed per step; a variant never measured
 * gets the shared terms only. So no coefficients, fitted or read, can
 * predict below what the chip's bandwidth and peak allow. Fitted by
 * nonlinear least squares on relative error (GSL trust region; theta =
 * phi^2 keeps every term non-negative). Quality is measured on held-out
 * shapes: MAPE and Spearman rank correlation. */
#ifndef MQ_MODEL_H
#define MQ_MODEL_H

#include <stddef.h>

#include "work_features.h"

#define MQ_MODEL_NSHARED 15  /* shared terms */
#define MQ_MODEL_NVTERM 7    /* per-variant terms: the last three shared ones again */
#define MQ_MODEL_MAXVAR 32   /* variants (the registry's limit) */
#define MQ_MODEL_NTERM (MQ_MODEL_NSHARED + MQ_MODEL_NVTERM * MQ_MODEL_MAXVAR)

typedef struct {
    double theta[MQ_MODEL_NTERM]; /* shared, then variant-major per-variant */
    int n_fit, n_holdout;
    double mape;      /* mean |predicted - measured| / measured on held-out rows */
    double spearman;  /* rank correlation of predicted and measured, held out */
} mq_model;

/* A term's name as model.csv spells it and its unit: j < MQ_MODEL_NSHARED
 * a shared term, else per-variant term (j - NSHARED) % NVTERM of variant
 * (j - NSHARED) / NVTERM (the name is the shared one it repeats). */
const char *mq_model_term_name(int j);
const char *mq_model_term_unit(int j);
int mq_model_term_variant(int j); /* -1: shared */
void mq_model_terms(const mq_features *f, double x[MQ_MODEL_NTERM]);
/* floor + terms; negative coefficients count as 0 (a model never predicts
 * below the floor, whatever a file says). */
double mq_model_predict(const mq_model *m, const mq_features *f);

/* Fit on rows (features, measured seconds > 0). -1 and a message when the
 * rows are too few or the fit fails. */
int mq_model_fit(const mq_features *f, const double *t, int n, mq_model *out, char *err,
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
