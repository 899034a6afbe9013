/* metal_source.h - the MSL sources as text: where they are, and one file
 * with its #include "x" lines expanded (newLibraryWithSource takes a single
 * string, and the executor and NVRTC read the same). */
#ifndef MQ_METAL_SOURCE_H
#define MQ_METAL_SOURCE_H

#include <stddef.h>

/* The directory of the MSL sources: $MQ_METAL_DIR, else metal/ of the
 * source tree. */
const char *mq_metal_source_dir(void);

/* Read FILE from the source directory with every #include "x" expanded.
 * NULL and a message on error; free() the result. */
char *mq_metal_source(const char *file, char *err, size_t errlen);

#endif
