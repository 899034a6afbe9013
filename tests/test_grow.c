/* test_grow.c - the growing arrays and strings every loader and code
 * generator builds on: capacities double from the first size and reach any
 * count asked for; a request that cannot be met leaves the array and its
 * capacity as they were; strings take printf output of any length (not cut
 * at a buffer's size), whole files read in blocks, and stay NUL-terminated;
 * the CSV row walk names the file, the line and the problem. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "csvfile.h"
#include "grow.h"

typedef struct {
    int sum, rows;
} row_sum;

static int sum_row(char **f, void *ctx, char *why, size_t n)
{
    row_sum *s = ctx;
    int v = atoi(f[1]);
    if (v < 0)
        return snprintf(why, n, "value '%s' is negative", f[1]), -1;
    s->sum += v;
    s->rows++;
    return 0;
}

int main(void)
{
    /* ---- arrays */
    int *a = NULL, cap = 0;
    CHECK(mq_grow(&a, &cap, 1, sizeof *a, 16) == 0 && a && cap == 16,
          "the first element gets the first capacity, 16 (got cap %d)", cap);
    for (int i = 0; i < 16; i++)
        a[i] = i;
    CHECK(mq_grow(&a, &cap, 16, sizeof *a, 16) == 0 && cap == 16,
          "room already there: capacity unchanged at 16 (got %d)", cap);
    CHECK(mq_grow(&a, &cap, 17, sizeof *a, 16) == 0 && cap == 32 && a[15] == 15,
          "one past it doubles to 32 and keeps the elements (got cap %d, a[15] %d)", cap,
          a[15]);
    CHECK(mq_grow(&a, &cap, 1000, sizeof *a, 16) == 0 && cap == 1024 && a[7] == 7,
          "a count far past it: the first doubling that holds it, 1024 (got %d)", cap);
    int *before = a, cap_before = cap;
    CHECK(mq_grow(&a, &cap, 2000, SIZE_MAX / 1024, 16) == -1 && a == before &&
              cap == cap_before,
          "a size past SIZE_MAX: -1 with the array and capacity untouched (got cap %d)", cap);
    CHECK(mq_grow(&a, &cap, -1, sizeof *a, 16) == 0 && cap == cap_before,
          "a negative count needs no room (cap %d)", cap);
    free(a);
    double *d = NULL;
    int dcap = 0;
    CHECK(mq_grow(&d, &dcap, 5, sizeof *d, 0) == 0 && dcap == 8,
          "no first size given: from 1, doubling to 8 for 5 (got %d)", dcap);
    free(d);

    /* ---- strings */
    mq_strbuf b = {0};
    CHECK(mq_sb_add(&b, "", 0) == 0 && b.s && b.s[0] == 0 && b.len == 0,
          "an empty append still makes an empty string");
    mq_sb_puts(&b, "abc");
    mq_sb_add(&b, "defXYZ", 3);
    mq_sb_printf(&b, "-%d-", 42);
    CHECK(!strcmp(b.s, "abcdef-42-") && b.len == 10, "appends in order: 'abcdef-42-' (got '%s')",
          b.s);
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    mq_sb_printf(&b, "<%s>", big);
    CHECK(b.len == 10 + 5001 && b.s[b.len - 1] == '>' && b.s[b.len] == 0 && !b.oom,
          "a 5001-byte printf is appended whole, not cut at a buffer (len %zu, expected 5011)",
          b.len);
    size_t len = b.len;
    CHECK(mq_sb_reserve(&b, SIZE_MAX - 8) == -1 && b.oom && b.len == len,
          "an impossible reserve sets oom and keeps the text");
    CHECK(mq_sb_puts(&b, "more") == -1 && b.len == len,
          "after oom, appends do nothing and say -1 (len %zu)", b.len);
    free(b.s);

    /* ---- files */
    char path[] = "/tmp/mq-grow-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "a temporary file");
    FILE *f = fdopen(fd, "w+b");
    mq_strbuf r = {0};
    CHECK(mq_sb_read(&r, f) == 0 && r.s && r.len == 0 && r.s[0] == 0,
          "an empty file reads as an empty string (len %zu)", r.len);
    free(r.s);
    for (int i = 0; i < 20000; i++)
        fprintf(f, "line %05d\n", i);
    rewind(f);
    r = (mq_strbuf){0};
    CHECK(mq_sb_read(&r, f) == 0 && r.len == 20000 * 11 && strlen(r.s) == r.len &&
              !strncmp(r.s + 19999 * 11, "line 19999\n", 11),
          "a 220000-byte file (several blocks) reads whole (len %zu)", r.len);
    free(r.s);
    fclose(f);

    /* ---- the CSV row walk */
    f = fopen(path, "w");
    fputs("name,value\n# a comment\na,1\nb,2\nc,-3\n", f);
    fclose(f);
    mq_csv_table t;
    char err[512];
    CHECK(mq_csv_read(path, &t, err, sizeof err) == 0 && t.nrows == 4,
          "the table reads: a header and 3 rows (err '%s')", err);
    row_sum s = {0};
    CHECK(mq_csv_parse_rows(&t, path, 2, sum_row, &s, err, sizeof err) == -1 &&
              strstr(err, ":5: value '-3' is negative") && strstr(err, path) && s.rows == 2 &&
              s.sum == 3,
          "the walk stops at line 5 naming the file and why, after 2 rows (err '%s', %d rows)",
          err, s.rows);
    s = (row_sum){0};
    CHECK(mq_csv_parse_rows(&t, path, 3, sum_row, &s, err, sizeof err) == -1 &&
              strstr(err, ":3: 2 fields, expected 3") && s.rows == 0,
          "a row of the wrong width is refused before its parser runs (err '%s')", err);
    mq_csv_free(&t);
    unlink(path);
    return check_done("grow");
}
