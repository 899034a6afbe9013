/* moe_rows.h - the MoE block's rows of a dispatch table, from moe-bench's
 * measurements (tune --moe-results FILE). */
#ifndef MQ_MOE_ROWS_H
#define MQ_MOE_ROWS_H

#include <stddef.h>

#include "table_write.h"

/* Entries from a moe-bench results file: per (format, group, hidden,
 * inter, experts, top_k) and token count, the fastest fused candidate that
 * was verified and timed (status ok); each token count covering (the
 * previous one, itself] (the first from 1, the last to 2^30), neighbours
 * with the same candidate merged. Only rows measured where tune measures
 * count: the same backend and, for the CPU model, the same host, for a
 * device, the same device name. Returns the count (> 0) with *out to
 * free(), or -1 and a message naming the file (and line) at fault.
 * backend NULL: only check that the file reads (every fused row parses),
 * before anything is probed or created; returns 0 and *out stays NULL.
 * kbuild (may be NULL; room for MQ_MOE_KBUILD_LEN) gets the kernel build the
 * counted rows measured ("": rows of schema 1 or 2, which do not say); rows
 * of two builds are refused (-1), as a table states one. */
#define MQ_MOE_KBUILD_LEN 32
int mq_moe_table_entries(const char *path, const char *backend, const char *device,
                         const char *host, mq_table_entry **out, char *kbuild, char *err,
                         size_t errlen);

#endif
