/* cuda.c - the cuda backend: the MSL kernels of metal/, from the very source
 * the Metal backend compiles (the same program layer, the same macros),
 * translated for CUDA (cuda_module.c, backends/cuda/metal_stdlib), compiled
 * at run time by NVRTC for the device's own architecture, and timed on an
 * NVIDIA GPU with CUDA events around the GEMM and its reduction. The driver
 * and NVRTC are reached through dlopen (cuda_api.c): where they are absent
 * the backend reports "unavailable: ..." and the tools fall back. Modules
 * are cached in memory per (file, macros) and on disk as cubins
 * ($MQ_CUDA_CACHE, else ~/.cache/mq-cuda) keyed by a hash of the source,
 * the options and NVRTC's version; every weight copy the harness rotates is
 * uploaded once and stays resident. It also carries the device probes
 * (read bandwidth, FP32 FMA peak) the tools report GPU figures against. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "backend.h"
#include "cuda_api.h"
#include "cuda_module.h"
#include "msl_program.h"

#define MAX_MODULES 256
#define MAX_WEIGHTS 4352 /* the harness rotates up to 4096 copies */

typedef struct {
    char key[320];
    CUmodule mod;
} module_entry;

typedef struct {
    const mq_weights *w;
    uint64_t print;
    CUdeviceptr buf[MQ_MSL_W_COUNT];
} weight_entry;

typedef struct {
    CUdeviceptr p;
    size_t n;
} dbuf;

typedef struct {
    mq_cuda_api api;
    CUdevice dev;
    CUcontext ctx;
    int cc_major, cc_minor, sms;
    char arch_opt[48];
    module_entry mods[MAX_MODULES];
    int nmods, next_mod;
    weight_entry weights[MAX_WEIGHTS];
    int nweights, next_weight;
    dbuf a, c, ws, params;
    uint16_t *c_host;
    size_t c_host_n;
    CUevent ev0, ev1;
    double last_s;
    char broken[512]; /* a sticky error lost the context: every later run reports it */
    CUmodule probe_mod;
    int mma_fp32; /* MQ_CUDA_MMA=fp32: simdgroup matrices on the FP32 units */
    /* the MoE block: its buffers (the weight fields uploaded once per weight set) */
    dbuf moe[MQ_MSL_MOE_NBUF];
    const mq_moe_weights *moe_w;
    uint64_t moe_print;
} cuda_state;

static mq_status cu_fail(cuda_state *s, mq_error *err, CUresult r, const char *what)
{
    if (r == 700 || r == 719 || r == 714 || r == 715 || r == 716 || r == 717 || r == 718)
        /* illegal address, launch failure, exceptions: the context is gone */
        snprintf(s->broken, sizeof s->broken, "%s: %s (the CUDA context is lost; restart)", what,
                 mq_cuda_error(&s->api, r));
    return mq_fail(err, MQ_E_ARG, "cuda: %s: %s", what, mq_cuda_error(&s->api, r));
}

#define CU(call, what)                                                                       \
    do {                                                                                     \
        CUresult r_ = (call);                                                                \
        if (r_)                                                                              \
            return cu_fail(s, err, r_, what);                                                \
    } while (0)

/* ---- the on-disk cubin cache ----------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
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
    uint64_t a = fnv(fnv(14695981039346656037ull, key_text, n1), opts, strlen(opts));
    uint64_t b = fnv(fnv(0x9e3779b97f4a7c15ull, opts, strlen(opts)), key_text, n1);
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

/* NVRTC: source (with metal_stdlib as its one header) to a cubin for this
 * device; the cached one when the same text was compiled the same way. */
static char *compile(cuda_state *s, const char *name, const char *source, const char *defines,
                     int with_prelude, size_t *cubin_n, char *msg, size_t mn)
{
    char *opts[24], optbuf[24][80];
    int no = 0;
    snprintf(optbuf[no], sizeof optbuf[no], "%s", s->arch_opt);
    opts[no] = optbuf[no];
    no++;
    static const char *const fixed[] = {"-std=c++17", "-default-device", "-w"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        snprintf(optbuf[no], sizeof optbuf[no], "%s", fixed[i]);
        opts[no] = optbuf[no];
        no++;
    }
    if (with_prelude && s->mma_fp32) {
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
    size_t pn = 0;
    char *prelude = NULL;
    if (with_prelude) {
        char path[1024];
        snprintf(path, sizeof path, "%s/metal_stdlib", mq_cuda_include_dir());
        if (!(prelude = read_file(path, &pn))) {
            snprintf(msg, mn, "%.900s: %s", path, strerror(errno));
            return NULL;
        }
        char *z = realloc(prelude, pn + 1);
        if (!z) {
            free(prelude);
            snprintf(msg, mn, "out of memory");
            return NULL;
        }
        prelude = z;
        prelude[pn] = 0;
    }
    /* the cache key: the source, the prelude, the options, NVRTC's version */
    int vmaj = 0, vmin = 0;
    s->api.Version(&vmaj, &vmin);
    char keyopts[2048];
    size_t used = (size_t)snprintf(keyopts, sizeof keyopts, "nvrtc %d.%d", vmaj, vmin);
    for (int i = 0; i < no && used < sizeof keyopts; i++)
        used += (size_t)snprintf(keyopts + used, sizeof keyopts - used, " %s", opts[i]);
    size_t sn = strlen(source);
    uint64_t ph = prelude ? fnv(14695981039346656037ull, prelude, pn) : 0;
    if (used < sizeof keyopts)
        snprintf(keyopts + used, sizeof keyopts - used, " prelude %016llx", (unsigned long long)ph);
    char cpath[1400];
    cache_path(source, sn, keyopts, cpath, sizeof cpath);
    char *cubin = read_file(cpath, cubin_n);
    if (cubin) {
        free(prelude);
        return cubin;
    }
    nvrtcProgram prog;
    const char *hname = "metal_stdlib";
    const char *hsrc = prelude;
    nvrtcResult r = s->api.CreateProgram(&prog, source, name, prelude ? 1 : 0,
                                         prelude ? &hsrc : NULL, prelude ? &hname : NULL);
    if (r) {
        free(prelude);
        snprintf(msg, mn, "nvrtcCreateProgram: %s", s->api.nvrtcErrorString(r));
        return NULL;
    }
    r = s->api.CompileProgram(prog, no, (const char *const *)opts);
    free(prelude);
    if (r) {
        size_t ln = 0;
        s->api.GetProgramLogSize(prog, &ln);
        char *log = malloc(ln + 1);
        const char *first = "no log";
        if (log && !s->api.GetProgramLog(prog, log)) {
            log[ln] = 0;
            first = log;
            char *e = strstr(log, "error");
            if (e) { /* the line holding the first error */
                while (e > log && e[-1] != '\n')
                    e--;
                first = e;
            }
        }
        snprintf(msg, mn, "%s (%s) does not compile with NVRTC: %.*s", name, defines,
                 (int)strcspn(first, "\n"), first);
        free(log);
        s->api.DestroyProgram(&prog);
        return NULL;
    }
    size_t n = 0;
    cubin = NULL;
    if (!s->api.GetCUBINSize(prog, &n) && n && (cubin = malloc(n)) && s->api.GetCUBIN(prog, cubin)) {
        free(cubin);
        cubin = NULL;
    }
    s->api.DestroyProgram(&prog);
    if (!cubin) {
        snprintf(msg, mn, "%s: NVRTC gave no cubin", name);
        return NULL;
    }
    write_cache(cpath, cubin, n);
    *cubin_n = n;
    return cubin;
}

/* The module of (file, defines): in memory, on disk, or compiled now. */
static CUmodule module_for(cuda_state *s, const char *file, const char *defines, mq_error *err)
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
    char *cubin = compile(s, file, src, defines, 1, &n, msg, sizeof msg);
    free(src);
    if (!cubin) {
        mq_fail(err, MQ_E_ARG, "cuda: %s", msg);
        return NULL;
    }
    CUmodule mod;
    CUresult r = s->api.ModuleLoadData(&mod, cubin);
    free(cubin);
    if (r) {
        cu_fail(s, err, r, "cuModuleLoadData");
        return NULL;
    }
    module_entry *e;
    if (s->nmods < MAX_MODULES) {
        e = &s->mods[s->nmods++];
    } else { /* a long sweep: the oldest module leaves (no launch holds it) */
        e = &s->mods[s->next_mod];
        s->next_mod = (s->next_mod + 1) % MAX_MODULES;
        s->api.ModuleUnload(e->mod);
    }
    snprintf(e->key, sizeof e->key, "%s", key);
    e->mod = mod;
    return mod;
}

/* ---- buffers ---------------------------------------------------------------------- */

static mq_status ensure(cuda_state *s, dbuf *b, size_t n, mq_error *err)
{
    if (n == 0)
        n = 16;
    if (b->p && b->n >= n)
        return MQ_OK;
    if (b->p)
        s->api.MemFree(b->p);
    b->p = 0;
    b->n = 0;
    CU(s->api.MemAlloc(&b->p, n), "cuMemAlloc");
    b->n = n;
    return MQ_OK;
}

static void free_weights(cuda_state *s, weight_entry *e)
{
    for (int j = 0; j < MQ_MSL_W_COUNT; j++)
        if (e->buf[j])
            s->api.MemFree(e->buf[j]);
    memset(e, 0, sizeof *e);
}

/* The device arrays of a weight set, uploaded once per CPU-side copy. */
static weight_entry *weights_for(cuda_state *s, const mq_weights *w, mq_error *err)
{
    uint64_t print = mq_msl_weights_print(w);
    for (int i = 0; i < s->nweights; i++)
        if (s->weights[i].w == w && s->weights[i].print == print)
            return &s->weights[i];
    weight_entry *e;
    if (s->nweights < MAX_WEIGHTS) {
        e = &s->weights[s->nweights++];
    } else {
        e = &s->weights[s->next_weight];
        s->next_weight = (s->next_weight + 1) % MAX_WEIGHTS;
    }
    free_weights(s, e);
    const void *ptr[MQ_MSL_W_COUNT];
    size_t bytes[MQ_MSL_W_COUNT];
    mq_msl_weight_arrays(w, ptr, bytes);
    for (int i = 0; i < MQ_MSL_W_COUNT; i++) {
        if (!ptr[i])
            continue;
        CUresult r = s->api.MemAlloc(&e->buf[i], bytes[i]);
        if (!r)
            r = s->api.MemcpyHtoD(e->buf[i], ptr[i], bytes[i]);
        if (r) {
            cu_fail(s, err, r, "uploading the weights");
            free_weights(s, e);
            return NULL;
        }
    }
    e->w = w;
    e->print = print;
    return e;
}

/* ---- running ------------------------------------------------------------------------ */

static mq_status launch(cuda_state *s, CUmodule mod, const char *function, void *bufs,
                        unsigned gx, unsigned gy, unsigned gz, unsigned threads, mq_error *err)
{
    char sym[160];
    snprintf(sym, sizeof sym, "mq_cuda_entry_%s", function);
    CUfunction fn;
    CU(s->api.ModuleGetFunction(&fn, mod, sym), sym);
    void *args[] = {bufs};
    CU(s->api.LaunchKernel(fn, gx, gy, gz, threads, 1, 1, 0, NULL, args, NULL), function);
    return MQ_OK;
}

typedef struct {
    CUdeviceptr p[31]; /* metal::mq_cuda_buffers */
} buffers;

static mq_status cuda_run(mq_backend *b, const mq_problem *p, const mq_weights *w,
                          const uint16_t *A, float *C, const mq_candidate *c, const mq_limits *lim,
                          mq_error *err)
{
    cuda_state *s = b->state;
    if (s->broken[0])
        return mq_fail(err, MQ_E_ARG, "cuda: %s", s->broken);
    mq_msl_run_plan rp;
    mq_status st = mq_msl_plan_run(p, c, lim, &rp, err);
    if (st)
        return st;
    const mq_plan plan = rp.plan;
    CU(s->api.CtxSetCurrent(s->ctx), "cuCtxSetCurrent");
    CUmodule gemm = module_for(s, rp.file, rp.defines, err);
    CUmodule red = gemm && plan.k_slices > 1 ? module_for(s, MQ_MSL_REDUCE_FILE, "", err) : NULL;
    if (!gemm || (plan.k_slices > 1 && !red))
        return err->code;
    weight_entry *we = weights_for(s, w, err);
    if (!we)
        return err->code;
    size_t MN = (size_t)p->M * p->N, a_bytes = (size_t)p->M * p->K * 2;
    mq_msl_params mp;
    mq_msl_params_of(p, &plan, w, &mp);
    if ((st = ensure(s, &s->a, a_bytes, err)) || (st = ensure(s, &s->c, MN * 2, err)) ||
        (st = ensure(s, &s->ws, plan.workspace_bytes, err)) ||
        (st = ensure(s, &s->params, sizeof mp, err)))
        return st;
    CU(s->api.MemcpyHtoD(s->a.p, A, a_bytes), "copying A");
    CU(s->api.MemcpyHtoD(s->params.p, &mp, sizeof mp), "copying the parameters");
    /* outputs start as NaN: an element no thread writes cannot pass */
    CU(s->api.MemsetD8(s->c.p, 0xff, MN * 2), "poisoning C");
    if (plan.workspace_bytes)
        CU(s->api.MemsetD8(s->ws.p, 0xff, plan.workspace_bytes), "poisoning the workspace");
    /* the binding of metal.c: A, weights, scales, C, params, then the
     * variant's own buffers from index 5 */
    buffers g = {{s->a.p, we->buf[MQ_MSL_W_CODES], we->buf[MQ_MSL_W_SCALES], s->c.p, s->params.p}};
    for (int i = 0; rp.prog.extra[i] != MQ_BUF_END; i++) {
        int slot = mq_msl_weight_slot_of(rp.prog.extra[i]);
        g.p[5 + i] = slot < 0 ? s->ws.p : we->buf[slot];
    }
    buffers r = {{s->ws.p, s->c.p, s->params.p}};
    CU(s->api.EventRecord(s->ev0, NULL), "cuEventRecord");
    st = launch(s, gemm, rp.function, &g, (unsigned)plan.grid_x, (unsigned)plan.grid_y,
                (unsigned)plan.grid_z, (unsigned)plan.threads_per_tg, err);
    if (!st && red) /* the reduction, after the GEMM on the same stream */
        st = launch(s, red, MQ_MSL_REDUCE_FUNCTION, &r, (unsigned)((MN + 255) / 256), 1, 1, 256,
                    err);
    if (st)
        return st;
    CU(s->api.EventRecord(s->ev1, NULL), "cuEventRecord");
    CU(s->api.EventSynchronize(s->ev1), "running the kernels");
    float ms = 0;
    CU(s->api.EventElapsedTime(&ms, s->ev0, s->ev1), "cuEventElapsedTime");
    s->last_s = ms * 1e-3;
    if (s->c_host_n < MN) {
        uint16_t *h = realloc(s->c_host, MN * 2);
        if (!h)
            return mq_fail(err, MQ_E_NOMEM, "cuda: out of memory for C");
        s->c_host = h;
        s->c_host_n = MN;
    }
    CU(s->api.MemcpyDtoH(s->c_host, s->c.p, MN * 2), "copying C back");
    for (size_t i = 0; i < MN; i++)
        C[i] = mq_half_to_float(s->c_host[i]);
    return MQ_OK;
}

/* A print of MoE weights: the pointers and a sample of each field, so a
 * weight set changed in place is uploaded again. */
static uint64_t moe_print(const mq_moe_weights *mw)
{
    uint64_t h = fnv(14695981039346656037ull, mw, sizeof *mw);
    for (int j = 0; j < MQ_MOE_PROJS; j++) {
        h = fnv(h, mw->indices[j], 64);
        h = fnv(h, mw->tscales[j], 64);
    }
    return h;
}

/* The MoE buffers of a run: the weight fields uploaded once per weight set
 * (again when it changed in place), the inputs copied, out poisoned (an
 * element no thread writes cannot pass); the first nbuf buffers. */
static mq_status moe_setup(cuda_state *s, const mq_moe_weights *mw, const void *const in[4],
                           const size_t *bytes, int nbuf, mq_error *err)
{
    mq_status st;
    uint64_t print = moe_print(mw);
    int upload = s->moe_w != mw || s->moe_print != print;
    for (int i = 0; i < nbuf; i++) {
        int field = i >= MQ_MSL_MOE_INDICES && i <= MQ_MSL_MOE_GRID;
        if (field && !upload && s->moe[i].n >= bytes[i])
            continue;
        if ((st = ensure(s, &s->moe[i], bytes[i], err)))
            return st;
        if (field) {
            void *h = malloc(bytes[i]);
            if (!h)
                return mq_fail(err, MQ_E_NOMEM, "cuda: out of memory for the MoE weights");
            mq_msl_moe_field(mw, (mq_msl_moe_buffer)i, h);
            CUresult r = s->api.MemcpyHtoD(s->moe[i].p, h, bytes[i]);
            free(h);
            if (r)
                return cu_fail(s, err, r, "uploading the MoE weights");
        }
    }
    s->moe_w = mw;
    s->moe_print = print;
    for (int i = 0; i < 4; i++)
        CU(s->api.MemcpyHtoD(s->moe[i].p, in[i], bytes[i]), "copying the MoE inputs");
    CU(s->api.MemsetD8(s->moe[MQ_MSL_MOE_OUT].p, 0xff, bytes[MQ_MSL_MOE_OUT]), "poisoning out");
    return MQ_OK;
}

/* Launch fns[i] with bufs[i] in order between the two events, wait, keep
 * the time, copy out back. */
static mq_status moe_launch_all(cuda_state *s, int n, const CUfunction *fns, const buffers *bufs,
                                const unsigned (*grid)[4], float *out, size_t out_bytes,
                                mq_error *err)
{
    CU(s->api.EventRecord(s->ev0, NULL), "cuEventRecord");
    for (int i = 0; i < n; i++) {
        void *args[] = {(void *)&bufs[i]};
        CU(s->api.LaunchKernel(fns[i], grid[i][0], grid[i][1], grid[i][2], grid[i][3], 1, 1, 0,
                               NULL, args, NULL),
           "launching an MoE kernel");
    }
    CU(s->api.EventRecord(s->ev1, NULL), "cuEventRecord");
    CU(s->api.EventSynchronize(s->ev1), "running the MoE kernels");
    float ms = 0;
    CU(s->api.EventElapsedTime(&ms, s->ev0, s->ev1), "cuEventElapsedTime");
    s->last_s = ms * 1e-3;
    CU(s->api.MemcpyDtoH(out, s->moe[MQ_MSL_MOE_OUT].p, out_bytes), "copying out back");
    return MQ_OK;
}

static mq_status function_of(cuda_state *s, const char *file, const char *defines,
                             const char *function, CUfunction *fn, mq_error *err)
{
    CUmodule mod = module_for(s, file, defines, err);
    if (!mod)
        return err->code;
    char sym[160];
    snprintf(sym, sizeof sym, "mq_cuda_entry_%s", function);
    CU(s->api.ModuleGetFunction(fn, mod, sym), sym);
    return MQ_OK;
}

/* The MoE block's dispatches (route, gate/up/SwiGLU, down, combine),
 * timed together between two events. */
static mq_status cuda_run_moe(mq_backend *b, const mq_moe_problem *p, const mq_moe_weights *mw,
                              const uint16_t *x, const int32_t *ids, const float *probs,
                              float *out, const mq_moe_candidate *c, mq_error *err)
{
    cuda_state *s = b->state;
    if (s->broken[0])
        return mq_fail(err, MQ_E_ARG, "cuda: %s", s->broken);
    mq_msl_moe_plan plan;
    mq_status st = mq_moe_routing_check(p, ids, probs, err);
    if (st || (st = mq_msl_moe_plan_of(p, mw, c, &plan, err)))
        return st;
    CU(s->api.CtxSetCurrent(s->ctx), "cuCtxSetCurrent");
    CUfunction fns[MQ_MSL_MOE_DISPATCHES];
    buffers g[MQ_MSL_MOE_DISPATCHES];
    unsigned grid[MQ_MSL_MOE_DISPATCHES][4];
    for (int k = 0; k < MQ_MSL_MOE_DISPATCHES; k++)
        if ((st = function_of(s, MQ_MSL_MOE_FILE, plan.d[k].defines, plan.d[k].function, &fns[k],
                              err)))
            return st;
    const void *in[4] = {x, ids, probs, &plan.mp};
    if ((st = moe_setup(s, mw, in, plan.bytes, MQ_MSL_MOE_FUSED_NBUF, err)))
        return st;
    for (int k = 0; k < MQ_MSL_MOE_DISPATCHES; k++) {
        memset(&g[k], 0, sizeof g[k]);
        for (int i = 0; i < MQ_MSL_MOE_FUSED_NBUF; i++)
            g[k].p[i] = s->moe[i].p;
        memcpy(grid[k], plan.d[k].grid, sizeof plan.d[k].grid);
        grid[k][3] = plan.d[k].threads;
    }
    return moe_launch_all(s, MQ_MSL_MOE_DISPATCHES, fns, g, (const unsigned(*)[4])grid, out,
                          plan.bytes[MQ_MSL_MOE_OUT], err);
}

/* The unfused baseline (mq_msl_moe_unfused_plan): every module loaded and
 * the dense launches' parameters copied first, then route, gather, the
 * dense kernels per expert, SwiGLU and the weighted sum between two
 * events. */
static mq_status cuda_run_moe_unfused(mq_backend *b, const mq_moe_problem *p,
                                      const mq_moe_weights *mw, const uint16_t *x,
                                      const int32_t *ids, const float *probs, float *out,
                                      const mq_table *dense, mq_error *err)
{
    cuda_state *s = b->state;
    if (s->broken[0])
        return mq_fail(err, MQ_E_ARG, "cuda: %s", s->broken);
    mq_msl_moe_unfused u;
    mq_status st = mq_moe_routing_check(p, ids, probs, err);
    if (st || (st = mq_msl_moe_unfused_plan(p, mw, ids, dense, &u, err)))
        return st;
    CUfunction *fns = calloc((size_t)u.nsteps, sizeof *fns);
    buffers *g = calloc((size_t)u.nsteps, sizeof *g);
    unsigned(*grid)[4] = calloc((size_t)u.nsteps, sizeof *grid);
    if (!fns || !g || !grid) {
        st = mq_fail(err, MQ_E_NOMEM, "cuda: out of memory for %d launches", u.nsteps);
        goto done;
    }
    CUresult r = s->api.CtxSetCurrent(s->ctx);
    if (r) {
        st = cu_fail(s, err, r, "cuCtxSetCurrent");
        goto done;
    }
    for (int k = 0; k < u.nsteps && !st; k++)
        st = function_of(s, u.steps[k].file, u.steps[k].defines, u.steps[k].function, &fns[k],
                         err);
    const void *in[4] = {x, ids, probs, &u.base.mp};
    if (st || (st = moe_setup(s, mw, in, u.base.bytes, MQ_MSL_MOE_NBUF, err)))
        goto done;
    if ((r = s->api.MemcpyHtoD(s->moe[MQ_MSL_MOE_DPARAMS].p, u.dparams, u.dparams_bytes))) {
        st = cu_fail(s, err, r, "copying the dense launches' parameters");
        goto done;
    }
    for (int k = 0; k < u.nsteps; k++) {
        const mq_msl_moe_step *sp = &u.steps[k];
        for (int i = 0; i < (sp->dense ? sp->nbind : MQ_MSL_MOE_NBUF); i++)
            g[k].p[i] = sp->dense ? s->moe[sp->bind[i]].p + sp->off[i] : s->moe[i].p;
        memcpy(grid[k], sp->grid, sizeof sp->grid);
        grid[k][3] = sp->threads;
    }
    st = moe_launch_all(s, u.nsteps, fns, g, (const unsigned(*)[4])grid, out,
                        u.base.bytes[MQ_MSL_MOE_OUT], err);
done:
    free(fns);
    free(g);
    free(grid);
    mq_msl_moe_unfused_free(&u);
    return st;
}

static double cuda_device_time(const mq_backend *b)
{
    return ((const cuda_state *)b->state)->last_s;
}

static mq_status cuda_prepare(mq_backend *b, const mq_weights *w, mq_error *err)
{
    cuda_state *s = b->state;
    if (s->broken[0])
        return mq_fail(err, MQ_E_ARG, "cuda: %s", s->broken);
    CU(s->api.CtxSetCurrent(s->ctx), "cuCtxSetCurrent");
    return weights_for(s, w, err) ? MQ_OK : err->code;
}

/* ---- the device probes ----------------------------------------------------------- */

/* Plain CUDA (no prelude): a streaming read of 16-byte words, every
 * thread's words XOR-ed into a value written only when it matches a key
 * (never), so nothing is optimized away; and eight independent FMA chains
 * per thread. */
static const char probe_source[] =
    "struct u4 { unsigned x, y, z, w; };\n"
    "extern \"C\" __global__ void mq_probe_read(const u4 *p, unsigned long long n, unsigned key,\n"
    "                                           unsigned *out)\n"
    "{\n"
    "    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "    unsigned acc = 0;\n"
    "    for (; i < n; i += stride) {\n"
    "        u4 v = p[i];\n"
    "        acc ^= v.x ^ v.y ^ v.z ^ v.w;\n"
    "    }\n"
    "    if (acc == key)\n"
    "        out[0] = acc;\n"
    "}\n"
    "extern \"C\" __global__ void mq_probe_fma(float *out, int iters, float a, float b)\n"
    "{\n"
    "    float x[8];\n"
    "    for (int j = 0; j < 8; j++)\n"
    "        x[j] = threadIdx.x * 0.001f + j;\n"
    "    for (int i = 0; i < iters; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 8; j++)\n"
    "            x[j] = __fmaf_rn(x[j], a, b);\n"
    "    float s = 0;\n"
    "    for (int j = 0; j < 8; j++)\n"
    "        s += x[j];\n"
    "    if (s == 1234.5f)\n"
    "        out[0] = s;\n"
    "}\n";

static mq_status time_launch(cuda_state *s, CUfunction fn, unsigned grid, unsigned threads,
                             void **args, double *sec, mq_error *err)
{
    CU(s->api.EventRecord(s->ev0, NULL), "cuEventRecord");
    CU(s->api.LaunchKernel(fn, grid, 1, 1, threads, 1, 1, 0, NULL, args, NULL), "a probe");
    CU(s->api.EventRecord(s->ev1, NULL), "cuEventRecord");
    CU(s->api.EventSynchronize(s->ev1), "a probe");
    float ms = 0;
    CU(s->api.EventElapsedTime(&ms, s->ev0, s->ev1), "cuEventElapsedTime");
    *sec = ms * 1e-3;
    return MQ_OK;
}

/* The probe module's two kernels, compiled on first use. */
static mq_status probe_functions(cuda_state *s, CUfunction *rd, CUfunction *fm, mq_error *err)
{
    char msg[1024];
    CU(s->api.CtxSetCurrent(s->ctx), "cuCtxSetCurrent");
    if (!s->probe_mod) {
        size_t n;
        char *cubin = compile(s, "mq_probes.cu", probe_source, "", 0, &n, msg, sizeof msg);
        if (!cubin)
            return mq_fail(err, MQ_E_ARG, "cuda: %s", msg);
        CUresult r = s->api.ModuleLoadData(&s->probe_mod, cubin);
        free(cubin);
        if (r)
            return cu_fail(s, err, r, "loading the probes");
    }
    CU(s->api.ModuleGetFunction(rd, s->probe_mod, "mq_probe_read"), "mq_probe_read");
    CU(s->api.ModuleGetFunction(fm, s->probe_mod, "mq_probe_fma"), "mq_probe_fma");
    return MQ_OK;
}

/* A read of the weights' own size, cold, timed like a candidate: enough
 * copies that each is evicted (twice the L2) before it is read again, each
 * read one launch of the streaming probe between two events; and the same
 * launch with nothing to read. Medians of 15 after one pass of warm-ups. */
static mq_status cuda_probe_read_at(mq_backend *b, size_t bytes, double *gbs, double *empty_s,
                                    mq_error *err)
{
    cuda_state *s = b->state;
    CUfunction rd, fm;
    mq_status st = probe_functions(s, &rd, &fm, err);
    if (st)
        return st;
    size_t stride = (bytes + 4095) & ~(size_t)4095;
    size_t copies = mq_cold_copies(stride, b->cache_bytes);
    if (stride == 0 || copies * stride > ((size_t)4 << 30))
        return mq_fail(err, MQ_E_ARG, "cuda: a %zu-byte read probe does not fit in 4 GiB of copies",
                       bytes);
    CUdeviceptr buf, res;
    CU(s->api.MemAlloc(&buf, copies * stride), "cuMemAlloc (the sized read probe)");
    CUresult r = s->api.MemAlloc(&res, 16);
    if (!r)
        r = s->api.MemsetD8(buf, 0x5a, copies * stride);
    if (r) {
        s->api.MemFree(buf);
        return cu_fail(s, err, r, "the sized read probe's buffers");
    }
    /* the best of three launch shapes (2, 4 or 8 blocks of 512 per SM), so
     * the probe is not held back by one shape that suits big reads */
    enum { REPS = 15 };
    double t_read[REPS], t_empty[REPS], best_read = 1e30, best_empty = 1e30;
    unsigned key = 0x12345678u;
    for (unsigned per_sm = 2; per_sm <= 8 && st == MQ_OK; per_sm *= 2) {
        unsigned grid = (unsigned)s->sms * per_sm;
        for (size_t i = 0; i < copies + REPS && st == MQ_OK; i++) {
            CUdeviceptr p = buf + (i % copies) * stride;
            unsigned long long words = bytes / 16, none = 0;
            void *ra[] = {&p, &words, &key, &res}, *ea[] = {&p, &none, &key, &res};
            double t, te;
            st = time_launch(s, rd, grid, 512, ra, &t, err);
            if (st == MQ_OK)
                st = time_launch(s, rd, grid, 512, ea, &te, err);
            if (st == MQ_OK && i >= copies) {
                t_read[i - copies] = t;
                t_empty[i - copies] = te;
            }
        }
        if (st == MQ_OK) {
            gsl_sort(t_read, 1, REPS);
            gsl_sort(t_empty, 1, REPS);
            best_read = fmin(best_read, gsl_stats_median_from_sorted_data(t_read, 1, REPS));
            best_empty = fmin(best_empty, gsl_stats_median_from_sorted_data(t_empty, 1, REPS));
        }
    }
    s->api.MemFree(buf);
    s->api.MemFree(res);
    if (st)
        return st;
    *gbs = (double)(bytes / 16 * 16) / best_read / 1e9;
    *empty_s = best_empty;
    return MQ_OK;
}

/* The simdgroup-matrix peak as this build maps it (metal/mq_probe_mma.metal
 * through the prelude): 4 blocks of 8 simdgroups per SM, 8 chains each, the
 * best of 5 launches after one warm-up. */
static mq_status probe_mma(cuda_state *s, double *gflops, mq_error *err)
{
    CUmodule mod = module_for(s, "mq_probe_mma.metal", "", err);
    if (!mod)
        return err->code;
    CUfunction fn;
    CU(s->api.ModuleGetFunction(&fn, mod, "mq_cuda_entry_mq_probe_mma"), "mq_probe_mma");
    CUdeviceptr seed, res, it;
    CU(s->api.MemAlloc(&seed, 256 + 16 + 16), "cuMemAlloc (the MMA probe)");
    res = seed + 256;
    it = seed + 272;
    uint16_t h[128];
    for (int i = 0; i < 128; i++) /* small FP16 values: 2^-8 (i % 8 + 1) */
        h[i] = (uint16_t)(0x1c00 + (i % 8) * 0x80);
    unsigned iters = 4096;
    CUresult r = s->api.MemcpyHtoD(seed, h, sizeof h);
    if (!r)
        r = s->api.MemcpyHtoD(it, &iters, sizeof iters);
    mq_status st = MQ_OK;
    if (r)
        st = cu_fail(s, err, r, "the MMA probe's buffers");
    buffers g = {{seed, res, it}};
    void *args[] = {&g};
    double best = 1e30, t;
    unsigned grid = (unsigned)s->sms * 4u;
    for (int i = 0; i < 6 && st == MQ_OK; i++)
        if ((st = time_launch(s, fn, grid, 256, args, &t, err)) == MQ_OK && i && t < best)
            best = t;
    s->api.MemFree(seed);
    if (st == MQ_OK) /* 8 simdgroups x 8 chains x iters x 8x8x8 multiply-adds per block */
        *gflops = 2.0 * 512 * 8 * 8 * (double)iters * grid / best / 1e9;
    return st;
}

static mq_status cuda_probe(mq_backend *b, mq_device_probe *out, mq_error *err)
{
    cuda_state *s = b->state;
    memset(out, 0, sizeof *out);
    CUfunction rd, fm;
    mq_status pst = probe_functions(s, &rd, &fm, err);
    if (pst)
        return pst;
    /* read: 1 GiB, far past any L2, best of 8 passes after one warm-up */
    size_t bytes = (size_t)1 << 30;
    CUdeviceptr buf, res;
    CU(s->api.MemAlloc(&buf, bytes), "cuMemAlloc (the read probe)");
    CUresult r = s->api.MemAlloc(&res, 16);
    if (!r)
        r = s->api.MemsetD8(buf, 0x5a, bytes);
    if (r) {
        s->api.MemFree(buf);
        return cu_fail(s, err, r, "the read probe's buffers");
    }
    unsigned long long words = bytes / 16;
    unsigned key = 0x12345678u;
    void *ra[] = {&buf, &words, &key, &res};
    double best = 1e30, t;
    mq_status st = MQ_OK;
    for (int i = 0; i < 9 && st == MQ_OK; i++)
        if ((st = time_launch(s, rd, (unsigned)s->sms * 8u, 512, ra, &t, err)) == MQ_OK && i && t < best)
            best = t;
    if (st == MQ_OK)
        out->read_gbs = bytes / best / 1e9;
    out->read_bytes = bytes;
    /* FMA: 8 chains x iters per thread, 8 blocks of 512 threads per SM */
    int iters = 8192;
    float fa = 0.999f, fb = 0.001f;
    void *fa_args[] = {&res, &iters, &fa, &fb};
    best = 1e30;
    for (int i = 0; i < 6 && st == MQ_OK; i++)
        if ((st = time_launch(s, fm, (unsigned)s->sms * 8u, 512, fa_args, &t, err)) == MQ_OK && i && t < best)
            best = t;
    if (st == MQ_OK)
        out->fma_gflops = 2.0 * 8 * iters * (double)s->sms * 8 * 512 / best / 1e9;
    s->api.MemFree(buf);
    s->api.MemFree(res);
    if (st == MQ_OK)
        st = probe_mma(s, &out->mma_gflops, err);
    return st;
}

/* ---- opening and closing ------------------------------------------------------- */

static void cuda_close(mq_backend *b)
{
    cuda_state *s = b->state;
    if (s) {
        if (!s->broken[0]) {
            s->api.CtxSetCurrent(s->ctx);
            for (int i = 0; i < s->nmods; i++)
                s->api.ModuleUnload(s->mods[i].mod);
            if (s->probe_mod)
                s->api.ModuleUnload(s->probe_mod);
            for (int i = 0; i < s->nweights; i++)
                free_weights(s, &s->weights[i]);
            dbuf *bs[] = {&s->a, &s->c, &s->ws, &s->params};
            for (int i = 0; i < 4; i++)
                if (bs[i]->p)
                    s->api.MemFree(bs[i]->p);
            for (int i = 0; i < MQ_MSL_MOE_NBUF; i++)
                if (s->moe[i].p)
                    s->api.MemFree(s->moe[i].p);
            if (s->ev0)
                s->api.EventDestroy(s->ev0);
            if (s->ev1)
                s->api.EventDestroy(s->ev1);
        }
        if (s->ctx)
            s->api.DevicePrimaryCtxRelease(s->dev);
        free(s->c_host);
        mq_cuda_api_unload(&s->api);
        free(s);
    }
    free(b);
}

mq_backend *mq_backend_cuda_open(const mq_backend_opts *o, mq_error *err)
{
    (void)o;
    cuda_state *s = calloc(1, sizeof *s);
    mq_backend *b = calloc(1, sizeof *b);
    char why[512];
    if (!s || !b) {
        free(s);
        free(b);
        mq_fail(err, MQ_E_NOMEM, "unavailable: out of memory");
        return NULL;
    }
    b->state = s;
    b->close = cuda_close;
    if (mq_cuda_api_load(&s->api, why, sizeof why)) {
        mq_fail(err, MQ_E_SYSTEM, "%s", why);
        free(s);
        b->state = NULL;
        cuda_close(b);
        return NULL;
    }
    const mq_cuda_api *a = &s->api;
    int count = 0, ordinal = 0;
    const char *env = getenv("MQ_CUDA_DEVICE");
    if (env && *env)
        ordinal = atoi(env);
    CUresult r = a->Init(0);
    if (!r)
        r = a->DeviceGetCount(&count);
    if (r || count == 0 || ordinal < 0 || ordinal >= count) {
        mq_fail(err, MQ_E_SYSTEM, "unavailable: %s",
                r ? mq_cuda_error(a, r)
                  : count == 0 ? "the CUDA driver sees no GPU" : "MQ_CUDA_DEVICE is not a device");
        cuda_close(b);
        return NULL;
    }
    if (!(r = a->DeviceGet(&s->dev, ordinal)) && !(r = a->DevicePrimaryCtxRetain(&s->ctx, s->dev)) &&
        !(r = a->CtxSetCurrent(s->ctx)) && !(r = a->EventCreate(&s->ev0, 0)))
        r = a->EventCreate(&s->ev1, 0);
    int l2 = 0;
    if (!r)
        r = a->DeviceGetName(b->device, (int)sizeof b->device, s->dev);
    if (!r)
        r = a->DeviceGetAttribute(&s->cc_major, MQ_CU_CC_MAJOR, s->dev);
    if (!r)
        r = a->DeviceGetAttribute(&s->cc_minor, MQ_CU_CC_MINOR, s->dev);
    if (!r)
        r = a->DeviceGetAttribute(&s->sms, MQ_CU_SM_COUNT, s->dev);
    if (!r)
        r = a->DeviceGetAttribute(&l2, MQ_CU_L2_BYTES, s->dev);
    if (r) {
        mq_fail(err, MQ_E_SYSTEM, "unavailable: %s", mq_cuda_error(a, r));
        cuda_close(b);
        return NULL;
    }
    const char *mm = getenv("MQ_CUDA_MMA");
    if (mm && *mm && strcmp(mm, "tensor") && strcmp(mm, "fp32")) {
        mq_fail(err, MQ_E_ARG, "MQ_CUDA_MMA must be tensor or fp32, not '%.40s'", mm);
        cuda_close(b);
        return NULL;
    }
    s->mma_fp32 = (mm && !strcmp(mm, "fp32")) || s->cc_major < 8;
    snprintf(b->arch, sizeof b->arch, "sm_%d%d", s->cc_major, s->cc_minor);
    snprintf(s->arch_opt, sizeof s->arch_opt, "--gpu-architecture=sm_%d%d", s->cc_major,
             s->cc_minor);
    b->name = "cuda";
    /* the Metal kernels' arithmetic: FP16 weights, FP16 C (metal/mq_metal.h) */
    b->arith = (mq_backend_arith){.half_weights = 1, .half_output = 1};
    b->cache_bytes = (size_t)l2;
    b->prepare = cuda_prepare;
    b->run = cuda_run;
    b->device_time = cuda_device_time;
    b->probe = cuda_probe;
    b->probe_read_at = cuda_probe_read_at;
    b->run_moe = cuda_run_moe;
    b->run_moe_unfused = cuda_run_moe_unfused;
    s->last_s = -1;
    return b;
}
