/* table_write.h - building a dispatch table from per-shape choices (M
 * ranges merged, a default row per format) and writing it atomically as
 * CSV and as a C header that compiles the table into the runtime. */
#ifndef MQ_TABLE_WRITE_H
#define MQ_TABLE_WRITE_H

#include <stddef.h>

#include "baselines.h"
#include "cost_model.h"
#include "mq.h"

typedef struct {
    mq_problem p;                     /* the shape chosen for */
    mq_candidate c;
    double expected_s;                /* measured median or predicted time */
    int measured;                     /* 1 measured, 0 predicted */
    double speedup[MQ_BASE_COUNT];    /* over each baseline; 0 when n/a */
} mq_choice;

typedef struct {
    mq_table_row row;
    int measured;
    double speedup[MQ_BASE_COUNT];
} mq_table_entry;

/* Rows from choices: per (format, group, N, K), M sorted, each M covering
 * (previous M, M] (the first from 1, the last to 2^30), consecutive equal
 * candidates merged; plus per (format, group) a default row (N = K = 0):
 * the candidate chosen most often. Returns the count or -1. */
int mq_table_build(const mq_choice *ch, int n, mq_table_entry **out);

/* The cost model a table carries (mq_table_set_model): the chip's figures
 * and the model's non-zero coefficients as parameters whose names are
 * static strings. Returns the count (at most MQ_TABLE_MODEL_MAX). */
#define MQ_TABLE_MODEL_MAX (MQ_CHIP_NFIELDS + MQ_MODEL_NTERM + MQ_MODEL_MAXKERNEL)
int mq_table_model_params(const double fig[MQ_CHIP_NFIELDS], const mq_model *m,
                          mq_table_param out[MQ_TABLE_MODEL_MAX]);

/* Write atomically (temporary name, then rename): the CSV with its
 * "# mq dispatch table: schema=.. chip=.. backend=.. source=.. tool=.. rev=..
 * kernels=.. date=.." line (kernels: the kernel build the picks were measured
 * or verified on, mq_kernel_build() of that build) and its "# cost-model: KIND NAME VARIANT VALUE" lines, and
 * the C header (rows and model). fig and m may be NULL: no model. */
int mq_table_write_csv(const char *path, const char *chip, const char *backend,
                       const char *source, const char *kernel_build, const mq_table_entry *e,
                       int n, const double *fig, const mq_model *m, char *err, size_t errlen);
int mq_table_write_header(const char *path, const char *chip, const char *source,
                          const char *kernel_build, const mq_table_entry *e, int n,
                          const double *fig, const mq_model *m, char *err, size_t errlen);

#endif
