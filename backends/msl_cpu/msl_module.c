/* msl_module.c - MSL source to a loaded kernel module for the executor
 * (msl_exec.h): translate the source (msl_translate.c: threadgroup arrays
 * become the threadgroup's shared storage), preprocess it with the tuned
 * macros, find each kernel's parameter list in the preprocessed text
 * (msl_signature.c; macros may write kernels, as gemm_trellis.metal does),
 * generate one C entry per kernel that binds [[buffer(n)]] and the position
 * attributes, compile the whole as a shared object into a cache keyed by a
 * hash of exactly what was compiled, and dlopen it. */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grow.h"
#include "msl_exec.h"
#include "msl_program.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

#define MAX_KERNELS 16

typedef struct {
    char name[96];
    mq_msl_entry_fn entry;
    unsigned used; /* [[buffer(n)]] bits */
} kernel_info;

struct mq_msl_module {
    void *dl;
    mq_msl_bind_fn bind; /* hands the module the executor's API before a run */
    kernel_info k[MAX_KERNELS];
    int nk;
};

/* Every kernel of the preprocessed text, with its C entry for the executor
 * binding [[buffer(n)]] and the position attributes; the names and buffers
 * into m. */
static int write_entries(const char *pre, mq_strbuf *out, mq_msl_module *m, char *err, size_t errlen)
{
    mq_msl_kernel_sig *ks = calloc(MAX_KERNELS, sizeof *ks);
    if (!ks) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (mq_msl_read_kernels(pre, ks, MAX_KERNELS, &m->nk, err, errlen)) {
        free(ks);
        return -1;
    }
    for (int i = 0; i < m->nk; i++) {
        const mq_msl_kernel_sig *k = &ks[i];
        snprintf(m->k[i].name, sizeof m->k[i].name, "%s", k->name);
        m->k[i].used = k->used;
        mq_sb_printf(out, "\nextern \"C\" __attribute__((visibility(\"default\"), used)) void "
                       "mq_msl_entry_%s(const mq_msl_thread *t)\n{\n    %s(",
                  k->name, k->name);
        for (int j = 0; j < k->nparam; j++) {
            const mq_msl_param *pa = &k->param[j];
            if (j)
                mq_sb_puts(out, ", ");
            if (pa->buffer < 0)
                mq_sb_printf(out, "metal::mq_detail::position<%s>(t->%s)", pa->type, pa->attr);
            else if (strchr(pa->type, '&'))
                mq_sb_printf(out, "*(std::remove_reference<%s>::type *)t->buffers[%d]", pa->type,
                          pa->buffer);
            else
                mq_sb_printf(out, "(%s)t->buffers[%d]", pa->type, pa->buffer);
        }
        mq_sb_puts(out, ");\n}\n");
    }
    free(ks);
    return 0;
}

/* ---- compiling ------------------------------------------------------------ */

const char *mq_msl_include_dir(void)
{
    const char *d = getenv("MQ_MSL_INCLUDE");
    return d && *d ? d : MQ_SOURCE_DIR "/backends/msl_cpu";
}

static int have_program(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

const char *mq_msl_cxx(const mq_msl_compile_opts *o)
{
    if (o && o->cxx && *o->cxx)
        return o->cxx;
    const char *e = getenv("MQ_MSL_CXX");
    if (e && *e)
        return e;
    static const char *found;
    static int looked;
    if (!looked) {
        looked = 1;
        found = have_program("clang++") ? "clang++" : have_program("g++") ? "g++" : NULL;
    }
    return found;
}

static void cache_dir(const mq_msl_compile_opts *o, char *out, size_t n)
{
    const char *d = o && o->cache_dir ? o->cache_dir : getenv("MQ_MSL_CACHE");
    if (d && *d) {
        snprintf(out, n, "%s", d);
        return;
    }
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (x && *x)
        snprintf(out, n, "%s/mq-msl", x);
    else if (h && *h)
        snprintf(out, n, "%s/.cache/mq-msl", h);
    else
        snprintf(out, n, "/tmp/mq-msl-%d", (int)getuid());
}

static int mkdirs(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *s = tmp + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(tmp, 0755) && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* The whole file, or NULL (errno says why) when it cannot be read or is
 * empty: the preprocessor's output always has text. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    mq_strbuf b = {0};
    int rd = mq_sb_read(&b, f);
    fclose(f);
    if (rd || b.len == 0) {
        free(b.s);
        errno = b.oom ? ENOMEM : rd ? EIO : ENODATA;
        return NULL;
    }
    return b.s;
}

static int spit(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int bad = fwrite(text, 1, n, f) != n;
    return fclose(f) || bad ? -1 : 0;
}

/* The first line of a compiler log that says error (without the temporary
 * directory), else its first line. */
static void first_error(const char *log_path, const char *dir, char *out, size_t n)
{
    FILE *l = fopen(log_path, "r");
    char line[1024], first[1024] = "";
    out[0] = 0;
    while (l && fgets(line, sizeof line, l)) {
        line[strcspn(line, "\n")] = 0;
        if (!first[0])
            snprintf(first, sizeof first, "%s", line);
        if (strstr(line, "error")) {
            snprintf(first, sizeof first, "%s", line);
            break;
        }
    }
    /* clang puts a failed static_assert's message after its condition: keep
     * the message when the line is long */
    const char *msg = strstr(first, "\" \"");
    if (!msg)
        msg = strstr(first, "failed due to requirement");
    if (msg && strlen(first) > 200) {
        const char *q = strrchr(first, '"');
        const char *open = q && q > first ? q - 1 : NULL;
        while (open && open > first && *open != '"')
            open--;
        if (open && open < q) {
            char tmp[1024];
            snprintf(tmp, sizeof tmp, "static_assert failed: %.*s", (int)(q - open - 1), open + 1);
            snprintf(first, sizeof first, "%s", tmp);
        }
    }
    if (l)
        fclose(l);
    const char *s = first;
    size_t dl = strlen(dir);
    if (!strncmp(s, dir, dl) && s[dl] == '/')
        s += dl + 1;
    snprintf(out, n, "%s", s);
}

static int run_cmd(const char *cmd)
{
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* " -DA=1 -DB=2" from "A=1 B=2". */
static void define_flags(const char *defines, char *out, size_t n)
{
    size_t used = 0;
    char d[128];
    int k;
    out[0] = 0;
    while (defines && sscanf(defines, " %127s%n", d, &k) == 1 && used + strlen(d) + 4 < n) {
        used += (size_t)snprintf(out + used, n - used, " -D%s", d);
        defines += k;
    }
}

static void rm_rf(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    (void)run_cmd(cmd); /* a failure leaves a temporary directory behind, nothing more */
}

static mq_msl_module *load_so(const char *so, mq_msl_module *m, char *err, size_t errlen)
{
    m->dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    mq_msl_bind_fn bind = m->dl ? (mq_msl_bind_fn)dlsym(m->dl, "mq_msl_bind") : NULL;
    if (!bind) {
        snprintf(err, errlen, "%s: %s", so, m->dl ? "no mq_msl_bind" : dlerror());
        mq_msl_module_free(m);
        return NULL;
    }
    m->bind = bind; /* called by the executor (mq_msl_module_bind), which owns the API */
    for (int i = 0; i < m->nk; i++) {
        char sym[128];
        snprintf(sym, sizeof sym, "mq_msl_entry_%s", m->k[i].name);
        m->k[i].entry = (mq_msl_entry_fn)dlsym(m->dl, sym);
        if (!m->k[i].entry) {
            snprintf(err, errlen, "%s: no %s", so, sym);
            mq_msl_module_free(m);
            return NULL;
        }
    }
    return m;
}

/* A fresh temporary directory in the cache directory; -1 and a message. */
static int make_tmp(const mq_msl_compile_opts *o, char *dir, size_t dn, char *tmp, size_t tn,
                    char *err, size_t errlen)
{
    cache_dir(o, dir, dn);
    if (strchr(dir, '\'') || mkdirs(dir)) {
        snprintf(err, errlen, "%s: cannot make the executor's cache directory", dir);
        return -1;
    }
    snprintf(tmp, tn, "%s/tmp-XXXXXX", dir);
    if (!mkdtemp(tmp)) {
        snprintf(err, errlen, "%s: cannot make a temporary directory: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Preprocess in tmp: the translated text, the kernel mark kept a token. */
static char *preprocess_in(const char *tmp, const char *cxx, const char *file, const char *src,
                           const char *defines, char *err, size_t errlen)
{
    char path[1200], log[1200], dflags[1024], cmd[8192];
    char *text = src ? strdup(src) : mq_metal_source(file, err, errlen);
    char *translated = text ? mq_msl_translate(text) : NULL, *pre = NULL;
    free(text);
    if (!translated) {
        if (src || text)
            snprintf(err, errlen, "out of memory reading %s", file);
        return NULL;
    }
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    snprintf(path, sizeof path, "%s/%s", tmp, base);
    snprintf(log, sizeof log, "%s/log", tmp);
    define_flags(defines, dflags, sizeof dflags);
    if (spit(path, translated, strlen(translated))) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        free(translated);
        return NULL;
    }
    free(translated);
    snprintf(cmd, sizeof cmd,
             "%s -std=c++17 -E -x c++ -isystem '%s' -DMQ_MSL_PREPROCESS%s '%s' -o '%s/pre.ii' "
             "> '%s' 2>&1",
             cxx, mq_msl_include_dir(), dflags, path, tmp, log);
    if (run_cmd(cmd)) {
        char first[512];
        first_error(log, tmp, first, sizeof first);
        snprintf(err, errlen, "%s (%s) does not preprocess: %s", file, defines, first);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/pre.ii", tmp);
    if (!(pre = slurp(path)))
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return pre;
}

char *mq_msl_preprocessed(const char *file, const char *src, const char *defines,
                          const mq_msl_compile_opts *o, char *err, size_t errlen)
{
    const char *cxx = mq_msl_cxx(o);
    char dir[1024], tmp[1100];
    if (!cxx) {
        snprintf(err, errlen, "no C++ compiler to preprocess the MSL source (clang++ or g++; or "
                              "set MQ_MSL_CXX)");
        return NULL;
    }
    if (make_tmp(o, dir, sizeof dir, tmp, sizeof tmp, err, errlen))
        return NULL;
    char *pre = preprocess_in(tmp, cxx, file, src, defines, err, errlen);
    rm_rf(tmp);
    return pre;
}

mq_msl_module *mq_msl_module_load(const char *file, const char *src, const char *defines,
                                  const mq_msl_compile_opts *o, char *err, size_t errlen)
{
    const char *cxx = mq_msl_cxx(o);
    if (!cxx) {
        snprintf(err, errlen, "no C++ compiler for the MSL executor (clang++ or g++; or set MQ_MSL_CXX)");
        return NULL;
    }
    char dir[1024], tmp[1100], path[1200], log[1200], cmd[8192];
    if (make_tmp(o, dir, sizeof dir, tmp, sizeof tmp, err, errlen))
        return NULL;
    snprintf(log, sizeof log, "%s/log", tmp);
    mq_msl_module *m = calloc(1, sizeof *m);
    char *pre = NULL;
    mq_strbuf full = {0};
    if (!m)
        goto oom;
    if (!(pre = preprocess_in(tmp, cxx, file, src, defines, err, errlen)))
        goto fail;
    mq_sb_puts(&full, pre);
    if (write_entries(pre, &full, m, err, errlen))
        goto fail;
    if (full.oom)
        goto oom;
    /* the cache key: what is compiled and how */
    const char *cflags = o && o->cflags ? o->cflags : (getenv("MQ_MSL_CFLAGS") ? getenv("MQ_MSL_CFLAGS") : "");
    char flags[1024];
    snprintf(flags, sizeof flags, "-std=c++17 -O1 -g0 -fPIC -shared -w -x c++ -DMQ_MSL_KERNEL= %s",
             cflags);
    uint64_t h1 = fnv(14695981039346656037ull, full.s, full.len);
    uint64_t h2 = fnv(0x9e3779b97f4a7c15ull, full.s, full.len);
    h1 = fnv(fnv(h1, flags, strlen(flags)), cxx, strlen(cxx));
    h2 = fnv(fnv(h2, cxx, strlen(cxx)), flags, strlen(flags));
    char so[1100];
    snprintf(so, sizeof so, "%s/%016llx%016llx.so", dir, (unsigned long long)h1,
             (unsigned long long)h2);
    if (access(so, R_OK)) {
        snprintf(path, sizeof path, "%s/module.cpp", tmp);
        if (spit(path, full.s, full.len))
            goto io;
        snprintf(cmd, sizeof cmd, "%s %s '%s' -o '%s/module.so' > '%s' 2>&1", cxx, flags, path, tmp,
                 log);
        if (run_cmd(cmd)) {
            char first[512];
            first_error(log, tmp, first, sizeof first);
            snprintf(err, errlen, "%s (%s) does not compile: %s", file, defines, first);
            goto fail;
        }
        snprintf(path, sizeof path, "%s/module.so", tmp);
        if (rename(path, so)) /* atomic: a concurrent compile of the same key is the same file */
            goto io;
    }
    free(pre);
    free(full.s);
    rm_rf(tmp);
    return load_so(so, m, err, errlen);
oom:
    snprintf(err, errlen, "out of memory compiling %s", file);
    goto fail;
io:
    snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
fail:
    free(pre);
    free(full.s);
    free(m);
    rm_rf(tmp);
    return NULL;
}

void mq_msl_module_free(mq_msl_module *m)
{
    if (!m)
        return;
    if (m->dl)
        dlclose(m->dl);
    free(m);
}

void mq_msl_module_bind(const mq_msl_module *m, const mq_msl_api *api)
{
    if (m && m->bind)
        m->bind(api);
}

mq_msl_entry_fn mq_msl_kernel(const mq_msl_module *m, const char *name, unsigned *buffers_used)
{
    for (int i = 0; m && i < m->nk; i++)
        if (!strcmp(m->k[i].name, name)) {
            if (buffers_used)
                *buffers_used = m->k[i].used;
            return m->k[i].entry;
        }
    return NULL;
}
