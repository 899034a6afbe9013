/* chips.h - target hardware as data: chip descriptions read at run time
 * from a CSV file (harness/chips.csv by default), each figure with its
 * source, plus 'host', measured on this machine when asked for. */
#ifndef MQ_CHIPS_H
#define MQ_CHIPS_H

#include <stddef.h>

#include "cost_model.h"
#include "mq.h"

/* the MQ_CHIP_* fields: kernels/cost_model.h (the dispatch table carries them) */

typedef struct {
    char name[32];
    char arch[32];                       /* Metal architecture name ("" for host) */
    double v[MQ_CHIP_NFIELDS];
    char source[MQ_CHIP_NFIELDS][200];
    int is_host;
} mq_chip;

typedef struct {
    mq_chip *chips;
    int n;
} mq_chip_db;

/* The default chips file: MQ_CHIPS if set, else the one in the source tree. */
const char *mq_chips_default_path(void);
/* Load a chips file; every chip must have every field. -1 and a message
 * naming the file and line on error. */
int mq_chips_load(const char *path, mq_chip_db *db, char *err, size_t errlen);
void mq_chips_free(mq_chip_db *db);

/* Find a chip by name ("host" measures this machine with `threads`
 * workers). Unknown names give an error that lists the known ones. */
int mq_chip_find(const mq_chip_db *db, const char *name, int threads, mq_chip *out, char *err,
                 size_t errlen);

/* This machine as a chip: cores = workers, caches from sysconf, memory
 * bandwidth and FP32 peak from the probes. */
int mq_chip_host(int threads, mq_chip *out);

/* Load a chips file and take one described chip from it (not host). */
int mq_chip_load_named(const char *path, const char *name, mq_chip *out, char *err,
                       size_t errlen);

/* A chip as a tool saw it, written atomically in the chips file's form
 * (results/CHIP/chip.csv), so that predictions from a stored model can be
 * redrawn later without measuring the host again. */
int mq_chip_write(const char *path, const mq_chip *c, char *err, size_t errlen);
/* Read such a snapshot back (it may be 'host'). */
int mq_chip_snapshot_load(const char *path, mq_chip *out, char *err, size_t errlen);

/* The chip a Metal device is: by its name ("Apple M4 Max" -> m4max) when
 * the chips file has it, else the only chip whose arch is the device's
 * architecture name (applegpu_g13g -> m1). -1 and a message naming the
 * candidates when the architecture is shared (applegpu_g16s: m4pro or
 * m4max) or unknown. */
int mq_chip_from_device(const mq_chip_db *db, const char *device_name, const char *arch,
                        mq_chip *out, char *err, size_t errlen);

mq_limits mq_chip_limits(const mq_chip *c);

#endif
