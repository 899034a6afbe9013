/* args.h - the one argument parser of every tool: a table of options, each
 * with its kind (a flag, text, an integer or a number in a range, or a
 * parser of its own), where its value goes and the words of its error. It
 * refuses an unknown option, a missing value and a bad value with one line
 * "TOOL: WHAT 'VALUE' (see --help)" and exit status 2. */
#ifndef MQ_ARGS_H
#define MQ_ARGS_H

#include <stddef.h>

typedef enum {
    MQ_ARG_FLAG,   /* sets *(int *)dst = 1; takes no value */
    MQ_ARG_STR,    /* *(const char **)dst = value */
    MQ_ARG_INT,    /* *(int *)dst, within [lo, hi] */
    MQ_ARG_DOUBLE, /* *(double *)dst, finite, within [lo, hi] */
    MQ_ARG_CUSTOM, /* parse(value, dst, err): 0, or -1 with the message in err */
} mq_arg_kind;

typedef struct {
    const char *name; /* "--chip" */
    mq_arg_kind kind;
    void *dst;
    double lo, hi;   /* MQ_ARG_INT, MQ_ARG_DOUBLE */
    const char *bad; /* "bad --budget": the message before the quoted value */
    /* MQ_ARG_CUSTOM: -1 and err filled (a whole message, or "" to use bad) */
    int (*parse)(const char *value, void *dst, char *err, size_t errlen);
} mq_arg;

/* Table rows by kind (designated, so unset fields are zero). */
#define MQ_OPT_FLAG(n, d) {.name = (n), .kind = MQ_ARG_FLAG, .dst = (d)}
#define MQ_OPT_STR(n, d) {.name = (n), .kind = MQ_ARG_STR, .dst = (d)}
#define MQ_OPT_INT(n, d, l, h, b)                                                              \
    {.name = (n), .kind = MQ_ARG_INT, .dst = (d), .lo = (l), .hi = (h), .bad = (b)}
#define MQ_OPT_DOUBLE(n, d, l, h, b)                                                           \
    {.name = (n), .kind = MQ_ARG_DOUBLE, .dst = (d), .lo = (l), .hi = (h), .bad = (b)}
#define MQ_OPT_CUSTOM(n, d, fn, b)                                                             \
    {.name = (n), .kind = MQ_ARG_CUSTOM, .dst = (d), .bad = (b), .parse = (fn)}

/* Parse argv[first..argc) against the table. Words that do not start with
 * "--" are positional: up to maxpos of them go to pos (npos counts them),
 * more are an error. Returns 0; 1 when --help or -h was given (the caller
 * prints its usage and exits 0); 2 after printing the one-line error. */
int mq_args_parse(const char *tool, int argc, char **argv, int first, const mq_arg *args,
                  int nargs, const char **pos, int maxpos, int *npos);

#endif
