/* metal_backend.c - see metal_backend.h. Two halves: what to compile for a
 * candidate (a table from variant and format to source file, kernel and
 * buffer bindings, plus the tuned macros), and the Objective-C runtime
 * bridge that compiles, caches, binds, dispatches and times it. Nothing of
 * the second half has run on Apple hardware from this repository yet (see
 * README "Metal"); on Linux it stops at dlopen and reports unavailable. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chips.h"
#include "metal_backend.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

/* ---- what to compile ---------------------------------------------------- */

/* Buffers after the common ones (0 A, 1 packed/indices, 2 scales/tscales,
 * 3 C, 4 params), in binding order from 5. */
typedef enum { X_END = 0, X_WORKSPACE, X_ZEROS, X_GRID, X_SU, X_SV } extra_buffer;

typedef struct {
    mq_variant v;
    int format; /* -1: any format the variant serves */
    const char *file, *function;
    extra_buffer extra[4];
} program_info;

static const program_info programs[] = {
    {MQ_VAR_MARLIN_FP4, -1, "marlin_gemm_fp4.metal", "marlin_gemm_fp4", {X_END}},
    {MQ_VAR_MARLIN_FP4_STRIPED, -1, "marlin_gemm_fp4_striped.metal", "marlin_gemm_fp4_striped",
     {X_WORKSPACE, X_END}},
    {MQ_VAR_FUSED_FP4, -1, "marlin_gemm_fused.metal", "marlin_gemm_fused_fp4", {X_END}},
    {MQ_VAR_FUSED_U4, -1, "marlin_gemm_fused.metal", "marlin_gemm_fused_u4", {X_ZEROS, X_END}},
    {MQ_VAR_TRELLIS_PACKED, -1, "gemm_trellis.metal", "gemm_trellis_packed",
     {X_GRID, X_SU, X_SV, X_END}},
    {MQ_VAR_TRELLIS_DECODE, -1, "gemm_trellis.metal", "gemm_trellis_packed_decode",
     {X_GRID, X_SU, X_SV, X_END}},
    {MQ_VAR_MLX_SPLITK, MQ_FMT_FP4, "mlx_qmm_splitk.metal", "mlx_qmm_splitk_fp4",
     {X_WORKSPACE, X_END}},
    {MQ_VAR_MLX_SPLITK, MQ_FMT_U4, "mlx_qmm_splitk.metal", "mlx_qmm_splitk_u4",
     {X_WORKSPACE, X_ZEROS, X_END}},
};

static const program_info *program_of(const mq_problem *p, const mq_candidate *c)
{
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++)
        if (programs[i].v == c->variant &&
            (programs[i].format < 0 || programs[i].format == (int)p->format))
            return &programs[i];
    return NULL;
}

int mq_metal_program(const mq_problem *p, const mq_candidate *c, const char **file,
                     const char **function, char *defines, size_t n, char *err, size_t errlen)
{
    const program_info *pi = program_of(p, c);
    const mq_variant_info *vi = mq_variant_get(c->variant);
    if (!pi || !vi || !mq_variant_serves(c->variant, p->format)) {
        snprintf(err, errlen, "no Metal kernel for %s on %s", vi ? vi->name : "(unknown variant)",
                 mq_format_name(p->format));
        return -1;
    }
    *file = pi->file;
    *function = pi->function;
    snprintf(defines, n, "TILE_M=%d TILE_N=%d TILE_K=%d SG_M=%d SG_N=%d TRELLIS_BITS=%d",
             c->p.tile_m, c->p.tile_n, c->p.tile_k, vi->sg_m, vi->sg_n,
             mq_format_is_trellis(p->format) ? mq_format_bits(p->format) : 4);
    return 0;
}

const char *mq_metal_source_dir(void)
{
    const char *d = getenv("MQ_METAL_DIR");
    return d && *d ? d : MQ_SOURCE_DIR "/metal";
}

static char *read_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read the Metal source", path);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0, got;
    char chunk[8192];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + got + 1 > cap) {
            cap = (len + got + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                snprintf(err, errlen, "out of memory reading %s", path);
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, got);
        len += got;
    }
    fclose(f);
    if (!buf && !(buf = calloc(1, 1)))
        snprintf(err, errlen, "out of memory reading %s", path);
    else
        buf[len] = 0;
    return buf;
}

/* Append text to a growing string; -1 on out of memory. */
static int append(char **s, size_t *len, size_t *cap, const char *t, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t nc = (*len + n + 1) * 2;
        char *ns = realloc(*s, nc);
        if (!ns)
            return -1;
        *s = ns;
        *cap = nc;
    }
    memcpy(*s + *len, t, n);
    *len += n;
    (*s)[*len] = 0;
    return 0;
}

/* Expand #include "x" lines (depth-limited: headers have include guards). */
static int expand(const char *file, int depth, char **out, size_t *len, size_t *cap, char *err,
                  size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", mq_metal_source_dir(), file);
    if (depth > 8) {
        snprintf(err, errlen, "%s: #include nested too deeply", path);
        return -1;
    }
    char *text = read_file(path, err, errlen);
    if (!text)
        return -1;
    int rc = 0;
    for (char *line = text; rc == 0 && *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) + 1 : strlen(line);
        char inc[256];
        if (sscanf(line, " #include \"%255[^\"]\"", inc) == 1)
            rc = expand(inc, depth + 1, out, len, cap, err, errlen);
        else if (append(out, len, cap, line, n))
            rc = -1, snprintf(err, errlen, "out of memory reading %s", path);
        line += n;
    }
    free(text);
    return rc;
}

char *mq_metal_source(const char *file, char *err, size_t errlen)
{
    char *out = NULL;
    size_t len = 0, cap = 0;
    if (expand(file, 0, &out, &len, &cap, err, errlen)) {
        free(out);
        return NULL;
    }
    return out;
}

/* ---- the Objective-C runtime bridge ------------------------------------- */

typedef void *id;
typedef void *SEL;
typedef unsigned long NSUInteger;
typedef struct {
    NSUInteger width, height, depth;
} MTLSize;

/* The runtime's entry points and the classes used. */
typedef struct {
    void *objc, *foundation, *metal;
    id (*get_class)(const char *);
    SEL (*sel)(const char *);
    void (*msg)(void); /* objc_msgSend, cast at each call to the method's type */
    void *(*pool_push)(void);
    void (*pool_pop)(void *);
    id (*create_device)(void);
} objc_rt;

/* objc_msgSend cast to a method's C function type (the arm64 ABI passes
 * arguments and returns exactly as for that C function). */
#define MSG(rt, ret, ...) ((ret(*)(id, SEL, __VA_ARGS__))(void (*)(void))(rt)->msg)
#define MSG0(rt, ret) ((ret(*)(id, SEL))(void (*)(void))(rt)->msg)

static id send0(const objc_rt *rt, id obj, const char *sel)
{
    return MSG0(rt, id)(obj, rt->sel(sel));
}

static id nsstring(const objc_rt *rt, const char *s)
{
    return MSG(rt, id, const char *)(rt->get_class("NSString"), rt->sel("stringWithUTF8String:"),
                                     s);
}

static const char *cstring(const objc_rt *rt, id str)
{
    return str ? MSG0(rt, const char *)(str, rt->sel("UTF8String")) : "";
}

static const char *error_text(const objc_rt *rt, id error)
{
    return error ? cstring(rt, send0(rt, error, "localizedDescription")) : "no error object";
}

#define MAX_PIPELINES 64
#define MAX_WEIGHTS 8

typedef struct {
    char key[160];
    id pipeline;
    NSUInteger max_threads;
} pipeline_entry;

typedef struct {
    const mq_weights *w; /* identity of the CPU-side copy ... */
    uint64_t print;      /* ... and of its contents (memory is reused across problems) */
    id buf[8];           /* packed/indices, scales/tscales, zeros, grid, su, sv */
} weight_entry;

typedef struct {
    objc_rt rt;
    id device, queue;
    pipeline_entry pipes[MAX_PIPELINES];
    int npipes;
    weight_entry weights[MAX_WEIGHTS];
    int nweights, next_weight;
    id a_buf, c_buf, ws_buf;
    size_t a_bytes, c_bytes, ws_bytes;
} metal_state;

static void *open_first(const char *const *paths)
{
    for (int i = 0; paths[i]; i++) {
        void *h = dlopen(paths[i], RTLD_LAZY | RTLD_GLOBAL);
        if (h)
            return h;
    }
    return NULL;
}

/* Load the runtime; -1 with the reason when this system has no Metal. */
static int rt_load(objc_rt *rt, char *why, size_t n)
{
    static const char *const objc_paths[] = {"/usr/lib/libobjc.A.dylib", "libobjc.A.dylib", NULL};
    static const char *const foundation_paths[] = {
        "/System/Library/Frameworks/Foundation.framework/Foundation", NULL};
    static const char *const metal_paths[] = {"/System/Library/Frameworks/Metal.framework/Metal",
                                              NULL};
    memset(rt, 0, sizeof *rt);
    rt->metal = open_first(metal_paths);
    if (!rt->metal) {
        snprintf(why, n, "unavailable: no Metal framework (%s; Metal runs only on macOS with an "
                         "Apple GPU)",
                 metal_paths[0]);
        return -1;
    }
    rt->objc = open_first(objc_paths);
    rt->foundation = open_first(foundation_paths);
    if (!rt->objc || !rt->foundation) {
        snprintf(why, n, "unavailable: Metal is present but %s is not",
                 rt->objc ? "Foundation" : "libobjc");
        return -1;
    }
    *(void **)&rt->get_class = dlsym(rt->objc, "objc_getClass");
    *(void **)&rt->sel = dlsym(rt->objc, "sel_registerName");
    *(void **)&rt->msg = dlsym(rt->objc, "objc_msgSend");
    *(void **)&rt->pool_push = dlsym(rt->objc, "objc_autoreleasePoolPush");
    *(void **)&rt->pool_pop = dlsym(rt->objc, "objc_autoreleasePoolPop");
    *(void **)&rt->create_device = dlsym(rt->metal, "MTLCreateSystemDefaultDevice");
    if (!rt->get_class || !rt->sel || !rt->msg || !rt->pool_push || !rt->pool_pop ||
        !rt->create_device) {
        snprintf(why, n, "unavailable: the Objective-C runtime lacks an entry point");
        return -1;
    }
    return 0;
}

static void release(const objc_rt *rt, id obj)
{
    if (obj)
        MSG0(rt, void)(obj, rt->sel("release"));
}

/* A shared-storage buffer of at least `bytes`, reused while big enough. */
static int ensure_buffer(metal_state *s, id *buf, size_t *have, size_t bytes)
{
    if (*buf && *have >= bytes)
        return 0;
    release(&s->rt, *buf);
    *buf = MSG(&s->rt, id, NSUInteger, NSUInteger)(s->device,
                                                  s->rt.sel("newBufferWithLength:options:"),
                                                  bytes ? bytes : 16, 0 /* shared */);
    *have = *buf ? bytes : 0;
    return *buf ? 0 : -1;
}

static id buffer_with(metal_state *s, const void *bytes, size_t n)
{
    if (!bytes)
        return NULL;
    return MSG(&s->rt, id, const void *, NSUInteger, NSUInteger)(
        s->device, s->rt.sel("newBufferWithBytes:length:options:"), bytes, n, 0);
}

/* FNV-1a over bytes sampled evenly from an array (n bytes): cheap enough
 * for every run, and different for a new weight set that happens to be
 * allocated where a freed one was. */
static uint64_t sample_print(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; b && n && i < 512; i++) {
        h ^= b[i * (n - 1) / 511];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t weights_print(const mq_weights *w)
{
    size_t K = (size_t)w->K, N = (size_t)w->N, G = K / (size_t)w->group;
    uint64_t h = 14695981039346656037ull ^ (uint64_t)w->format ^ ((uint64_t)K << 8) ^
                 ((uint64_t)N << 32) ^ ((uint64_t)w->group << 56);
    if (mq_format_is_trellis(w->format)) {
        h = sample_print(h, w->indices, ((K + 15) / 16) * ((N + 15) / 16) *
                                            (size_t)mq_trellis_tile_bytes(mq_format_bits(w->format)));
        h = sample_print(h, w->tscales, G * N * sizeof(float));
        h = sample_print(h, w->su, K * sizeof(float));
        h = sample_print(h, w->sv, N * sizeof(float));
    } else {
        h = sample_print(h, w->packed, K / 8 * N * sizeof(uint32_t));
        h = sample_print(h, w->scales, G * N * sizeof(uint16_t));
        if (w->format == MQ_FMT_U4)
            h = sample_print(h, w->zeros, G * N);
    }
    return h;
}

/* The device buffers of a weight set, uploaded once per CPU-side copy (the
 * harness rotates a few copies; each stays resident). */
static weight_entry *weights_for(metal_state *s, const mq_weights *w, mq_error *err)
{
    uint64_t print = weights_print(w);
    for (int i = 0; i < s->nweights; i++)
        if (s->weights[i].w == w && s->weights[i].print == print)
            return &s->weights[i];
    weight_entry *e;
    if (s->nweights < MAX_WEIGHTS) {
        e = &s->weights[s->nweights++];
    } else { /* evict round-robin */
        e = &s->weights[s->next_weight];
        s->next_weight = (s->next_weight + 1) % MAX_WEIGHTS;
        for (int j = 0; j < 8; j++)
            release(&s->rt, e->buf[j]);
    }
    memset(e, 0, sizeof *e);
    e->w = w;
    e->print = print;
    size_t K = (size_t)w->K, N = (size_t)w->N, G = K / (size_t)w->group;
    if (mq_format_is_trellis(w->format)) {
        size_t tiles = ((K + 15) / 16) * ((N + 15) / 16);
        e->buf[0] = buffer_with(s, w->indices,
                                tiles * (size_t)mq_trellis_tile_bytes(mq_format_bits(w->format)));
        e->buf[1] = buffer_with(s, w->tscales, G * N * sizeof(float));
        e->buf[3] = buffer_with(s, w->grid, (size_t)w->n_levels * sizeof(float));
        e->buf[4] = buffer_with(s, w->su, K * sizeof(float));
        e->buf[5] = buffer_with(s, w->sv, N * sizeof(float));
    } else {
        e->buf[0] = buffer_with(s, w->packed, K / 8 * N * sizeof(uint32_t));
        e->buf[1] = buffer_with(s, w->scales, G * N * sizeof(uint16_t));
        if (w->format == MQ_FMT_U4)
            e->buf[2] = buffer_with(s, w->zeros, G * N);
    }
    if (!e->buf[0] || !e->buf[1]) {
        mq_fail(err, MQ_E_NOMEM, "metal: cannot allocate the weight buffers");
        e->w = NULL;
        return NULL;
    }
    return e;
}

/* A compiled pipeline for (file, function, defines), cached. */
static pipeline_entry *pipeline_for(metal_state *s, const char *file, const char *function,
                                    const char *defines, mq_error *err)
{
    char key[160];
    snprintf(key, sizeof key, "%s %s", function, defines);
    for (int i = 0; i < s->npipes; i++)
        if (!strcmp(s->pipes[i].key, key))
            return &s->pipes[i];
    if (s->npipes == MAX_PIPELINES) { /* a long sweep: start the cache over */
        for (int i = 0; i < s->npipes; i++)
            release(&s->rt, s->pipes[i].pipeline);
        s->npipes = 0;
    }
    const objc_rt *rt = &s->rt;
    char msg[512];
    char *src = mq_metal_source(file, msg, sizeof msg);
    if (!src) {
        mq_fail(err, MQ_E_ARG, "metal: %s", msg);
        return NULL;
    }
    /* the tuned macros as MTLCompileOptions.preprocessorMacros */
    id keys[8], vals[8];
    int nm = 0;
    char name[32];
    int value, used = 0;
    const char *d = defines;
    while (nm < 8 && sscanf(d, " %31[^=]=%d%n", name, &value, &used) == 2) {
        keys[nm] = nsstring(rt, name);
        vals[nm] = MSG(rt, id, int)(rt->get_class("NSNumber"), rt->sel("numberWithInt:"), value);
        nm++;
        d += used;
    }
    id dict = MSG(rt, id, const id *, const id *, NSUInteger)(
        rt->get_class("NSDictionary"), rt->sel("dictionaryWithObjects:forKeys:count:"), vals, keys,
        (NSUInteger)nm);
    id opts = send0(rt, send0(rt, (id)rt->get_class("MTLCompileOptions"), "alloc"), "init");
    MSG(rt, void, id)(opts, rt->sel("setPreprocessorMacros:"), dict);
    id error = NULL;
    id lib = MSG(rt, id, id, id, id *)(s->device, rt->sel("newLibraryWithSource:options:error:"),
                                       nsstring(rt, src), opts, &error);
    free(src);
    release(rt, opts);
    if (!lib) {
        mq_fail(err, MQ_E_ARG, "metal: %s (%s) does not compile: %.300s", file, defines,
                error_text(rt, error));
        return NULL;
    }
    id fn = MSG(rt, id, id)(lib, rt->sel("newFunctionWithName:"), nsstring(rt, function));
    id pso = fn ? MSG(rt, id, id, id *)(s->device,
                                        rt->sel("newComputePipelineStateWithFunction:error:"), fn,
                                        &error)
                : NULL;
    release(rt, fn);
    release(rt, lib);
    if (!pso) {
        mq_fail(err, MQ_E_ARG, "metal: no pipeline for %s: %.300s", function,
                fn ? error_text(rt, error) : "no such function");
        return NULL;
    }
    pipeline_entry *e = &s->pipes[s->npipes++];
    snprintf(e->key, sizeof e->key, "%s", key);
    e->pipeline = pso;
    e->max_threads = MSG0(rt, NSUInteger)(pso, rt->sel("maxTotalThreadsPerThreadgroup"));
    return e;
}

/* The kernels' MqParams (metal/mq_metal.h), field for field. */
typedef struct {
    uint32_t M, N, K, group, m_tiles, n_tiles, k_slices, k_slice_len, num_tgs, work_per_tg,
        n_levels;
} mq_metal_params;

static void encode(const objc_rt *rt, id enc, id pso, MTLSize grid, MTLSize threads)
{
    MSG(rt, void, id)(enc, rt->sel("setComputePipelineState:"), pso);
    MSG(rt, void, MTLSize, MTLSize)(enc, rt->sel("dispatchThreadgroups:threadsPerThreadgroup:"),
                                    grid, threads);
}

static void set_buffer(const objc_rt *rt, id enc, id buf, NSUInteger index)
{
    MSG(rt, void, id, NSUInteger, NSUInteger)(enc, rt->sel("setBuffer:offset:atIndex:"), buf, 0,
                                              index);
}

static mq_status metal_run(mq_backend *b, const mq_problem *p, const mq_weights *w,
                           const uint16_t *A, float *C, const mq_candidate *c,
                           const mq_limits *lim, mq_error *err)
{
    metal_state *s = b->state;
    const objc_rt *rt = &s->rt;
    mq_plan plan;
    mq_status st = mq_plan_candidate(p, c, lim, &plan, err);
    if (st)
        return st;
    const char *file, *function;
    char defines[160], msg[256];
    if (mq_metal_program(p, c, &file, &function, defines, sizeof defines, msg, sizeof msg))
        return mq_fail(err, MQ_E_ILLEGAL, "%s", msg);
    void *pool = rt->pool_push();
    st = MQ_OK;
    pipeline_entry *pe = pipeline_for(s, file, function, defines, err);
    pipeline_entry *re = plan.k_slices > 1 ? pipeline_for(s, "marlin_gemm_fp4_striped.metal",
                                                          "marlin_splitk_reduce", "", err)
                                           : NULL;
    weight_entry *we = pe && (re || plan.k_slices == 1) ? weights_for(s, w, err) : NULL;
    size_t MN = (size_t)p->M * p->N;
    if (!we) {
        st = err ? err->code : MQ_E_ARG;
    } else if ((NSUInteger)plan.threads_per_tg > pe->max_threads) {
        st = mq_fail(err, MQ_E_ILLEGAL, "%d threads per threadgroup exceed the pipeline's %lu",
                     plan.threads_per_tg, (unsigned long)pe->max_threads);
    } else if (ensure_buffer(s, &s->a_buf, &s->a_bytes, (size_t)p->M * p->K * 2) ||
               ensure_buffer(s, &s->c_buf, &s->c_bytes, MN * 2) ||
               ensure_buffer(s, &s->ws_buf, &s->ws_bytes, plan.workspace_bytes)) {
        st = mq_fail(err, MQ_E_NOMEM, "metal: cannot allocate the A, C or workspace buffers");
    }
    if (st == MQ_OK) {
        memcpy(MSG0(rt, void *)(s->a_buf, rt->sel("contents")), A, (size_t)p->M * p->K * 2);
        mq_metal_params mp = {(uint32_t)p->M, (uint32_t)p->N, (uint32_t)p->K,
                              (uint32_t)p->group, (uint32_t)plan.m_tiles, (uint32_t)plan.n_tiles,
                              (uint32_t)plan.k_slices, (uint32_t)plan.k_slice_len,
                              (uint32_t)plan.threadgroups, (uint32_t)plan.work_per_tg,
                              (uint32_t)w->n_levels};
        id cb = send0(rt, s->queue, "commandBuffer");
        id enc = send0(rt, cb, "computeCommandEncoder");
        const program_info *pi = program_of(p, c);
        set_buffer(rt, enc, s->a_buf, 0);
        set_buffer(rt, enc, we->buf[0], 1);
        set_buffer(rt, enc, we->buf[1], 2);
        set_buffer(rt, enc, s->c_buf, 3);
        MSG(rt, void, const void *, NSUInteger, NSUInteger)(enc, rt->sel("setBytes:length:atIndex:"),
                                                            &mp, sizeof mp, 4);
        for (int i = 0; pi->extra[i] != X_END; i++) {
            id x = pi->extra[i] == X_WORKSPACE ? s->ws_buf
                   : pi->extra[i] == X_ZEROS   ? we->buf[2]
                   : pi->extra[i] == X_GRID    ? we->buf[3]
                   : pi->extra[i] == X_SU      ? we->buf[4]
                                               : we->buf[5];
            set_buffer(rt, enc, x, (NSUInteger)(5 + i));
        }
        encode(rt, enc, pe->pipeline,
               (MTLSize){(NSUInteger)plan.grid_x, (NSUInteger)plan.grid_y,
                         (NSUInteger)plan.grid_z},
               (MTLSize){(NSUInteger)plan.threads_per_tg, 1, 1});
        if (re) { /* the reduction: the command buffer orders it after the GEMM */
            set_buffer(rt, enc, s->ws_buf, 0);
            set_buffer(rt, enc, s->c_buf, 1);
            MSG(rt, void, const void *, NSUInteger, NSUInteger)(
                enc, rt->sel("setBytes:length:atIndex:"), &mp, sizeof mp, 2);
            encode(rt, enc, re->pipeline, (MTLSize){(NSUInteger)((MN + 255) / 256), 1, 1},
                   (MTLSize){256, 1, 1});
        }
        MSG0(rt, void)(enc, rt->sel("endEncoding"));
        MSG0(rt, void)(cb, rt->sel("commit"));
        MSG0(rt, void)(cb, rt->sel("waitUntilCompleted"));
        long status = MSG0(rt, long)(cb, rt->sel("status"));
        if (status != 4 /* MTLCommandBufferStatusCompleted */) {
            st = mq_fail(err, MQ_E_ARG, "metal: the command buffer failed: %.300s",
                         error_text(rt, send0(rt, cb, "error")));
        } else {
            b->last_device_s = MSG0(rt, double)(cb, rt->sel("GPUEndTime")) -
                               MSG0(rt, double)(cb, rt->sel("GPUStartTime"));
            const uint16_t *out = MSG0(rt, const uint16_t *)(s->c_buf, rt->sel("contents"));
            for (size_t i = 0; i < MN; i++)
                C[i] = mq_half_to_float(out[i]);
        }
    }
    rt->pool_pop(pool);
    return st;
}

static int metal_available(mq_backend *b, char *why, size_t n)
{
    (void)b;
    (void)why;
    (void)n;
    return 0; /* a backend that exists was created on a working device */
}

static void metal_destroy(mq_backend *b)
{
    metal_state *s = b->state;
    if (s) {
        for (int i = 0; i < s->npipes; i++)
            release(&s->rt, s->pipes[i].pipeline);
        for (int i = 0; i < s->nweights; i++)
            for (int j = 0; j < 8; j++)
                release(&s->rt, s->weights[i].buf[j]);
        release(&s->rt, s->a_buf);
        release(&s->rt, s->c_buf);
        release(&s->rt, s->ws_buf);
        release(&s->rt, s->queue);
        release(&s->rt, s->device);
        free(s);
    }
    free(b);
}

mq_backend *mq_backend_metal_create(char *why, size_t n)
{
    metal_state *s = calloc(1, sizeof *s);
    mq_backend *b = calloc(1, sizeof *b);
    if (!s || !b) {
        free(s);
        free(b);
        snprintf(why, n, "unavailable: out of memory");
        return NULL;
    }
    if (rt_load(&s->rt, why, n)) {
        free(s);
        free(b);
        return NULL;
    }
    const objc_rt *rt = &s->rt;
    void *pool = rt->pool_push();
    s->device = rt->create_device();
    if (!s->device) {
        snprintf(why, n, "unavailable: MTLCreateSystemDefaultDevice returned no device");
    } else {
        s->queue = send0(rt, s->device, "newCommandQueue");
        /* the architecture name (macOS 14+: device.architecture.name) picks the chip */
        char arch[64] = "";
        id archobj = MSG(rt, int, SEL)(s->device, rt->sel("respondsToSelector:"),
                                       rt->sel("architecture"))
                         ? send0(rt, s->device, "architecture")
                         : NULL;
        if (archobj)
            snprintf(arch, sizeof arch, "%s", cstring(rt, send0(rt, archobj, "name")));
        snprintf(b->device, sizeof b->device, "%s (%s)",
                 cstring(rt, send0(rt, s->device, "name")), arch[0] ? arch : "no architecture name");
        mq_chip_db db;
        mq_chip chip;
        char err[512];
        if (mq_chips_load(mq_chips_default_path(), &db, err, sizeof err) == 0) {
            if (mq_chip_from_device(&db, cstring(rt, send0(rt, s->device, "name")), arch, &chip,
                                    err, sizeof err) == 0)
                snprintf(b->chip, sizeof b->chip, "%s", chip.name);
            mq_chips_free(&db);
        }
    }
    rt->pool_pop(pool);
    if (!s->device || !s->queue) {
        if (s->device)
            snprintf(why, n, "unavailable: the device gave no command queue");
        release(rt, s->device);
        free(s);
        free(b);
        return NULL;
    }
    b->name = "metal";
    b->available = metal_available;
    b->run = metal_run;
    b->destroy = metal_destroy;
    b->state = s;
    b->last_device_s = -1;
    return b;
}
