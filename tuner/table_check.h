/* table_check.h - tune --check: a table on shapes it was not tuned on. Every
 * candidate of each shape is timed (the exhaustive best), as are the
 * baselines and the table's pick (found by the runtime lookup, with the
 * level that answered); the ratios are printed per shape and as geometric
 * means. */
#ifndef MQ_TABLE_CHECK_H
#define MQ_TABLE_CHECK_H

#include "search.h"
#include "suites.h"

/* 0, or 2 when the run could not go on (a row could not be stored). */
int mq_tune_check(mq_tuner *T, const mq_suite *suite, const mq_table *table);

#endif
