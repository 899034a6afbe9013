/* metal_backend.h - the Metal backend: times the MSL kernels of metal/ on
 * an Apple GPU. It talks to Metal through the Objective-C runtime loaded at
 * run time (dlopen of libobjc, Foundation and Metal; objc_msgSend cast to
 * each method's C type), so it needs no Objective-C compiler and builds
 * everywhere; where Metal is absent it says why and the tools fall back to
 * the CPU model. */
#ifndef MQ_METAL_BACKEND_H
#define MQ_METAL_BACKEND_H

#include <stddef.h>

#include "measure.h"

/* The Metal backend on the system's default device, or NULL and the reason
 * ("unavailable: ..."). Its chip field names the chip the device is (from
 * its name and architecture, see mq_chip_from_device). */
mq_backend *mq_backend_metal_create(char *why, size_t n);

/* What the backend compiles for a candidate: the source file in metal/,
 * the kernel function, and the preprocessor definitions ("TILE_M=64
 * TILE_N=64 ..." separated by spaces). -1 and a message for a variant or
 * format that has no kernel. Used by the backend and by the syntax check. */
int mq_metal_program(const mq_problem *p, const mq_candidate *c, const char **file,
                     const char **function, char *defines, size_t n, char *err, size_t errlen);

/* The directory of the MSL sources: $MQ_METAL_DIR, else metal/ of the
 * source tree. */
const char *mq_metal_source_dir(void);

/* Read FILE from the source directory with every #include "x" expanded
 * (runtime compilation has no include path). NULL and a message on error;
 * free() the result. */
char *mq_metal_source(const char *file, char *err, size_t errlen);

#endif
