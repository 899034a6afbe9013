/* objc_rt.h - the Objective-C runtime reached from C: libobjc, Foundation
 * and Metal loaded with dlopen at run time, objc_msgSend cast to each
 * method's exact C function type (the arm64 ABI passes arguments and
 * returns exactly as for that C function), and the few helpers the Metal
 * backend needs. Needs no Objective-C compiler; on a system without Metal
 * mq_objc_load says why. */
#ifndef MQ_OBJC_RT_H
#define MQ_OBJC_RT_H

#include <stddef.h>

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

/* Load the runtime; -1 with the reason ("unavailable: ...") when this
 * system has no Metal. */
int mq_objc_load(objc_rt *rt, char *why, size_t n);
id mq_objc_send0(const objc_rt *rt, id obj, const char *sel);
id mq_objc_nsstring(const objc_rt *rt, const char *s);
const char *mq_objc_cstring(const objc_rt *rt, id str);
const char *mq_objc_error_text(const objc_rt *rt, id error);
void mq_objc_release(const objc_rt *rt, id obj);

#endif
