/* msl_program.h - the MSL program of a candidate, for every backend that
 * runs the Metal kernels' own source (Metal on a Mac today; an executor on
 * the CPU and NVRTC on NVIDIA GPUs next): which .metal file and kernel
 * function serve a variant and format, the buffers it binds after the common
 * ones, the tuned macros of the candidate, and the source text with its
 * #include lines expanded (runtime compilers have no include path). Builds
 * and is tested anywhere (tests/test_metal.c). */
#ifndef MQ_MSL_PROGRAM_H
#define MQ_MSL_PROGRAM_H

#include <stddef.h>

#include "mq.h"

/* Buffers after the common ones (0 A, 1 packed/indices, 2 scales/tscales,
 * 3 C, 4 params), in binding order from 5. */
typedef enum {
    MQ_MSL_END = 0,
    MQ_MSL_WORKSPACE,
    MQ_MSL_ZEROS,
    MQ_MSL_GRID,
    MQ_MSL_SU,
    MQ_MSL_SV
} mq_msl_buffer;

typedef struct {
    mq_variant v;
    int format; /* -1: any format the variant serves */
    const char *file, *function;
    mq_msl_buffer extra[4];
} mq_msl_program;

/* The program row of a candidate, or NULL when its variant and format have
 * no kernel. */
const mq_msl_program *mq_msl_program_of(const mq_problem *p, const mq_candidate *c);

/* What a backend compiles for a candidate: the source file in metal/, the
 * kernel function, and the preprocessor definitions ("TILE_M=64 TILE_N=64
 * ..." separated by spaces). -1 and a message for a variant or format that
 * has no kernel. */
int mq_metal_program(const mq_problem *p, const mq_candidate *c, const char **file,
                     const char **function, char *defines, size_t n, char *err, size_t errlen);

/* The directory of the MSL sources: $MQ_METAL_DIR, else metal/ of the
 * source tree. */
const char *mq_metal_source_dir(void);

/* Read FILE from the source directory with every #include "x" expanded.
 * NULL and a message on error; free() the result. */
char *mq_metal_source(const char *file, char *err, size_t errlen);

#endif
