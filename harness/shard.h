/* shard.h - one sweep split across machines. A sweep's work list holds
 * every unit of work once, in one order that every machine computes the
 * same way (from the command line alone, never from a measurement), each
 * unit with an estimated cost in integer microseconds, and the cost of
 * setting up its problem (weights, reference), paid once by every shard
 * that holds a unit of that problem. Splitting cuts the list into N
 * contiguous shares whose largest estimated cost is as small as it can be,
 * so a shard keeps the candidates of a problem together (they share its
 * weights) and N machines cover the sweep exactly once. The sweep's id is a hash of
 * every unit and its owner: shards computed from different command lines
 * (another suite, another --threads, another build's candidate space)
 * carry different ids, and merge refuses to mix them.
 *
 * Each shard writes a manifest beside its results: the sweep, its shard
 * and the units it owns, with the rows each must leave. merge reads the
 * manifests to find the shards that are missing or incomplete. */
#ifndef MQ_SHARD_H
#define MQ_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "measure.h"
#include "mq.h"
#include "results.h"

typedef struct {
    int index, count; /* shard index of count, 1-based; count 0: the whole sweep */
} mq_shard;

/* "I/N" with 1 <= I <= N <= MQ_SHARD_MAX; -1 with the reason in err. */
#define MQ_SHARD_MAX 4096
int mq_shard_parse(const char *text, mq_shard *s, char *err, size_t errlen);

typedef struct {
    mq_problem p;
    mq_candidate c;   /* the candidate (bench), unused when whole */
    int whole;        /* 1: every candidate the tuner times for p (tune) */
    int rows;         /* results rows the unit leaves when done */
    int64_t cost_us;  /* estimated cost */
    int64_t setup_us; /* its problem's setup, paid once by each shard holding one of its units */
    int shard;        /* owner, 1-based (0 until split) */
} mq_work_unit;

typedef struct {
    mq_work_unit *u;
    int n, cap;
    int nshards;
    uint64_t id;
} mq_work_list;

/* Append a unit; -1 on out of memory. */
int mq_work_add(mq_work_list *w, const mq_work_unit *u);
void mq_work_free(mq_work_list *w);

/* Estimated seconds of measuring one candidate of p under mo, in
 * microseconds, and of setting up p's weights and reference (paid once by
 * every shard that holds a unit of p). Integer arithmetic throughout, so
 * every machine gets the same numbers. */
int64_t mq_work_candidate_cost_us(const mq_problem *p, const mq_measure_opts *mo);
int64_t mq_work_setup_cost_us(const mq_problem *p);

/* Cut the list into nshards contiguous shares, the largest as small as it
 * can be (setups counted where paid), and compute the sweep id. nshards
 * >= 1; a shard may own no unit when there are few. */
void mq_work_split(mq_work_list *w, int nshards);
/* The sweep's estimated cost: every shard's, setups included. */
int64_t mq_work_total_us(const mq_work_list *w);
/* A shard's units and estimated cost, its setups included. */
void mq_work_shard_totals(const mq_work_list *w, int shard, int *units, int64_t *cost_us);

/* Every shard's units and estimated cost, and the estimated imbalance
 * (the largest share over the mean), to f; 0. */
int mq_shard_plan_print(const mq_work_list *w, FILE *f);

/* The manifest path beside a results file: PATH without ".csv", plus
 * ".manifest.csv". */
void mq_manifest_path(const char *results_path, char *out, size_t n);

/* Write the manifest of shard s of w (kind: bench or tune; chip and
 * backend as the rows will carry them), atomically. -1 with a message. */
int mq_manifest_write(const char *path, const mq_work_list *w, const mq_shard *s,
                      const char *kind, const char *chip, const char *backend, char *err,
                      size_t errlen);

typedef struct {
    char path[4096];
    char kind[8], chip[32], backend[16];
    uint64_t id;
    int shard, nshards;
    int sweep_units, shard_units; /* as the comment lines say: the sweep's, this shard's */
    mq_work_unit *u; /* this shard's units */
    int n;
    int64_t cost_us;
} mq_manifest;

/* Read and validate a manifest; -1 with a message naming the file, line
 * and field. What loads keeps the writer's promises: schema 1, 1 <= shard
 * <= nshards <= MQ_SHARD_MAX, kind bench (candidates) or tune (whole
 * problems), every row of the comment lines' sweep, shard, kind, chip and
 * backend, and as many unit rows as the comment line says the shard owns
 * (a manifest cut short is refused, not taken for a smaller shard). */
int mq_manifest_load(const char *path, mq_manifest *m, char *err, size_t errlen);
void mq_manifest_free(mq_manifest *m);

#endif
