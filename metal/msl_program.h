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

/* What runs a candidate: the source file, the kernel function, and the
 * buffers it binds after the common ones (MQ_BUF_END-terminated), all from
 * the variant's row (kernels/variants.c). */
typedef struct {
    const char *file;
    const char *function;
    mq_buffer_kind extra[6];
} mq_msl_program;

/* Fill out for a candidate; NULL when its variant and format have no
 * kernel. */
const mq_msl_program *mq_msl_program_of(const mq_problem *p, const mq_candidate *c,
                                         mq_msl_program *out);

/* What a backend compiles for a candidate: the source file in metal/, the
 * kernel function, and the preprocessor definitions ("TILE_M=64 TILE_N=64
 * ..." separated by spaces, ending with the planner's MQ_PLAN_TG_BYTES and
 * MQ_PLAN_THREADS, which each kernel checks its own against). -1 and a
 * message for a variant or format that has no kernel, or a candidate the
 * planner refuses. */
int mq_metal_program(const mq_problem *p, const mq_candidate *c, const char **file,
                     const char **function, char *defines, size_t n, char *err, size_t errlen);

/* The directory of the MSL sources: $MQ_METAL_DIR, else metal/ of the
 * source tree. */
const char *mq_metal_source_dir(void);

/* Read FILE from the source directory with every #include "x" expanded.
 * NULL and a message on error; free() the result. */
char *mq_metal_source(const char *file, char *err, size_t errlen);

#endif
