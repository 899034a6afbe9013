/* space.h - the candidate space of a problem on a chip: every variant that
 * serves the format x tile sizes x num_threadgroups (striped: multiples of
 * the chip's cores, and one per work unit) x split_k, each entry legal or
 * kept with the reason it is not (for bench --explain). */
#ifndef MQ_SPACE_H
#define MQ_SPACE_H

#include "chips.h"
#include "mq.h"

typedef struct {
    mq_candidate c;
    int legal;
    char reason[256];
    mq_plan plan;
} mq_space_entry;

typedef struct {
    mq_space_entry *e;
    int n, legal;
} mq_space;

typedef enum {
    MQ_SPACE_SEED, /* each variant's seed configuration */
    MQ_SPACE_FULL  /* the whole grid below */
} mq_space_kind;

/* The grid: tile_m {8..128}, tile_n {32..1024}, tile_k {16..256},
 * split_k {1,2,3,4,8}, striped num_threadgroups {1,2,4,8} x cores and the
 * work units. Tiles more than twice the problem (a half-size tile already
 * covers M, N or K) are kept as rejected: the same work, more padding. */
int mq_space_enumerate(const mq_problem *p, const mq_chip *chip, mq_space_kind kind,
                       mq_space *out);
void mq_space_free(mq_space *s);
int mq_space_kind_parse(const char *s, mq_space_kind *out);

#endif
