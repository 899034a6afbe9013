/* table_set.h - the files one tune run publishes (table.csv, table.h,
 * model.csv, chip.csv) made visible together, so that a kill or a full disk
 * at any moment leaves either the previous run's set or the new one, never
 * a mix. Layout under the output directory DIR:
 *
 *   DIR/tables/GEN/{table.csv,table.h,model.csv,chip.csv}   one run's set
 *   DIR/tables/current -> GEN                                 the published set
 *   DIR/table.csv -> tables/current/table.csv                 (and the others)
 *
 * A run writes its set into a new GEN directory nobody reads, then replaces
 * the `current` link in one rename(2): that rename is the commit. The stable
 * names in DIR are links through `current`, made once. A set of plain files
 * from before this layout is replaced by the links at the first commit. The
 * run holds DIR/tables/.lock (flock) from begin to end, so two tunes cannot
 * write one DIR; begin removes what killed runs left (GEN directories that
 * `current` does not name). */
#ifndef MQ_TABLE_SET_H
#define MQ_TABLE_SET_H

#include <stddef.h>

typedef struct {
    char dir[4096];      /* DIR */
    char gen[64];        /* this run's generation name */
    char gen_path[4300]; /* DIR/tables/GEN */
    int lock_fd;
} mq_table_set;

/* The names a set holds, in the order they are written. */
extern const char *const mq_table_set_files[4];

/* Lock DIR (made if missing), remove stale generations, make this run's
 * GEN directory. -1 and a message naming the path when DIR cannot be
 * written or another process holds the lock. */
int mq_table_set_begin(const char *dir, mq_table_set *ts, char *err, size_t errlen);
/* Where this run writes NAME (one of mq_table_set_files). */
const char *mq_table_set_path(const mq_table_set *ts, const char *name, char *buf, size_t n);
/* Publish: every file of the set must exist; fsync the generation, replace
 * `current`, make the stable links, remove the previous generation. On
 * failure the previous set stays published. */
int mq_table_set_commit(mq_table_set *ts, char *err, size_t errlen);
/* Unpublished: remove this run's generation; the previous set stays. */
void mq_table_set_abort(mq_table_set *ts);
/* Release the lock (after commit or abort). */
void mq_table_set_end(mq_table_set *ts);

#endif
