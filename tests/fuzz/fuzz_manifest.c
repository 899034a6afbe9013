/* fuzz_manifest.c - the shard manifest reader (mq_manifest_load): any bytes
 * give a manifest or one error naming the file, never a crash, a leak or
 * undefined behaviour; what loads keeps the promises merge relies on to
 * index its shards: 1 <= shard <= nshards <= MQ_SHARD_MAX, as many units as
 * the comment line says the shard owns (no more than the sweep's), each of
 * this shard, a whole problem exactly in a tune manifest, sizes positive. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("f.manifest.csv", data, size);
    mq_manifest m;
    char err[1024];
    if (!path)
        return 0;
    if (mq_manifest_load(path, &m, err, sizeof err)) {
        if (!memchr(err, '\n', strlen(err)) && strstr(err, path) == err)
            return 0;
        abort(); /* an error must be one line naming the file */
    }
    int tune = !strcmp(m.kind, "tune");
    if (m.shard < 1 || m.shard > m.nshards || m.nshards > MQ_SHARD_MAX ||
        m.n != m.shard_units || m.shard_units > m.sweep_units ||
        (!tune && strcmp(m.kind, "bench")))
        abort(); /* the loader let a bad manifest through */
    int64_t cost = 0;
    for (int i = 0; i < m.n; i++) {
        const mq_work_unit *u = &m.u[i];
        if (u->shard != m.shard || u->whole != tune || u->p.M < 1 || u->p.N < 1 ||
            u->p.K < 1 || u->p.group < 1 || u->rows < 0 || u->cost_us < 0)
            abort();
        cost += u->cost_us;
    }
    if (cost != m.cost_us)
        abort();
    mq_manifest_free(&m);
    return 0;
}
