/* stale.h - saying when a table, a model or results rows describe other
 * kernels than this build's (mq_kernel_build()): their picks and
 * coefficients were measured on code that may since have become faster or
 * slower, so they may no longer be the best. A warning, or with --strict an
 * error, naming the file and both builds. */
#ifndef MQ_STALE_H
#define MQ_STALE_H

/* what (e.g. "results/h100/table.csv") was measured on kernel build
 * `build` ("": it does not say). 0 when it is this build's or only warned
 * about (on stderr, "TOOL: warning: ..."); -1 when strict and it is not
 * this build's ("TOOL: ..." said on stderr). */
int mq_stale_check(const char *tool, const char *what, const char *build, int strict);

#endif
