/* suites.h - shape suites: real LLM layer shapes (Llama-3-8B and -70B
 * attention and MLP projections, one MoE expert) crossed with token counts
 * M, built in or read from a user CSV file. N is output features, K input
 * features (the weight is [K, N]). */
#ifndef MQ_SUITES_H
#define MQ_SUITES_H

#include <stddef.h>

#include "mq.h"

typedef struct {
    char model[32], layer[32];
    int M, N, K;
} mq_shape;

typedef struct {
    mq_shape *s;
    int n;
} mq_suite;

/* M sets: "decode" {1,2,4,8,12,16}, "prefill" {24,32,64,128,256,512},
 * "all" (both), or a comma list "1,16,512". Returns the count or -1. */
int mq_suite_parse_ms(const char *spec, int *ms, int cap, char *err, size_t errlen);

/* A built-in suite (llama3-8b, llama3-70b, moe, default = llama3-8b + moe,
 * all, smoke) or a CSV file
 * with the header model,layer,N,K and an optional M column (rows without M
 * are crossed with ms). -1 and a message on error. */
int mq_suite_load(const char *name_or_path, const int *ms, int nms, mq_suite *out, char *err,
                  size_t errlen);
void mq_suite_free(mq_suite *s);
/* The Ms of shapes[from..n) with this N and K: the token counts that will
 * reuse one weight set (mq_bench_problem_setup computes their references in
 * one pass). Returns how many were stored in ms (at most cap). */
int mq_shapes_ms_sharing(const mq_shape *shapes, int n, int from, int N, int K, int *ms,
                         int cap);
const char *mq_suite_builtin_names(void);

#endif
