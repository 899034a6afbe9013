/* check.h - the test suite's tiny assertion layer: each CHECK prints what was
 * expected when it fails; check_done() prints "<suite>: N passed, N failed"
 * (", N skipped" after it when a part was left out: check_skip) and returns
 * the exit status. */
#ifndef MQ_CHECK_H
#define MQ_CHECK_H

#include <stdio.h>

extern int check_passed, check_failed, check_skipped;

void check_report(int ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int check_done(const char *suite);
/* A part left out on this machine or in this build: prints "skipped on
 * WHERE: WHY" on stdout (scripts/run-tests.sh shows these lines) and counts
 * one skipped. */
void check_skip(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* CHECK(cond, "expected ..., got ...", args) */
#define CHECK(cond, ...) check_report(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#endif
