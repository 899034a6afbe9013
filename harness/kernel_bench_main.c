/* kernel_bench.c - the CPU-model kernel benchmark: for each format and shape,
 * runs the candidates of every variant that serves the format, verifies each
 * against the float64 reference (sampled rows) before timing it, and prints
 * time, GFLOP/s and weight GB/s next to this machine's own limits, measured
 * in the same run (streaming-read bandwidth and FP32 FMA peak). */
#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mq.h"
#include "args.h"
#include "atomic_file.h"
#include "cli.h"
#include "measure.h"
#include "probes.h"

#define MAX_SHAPES 32
#define MAX_CANDS 64

typedef struct {
    mq_shape shapes[MAX_SHAPES];
    int nshapes;
    mq_shape_list shape_list;
    mq_candidate_list cand_list;
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
            "  --csv FILE           also write the rows as CSV (written atomically); the report\n"
            "                       then comes once the file is in place\n"
            "  --probe-trials N     trials of each machine probe (default 5)\n"
            "  --help               this text\n\n"
            "examples:\n"
            "  kernel-bench\n"
            "  kernel-bench --shape 1x4096x4096 --formats u4 --min-time 0.3\n"
            "  kernel-bench --shape 16x4096x14336 --candidate 'marlin_gemm_fused_fp4 16 64 128 0 1'\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->group = 128;
    o->min_time = 1.0;
    o->max_reps = 200;
    o->probe_trials = 5;
    o->shape_list = (mq_shape_list){o->shapes, 0, MAX_SHAPES};
    o->cand_list = (mq_candidate_list){o->cands, 0, MAX_CANDS};
    const mq_arg args[] = {
        MQ_OPT_CUSTOM("--shape", &o->shape_list, mq_cli_add_shape,
                      "bad shape (expected MxNxK, positive)"),
        MQ_OPT_CUSTOM("--formats", &o->formats, mq_cli_parse_formats, NULL),
        MQ_OPT_INT("--group", &o->group, 1, 1 << 20, "bad group size"),
        MQ_OPT_CUSTOM("--candidate", &o->cand_list, mq_cli_add_candidate, NULL),
        MQ_OPT_INT("--threads", &o->threads, 1, 1024, "bad thread count"),
        MQ_OPT_DOUBLE("--min-time", &o->min_time, 1e-6, 3600, "bad --min-time"),
        MQ_OPT_INT("--max-reps", &o->max_reps, 1, MQ_MAX_SAMPLES, "bad --max-reps"),
        MQ_OPT_STR("--csv", &o->csv_path),
        MQ_OPT_INT("--probe-trials", &o->probe_trials, 1, 100, "bad --probe-trials"),
        MQ_OPT_FLAG("--warm", &o->warm),
    };
    int rc = mq_args_parse("kernel-bench", argc, argv, 1, args, sizeof args / sizeof args[0],
                           NULL, 0, NULL);
    if (rc == 1)
        usage(stdout);
    if (rc)
        return rc;
    o->nshapes = o->shape_list.n;
    o->ncands = o->cand_list.n;
    if (!o->nshapes) {
        static const mq_shape def[] = {{"default", "", 1, 4096, 14336},
                                       {"default", "", 16, 4096, 14336},
                                       {"default", "", 512, 4096, 14336}};
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
        if (mq_variant_get(c.variant)->schedule != MQ_SCHED_STRIPED)
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
    for (int v = 0; v < mq_variant_count(); v++) {
        mq_candidate c = {(mq_variant)v, mq_variant_get((mq_variant)v)->defaults};
        n = add_candidate(p, threads, c, out, n);
    }
    for (size_t i = 0; i < sizeof tuned / sizeof tuned[0]; i++)
        n = add_candidate(p, threads, tuned[i], out, n);
    return n;
}

typedef struct {
    mq_problem p;
    mq_candidate c;
    char status[300]; /* ok, wrong, error, or illegal: <reason> */
    mq_stats t;
    double gflops, weight_gbs, worst_ratio;
} row;

/* Where the report goes: stdout, or (with --csv) memory first, shown once
 * the CSV is in place, so that a failure leaves its one line alone. */
static FILE *report;

static void print_row(const row *r, const mq_machine_probe *mp)
{
    char name[128];
    mq_candidate_str(&r->c, name, sizeof name);
    if (strcmp(r->status, "ok")) {
        fprintf(report, "%-5s %4d %-52s %s\n", mq_format_name(r->p.format), r->p.M, name,
                r->status);
        return;
    }
    fprintf(report, "%-5s %4d %-52s %9.3f %9.3f %9.3f %4d %8.1f %5.0f%% %7.1f %5.0f%%\n",
            mq_format_name(r->p.format), r->p.M, name, r->t.median * 1e3, r->t.p10 * 1e3,
            r->t.p90 * 1e3, r->t.n, r->gflops, 100 * r->gflops / mp->fma_gflops,
            r->weight_gbs, 100 * r->weight_gbs / mp->read_gbs);
    fflush(report);
}

static void csv_field(FILE *f, const char *s, int last)
{
    csv_fwrite(f, s, strlen(s));
    fputc(last ? '\n' : ',', f);
}

/* The CSV goes to f, the temporary file opened before anything ran (so an
 * unwritable path is refused at once), and is renamed over path at the end. */
static int write_csv(FILE *f, const char *tmp, const char *path, const row *rows, int n,
                     const mq_machine_probe *mp)
{
    char err[4300];
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
        snprintf(v[16], 64, "%d", r->t.n);
        snprintf(v[17], 64, "%.4f", r->gflops);
        snprintf(v[18], 64, "%.4f", r->weight_gbs);
        snprintf(v[19], 64, "%.4f", mp->read_gbs);
        snprintf(v[20], 64, "%.4f", mp->fma_gflops);
        snprintf(v[21], 64, "%.4g", r->worst_ratio);
        for (int j = 0; j < 22; j++) /* the status may be longer than 64 */
            csv_field(f, j == 11 ? r->status : v[j], j == 21);
    }
    if (mq_atomic_commit(f, tmp, path, err, sizeof err)) {
        fprintf(stderr, "kernel-bench: %s\n", err);
        return -1;
    }
    return 0;
}

/* Verify, then time for --min-time (no early stop: a fixed time per row). */
static void bench_candidate(mq_backend *be, mq_bench_problem *bp, const options *o, row *r)
{
    static mq_measurement m;
    mq_measure_opts mo = {o->min_time, 0, 5, o->max_reps, 1};
    mq_measure(be, bp, &r->c, NULL, &mo, &m);
    if (!strcmp(m.status, "ok") || !strcmp(m.status, "wrong"))
        snprintf(r->status, sizeof r->status, "%s", m.status);
    else
        snprintf(r->status, sizeof r->status, "%s: %s", m.status, m.error);
    r->t = m.st;
    r->gflops = m.gflops;
    r->weight_gbs = m.weight_gbs;
    r->worst_ratio = m.worst_ratio;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    mq_error err;
    for (int f = 0; f < MQ_FMT_COUNT; f++) /* bad shapes fail before any work */
        for (int s = 0; (o.formats & (1u << f)) && s < o.nshapes; s++) {
            mq_problem p = {(mq_format)f, o.shapes[s].M, o.shapes[s].N, o.shapes[s].K, o.group};
            if (mq_problem_check(&p, &err) ||
                mq_problem_fits_memory(&p, err.msg, sizeof err.msg)) {
                fprintf(stderr, "kernel-bench: %s\n", err.msg);
                return 2;
            }
        }
    char csv_tmp[4300], why[4400];
    FILE *csv = NULL;
    if (o.csv_path && !(csv = mq_atomic_open(o.csv_path, csv_tmp, sizeof csv_tmp, why,
                                             sizeof why))) {
        fprintf(stderr, "kernel-bench: %s\n", why);
        return 2;
    }
    mq_backend_opts bo = {o.threads};
    mq_backend *be = mq_backend_cpu_open(&bo, &err);
    if (!be) {
        fprintf(stderr, "kernel-bench: %s\n", err.msg);
        mq_atomic_abort(csv, csv_tmp);
        return 2;
    }
    int threads = be->threads;
    mq_machine_probe mp;
    if (mq_probe_machine(threads, 0, o.probe_trials, &mp)) {
        fprintf(stderr, "kernel-bench: the machine probes failed (out of memory?)\n");
        mq_atomic_abort(csv, csv_tmp);
        return 2;
    }
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    char *report_buf = NULL;
    size_t report_len = 0;
    report = csv ? open_memstream(&report_buf, &report_len) : stdout;
    if (!report) {
        fprintf(stderr, "kernel-bench: out of memory\n");
        mq_atomic_abort(csv, csv_tmp);
        return 2;
    }
    fprintf(report, "kernel-bench %s, %d threads, group %d, %s\n", date, threads, o.group,
           o.warm ? "warm weights" : "weights rotated past the L3");
    fprintf(report, "machine: streaming read %.1f GB/s, FP32 FMA peak %.1f GFLOP/s (best of %d)\n\n",
           mp.read_gbs, mp.fma_gflops, o.probe_trials);
    fprintf(report, "%-5s %4s %-52s %9s %9s %9s %4s %8s %6s %7s %6s\n", "fmt", "M", "candidate",
           "median ms", "p10 ms", "p90 ms", "reps", "GFLOP/s", "%peak", "W GB/s", "%read");
    row *rows = calloc((size_t)o.nshapes * MQ_FMT_COUNT * MAX_CANDS, sizeof *rows);
    int nrows = 0;
    for (int f = 0; f < MQ_FMT_COUNT; f++) {
        if (!(o.formats & (1u << f)))
            continue;
        for (int s = 0; s < o.nshapes; s++) {
            mq_problem p = {(mq_format)f, o.shapes[s].M, o.shapes[s].N, o.shapes[s].K, o.group};
            mq_bench_problem bp = {0};
            if (mq_bench_problem_setup(&bp, &p, o.warm, NULL, 0, &err)) {
                fprintf(stderr, "kernel-bench: %s\n", err.msg);
                mq_bench_problem_free(&bp);
                mq_backend_close(be);
                free(rows);
                mq_atomic_abort(csv, csv_tmp);
                if (report != stdout) {
                    fclose(report);
                    free(report_buf);
                }
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
                bench_candidate(be, &bp, &o, r);
                print_row(r, &mp);
                if (!strcmp(r->status, "ok") && (best < 0 || r->t.median < rows[best].t.median))
                    best = (int)(r - rows);
            }
            if (best >= 0) {
                char name[128];
                mq_candidate_str(&rows[best].c, name, sizeof name);
                fprintf(report, "  best %s M=%d: %s  %.3f ms  %.1f GFLOP/s (%.0f%% of FMA peak)  "
                       "%.1f GB/s of weights (%.0f%% of read bandwidth)\n\n",
                       mq_format_name(p.format), p.M, name, rows[best].t.median * 1e3,
                       rows[best].gflops, 100 * rows[best].gflops / mp.fma_gflops,
                       rows[best].weight_gbs, 100 * rows[best].weight_gbs / mp.read_gbs);
            }
            mq_bench_problem_free(&bp);
        }
    }
    rc = 0;
    if (csv && write_csv(csv, csv_tmp, o.csv_path, rows, nrows, &mp))
        rc = 2;
    if (report != stdout) { /* the CSV is in place: now the report */
        fclose(report);
        if (!rc)
            fwrite(report_buf, 1, report_len, stdout);
        free(report_buf);
    }
    free(rows);
    mq_backend_close(be);
    return rc;
}
