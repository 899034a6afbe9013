/* fuzz_model.c - a stored cost model (mq_model_read): what loads has finite,
 * non-negative coefficients and counts that fit an int. */
#include <math.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "model_store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("model.csv", data, size);
    mq_model m;
    char err[1024];
    if (!path || mq_model_read(path, &m, err, sizeof err))
        return 0;
    for (int i = 0; i < MQ_MODEL_NTERM; i++)
        if (!isfinite(m.theta[i]) || m.theta[i] < 0)
            abort();
    if (m.n_fit < 0 || m.n_holdout < 0)
        abort();
    return 0;
}
