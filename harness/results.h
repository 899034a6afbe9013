/* results.h - the results store: a CSV file (libcsv), one row per (chip,
 * backend, problem, candidate), each row carrying the schema version, the
 * tool's version and git revision, the host, the date and the status, the
 * statistics and the raw per-repetition samples. Rows are appended with one
 * write(2) each as they are measured, so a run killed at any moment loses at
 * most the candidate in flight; --resume skips what the same build already
 * measured on the same host. */
#ifndef MQ_RESULTS_H
#define MQ_RESULTS_H

#include <stddef.h>

#include "mq.h"
#include "stats.h"

#define MQ_RESULTS_SCHEMA 1

typedef struct {
    int schema;
    char tool_version[16], git_rev[48], host[64], date[32];
    char chip[32], backend[16];
    mq_problem p;
    mq_candidate c;
    char status[16]; /* ok, wrong, error, illegal */
    char error[256];
    mq_stats st;
    double gflops, weight_gbs;
    double *samples;
    int nsamples;
} mq_result;

typedef struct {
    mq_result *r;
    int n;
} mq_results;

/* Read and validate a results file: a newer schema, a truncated last line,
 * a malformed row or a bad value is an error naming the file and line. */
int mq_results_load(const char *path, mq_results *out, char *err, size_t errlen);
void mq_results_free(mq_results *rs);

typedef struct {
    int fd;
} mq_results_writer;

/* Open for appending; a new file gets its header (written to a temporary
 * name, then renamed). An existing file must load cleanly first. */
int mq_results_open(const char *path, mq_results_writer *w, char *err, size_t errlen);
int mq_results_append(mq_results_writer *w, const mq_result *r, char *err, size_t errlen);
void mq_results_close(mq_results_writer *w);

/* Same (chip, backend, problem, candidate). */
int mq_result_same_key(const mq_result *a, const mq_result *b);
/* Fill the build and host fields and the date of a new result. */
void mq_result_stamp(mq_result *r);
/* A row of rs with r's key measured by this build on this host, or NULL. */
const mq_result *mq_results_find_own(const mq_results *rs, const mq_result *key);
/* The fastest 'ok' row for a problem on a chip and backend (never a wrong
 * one), or NULL. */
const mq_result *mq_results_best(const mq_results *rs, const char *chip, const char *backend,
                                 const mq_problem *p);

#endif
