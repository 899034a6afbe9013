/* tune_run.h - tuning a suite on a target: for every distinct shape, the
 * pick (measured: guided or exhaustive search on the backend that is the
 * chip; predicted: the cost model's best candidate that verifies on the CPU
 * model), then the table, the model and the chip written into this run's
 * generation and published together (table_set.h), and the summary. */
#ifndef MQ_TUNE_RUN_H
#define MQ_TUNE_RUN_H

#include "search.h"
#include "shard.h"
#include "suites.h"
#include "table_set.h"

/* The suite's work list: one whole unit per distinct problem (two layers
 * of one shape are one problem), in the order tune visits them; with
 * estimate, each with the rows its search leaves (every candidate, or
 * --evals) and its estimated cost (for shards: it enumerates every
 * problem's space). -1 on out of memory. */
int mq_tune_work(const mq_tune_opts *o, const mq_suite *suite, const mq_chip *chip,
                 int estimate, mq_work_list *w);
/* Tune the problems of work that shard owns (work split into 1: all of
 * them, then publish). A shard of several only measures: its rows are in
 * T's results file, and no table is written. 0; 1 when a shape had no
 * verified candidate (a finding: with none at all, nothing is published);
 * 2 when the run could not go on (a row or a file could not be written;
 * the published set stays as it was). */
int mq_tune_suite(mq_tuner *T, const mq_suite *suite, const mq_work_list *work, int shard,
                  int measured, const mq_model *pred, const char *pred_note, const char *dir,
                  mq_table_set *ts);

#endif
