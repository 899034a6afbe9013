/* run_compare.h - two results files (runs) side by side: every benchmark
 * measured ok in both, judged by regress.h, and the summary counts and
 * geometric mean that compare, the nightly report and the history plot all
 * show. */
#ifndef MQ_RUN_COMPARE_H
#define MQ_RUN_COMPARE_H

#include <stddef.h>
#include <stdio.h>

#include "regress.h"
#include "results.h"

typedef struct {
    const mq_result *b, *n; /* rows of the two runs (borrowed) */
    mq_comparison c;
} mq_run_pair;

typedef struct {
    mq_run_pair *pairs;
    int n;
    int counts[4];  /* indexed by mq_verdict */
    double geomean; /* of new/base over the judged (reliable) pairs; 1 when none */
} mq_run_comparison;

/* Pair every ok row of cur with the ok row of base with the same key (the
 * k-th repeat of a key with the k-th, or the last) and judge it. -1 on out
 * of memory. */
int mq_compare_runs(const mq_results *base, const mq_results *cur, const mq_regress_opts *o,
                    mq_run_comparison *out);
void mq_run_comparison_free(mq_run_comparison *rc);

/* A baseline from several runs: for every benchmark (key and occurrence)
 * of the first run that is ok in all of them, the row whose median is the
 * median of the runs' medians (the lower middle for an even count), so one
 * unusually fast or slow run does not set the bar. rows gets n_out borrowed
 * pointers (free() the array). -1 on out of memory. */
int mq_results_median_of(const mq_results *runs, int nruns, const mq_result ***rows, int *n_out);

/* A suite may measure one key twice (two layers of one shape): row i's
 * occurrence among the ok rows of its key before it (0: the first), and the
 * ok row of rs with r's key at occurrence k (NULL: none), so that the k-th
 * pairs with the k-th across runs. */
int mq_results_occurrence(const mq_results *rs, int i);
const mq_result *mq_results_kth_ok(const mq_results *rs, const mq_result *r, int k);

/* "chip backend format M=.. N=.. K=.. g=.. variant tm=.. ..." */
void mq_result_name(const mq_result *r, char *buf, size_t n);

/* The history file of a compare mode (kind "compare" or "compare --ab",
 * header its first line with the '\n'), opened for one more row with
 * mq_append_open (never through a link, a regular file, locked, created
 * when absent: *created) and refused when it has bytes but its first line
 * is not header (a results file, the other mode's history), before
 * anything is cut off or appended. A torn header (a crash during the first
 * row) is taken: the append cuts it off and writes it whole. The
 * descriptor, or -1 with a message naming the file. */
int mq_history_open(const char *path, const char *kind, const char *header, int *created,
                    char *err, size_t errlen);

/* Everything written to *f (from mq_atomic_open: temporary name tmp, for
 * path) flushed and on the disk, before any output is put in place: a
 * full disk is found here, while every old file is still as it was. On
 * failure *f is closed, its temporary file removed, and -1 comes back
 * with a message naming path and the OS error. */
int mq_output_settle(FILE **f, const char *tmp, const char *path, char *err, size_t errlen);

#endif
