/* msl_signature.c - the kernels of preprocessed MSL text and their
 * signatures (msl_exec.h: mq_msl_read_kernels): each kernel's name and
 * parameters, each parameter's type, name and binding ([[buffer(n)]] or a
 * position attribute), refusing one no backend can bind. Apart from the
 * module loader (msl_module.c) because the cuda backend (cuda_module.c)
 * binds the same parameters from the same reading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msl_exec.h"
#include "msl_lex.h"

/* The position attributes a kernel parameter may carry, and the field of
 * mq_msl_thread that gives it. */
static const char *const position_attrs[] = {
    "threadgroup_position_in_grid", "thread_position_in_threadgroup",
    "thread_position_in_grid",      "threads_per_threadgroup",
    "threadgroups_per_grid",        "thread_index_in_threadgroup",
    "simdgroup_index_in_threadgroup", "thread_index_in_simdgroup",
    "simdgroups_per_threadgroup",   "threads_per_simdgroup",
};

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

/* Preprocessed text drops its line markers' lines from parameters. */
static void strip_line_markers(char *s)
{
    for (char *l = s; *l;) {
        char *nl = strchr(l, '\n');
        char *t = l;
        while (*t == ' ' || *t == '\t')
            t++;
        if (*t == '#') {
            size_t n = nl ? (size_t)(nl - l) : strlen(l);
            memset(l, ' ', n);
        }
        if (!nl)
            break;
        l = nl + 1;
    }
}

/* One parameter "TYPE NAME [[ATTR]]": its type, name and binding; -1 and a
 * message when it has none a backend can bind. */
static int parse_param(const char *kname, char *param, mq_msl_param *out, unsigned *used,
                       char *err, size_t errlen)
{
    char *attr = strstr(param, "[[");
    char *decl = trim(param);
    if (!attr) {
        snprintf(err, errlen, "kernel %s: parameter '%.80s' has no attribute to bind it", kname,
                 decl);
        return -1;
    }
    *attr = 0;
    attr += 2;
    char *ae = strstr(attr, "]]");
    if (ae)
        *ae = 0;
    attr = trim(attr);
    decl = trim(decl);
    size_t n = strlen(decl);
    while (n && is_id((unsigned char)decl[n - 1]))
        n--;
    snprintf(out->name, sizeof out->name, "%s", decl + n);
    decl[n] = 0;
    char *type = trim(decl);
    if (strlen(type) >= sizeof out->type) {
        snprintf(err, errlen, "kernel %s: parameter %s's type is too long", kname, out->name);
        return -1;
    }
    snprintf(out->type, sizeof out->type, "%s", type);
    int idx;
    if (sscanf(attr, "buffer ( %d )", &idx) == 1 || sscanf(attr, "buffer(%d)", &idx) == 1) {
        if (idx < 0 || idx >= MQ_MSL_MAX_BUFFERS) {
            snprintf(err, errlen, "kernel %s: [[buffer(%d)]] is outside Metal's 0..%d", kname, idx,
                     MQ_MSL_MAX_BUFFERS - 1);
            return -1;
        }
        *used |= 1u << idx;
        out->buffer = idx;
        out->attr[0] = 0;
        return 0;
    }
    for (size_t i = 0; i < sizeof position_attrs / sizeof position_attrs[0]; i++)
        if (!strcmp(attr, position_attrs[i])) {
            out->buffer = -1;
            snprintf(out->attr, sizeof out->attr, "%s", attr);
            return 0;
        }
    snprintf(err, errlen, "kernel %s: parameter %s's attribute [[%.60s]] is not one the executor binds",
             kname, out->name, attr);
    return -1;
}

/* Past whitespace and the preprocessor's line markers (g++ -E puts them
 * between the tokens of a declaration that spans lines). */
static const char *skip_ws_markers(const char *p)
{
    for (;;) {
        p = skip_ws(p);
        if (*p != '#')
            return p;
        while (*p && *p != '\n')
            p++;
    }
}

int mq_msl_read_kernels(const char *pre, mq_msl_kernel_sig *ks, int max, int *nk, char *err,
                        size_t errlen)
{
    const char *p = pre;
    *nk = 0;
    while ((p = strstr(p, "MQ_MSL_KERNEL"))) {
        if ((p > pre && is_id((unsigned char)p[-1])) || is_id((unsigned char)p[13])) {
            p += 13;
            continue;
        }
        const char *q = skip_ws_markers(p + 13);
        if (strncmp(q, "void", 4) || is_id((unsigned char)q[4])) {
            snprintf(err, errlen, "a kernel that does not return void (near '%.40s')", q);
            return -1;
        }
        q = skip_ws_markers(q + 4);
        const char *nb = q;
        while (is_id((unsigned char)*q))
            q++;
        if (*nk == max) {
            snprintf(err, errlen, "more than %d kernels in one source", max);
            return -1;
        }
        mq_msl_kernel_sig *k = &ks[*nk];
        memset(k, 0, sizeof *k);
        snprintf(k->name, sizeof k->name, "%.*s", (int)(q - nb), nb);
        q = skip_ws_markers(q);
        if (*q != '(' || !k->name[0]) {
            snprintf(err, errlen, "cannot read the kernel's parameter list near '%.40s'", nb);
            return -1;
        }
        /* the parameter list, split at top-level commas */
        const char *b = ++q;
        int depth = 0;
        while (*q && (depth > 0 || *q != ')')) {
            if (*q == '(' || *q == '[' || *q == '<')
                depth++;
            else if (*q == ')' || *q == ']' || *q == '>')
                depth--;
            q++;
        }
        char *params = strndup(b, (size_t)(q - b));
        if (!params) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        strip_line_markers(params);
        int rc = 0;
        depth = 0;
        char *start = params;
        for (char *s = params;; s++) {
            if (*s == '(' || *s == '[' || *s == '<')
                depth++;
            else if (*s == ')' || *s == ']' || *s == '>')
                depth--;
            if (*s && !(*s == ',' && depth == 0))
                continue;
            int last = !*s;
            *s = 0;
            if (*trim(start)) {
                if (k->nparam == MQ_MSL_MAX_PARAMS) {
                    snprintf(err, errlen, "kernel %s: more than %d parameters", k->name,
                             MQ_MSL_MAX_PARAMS);
                    rc = -1;
                } else {
                    rc = parse_param(k->name, start, &k->param[k->nparam++], &k->used, err, errlen);
                }
                if (rc)
                    break;
            }
            if (last)
                break;
            start = s + 1;
        }
        free(params);
        if (rc)
            return -1;
        (*nk)++;
        p = q;
    }
    if (*nk == 0) {
        snprintf(err, errlen, "no kernel function in the source");
        return -1;
    }
    return 0;
}
