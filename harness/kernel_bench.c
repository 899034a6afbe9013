/* kernel_bench.c - the CPU-model kernel benchmark: for each format and shape,
 * runs the candidates of every variant that serves the format, verifies each
 * against the float64 reference (sampled rows) before timing it, and prints
 * time, GFLOP/s and weight GB/s next to this machine's own limits, measured
 * in the same run (streaming-read bandwidth and FP32 FMA peak). */
#include <csv.h>
#include <errno.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mq.h"
#include "probes.h"

#define MAX_SHAPES 32
#define MAX_CANDS 64
#define MAX_SAMPLES 4096

typedef struct {
    int M, N, K;
} shape;

typedef struct {
    shape shapes[MAX_SHAPES];
    int nshapes;
    unsigned formats; /* bit per mq_format */
    int group;
    mq_candidate cands[MAX_CANDS]; /* user candidates; none: the built-in list */
    int ncands;
    int threads;
    double min_time;  /* seconds of timed runs per candidate */
    int max_reps;
    int warm;         /* no weight rotation */
    const char *csv_path;
    int probe_trials;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kernel-bench [options]\n"
            "Times the CPU model of every kernel variant, verified against the float64\n"
            "reference, next to this machine's measured read bandwidth and FMA peak.\n\n"
            "  --shape MxNxK        a shape (repeatable; default 1x4096x14336, 16x4096x14336,\n"
            "                       512x4096x14336)\n"
            "  --formats LIST       comma-separated formats (default fp4,u4)\n"
            "  --group G            group size 32, 64 or 128 (default 128)\n"
            "  --candidate SPEC     'variant tm tn tk tg sk' (repeatable; default: built-in list)\n"
            "  --threads N          worker threads (default: one per core)\n"
            "  --min-time S         seconds of timed runs per candidate (default 1.0)\n"
            "  --max-reps N         at most N timed runs per candidate (default 200)\n"
            "  --warm               no weight rotation (weights may stay cache-hot)\n"
            "  --csv FILE           also write the rows as CSV (written atomically)\n"
            "  --probe-trials N     trials of each machine probe (default 5)\n"
            "  --help               this text\n\n"
            "examples:\n"
            "  kernel-bench\n"
            "  kernel-bench --shape 1x4096x4096 --formats u4 --min-time 0.3\n"
            "  kernel-bench --shape 16x4096x14336 --candidate 'marlin_gemm_fused_fp4 16 64 128 0 1'\n");
}

static int fail_arg(const char *msg, const char *arg)
{
    fprintf(stderr, "kernel-bench: %s '%s' (see --help)\n", msg, arg);
    return 2;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->group = 128;
    o->min_time = 1.0;
    o->max_reps = 200;
    o->probe_trials = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--warm")) {
            o->warm = 1;
            continue;
        }
        static const char *const valued[] = {"--shape", "--formats", "--group", "--candidate",
                                             "--threads", "--min-time", "--max-reps", "--csv",
                                             "--probe-trials"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            known |= !strcmp(a, valued[k]);
        if (!known)
            return fail_arg("unknown option", a);
        if (!v)
            return fail_arg("missing value for", a);
        i++;
        if (!strcmp(a, "--shape")) {
            shape s;
            char extra;
            if (o->nshapes >= MAX_SHAPES)
                return fail_arg("too many shapes at", v);
            if (sscanf(v, "%dx%dx%d%c", &s.M, &s.N, &s.K, &extra) != 3 || s.M <= 0 ||
                s.N <= 0 || s.K <= 0)
                return fail_arg("bad shape (expected MxNxK, positive)", v);
            o->shapes[o->nshapes++] = s;
        } else if (!strcmp(a, "--formats")) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
                mq_format f;
                mq_error err;
                if (mq_format_from_name(t, &f, &err)) {
                    fprintf(stderr, "kernel-bench: %s\n", err.msg);
                    return 2;
                }
                o->formats |= 1u << f;
            }
        } else if (!strcmp(a, "--group")) {
            if (parse_int(v, 1, 1 << 20, &o->group))
                return fail_arg("bad group size", v);
        } else if (!strcmp(a, "--candidate")) {
            char name[64];
            mq_candidate c;
            mq_error err;
            if (o->ncands >= MAX_CANDS)
                return fail_arg("too many candidates at", v);
            if (sscanf(v, "%63s %d %d %d %d %d", name, &c.p.tile_m, &c.p.tile_n, &c.p.tile_k,
                       &c.p.num_threadgroups, &c.p.split_k) != 6)
                return fail_arg("bad candidate (expected 'variant tm tn tk tg sk')", v);
            if (mq_variant_from_name(name, &c.variant, &err)) {
                fprintf(stderr, "kernel-bench: %s\n", err.msg);
                return 2;
            }
            o->cands[o->ncands++] = c;
        } else if (!strcmp(a, "--threads")) {
            if (parse_int(v, 1, 1024, &o->threads))
                return fail_arg("bad thread count", v);
        } else if (!strcmp(a, "--min-time")) {
            char *end;
            o->min_time = strtod(v, &end);
            if (*end || !(o->min_time > 0 && o->min_time < 3600))
                return fail_arg("bad --min-time", v);
        } else if (!strcmp(a, "--max-reps")) {
            if (parse_int(v, 1, MAX_SAMPLES, &o->max_reps))
                return fail_arg("bad --max-reps", v);
        } else if (!strcmp(a, "--csv")) {
            o->csv_path = v;
        } else if (!strcmp(a, "--probe-trials")) {
            if (parse_int(v, 1, 100, &o->probe_trials))
                return fail_arg("bad --probe-trials", v);
        }
    }
    if (!o->nshapes) {
        static const shape def[] = {{1, 4096, 14336}, {16, 4096, 14336}, {512, 4096, 14336}};
        memcpy(o->shapes, def, sizeof def);
        o->nshapes = 3;
    }
    if (!o->formats)
        o->formats = (1u << MQ_FMT_FP4) | (1u << MQ_FMT_U4);
    return 0;
}

/* Add c to out if it serves the format and is legal (a striped count above
 * the work units falls back to one threadgroup per unit). */
static int add_candidate(const mq_problem *p, int threads, mq_candidate c, mq_candidate *out,
                         int n)
{
    if (!mq_variant_serves(c.variant, p->format))
        return n;
    if (c.p.num_threadgroups < 0) /* tg < 0: threads * -tg */
        c.p.num_threadgroups = threads * -c.p.num_threadgroups;
    mq_plan plan;
    if (mq_plan_candidate(p, &c, NULL, &plan, NULL) != MQ_OK) {
        if (c.variant != MQ_VAR_MARLIN_FP4_STRIPED)
            return n;
        c.p.num_threadgroups = 0;
        if (mq_plan_candidate(p, &c, NULL, &plan, NULL) != MQ_OK)
            return n;
    }
    out[n] = c;
    return n + 1;
}

/* The built-in candidates: each variant's seed configuration, MLX's split-K
 * rule at N=4096, and shapes found fast on a CPU (see BENCHMARKS.md). */
static int builtin_candidates(const mq_problem *p, int threads, mq_candidate *out)
{
    static const mq_candidate tuned[] = {
        {MQ_VAR_MLX_SPLITK, {32, 32, 32, 0, 4}},
        {MQ_VAR_MARLIN_FP4, {128, 128, 32, 0, 1}},
        {MQ_VAR_MARLIN_FP4, {8, 128, 32, 0, 1}},
        {MQ_VAR_MARLIN_FP4_STRIPED, {128, 128, 32, 0, 1}},
        {MQ_VAR_MARLIN_FP4_STRIPED, {16, 128, 64, -4, 2}},
        {MQ_VAR_FUSED_FP4, {8, 1024, 128, 0, 1}},
        {MQ_VAR_FUSED_FP4, {16, 256, 128, 0, 1}},
        {MQ_VAR_FUSED_FP4, {64, 128, 128, 0, 1}},
        {MQ_VAR_FUSED_U4, {8, 1024, 128, 0, 1}},
        {MQ_VAR_FUSED_U4, {16, 512, 128, 0, 1}},
        {MQ_VAR_FUSED_U4, {64, 128, 128, 0, 1}},
        {MQ_VAR_TRELLIS_DECODE, {16, 256, 64, 0, 1}},
        {MQ_VAR_TRELLIS_PACKED, {64, 128, 64, 0, 1}},
    };
    int n = 0;
    for (int v = 0; v < MQ_VAR_COUNT; v++) {
        mq_candidate c = {(mq_variant)v, mq_variant_get((mq_variant)v)->defaults};
        n = add_candidate(p, threads, c, out, n);
    }
    for (size_t i = 0; i < sizeof tuned / sizeof tuned[0]; i++)
        n = add_candidate(p, threads, tuned[i], out, n);
    return n;
}

typedef struct {
    double median, p10, p90, mad;
    int reps;
} timing;

static void summarize(double *s, int n, timing *t)
{
    gsl_sort(s, 1, (size_t)n);
    t->median = gsl_stats_median_from_sorted_data(s, 1, (size_t)n);
    t->p10 = gsl_stats_quantile_from_sorted_data(s, 1, (size_t)n, 0.10);
    t->p90 = gsl_stats_quantile_from_sorted_data(s, 1, (size_t)n, 0.90);
    double *dev = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n && dev; i++)
        dev[i] = fabs(s[i] - t->median);
    if (dev) {
        gsl_sort(dev, 1, (size_t)n);
        t->mad = gsl_stats_median_from_sorted_data(dev, 1, (size_t)n);
        free(dev);
    }
    t->reps = n;
}

typedef struct {
    mq_problem p;
    mq_weights *copies;
    int ncopies;
    uint16_t *A;
    float *C;
    int rows[3];
    int nrows;
    double *ref, *absref; /* [nrows][N] */
} bench_problem;

static int sample_rows(int M, int *rows)
{
    int n = 0;
    int cand[3] = {0, M / 2, M - 1};
    for (int i = 0; i < 3; i++) {
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= rows[j] == cand[i];
        if (!dup)
            rows[n++] = cand[i];
    }
    return n;
}

static int setup_problem(bench_problem *bp, const mq_problem *p, int warm, mq_error *err)
{
    memset(bp, 0, sizeof *bp);
    bp->p = *p;
    if (mq_problem_check(p, err))
        return -1;
    float *W = malloc(sizeof(float) * (size_t)p->K * p->N);
    bp->A = malloc(sizeof(uint16_t) * (size_t)p->M * p->K);
    bp->C = malloc(sizeof(float) * (size_t)p->M * p->N);
    if (!W || !bp->A || !bp->C) {
        free(W);
        snprintf(err->msg, sizeof err->msg, "out of memory for M=%d N=%d K=%d", p->M, p->N, p->K);
        return -1;
    }
    uint32_t st = 12345;
    for (size_t i = 0; i < (size_t)p->K * p->N; i++) {
        st = st * 1664525u + 1013904223u;
        W[i] = ((float)(st >> 8) / 8388608.0f - 1.0f) * 0.05f;
    }
    for (size_t i = 0; i < (size_t)p->M * p->K; i++) {
        st = st * 1664525u + 1013904223u;
        bp->A[i] = mq_float_to_half((float)(st >> 8) / 8388608.0f - 1.0f);
    }
    mq_weights w0;
    if (mq_quantize(p->format, W, p->K, p->N, p->group, NULL, &w0, err)) {
        free(W);
        return -1;
    }
    free(W);
    /* enough copies that the set exceeds twice the last-level cache */
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0)
        llc = 32L << 20;
    size_t bytes = mq_weights_bytes(&w0);
    bp->ncopies = warm ? 1 : (int)((2 * (size_t)llc) / bytes) + 2;
    if (bp->ncopies > 64)
        bp->ncopies = 64;
    bp->copies = calloc((size_t)bp->ncopies, sizeof *bp->copies);
    bp->copies[0] = w0;
    for (int i = 1; i < bp->ncopies; i++)
        if (mq_weights_copy(&bp->copies[i], &w0, err))
            return -1;
    bp->nrows = sample_rows(p->M, bp->rows);
    uint16_t *Asub = malloc(sizeof(uint16_t) * (size_t)bp->nrows * p->K);
    bp->ref = malloc(sizeof(double) * (size_t)bp->nrows * p->N);
    bp->absref = malloc(sizeof(double) * (size_t)bp->nrows * p->N);
    for (int r = 0; r < bp->nrows; r++)
        memcpy(Asub + (size_t)r * p->K, bp->A + (size_t)bp->rows[r] * p->K,
               sizeof(uint16_t) * (size_t)p->K);
    int rc = mq_reference_gemm(&w0, Asub, bp->nrows, bp->ref, bp->absref, err) ? -1 : 0;
    free(Asub);
    return rc;
}

static void free_problem(bench_problem *bp)
{
    for (int i = 0; bp->copies && i < bp->ncopies; i++)
        mq_weights_free(&bp->copies[i]);
    free(bp->copies);
    free(bp->A);
    free(bp->C);
    free(bp->ref);
    free(bp->absref);
}

/* Sampled rows within the FP32 accumulation bound (2K+3)u sum|a*w|, the
 * bound tests/testdata.h justifies. */
static int verify(const bench_problem *bp, double *worst_ratio)
{
    int N = bp->p.N, bad = 0;
    double worst = 0, u = ldexp(1.0, -24);
    for (int r = 0; r < bp->nrows; r++)
        for (int n = 0; n < N; n++) {
            double got = bp->C[(size_t)bp->rows[r] * N + n];
            double ref = bp->ref[(size_t)r * N + n];
            double bound = (2.0 * bp->p.K + 3) * u * bp->absref[(size_t)r * N + n] + 1e-30;
            double e = fabs(got - ref) / bound;
            if (!(e <= 1.0))
                bad++;
            if (!(e <= worst))
                worst = e;
        }
    *worst_ratio = worst;
    return bad;
}

typedef struct {
    mq_problem p;
    mq_candidate c;
    char status[300]; /* ok, wrong, error, or illegal: <reason> */
    timing t;
    double gflops, weight_gbs, worst_ratio;
} row;

static void print_row(const row *r, const mq_machine_probe *mp)
{
    char name[128];
    mq_candidate_str(&r->c, name, sizeof name);
    if (strcmp(r->status, "ok")) {
        printf("%-5s %4d %-52s %s\n", mq_format_name(r->p.format), r->p.M, name, r->status);
        return;
    }
    printf("%-5s %4d %-52s %9.3f %9.3f %9.3f %4d %8.1f %5.0f%% %7.1f %5.0f%%\n",
           mq_format_name(r->p.format), r->p.M, name, r->t.median * 1e3, r->t.p10 * 1e3,
           r->t.p90 * 1e3, r->t.reps, r->gflops, 100 * r->gflops / mp->fma_gflops,
           r->weight_gbs, 100 * r->weight_gbs / mp->read_gbs);
    fflush(stdout);
}

static void csv_field(FILE *f, const char *s, int last)
{
    csv_fwrite(f, s, strlen(s));
    fputc(last ? '\n' : ',', f);
}

static int write_csv(const char *path, const row *rows, int n, const mq_machine_probe *mp)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "kernel-bench: cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    static const char *const head[] = {
        "format", "M", "N", "K", "group", "variant", "tile_m", "tile_n", "tile_k",
        "num_threadgroups", "split_k", "status", "median_s", "p10_s", "p90_s", "mad_s", "reps",
        "gflops", "weight_gbs", "machine_read_gbs", "machine_fma_gflops", "worst_err_over_bound"};
    int nh = (int)(sizeof head / sizeof head[0]);
    for (int i = 0; i < nh; i++)
        csv_field(f, head[i], i == nh - 1);
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        char v[22][64];
        snprintf(v[0], 64, "%s", mq_format_name(r->p.format));
        snprintf(v[1], 64, "%d", r->p.M);
        snprintf(v[2], 64, "%d", r->p.N);
        snprintf(v[3], 64, "%d", r->p.K);
        snprintf(v[4], 64, "%d", r->p.group);
        snprintf(v[5], 64, "%s", mq_variant_get(r->c.variant)->name);
        snprintf(v[6], 64, "%d", r->c.p.tile_m);
        snprintf(v[7], 64, "%d", r->c.p.tile_n);
        snprintf(v[8], 64, "%d", r->c.p.tile_k);
        snprintf(v[9], 64, "%d", r->c.p.num_threadgroups);
        snprintf(v[10], 64, "%d", r->c.p.split_k);
        snprintf(v[12], 64, "%.9g", r->t.median);
        snprintf(v[13], 64, "%.9g", r->t.p10);
        snprintf(v[14], 64, "%.9g", r->t.p90);
        snprintf(v[15], 64, "%.9g", r->t.mad);
        snprintf(v[16], 64, "%d", r->t.reps);
        snprintf(v[17], 64, "%.4f", r->gflops);
        snprintf(v[18], 64, "%.4f", r->weight_gbs);
        snprintf(v[19], 64, "%.4f", mp->read_gbs);
        snprintf(v[20], 64, "%.4f", mp->fma_gflops);
        snprintf(v[21], 64, "%.4g", r->worst_ratio);
        for (int j = 0; j < 22; j++) /* the status may be longer than 64 */
            csv_field(f, j == 11 ? r->status : v[j], j == 21);
    }
    if (fflush(f) || fsync(fileno(f)) || fclose(f) || rename(tmp, path)) {
        fprintf(stderr, "kernel-bench: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

static void bench_candidate(mq_ctx *ctx, bench_problem *bp, const options *o, row *r)
{
    mq_error err;
    mq_plan plan;
    snprintf(r->status, sizeof r->status, "ok");
    memset(&r->t, 0, sizeof r->t);
    r->gflops = r->weight_gbs = r->worst_ratio = 0;
    if (mq_plan_candidate(&bp->p, &r->c, NULL, &plan, &err)) {
        snprintf(r->status, sizeof r->status, "illegal: %s", err.msg);
        return;
    }
    /* correctness first: a wrong output never gets a time */
    for (size_t i = 0; i < (size_t)bp->p.M * bp->p.N; i++)
        bp->C[i] = NAN;
    if (mq_gemm(ctx, &bp->p, &bp->copies[0], bp->A, bp->C, &r->c, NULL, &err)) {
        snprintf(r->status, sizeof r->status, "error: %s", err.msg);
        return;
    }
    if (verify(bp, &r->worst_ratio)) {
        snprintf(r->status, sizeof r->status, "wrong");
        return;
    }
    double samples[MAX_SAMPLES];
    int n = 0, copy = 1 % bp->ncopies;
    mq_gemm(ctx, &bp->p, &bp->copies[copy], bp->A, bp->C, &r->c, NULL, &err); /* warm-up */
    double spent = 0;
    while (n < o->max_reps && (spent < o->min_time || n < 5)) {
        copy = (copy + 1) % bp->ncopies;
        double t0 = mq_now();
        mq_gemm(ctx, &bp->p, &bp->copies[copy], bp->A, bp->C, &r->c, NULL, &err);
        double dt = mq_now() - t0;
        samples[n++] = dt;
        spent += dt;
    }
    summarize(samples, n, &r->t);
    r->gflops = 2.0 * bp->p.M * bp->p.N * (double)bp->p.K / r->t.median / 1e9;
    r->weight_gbs = (double)mq_weights_bytes(&bp->copies[0]) / r->t.median / 1e9;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    mq_ctx *ctx;
    mq_error err;
    for (int f = 0; f < MQ_FMT_COUNT; f++) /* bad shapes fail before any work */
        for (int s = 0; (o.formats & (1u << f)) && s < o.nshapes; s++) {
            mq_problem p = {(mq_format)f, o.shapes[s].M, o.shapes[s].N, o.shapes[s].K, o.group};
            if (mq_problem_check(&p, &err)) {
                fprintf(stderr, "kernel-bench: %s\n", err.msg);
                return 2;
            }
        }
    if (mq_ctx_create(o.threads, &ctx, &err)) {
        fprintf(stderr, "kernel-bench: %s\n", err.msg);
        return 1;
    }
    int threads = mq_ctx_threads(ctx);
    mq_machine_probe mp;
    if (mq_probe_machine(threads, 0, o.probe_trials, &mp)) {
        fprintf(stderr, "kernel-bench: the machine probes failed (out of memory?)\n");
        return 1;
    }
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("kernel-bench %s, %d threads, group %d, %s\n", date, threads, o.group,
           o.warm ? "warm weights" : "weights rotated past the L3");
    printf("machine: streaming read %.1f GB/s, FP32 FMA peak %.1f GFLOP/s (best of %d)\n\n",
           mp.read_gbs, mp.fma_gflops, o.probe_trials);
    printf("%-5s %4s %-52s %9s %9s %9s %4s %8s %6s %7s %6s\n", "fmt", "M", "candidate",
           "median ms", "p10 ms", "p90 ms", "reps", "GFLOP/s", "%peak", "W GB/s", "%read");
    row *rows = calloc((size_t)o.nshapes * MQ_FMT_COUNT * MAX_CANDS, sizeof *rows);
    int nrows = 0;
    for (int f = 0; f < MQ_FMT_COUNT; f++) {
        if (!(o.formats & (1u << f)))
            continue;
        for (int s = 0; s < o.nshapes; s++) {
            mq_problem p = {(mq_format)f, o.shapes[s].M, o.shapes[s].N, o.shapes[s].K, o.group};
            bench_problem bp;
            if (setup_problem(&bp, &p, o.warm, &err)) {
                fprintf(stderr, "kernel-bench: %s\n", err.msg);
                free_problem(&bp);
                mq_ctx_destroy(ctx);
                free(rows);
                return 2;
            }
            mq_candidate cands[MAX_CANDS];
            int nc = o.ncands;
            if (nc)
                memcpy(cands, o.cands, sizeof(mq_candidate) * (size_t)nc);
            else
                nc = builtin_candidates(&p, threads, cands);
            int best = -1;
            for (int c = 0; c < nc; c++) {
                if (!mq_variant_serves(cands[c].variant, p.format))
                    continue;
                row *r = &rows[nrows++];
                r->p = p;
                r->c = cands[c];
                bench_candidate(ctx, &bp, &o, r);
                print_row(r, &mp);
                if (!strcmp(r->status, "ok") && (best < 0 || r->t.median < rows[best].t.median))
                    best = (int)(r - rows);
            }
            if (best >= 0) {
                char name[128];
                mq_candidate_str(&rows[best].c, name, sizeof name);
                printf("  best %s M=%d: %s  %.3f ms  %.1f GFLOP/s (%.0f%% of FMA peak)  "
                       "%.1f GB/s of weights (%.0f%% of read bandwidth)\n\n",
                       mq_format_name(p.format), p.M, name, rows[best].t.median * 1e3,
                       rows[best].gflops, 100 * rows[best].gflops / mp.fma_gflops,
                       rows[best].weight_gbs, 100 * rows[best].weight_gbs / mp.read_gbs);
            }
            free_problem(&bp);
        }
    }
    rc = 0;
    if (o.csv_path && write_csv(o.csv_path, rows, nrows, &mp))
        rc = 1;
    free(rows);
    mq_ctx_destroy(ctx);
    return rc;
}
