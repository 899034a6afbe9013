/* fuzz_routing.c - moe-bench's recorded-routing reader (mq_moe_routing_read):
 * any bytes give a routing or one error line naming the file, never a
 * crash, a leak or undefined behaviour; what loads is a routing the MoE
 * block's own check (mq_moe_routing_check) accepts: every expert in range,
 * no token on one expert twice, every probability finite and not negative. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "moe_bench.h"

static void one(const char *path, int experts)
{
    mq_moe_routing_file rf;
    char err[1024];
    if (mq_moe_routing_read(path, experts, &rf, err, sizeof err)) {
        if (!strstr(err, path) || strchr(err, '\n') || rf.ids || rf.probs)
            abort(); /* an error names the file, on one line, and leaves nothing */
        return;
    }
    if (rf.tokens < 1 || rf.tokens > 1 << 16 || rf.top_k < 1 || rf.top_k > experts)
        abort();
    for (int t = 0; t < rf.tokens; t++)
        for (int k = 0; k < rf.top_k; k++) {
            size_t i = (size_t)t * rf.top_k + k;
            if (rf.ids[i] < 0 || rf.ids[i] >= experts || !isfinite(rf.probs[i]) ||
                rf.probs[i] < 0)
                abort();
            for (int k2 = 0; k2 < k; k2++)
                if (rf.ids[(size_t)t * rf.top_k + k2] == rf.ids[i])
                    abort(); /* routed twice to one expert */
        }
    /* and the kernels' check agrees (a trellis problem of these sizes) */
    mq_moe_problem p = {MQ_FMT_TRELLIS3, rf.tokens, 64, 64, experts, rf.top_k, 32};
    mq_error e;
    if (mq_moe_routing_check(&p, rf.ids, rf.probs, &e) != MQ_OK)
        abort();
    mq_moe_routing_file_free(&rf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("routing.csv", data, size);
    if (!path)
        return 0;
    one(path, 8);    /* Mixtral's experts */
    one(path, 4096); /* the most the MoE block takes */
    return 0;
}
