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
    char name[32];                       /* lower-case letters, digits, '_' (results/NAME/,
                                          * table.h's identifiers) */
    char arch[32];                       /* Metal architecture name ("" for host) */
    char like[32];                       /* the chip this one inherits from ("": none):
                                          * a binned part is like its full part */
    double v[MQ_CHIP_NFIELDS];
    char source[MQ_CHIP_NFIELDS][200];
    int is_host;
    mq_limits lim;                       /* what a candidate must respect (threadgroup
                                          * memory, threads, SIMD width, cores): derived
                                          * from v once, when the chip is made
                                          * (mq_chip_set_limits); a device that allows
                                          * less narrows it (harness/target.c) */
} mq_chip;

typedef struct {
    mq_chip *chips;
    int n;
    char path[1024]; /* the file it was read from, for messages ("" if built by hand) */
} mq_chip_db;

/* The default chips file: MQ_CHIPS if set, else the one in the source tree. */
const char *mq_chips_default_path(void);
/* Load a chips file; every chip must have every field, its own or, through
 * `like`, another chip's (the whole file is read first, so row order does
 * not matter; a chain of likes resolves from its end). -1 and a message
 * naming the file and line on error (an unknown or circular like too). */
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

/* The chip a device is. Its name picks a family ("Apple M4 Max" -> m4max
 * and every chip like m4max, directly or by a chain, whose name starts with
 * "m4max": the binned parts), and its GPU core count (gpu_cores, 0 =
 * unknown) the member: 32 -> m4max32; unknown -> the full part m4max. A
 * count no member has is an error listing the members' counts. A name the
 * file lacks falls back to the chips whose arch is the device's
 * architecture name (applegpu_g13g -> m1), of that core count when known,
 * else the full parts only. -1 and a one-line message naming the
 * candidates when several remain (applegpu_g16s: m4pro or m4max) or none. */
int mq_chip_from_device(const mq_chip_db *db, const char *device_name, const char *arch,
                        int gpu_cores, mq_chip *out, char *err, size_t errlen);

/* Derive c->lim from c->v: the chips file's reader and mq_chip_host do;
 * call it after setting a chip's figures by hand. Everything else reads
 * c->lim. */
void mq_chip_set_limits(mq_chip *c);

/* Is any chip of db like `full` (a binned part of it)? Where none is, a
 * device's unknown core count leaves no doubt about its row. */
int mq_chip_has_binned_parts(const mq_chip_db *db, const char *full);

#endif
