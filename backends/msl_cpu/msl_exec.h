/* msl_exec.h - the MSL executor: Metal kernels' own source compiled as C++
 * (against backends/msl_cpu/metal_stdlib) and run on the CPU with the
 * semantics of a GPU launch: a grid of threadgroups, each threadgroup's
 * threads running concurrently as fibers, simdgroups of 32 lanes, real
 * barriers, shared threadgroup memory (32 KB at most), device buffers with
 * guard pages on both sides. It is for verification: what it computes is
 * what the kernel's code computes; how long it takes means nothing.
 *
 * A module is one .metal file compiled with one set of macros
 * (msl_module.c; the source's translation msl_translate.c, its kernels'
 * signatures msl_signature.c); a launch runs one of its kernels in a child
 * process, so a kernel that faults, hangs or deadlocks is reported as an
 * error and never takes the caller down (msl_exec.c, msl_child.c,
 * msl_sched.c). */
#ifndef MQ_MSL_EXEC_H
#define MQ_MSL_EXEC_H

#include <stddef.h>

#include "msl_cpu/mq_msl_abi.h"

/* ---- modules (msl_module.c) ------------------------------------------- */

typedef struct {
    const char *cxx;       /* the C++ compiler; NULL: $MQ_MSL_CXX, else clang++, else g++ */
    const char *cflags;    /* more flags for the module's compile (e.g. -fsanitize=thread) */
    const char *cache_dir; /* compiled modules; NULL: $MQ_MSL_CACHE, else ~/.cache/mq-msl */
} mq_msl_compile_opts;

typedef struct mq_msl_module mq_msl_module;

/* Compile (or find in the cache) metal/FILE with DEFINES ("A=1 B=2") and
 * load it. With src non-NULL, that text is the source instead of the file
 * (tests plant defects this way; FILE still names it in messages). NULL and
 * the compiler's first error on failure. */
mq_msl_module *mq_msl_module_load(const char *file, const char *src, const char *defines,
                                  const mq_msl_compile_opts *o, char *err, size_t errlen);
void mq_msl_module_free(mq_msl_module *m);

/* The C++ compiler the executor would use, or NULL when there is none. */
const char *mq_msl_cxx(const mq_msl_compile_opts *o);

/* The directory of metal_stdlib: $MQ_MSL_INCLUDE, else backends/msl_cpu of
 * the source tree. */
const char *mq_msl_include_dir(void);

/* A kernel's signature as the preprocessed source declares it: each
 * parameter's type and name and what binds it ([[buffer(n)]] or a position
 * attribute). Shared with the cuda backend (cuda_module.c), which binds the
 * same parameters on a GPU. */
#define MQ_MSL_MAX_PARAMS 32
typedef struct {
    char type[192];
    char name[64];
    int buffer;    /* n of [[buffer(n)]], or -1 for a position attribute */
    char attr[64]; /* the position attribute ("thread_index_in_simdgroup") */
} mq_msl_param;
typedef struct {
    char name[96];
    mq_msl_param param[MQ_MSL_MAX_PARAMS];
    int nparam;
    unsigned used; /* [[buffer(n)]] bits */
} mq_msl_kernel_sig;

/* Every kernel of preprocessed text (mq_msl_preprocessed), at most max;
 * -1 and a message when a kernel cannot be read or has a parameter no
 * backend binds (msl_signature.c). */
int mq_msl_read_kernels(const char *pre, mq_msl_kernel_sig *ks, int max, int *nk, char *err,
                        size_t errlen);

/* metal/FILE (or the text src) translated and preprocessed with DEFINES by
 * the host C++ compiler against the executor's metal_stdlib, the kernel
 * keyword kept as the token MQ_MSL_KERNEL: what mq_msl_read_kernels reads.
 * NULL and a message on error; free() it. */
char *mq_msl_preprocessed(const char *file, const char *src, const char *defines,
                          const mq_msl_compile_opts *o, char *err, size_t errlen);

/* The translation of an MSL source into the C++ the executor compiles
 * (msl_translate.c): every `threadgroup T name[n]...;` declared in a
 * function becomes `auto &name = metal::mq_msl_tg_array<T[n]...>();`
 * (shared by the threadgroup); nothing else changes. NULL on out of
 * memory; free() it. */
char *mq_msl_translate(const char *src);
/* The translation for CUDA (backends/cuda/cuda_module.c): threadgroup arrays
 * become `__shared__ __attribute__((aligned(16))) T name[n]...;` and half
 * literals (1.5h) metal::half(1.5f). */
char *mq_msl_translate_cuda(const char *src);

/* Kernel entries of a module (for launches): NULL when it has no such
 * kernel. buffers_used gets a bit per [[buffer(n)]] the kernel binds. */
mq_msl_entry_fn mq_msl_kernel(const mq_msl_module *m, const char *name, unsigned *buffers_used);
/* Hand a loaded module the API its kernels call (barriers, threadgroup
 * memory, SIMD exchange): the executor does, before it runs a kernel, so
 * that the loader needs nothing of the executor. */
void mq_msl_module_bind(const mq_msl_module *m, const mq_msl_api *api);

/* ---- buffers and launches (msl_exec.c) --------------------------------- */

/* A device buffer: `bytes` usable bytes whose start is 16-byte aligned and
 * whose end lies within 16 bytes of an inaccessible region as long as the
 * buffer (64 pages at least; a canary fills the slack), with an
 * inaccessible page before it. Shared with the child that runs a launch. */
typedef struct {
    void *data;
    size_t bytes;
    unsigned char *map;
    size_t map_bytes;
} mq_msl_buffer;

int mq_msl_buffer_alloc(mq_msl_buffer *b, size_t bytes, char *err, size_t errlen);
void mq_msl_buffer_free(mq_msl_buffer *b);

typedef struct {
    mq_msl_buffer *buffers[MQ_MSL_MAX_BUFFERS]; /* [[buffer(n)]] */
    unsigned grid[3];    /* threadgroups per grid */
    unsigned threads[3]; /* threads per threadgroup */
    int workers;         /* OS threads running threadgroups (0: one per core) */
    double timeout_s;    /* 0: 600 s */
} mq_msl_launch;

/* Run kernel NAME of m over the grid. 0 when every thread finished;
 * -1 and the reason otherwise: a fault in a named buffer (out of bounds,
 * with the thread), a barrier not reached by every thread, a deadlock,
 * threadgroup memory over 32 KB, a timeout, a missing buffer. */
int mq_msl_run(const mq_msl_module *m, const char *name, const mq_msl_launch *l, char *err,
               size_t errlen);

#endif
