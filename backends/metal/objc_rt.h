/* objc_rt.h - the Objective-C runtime reached from C: libobjc, Foundation
 * and Metal (and IOKit/CoreFoundation for the GPU core count) loaded with
 * dlopen at run time, objc_msgSend cast to each method's exact C function
 * type (the arm64 ABI passes arguments and returns exactly as for that C
 * function), and the few helpers the Metal backend needs. Needs no
 * Objective-C compiler; on a system without Metal mq_objc_load says why.
 *
 * $MQ_OBJC_RUNTIME names one library to load instead of all of those: the
 * test suite's stand-in runtime (tests/objc_standin/), which runs the same
 * calls on Linux on the MSL executor. Every cast also passes its C spelling
 * to the runtime (MSG's second argument): Apple's libobjc has no use for it
 * and is never told; the stand-in checks it against Apple's declarations. */
#ifndef MQ_OBJC_RT_H
#define MQ_OBJC_RT_H

#include <stddef.h>
#include <stdint.h>

typedef void *id;
typedef void *SEL;
/* Objective-C's BOOL: bool on Apple arm64, signed char on x86-64 (a method
 * returning BOOL must be called through a function type returning BOOL) */
#if defined(__arm64__) || defined(__aarch64__)
typedef _Bool BOOL;
#else
typedef signed char BOOL;
#endif
typedef unsigned long NSUInteger;
typedef struct {
    NSUInteger width, height, depth;
} MTLSize;

/* Metal's constants used here (Apple's MTLCommandBuffer.h, MTLLibrary.h,
 * MTLResource.h as metal-cpp declares them; tests/objc_standin/apple_decls.inc
 * holds the generated values the stand-in test compares these with). */
enum {
    MQ_MTL_STATUS_COMPLETED = 4,           /* MTLCommandBufferStatusCompleted */
    MQ_MTL_LANGUAGE_3_0 = (3 << 16) + 0,   /* MTLLanguageVersion3_0 (macOS 13) */
    MQ_MTL_MATH_MODE_SAFE = 0,             /* MTLMathModeSafe (macOS 15) */
    MQ_MTL_STORAGE_SHARED = 0              /* MTLResourceStorageModeShared */
};

/* The runtime's entry points and the classes used. */
typedef struct {
    void *objc, *foundation, *metal, *iokit, *cf;
    id (*get_class)(const char *);
    SEL (*sel)(const char *);
    void (*msg)(void); /* objc_msgSend, cast at each call to the method's type */
    void *(*pool_push)(void);
    void (*pool_pop)(void *);
    id (*create_device)(void);
    id (*copy_all_devices)(void); /* MTLCopyAllDevices (NULL where absent) */
    /* the stand-in's check of each cast (NULL with Apple's runtime) */
    void (*expect_signature)(const char *c_spelling);
    /* IOKit and CoreFoundation, for the GPU core count (NULL where absent) */
    id (*io_service_matching)(const char *);
    uint32_t (*io_get_matching_service)(uint32_t, id);
    id (*io_create_property)(uint32_t, id, id, uint32_t);
    int (*io_release)(uint32_t);
    id (*cf_string)(id, const char *, uint32_t);
    BOOL (*cf_number_value)(id, long, void *);
    unsigned long (*cf_type_id)(id);
    unsigned long (*cf_number_type_id)(void);
    void (*cf_release)(id);
} objc_rt;

/* objc_msgSend cast to a method's C function type (the arm64 ABI passes
 * arguments and returns exactly as for that C function); the cast's
 * spelling goes to the stand-in runtime, which holds it to Apple's. */
#define MSG(rt, ret, ...) \
    ((ret(*)(id, SEL, __VA_ARGS__))mq_objc_msg((rt), #ret "(" #__VA_ARGS__ ")"))
#define MSG0(rt, ret) ((ret(*)(id, SEL))mq_objc_msg((rt), #ret "()"))

/* Load the runtime; -1 with the reason ("unavailable: ...") when this
 * system has no Metal. */
int mq_objc_load(objc_rt *rt, char *why, size_t n);
/* objc_msgSend, after telling a checking runtime the cast's spelling. */
void (*mq_objc_msg(const objc_rt *rt, const char *c_spelling))(void);
id mq_objc_send0(const objc_rt *rt, id obj, const char *sel);
BOOL mq_objc_responds(const objc_rt *rt, id obj, const char *sel);
id mq_objc_nsstring(const objc_rt *rt, const char *s);
const char *mq_objc_cstring(const objc_rt *rt, id str);
const char *mq_objc_error_text(const objc_rt *rt, id error);
void mq_objc_release(const objc_rt *rt, id obj);
/* The system's default Metal device, +1 (owned): MTLCreateSystemDefaultDevice,
 * else the first of MTLCopyAllDevices (a command-line tool may get no default
 * device); NULL when there is none. */
id mq_objc_metal_device(const objc_rt *rt);
/* The GPU's core count from the IORegistry (AGXAccelerator's
 * gpu-core-count), 0 when the system does not tell. */
int mq_objc_gpu_core_count(const objc_rt *rt);

#endif
