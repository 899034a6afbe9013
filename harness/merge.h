/* merge.h - many results files (the shards of a sweep, run on many
 * machines) into one: every row keeps its provenance (host, chip, backend,
 * build, date); rows of different builds or schemas are refused unless
 * allowed; a key measured more than once is reported and, by default, its
 * newest row kept; the shard manifests found beside the inputs
 * (shard.h) tell which shards of each sweep are missing or incomplete. The
 * merged file is written to a temporary name and renamed. */
#ifndef MQ_MERGE_H
#define MQ_MERGE_H

#include <stddef.h>
#include <stdio.h>

typedef enum { MQ_KEEP_NEWEST, MQ_KEEP_FIRST, MQ_KEEP_ALL } mq_merge_keep;

typedef struct {
    mq_merge_keep keep;
    int allow_mixed_builds, allow_mixed_schemas;
} mq_merge_opts;

typedef struct {
    int inputs, manifests, sweeps;
    int rows_in, rows_out;
    int dup_keys, dup_rows_dropped;
    int shards_missing, shards_incomplete, units_missing;
} mq_merge_summary;

/* Merge inputs[0..n) into out, printing the report (provenance, duplicates,
 * gaps) to rep. 0 when written and every sweep whose manifests are among
 * the inputs is complete; 1 when written with shards missing or
 * incomplete; 2 (nothing written, nothing printed to rep) on an input that
 * cannot be read, manifests of one sweep that disagree (its shard count,
 * kind, chip, backend or units; merge.c), mixed builds or schemas not
 * allowed, or an output that cannot be written (or is named like a
 * manifest); err then names the file(s) and the problem. out is written
 * through mq_atomic_open/commit: a new temporary file, renamed. */
int mq_merge(const char *const *inputs, int n, const char *out, const mq_merge_opts *o,
             FILE *rep, mq_merge_summary *sum, char *err, size_t errlen);

#endif
