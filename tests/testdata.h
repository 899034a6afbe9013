/* testdata.h - deterministic test inputs shared by the test programs:
 * random float weights and FP16 activations, and the error-bound check of a
 * kernel's output against the float64 reference. */
#ifndef MQ_TESTDATA_H
#define MQ_TESTDATA_H

#include <stdint.h>
#include <stdio.h>

#include "chips.h"
#include "measure.h"
#include "mq.h"

/* A toy chip: 5 cores, 8 KiB threadgroup memory, 256 threads, 4 resident
 * threadgroups assumed, 1 TFLOP/s, 100 GB/s: small enough to work by hand. */
mq_chip td_toy_chip(void);
/* A cost model with these shared coefficients (in model.h's order), the
 * rest 0. */
#include "model.h"
mq_model td_model(const double *shared, int n);

/* uniform in [-1, 1) from a 32-bit LCG state */
float td_uniform(uint32_t *state);
void td_fill_weights(float *W, int K, int N, uint32_t seed);
void td_fill_activations(uint16_t *A, int M, int K, uint32_t seed);
/* Outputs of got[n] outside ref +- bound (a NaN is outside); *worst the
 * largest |got - ref| / bound. */
long td_outside(const float *got, const double *ref, const double *bound, size_t n,
                double *worst);

/* Tolerance for FP32 accumulation of K products against the float64
 * reference: |C - ref| <= (2K + 3) * 2^-24 * sum_k |a*w|. This is the
 * classic worst-case bound for recursive FP32 summation (Higham, gamma_n)
 * with n = 2K terms, because the VDPBF16PS path splits each FP16 activation
 * into two exact bf16 parts and rounds after each of the 2K products, plus
 * three roundings: the group scale applied to a partial sum, the
 * accumulation of per-group partials, and the FP32 product grid*scale of
 * trellis weights. An indexing bug (a wrong column, a lost K block) gives
 * errors of the size of |a*w| itself, hundreds of times this bound at the
 * test shapes (K <= 384). Returns the number of elements outside it and
 * stores the worst ratio err/bound. */
long td_count_outside_bound(const float *C, const double *ref, const double *absref,
                            long count, int K, double *worst_ratio);

/* A candidate of a problem, for the tests that run kernels. */
typedef struct {
    mq_problem p;
    mq_candidate c;
} mq_test_job;

/* The representative set the kernel-running tests use (test_msl_exec,
 * gpu_cuda): per problem and variant, the smallest, seed and largest legal
 * tiles of chip's full space (split_k 1), and split_k 2 and 3 of the seed
 * tiles (or the smallest) where the variant splits. Appended to js from n,
 * at most cap; the new count. */
/* mq_metal_program for a candidate planned here under lim (the chip's: its
 * threadgroup memory and copy stages shape the program), or with room for
 * every chip and no asynchronous copies when lim is NULL; -1 and the
 * planner's or the program's message. */
int td_metal_program(const mq_problem *p, const mq_candidate *c, const mq_limits *lim,
                     const char **file, const char **function, char *defines, size_t n,
                     char *err, size_t errlen);

/* The inputs of metal/mq_probe_mma.metal's mq_probe_mma16: 128 lane-major
 * code words (code q means q - 8), A [8][64] in -4..4 as FP16, and the
 * exact C^T [16][8] read through Apple's lane layout (MLX steel's
 * get_coord), accumulators from 1 and -2 (small integers: every order of
 * summation gives it exactly). */
void td_probe16_inputs(uint32_t codes[128], uint16_t act[8 * 64], float ref[16][8]);

int mq_test_pick(const mq_problem *p, const mq_chip *chip, mq_test_job *js, int n, int cap);

/* A distinct MSL program: a kernel file and its tuned macros. */
typedef struct {
    char file[64], defines[256];
} mq_test_program;

/* Every distinct legal program of the described chips whose architecture
 * name starts with arch_prefix ("applegpu", "sm_"): every format, group
 * 32/64/128, M 1..512 and five layer shapes, the full candidate space
 * (the program depends on the tiles, the simdgroup region and the trellis
 * width only, so this is every program the planner can ask for). Up to cap
 * into ps; the count, -1 when the chips file does not load. counts, when
 * not NULL, gets the legal candidates per variant and format; *missing the
 * legal candidates that had no program (each said on stderr). */
int mq_test_programs(const char *arch_prefix, mq_test_program *ps, int cap,
                     int (*counts)[MQ_FMT_COUNT], int *missing);

/* " -DA=1 -DB=2" for "A=1 B=2", written to f (a compiler command). */
void mq_test_define_flags(FILE *f, const char *defines);

/* Run DIR/cmds, one compiler command per program, as many at a time as
 * there are cores (xargs -P). Command I logs to DIR/I.log and touches
 * DIR/I.bad when it fails; each such program is a failed check naming its
 * file, its macros, what it was expected to pass and the log's first line
 * that says error. The count of failures (a failed xargs counts one). */
int mq_test_run_programs(const char *dir, const mq_test_program *ps, int np, const char *what);

/* A covering subset of ps: per kernel file the first program with the
 * smallest and the first with the largest value of each macro that varies
 * (TILE_M, TILE_N, TILE_K, SG_M, SG_N, MQ_PLAN_THREADS, MQ_PLAN_TG_BYTES),
 * of the tile's volume, its output area and the volume per thread; per file
 * and trellis width the smallest and largest volume, thread count and area.
 * keep[i] set for the kept programs; the count kept. */
int mq_test_subset(const mq_test_program *ps, int np, char *keep);

/* $MQ_TEST_REPEAT: the target that runs the suite again in another build
 * ("make sanitize", "make portable"; the Makefile sets it), NULL in make
 * test. What a compiler (clang, NVRTC) is the subject of, and our build
 * is not, runs in full in make test only: under a repeat test_nvrtc is
 * skipped and the clang sweeps compile mq_test_subset's programs. */
const char *mq_test_repeat(void);

/* A copy of the MSL sources (the .metal and .h files of metal/) in a new directory dir
 * under /tmp with the first `from` of `file` replaced by `to`: a planted
 * fault for MQ_METAL_DIR. 0, or -1 (the directory removed) when the copy
 * or the text failed. */
int td_planted_dir(const char *file, const char *from, const char *to, char *dir, size_t n);

/* One candidate on backend b under lim, cold weights set up for p: its
 * plan's stage count in *stages (-1: the planner refused it), the
 * measurement in m (status "unplanned" and the reason when the problem
 * could not be set up). */
void td_run_candidate(mq_backend *b, const mq_problem *p, const mq_candidate *c,
                      const mq_limits *lim, int *stages, mq_measurement *m);
/* The same on a fresh msl-cpu executor reading metal/ with the first
 * `from` of `file` replaced by `to` (td_planted_dir, removed after): 0;
 * -1 when nothing could be planted, -2 when the executor did not open. */
int td_run_planted(const char *file, const char *from, const char *to, const mq_problem *p,
                   const mq_candidate *c, const mq_limits *lim, mq_measurement *m);

/* Multiply the fp4 scales of a warm bench problem (one weight copy,
 * mq_bench_problem_setup with warm 1) by 2^e, its lane layout prepared
 * again and its cached reference scaled with them (exact: every product
 * and sum scales by the power of two), so the next launch runs on weights
 * whose scales are large (e = 10 on the bench's: lane_scales_small 0, the decode's unfolded
 * path). 0, or -1 when bp is not such a problem or a scale would overflow. */
int td_scale_fp4_weights(mq_bench_problem *bp, int e);

#endif
