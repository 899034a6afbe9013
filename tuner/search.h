/* search.h - the tuner's search over one problem's candidates: the legal
 * candidates with their work features and the baselines; timing one
 * candidate (or taking the row an earlier run of this build stored, for
 * --resume, or its stored time for --replay), appended to the results store
 * as it is measured; the guided search (expected improvement on the cost
 * model's prediction and a Gaussian process on this shape's timings); and
 * fitting a predicted chip's model on its stored measurements. */
#ifndef MQ_SEARCH_H
#define MQ_SEARCH_H

#include <stddef.h>

#include "baselines.h"
#include "measure.h"
#include "model.h"
#include "results.h"
#include "work_features.h"

typedef struct {
    unsigned formats;  /* bit (1u << mq_format) per format */
    int group;
    int evals;         /* guided: candidates timed per shape */
    int exhaustive, resume, quiet;
    mq_measure_opts mo;
    const char *moe_results; /* moe-bench results whose best fused rows join the table */
    int keep_model;          /* the table carries the given model (--from-results --model),
                                not a fit on the run's rows */
} mq_tune_opts;

/* The model's rows: features and measured seconds, across all shapes. */
typedef struct {
    mq_features *f;
    double *t;
    int n, cap;
} mq_rowset;

typedef struct {
    mq_candidate c;
    mq_features f;
    double time;  /* measured median (ok) or predicted, < 0 when not measured / failed */
    int measured;
} mq_cand;

typedef struct {
    const mq_tune_opts *o;
    const mq_chip *chip;
    const mq_limits *lim;   /* the chip's limits, derived once (harness/target.c) */
    mq_backend *be;
    mq_bench_problem bp;
    mq_results own;         /* rows of earlier runs (--resume) */
    mq_results_writer w;
    mq_rowset rows;
    mq_model *guide;        /* the guided search's model, refitted warm (heap: large) */
    int guide_fitted;
    int guide_rows;         /* the rows the guide was last fitted on */
    const mq_model *prior;  /* the default coefficients: the guide until enough rows fit */
    int timed, reused;
    double kernel_s;
    int failed;             /* a row could not be stored: the run stops */
    const mq_results *from; /* --from-results: the picks come from these rows */
    const char *from_backend; /* and the backend that measured them */
    const char *from_kernel_build; /* and their kernel build ("": rows that do not say) */
    /* --replay (replay.h): a candidate's "measurement" is its stored time,
     * replay_t[its index in replay_cs] (< 0: no ok row), and each goes to
     * trace[ntrace++] (room for the budget) in the order the search asks */
    const mq_cand *replay_cs;
    const double *replay_t;
    double *trace;
    int ntrace;
} mq_tuner;

/* Add one measured row for the model fit: 0, or -1 when out of memory. */
int mq_rows_add(mq_rowset *r, const mq_features *f, double t);
/* mq_rows_add into T's rows; out of memory is said on stderr and stops the
 * run (T->failed), -1. */
int mq_tune_keep_row(mq_tuner *T, const mq_features *f, double t);
/* Time one candidate (or take this build's earlier row); -1 when not ok. */
double mq_tune_measure(mq_tuner *T, const mq_problem *p, mq_cand *c);
/* Index of a candidate in the list, or -1. */
int mq_tune_find(const mq_cand *cs, int n, const mq_candidate *c);
/* The legal candidates of a problem with their features, plus the
 * baselines (added when outside the grid); base[b] is each baseline's index
 * (-1 when the rule does not serve the format). NULL on out of memory. */
mq_cand *mq_tune_candidates(const mq_problem *p, const mq_chip *chip, int *n_out, int *base);
/* The candidates of a problem that rows of rs measured on chip and
 * backend, each with its fastest ok median as its time (-1 when none is
 * ok) and marked measured; base[b] is each baseline's index, -1 when the
 * rule does not serve the format or the rows lack its pick. NULL on out of
 * memory. */
mq_cand *mq_tune_candidates_from_rows(const mq_problem *p, const mq_chip *chip,
                                      const mq_results *rs, const char *backend, int *n_out,
                                      int *base);
/* Guided search over cs until o->evals are timed (or T->failed). The
 * rules' picks are candidates like any other (tune times the ones it did
 * not reach after it). */
void mq_tune_search_guided(mq_tuner *T, const mq_problem *p, mq_cand *cs, int n);
/* Fit the model on a results file of rows measured on a backend that is the
 * chip itself (any backend but the CPU model), e.g. copied from a Mac's
 * bench run. Returns the rows fitted (0: no such file or too few rows, pred
 * untouched) or -1 on a broken file. */
int mq_tune_stored_model(const char *path, const mq_chip *chip, mq_model *pred, char *err,
                         size_t errlen);

#endif
