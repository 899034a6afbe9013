/* moe_results.h - moe-bench's results file, written and read in one place so
 * that what moe-bench appends is exactly what its readers (plot moe, tune
 * --moe-results, moe-bench itself before it appends) accept:
 *  - one header line of schema 3 (32 columns; schema 1, the first 28, and
 *    schema 2, the first 31, are still read), then one row per
 *    measurement, appended whole;
 *  - every text field CSV-quoted (libcsv's csv_write), with a backslash, a
 *    newline and a carriage return written as \\, \n and \r, because the
 *    project's CSV reader takes one physical line per row (a routing path
 *    may hold any byte but NUL);
 *  - every number finite and in range (worst_of_bound may be "nan" in a
 *    wrong or error row: an output that was not a number; a ratio above
 *    1e300, infinity included, is written as 1e300). */
#ifndef MQ_MOE_RESULTS_H
#define MQ_MOE_RESULTS_H

#include <stddef.h>

#include "csvfile.h"
#include "mq.h"

#define MQ_MOE_RESULTS_SCHEMA 3

/* One row. Read: the strings point into the set's table (decoded), schema
 * 1 rows get backend "cpu", device "" and read_probe_gbs 0, rows of schema
 * 1 and 2 kernel_build "" (schema 3 added it: mq_kernel_build(), the
 * kernels the row measured). Written: the
 * caller fills every field (schema is always MQ_MOE_RESULTS_SCHEMA). */
typedef struct {
    int line; /* read: its line in the file */
    int schema;
    const char *tool_version, *git_rev, *host, *date, *model;
    mq_format format;
    int tokens, experts, top_k, hidden, inter, group;
    const char *routing;
    int route_max_tokens;
    double route_mean_tokens;
    int route_touched, threads;
    int fused; /* path: fused (1) or unfused (0) */
    const char *candidate;
    const char *status; /* ok, wrong, error or verified */
    const char *error;
    double median_s, p10_s, p90_s;
    int reps;
    double touched_gbs, worst_of_bound;
    const char *backend, *device;
    double read_probe_gbs;
    const char *kernel_build;
} mq_moe_result;

typedef struct {
    mq_moe_result *r;
    int n;
    int schema;                  /* the file's (1, 2 or 3) */
    int torn_line;               /* a torn last line dropped (a write cut short), or 0 */
    size_t torn_bytes;
    mq_csv_table t;              /* the text the strings point into */
} mq_moe_results;

/* Read a moe-bench results file whole: its header must be schema 1's,
 * 2's or 3's, every row must have the header's field count and readable values.
 * 0, or -1 with one line "PATH:LINE: COLUMN: problem" (or "PATH: problem")
 * and *out empty. */
int mq_moe_results_load(const char *path, mq_moe_results *out, char *err, size_t errlen);
void mq_moe_results_free(mq_moe_results *rs);

/* Open path for appending rows as its only writer (mq_append_open: no link
 * followed, a second writer refused): a new or empty file gets the header,
 * an existing one must load (schema 3) and loses a torn last row. The
 * descriptor, or -1 with a message naming the file, and nothing created. */
int mq_moe_results_open(const char *path, char *err, size_t errlen);

/* Append r as one row, whole or not at all. 0, or -1 with a message. */
int mq_moe_results_append(int fd, const char *path, const mq_moe_result *r, char *err,
                          size_t errlen);

#endif
