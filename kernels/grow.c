/* grow.c - see grow.h. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

int mq_grow(void *arrp, int *cap, int need, size_t elem, int first)
{
    if (need <= *cap)
        return 0;
    if (need < 0 || elem == 0)
        return -1;
    long nc = *cap > 0 ? *cap : (first > 0 ? first : 1);
    while (nc < need)
        nc *= 2;
    if (nc > INT_MAX)
        nc = need;
    if ((size_t)nc > SIZE_MAX / elem)
        return -1;
    /* the caller's T * is read and written through memcpy: a T ** is not a
     * void ** (they may not alias), but every T * here has void *'s
     * representation */
    void *old;
    memcpy(&old, arrp, sizeof old);
    void *nb = realloc(old, (size_t)nc * elem);
    if (!nb)
        return -1;
    memcpy(arrp, &nb, sizeof nb);
    *cap = (int)nc;
    return 0;
}

int mq_sb_reserve(mq_strbuf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (n > SIZE_MAX / 2 - 256 - b->len) {
        b->oom = 1;
        return -1;
    }
    if (b->len + n + 1 <= b->cap)
        return 0;
    size_t nc = (b->len + n + 1) * 2 + 256;
    char *ns = realloc(b->s, nc);
    if (!ns) {
        b->oom = 1;
        return -1;
    }
    b->s = ns;
    b->cap = nc;
    return 0;
}

int mq_sb_add(mq_strbuf *b, const char *t, size_t n)
{
    if (mq_sb_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->s + b->len, t, n);
    b->len += n;
    b->s[b->len] = 0;
    return 0;
}

int mq_sb_puts(mq_strbuf *b, const char *t)
{
    return mq_sb_add(b, t, strlen(t));
}

int mq_sb_printf(mq_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) { /* an encoding error: nothing sensible to append */
        b->oom = 1;
        return -1;
    }
    if (mq_sb_reserve(b, (size_t)n))
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int mq_sb_read(mq_strbuf *b, FILE *f)
{
    for (;;) {
        if (mq_sb_reserve(b, 65536))
            return -1;
        size_t got = fread(b->s + b->len, 1, b->cap - b->len - 1, f);
        b->len += got;
        b->s[b->len] = 0;
        if (got == 0)
            return ferror(f) ? -1 : 0;
    }
}
