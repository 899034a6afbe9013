/* fuzz_chips.c - the chips file's loader (mq_chips_load: rows, likes and
 * their chains and cycles) and the snapshot loader: every accepted chip has
 * limits the planner can use, and a device named after a chip is that chip
 * (core count unknown) or a chip of its core count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chips.h"
#include "fuzz_common.h"

/* "Apple NAME" is NAME's family: with no core count NAME itself, with
 * NAME's count a chip of that count (NAME, or one of the same count). */
static void check_device(const mq_chip_db *db, const mq_chip *c)
{
    char dev[64], err[1024];
    mq_chip got;
    snprintf(dev, sizeof dev, "Apple %s", c->name);
    if (mq_chip_from_device(db, dev, c->arch, 0, &got, err, sizeof err) ||
        strcmp(got.name, c->name))
        abort(); /* a chip's own name must find it */
    int cores = (int)c->v[MQ_CHIP_GPU_CORES];
    if (mq_chip_from_device(db, dev, c->arch, cores, &got, err, sizeof err) == 0 &&
        (int)got.v[MQ_CHIP_GPU_CORES] != cores)
        abort(); /* a count chosen is the count asked for */
    if (mq_chip_from_device(db, dev, c->arch, cores + 1, &got, err, sizeof err) != 0 &&
        !strstr(err, "GPU cores") && !strstr(err, "out of memory"))
        abort(); /* a refusal says why */
    mq_chip_from_device(db, "Some GPU", c->arch, cores, &got, err, sizeof err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("chips.csv", data, size);
    mq_chip_db db;
    char err[1024];
    if (!path)
        return 0;
    if (mq_chips_load(path, &db, err, sizeof err) == 0) {
        for (int i = 0; i < db.n; i++) {
            mq_limits l = db.chips[i].lim;
            if (l.cores < 1 || l.tg_mem_bytes < 1024 || l.max_threads_per_tg < 32)
                abort(); /* a limit the loader should have refused */
            if (i < 16) /* real files have about 30 chips; the first few suffice */
                check_device(&db, &db.chips[i]);
        }
        mq_chips_free(&db);
    }
    mq_chip c;
    mq_chip_snapshot_load(path, &c, err, sizeof err);
    return 0;
}
