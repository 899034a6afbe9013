/* numparse.h - the one way this project reads a number from text (a field of
 * a file, a flag's value): the whole text must be the number, integers in
 * decimal with no fraction or exponent, reals finite, and each within the
 * range the caller states. On failure `why` gets the reason with the text
 * quoted ("'1e10' is not an integer"), for the caller to prefix with the
 * file, line and field or the flag. */
#ifndef MQ_NUMPARSE_H
#define MQ_NUMPARSE_H

#include <stddef.h>

/* 0, or -1 with the reason in why (why may be NULL). */
int mq_parse_long(const char *s, long lo, long hi, long *out, char *why, size_t whylen);
int mq_parse_int(const char *s, int lo, int hi, int *out, char *why, size_t whylen);
/* A finite real within [lo, hi] ("nan", "inf" and overflow refused). */
int mq_parse_double(const char *s, double lo, double hi, double *out, char *why,
                    size_t whylen);
/* A real that may also be "nan" (a statistic that was not computed). */
int mq_parse_double_or_nan(const char *s, double lo, double hi, double *out, char *why,
                           size_t whylen);
/* "AxBxC..." with exactly n integers in [lo, hi] (shapes MxNxK, sizes WxH). */
int mq_parse_dims(const char *s, int n, int lo, int hi, int *out, char *why, size_t whylen);

#endif
