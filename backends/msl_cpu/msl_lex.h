/* msl_lex.h - the character-level helpers of reading MSL text, shared by the
 * translation (msl_translate.c) and the kernel signature reader
 * (msl_signature.c): static inline, so each keeps its own copy and neither
 * file calls the other. */
#ifndef MQ_MSL_LEX_H
#define MQ_MSL_LEX_H

static inline int is_id(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Past whitespace and line continuations. */
static inline const char *skip_ws(const char *p)
{
    for (;;) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        else if (p[0] == '\\' && p[1] == '\n')
            p += 2;
        else
            return p;
    }
}

#endif
