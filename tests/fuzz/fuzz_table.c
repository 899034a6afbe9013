/* fuzz_table.c - the dispatch table's loader (mq_table_load) and a lookup
 * through whatever it accepted. */
#include "fuzz_common.h"
#include "mq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("table.csv", data, size);
    mq_table *t;
    mq_error e;
    if (!path || mq_table_load(path, NULL, &t, &e) != MQ_OK)
        return 0;
    mq_limits lim = {32768, 1024, 32, 40, 0};
    mq_problem p = {MQ_FMT_FP4, 3, 4096, 4096, 128};
    mq_lookup_level lv;
    mq_table_lookup(t, &p, &lim, &lv);
    mq_table_free(t);
    return 0;
}
