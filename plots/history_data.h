/* history_data.h - the data of the nightly history plot, extracted from a
 * directory of nightly runs into whitespace-separated blocks for
 * plots/history.gp (kept apart from drawing so it is tested without
 * gnuplot). */
#ifndef MQ_HISTORY_DATA_H
#define MQ_HISTORY_DATA_H

#include <stdio.h>

#include "regress.h"

/* The nightly history: every run DIR/YYYY-MM-DD*.csv compared with
 * DIR/baseline.csv. lines: one block per benchmark, "date ratio" (new
 * median / baseline median); marks: "date ratio verdict label" of every
 * regressed (verdict 1), improved (2) or regressed-but-not-confirmed (3:
 * the night's confirmation pass, DIR/confirm/RUN.csv, did not repeat it)
 * point, the latest run's five worst regressions labelled; geo: "date
 * geomean regressed" (confirmed regressions where a pass ran). A night with
 * an A/B (DIR/ab/RUN, RUN the run's file name without .csv: compare --ab's
 * rounds) takes its verdicts from the A/B instead: regressed or improved
 * as the paired test says, a stored-baseline regression it did not see
 * drawn as unconfirmed (3). Only benchmarks whose
 * name contains filter (when not NULL). A benchmark measured twice in a run
 * (two layers of one shape) is two series, the second marked "(repeat 2)". */
typedef struct {
    int nbench, nruns, regressed_latest;
    char first[32], last[32];
} mq_plot_history_info;
int mq_plot_history_data(const char *dir, const char *filter, const mq_regress_opts *o,
                         FILE *lines, FILE *marks, FILE *geo, mq_plot_history_info *info,
                         char *err, size_t errlen);

#endif
