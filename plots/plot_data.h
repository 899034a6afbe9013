/* plot_data.h - the data behind each plot, extracted from results files
 * (and a fitted model) into plain whitespace-separated blocks that the
 * gnuplot scripts in plots/ read with `index`. Kept apart from drawing so
 * that what a picture shows can be tested without gnuplot. */
#ifndef MQ_PLOT_DATA_H
#define MQ_PLOT_DATA_H

#include <stddef.h>
#include <stdio.h>

#include "chips.h"
#include "model.h"
#include "results.h"

typedef struct {
    mq_chip chip;
    const mq_model *model; /* NULL: no model curve */
    const mq_result **rows; /* the chip's 'ok' rows (borrowed) */
    int nrows;
} mq_plot_src;

/* A blank-line-separated series per value of split_k (occupancy) or of M
 * (split-K); labels gets the series' names separated by spaces. */
typedef struct {
    int nseries;
    char labels[256];
    int measured_points, model_points;
} mq_plot_series_info;

/* Latency against threadgroups per core for one problem: per split_k, two
 * blocks (index 2i: the best measured latency at each occupancy, "x ms";
 * index 2i+1: the model's best prediction over the whole candidate space at
 * each occupancy). -1 and a message when there is nothing to draw. */
int mq_plot_occupancy_data(const mq_plot_src *s, const mq_problem *p, FILE *f,
                           mq_plot_series_info *info, char *err, size_t errlen);

/* Latency against split_k for the small-M problems (M <= max_m) of one
 * N x K: per M, two blocks as above, x being split_k. */
int mq_plot_splitk_data(const mq_plot_src *s, mq_format fmt, int N, int K, int group, int max_m,
                        FILE *f, mq_plot_series_info *info, char *err, size_t errlen);

/* Roofline points, "intensity gflops gbs" (flop per byte of weights,
 * activations and output): block 0 every row, block 1 the fastest row of
 * each problem. Returns the number of problems. */
int mq_plot_roofline_data(const mq_plot_src *s, FILE *f, char *err, size_t errlen);

/* "predicted_ms measured_ms" of every row the model can describe, one block
 * per format present (labels as above); the model's MAPE and Spearman on
 * these rows come back too, and the range [lo, hi] (ms) of both columns so
 * that the two axes can share it. */
int mq_plot_model_data(const mq_plot_src *s, FILE *f, mq_plot_series_info *info, double *mape,
                       double *spearman, double *lo, double *hi, char *err, size_t errlen);

#endif
