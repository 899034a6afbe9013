/* msl_fiber.h - the MSL executor's fibers (msl_exec.c): a context switch
 * of our own on x86-64 and arm64 (msl_fiber.c), ucontext elsewhere.
 *
 * Why our own: save the callee-saved registers on the running stack, store
 * its stack pointer, load the other's, restore its registers, return into
 * it. macOS refuses <ucontext.h> unless _XOPEN_SOURCE is defined and
 * deprecates it; its arm64 makecontext also zeroes the whole stack each time
 * (libplatform, src/ucontext/generic/makecontext.c), and every ucontext swap
 * on Linux and macOS is a sigprocmask system call. The fibers of a worker
 * share its thread's signal mask and floating-point control state (no
 * kernel changes either), so neither is switched. ucontext stays for other
 * CPUs, for -DMQ_FIBER_UCONTEXT, and where Intel CET is on (-fcf-protection:
 * a shadow stack rejects a return into a stack we switched to ourselves).
 *
 * A new fiber's stack gets a frame of FIBER_FRAME_WORDS words at its top,
 * all 0 but the function to run (FIBER_SLOT_FN) and mq_fiber_start
 * (FIBER_SLOT_START), which the first switch returns into. */
#ifndef MQ_MSL_FIBER_H
#define MQ_MSL_FIBER_H

#if !defined(MQ_FIBER_UCONTEXT) && !defined(__CET__) && (defined(__x86_64__) || defined(__aarch64__))
#define FIBER_ASM 1
#else
#define FIBER_ASM 0
#endif

#if FIBER_ASM
typedef struct {
    void *sp; /* the saved registers are at the top of its stack */
} fiber_ctx;

/* Save this context's registers and stack pointer into *from, resume `to`. */
void mq_fiber_switch(void **from, void *to) __asm__("mq_msl_fiber_switch")
    __attribute__((visibility("hidden")));
/* Where a new fiber's first switch returns to: calls the function left in
 * a callee-saved register (rbx / x19), which never returns. */
void mq_fiber_start(void) __asm__("mq_msl_fiber_start") __attribute__((visibility("hidden")));

#if defined(__x86_64__)
/* The System V AMD64 psABI (3.2.1, "Registers and the Stack Frame"): rbx,
 * rbp and r12-r15 are callee-saved. The saved frame, from the stack pointer
 * up: r15 r14 r13 r12 rbx rbp, the return address. */
#define FIBER_FRAME_WORDS 7
#define FIBER_SLOT_FN 4    /* rbx */
#define FIBER_SLOT_START 6 /* the return address */
#else
/* Arm's AAPCS64 ("Procedure Call Standard for the Arm 64-bit Architecture",
 * its general-purpose and SIMD/floating-point register sections): x19-x28,
 * the frame pointer x29 and the low halves of v8-v15 (d8-d15) are
 * callee-saved, and x30 is where ret goes; x18 is the platform's register
 * on Apple's platforms ("Writing ARM64 code for Apple platforms",
 * developer.apple.com) and is left alone. The saved frame, from the stack
 * pointer up: x19..x28, x29, x30, d8..d15. */
#define FIBER_FRAME_WORDS 20
#define FIBER_SLOT_FN 0     /* x19 */
#define FIBER_SLOT_START 11 /* x30 */
#endif
#define fiber_swap(from, to) mq_fiber_switch(&(from)->sp, (to)->sp)
#else /* ucontext */
#ifdef __APPLE__
#error "the MSL executor's fibers on macOS are the x86-64/arm64 switch (its ucontext is deprecated)"
#endif
#include <ucontext.h>
typedef ucontext_t fiber_ctx;
#define fiber_swap(from, to) swapcontext(from, to)
#endif

#endif
