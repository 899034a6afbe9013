/* bench_main.c - the bench command: its options, the problems (a suite or
 * shapes, crossed with formats), the target (harness/target.c) and the
 * results file; the measuring itself is harness/bench_run.c. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "bench_run.h"
#include "cli.h"
#include "probes.h"
#include "target.h"

#define MAX_CANDS 64
#define MAX_MS 64
#define MAX_SHAPES 64

typedef struct {
    const char *chip, *chips, *suite, *m, *out, *backend;
    mq_shape shapes[MAX_SHAPES];
    mq_candidate cands[MAX_CANDS];
    mq_shape_list shape_list;
    mq_candidate_list cand_list;
    mq_bench_job job;
    mq_shard shard;
    int explain, threads, no_probes;
} options;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: bench [options]\n"
        "Measures candidates of the kernel variants on a chip's candidate space, each\n"
        "verified against the float64 reference before it is timed, and appends every\n"
        "result to a results CSV as it is measured (a killed run can --resume).\n\n"
        "  --chip NAME        target chip (default host: this machine, measured)\n"
        "  --chips FILE       chip descriptions (default harness/chips.csv or $MQ_CHIPS)\n"
        "  --suite NAME|FILE  llama3-8b, llama3-70b, moe, default, all, smoke, or a CSV with\n"
        "                     model,layer,N,K[,M] (default smoke)\n"
        "  --m SPEC           token counts: decode, prefill, all or 1,16,512 (default decode)\n"
        "  --shape MxNxK      one shape instead of a suite (repeatable)\n"
        "  --formats LIST     fp4,u4,trellis2,trellis3,trellis4 (default fp4)\n"
        "  --group G          32, 64 or 128 (default 128)\n"
        "  --space seed|full  each variant's seed configuration (default) or the full grid\n"
        "  --candidate SPEC   only this candidate, 'variant tm tn tk tg sk' (repeatable)\n"
        "  --explain          list the candidate space with every rejection reason; no timing\n"
        "                     (with --shard: every shard's units and estimated seconds)\n"
        "  --out FILE         results CSV (default results/CHIP/bench.csv; with --shard\n"
        "                     results/CHIP/bench-shard-I-of-N.csv)\n"
        "  --resume           skip what this build already measured on this host in FILE\n"
        "  --shard I/N        measure only shard I of N: the work list (every distinct\n"
        "                     problem crossed with its candidates) cut into N contiguous\n"
        "                     shares of equal estimated cost; the same on every machine\n"
        "                     given the same options. Writes FILE's manifest beside it\n"
        "                     (FILE without .csv, plus .manifest.csv) for 'merge'\n"
        "  --budget S         timed seconds per candidate at most (default 0.5)\n"
        "  --ci REL           stop once the 95%% CI of the median is within +-REL (0.02)\n"
        "  --max-reps N       repetitions per candidate at most (default 1000)\n"
        "  --warm             do not rotate weights past the caches\n"
        "  --backend NAME     auto (default: metal or cuda when available, else cpu), cpu, metal,\n"
        "                     cuda (the Metal kernels on an NVIDIA GPU through NVRTC),\n"
        "                     msl-cpu (the Metal kernels on the CPU executor: verified, not timed)\n"
        "  --threads N        CPU-model workers (default: one per core)\n"
        "  --quiet            no per-candidate lines, only the summary\n"
        "  --no-probes        take no probes (the machine's or device's limits, the\n"
        "                     sized cold reads): for repeated runs whose shares nobody\n"
        "                     reads, as the nightly's A/B rounds\n"
        "  --help             this text\n\n"
        "Exit status: 0 done, 1 a candidate computed a wrong result, 2 bad input or an\n"
        "environment error (the results file keeps every row written before it).\n\n"
        "examples:\n"
        "  bench                                  # smoke suite, seed space, on this machine\n"
        "  bench --suite llama3-8b --m 1,16 --formats fp4,u4 --out /tmp/8b.csv\n"
        "  bench --shape 16x4096x4096 --space full --explain --chip m4max\n"
        "  bench --shape 1x4096x14336 --candidate 'marlin_gemm_fused_fp4 8 1024 128 0 1'\n"
        "  bench --suite all --m all --space full --resume   # long; resumable\n"
        "  bench --suite llama3-8b --space full --threads 1 --shard 3/16 --resume\n");
}

static int parse_space(const char *v, void *dst, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    return mq_space_kind_parse(v, dst);
}

static int parse_shard(const char *v, void *dst, char *err, size_t errlen)
{
    return mq_shard_parse(v, dst, err, errlen);
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->chip = "host";
    o->chips = mq_chips_default_path();
    o->suite = "smoke";
    o->m = "decode";
    o->backend = "auto";
    o->job.group = 128;
    o->job.mo = mq_measure_defaults();
    o->shape_list = (mq_shape_list){o->shapes, 0, MAX_SHAPES};
    o->cand_list = (mq_candidate_list){o->cands, 0, MAX_CANDS};
    const mq_arg args[] = {
        MQ_OPT_STR("--chip", &o->chip),
        MQ_OPT_STR("--chips", &o->chips),
        MQ_OPT_STR("--suite", &o->suite),
        MQ_OPT_STR("--m", &o->m),
        MQ_OPT_STR("--out", &o->out),
        MQ_OPT_STR("--backend", &o->backend),
        MQ_OPT_CUSTOM("--shape", &o->shape_list, mq_cli_add_shape,
                      "bad shape (expected MxNxK, positive)"),
        MQ_OPT_CUSTOM("--candidate", &o->cand_list, mq_cli_add_candidate, NULL),
        MQ_OPT_CUSTOM("--formats", &o->job.formats, mq_cli_parse_formats, NULL),
        MQ_OPT_INT("--group", &o->job.group, 1, 1 << 20, "bad group size"),
        MQ_OPT_CUSTOM("--space", &o->job.space, parse_space, "bad --space (expected seed or full)"),
        MQ_OPT_DOUBLE("--budget", &o->job.mo.budget_s, 1e-6, 3600, "bad --budget"),
        MQ_OPT_DOUBLE("--ci", &o->job.mo.ci_rel, 0, 1, "bad --ci"),
        MQ_OPT_INT("--max-reps", &o->job.mo.max_reps, 1, MQ_MAX_SAMPLES, "bad --max-reps"),
        MQ_OPT_INT("--threads", &o->threads, 1, 1024, "bad thread count"),
        MQ_OPT_FLAG("--explain", &o->explain),
        MQ_OPT_FLAG("--resume", &o->job.resume),
        MQ_OPT_FLAG("--warm", &o->job.warm),
        MQ_OPT_FLAG("--quiet", &o->job.quiet),
        MQ_OPT_FLAG("--no-probes", &o->no_probes),
        MQ_OPT_CUSTOM("--shard", &o->shard, parse_shard, NULL),
    };
    int rc = mq_args_parse("bench", argc, argv, 1, args, sizeof args / sizeof args[0], NULL, 0,
                           NULL);
    if (rc == 1)
        usage(stdout);
    o->job.nshapes = o->shape_list.n;
    o->job.ncands = o->cand_list.n;
    if (!o->job.formats)
        o->job.formats = 1u << MQ_FMT_FP4;
    if (o->job.mo.min_reps > o->job.mo.max_reps)
        o->job.mo.min_reps = o->job.mo.max_reps;
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    mq_probes_set_skip(o.no_probes);
    char err[4400], out[4096];
    mq_suite suite = {0};
    mq_bench_job *j = &o.job;
    j->cands = o.cands;
    j->label = o.job.nshapes ? "shapes" : o.suite;
    if (!j->nshapes) { /* a suite crossed with its Ms */
        int ms[MAX_MS];
        int nms = mq_suite_parse_ms(o.m, ms, MAX_MS, err, sizeof err);
        if (nms < 0 || mq_suite_load(o.suite, ms, nms, &suite, err, sizeof err)) {
            fprintf(stderr, "bench: %s\n", err);
            return 2;
        }
    }
    j->shapes = j->nshapes ? o.shapes : suite.s;
    j->nshapes = j->nshapes ? j->nshapes : suite.n;
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int s = 0; (j->formats & (1u << f)) && s < j->nshapes; s++) {
            mq_problem p = {(mq_format)f, j->shapes[s].M, j->shapes[s].N, j->shapes[s].K,
                            j->group};
            mq_error e;
            if (mq_problem_check(&p, &e) || mq_problem_fits_memory(&p, e.msg, sizeof e.msg)) {
                fprintf(stderr, "bench: %s %s: %s\n", j->shapes[s].model, j->shapes[s].layer,
                        e.msg);
                mq_suite_free(&suite);
                return 2;
            }
        }
    mq_target t;
    mq_target_opts to = {o.chip, o.chips, o.backend, o.threads, NULL,
                         o.explain ? MQ_TARGET_NO_BACKEND : MQ_TARGET_ANY_BACKEND};
    if (mq_target_open(&to, &t, err, sizeof err)) {
        fprintf(stderr, "bench: %s\n", err);
        mq_suite_free(&suite);
        return 2;
    }
    if (o.explain && o.shard.count) { /* the plan: every shard's share */
        mq_work_list work;
        if (mq_bench_work(j, &t.chip, &work)) {
            fprintf(stderr, "bench: out of memory listing the work\n");
            rc = 2;
        } else {
            mq_work_split(&work, o.shard.count);
            rc = mq_shard_plan_print(&work, stdout);
        }
        mq_work_free(&work);
        mq_target_close(&t);
        mq_suite_free(&suite);
        return rc;
    }
    if (o.explain) {
        rc = mq_bench_explain(j, &t.chip);
        mq_target_close(&t);
        mq_suite_free(&suite);
        return rc;
    }
    /* the results file: loaded (--resume) and opened before anything runs */
    snprintf(out, sizeof out, "%s", o.out ? o.out : "");
    if (!o.out && o.shard.count)
        snprintf(out, sizeof out, "results/%s/bench-shard-%d-of-%d.csv", t.chip.name,
                 o.shard.index, o.shard.count);
    else if (!o.out)
        snprintf(out, sizeof out, "results/%s/bench.csv", t.chip.name);
    mq_results old = {0};
    mq_results_writer w = {.fd = -1};
    mq_work_list work;
    int shard = o.shard.count ? o.shard.index : 1;
    char mpath[4200];
    struct stat sb;
    err[0] = '\0';
    mq_manifest_path(out, mpath, sizeof mpath);
    if (mq_bench_work(j, &t.chip, &work)) {
        snprintf(err, sizeof err, "out of memory listing the work");
    } else {
        mq_work_split(&work, o.shard.count ? o.shard.count : 1);
        /* err is set by whichever step fails */
        /* every refusal before anything is made; then made in order */
        (void)((j->resume && stat(out, &sb) == 0 &&
                mq_results_load(out, &old, err, sizeof err)) ||
               mq_results_precheck(out, err, sizeof err) ||
               (o.shard.count && mq_output_replaceable(mpath, err, sizeof err)) ||
               mq_make_parent_dirs(out, err, sizeof err) ||
               mq_results_open(out, &w, err, sizeof err) ||
               (o.shard.count && mq_manifest_write(mpath, &work, &o.shard, "bench",
                                                   t.chip.name, t.be->name, err, sizeof err)));
    }
    if (err[0]) {
        fprintf(stderr, "bench: %s\n", err);
        mq_results_abandon(&w); /* a file made here before the failure goes */
        rc = 2;
    } else {
        char note[4400];
        mq_target_print_notes(&t, "bench");
        /* what a torn last line cost: said once, never a hand edit */
        if (mq_results_writer_note(&w, note, sizeof note) ||
            mq_results_torn_note(&old, out, note, sizeof note))
            fprintf(stderr, "bench: %s\n", note);
        if (j->resume) {
            fprintf(stderr, "bench: resuming: %d rows in %s\n", old.n, out);
            (void)mq_results_index(&old); /* without it, lookups read every row */
        }
        if (o.shard.count) {
            int units;
            int64_t cost, total = mq_work_total_us(&work);
            mq_work_shard_totals(&work, shard, &units, &cost);
            fprintf(stderr, "bench: shard %d/%d of sweep %016llx: %d of %d units, estimated "
                            "%.1f s of %.1f s; manifest %s\n",
                    shard, o.shard.count, (unsigned long long)work.id, units, work.n, cost / 1e6,
                    total / 1e6, mpath);
        }
        rc = mq_bench_run(j, &t, &w, &old, out, &work, shard);
    }
    mq_work_free(&work);
    mq_results_close(&w);
    mq_results_free(&old);
    mq_target_close(&t);
    mq_suite_free(&suite);
    return rc;
}
