/* cli.h - argument parsing shared by the command-line tools: numbers,
 * shapes, format lists and candidate specs, each refusing bad text. */
#ifndef MQ_CLI_H
#define MQ_CLI_H

#include <stddef.h>

#include "mq.h"
#include "suites.h"

/* Print "TOOL: MSG 'ARG' (see --help)" to stderr; returns 2 (bad usage). */
int mq_cli_fail(const char *tool, const char *msg, const char *arg);
/* 0 on success, -1 when s is not an integer/number within [lo, hi]. */
int mq_cli_int(const char *s, int lo, int hi, int *out);
int mq_cli_double(const char *s, double lo, double hi, double *out);
/* The largest M, N, K or tile a flag or file may name (results files use
 * the same bound): larger values are refused, never wrapped. */
#define MQ_CLI_MAX_DIM (1 << 24)

/* "MxNxK", each 1..MQ_CLI_MAX_DIM. */
int mq_cli_shape(const char *s, int *M, int *N, int *K);
/* "fp4,u4": sets bits (1u << format); -1 and the message on an unknown or
 * empty name ('' and ',' are errors, not "the default"). */
int mq_cli_formats(const char *s, unsigned *mask, char *err, size_t errlen);
/* "variant tm tn tk tg sk"; -1 and the message when malformed or unknown. */
int mq_cli_candidate(const char *s, mq_candidate *c, char *err, size_t errlen);

/* Repeatable flags (--shape, --candidate) append to a list over the
 * caller's array: mq_args' MQ_OPT_CUSTOM parsers with the list as dst. */
typedef struct {
    mq_shape *items;
    int n, cap;
} mq_shape_list;
typedef struct {
    mq_candidate *items;
    int n, cap;
} mq_candidate_list;
int mq_cli_add_shape(const char *v, void *list, char *err, size_t errlen);
int mq_cli_add_candidate(const char *v, void *list, char *err, size_t errlen);
/* "fp4,u4" into an unsigned mask, as an MQ_OPT_CUSTOM parser. */
int mq_cli_parse_formats(const char *v, void *mask, char *err, size_t errlen);

/* Create every directory on the way to path's last '/' (results/CHIP/x.csv
 * makes results/ and results/CHIP/). 0, or -1 with a message naming the
 * directory that could not be made. */
/* An output that is renamed into place (a manifest, a report, an image)
 * must not be a directory: 0, or -1 with "PATH: cannot write: it is a
 * directory", checked before anything is made. */
int mq_output_replaceable(const char *path, char *err, size_t errlen);
int mq_make_parent_dirs(const char *path, char *err, size_t errlen);

#endif
