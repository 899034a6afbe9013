/* fuzz_compare.c - compare's inputs: the bytes before the first "\n%%\n"
 * are the baseline, the rest the new run; both load through the results
 * reader, then pair up and are judged (Mann-Whitney U on their samples) and
 * a median-of baseline is built, as `compare` and `compare --median-of` do. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "regress.h"
#include "results.h"
#include "run_compare.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t cut = size;
    for (size_t i = 0; i + 4 <= size; i++)
        if (!memcmp(data + i, "\n%%\n", 4)) {
            cut = i + 1;
            break;
        }
    mq_results base, cur;
    char err[1024];
    const char *p = fuzz_file("base.csv", data, cut);
    if (!p || mq_results_load(p, &base, err, sizeof err))
        return 0;
    p = fuzz_file("new.csv", data + (cut < size ? cut + 3 : size), cut < size ? size - cut - 3 : 0);
    if (!p || mq_results_load(p, &cur, err, sizeof err)) {
        mq_results_free(&base);
        return 0;
    }
    mq_regress_opts o = mq_regress_defaults();
    mq_run_comparison cmp;
    if (mq_compare_runs(&base, &cur, &o, &cmp) == 0)
        mq_run_comparison_free(&cmp);
    mq_results both[2] = {base, cur};
    const mq_result **rows;
    int n;
    if (mq_results_median_of(both, 2, &rows, &n) == 0)
        free(rows);
    mq_results_free(&base);
    mq_results_free(&cur);
    return 0;
}
