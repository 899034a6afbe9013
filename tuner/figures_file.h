/* figures_file.h - reading a file of published figures: a CSV (kernels'
 * csvfile.h) whose header names its columns in any order, one figure per
 * row, each parsed by the caller into one element of an array. What
 * harness/public-figures.csv and harness/llm-figures.csv share. */
#ifndef MQ_FIGURES_FILE_H
#define MQ_FIGURES_FILE_H

#include <stddef.h>

#include "csvfile.h"

/* Parse row r into elem; col[j] is the field index of columns[j] (a row
 * with fewer fields reads "" there). 0, or -1 with "PATH:LINE: ..." in err. */
typedef int (*mq_figure_parser)(const char *path, const mq_csv_row *r, const int *col,
                                void *ctx, void *elem, char *err, size_t errlen);

/* The value of column j of row r ("" when the row is short). */
const char *mq_figure_field(const mq_csv_row *r, const int *col, int j);

/* Read path: at least one figure, every one of the ncol (<= 32) columns in
 * the header, every row parsed by parse into a fresh array of elem_size
 * elements (*out, *nout; the caller frees *out). 0, or -1 with
 * "PATH[:LINE]: problem" in err and nothing allocated. */
int mq_figures_read(const char *path, const char *const *columns, int ncol, size_t elem_size,
                    mq_figure_parser parse, void *ctx, void **out, int *nout, char *err,
                    size_t errlen);

#endif
