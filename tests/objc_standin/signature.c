/* signature.c - a cast's C spelling ("id(const void *, NSUInteger,
 * NSUInteger)", as objc_rt.h's MSG stringizes it) in the canonical form of
 * the generated declarations ("id(ptr,NSUInteger,NSUInteger)"), so a cast
 * and Apple's declaration compare as strings. The mapping follows the C
 * ABI's distinctions that matter to objc_msgSend: object pointers, pointers
 * to them, data pointers, C strings, each integer width and signedness,
 * BOOL, floating types, Metal's structs by value. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "standin.h"

/* One type's spelling, "const" and spaces gone, to its canonical name. */
static const char *canonical_type(const char *spelled)
{
    static const struct {
        const char *c, *canon;
    } names[] = {
        {"void", "void"},           {"id", "id"},
        {"id*", "id*"},             {"SEL", "SEL"},
        {"BOOL", "BOOL"},           {"_Bool", "BOOL"},
        {"char", "char"},           {"int", "int"},
        {"int32_t", "int"},         {"unsigned", "unsigned"},
        {"unsignedint", "unsigned"}, {"uint32_t", "unsigned"},
        {"long", "long"},           {"NSInteger", "long"},
        {"int64_t", "long"},        {"NSUInteger", "NSUInteger"},
        {"unsignedlong", "NSUInteger"}, {"uint64_t", "NSUInteger"},
        {"size_t", "NSUInteger"},   {"float", "float"},
        {"double", "double"},       {"CFTimeInterval", "double"},
        {"MTLSize", "MTLSize"},     {"char*", "cstring"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(spelled, names[i].c))
            return names[i].canon;
    size_t n = strlen(spelled);
    if (n > 1 && spelled[n - 1] == '*' && spelled[n - 2] != '*')
        return "ptr"; /* a data pointer: void *, uint16_t *, ... */
    return NULL;
}

/* Copy [b, e) without "const" words and without spaces. */
static void squeeze(const char *b, const char *e, char *out, size_t n)
{
    size_t k = 0;
    while (b < e && k + 1 < n) {
        if (!strncmp(b, "const", 5) && (b + 5 == e || (!isalnum((unsigned char)b[5]) && b[5] != '_')) &&
            (k == 0 || !isalnum((unsigned char)out[k - 1]))) {
            b += 5;
            continue;
        }
        if (!isspace((unsigned char)*b))
            out[k++] = *b;
        b++;
    }
    out[k] = 0;
}

int so_canonical_signature(const char *c_spelling, char *out, size_t n)
{
    const char *open = strchr(c_spelling, '(');
    const char *close = strrchr(c_spelling, ')');
    if (!open || !close || close < open)
        return -1;
    char t[128];
    squeeze(c_spelling, open, t, sizeof t);
    const char *ret = canonical_type(t);
    if (!ret)
        return -1;
    size_t k = (size_t)snprintf(out, n, "%s(", ret);
    const char *p = open + 1;
    int first = 1;
    while (p < close) {
        const char *comma = memchr(p, ',', (size_t)(close - p));
        const char *end = comma ? comma : close;
        squeeze(p, end, t, sizeof t);
        if (*t) {
            const char *a = canonical_type(t);
            if (!a || !strcmp(a, "void"))
                return -1;
            k += (size_t)snprintf(out + k, k < n ? n - k : 0, "%s%s", first ? "" : ",", a);
            first = 0;
        }
        p = comma ? comma + 1 : close;
    }
    k += (size_t)snprintf(out + k, k < n ? n - k : 0, ")");
    return k < n ? 0 : -1;
}
