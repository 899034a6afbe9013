/* msl_fiber.c - the fiber switch of msl_fiber.h, in assembly: x86-64
 * (System V) and arm64 (AAPCS64), as ELF (Linux) or Mach-O (macOS). */
#include "msl_fiber.h"

#if FIBER_ASM
#ifdef __APPLE__ /* Mach-O: no .type/.size, hidden is .private_extern */
#define FIBER_FN(name) ".globl " name "\n.private_extern " name "\n.p2align 4\n" name ":\n"
#define FIBER_SECTION ".text\n"
#define FIBER_END ""
#else
#define FIBER_FN(name) ".globl " name "\n.hidden " name "\n.type " name ", %function\n.p2align 4\n" name ":\n"
#define FIBER_SECTION ".pushsection .text\n"
#define FIBER_END ".popsection\n"
#endif

#if defined(__x86_64__)
__asm__(FIBER_SECTION
        FIBER_FN("mq_msl_fiber_switch")
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        FIBER_FN("mq_msl_fiber_start")
        "    callq *%rbx\n" /* rbp is 0: the end of the frame chain */
        "    ud2\n"
        FIBER_END);
#else
__asm__(FIBER_SECTION
        FIBER_FN("mq_msl_fiber_switch")
        "    sub sp, sp, #160\n"
        "    stp x19, x20, [sp, #0]\n"
        "    stp x21, x22, [sp, #16]\n"
        "    stp x23, x24, [sp, #32]\n"
        "    stp x25, x26, [sp, #48]\n"
        "    stp x27, x28, [sp, #64]\n"
        "    stp x29, x30, [sp, #80]\n"
        "    stp d8, d9, [sp, #96]\n"
        "    stp d10, d11, [sp, #112]\n"
        "    stp d12, d13, [sp, #128]\n"
        "    stp d14, d15, [sp, #144]\n"
        "    mov x9, sp\n"
        "    str x9, [x0]\n"
        "    mov sp, x1\n"
        "    ldp x19, x20, [sp, #0]\n"
        "    ldp x21, x22, [sp, #16]\n"
        "    ldp x23, x24, [sp, #32]\n"
        "    ldp x25, x26, [sp, #48]\n"
        "    ldp x27, x28, [sp, #64]\n"
        "    ldp x29, x30, [sp, #80]\n"
        "    ldp d8, d9, [sp, #96]\n"
        "    ldp d10, d11, [sp, #112]\n"
        "    ldp d12, d13, [sp, #128]\n"
        "    ldp d14, d15, [sp, #144]\n"
        "    add sp, sp, #160\n"
        "    ret\n"
        FIBER_FN("mq_msl_fiber_start")
        "    blr x19\n" /* x29 is 0: the end of the frame chain */
        "    brk #1\n"
        FIBER_END);
#endif /* the CPU */
#endif /* FIBER_ASM */
