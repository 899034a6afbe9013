/* summary.h - what tune prints when it has published a table: per shape the
 * chosen candidate, its time, its speedup over each baseline rule and
 * whether it is measured or predicted; then the geometric-mean speedups, the
 * cost model's quality, what the search cost, and how far guided picks are
 * from this build's exhaustive data where that exists. */
#ifndef MQ_SUMMARY_H
#define MQ_SUMMARY_H

#include "model.h"
#include "table_write.h"

typedef struct {
    const mq_choice *choices;
    int nchoice, nent;
    const char *chip, *source;     /* "measured" or "predicted" */
    const char *table_csv, *table_h;
    const mq_model *fit;
    const char *fit_note;
    int measured, timed, reused;
    double space_fraction;         /* of each shape's space timed, on average */
    double seconds;
    int gap_n;                     /* shapes with exhaustive data of this build */
    double gap_mean, gap_max;
    int from_rows;                 /* --from-results: picked from this many candidates' rows */
} mq_tune_summary;

void mq_tune_print_summary(const mq_tune_summary *s);

#endif
