/* numparse.c - see numparse.h. strtol/strtod with every failure mode they
 * report (no digits, trailing text, ERANGE) plus range and finiteness. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numparse.h"

#define WHY(...) (why ? (void)snprintf(why, whylen, __VA_ARGS__) : (void)0)

/* The text as quoted in a message: at most 40 characters, so that a long
 * field cannot push the file and line out of an error line. */
static const char *quoted(const char *s, char *buf, size_t n)
{
    size_t len = strlen(s);
    if (len < 41)
        return s;
    snprintf(buf, n, "%.37s...", s);
    return buf;
}

/* 0 when strto* consumed all of s (and s did not start with a blank, which
 * strto* would skip); else -1 with "'S' is not WHAT". */
static int whole(const char *s, const char *end, const char *what, char *why, size_t whylen)
{
    char q[48];
    if (!s || !*s || isspace((unsigned char)*s) || end == s || *end) {
        WHY("'%s' is not %s", s ? quoted(s, q, sizeof q) : "", what);
        return -1;
    }
    return 0;
}

int mq_parse_long(const char *s, long lo, long hi, long *out, char *why, size_t whylen)
{
    char q[48], *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (whole(s, end, "an integer", why, whylen))
        return -1;
    if (errno == ERANGE || v < lo || v > hi) {
        WHY("'%s' is out of range (%ld to %ld)", quoted(s, q, sizeof q), lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int mq_parse_int(const char *s, int lo, int hi, int *out, char *why, size_t whylen)
{
    long v;
    if (mq_parse_long(s, lo, hi, &v, why, whylen))
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_real(const char *s, double lo, double hi, int nan_ok, double *out, char *why,
                      size_t whylen)
{
    char q[48], *end = NULL;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (whole(s, end, "a number", why, whylen))
        return -1;
    if (isnan(v) && nan_ok) {
        *out = v;
        return 0;
    }
    if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1)) {
        WHY("'%s' is not a finite number", quoted(s, q, sizeof q));
        return -1;
    }
    if (!(v >= lo && v <= hi)) {
        WHY("'%s' is out of range (%g to %g)", quoted(s, q, sizeof q), lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int mq_parse_double(const char *s, double lo, double hi, double *out, char *why, size_t whylen)
{
    return parse_real(s, lo, hi, 0, out, why, whylen);
}

int mq_parse_double_or_nan(const char *s, double lo, double hi, double *out, char *why,
                           size_t whylen)
{
    return parse_real(s, lo, hi, 1, out, why, whylen);
}

int mq_parse_dims(const char *s, int n, int lo, int hi, int *out, char *why, size_t whylen)
{
    char buf[128], q[48];
    if (!s || strlen(s) >= sizeof buf) {
        WHY("'%s' is too long", s ? quoted(s, q, sizeof q) : "");
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", s);
    char *p = buf;
    for (int i = 0; i < n; i++) {
        char *x = i + 1 < n ? strchr(p, 'x') : NULL;
        if (i + 1 < n && !x) {
            WHY("'%s' has %d number%s, expected %d joined by 'x'", s, i + 1, i ? "s" : "", n);
            return -1;
        }
        if (x)
            *x = '\0';
        char part[128];
        if (mq_parse_int(p, lo, hi, &out[i], part, sizeof part)) {
            WHY("in '%s': %s", s, part);
            return -1;
        }
        p = x ? x + 1 : p;
    }
    return 0;
}
