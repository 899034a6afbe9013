/* msgsend.S - the stand-in's objc_msgSend: save every argument register,
 * ask mq_standin_lookup (runtime.c) for the implementation of (receiver,
 * selector), restore the registers and jump to it, so the implementation
 * receives the caller's arguments and returns to the caller exactly as if
 * called directly through the cast C type (what Apple's objc_msgSend
 * does). Stack arguments (x86-64: MTLSize by value) are never touched.
 * x86-64 System V (Linux) and AArch64 (Linux ELF, and Mach-O for a Mac,
 * where C symbols carry a leading underscore). */

#if defined(__APPLE__)
#define SYM(x) _##x
#else
#define SYM(x) x
#endif

#if defined(__x86_64__)

    .text
    .globl SYM(objc_msgSend)
#if !defined(__APPLE__)
    .type objc_msgSend, @function
#endif
SYM(objc_msgSend):
    pushq %rbp                 /* entry: rsp = 8 mod 16; now 0 mod 16 */
    movq %rsp, %rbp
    subq $192, %rsp            /* 7 GPRs (56, padded to 64) + 8 xmm (128) */
    movq %rdi, 0(%rsp)
    movq %rsi, 8(%rsp)
    movq %rdx, 16(%rsp)
    movq %rcx, 24(%rsp)
    movq %r8, 32(%rsp)
    movq %r9, 40(%rsp)
    movq %rax, 48(%rsp)        /* al: vector registers of a variadic call */
    movdqu %xmm0, 64(%rsp)
    movdqu %xmm1, 80(%rsp)
    movdqu %xmm2, 96(%rsp)
    movdqu %xmm3, 112(%rsp)
    movdqu %xmm4, 128(%rsp)
    movdqu %xmm5, 144(%rsp)
    movdqu %xmm6, 160(%rsp)
    movdqu %xmm7, 176(%rsp)
#if defined(__APPLE__) || !defined(__PIC__)
    call SYM(mq_standin_lookup)
#else
    call mq_standin_lookup@PLT
#endif
    movq %rax, %r11            /* the implementation */
    movq 0(%rsp), %rdi
    movq 8(%rsp), %rsi
    movq 16(%rsp), %rdx
    movq 24(%rsp), %rcx
    movq 32(%rsp), %r8
    movq 40(%rsp), %r9
    movq 48(%rsp), %rax
    movdqu 64(%rsp), %xmm0
    movdqu 80(%rsp), %xmm1
    movdqu 96(%rsp), %xmm2
    movdqu 112(%rsp), %xmm3
    movdqu 128(%rsp), %xmm4
    movdqu 144(%rsp), %xmm5
    movdqu 160(%rsp), %xmm6
    movdqu 176(%rsp), %xmm7
    movq %rbp, %rsp
    popq %rbp
    jmp *%r11

#elif defined(__aarch64__) || defined(__arm64__)

    .text
    .globl SYM(objc_msgSend)
    .p2align 2
#if !defined(__APPLE__)
    .type objc_msgSend, %function
#endif
SYM(objc_msgSend):
    stp x29, x30, [sp, #-16]!
    mov x29, sp
    sub sp, sp, #208           /* x0-x8 (72, padded to 80) + q0-q7 (128) */
    stp x0, x1, [sp, #0]
    stp x2, x3, [sp, #16]
    stp x4, x5, [sp, #32]
    stp x6, x7, [sp, #48]
    str x8, [sp, #64]          /* x8: where an indirect result goes */
    stp q0, q1, [sp, #80]
    stp q2, q3, [sp, #112]
    stp q4, q5, [sp, #144]
    stp q6, q7, [sp, #176]
    bl SYM(mq_standin_lookup)
    mov x16, x0                /* the implementation (x16: the intra-call scratch) */
    ldp x0, x1, [sp, #0]
    ldp x2, x3, [sp, #16]
    ldp x4, x5, [sp, #32]
    ldp x6, x7, [sp, #48]
    ldr x8, [sp, #64]
    ldp q0, q1, [sp, #80]
    ldp q2, q3, [sp, #112]
    ldp q4, q5, [sp, #144]
    ldp q6, q7, [sp, #176]
    mov sp, x29
    ldp x29, x30, [sp], #16
    br x16

#else
#error "the stand-in's objc_msgSend is written for x86-64 and AArch64"
#endif

#if defined(__linux__) && defined(__ELF__)
    .section .note.GNU-stack, "", %progbits
#endif
