/* model_main.c - the model command: fit the cost model on measured rows
 * with shapes held out of the fit (model fit), check a fitted model on
 * rows it never saw - another chip's, other shapes - with the error, the
 * rank correlation and the measured regret of its picks (model eval), or
 * check a dispatch table's lookup on stored measurements of shapes it may
 * never have seen: its picks against the measured best and the baseline
 * rules (model lookup), or fit a never-measured chip's coefficients on
 * published figures (model public). Here the options, fit and eval; the
 * rows are model_rows.c, lookup model_lookup.c, public model_public.c,
 * tiers model_tiers.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "atomic_file.h"
#include "chips.h"
#include "cli.h"
#include "model.h"
#include "model_cmd.h"
#include "stale.h"
#include "model_rows.h"
#include "model_store.h"
#include "suites.h"

#define MAX_FILES 64

typedef struct {
    const char *chip, *chips, *chip_file, *holdout, *out, *model, *table;
    const char *files[MAX_FILES];
    int nfiles, strict;
} options;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: model fit --chip CHIP [options] RESULTS.csv...\n"
        "       model eval --chip CHIP --model FILE [options] RESULTS.csv...\n"
        "       model lookup --chip CHIP --table TABLE.csv [--model FILE] RESULTS.csv...\n"
        "       model public [--chips FILE] [--out FILE] FIGURES.csv\n"
        "       model tiers [--chips FILE] LLM-FIGURES.csv\n"
        "fit: fits the cost model (floor + non-negative terms, tuner/model.h) on the rows of\n"
        "the results files measured on CHIP (status ok), keeping --holdout's shapes out of the\n"
        "fit, and reports it on them: MAPE, Spearman, and per problem the measured regret of\n"
        "the model's pick. eval: the same report for a model fitted elsewhere (another chip's,\n"
        "e.g. predict an H200 from an H100's fit) on every row. Regret is measured among the\n"
        "rows of each problem: it means most where the rows cover the space (exhaustive).\n"
        "lookup: for every problem of the rows, the table's lookup (mq_table_lookup, on the\n"
        "chip's limits) and its pick's measured time against the measured best and the best\n"
        "baseline rule, with the level that answered (exact, model, nearest, ...); --model\n"
        "gives the table that cost model (with CHIP's figures) instead of its own.\n"
        "public: the coefficients of a chip never measured, fitted on published timings\n"
        "(harness/public-figures.csv: chip, shape, candidate or 'best', time, role, source):\n"
        "the figures with role 'fit' set the dispatch and latency terms, those with role\n"
        "'check' test the result - each predicted within 1.5x, and the faster of two figures\n"
        "of one problem predicted faster; 'compare' figures (other implementations) are set\n"
        "against the model's best candidate and only reported.\n"
        "tiers: the share of its bandwidth an Apple chip sustains on a decode and of its FP16\n"
        "peak on a prefill, fitted as functions of the chip's description (bandwidth, GPU\n"
        "cores, Ultra, generation) on public whole-model rates (harness/llm-figures.csv:\n"
        "llama.cpp's LLaMA-2 7B per chip, role, source); the 'check' rows test the fit (90%%\n"
        "within 1.2x, every tier's mean within 1.2x), and every Apple chip of the chips file\n"
        "must carry the functions' values relative to the M3 Max's as decode_bw_rel and\n"
        "prefill_rel (capped at 1: the cost model's rates for that chip).\n"
        "Exit status: 0 done, 1 (public) a check figure missed, (tiers) the held-out targets\n"
        "missed or a chip's shares differ from the fit, 2 bad input or an environment error.\n\n"
        "  --chip NAME        the chip the rows were measured on (rows of others are skipped)\n"
        "  --chips FILE       chip descriptions (default harness/chips.csv or $MQ_CHIPS)\n"
        "  --chip-file FILE   the chip as a tool saw it instead (results/CHIP/chip.csv: the\n"
        "                     host's probes of that run)\n"
        "  --holdout SUITE    fit: the suite (name or CSV) whose shapes (N, K) stay out of the\n"
        "                     fit (default: every 5th shape of the rows, the last when there\n"
        "                     are fewer; none: fit on all)\n"
        "  --model FILE       eval: the model to check (model.csv form); lookup: the model\n"
        "                     the table chooses with for shapes it has no row for\n"
        "  --table FILE       lookup: the dispatch table (table.csv form)\n"
        "  --out FILE         fit, public: the model (model.csv form); eval: the rows with\n"
        "                     their predictions (CSV)\n"
        "  --strict           eval, lookup: a table or model measured on another kernel build\n"
        "                     than this one's is an error (exit 2), not a warning\n"
        "  --help             this text\n\n"
        "examples:\n"
        "  model fit --chip h100 --holdout results/h100-grid/holdout.csv \\\n"
        "      --out results/h100/model-fit.csv results/h100-grid/tune-results.csv\n"
        "  model eval --chip h200 --model results/h100/model-fit.csv "
        "results/h200/tune-results.csv\n"
        "  model lookup --chip h100 --table results/h100/grid/table.csv \\\n"
        "      --model results/h100/model-fit.csv results/h100/unseen.csv\n"
        "  model public harness/public-figures.csv\n"
        "  model tiers harness/llm-figures.csv\n");
}

/* The kernel build the model describes: its fitted rows' one build, or
 * none (said) when they mix builds or do not say. */
static void record_kernel_build(mq_model *m, const mq_model_rows *R, const char *held)
{
    const char *kb = NULL;
    for (int i = 0; i < R->n; i++) {
        if (held[i])
            continue;
        if (!kb) {
            kb = R->r[i].kernel_build;
        } else if (strcmp(kb, R->r[i].kernel_build)) {
            printf("the fitted rows mix kernel builds (%s and %s): the model records none\n",
                   kb[0] ? kb : "unsaid", R->r[i].kernel_build[0] ? R->r[i].kernel_build
                                                                 : "unsaid");
            return;
        }
    }
    snprintf(m->kernel_build, sizeof m->kernel_build, "%s", kb ? kb : "");
}

/* MAPE, Spearman, and per problem the measured time of the model's pick
 * over the measured best; printed. MAPE and Spearman also to *mape_out
 * and *rho_out when given. */
static void report(const char *what, const mq_model *m, const mq_model_rows *R, const char *sel,
                   double *mape_out, double *rho_out)
{
    int n = 0;
    for (int i = 0; i < R->n; i++)
        n += sel[i];
    mq_features *f = malloc(sizeof *f * (size_t)(n ? n : 1));
    double *t = malloc(sizeof *t * (size_t)(n ? n : 1));
    char *done = calloc((size_t)(R->n ? R->n : 1), 1);
    if (!f || !t || !done) {
        fprintf(stderr, "model: out of memory\n");
        free(f);
        free(t);
        free(done);
        return;
    }
    int k = 0;
    for (int i = 0; i < R->n; i++)
        if (sel[i]) {
            f[k] = R->f[i];
            t[k++] = R->t[i];
        }
    double mape, rho;
    mq_model_quality(m, f, t, n, &mape, &rho);
    if (mape_out)
        *mape_out = mape;
    if (rho_out)
        *rho_out = rho;
    printf("%s: %d rows: MAPE %.1f%%, Spearman %.3f\n", what, n, 100 * mape, rho);
    printf("  format  M      N      K      rows  MAPE%%  Spearman  best ms   pick ms   regret\n");
    double logsum = 0;
    int np = 0;
    for (int i = 0; i < R->n; i++) {
        if (!sel[i] || done[i])
            continue;
        int best = -1, pick = -1, c = 0;
        double pbest = INFINITY, sum = 0;
        k = 0;
        for (int j = i; j < R->n; j++) {
            if (!sel[j] || !mq_model_same_problem(&R->r[j].p, &R->r[i].p))
                continue;
            done[j] = 1;
            double pr = mq_model_predict(m, &R->f[j]);
            sum += fabs(pr - R->t[j]) / R->t[j];
            f[c] = R->f[j];
            t[c++] = R->t[j];
            if (best < 0 || R->t[j] < R->t[best])
                best = j;
            if (pr < pbest) {
                pbest = pr;
                pick = j;
            }
        }
        double pm, pr;
        mq_model_quality(m, f, t, c, &pm, &pr);
        double regret = R->t[pick] / R->t[best];
        logsum += log(regret);
        np++;
        const mq_problem *p = &R->r[i].p;
        printf("  %-7s %-6d %-6d %-6d %-5d %6.1f  %8.3f  %8.4f  %8.4f  %6.3fx\n",
               mq_format_name(p->format), p->M, p->N, p->K, c, 100 * sum / c, pr,
               R->t[best] * 1e3, R->t[pick] * 1e3, regret);
    }
    if (np)
        printf("%s: the model's picks at %.3fx the measured best (geometric mean over %d "
               "problems)\n",
               what, exp(logsum / np), np);
    free(f);
    free(t);
    free(done);
}

static int write_predictions(const char *path, const mq_model *m, const mq_model_rows *R)
{
    char tmp[4200], err[4400];
    FILE *f = mq_atomic_open(path, tmp, sizeof tmp, err, sizeof err);
    if (!f) {
        fprintf(stderr, "model: %s\n", err);
        return 2;
    }
    fprintf(f, "format,M,N,K,group,variant,tile_m,tile_n,tile_k,num_threadgroups,split_k,"
               "measured_s,predicted_s,floor_s\n");
    for (int i = 0; i < R->n; i++) {
        const mq_result *r = &R->r[i];
        fprintf(f, "%s,%d,%d,%d,%d,%s,%d,%d,%d,%d,%d,%.9g,%.9g,%.9g\n",
                mq_format_name(r->p.format), r->p.M, r->p.N, r->p.K, r->p.group,
                mq_variant_get(r->c.variant)->name, r->c.p.tile_m, r->c.p.tile_n, r->c.p.tile_k,
                r->c.p.num_threadgroups, r->c.p.split_k, R->t[i],
                mq_model_predict(m, &R->f[i]), R->f[i].floor_s);
    }
    if (mq_atomic_commit(f, tmp, path, err, sizeof err)) {
        fprintf(stderr, "model: %s\n", err);
        return 2;
    }
    return 0;
}

static void print_model(const mq_model *m)
{
    for (int j = 0; j < MQ_MODEL_NTERM; j++) {
        int v = mq_model_term_variant(j);
        if (v >= 0 && (v >= mq_variant_count() || m->theta[j] == 0))
            continue;
        printf("  %-16s %-27s %-12.4g %s\n", mq_model_term_name(j),
               v < 0 ? "(shared)" : mq_variant_get((mq_variant)v)->name, m->theta[j],
               mq_model_term_unit(j));
    }
}

/* fit: hold out the suite's shapes (or every 5th), fit, report, write. */
static int do_fit(const options *o, const mq_chip *chip, const mq_model_rows *R)
{
    char *held = calloc((size_t)(R->n ? R->n : 1), 1);
    if (!held)
        return 2;
    if (o->holdout && !strcmp(o->holdout, "none")) {
        /* every row fits */
    } else if (o->holdout) {
        int ms[1] = {1};
        mq_suite s;
        char err[1024];
        if (mq_suite_load(o->holdout, ms, 1, &s, err, sizeof err)) {
            fprintf(stderr, "model: %s\n", err);
            free(held);
            return 2;
        }
        for (int i = 0; i < R->n; i++)
            for (int j = 0; j < s.n && !held[i]; j++)
                held[i] = s.s[j].N == R->r[i].p.N && s.s[j].K == R->r[i].p.K;
        mq_suite_free(&s);
    } else if (mq_model_holdout_rows(R->f, R->n, 0.2, held)) { /* every 5th shape */
        fprintf(stderr, "model: out of memory\n");
        free(held);
        return 2;
    }
    mq_features *f = malloc(sizeof *f * (size_t)(R->n ? R->n : 1));
    double *t = malloc(sizeof *t * (size_t)(R->n ? R->n : 1));
    int nf = 0, nh = 0, rc = 2;
    for (int i = 0; f && t && i < R->n; i++) {
        if (held[i]) {
            nh++;
            continue;
        }
        f[nf] = R->f[i];
        t[nf++] = R->t[i];
    }
    mq_model m;
    char err[512];
    if (!f || !t) {
        fprintf(stderr, "model: out of memory\n");
    } else if (mq_model_fit(f, t, nf, &m, err, sizeof err)) {
        fprintf(stderr, "model: %s\n", err);
    } else {
        printf("fitted on %d rows of %s (%d held out)\n", nf, chip->name, nh);
        record_kernel_build(&m, R, held);
        print_model(&m);
        char *fitsel = malloc((size_t)(R->n ? R->n : 1));
        for (int i = 0; fitsel && i < R->n; i++)
            fitsel[i] = !held[i];
        if (fitsel)
            report("fitted rows", &m, R, fitsel, NULL, NULL);
        free(fitsel);
        if (nh) {
            report("held-out shapes", &m, R, held, &m.mape, &m.spearman);
            m.n_holdout = nh;
        }
        rc = 0;
        if (o->out) {
            char note[512];
            snprintf(note, sizeof note, "fitted by model fit on %d rows measured on %s; %d "
                                        "rows of held-out shapes",
                     nf, chip->name, nh);
            if (mq_model_write(o->out, &m, chip->name, note, err, sizeof err)) {
                fprintf(stderr, "model: %s\n", err);
                rc = 2;
            }
        }
    }
    free(f);
    free(t);
    free(held);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    memset(&o, 0, sizeof o);
    o.chips = mq_chips_default_path();
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || (strcmp(argv[1], "fit") && strcmp(argv[1], "eval") &&
                     strcmp(argv[1], "lookup") && strcmp(argv[1], "public") &&
                     strcmp(argv[1], "tiers"))) {
        fprintf(stderr, "model: expected 'fit', 'eval', 'lookup', 'public' or 'tiers' first "
                        "(see --help)\n");
        return 2;
    }
    int eval = !strcmp(argv[1], "eval"), lookup = !strcmp(argv[1], "lookup");
    const mq_arg args[] = {
        MQ_OPT_STR("--chip", &o.chip),         MQ_OPT_STR("--chips", &o.chips),
        MQ_OPT_STR("--chip-file", &o.chip_file), MQ_OPT_STR("--holdout", &o.holdout),
        MQ_OPT_STR("--model", &o.model),       MQ_OPT_STR("--out", &o.out),
        MQ_OPT_STR("--table", &o.table),       MQ_OPT_FLAG("--strict", &o.strict),
    };
    int rc = mq_args_parse("model", argc, argv, 2, args, sizeof args / sizeof args[0], o.files,
                           MAX_FILES, &o.nfiles);
    if (rc == 1)
        usage(stdout);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!strcmp(argv[1], "public"))
        return mq_model_public_cmd(o.files, o.nfiles, o.chips, o.out);
    if (!strcmp(argv[1], "tiers"))
        return mq_model_tiers_cmd(o.files, o.nfiles, o.chips);
    if (!o.chip && !o.chip_file)
        return mq_cli_fail("model", "--chip or --chip-file is required", "");
    if (eval && !o.model)
        return mq_cli_fail("model", "eval needs --model", "");
    if (lookup != !!o.table)
        return mq_cli_fail("model", lookup ? "lookup needs --table" : "--table is for lookup", "");
    if (!o.nfiles)
        return mq_cli_fail("model", "no results files given", "");
    mq_chip chip;
    char err[4400];
    if (o.chip_file ? mq_chip_snapshot_load(o.chip_file, &chip, err, sizeof err)
                    : mq_chip_load_named(o.chips, o.chip, &chip, err, sizeof err)) {
        fprintf(stderr, "model: %s\n", err);
        return 2;
    }
    mq_model m;
    if (eval && !lookup && mq_model_read(o.model, &m, err, sizeof err)) {
        fprintf(stderr, "model: %s\n", err);
        return 2;
    }
    if (eval && !lookup && mq_stale_check("model", o.model, m.kernel_build, o.strict))
        return 2;
    mq_model_rows R = {0};
    rc = mq_model_rows_load(o.files, o.nfiles, &chip, &R);
    if (!rc && lookup) {
        rc = mq_model_lookup_cmd(o.table, o.model, &chip, &R, o.strict);
    } else if (!rc && eval) {
        char *all = malloc((size_t)(R.n ? R.n : 1));
        if (!all) {
            fprintf(stderr, "model: out of memory\n");
            rc = 2;
        } else {
            memset(all, 1, (size_t)(R.n ? R.n : 1));
            printf("model %s on %d rows of %s\n", o.model, R.n, chip.name);
            print_model(&m);
            report("all rows", &m, &R, all, NULL, NULL);
            if (o.out)
                rc = write_predictions(o.out, &m, &R);
        }
        free(all);
    } else if (!rc) {
        rc = do_fit(&o, &chip, &R);
    }
    mq_model_rows_free(&R);
    return rc;
}
