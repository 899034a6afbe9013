/* fuzz_cli.c - the flag parsers every tool shares: numbers, shapes, format
 * lists and candidate specs (moe-bench's MoE candidates too), on any text
 * (cut at the first NUL). What they accept is in range: a shape never
 * wraps; an MoE candidate prints back to text that reads the same. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "numparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[300];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = '\0';
    int M, N, K, v;
    double d;
    unsigned mask = 0;
    char err[512];
    mq_candidate c;
    if (mq_cli_shape(s, &M, &N, &K) == 0 &&
        (M < 1 || N < 1 || K < 1 || M > MQ_CLI_MAX_DIM || N > MQ_CLI_MAX_DIM || K > MQ_CLI_MAX_DIM))
        abort();
    if (mq_cli_int(s, -5, 1000, &v) == 0 && (v < -5 || v > 1000))
        abort();
    if (mq_parse_double(s, 0, 1, &d, err, sizeof err) == 0 && !(d >= 0 && d <= 1))
        abort();
    mq_cli_formats(s, &mask, err, sizeof err);
    mq_cli_candidate(s, &c, err, sizeof err);
    /* an MoE candidate's text (moe-bench --candidate): what it accepts reads
     * back the same through its own printing */
    mq_moe_candidate mc, again;
    if (mq_moe_candidate_parse(s, &mc, NULL) == MQ_OK) {
        char t[300];
        mq_moe_candidate_str(&mc, t, sizeof t);
        if (mq_moe_candidate_parse(t, &again, NULL) != MQ_OK || memcmp(&mc, &again, sizeof mc))
            abort();
    }
    int dims[4];
    mq_parse_dims(s, 4, 1, 100, dims, err, sizeof err);
    return 0;
}
