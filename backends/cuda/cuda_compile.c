/* cuda_compile.c - the cuda backend's kernels as loaded modules (cuda_state.h):
 * an MSL program translated for CUDA (cuda_module.c) compiled by NVRTC for
 * the device's own architecture, cubins cached on disk ($MQ_CUDA_CACHE,
 * else ~/.cache/mq-cuda) keyed by a hash of the source, the prelude, the
 * options and NVRTC's version, and loaded modules kept in memory per
 * (file, macros). Apart from cuda.c because the runs, the MoE block and the
 * probes all compile through it. mq_nvrtc_compile is the same NVRTC call
 * with no device, no cache: CI's check of every program (tests/test_nvrtc.c). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda_module.h"
#include "cuda_state.h"

/* ---- the on-disk cubin cache ----------------------------------------------- */

/* FNV-1a: the cache's keys (and the MoE weights' print, cuda_moe.c). */
uint64_t mq_cuda_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static void cache_path(const char *key_text, size_t n1, const char *opts, char *out, size_t n)
{
    const char *d = getenv("MQ_CUDA_CACHE"), *h = getenv("HOME");
    char dir[1024];
    if (d && *d)
        snprintf(dir, sizeof dir, "%s", d);
    else if (h && *h)
        snprintf(dir, sizeof dir, "%s/.cache/mq-cuda", h);
    else
        snprintf(dir, sizeof dir, "/tmp/mq-cuda-%d", (int)getuid());
    uint64_t a = mq_cuda_fnv(mq_cuda_fnv(14695981039346656037ull, key_text, n1), opts,
                             strlen(opts));
    uint64_t b = mq_cuda_fnv(mq_cuda_fnv(0x9e3779b97f4a7c15ull, opts, strlen(opts)), key_text,
                             n1);
    snprintf(out, n, "%s/%016llx%016llx.cubin", dir, (unsigned long long)a, (unsigned long long)b);
}

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len)) &&
        fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = len > 0 ? (size_t)len : 0;
    return buf;
}

/* Write to a temporary name and rename: a reader never sees half a cubin. */
static void write_cache(const char *path, const char *data, size_t n)
{
    char dir[1500], tmp[1600];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = 0;
    for (char *q = dir + 1; *q; q++)
        if (*q == '/') {
            *q = 0;
            mkdir(dir, 0755);
            *q = '/';
        }
    mkdir(dir, 0755);
    /* mkstemp: O_EXCL under a name nobody can guess, never through a link */
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.XXXXXX", path, (int)getpid());
    int fd = mkstemp(tmp);
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        return;
    }
    int bad = fwrite(data, 1, n, f) != n;
    if (fclose(f) || bad || rename(tmp, path))
        unlink(tmp);
}

/* ---- compiling ------------------------------------------------------------------ */

/* The prelude's two files (backends/cuda/metal_stdlib and the
 * metal_stdlib_mma it includes; a prelude directory without the second, an
 * earlier one, gets it empty) as one block: the first text, a 0, the
 * second, a 0; *pn covers both texts and the 0 between (the cache key hashes
 * them). NULL and msg when the first cannot be read. */
static char *read_prelude(size_t *pn, char *msg, size_t mn)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/metal_stdlib", mq_cuda_include_dir());
    size_t n1 = 0, n2 = 0;
    char *first = read_file(path, &n1);
    if (!first) {
        snprintf(msg, mn, "%.900s: %s", path, strerror(errno));
        return NULL;
    }
    snprintf(path, sizeof path, "%s/metal_stdlib_mma", mq_cuda_include_dir());
    char *second = read_file(path, &n2);
    char *z = malloc(n1 + n2 + 2);
    if (!z) {
        free(first);
        free(second);
        snprintf(msg, mn, "out of memory");
        return NULL;
    }
    memcpy(z, first, n1);
    z[n1] = 0;
    if (second)
        memcpy(z + n1 + 1, second, n2);
    z[n1 + 1 + n2] = 0;
    free(first);
    free(second);
    *pn = n1 + 1 + n2;
    return z;
}

/* The options of every compile (the cache key holds them): the
 * architecture, the fixed ones, the FP32 mapping's macro and the tuned
 * macros as -D, at most 24; opts[i] points into optbuf. Their count. */
static int compile_options(const char *arch_opt, int mma_fp32, int with_prelude,
                           const char *defines, char **opts, char (*optbuf)[80])
{
    int no = 0;
    snprintf(optbuf[no], sizeof optbuf[no], "%s", arch_opt);
    opts[no] = optbuf[no];
    no++;
    static const char *const fixed[] = {"-std=c++17", "-default-device", "-w"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        snprintf(optbuf[no], sizeof optbuf[no], "%s", fixed[i]);
        opts[no] = optbuf[no];
        no++;
    }
    if (with_prelude && mma_fp32) {
        snprintf(optbuf[no], sizeof optbuf[no], "-DMQ_CUDA_MMA_FP32");
        opts[no] = optbuf[no];
        no++;
    }
    char d[64];
    int k;
    const char *t = defines;
    while (t && no < 24 && sscanf(t, " %63s%n", d, &k) == 1) {
        snprintf(optbuf[no], sizeof optbuf[no], "-D%s", d);
        opts[no] = optbuf[no];
        no++;
        t += k;
    }
    return no;
}

/* NVRTC itself: source (prelude, when not NULL, as its two headers
 * metal_stdlib and metal_stdlib_mma: read_prelude's block) compiled with
 * opts to a cubin; NULL and msg (the first
 * error line of the log) on failure. *log, when log is not NULL, gets the
 * whole program log, success or not (NULL when there is none; free it). */
static char *nvrtc_run(const mq_cuda_api *api, const char *name, const char *source,
                       const char *defines, const char *prelude, int no, char **opts,
                       size_t *cubin_n, char **log_out, char *msg, size_t mn)
{
    if (log_out)
        *log_out = NULL;
    nvrtcProgram prog;
    const char *hname[2] = {"metal_stdlib", "metal_stdlib_mma"};
    const char *hsrc[2] = {prelude, prelude ? prelude + strlen(prelude) + 1 : NULL};
    nvrtcResult r = api->CreateProgram(&prog, source, name, prelude ? 2 : 0,
                                       prelude ? hsrc : NULL, prelude ? hname : NULL);
    if (r) {
        snprintf(msg, mn, "nvrtcCreateProgram: %s", api->nvrtcErrorString(r));
        return NULL;
    }
    r = api->CompileProgram(prog, no, (const char *const *)opts);
    char *log = NULL;
    if (r || log_out) {
        size_t ln = 0;
        api->GetProgramLogSize(prog, &ln);
        log = malloc(ln + 1);
        if (log && api->GetProgramLog(prog, log)) {
            free(log);
            log = NULL;
        }
        if (log)
            log[ln] = 0;
    }
    if (r) {
        const char *first = log ? log : "no log";
        char *e = log ? strstr(log, "error") : NULL;
        if (e) { /* the line holding the first error */
            while (e > log && e[-1] != '\n')
                e--;
            first = e;
        }
        snprintf(msg, mn, "%s (%s) does not compile with NVRTC: %.*s", name, defines,
                 (int)strcspn(first, "\n"), first);
        if (log_out)
            *log_out = log;
        else
            free(log);
        api->DestroyProgram(&prog);
        return NULL;
    }
    if (log_out)
        *log_out = log;
    size_t n = 0;
    char *cubin = NULL;
    if (!api->GetCUBINSize(prog, &n) && n && (cubin = malloc(n)) && api->GetCUBIN(prog, cubin)) {
        free(cubin);
        cubin = NULL;
    }
    api->DestroyProgram(&prog);
    if (!cubin) {
        snprintf(msg, mn, "%s: NVRTC gave no cubin", name);
        return NULL;
    }
    *cubin_n = n;
    return cubin;
}

/* NVRTC: source (with the prelude's two headers) to a cubin for this
 * device; the cached one when the same text was compiled the same way. */
char *mq_cuda_compile(cuda_state *s, const char *name, const char *source, const char *defines,
                      int with_prelude, size_t *cubin_n, char *msg, size_t mn)
{
    char *opts[24], optbuf[24][80];
    int no = compile_options(s->arch_opt, s->mma_fp32, with_prelude, defines, opts, optbuf);
    size_t pn = 0;
    char *prelude = NULL;
    if (with_prelude && !(prelude = read_prelude(&pn, msg, mn)))
        return NULL;
    /* the cache key: the source, the prelude, the options, NVRTC's version */
    int vmaj = 0, vmin = 0;
    s->api.Version(&vmaj, &vmin);
    char keyopts[2048];
    size_t used = (size_t)snprintf(keyopts, sizeof keyopts, "nvrtc %d.%d", vmaj, vmin);
    for (int i = 0; i < no && used < sizeof keyopts; i++)
        used += (size_t)snprintf(keyopts + used, sizeof keyopts - used, " %s", opts[i]);
    size_t sn = strlen(source);
    uint64_t ph = prelude ? mq_cuda_fnv(14695981039346656037ull, prelude, pn) : 0;
    if (used < sizeof keyopts)
        snprintf(keyopts + used, sizeof keyopts - used, " prelude %016llx", (unsigned long long)ph);
    char cpath[1400];
    cache_path(source, sn, keyopts, cpath, sizeof cpath);
    char *cubin = read_file(cpath, cubin_n);
    if (cubin) {
        free(prelude);
        return cubin;
    }
    size_t n = 0;
    cubin = nvrtc_run(&s->api, name, source, defines, prelude, no, opts, &n, NULL, msg, mn);
    free(prelude);
    if (!cubin)
        return NULL;
    write_cache(cpath, cubin, n);
    *cubin_n = n;
    return cubin;
}

char *mq_nvrtc_compile(const mq_cuda_api *api, const char *arch_opt, int mma_fp32,
                       const char *name, const char *source, const char *defines,
                       int with_prelude, const char *const *extra, size_t *cubin_n, char **log,
                       char *msg, size_t mn)
{
    char *opts[32], optbuf[24][80];
    int no = compile_options(arch_opt, mma_fp32, with_prelude, defines, opts, optbuf);
    for (int i = 0; extra && extra[i] && no < 32; i++)
        opts[no++] = (char *)extra[i];
    size_t pn = 0;
    char *prelude = NULL;
    if (log)
        *log = NULL;
    if (with_prelude && !(prelude = read_prelude(&pn, msg, mn)))
        return NULL;
    char *cubin = nvrtc_run(api, name, source, defines, prelude, no, opts, cubin_n, log, msg, mn);
    free(prelude);
    return cubin;
}

/* The module of (file, defines): in memory, on disk, or compiled now. */
CUmodule mq_cuda_module_for(cuda_state *s, const char *file, const char *defines, mq_error *err)
{
    char key[320], msg[1024];
    snprintf(key, sizeof key, "%s %s", file, defines);
    for (int i = 0; i < s->nmods; i++)
        if (!strcmp(s->mods[i].key, key))
            return s->mods[i].mod;
    mq_cuda_kernel ks[MQ_CUDA_MAX_KERNELS];
    int nk = 0;
    char *src = mq_cuda_source(file, NULL, defines, ks, &nk, msg, sizeof msg);
    if (!src) {
        mq_fail(err, MQ_E_ARG, "cuda: %s", msg);
        return NULL;
    }
    size_t n = 0;
    char *cubin = mq_cuda_compile(s, file, src, defines, 1, &n, msg, sizeof msg);
    free(src);
    if (!cubin) {
        mq_fail(err, MQ_E_ARG, "cuda: %s", msg);
        return NULL;
    }
    CUmodule mod;
    CUresult r = s->api.ModuleLoadData(&mod, cubin);
    free(cubin);
    if (r) {
        mq_cuda_fail(s, err, r, "cuModuleLoadData");
        return NULL;
    }
    module_entry *e;
    if (s->nmods < MQ_CUDA_MAX_MODULES) {
        e = &s->mods[s->nmods++];
    } else { /* a long sweep: the oldest module leaves (no launch holds it) */
        e = &s->mods[s->next_mod];
        s->next_mod = (s->next_mod + 1) % MQ_CUDA_MAX_MODULES;
        s->api.ModuleUnload(e->mod);
    }
    snprintf(e->key, sizeof e->key, "%s", key);
    e->mod = mod;
    return mod;
}
