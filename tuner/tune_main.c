/* tune_main.c - the tune command: its options, the target (the chip, and
 * the backend that measures it or verifies the model's picks:
 * harness/target.c), the suite, the stored model of a predicted chip, the
 * output directory; then tune_run.c tunes and publishes, or table_check.c
 * checks a table on shapes it was not tuned on. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "cli.h"
#include "model_store.h"
#include "from_results.h"
#include "moe_rows.h"
#include "replay.h"
#include "stale.h"
#include "table_check.h"
#include "target.h"
#include "tune_run.h"
#include "version.h"

#define MAX_FROM 4096

typedef struct {
    const char *chip, *chips, *suite, *m, *out_dir, *check, *search, *model, *strategy;
    int threads, from_results, nfrom, formats_given, explain, strict;
    mq_replay_opts replay;
    const char *from[MAX_FROM];
    mq_shard shard;
    mq_tune_opts t;
} options;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: tune --chip CHIP [options]\n"
        "Builds CHIP's dispatch table: for every shape of the suite, the kernel variant, tile,\n"
        "threadgroup count and split-K factor to run, with its time and its speedup over each\n"
        "baseline rule. --chip host measures this machine on the CPU model; any other chip is\n"
        "predicted from its description by the cost model (the chosen candidates are still run\n"
        "and verified on the CPU model). Writes results/CHIP/{table.csv,table.h,model.csv,\n"
        "chip.csv}, published together (a kill leaves the old set or the new one).\n"
        "Exit status: 0 done, 1 a shape had no verified candidate, 2 bad input or an\n"
        "environment error (nothing published).\n\n"
        "  --chip NAME        target chip (required): host, m1 .. m4max (see harness/chips.csv)\n"
        "  --chips FILE       chip descriptions (default harness/chips.csv or $MQ_CHIPS)\n"
        "  --suite NAME|FILE  shapes (default: default = llama3-8b + moe)\n"
        "  --m SPEC           token counts (default: all for predicted chips, 1,4,16,64 for host)\n"
        "  --formats LIST     default fp4,u4\n"
        "  --group G          32, 64 or 128 (default 128)\n"
        "  --search KIND      guided (default) or exhaustive (host only)\n"
        "  --evals N          guided: candidates timed per shape (default 40)\n"
        "  --budget S         seconds of timing per candidate at most (default 0.3)\n"
        "  --out-dir DIR      default results/CHIP\n"
        "  --model FILE       predicted chips: the cost model's coefficients from FILE (a\n"
        "                     model.csv, e.g. fitted on another chip by 'model fit');\n"
        "                     with --from-results: the model the table carries, instead\n"
        "                     of one fitted on the rows\n"
        "  --resume           finish an interrupted run: reuse every row this build measured on\n"
        "                     this host (DIR/tune-results.csv), with the chip as that run\n"
        "                     measured it (DIR/tune-chip.csv)\n"
        "  --moe-results FILE add the MoE block's rows (the fastest verified gemm_trellis_moe\n"
        "                     per model layer and token range) from a moe-bench results file\n"
        "                     measured where tune measures (same backend; host or device)\n"
        "  --shard I/N        measure only shard I of N of the suite's problems (cut into N\n"
        "                     contiguous shares of equal estimated cost, the same on every\n"
        "                     machine given the same options): rows go to\n"
        "                     DIR/tune-shard-I-of-N.csv with its manifest, no table is\n"
        "                     written; merge the shards, then --from-results\n"
        "  --from-results FILE...\n"
        "                     build the table and the model from rows measured elsewhere\n"
        "                     (a merged sweep: bench --shard or tune --shard, then merge):\n"
        "                     each problem's fastest ok row is its pick; nothing is timed.\n"
        "                     The problems: the suite's when --suite or --m is given, else\n"
        "                     every problem of CHIP's rows (of --formats when given)\n"
        "  --threads N        CPU-model workers (default: one per core)\n"
        "  --quiet            only the summary\n"
        "  --explain          check every input and print the work (problems, estimated\n"
        "                     time, each shard's share with --shard), then stop: no\n"
        "                     candidate is timed and nothing is created (--chip host still\n"
        "                     probes the machine); the sweep scripts check with it\n"
        "  --check SUITE      host: instead of tuning, check DIR/table.csv on SUITE's shapes\n"
        "                     (e.g. heldout): time each shape's table pick, the baselines\n"
        "                     and every candidate, then the pick, the best and the best\n"
        "                     baseline again in 3 interleaved rounds, and report the\n"
        "                     ratios of both (M default 1,16)\n"
        "  --replay FILE      instead of tuning, replay the guided search (and --strategy's\n"
        "                     others) on every problem of FILE (a results file) with at least\n"
        "                     --min-candidates ok rows: each candidate's time is its stored\n"
        "                     row's, nothing is run; prints the median regret (best found /\n"
        "                     best - 1) after 5 .. 80 evaluations (--evals, default 80) and\n"
        "                     the evaluations to within 3%% and 1%% of the best\n"
        "  --strategy LIST    --replay: guided, random or all (default all)\n"
        "  --seeds N          --replay: runs per problem, each with the candidates in its\n"
        "                     seed's order (default 20)\n"
        "  --min-candidates N --replay: default 20\n"
        "  --trace FILE       --replay: a CSV row per problem, strategy and seed\n"
        "  --strict           a table (--check), a model (--model) or rows (--from-results)\n"
        "                     measured on another kernel build than this one's are an error\n"
        "                     (exit 2), not a warning\n"
        "  --help             this text\n\n"
        "examples:\n"
        "  tune --chip m4max\n"
        "  tune --chip host\n"
        "  tune --chip host --suite llama3-8b --m 1,16 --formats fp4 --search exhaustive\n"
        "  tune --chip host --check heldout --formats fp4\n"
        "  tune --chip host --suite llama3-8b --m 1,16 --threads 1 --shard 2/8\n"
        "  tune --chip host --from-results sweep/merged.csv\n"
        "  tune --chip h100 --replay h100-exhaustive.csv --seeds 5\n");
}

static int parse_shard(const char *v, void *dst, char *err, size_t errlen)
{
    return mq_shard_parse(v, dst, err, errlen);
}

static int parse_formats(const char *v, void *dst, char *err, size_t errlen)
{
    options *o = dst;
    o->formats_given = 1;
    return mq_cli_parse_formats(v, &o->t.formats, err, errlen);
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->chips = mq_chips_default_path();
    o->search = "guided";
    o->t.group = 128;
    o->t.evals = -1; /* 40, or 80 for --replay */
    /* --strategy, --seeds, --min-candidates: NULL or 0 until given (they
     * are --replay's only); their defaults after the check */
    o->t.mo = mq_measure_defaults();
    o->t.mo.budget_s = 0.3;
    const mq_arg args[] = {
        MQ_OPT_STR("--chip", &o->chip),
        MQ_OPT_STR("--chips", &o->chips),
        MQ_OPT_STR("--suite", &o->suite),
        MQ_OPT_STR("--m", &o->m),
        MQ_OPT_STR("--out-dir", &o->out_dir),
        MQ_OPT_STR("--check", &o->check),
        MQ_OPT_STR("--search", &o->search),
        MQ_OPT_STR("--model", &o->model),
        MQ_OPT_CUSTOM("--formats", o, parse_formats, NULL),
        MQ_OPT_INT("--group", &o->t.group, 1, 1 << 20, "bad group size"),
        MQ_OPT_INT("--evals", &o->t.evals, 4, 100000, "bad --evals"),
        MQ_OPT_DOUBLE("--budget", &o->t.mo.budget_s, 1e-6, 3600, "bad --budget"),
        MQ_OPT_INT("--threads", &o->threads, 1, 1024, "bad thread count"),
        MQ_OPT_FLAG("--resume", &o->t.resume),
        MQ_OPT_STR("--moe-results", &o->t.moe_results),
        MQ_OPT_FLAG("--quiet", &o->t.quiet),
        MQ_OPT_FLAG("--explain", &o->explain),
        MQ_OPT_CUSTOM("--shard", &o->shard, parse_shard, NULL),
        MQ_OPT_FLAG("--from-results", &o->from_results),
        MQ_OPT_STR("--replay", &o->replay.path),
        MQ_OPT_STR("--strategy", &o->strategy),
        MQ_OPT_INT("--seeds", &o->replay.seeds, 1, 100000, "bad --seeds"),
        MQ_OPT_INT("--min-candidates", &o->replay.min_candidates, 1, 1 << 24,
                   "bad --min-candidates"),
        MQ_OPT_STR("--trace", &o->replay.trace),
        MQ_OPT_FLAG("--strict", &o->strict),
    };
    int rc = mq_args_parse("tune", argc, argv, 1, args, sizeof args / sizeof args[0], o->from,
                           MAX_FROM, &o->nfrom);
    if (rc == 1)
        usage(stdout);
    if (rc)
        return rc;
    if (strcmp(o->search, "guided") && strcmp(o->search, "exhaustive"))
        return mq_cli_fail("tune", "bad --search (expected guided or exhaustive)", o->search);
    o->t.exhaustive = !strcmp(o->search, "exhaustive");
    o->t.keep_model = o->model && o->from_results;
    if (o->t.evals < 0)
        o->t.evals = o->replay.path ? 80 : 40;
    int replay_opts = o->strategy || o->replay.seeds || o->replay.min_candidates ||
                      o->replay.trace;
    if (!o->strategy)
        o->strategy = "all";
    if (!o->replay.seeds)
        o->replay.seeds = 20;
    if (!o->replay.min_candidates)
        o->replay.min_candidates = 20;
    char err[256];
    if (o->replay.path &&
        mq_replay_parse_strategies(o->strategy, &o->replay.strategies, err, sizeof err)) {
        fprintf(stderr, "tune: %s\n", err);
        return 2;
    }
    if (!o->chip) {
        fprintf(stderr, "tune: --chip is required (see --help)\n");
        return 2;
    }
    const struct {
        int bad;
        const char *why;
    } refused[] = {
        {o->nfrom && !o->from_results, "results files are arguments of --from-results only"},
        {o->from_results && !o->nfrom,
         "--from-results needs results files (tune --from-results FILE...)"},
        {o->shard.count && o->from_results, "--shard measures; --from-results measures nothing"},
        {o->check && (o->shard.count || o->from_results),
         "--check does not go with --shard or --from-results"},
        {o->t.moe_results && o->from_results,
         "--moe-results does not go with --from-results (its rows must come from the machine "
         "tune measures)"},
        {o->replay.path && (o->shard.count || o->from_results || o->check || o->t.exhaustive ||
                            o->t.resume || o->t.moe_results),
         "--replay times nothing: it goes with none of --shard, --from-results, --check, "
         "--search exhaustive, --resume, --moe-results"},
        {!o->replay.path && replay_opts,
         "--strategy, --seeds, --min-candidates and --trace are for --replay"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (refused[i].bad) {
            fprintf(stderr, "tune: %s\n", refused[i].why);
            return 2;
        }
    if (!o->t.formats)
        o->t.formats = (1u << MQ_FMT_FP4) | (1u << MQ_FMT_U4);
    return 0;
}

/* The suite (a tuning suite, or --check's) crossed with its Ms; every
 * problem checked. 0 or 2. */
static int load_suite(const options *o, int measured, mq_suite *suite)
{
    int ms[64];
    char err[1024];
    const char *mdef = o->check ? "1,16" : measured ? "1,4,16,64" : "all";
    int nms = mq_suite_parse_ms(o->m ? o->m : mdef, ms, 64, err, sizeof err);
    if (nms < 0 ||
        mq_suite_load(o->check ? o->check : o->suite ? o->suite : "default", ms, nms, suite,
                      err, sizeof err)) {
        fprintf(stderr, "tune: %s\n", err);
        return 2;
    }
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int s = 0; (o->t.formats & (1u << f)) && s < suite->n; s++) {
            mq_problem p = {(mq_format)f, suite->s[s].M, suite->s[s].N, suite->s[s].K,
                            o->t.group};
            mq_error e;
            if (mq_problem_check(&p, &e) || mq_problem_fits_memory(&p, e.msg, sizeof e.msg)) {
                fprintf(stderr, "tune: %s %s: %s\n", suite->s[s].model, suite->s[s].layer,
                        e.msg);
                return 2;
            }
        }
    return 0;
}

/* --moe-results against the chip and backend: a predicted chip has none of
 * its own; the file must hold rows of this backend and machine, and rows of
 * another kernel build are said (an error with --strict). Checked before
 * anything is created. 0, or -1 said on stderr. */
static int check_moe_results(const options *o, const mq_target *t, int measured)
{
    char err[4600];
    if (!o->t.moe_results)
        return 0;
    if (!measured) {
        fprintf(stderr, "tune: --moe-results: %s's table is predicted; MoE rows come from "
                        "moe-bench on the machine tune measures\n", t->chip.name);
        return -1;
    }
    mq_table_entry *rows = NULL;
    char kbuild[MQ_MOE_KBUILD_LEN];
    int n = mq_moe_table_entries(o->t.moe_results, t->be->name, t->be->device, mq_host_name(),
                                 &rows, kbuild, err, sizeof err);
    free(rows);
    if (n < 0) {
        fprintf(stderr, "tune: --moe-results: %s\n", err);
        return -1;
    }
    return mq_stale_check("tune", o->t.moe_results, kbuild, o->strict);
}

/* The cost model of a predicted chip: --model's coefficients (learned
 * elsewhere, on this chip's figures), else a fit on the chip's own stored
 * measurements (DIR/measured.csv) when there are any; pred_note says which.
 * With --from-results, --model is the model the table carries instead of a
 * fit on the rows (e.g. one refitted on more rows than the table's picks
 * come from). 0, or -1 said on stderr. */
static int read_model(const options *o, const mq_chip *chip, const char *dir, int measured,
                      mq_model *pred, char *pred_note, size_t n)
{
    char err[4600];
    if (o->model && measured && !o->from_results) {
        fprintf(stderr, "tune: --model is for predicted chips and --from-results; %s is "
                        "measured here\n", o->chip);
        return -1;
    }
    if (o->model) {
        if (mq_model_read(o->model, pred, err, sizeof err)) {
            fprintf(stderr, "tune: %s\n", err);
            return -1;
        }
        if (mq_stale_check("tune", o->model, pred->kernel_build, o->strict))
            return -1;
        snprintf(pred_note, n, "%s (%d rows fitted elsewhere) on %s's figures", o->model,
                 pred->n_fit, chip->name);
    } else if (!measured) {
        char mpath[4300];
        snprintf(mpath, sizeof mpath, "%s/measured.csv", dir);
        int nfit = mq_tune_stored_model(mpath, chip, pred, err, sizeof err);
        if (nfit < 0) {
            fprintf(stderr, "tune: %s\n", err);
            return -1;
        }
        if (nfit > 0)
            snprintf(pred_note, n,
                     "fitted on %d rows measured on %s (%s); held-out MAPE %.1f%%, Spearman "
                     "%.3f",
                     nfit, chip->name, mpath, 100 * pred->mape, pred->spearman);
    }
    return 0;
}

/* Every output of the run, refused before any is made (the results file a
 * link or not loadable, the manifest's name a directory), then made: the
 * table set's generation (not for --check or a shard), the chip as
 * measured (for --resume), the results file (path) and a shard's manifest
 * (mpath). 0, or -1 said on stderr with a results file made here removed. */
static int open_outputs(options *o, mq_target *t, mq_tuner *T, const mq_work_list *work,
                        const char *dir, const char *chip_path, mq_table_set *ts, char *path,
                        size_t pn, char *mpath, size_t mn)
{
    char err[4600] = "";
    struct stat sb;
    if (o->shard.count)
        snprintf(path, pn, "%s/tune-shard-%d-of-%d.csv", dir, o->shard.index, o->shard.count);
    else
        snprintf(path, pn, "%s/%s", dir, o->check ? "check-results.csv" : "tune-results.csv");
    mq_manifest_path(path, mpath, mn);
    int bad = (t->measured && mq_results_precheck(path, err, sizeof err)) ||
              (o->shard.count && mq_output_replaceable(mpath, err, sizeof err)) ||
              (!o->check && !o->shard.count && mq_table_set_begin(dir, ts, err, sizeof err)) ||
              (t->measured && !t->from_snapshot && !o->check && t->chip.is_host &&
               (mq_make_parent_dirs(chip_path, err, sizeof err) ||
                mq_chip_write(chip_path, &t->chip, err, sizeof err))) ||
              mq_make_parent_dirs(path, err, sizeof err) ||
              (o->t.resume && stat(path, &sb) == 0 &&
               mq_results_load(path, &T->own, err, sizeof err)) ||
              (t->measured && mq_results_open(path, &T->w, err, sizeof err)) ||
              (o->shard.count && mq_manifest_write(mpath, work, &o->shard, "tune", t->chip.name,
                                                  t->be->name, err, sizeof err));
    if (bad) {
        fprintf(stderr, "tune: %s\n", err);
        mq_results_abandon(&T->w);
    }
    return bad ? -1 : 0;
}

/* What the run is about to do, once its inputs and outputs are good: how
 * the chip is tuned, what opening the results file did, what a resumed run
 * or a shard takes on. */
static void print_run_notes(const options *o, const mq_target *t, mq_tuner *T,
                            const mq_work_list *work, const char *path, const char *mpath)
{
    char note[4400];
    mq_target_print_notes(t, "tune"); /* inputs and outputs are good: say how it is tuned */
    if (mq_results_writer_note(&T->w, note, sizeof note) ||
        mq_results_torn_note(&T->own, path, note, sizeof note))
        fprintf(stderr, "tune: %s\n", note);
    (void)mq_results_index(&T->own); /* without it, a resumed lookup reads every row */
    if (o->t.resume && t->measured)
        fprintf(stderr, "tune: resuming: %d rows of %s can be reused%s\n", T->own.n, path,
                t->from_snapshot ? "; the chip as the interrupted run measured it (tune-chip.csv)"
                                : "");
    if (o->shard.count) {
        int units;
        int64_t cost;
        mq_work_shard_totals(work, o->shard.index, &units, &cost);
        fprintf(stderr, "tune: shard %d/%d of sweep %016llx: %d of %d problems, estimated %.1f "
                        "s; rows in %s, manifest %s\n",
                o->shard.index, o->shard.count, (unsigned long long)work->id, units, work->n,
                cost / 1e6, path, mpath);
    }
}

/* The modes that time candidates need a chip measured here. 0, or -1 said
 * on stderr. */
static int check_modes(const options *o, const mq_target *t)
{
    if (o->t.exhaustive && !t->measured) {
        fprintf(stderr, "tune: --search exhaustive needs a backend that is the chip (--chip host "
                        "here); %s is predicted\n",
                o->chip);
        return -1;
    }
    if ((o->check || o->shard.count) && !t->measured) {
        fprintf(stderr, "tune: %s times candidates: it needs --chip host here\n",
                o->check ? "--check" : "--shard");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    char dir[4096], path[4200], chip_path[4200], err[4400];
    snprintf(dir, sizeof dir, "%s", o.out_dir ? o.out_dir : "");
    if (!o.out_dir)
        snprintf(dir, sizeof dir, "results/%s", o.chip);
    snprintf(chip_path, sizeof chip_path, "%s/tune-chip.csv", dir);
    /* the chip and its backend; a resumed run takes the chip as the
     * interrupted run measured it: the probes vary between runs, and the
     * guided search's choices follow the chip's figures. --from-results
     * measures nothing: the chip alone */
    mq_table_entry *moe_rows = NULL; /* --moe-results reads before the chip is probed */
    if (o.t.moe_results &&
        mq_moe_table_entries(o.t.moe_results, NULL, NULL, NULL, &moe_rows, NULL, err,
                             sizeof err)) {
        fprintf(stderr, "tune: --moe-results: %s\n", err);
        return 2;
    }
    mq_target t;
    char published_chip[4200]; /* --replay of host rows: the chip as the run saw it */
    snprintf(published_chip, sizeof published_chip, "%s/chip.csv", dir);
    mq_target_opts to = {o.chip, o.chips, "auto", o.threads,
                         o.replay.path && !strcmp(o.chip, "host") ? published_chip
                         : o.t.resume && !o.check ? chip_path
                                                  : NULL,
                         o.from_results || o.replay.path ? MQ_TARGET_NO_BACKEND
                                                         : MQ_TARGET_CHIP_BACKEND};
    if (mq_target_open(&to, &t, err, sizeof err)) {
        fprintf(stderr, "tune: %s\n", err);
        return 2;
    }
    static mq_tuner T;
    mq_suite suite = {0};
    mq_table *check_table = NULL;
    mq_table_set ts = {.lock_fd = -1};
    mq_results from = {0};
    mq_work_list work = {0};
    static mq_model pred; /* its kernel factors make it large */
    mq_model_defaults(&pred);
    char pred_note[4608] = "defaults fitted on public figures (harness/public-figures.csv; no "
                           "measurements of this chip)";
    /* a measured chip's guided search starts from pred: the defaults (--model
     * and stored fits are for predicted chips) */
    T = (mq_tuner){
        .o = &o.t, .chip = &t.chip, .lim = &t.chip.lim, .be = t.be, .w = {.fd = -1}, .prior = &pred};
    int measured = t.measured || o.from_results; /* rows measured here, or elsewhere */
    rc = 2; /* until the run gets going, a failure is the input's or the environment's */
    if (o.replay.path) { /* the default model, or --model's, is the search's prior */
        if (o.model && mq_model_read(o.model, &pred, err, sizeof err))
            fprintf(stderr, "tune: %s\n", err);
        else
            rc = mq_tune_replay(&T, &o.replay, stdout);
        goto out;
    }
    if (check_modes(&o, &t))
        goto out;
    if (o.from_results) {
        if (mq_from_results_load(o.from, o.nfrom, &from, err, sizeof err) ||
            mq_from_results_check(&from, t.chip.name, o.t.group, o.from[0], o.nfrom,
                                  &T.from_backend, &T.from_kernel_build, err, sizeof err)) {
            fprintf(stderr, "tune: %s\n", err);
            goto out;
        }
        char what[4400];
        snprintf(what, sizeof what, "--from-results %s's rows", t.chip.name);
        if (mq_stale_check("tune", what, T.from_kernel_build, o.strict))
            goto out;
        T.from = &from;
    }
    if (o.from_results && !o.suite && !o.m) {
        if (mq_from_results_suite(&from, t.chip.name, T.from_backend, o.formats_given, &o.t.formats,
                            &suite)) {
            fprintf(stderr, "tune: out of memory\n");
            goto out;
        }
    } else if (load_suite(&o, t.measured, &suite)) {
        goto out;
    }
    if (check_moe_results(&o, &t, measured) ||
        read_model(&o, &t.chip, dir, measured, &pred, pred_note, sizeof pred_note))
        goto out;
    if (mq_tune_work(&o.t, &suite, &t.chip, o.shard.count > 0, &work)) {
        fprintf(stderr, "tune: out of memory listing the work\n");
        goto out;
    }
    mq_work_split(&work, o.shard.count ? o.shard.count : 1);
    if (o.check) { /* the table is read before anything is written */
        char tp[4300];
        mq_error e;
        snprintf(tp, sizeof tp, "%s/table.csv", dir);
        if (mq_table_load(tp, o.chip, &check_table, &e)) {
            fprintf(stderr, "tune: %s\n", e.msg);
            goto out;
        }
        if (mq_stale_check("tune", tp, mq_table_kernel_build(check_table), o.strict))
            goto out;
    }
    if (o.explain) { /* every input has been read and checked: the plan, nothing made */
        rc = mq_shard_plan_print(&work, stdout) ? 2 : 0;
        goto out;
    }
    char mpath[4300];
    if (open_outputs(&o, &t, &T, &work, dir, chip_path, &ts, path, sizeof path, mpath,
                     sizeof mpath))
        goto out;
    print_run_notes(&o, &t, &T, &work, path, mpath);
    if (o.check) {
        rc = mq_tune_check(&T, &suite, check_table);
        goto out;
    }
    if (o.from_results)
        fprintf(stderr, "tune: %s's table from %d rows of %d file%s (%s backend): nothing is "
                        "timed\n",
                t.chip.name, from.n, o.nfrom, o.nfrom == 1 ? "" : "s", T.from_backend);
    else if (!t.measured)
        fprintf(stderr, "tune: %s is predicted: cost model %s; chosen candidates are verified "
                        "on the CPU model\n",
                t.chip.name, pred_note);
    rc = mq_tune_suite(&T, &suite, &work, o.shard.count ? o.shard.index : 1, measured, &pred,
                       pred_note, dir, &ts);
out:
    if (rc && ts.lock_fd >= 0)
        mq_table_set_abort(&ts); /* the published set stays as it was */
    mq_table_set_end(&ts);
    mq_table_free(check_table);
    mq_results_close(&T.w);
    mq_results_free(&T.own);
    mq_results_free(&from);
    mq_work_free(&work);
    mq_suite_free(&suite);
    mq_target_close(&t);
    free(T.rows.f);
    free(T.rows.t);
    free(T.guide);
    return rc;
}
