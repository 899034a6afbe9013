/* target.h - which backend runs and which chip a tool is about, decided in
 * one place for every tool (bench, tune, plot, kernel-bench):
 *   - the chip: 'host' (this machine, measured by the probes), a chip of the
 *     chips file, the chip a device backend is (from its name, GPU core count and
 *     architecture), or a snapshot of a chip a run saw (tune-chip.csv,
 *     results/CHIP/chip.csv);
 *   - the backend: by name (bench), the one that is the chip, else the CPU
 *     model to verify predictions (tune), or none (plot, --explain);
 *   - whether the backend's times are the chip's (measured) or not.
 * What it decided is said in notes, for the tool to print once its inputs
 * and outputs are good. */
#ifndef MQ_TARGET_H
#define MQ_TARGET_H

#include <stddef.h>

#include "backend.h"
#include "chips.h"

typedef enum {
    MQ_TARGET_ANY_BACKEND,  /* bench: the backend asked for, whatever device it is */
    MQ_TARGET_CHIP_BACKEND, /* tune: a device backend only when it is the chip, else the
                             * CPU model (which verifies what the model predicts) */
    MQ_TARGET_NO_BACKEND,   /* plot, bench --explain: the chip alone */
} mq_target_use;

typedef struct {
    const char *chip;       /* "host" or a chip of the chips file */
    const char *chips_path; /* the chips file */
    const char *backend;    /* MQ_TARGET_ANY_BACKEND: auto, cpu, metal */
    int threads;            /* CPU-model workers (0: one per core) */
    const char *snapshot;   /* when this file exists, the chip is the one it holds */
    mq_target_use use;
} mq_target_opts;

typedef struct {
    mq_backend *be;    /* NULL for MQ_TARGET_NO_BACKEND */
    mq_chip chip;      /* its lim: the limits every candidate is planned under */
    int measured;      /* the backend's times are the chip's */
    int from_snapshot; /* the chip came from opts.snapshot */
    char notes[2048];  /* what was decided, one line each */
} mq_target;

/* 0, or -1 with a one-line message (an unknown chip, a broken chips file or
 * snapshot, an unavailable backend, a device that is no known chip). */
int mq_target_open(const mq_target_opts *o, mq_target *t, char *err, size_t errlen);
/* Print the notes to stderr, each line prefixed "TOOL: ". */
void mq_target_print_notes(const mq_target *t, const char *tool);
void mq_target_close(mq_target *t);

#endif
