/* fuzz_results.c - the results store's reader (mq_results_load): any bytes
 * give rows or one error naming the file and line, never a crash, a leak or
 * undefined behaviour; what loads has finite, in-range numbers. */
#include <math.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "results.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("results.csv", data, size);
    mq_results rs;
    char err[1024];
    if (!path || mq_results_load(path, &rs, err, sizeof err))
        return 0;
    for (int i = 0; i < rs.n; i++) {
        const mq_result *r = &rs.r[i];
        if (!isfinite(r->st.median) || r->st.median < 0 || r->p.N < 1 ||
            r->nsamples != r->st.n || !isfinite(r->idle_s) || r->idle_s < 0)
            abort(); /* the loader let a bad value through */
        for (int j = 0; j < r->nsamples; j++)
            if (!isfinite(r->samples[j]))
                abort();
    }
    char note[512];
    mq_results_torn_note(&rs, path, note, sizeof note);
    mq_results_free(&rs);
    return 0;
}
