/* fuzz_common.h - what every fuzz target shares: the parsers read files, so
 * libFuzzer's input is written to a file of this process first. */
#ifndef MQ_FUZZ_COMMON_H
#define MQ_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Write data to this process's scratch file NAME (NAME may repeat across
 * targets) and return its path, or NULL when it cannot be written. */
const char *fuzz_file(const char *name, const uint8_t *data, size_t size);

#endif
