/* fuzz_merge.c - merge's inputs (mq_merge): the fuzz input is cut at lines
 * "%%" into up to three parts: a shard manifest, a results file, and a
 * second manifest. The first two become a.manifest.csv and a.csv; with a
 * third part, b.csv (the same rows) and b.manifest.csv join the inputs, so
 * two manifests of one sweep meet as they do in merge (duplicate rows,
 * agreeing or disagreeing shards). A missing results part is a results file
 * with no rows. Whatever the bytes: 0, 1 or 2, never a crash, a leak or
 * undefined behaviour; an error is one line and leaves nothing printed
 * (the report goes to a memory stream, whose length is checked); merged
 * rows land in a scratch file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "merge.h"
#include "results.h"

/* The length of the part that starts at from: up to and with the newline
 * before the next line "%%", past which *next is set; the rest of the input
 * when no such line follows (*next = SIZE_MAX). */
static size_t cut(const uint8_t *d, size_t size, size_t from, size_t *next)
{
    for (size_t i = from; i + 4 <= size; i++)
        if (!memcmp(d + i, "\n%%\n", 4)) {
            *next = i + 4;
            return i + 1 - from;
        }
    *next = SIZE_MAX;
    return size - from;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char a[512], b[512], out[512];
    const uint8_t *p[3] = {(const uint8_t *)"", (const uint8_t *)"", (const uint8_t *)""};
    size_t len[3] = {0}, at = 0;
    int parts = 0;
    while (parts < 3 && at != SIZE_MAX) {
        p[parts] = data + at;
        len[parts] = cut(data, size, at, &at);
        parts++;
    }
    const char *f;
    char err[9000];
    if (!(f = fuzz_file("merged.csv", (const uint8_t *)"", 0)))
        return 0;
    snprintf(out, sizeof out, "%s", f);
    if (!fuzz_file("a.manifest.csv", p[0], len[0]) || !(f = fuzz_file("a.csv", p[1], len[1])))
        return 0;
    snprintf(a, sizeof a, "%s", f);
    if (parts < 2 && mq_results_write(a, NULL, 0, err, sizeof err)) /* rows: none */
        return 0;
    const char *inputs[2] = {a, b};
    int n = 1;
    if (parts == 3) {
        if (!fuzz_file("b.manifest.csv", p[2], len[2]) || !(f = fuzz_file("b.csv", p[1], len[1])))
            return 0;
        snprintf(b, sizeof b, "%s", f);
        n = 2;
    }
    /* the report into memory: its length is what was printed (ftell on a
     * /dev/null stream counts only what is still buffered, and goes back
     * to 0 at each flush) */
    char *printed = NULL;
    size_t nprinted = 0;
    FILE *rep = open_memstream(&printed, &nprinted);
    if (!rep)
        return 0;
    mq_merge_opts o = {(mq_merge_keep)(size % 3), (int)(size & 4), (int)(size & 8)};
    mq_merge_summary sum;
    err[0] = '\0';
    int rc = mq_merge(inputs, n, out, &o, rep, &sum, err, sizeof err);
    int closed = fclose(rep) == 0; /* sets printed and nprinted */
    free(printed);
    if (!closed)
        return 0;
    if (rc < 0 || rc > 2 || (rc == 2 && (!err[0] || strchr(err, '\n') || nprinted != 0)))
        abort(); /* a status outside 0..2, or an error not one line, or a report beside it */
    if (rc < 2 && (sum.rows_out > sum.rows_in || sum.manifests > n))
        abort();
    return 0;
}
