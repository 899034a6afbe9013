/* standin.h - the stand-in Objective-C runtime's own parts, shared by its
 * files: objects with reference counts, classes with Apple's hierarchy,
 * the methods it implements, the checks that stop the process the way a Mac
 * would (or more strictly), the fault switches, and the report.
 *
 * The stand-in is a shared library that exports what backends/metal/objc_rt.c
 * takes from libobjc, Foundation, Metal, IOKit and CoreFoundation
 * (objc_msgSend, objc_getClass, MTLCreateSystemDefaultDevice, ...), so the
 * unmodified backends/metal/metal.c runs on Linux, its GPU work done by the MSL
 * executor. $MQ_OBJC_RUNTIME names it. Configured by the environment:
 *   MQ_STANDIN_DEVICE      the device's name ("Apple M4 Max")
 *   MQ_STANDIN_ARCH        its architecture name ("applegpu_g16s")
 *   MQ_STANDIN_GPU_CORES   the IORegistry's gpu-core-count (40; 0: absent)
 *   MQ_STANDIN_WORKING_SET recommendedMaxWorkingSetSize in bytes (48 GiB)
 *   MQ_STANDIN_TG_MEM      maxThreadgroupMemoryLength (32768)
 *   MQ_STANDIN_MACOS       14: no MTLCompileOptions.mathMode (macOS 15: 15)
 *   MQ_STANDIN_FAULTS      comma-separated faults: no-default-device,
 *                          no-device, compile-error, pipeline-max=N,
 *                          simd-width=N, cb-fail=N, cb-fail-from=N,
 *                          alloc-fail=N, alloc-fail-from=N
 *   MQ_STANDIN_REPORT      a file the report is written to at exit
 * A violation prints "objc stand-in: ..." and aborts. */
#ifndef MQ_STANDIN_H
#define MQ_STANDIN_H

#include <stddef.h>
#include <stdint.h>

#include "msl_exec.h"
#include "objc_rt.h"

typedef void (*IMP)(void);

/* ---- objects ---------------------------------------------------------- */

typedef struct so_class so_class;
typedef struct so_object so_object;
struct so_object {
    uint64_t magic;        /* SO_ALIVE, SO_DEAD, SO_CLASS */
    const so_class *cls;
    long refs;             /* 0: released (kept as a zombie: a later message is caught) */
    void (*dealloc)(so_object *); /* frees what the object holds, not the object */
    so_object *next_all;   /* every object made, for the leak count */
};
#define SO_ALIVE 0x4f424a414c495645ull
#define SO_DEAD 0x4f424a5a4f4d4249ull
#define SO_CLASS 0x4f424a434c415353ull

struct so_class {
    so_object hdr;     /* a class is an object too (magic SO_CLASS) */
    char name[48];
    const so_class *super;
    int allocatable;   /* objc_getClass finds it (a class, not a protocol) */
    int cf_type;       /* CFGetTypeID's answer for its instances */
};

/* The class of Apple's name (from the generated declarations); NULL if
 * Apple declares none. */
so_class *so_class_named(const char *name);
/* A new object of class `name`, `size` bytes (the so_object first), +1. */
void *so_new(const char *cls, size_t size, void (*dealloc)(so_object *));
void *so_retain(void *obj);
void so_release(void *obj);
/* Add to the innermost autorelease pool (a violation with none). */
void *so_autorelease(void *obj);
/* Is p a live stand-in object of class `cls` or a subclass? */
int so_is(const void *p, const char *cls);

/* ---- methods ---------------------------------------------------------- */

typedef struct {
    const char *cls;  /* Apple's class (or a superclass) it is implemented on */
    const char *sel;
    int class_method;
    IMP imp;
    const char *c_spelling; /* the implementation's own C type, by METHOD */
} so_method;

/* Declares the implementation's prototype and makes its method row from the
 * very same types, so the row cannot disagree with the function. */
#define SO_PROTO(fn, ret, ...) static ret fn(id, SEL, __VA_ARGS__)
#define SO_PROTO0(fn, ret) static ret fn(id, SEL)
#define SO_ROW(cls, sel, cm, fn, ret, ...) {cls, sel, cm, (IMP)fn, #ret "(" #__VA_ARGS__ ")"}
#define SO_ROW0(cls, sel, cm, fn, ret) {cls, sel, cm, (IMP)fn, #ret "()"}

extern const so_method so_foundation_methods[];
extern const int so_foundation_nmethods;
extern const so_method so_device_methods[];
extern const int so_device_nmethods;
extern const so_method so_command_methods[];
extern const int so_command_nmethods;

/* Does an instance of c answer sel (respondsToSelector:)? */
int so_responds(const so_class *c, const char *sel);

/* Foundation's objects as the other files make and read them (foundation.c). */
id so_string_new(const char *utf8); /* +1 */
const char *so_string_utf8(id s);   /* NULL when s is not an NSString */
id so_number_new(long long v);      /* +1 */
int so_number_value(id n, long long *v);
id so_error_new(const char *description); /* +1 */
id so_array_new(const id *items, int n);  /* +1, the items retained */
int so_dict_count(id d);            /* -1 when d is not an NSDictionary */
void so_dict_at(id d, int i, id *key, id *value);
int so_services_open(void);         /* IORegistry services not yet released */

/* Metal's objects as the other files use them (device.c, commands.c). */
size_t so_instance_size(const char *cls); /* what +alloc makes of a class; 0: nothing */
id so_queue_new(void);                    /* +1 MTLCommandQueue */
/* The module, kernel name and maximum threads of a compute pipeline; -1
 * when pso is not one. */
int so_pipeline_kernel(id pso, const mq_msl_module **m, const char **name,
                       NSUInteger *max_threads);
mq_msl_buffer *so_buffer_storage(id buf); /* an MTLBuffer's storage; NULL: not one */

/* A C spelling ("id(const void *, NSUInteger)") in the generated table's
 * canonical form ("id(ptr,NSUInteger)"); -1 for a type it cannot name. */
int so_canonical_signature(const char *c_spelling, char *out, size_t n);

/* ---- checks, faults, report ------------------------------------------- */

/* Stop the process the way a Mac would: the message, then abort. */
_Noreturn void so_violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

typedef struct {
    int no_default_device, no_device, compile_error;
    long pipeline_max, simd_width;   /* 0: the device's own */
    long cb_fail, cb_fail_from;      /* 1-based command buffer numbers; 0: none */
    long alloc_fail, alloc_fail_from;
    char device[96], arch[64];
    int gpu_cores, macos;
    uint64_t working_set, tg_mem;
} so_config;
extern so_config so_cfg;

/* What the report counts (written at exit). */
typedef struct {
    long messages, casts_checked, compiles, compiles_fast_math, command_buffers, dispatches,
        failed_command_buffers, buffers_made, buffers_failed;
    long language_version; /* of the last compile */
    uint64_t buffer_bytes, peak_buffer_bytes, buffer_bytes_made;
} so_counters;
extern so_counters so_count;

/* Sleep-free monotonic seconds (CFTimeInterval-like GPU timestamps). */
double so_now(void);

#endif
