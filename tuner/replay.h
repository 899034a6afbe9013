/* replay.h - tune --replay: the search run on stored rows instead of a
 * machine, as Kernel Tuner's simulation mode runs its strategies on a cache
 * of measured configurations. Each problem of a results file whose rows
 * measured enough candidates is a space; every strategy searches it from
 * cold (no rows of other shapes), once per seed, with the candidate list in
 * a seeded order, and a candidate's "measurement" is its stored time. What
 * comes out is the regret (best found / the space's best - 1) after each
 * checkpoint's evaluations and the evaluations needed to come within 3% and
 * 1% of the best: the way to judge a change to the search offline. */
#ifndef MQ_REPLAY_H
#define MQ_REPLAY_H

#include <stddef.h>
#include <stdio.h>

#include "search.h"

typedef enum { MQ_REPLAY_GUIDED, MQ_REPLAY_RANDOM, MQ_REPLAY_NSTRATEGY } mq_replay_strategy;

/* The evaluation counts the regret is reported at (those <= the budget). */
#define MQ_REPLAY_NCHECK 6
extern const int mq_replay_checkpoints[MQ_REPLAY_NCHECK];

typedef struct {
    const char *path;      /* the results file */
    unsigned strategies;   /* bit (1u << mq_replay_strategy) */
    int seeds;             /* runs per space and strategy, seeds 1..seeds */
    int min_candidates;    /* a space needs this many candidates with an ok row */
    const char *trace;     /* when set: one CSV row per space, strategy and seed here */
} mq_replay_opts;

/* Parse "guided,random" (or "all") into a strategy mask: 0, or -1 with a
 * message naming the word. */
int mq_replay_parse_strategies(const char *s, unsigned *mask, char *err, size_t errlen);

/* Replay T's search (T->o: formats, group, evals as the budget) on
 * every space of o->path measured on T->chip, the prior model T->prior;
 * the summary goes to out. 0; 2 (said on stderr, the trace file untouched)
 * on a broken file, one without a space of the chip, an output that cannot
 * be written, or out of memory. */
int mq_tune_replay(mq_tuner *T, const mq_replay_opts *o, FILE *out);

#endif
