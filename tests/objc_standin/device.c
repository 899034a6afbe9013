/* device.c - the stand-in's MTLDevice and what it makes: compile options,
 * libraries compiled from MSL source by the MSL executor (the options'
 * macros as -D flags, and fast math as -ffast-math when the options leave
 * it on, as Metal does by default), functions, compute pipelines (with the
 * maxTotalThreadsPerThreadgroup and threadExecutionWidth a fault may lower),
 * and shared-storage buffers backed by the executor's guarded buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msl_exec.h"
#include "standin.h"

typedef struct {
    so_object o;
    id macros;          /* NSDictionary, retained */
    int fast_math_off;  /* setFastMathEnabled:NO or setMathMode:Safe (default: on) */
    NSUInteger language_version; /* 0: not set */
} so_options;

typedef struct {
    so_object o;
    mq_msl_module *m;
} so_library;

typedef struct {
    so_object o;
    id library; /* retained: the module the kernel lives in */
    char name[96];
} so_function;

typedef struct {
    so_object o;
    id function; /* retained */
    NSUInteger max_threads, simd_width;
} so_pipeline;

typedef struct {
    so_object o;
    mq_msl_buffer b;
} so_buffer;

typedef struct {
    so_object o;
    id name; /* NSString */
} so_device;

size_t so_instance_size(const char *cls)
{
    return !strcmp(cls, "MTLCompileOptions") ? sizeof(so_options) : 0;
}

/* ---- devices ----------------------------------------------------------------- */

static void device_dealloc(so_object *o) { so_release(((so_device *)o)->name); }

static id new_device(void)
{
    so_device *d = so_new("MTLDevice", sizeof *d, device_dealloc);
    d->name = so_string_new(so_cfg.device);
    return d;
}

/* MTLCreateSystemDefaultDevice: +1 (the Create rule); nil for a
 * command-line tool without a window server session, as public reports say
 * happens (fault no-default-device). */
id MTLCreateSystemDefaultDevice(void)
{
    return so_cfg.no_default_device || so_cfg.no_device ? NULL : new_device();
}

id MTLCopyAllDevices(void)
{
    if (so_cfg.no_device)
        return so_array_new(NULL, 0);
    id d = new_device();
    id all = so_array_new(&d, 1);
    so_release(d);
    return all;
}

/* ---- compile options --------------------------------------------------------- */

static void options_dealloc(so_object *o)
{
    so_options *opt = (so_options *)o;
    if (opt->macros)
        so_release(opt->macros);
}

SO_PROTO0(options_init, id);
SO_PROTO(options_set_macros, void, id);
SO_PROTO(options_set_fast_math, void, BOOL);
SO_PROTO(options_set_math_mode, void, long);
SO_PROTO(options_set_language, void, NSUInteger);

static id options_init(id self, SEL cmd)
{
    (void)cmd;
    ((so_object *)self)->dealloc = options_dealloc;
    return self;
}

static void options_set_macros(id self, SEL cmd, id dict)
{
    (void)cmd;
    so_options *opt = self;
    if (dict && so_dict_count(dict) < 0)
        so_violation("-[MTLCompileOptions setPreprocessorMacros:] of something not a dictionary");
    if (dict)
        so_retain(dict);
    if (opt->macros)
        so_release(opt->macros);
    opt->macros = dict;
}

static void options_set_fast_math(id self, SEL cmd, BOOL on)
{
    (void)cmd;
    ((so_options *)self)->fast_math_off = !on;
}

static void options_set_math_mode(id self, SEL cmd, long mode)
{
    (void)cmd;
    if (so_cfg.macos < 15)
        so_violation("-[MTLCompileOptions setMathMode:] on macOS %d (unrecognized selector)",
                     so_cfg.macos);
    if (mode < 0 || mode > 2)
        so_violation("-[MTLCompileOptions setMathMode:%ld]: not an MTLMathMode", mode);
    ((so_options *)self)->fast_math_off = mode == 0; /* MTLMathModeSafe */
}

static void options_set_language(id self, SEL cmd, NSUInteger v)
{
    (void)cmd;
    ((so_options *)self)->language_version = v;
}

/* ---- libraries, functions, pipelines ------------------------------------------- */

static void library_dealloc(so_object *o) { mq_msl_module_free(((so_library *)o)->m); }
static void function_dealloc(so_object *o) { so_release(((so_function *)o)->library); }
static void pipeline_dealloc(so_object *o) { so_release(((so_pipeline *)o)->function); }

/* "A=1 B=2" from the options' NSDictionary of NSString -> NSNumber. */
static void macro_flags(const so_options *opt, char *out, size_t n)
{
    size_t k = 0;
    out[0] = 0;
    int count = opt && opt->macros ? so_dict_count(opt->macros) : 0;
    for (int i = 0; i < count; i++) {
        id key, val;
        long long v;
        so_dict_at(opt->macros, i, &key, &val);
        const char *name = so_string_utf8(key);
        if (!name || so_number_value(val, &v))
            so_violation("preprocessorMacros: a key that is not an NSString or a value that is "
                         "not an NSNumber");
        k += (size_t)snprintf(out + k, k < n ? n - k : 0, "%s%s=%lld", k ? " " : "", name, v);
    }
    if (k >= n)
        so_violation("preprocessorMacros longer than %zu bytes", n);
}

/* A long log whose error comes after 300 characters of warnings, as
 * Metal's compiler logs do (fault compile-error). */
static const char planted_log[] =
    "program_source:3:10: warning: unused variable 'mq_w0' [-Wunused-variable]\n"
    "program_source:4:10: warning: unused variable 'mq_w1' [-Wunused-variable]\n"
    "program_source:5:10: warning: unused variable 'mq_w2' [-Wunused-variable]\n"
    "program_source:6:10: warning: unused variable 'mq_w3' [-Wunused-variable]\n"
    "program_source:7:10: warning: unused variable 'mq_w4' [-Wunused-variable]\n"
    "program_source:77:5: error: use of undeclared identifier 'mq_planted_fault'\n"
    "    mq_planted_fault = 1;\n    ^\n";

SO_PROTO(device_new_library, id, id, id, id *);
SO_PROTO(library_new_function, id, id);
SO_PROTO(device_new_pipeline, id, id, id *);

static id device_new_library(id self, SEL cmd, id source, id options, id *error)
{
    (void)self, (void)cmd;
    const char *src = so_string_utf8(source);
    if (!src || (options && !so_is(options, "MTLCompileOptions")))
        so_violation("-[MTLDevice newLibraryWithSource:options:error:] with a source that is not "
                     "an NSString or options that are not MTLCompileOptions");
    const so_options *opt = options;
    char defines[1024], err[1024];
    macro_flags(opt, defines, sizeof defines);
    int fast = !opt || !opt->fast_math_off;
    so_count.compiles++;
    so_count.compiles_fast_math += fast;
    so_count.language_version = opt ? (long)opt->language_version : 0;
    mq_msl_compile_opts co = {NULL, fast ? "-ffast-math" : "", NULL};
    mq_msl_module *m = so_cfg.compile_error
                           ? NULL
                           : mq_msl_module_load("program_source", src, defines, &co, err, sizeof err);
    if (!m) {
        if (error)
            *error = so_autorelease(so_error_new(so_cfg.compile_error ? planted_log : err));
        return NULL;
    }
    so_library *lib = so_new("MTLLibrary", sizeof *lib, library_dealloc);
    lib->m = m;
    return lib;
}

static id library_new_function(id self, SEL cmd, id name)
{
    (void)cmd;
    const char *fn = so_string_utf8(name);
    unsigned used;
    if (!fn || !mq_msl_kernel(((so_library *)self)->m, fn, &used))
        return NULL;
    so_function *f = so_new("MTLFunction", sizeof *f, function_dealloc);
    f->library = so_retain(self);
    snprintf(f->name, sizeof f->name, "%s", fn);
    return f;
}

static id device_new_pipeline(id self, SEL cmd, id function, id *error)
{
    (void)self, (void)cmd, (void)error;
    if (!so_is(function, "MTLFunction"))
        so_violation("-[MTLDevice newComputePipelineStateWithFunction:error:] of a non-function");
    so_pipeline *p = so_new("MTLComputePipelineState", sizeof *p, pipeline_dealloc);
    p->function = so_retain(function);
    p->max_threads = so_cfg.pipeline_max > 0 ? (NSUInteger)so_cfg.pipeline_max : 1024;
    p->simd_width = so_cfg.simd_width > 0 ? (NSUInteger)so_cfg.simd_width : MQ_MSL_SIMD_WIDTH;
    return p;
}

SO_PROTO0(pipeline_max_threads, NSUInteger);
SO_PROTO0(pipeline_simd_width, NSUInteger);
SO_PROTO0(pipeline_static_tg_mem, NSUInteger);
static NSUInteger pipeline_max_threads(id self, SEL cmd) { return (void)cmd, ((so_pipeline *)self)->max_threads; }
static NSUInteger pipeline_simd_width(id self, SEL cmd) { return (void)cmd, ((so_pipeline *)self)->simd_width; }
/* The executor sizes threadgroup memory when a launch runs, not before: 0
 * here, and a launch past the limit fails its command buffer. */
static NSUInteger pipeline_static_tg_mem(id self, SEL cmd) { return (void)self, (void)cmd, 0; }

/* The module and kernel a pipeline runs (commands.c). */
int so_pipeline_kernel(id pso, const mq_msl_module **m, const char **name, NSUInteger *max_threads)
{
    if (!so_is(pso, "MTLComputePipelineState"))
        return -1;
    const so_pipeline *p = pso;
    const so_function *f = p->function;
    *m = ((const so_library *)f->library)->m;
    *name = f->name;
    *max_threads = p->max_threads;
    return 0;
}

/* ---- buffers -------------------------------------------------------------------- */

static long allocations;

static void buffer_dealloc(so_object *o)
{
    so_buffer *b = (so_buffer *)o;
    so_count.buffer_bytes -= b->b.bytes;
    mq_msl_buffer_free(&b->b);
}

/* A shared-storage buffer of n bytes (a copy of src when given); nil when
 * the fault says this allocation fails, as a Mac's does past its memory. */
static id new_buffer(const void *src, NSUInteger n, NSUInteger options)
{
    allocations++;
    if ((so_cfg.alloc_fail && allocations == so_cfg.alloc_fail) ||
        (so_cfg.alloc_fail_from && allocations >= so_cfg.alloc_fail_from)) {
        so_count.buffers_failed++;
        return NULL;
    }
    if ((options & 0xf0) >> 4 != MQ_MTL_STORAGE_SHARED)
        so_violation("a buffer with storage mode %lu: the stand-in, like metal.c, reads every "
                     "buffer from the CPU (MTLResourceStorageModeShared)",
                     (unsigned long)((options & 0xf0) >> 4));
    so_buffer *b = so_new("MTLBuffer", sizeof *b, buffer_dealloc);
    char err[256];
    if (mq_msl_buffer_alloc(&b->b, n ? n : 1, err, sizeof err))
        so_violation("%s", err);
    if (src)
        memcpy(b->b.data, src, n);
    so_count.buffers_made++;
    so_count.buffer_bytes += b->b.bytes;
    so_count.buffer_bytes_made += b->b.bytes;
    if (so_count.buffer_bytes > so_count.peak_buffer_bytes)
        so_count.peak_buffer_bytes = so_count.buffer_bytes;
    return b;
}

mq_msl_buffer *so_buffer_storage(id buf)
{
    return so_is(buf, "MTLBuffer") ? &((so_buffer *)buf)->b : NULL;
}

SO_PROTO(device_new_buffer, id, NSUInteger, NSUInteger);
SO_PROTO(device_new_buffer_bytes, id, const void *, NSUInteger, NSUInteger);
SO_PROTO0(buffer_contents, void *);
SO_PROTO0(buffer_length, NSUInteger);

static id device_new_buffer(id self, SEL cmd, NSUInteger n, NSUInteger options)
{
    return (void)self, (void)cmd, new_buffer(NULL, n, options);
}

static id device_new_buffer_bytes(id self, SEL cmd, const void *src, NSUInteger n,
                                  NSUInteger options)
{
    (void)self, (void)cmd;
    if (!src)
        so_violation("-[MTLDevice newBufferWithBytes:length:options:] from NULL");
    return new_buffer(src, n, options);
}

static void *buffer_contents(id self, SEL cmd) { return (void)cmd, ((so_buffer *)self)->b.data; }
static NSUInteger buffer_length(id self, SEL cmd) { return (void)cmd, ((so_buffer *)self)->b.bytes; }

/* ---- the device's own answers ------------------------------------------------------ */

SO_PROTO0(device_name, id);
SO_PROTO0(device_architecture, id);
SO_PROTO0(arch_name, id);
SO_PROTO0(device_tg_mem, NSUInteger);
SO_PROTO0(device_working_set, NSUInteger);
SO_PROTO0(device_unified, BOOL);

static id device_name(id self, SEL cmd)
{
    (void)cmd;
    return so_autorelease(so_retain(((so_device *)self)->name));
}

/* MTLArchitecture: an object whose name is the architecture's */
static void arch_dealloc(so_object *o) { so_release(((so_device *)o)->name); }
static id device_architecture(id self, SEL cmd)
{
    (void)self, (void)cmd;
    so_device *a = so_new("MTLArchitecture", sizeof *a, arch_dealloc);
    a->name = so_string_new(so_cfg.arch);
    return so_autorelease(a);
}
static id arch_name(id self, SEL cmd) { return device_name(self, cmd); }
static NSUInteger device_tg_mem(id self, SEL cmd) { return (void)self, (void)cmd, (NSUInteger)so_cfg.tg_mem; }
static NSUInteger device_working_set(id self, SEL cmd) { return (void)self, (void)cmd, (NSUInteger)so_cfg.working_set; }
static BOOL device_unified(id self, SEL cmd) { return (void)self, (void)cmd, 1; }

SO_PROTO0(device_new_queue, id);
static id device_new_queue(id self, SEL cmd) { return (void)self, (void)cmd, so_queue_new(); }

const so_method so_device_methods[] = {
    SO_ROW0("MTLCompileOptions", "init", 0, options_init, id),
    SO_ROW("MTLCompileOptions", "setPreprocessorMacros:", 0, options_set_macros, void, id),
    SO_ROW("MTLCompileOptions", "setFastMathEnabled:", 0, options_set_fast_math, void, BOOL),
    SO_ROW("MTLCompileOptions", "setMathMode:", 0, options_set_math_mode, void, long),
    SO_ROW("MTLCompileOptions", "setLanguageVersion:", 0, options_set_language, void, NSUInteger),
    SO_ROW("MTLDevice", "newLibraryWithSource:options:error:", 0, device_new_library, id, id, id,
           id *),
    SO_ROW("MTLLibrary", "newFunctionWithName:", 0, library_new_function, id, id),
    SO_ROW("MTLDevice", "newComputePipelineStateWithFunction:error:", 0, device_new_pipeline, id,
           id, id *),
    SO_ROW0("MTLComputePipelineState", "maxTotalThreadsPerThreadgroup", 0, pipeline_max_threads,
            NSUInteger),
    SO_ROW0("MTLComputePipelineState", "threadExecutionWidth", 0, pipeline_simd_width, NSUInteger),
    SO_ROW0("MTLComputePipelineState", "staticThreadgroupMemoryLength", 0, pipeline_static_tg_mem,
            NSUInteger),
    SO_ROW("MTLDevice", "newBufferWithLength:options:", 0, device_new_buffer, id, NSUInteger,
           NSUInteger),
    SO_ROW("MTLDevice", "newBufferWithBytes:length:options:", 0, device_new_buffer_bytes, id,
           const void *, NSUInteger, NSUInteger),
    SO_ROW0("MTLBuffer", "contents", 0, buffer_contents, void *),
    SO_ROW0("MTLBuffer", "length", 0, buffer_length, NSUInteger),
    SO_ROW0("MTLDevice", "name", 0, device_name, id),
    SO_ROW0("MTLDevice", "architecture", 0, device_architecture, id),
    SO_ROW0("MTLArchitecture", "name", 0, arch_name, id),
    SO_ROW0("MTLDevice", "maxThreadgroupMemoryLength", 0, device_tg_mem, NSUInteger),
    SO_ROW0("MTLDevice", "recommendedMaxWorkingSetSize", 0, device_working_set, NSUInteger),
    SO_ROW0("MTLDevice", "hasUnifiedMemory", 0, device_unified, BOOL),
    SO_ROW0("MTLDevice", "newCommandQueue", 0, device_new_queue, id),
};
const int so_device_nmethods = sizeof so_device_methods / sizeof so_device_methods[0];
