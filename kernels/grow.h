/* grow.h - arrays and strings that grow as they are filled: the one place
 * that picks the next capacity (doubling) and keeps the old block and its
 * capacity intact when realloc fails, so callers only check for -1. */
#ifndef MQ_GROW_H
#define MQ_GROW_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Make the array *arrp (a T **, passed as void *), of capacity *cap elements
 * of elem bytes, hold at least need: the capacity doubles, from first. 0, or
 * -1 when out of memory (or the count would overflow) with *arrp and *cap as
 * they were. */
int mq_grow(void *arrp, int *cap, int need, size_t elem, int first);

/* A NUL-terminated string built by appending. s is NULL until the first
 * append; after a failed allocation oom is set and later appends do nothing,
 * so a builder checks oom once, at the end. The caller frees s. */
typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} mq_strbuf;

/* Each: 0, or -1 with oom set (then and after). reserve makes room for n
 * more bytes and the NUL after them. */
int mq_sb_reserve(mq_strbuf *b, size_t n);
int mq_sb_add(mq_strbuf *b, const char *t, size_t n);
int mq_sb_puts(mq_strbuf *b, const char *t);
int mq_sb_printf(mq_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append the rest of f, read in large blocks straight into the string (s is
 * allocated even for an empty file): 0, or -1 on a read error (ferror(f)) or
 * when out of memory (oom). */
int mq_sb_read(mq_strbuf *b, FILE *f);

#endif
