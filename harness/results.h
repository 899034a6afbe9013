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

/* Schema 3 adds a last column, kernel_build: the kernels the row measured
 * (mq_kernel_build(); empty in rows of schema 1 and 2). Schema 2 added
 * idle_s: the median device time of one launch
 * on an idle device, beside a backend's queued figure (median_s); empty where
 * not measured. Schema 1 files (no idle_s) are still read, and rows appended
 * to one are written in its width. */
#define MQ_RESULTS_SCHEMA 3

typedef struct {
    int schema;
    char tool_version[16], git_rev[48], host[64], date[32];
    char chip[32], backend[16];
    mq_problem p;
    mq_candidate c;
    char status[16]; /* ok, verified (not timed), wrong, error, illegal */
    char error[256];
    mq_stats st;
    double gflops, weight_gbs;
    double *samples;
    int nsamples;
    double idle_s; /* one launch on an idle device, median (0: not measured) */
    char kernel_build[32]; /* the kernels measured ("": a row of schema 1 or 2) */
} mq_result;

typedef struct {
    mq_result *r;
    int n;
    int torn_line;     /* a torn last line that was dropped (0: none) */
    size_t torn_bytes;
    const mq_result **by_key; /* mq_results_index: the rows in key order, else NULL */
    int schema;        /* the file's width: 1 (no idle_s), 2 (no kernel_build) or 3 */
} mq_results;

/* The most samples a row may carry. */
#define MQ_RESULTS_MAX_SAMPLES 100000

/* Read and validate a results file: a newer schema, a malformed row or a
 * bad value (not finite, out of range, a string too long) is an error naming
 * the file, line, column and value. A torn last line (an append cut short by
 * a crash or a full disk) is dropped, every whole row before it kept, and
 * torn_line says so. */
int mq_results_load(const char *path, mq_results *out, char *err, size_t errlen);
/* "PATH: kept N rows; dropped its torn last line L (B bytes ...)" into buf
 * and 1 when rs dropped a torn line, else 0. */
int mq_results_torn_note(const mq_results *rs, const char *path, char *buf, size_t n);
void mq_results_free(mq_results *rs);

typedef struct {
    int fd;
    char path[4096];
    int kept_rows;  /* rows already in the file */
    long cut_bytes; /* a torn last line cut off on opening (0: none) */
    int created;    /* this writer made the file */
    int appended;   /* rows appended through it */
    int schema;     /* the file's: its rows are written in that width */
} mq_results_writer;

/* What opening path for appending would refuse, checked without creating
 * or changing anything (a link, not a regular file, a file that does not
 * load): 0 (absent or good) or -1 with the message mq_results_open would
 * give. Tools call it before they make anything else. */
int mq_results_precheck(const char *path, char *err, size_t errlen);
/* Open for appending, as its only writer (atomic_file.h's mq_append_open:
 * never through a link, locked); a new or empty file gets its header. An
 * existing file must load first; a torn last line is cut off (cut_bytes)
 * so the next row starts on a line of its own. Appending writes each row
 * whole or not at all (atomic_file.h). */
int mq_results_open(const char *path, mq_results_writer *w, char *err, size_t errlen);
/* Give up on a writer before its first row: a file it created goes (under
 * its lock), any other is closed as it is. */
void mq_results_abandon(mq_results_writer *w);
/* A note on what opening did to the file (a torn line cut off) into buf and
 * 1, or 0 when there is nothing to say. */
int mq_results_writer_note(const mq_results_writer *w, char *buf, size_t n);
int mq_results_append(mq_results_writer *w, const mq_result *r, char *err, size_t errlen);
void mq_results_close(mq_results_writer *w);
/* Write a whole results file of n rows (header first), to a temporary
 * name, then renamed over path (atomic_file.h). -1 with a message. */
int mq_results_write(const char *path, const mq_result *const *rows, int n, char *err,
                     size_t errlen);

/* Same (chip, backend, problem, candidate). */
int mq_result_same_key(const mq_result *a, const mq_result *b);
/* The order of keys: chip, backend, problem (format, M, N, K, group), then
 * candidate; 0 for the same key. */
int mq_result_key_cmp(const mq_result *a, const mq_result *b);
/* The same order up to the problem: 0 for rows of one chip, backend and
 * problem, whatever their candidates. */
int mq_result_problem_cmp(const mq_result *a, const mq_result *b);
/* Fill the build and host fields and the date of a new result. */
void mq_result_stamp(mq_result *r);
/* Sort an index of rs's rows by key, so that mq_results_find_own looks a
 * key up in log time rather than reading every row (a resumed sweep of
 * 100000 rows); -1 on out of memory (lookups then read every row). */
int mq_results_index(mq_results *rs);
/* A row of rs with r's key measured by this build on this host (the first
 * in the file), or NULL. */
const mq_result *mq_results_find_own(const mq_results *rs, const mq_result *key);
/* The fastest 'ok' row for a problem on a chip and backend (never a wrong
 * one), or NULL. */
const mq_result *mq_results_best(const mq_results *rs, const char *chip, const char *backend,
                                 const mq_problem *p);

#endif
