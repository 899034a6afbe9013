/* bench_run.h - what bench does once its inputs are good: list a chip's
 * candidate space with the reasons for every refusal (--explain), or
 * measure every candidate of every problem on a target (verified before it
 * is timed), appending each result to the results store as it is measured,
 * with a progress bar on a terminal and a summary at the end. */
#ifndef MQ_BENCH_RUN_H
#define MQ_BENCH_RUN_H

#include "measure.h"
#include "results.h"
#include "shard.h"
#include "space.h"
#include "suites.h"
#include "target.h"

typedef struct {
    const char *label;          /* the suite's name, or "shapes" */
    const mq_shape *shapes;
    int nshapes;
    unsigned formats;           /* bit (1u << mq_format) per format */
    int group;
    mq_space_kind space;
    const mq_candidate *cands;  /* only these candidates when ncands > 0 */
    int ncands;
    int resume, warm, quiet;
    mq_measure_opts mo;
} mq_bench_job;

/* Print the candidate space of every problem, legal or with its reason. */
int mq_bench_explain(const mq_bench_job *j, const mq_chip *chip);
/* The job's work list: every distinct problem (a shape listed twice is
 * one problem) crossed with its legal candidates, in the order bench
 * measures them, each with its estimated cost (shard.h). -1 on out of
 * memory. */
int mq_bench_work(const mq_bench_job *j, const mq_chip *chip, mq_work_list *w);
/* Measure the units of the work list that shard owns (split into 1: all)
 * on t, appending to w (path out); old holds rows to skip (--resume). 0; 1
 * when a candidate computed a wrong result; 2 when the run could not go on
 * (a row could not be stored, out of memory). */
int mq_bench_run(const mq_bench_job *j, const mq_target *t, mq_results_writer *w,
                 const mq_results *old, const char *out, const mq_work_list *work, int shard);

#endif
