/* check.c - counters and failure messages for check.h. */
#include <stdarg.h>

#include "check.h"

int check_passed, check_failed, check_skipped;

void check_report(int ok, const char *file, int line, const char *fmt, ...)
{
    if (ok) {
        check_passed++;
        return;
    }
    check_failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void check_skip(const char *where, const char *fmt, ...)
{
    check_skipped++;
    va_list ap;
    va_start(ap, fmt);
    printf("skipped on %s: ", where);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

int check_done(const char *suite)
{
    if (check_skipped)
        printf("%s: %d passed, %d failed, %d skipped\n", suite, check_passed, check_failed,
               check_skipped);
    else
        printf("%s: %d passed, %d failed\n", suite, check_passed, check_failed);
    return check_failed ? 1 : 0;
}
