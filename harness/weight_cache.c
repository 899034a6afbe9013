/* weight_cache.c - see weight_cache.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "weight_cache.h"

/* mqwset2: mqwset1 and a checksum of the body, so that a file whose bytes
 * were damaged after its header is ignored, not read as NaN scales. */
typedef struct {
    char magic[8];
    int32_t format, K, N, group, n_levels;
    uint64_t bytes[8];
    uint64_t body_sum;
} weight_file_head;

/* FNV-1a, 64 bits, over the fields in order: cheap beside quantizing. */
static uint64_t body_sum(void **const *field, const size_t *bytes, int nf)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < nf; i++) {
        const unsigned char *b = *field[i];
        for (size_t j = 0; j < bytes[i]; j++)
            h = (h ^ b[j]) * 0x100000001b3ull;
    }
    return h;
}

void mq_weight_cache_path(const mq_problem *p, char *path, size_t n)
{
    const char *d = getenv("MQ_WEIGHT_CACHE");
    if (!d || !*d) {
        path[0] = '\0';
        return;
    }
    snprintf(path, n, "%s/%s-%dx%d-g%d.w", d, mq_format_name(p->format), p->N, p->K, p->group);
}

int mq_weight_cache_read(const char *path, const mq_problem *p, mq_weights *w)
{
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    if (!f)
        return -1;
    weight_file_head h;
    mq_error e;
    memset(w, 0, sizeof *w); /* owned = 0 until allocated: nothing to free on a bad header */
    int ok = fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, "mqwset2", 8) &&
             h.format == (int32_t)p->format && h.K == p->K && h.N == p->N && h.group == p->group &&
             mq_weights_alloc(w, p->format, p->K, p->N, p->group, &e) == MQ_OK;
    if (ok && mq_format_is_trellis(p->format)) {
        ok = h.n_levels >= 1 && h.n_levels <= w->n_levels;
        w->n_levels = h.n_levels;
    }
    void **field[8];
    size_t bytes[8];
    int nf = ok ? mq_weights_fields(w, field, bytes) : 0;
    for (int i = 0; ok && i < nf; i++)
        ok = bytes[i] == h.bytes[i] && (!bytes[i] || fread(*field[i], bytes[i], 1, f) == 1);
    ok = ok && fgetc(f) == EOF && body_sum(field, bytes, nf) == h.body_sum;
    fclose(f);
    if (!ok && w->owned)
        mq_weights_free(w);
    return ok ? 0 : -1;
}

void mq_weight_cache_write(const char *path, const mq_problem *p, const mq_weights *w)
{
    char tmp[4300], err[4600];
    if (!path[0])
        return;
    FILE *f = mq_atomic_open(path, tmp, sizeof tmp, err, sizeof err);
    if (!f)
        return;
    weight_file_head h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "mqwset2", 8);
    h.format = (int32_t)p->format;
    h.K = p->K;
    h.N = p->N;
    h.group = p->group;
    h.n_levels = w->n_levels;
    void **field[8];
    size_t bytes[8];
    int nf = mq_weights_fields(w, field, bytes);
    for (int i = 0; i < nf; i++)
        h.bytes[i] = bytes[i];
    h.body_sum = body_sum(field, bytes, nf);
    int ok = fwrite(&h, sizeof h, 1, f) == 1;
    for (int i = 0; ok && i < nf; i++)
        ok = !bytes[i] || fwrite(*field[i], bytes[i], 1, f) == 1;
    /* renamed without an fsync: a cache is not worth a sync per weight set
     * (seconds a night), and a file a crash left short or damaged fails its
     * size or checksum check and is written again */
    if (fclose(f) || !ok || rename(tmp, path))
        unlink(tmp);
}
