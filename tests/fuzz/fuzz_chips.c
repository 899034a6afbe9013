/* fuzz_chips.c - the chips file's loader (mq_chips_load) and the snapshot
 * loader: every accepted chip has limits the planner can use. */
#include <stdlib.h>

#include "chips.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("chips.csv", data, size);
    mq_chip_db db;
    char err[1024];
    if (!path)
        return 0;
    if (mq_chips_load(path, &db, err, sizeof err) == 0) {
        for (int i = 0; i < db.n; i++) {
            mq_limits l = mq_chip_limits(&db.chips[i]);
            if (l.cores < 1 || l.tg_mem_bytes < 1024 || l.max_threads_per_tg < 32)
                abort(); /* a limit the loader should have refused */
        }
        mq_chips_free(&db);
    }
    mq_chip c;
    mq_chip_snapshot_load(path, &c, err, sizeof err);
    return 0;
}
