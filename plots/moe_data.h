/* moe_data.h - the latency-vs-tokens plot of the MoE block: from a
 * moe-bench results file, per model the best fused candidate and the
 * unfused baseline at each token count. */
#ifndef MQ_MOE_DATA_H
#define MQ_MOE_DATA_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    int nseries;         /* models drawn */
    char labels[512];    /* their names, space separated */
    char host[64], format[16], routing[128];
    char device[96];     /* the device the rows were timed on ("": the CPU model) */
    int threads, rows;   /* rows used (ok) */
} mq_plot_moe_info;

/* Write, per model (in the files' order), a block "tokens fused_ms" then a
 * block "tokens unfused_ms" (blocks separated by two blank lines; a model
 * missing either path is left out), from npaths results files merged (e.g.
 * decode and prefill runs), each read whole by mq_moe_results_load (every
 * row with the header's field count, every number readable). 0, or -1 with
 * "PATH:LINE: COLUMN: problem" (or "PATH: problem"). */
int mq_plot_moe_data(const char *const *paths, int npaths, FILE *data, mq_plot_moe_info *info,
                     char *err, size_t errlen);

#endif
