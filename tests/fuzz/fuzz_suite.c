/* fuzz_suite.c - a user's suite file (model,layer,N,K[,M]) through
 * mq_suite_load, with an M list parsed from the input's first line too. */
#include <string.h>

#include "fuzz_common.h"
#include "suites.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char spec[64] = "";
    size_t n = 0;
    while (n < size && n + 1 < sizeof spec && data[n] != '\n' && data[n])
        n++;
    memcpy(spec, data, n);
    spec[n] = '\0';
    int ms[64];
    char err[1024];
    mq_suite_parse_ms(spec, ms, 64, err, sizeof err);
    const char *path = fuzz_file("suite.csv", data, size);
    mq_suite s;
    int one = 1;
    if (path && mq_suite_load(path, &one, 1, &s, err, sizeof err) == 0)
        mq_suite_free(&s);
    return 0;
}
