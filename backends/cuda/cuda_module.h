/* cuda_module.h - an MSL program as CUDA C++: what the cuda backend hands
 * NVRTC, and what CI compiles with clang's CUDA mode (no toolkit) to check
 * every legal program. Needs no CUDA: text in, text out, plus the host C++
 * compiler's preprocessor to read the kernels' signatures after the tuned
 * macros (the executor's mq_msl_preprocessed). */
#ifndef MQ_CUDA_MODULE_H
#define MQ_CUDA_MODULE_H

#include <stddef.h>

#define MQ_CUDA_MAX_KERNELS 16

typedef struct {
    char name[96];   /* the MSL kernel; its entry is mq_cuda_entry_NAME */
    unsigned used;   /* [[buffer(n)]] bits */
} mq_cuda_kernel;

/* The CUDA source of metal/FILE (or the text src) for DEFINES ("A=1 B=2",
 * passed to the compiler as -D, not written into the text): the source
 * translated for CUDA (mq_msl_translate_cuda), then one
 * `extern "C" __global__` entry per kernel taking a metal::mq_cuda_buffers
 * by value, bounded by __launch_bounds__(MQ_PLAN_THREADS) when the
 * candidate's thread count is defined. It includes <metal_stdlib>: the
 * prelude in mq_cuda_include_dir(). NULL and a message on error; free() it. */
char *mq_cuda_source(const char *file, const char *src, const char *defines, mq_cuda_kernel *ks,
                     int *nk, char *err, size_t errlen);

/* The directory of the CUDA prelude (metal_stdlib): $MQ_CUDA_INCLUDE, else
 * backends/cuda of the source tree. */
const char *mq_cuda_include_dir(void);

#endif
