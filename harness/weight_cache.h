/* weight_cache.h - quantized weight sets kept in files between processes.
 * With MQ_WEIGHT_CACHE=DIR, bench stores each weight set it quantizes in
 * DIR/FORMAT-NxK-gG.w and later processes read it back instead of
 * quantizing again (the nightly's A/B rounds set up the same weights in
 * every process; each side and night has its own DIR, so a build never
 * reads another's). A file that does not match in every respect (header,
 * sizes, a checksum of its body) is ignored, and replaced by the next
 * writer. */
#ifndef MQ_WEIGHT_CACHE_H
#define MQ_WEIGHT_CACHE_H

#include <stddef.h>

#include "mq.h"

/* The file for p under $MQ_WEIGHT_CACHE ("" when it is not set). */
void mq_weight_cache_path(const mq_problem *p, char *path, size_t n);
/* Read p's weights from path into w (allocated here, free with
 * mq_weights_free): 0, or -1 when the file is absent or does not match
 * (nothing allocated then). */
int mq_weight_cache_read(const char *path, const mq_problem *p, mq_weights *w);
/* Store w as p's weights at path (an exclusive temporary, then rename, no
 * fsync: a damaged file fails its checksum); failures are silent: the cache
 * is an optimisation. */
void mq_weight_cache_write(const char *path, const mq_problem *p, const mq_weights *w);

#endif
