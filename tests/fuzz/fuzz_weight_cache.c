/* fuzz_weight_cache.c - the MQ_WEIGHT_CACHE reader (mq_weight_cache_read):
 * any bytes give the weight set the header names or are ignored, never a
 * crash, a leak or undefined behaviour; what loads has the sizes of the
 * problem it was read for. The problems are the seed's (N=64, K=256,
 * group 128) in each format, so the fuzzer reaches the body and its sum. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "weight_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("weights.w", data, size);
    if (!path)
        return 0;
    for (int f = 0; f < MQ_FMT_COUNT; f++) {
        mq_problem p = {(mq_format)f, 1, 64, 256, 128};
        mq_weights w;
        if (mq_weight_cache_read(path, &p, &w))
            continue;
        if (w.K != p.K || w.N != p.N || !w.owned)
            abort(); /* a set read for another problem */
        mq_weights_free(&w);
    }
    return 0;
}
