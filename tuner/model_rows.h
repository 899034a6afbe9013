/* model_rows.h - the rows the model command works on: the timed rows of
 * results files measured on one chip, each with its features. Apart from
 * model_main.c because fit, eval and lookup (model_lookup.c) all read
 * them. */
#ifndef MQ_MODEL_ROWS_H
#define MQ_MODEL_ROWS_H

#include "chips.h"
#include "results.h"
#include "work_features.h"

/* The rows of the files measured on the chip, with their features. */
typedef struct {
    mq_features *f;
    double *t;
    mq_result *r; /* key fields only (samples dropped) */
    int n, cap;
} mq_model_rows;

/* Every row of the files that is ok, timed, of chip and has features on
 * it. 0, or 2 with one line on stderr (a file that does not load, or has
 * no such row; out of memory). Free with mq_model_rows_free (also after a
 * failure). */
int mq_model_rows_load(const char *const *files, int nfiles, const mq_chip *chip,
                       mq_model_rows *R);
void mq_model_rows_free(mq_model_rows *R);

/* Whether a and b are the same problem (format, M, N, K, group). */
int mq_model_same_problem(const mq_problem *a, const mq_problem *b);

/* The row of problem p measured with candidate c, or -1. */
int mq_model_rows_find(const mq_model_rows *R, const mq_problem *p, const mq_candidate *c);

#endif
