/* msl_translate.c - MSL source to the C++ the executor compiles, or to the
 * CUDA C++ NVRTC compiles (msl_exec.h: mq_msl_translate,
 * mq_msl_translate_cuda): a scan that keeps comments and literals, rewrites
 * the threadgroup arrays declared in functions and, for CUDA, Metal's half
 * literals; nothing else changes. Apart from the module loader
 * (msl_module.c) because it is text to text, needing no compiler: the cuda
 * backend and the tests use it alone. */
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "msl_exec.h"
#include "msl_lex.h"

/* Past a comment or a string/char literal starting at p (p itself if none). */
static const char *skip_literal(const char *p)
{
    if (p[0] == '/' && p[1] == '/') {
        while (*p && *p != '\n')
            p++;
        return p;
    }
    if (p[0] == '/' && p[1] == '*') {
        const char *e = strstr(p + 2, "*/");
        return e ? e + 2 : p + strlen(p);
    }
    if (*p == '"' || *p == '\'') {
        char q = *p++;
        while (*p && *p != q)
            p += (*p == '\\' && p[1]) ? 2 : 1;
        return *p ? p + 1 : p;
    }
    return p;
}

/* Past blanks and comments from p (a declaration may carry comments
 * between its declarators). */
static const char *skip_blank(const char *p)
{
    for (;;) {
        p = skip_ws(p);
        if (p[0] != '/' || (p[1] != '/' && p[1] != '*'))
            return p;
        p = skip_literal(p);
    }
}

/* At p, after a declarator's name: its dimensions `[a][b]` (balanced
 * bracket groups), then ';' or ',' (*more: another declarator follows);
 * the end (after it), or NULL when it is anything else. */
static const char *tg_dims(const char *p, const char **dims_b, const char **dims_e, int *more)
{
    p = skip_blank(p);
    *dims_b = *dims_e = p;
    if (*p != '[')
        return NULL;
    while (*p == '[') {
        int depth = 0;
        do {
            if (*p == '[')
                depth++;
            else if (*p == ']')
                depth--;
            else if (!*p || *p == ';' || *p == '{' || *p == '}')
                return NULL;
            p++;
        } while (depth > 0);
        *dims_e = p;
        p = skip_blank(p);
    }
    if (*p != ';' && *p != ',')
        return NULL;
    *more = *p == ',';
    return p + 1;
}

/* At p just after the identifier `threadgroup`: a declaration
 * `T name[a][b];` (or `T a[n], b[m];`: *more, and the next declarator is
 * read by tg_next_decl) gets the type's text, the name and the dimensions'
 * text, and the end (after ';' or ','); 0 when it is anything else (a
 * pointer, a cast, a parameter). */
static int tg_array_decl(const char *p, const char **type_b, const char **type_e,
                         const char **name_b, const char **name_e, const char **dims_b,
                         const char **dims_e, const char **end, int *more)
{
    const char *last_id_b = NULL, *last_id_e = NULL;
    p = skip_ws(p);
    *type_b = p;
    while (*p && is_id((unsigned char)*p)) { /* identifiers and :: only */
        last_id_b = p;
        while (is_id((unsigned char)*p))
            p++;
        last_id_e = p;
        p = skip_ws(p);
        if (p[0] == ':' && p[1] == ':')
            p = skip_ws(p + 2);
    }
    if (*p != '[' || !last_id_b || last_id_b == *type_b)
        return 0;
    *type_e = last_id_b;
    *name_b = last_id_b;
    *name_e = last_id_e;
    return (*end = tg_dims(p, dims_b, dims_e, more)) != NULL;
}

/* At p, after a ',' of such a declaration: the next `name[a]` and its end;
 * 0 when it is not one. */
static int tg_next_decl(const char *p, const char **name_b, const char **name_e,
                        const char **dims_b, const char **dims_e, const char **end, int *more)
{
    p = skip_blank(p);
    if (!is_id((unsigned char)*p) || (*p >= '0' && *p <= '9'))
        return 0;
    *name_b = p;
    while (is_id((unsigned char)*p))
        p++;
    *name_e = p;
    return (*end = tg_dims(p, dims_b, dims_e, more)) != NULL;
}

/* One threadgroup array of type [tb, te) as the executor or CUDA declares
 * it. */
static void tg_emit(mq_strbuf *b, int cuda, const char *tb, const char *te, const char *nb,
                    const char *ne, const char *db, const char *de)
{
    if (cuda) {
        mq_sb_puts(b, "__shared__ __attribute__((aligned(16))) ");
        mq_sb_add(b, tb, (size_t)(te - tb));
        mq_sb_puts(b, " ");
        mq_sb_add(b, nb, (size_t)(ne - nb));
        mq_sb_add(b, db, (size_t)(de - db));
        mq_sb_puts(b, ";");
    } else {
        mq_sb_puts(b, "auto &");
        mq_sb_add(b, nb, (size_t)(ne - nb));
        mq_sb_puts(b, " = metal::mq_msl_tg_array<");
        mq_sb_add(b, tb, (size_t)(te - tb));
        mq_sb_add(b, db, (size_t)(de - db));
        mq_sb_puts(b, ">();");
    }
}

/* At p, a number (a pp-number: digits, '.', letters, exponent signs):
 * its end. */
static const char *number_end(const char *p)
{
    const char *q = p;
    while (is_id((unsigned char)*q) || *q == '.' ||
           ((*q == '+' || *q == '-') && (q[-1] == 'e' || q[-1] == 'E' || q[-1] == 'p' ||
                                         q[-1] == 'P')))
        q++;
    return q;
}

/* Both translations: the executor's (threadgroup arrays to the
 * threadgroup's storage) or CUDA's (threadgroup arrays to __shared__ ones,
 * Metal's half literals 1.5h to metal::half(1.5f), since only the standard
 * library may declare such a suffix and NVRTC has no system headers). */
static char *translate(const char *src, int cuda)
{
    mq_strbuf b = {0};
    const char *p = src;
    while (*p) {
        const char *q = skip_literal(p);
        if (q != p) {
            mq_sb_add(&b, p, (size_t)(q - p));
            p = q;
            continue;
        }
        if (cuda && (p == src || !is_id((unsigned char)p[-1])) &&
            ((*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9'))) {
            const char *e = number_end(p);
            int hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
            if (!hex && (e[-1] == 'h' || e[-1] == 'H') && e - p > 1) {
                int real = memchr(p, '.', (size_t)(e - p)) || memchr(p, 'e', (size_t)(e - p)) ||
                           memchr(p, 'E', (size_t)(e - p));
                mq_sb_puts(&b, "metal::half(");
                mq_sb_add(&b, p, (size_t)(e - 1 - p));
                mq_sb_puts(&b, real ? "f)" : ".0f)");
            } else {
                mq_sb_add(&b, p, (size_t)(e - p));
            }
            p = e;
            continue;
        }
        if (!is_id((unsigned char)*p)) {
            mq_sb_add(&b, p++, 1);
            continue;
        }
        const char *id = p;
        while (is_id((unsigned char)*p))
            p++;
        const char *tb, *te, *nb, *ne, *db, *de, *end;
        int more = 0;
        if (p - id == 11 && !memcmp(id, "threadgroup", 11) &&
            tg_array_decl(p, &tb, &te, &nb, &ne, &db, &de, &end, &more)) {
            /* trim the type's trailing blanks */
            while (te > tb && (te[-1] == ' ' || te[-1] == '\t'))
                te--;
            tg_emit(&b, cuda, tb, te, nb, ne, db, de);
            p = end;
            /* `threadgroup T a[n], b[m];`: each declarator its own array.
             * One of another form (`*q`) would leave the arrays after it
             * one per thread, silently: the compile stops there instead */
            while (more && tg_next_decl(p, &nb, &ne, &db, &de, &end, &more)) {
                tg_emit(&b, cuda, tb, te, nb, ne, db, de);
                p = end;
            }
            if (more)
                mq_sb_puts(&b, " static_assert(false, \"a threadgroup declaration of arrays and "
                               "other declarators: declare the arrays in one of their own\"); ");
        } else {
            mq_sb_add(&b, id, (size_t)(p - id));
        }
    }
    if (!b.s && !b.oom)
        mq_sb_puts(&b, "");
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *mq_msl_translate(const char *src) { return translate(src, 0); }
char *mq_msl_translate_cuda(const char *src) { return translate(src, 1); }
