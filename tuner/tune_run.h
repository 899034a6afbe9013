/* tune_run.h - tuning a suite on a target: for every distinct shape, the
 * pick (measured: guided or exhaustive search on the backend that is the
 * chip; predicted: the cost model's best candidate that verifies on the CPU
 * model), then the table, the model and the chip written into this run's
 * generation and published together (table_set.h), and the summary. */
#ifndef MQ_TUNE_RUN_H
#define MQ_TUNE_RUN_H

#include "search.h"
#include "suites.h"
#include "table_set.h"

/* 0; 1 when a shape had no verified candidate (a finding: with none at all,
 * nothing is published); 2 when the run could not go on (a row or a file
 * could not be written; the published set stays as it was). */
int mq_tune_suite(mq_tuner *T, const mq_suite *suite, int measured, const mq_model *pred,
                  const char *pred_note, const char *dir, mq_table_set *ts);

#endif
