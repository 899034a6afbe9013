/* tune_main.c - the tune command: for every shape of a suite on a chip,
 * measure (when a backend is that chip: --chip host on the CPU model) or
 * predict (any other chip, from its description and the cost model) the
 * candidates, search (exhaustive, or model-guided: time a sample and the
 * baselines, fit, time the predicted best, refit, until the budget), pick,
 * and write results/CHIP/: the dispatch table (CSV and C header, atomically),
 * the fitted model with its held-out quality, and the measured rows. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "baselines.h"
#include "chips.h"
#include "cli.h"
#include "measure.h"
#include "metal_backend.h"
#include "model.h"
#include "model_store.h"
#include "probes.h"
#include "results.h"
#include "space.h"
#include "suites.h"
#include "table_set.h"
#include "table_write.h"
#include "version.h"
#include "work_features.h"

/* Documented defaults for a chip never measured: 10 us launch, 5 us per
 * extra dispatch, compute at 60% and memory at 80% of the chip's peaks,
 * split-K traffic at 80% of bandwidth, 2 us per wave of threadgroups, 20 ns
 * per K step (a threadgroup barrier), nothing extra per packed-row piece. */
static const double default_theta[MQ_MODEL_NPARAM] = {10e-6,   5e-6, 1 / 0.6, 1 / 0.8,
                                                      1 / 0.8, 2e-6, 20e-9,   0.0};

typedef struct {
    const char *chip, *chips, *suite, *m, *out_dir, *backend, *check;
    unsigned formats;
    int group, evals, init, exhaustive, resume, threads, quiet;
    mq_measure_opts mo;
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
        "  --resume           finish an interrupted run: reuse every row this build measured on\n"
        "                     this host (DIR/tune-results.csv), with the chip as that run\n"
        "                     measured it (DIR/tune-chip.csv)\n"
        "  --threads N        CPU-model workers (default: one per core)\n"
        "  --quiet            only the summary\n"
        "  --check SUITE      host: instead of tuning, check DIR/table.csv on SUITE's shapes\n"
        "                     (e.g. heldout): time each shape's table pick, the baselines\n"
        "                     and every candidate, and report the ratios (M default 1,16)\n"
        "  --help             this text\n\n"
        "examples:\n"
        "  tune --chip m4max\n"
        "  tune --chip host\n"
        "  tune --chip host --suite llama3-8b --m 1,16 --formats fp4 --search exhaustive\n"
        "  tune --chip host --check heldout --formats fp4\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->chips = mq_chips_default_path();
    o->suite = "default";
    o->backend = "auto";
    o->group = 128;
    o->evals = 40;
    o->init = 12;
    o->mo = mq_measure_defaults();
    o->mo.budget_s = 0.3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--resume") || !strcmp(a, "--quiet")) {
            *(a[2] == 'r' ? &o->resume : &o->quiet) = 1;
            continue;
        }
        static const char *const valued[] = {"--chip",    "--chips",   "--suite",  "--m",
                                             "--formats", "--group",   "--search", "--evals",
                                             "--budget",  "--out-dir", "--threads", "--check"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            known |= !strcmp(a, valued[k]);
        if (!known)
            return mq_cli_fail("tune", "unknown option", a);
        if (i + 1 >= argc)
            return mq_cli_fail("tune", "missing value for", a);
        const char *v = argv[++i];
        char why[512];
        if (!strcmp(a, "--chip"))
            o->chip = v;
        else if (!strcmp(a, "--chips"))
            o->chips = v;
        else if (!strcmp(a, "--suite"))
            o->suite = v;
        else if (!strcmp(a, "--m"))
            o->m = v;
        else if (!strcmp(a, "--out-dir"))
            o->out_dir = v;
        else if (!strcmp(a, "--check"))
            o->check = v;
        else if (!strcmp(a, "--formats")) {
            if (mq_cli_formats(v, &o->formats, why, sizeof why)) {
                fprintf(stderr, "tune: %s\n", why);
                return 2;
            }
        } else if (!strcmp(a, "--group")) {
            if (mq_cli_int(v, 1, 1 << 20, &o->group))
                return mq_cli_fail("tune", "bad group size", v);
        } else if (!strcmp(a, "--search")) {
            if (strcmp(v, "guided") && strcmp(v, "exhaustive"))
                return mq_cli_fail("tune", "bad --search (expected guided or exhaustive)", v);
            o->exhaustive = !strcmp(v, "exhaustive");
        } else if (!strcmp(a, "--evals")) {
            if (mq_cli_int(v, 4, 100000, &o->evals))
                return mq_cli_fail("tune", "bad --evals", v);
        } else if (!strcmp(a, "--budget")) {
            if (mq_cli_double(v, 1e-6, 3600, &o->mo.budget_s))
                return mq_cli_fail("tune", "bad --budget", v);
        } else if (!strcmp(a, "--threads")) {
            if (mq_cli_int(v, 1, 1024, &o->threads))
                return mq_cli_fail("tune", "bad thread count", v);
        }
    }
    if (!o->chip) {
        fprintf(stderr, "tune: --chip is required (see --help)\n");
        return 2;
    }
    if (!o->formats)
        o->formats = (1u << MQ_FMT_FP4) | (1u << MQ_FMT_U4);
    return 0;
}

/* The model's rows: features and measured seconds, across all shapes. */
typedef struct {
    mq_features *f;
    double *t;
    int n, cap;
} rowset;

static void rows_add(rowset *r, const mq_features *f, double t)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 1024;
        r->f = realloc(r->f, sizeof *r->f * (size_t)r->cap);
        r->t = realloc(r->t, sizeof *r->t * (size_t)r->cap);
    }
    r->f[r->n] = *f;
    r->t[r->n++] = t;
}

typedef struct {
    mq_candidate c;
    mq_features f;
    double time;    /* measured median (ok), or < 0 when not measured / failed */
    int measured;
} cand;

typedef struct {
    options *o;
    mq_chip *chip;
    mq_backend *be;
    mq_bench_problem bp;
    mq_results own;          /* rows of earlier runs (--resume) */
    mq_results_writer w;
    rowset rows;
    int timed, reused;
    double kernel_s;
    int failed;              /* a row could not be stored: the run stops */
} tuner;

/* Time one candidate (or take this build's earlier row); -1 when not ok. */
static double measure(tuner *T, const mq_problem *p, cand *c)
{
    mq_result key;
    memset(&key, 0, sizeof key);
    snprintf(key.chip, sizeof key.chip, "%s", T->chip->name);
    snprintf(key.backend, sizeof key.backend, "%s", T->be->name);
    key.p = *p;
    key.c = c->c;
    c->measured = 1;
    const mq_result *old = T->o->resume ? mq_results_find_own(&T->own, &key) : NULL;
    if (old) {
        T->reused++;
        c->time = strcmp(old->status, "ok") ? -1 : old->st.median;
    } else {
        static mq_measurement m;
        mq_limits lim = mq_chip_limits(T->chip);
        mq_measure(T->be, &T->bp, &c->c, &lim, &T->o->mo, &m);
        T->kernel_s += m.kernel_s;
        T->timed++;
        mq_result_stamp(&key);
        snprintf(key.status, sizeof key.status, "%s", m.status);
        snprintf(key.error, sizeof key.error, "%s", m.error);
        key.st = m.st;
        key.gflops = m.gflops;
        key.weight_gbs = m.weight_gbs;
        key.samples = m.samples;
        key.nsamples = m.nsamples;
        char err[4400];
        if (mq_results_append(&T->w, &key, err, sizeof err)) {
            /* the file keeps every row before this one; a run whose rows
             * cannot be stored stops rather than time on unrecorded */
            fprintf(stderr, "tune: %s\n", err);
            T->failed = 1;
        }
        c->time = strcmp(m.status, "ok") ? -1 : m.st.median;
    }
    if (c->time > 0)
        rows_add(&T->rows, &c->f, c->time);
    return c->time;
}

/* Index of a candidate in the list, or -1. */
static int find(const cand *cs, int n, const mq_candidate *c)
{
    for (int i = 0; i < n; i++)
        if (cs[i].c.variant == c->variant && !memcmp(&cs[i].c.p, &c->p, sizeof c->p))
            return i;
    return -1;
}

/* The legal candidates of a problem with their features, plus the
 * baselines (added when outside the grid); base[b] is each baseline's index
 * (-1 when the rule does not serve the format). */
static cand *build_cands(const mq_problem *p, const mq_chip *chip, int *n_out, int *base)
{
    mq_space sp;
    if (mq_space_enumerate(p, chip, MQ_SPACE_FULL, &sp))
        return NULL;
    cand *cs = calloc((size_t)sp.legal + MQ_BASE_COUNT + 1, sizeof *cs);
    int n = 0;
    for (int i = 0; cs && i < sp.n; i++) {
        if (!sp.e[i].legal)
            continue;
        cs[n].c = sp.e[i].c;
        cs[n].time = -1;
        mq_features_compute(p, &cs[n].c, chip, &cs[n].f, NULL);
        n++;
    }
    mq_space_free(&sp);
    for (int b = 0; cs && b < MQ_BASE_COUNT; b++) {
        mq_candidate bc;
        base[b] = -1;
        if (mq_baseline_candidate((mq_baseline)b, p, chip, &bc))
            continue;
        base[b] = find(cs, n, &bc);
        if (base[b] < 0) { /* a rule's pick outside the grid joins the list */
            cs[n].c = bc;
            cs[n].time = -1;
            mq_features_compute(p, &bc, chip, &cs[n].f, NULL);
            base[b] = n++;
        }
    }
    *n_out = n;
    return cs;
}

/* Guided search: baselines and a spread-out sample first, then the model's
 * best unmeasured picks, refitting after each batch, until `evals`. */
static void search_guided(tuner *T, const mq_problem *p, cand *cs, int n, const int *base)
{
    int budget = T->o->evals < n ? T->o->evals : n, done = 0;
    for (int b = 0; b < MQ_BASE_COUNT && !T->failed; b++)
        if (base[b] >= 0 && !cs[base[b]].measured && done < budget) {
            measure(T, p, &cs[base[b]]);
            done++;
        }
    int init = T->o->init < budget - done ? T->o->init : budget - done;
    for (int i = 0; i < init && !T->failed; i++) {
        int k = (int)((long)i * n / init);
        while (k < n && cs[k].measured)
            k++;
        if (k < n) {
            measure(T, p, &cs[k]);
            done++;
        }
    }
    while (done < budget && !T->failed) {
        mq_model m;
        char err[256];
        int have = T->rows.n >= 2 * MQ_MODEL_NPARAM &&
                   mq_model_fit(MQ_MODEL_ROOFLINE, T->rows.f, T->rows.t, T->rows.n, &m, err,
                                sizeof err) == 0;
        int batch = 4;
        for (int q = 0; q < batch && done < budget && !T->failed; q++) {
            int best = -1;
            double bt = INFINITY;
            for (int i = 0; i < n; i++) {
                if (cs[i].measured)
                    continue;
                double pt = have ? mq_model_predict(&m, &cs[i].f) : (double)i;
                if (pt < bt) {
                    bt = pt;
                    best = i;
                }
            }
            if (best < 0)
                return;
            measure(T, p, &cs[best]);
            done++;
        }
    }
}

/* Fit the model on DIR/measured.csv: a results file of rows measured on a
 * backend that is the chip itself (any backend but the CPU model), e.g.
 * copied from a Mac's bench run. Returns the rows fitted (0: no such file or
 * too few rows, pred untouched) or -1 on a broken file. */
static int stored_model(const char *path, const mq_chip *chip, mq_model *pred, char *err,
                        size_t errlen)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return 0;
    mq_results rs;
    if (mq_results_load(path, &rs, err, errlen))
        return -1;
    rowset rows = {0};
    for (int i = 0; i < rs.n; i++) {
        const mq_result *r = &rs.r[i];
        mq_features f;
        if (strcmp(r->status, "ok") || strcmp(r->chip, chip->name) || !strcmp(r->backend, "cpu") ||
            mq_features_compute(&r->p, &r->c, chip, &f, NULL) != MQ_OK)
            continue;
        rows_add(&rows, &f, r->st.median);
    }
    mq_results_free(&rs);
    int n = 0;
    mq_model m;
    char why[256];
    if (rows.n >= 4 * MQ_MODEL_NPARAM &&
        mq_model_fit_holdout(MQ_MODEL_ROOFLINE, rows.f, rows.t, rows.n, 0.2, &m, why,
                             sizeof why) == 0) {
        *pred = m;
        n = m.n_fit;
    }
    free(rows.f);
    free(rows.t);
    return n;
}

/* --check: a table on shapes it was not tuned on. Every candidate of each
 * shape is timed (the exhaustive best), as are the baselines and the
 * table's pick (found by lookup, with its level). */
static int run_check(tuner *T, const mq_suite *suite, const mq_table *table)
{
    mq_error e;
    printf("%-7s %-5s %-6s %-6s %-54s %-8s %9s %9s %9s %8s %8s\n", "format", "M", "N", "K",
           "table pick", "level", "pick ms", "base ms", "best ms", "xbase", "vs best");
    double lg_base = 0, lg_best = 0, worst = 0;
    int cnt = 0;
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int s = 0; (T->o->formats & (1u << f)) && s < suite->n; s++) {
            mq_problem p = {(mq_format)f, suite->s[s].M, suite->s[s].N, suite->s[s].K,
                            T->o->group};
            int n, base[MQ_BASE_COUNT];
            cand *cs = build_cands(&p, T->chip, &n, base);
            if (!cs)
                continue;
            mq_lookup_level lv;
            mq_limits lim = mq_chip_limits(T->chip);
            mq_candidate pc = mq_table_lookup(table, &p, &lim, &lv);
            int pick = find(cs, n, &pc);
            if (pick < 0) {
                cs[n].c = pc;
                cs[n].time = -1;
                pick = n++;
            }
            int msame[64];
            int nsame = mq_shapes_ms_sharing(suite->s, suite->n, s, p.N, p.K, msame, 64);
            if (mq_bench_problem_setup(&T->bp, &p, 0, msame, nsame, &e)) {
                fprintf(stderr, "tune: %s\n", e.msg);
                free(cs);
                return 2;
            }
            double best = INFINITY, bbase = INFINITY;
            for (int i = 0; i < n && !T->failed; i++) {
                double t = measure(T, &p, &cs[i]);
                if (t > 0)
                    best = fmin(best, t);
            }
            for (int b = 0; b < MQ_BASE_COUNT; b++)
                if (base[b] >= 0 && cs[base[b]].time > 0)
                    bbase = fmin(bbase, cs[base[b]].time);
            double pt = cs[pick].time;
            char name[128];
            mq_candidate_str(&pc, name, sizeof name);
            printf("%-7s %-5d %-6d %-6d %-54s %-8s %9.4f %9.4f %9.4f %7.2fx %+7.1f%%\n",
                   mq_format_name(p.format), p.M, p.N, p.K, name, mq_lookup_level_name(lv),
                   pt * 1e3, bbase * 1e3, best * 1e3, bbase / pt, 100 * (pt / best - 1));
            fflush(stdout);
            if (pt > 0 && isfinite(bbase) && isfinite(best)) {
                lg_base += log(bbase / pt);
                lg_best += log(pt / best);
                worst = fmax(worst, pt / best - 1);
                cnt++;
            }
            free(cs);
            if (T->failed) {
                mq_bench_problem_free(&T->bp);
                return 2;
            }
        }
    mq_bench_problem_free(&T->bp);
    if (cnt)
        printf("\n%d shapes not in the tuning suite: the table's picks are %.2fx the best "
               "baseline (geometric mean) and %.1f%% slower than the exhaustive best on "
               "average (geometric), %.1f%% at worst\n",
               cnt, exp(lg_base / cnt), 100 * (exp(lg_best / cnt) - 1), 100 * worst);
    return 0;
}

static int tune_suite(tuner *T, const mq_suite *suite, int measured, const mq_model *pred,
                      const char *pred_note, const char *dir, mq_table_set *ts);

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    char err[1024];
    mq_chip chip; /* host is measured below; others come from the chips file */
    if (strcmp(o.chip, "host") && mq_chip_load_named(o.chips, o.chip, &chip, err, sizeof err)) {
        fprintf(stderr, "tune: %s\n", err);
        return 2;
    }
    int measured = !strcmp(o.chip, "host");
    /* on a Mac whose GPU is the chip asked for, tune measures it on Metal */
    char mwhy[512], backend_note[1024] = "";
    mq_backend *metal = measured ? NULL : mq_backend_metal_create(mwhy, sizeof mwhy);
    if (metal && !strcmp(metal->chip, o.chip)) {
        measured = 1;
        snprintf(backend_note, sizeof backend_note, "measuring %s on Metal (%s)", o.chip,
                 metal->device);
    } else if (!measured) {
        if (metal)
            snprintf(mwhy, sizeof mwhy, "the Metal device is %s, not %s", metal->device, o.chip);
        snprintf(backend_note, sizeof backend_note, "%s is predicted (metal: %s)", o.chip, mwhy);
        mq_backend_destroy(metal);
        metal = NULL;
    }
    if (o.exhaustive && !measured) {
        fprintf(stderr, "tune: --search exhaustive needs a backend that is the chip (--chip host "
                        "here); %s is predicted\n",
                o.chip);
        return 2;
    }
    if (o.check && !measured) {
        fprintf(stderr, "tune: --check times candidates: it needs --chip host here\n");
        return 2;
    }
    int ms[64];
    const char *mdef = o.check ? "1,16" : measured ? "1,4,16,64" : "all";
    int nms = mq_suite_parse_ms(o.m ? o.m : mdef, ms, 64, err, sizeof err);
    mq_suite suite;
    if (nms < 0 ||
        mq_suite_load(o.check ? o.check : o.suite, ms, nms, &suite, err, sizeof err)) {
        fprintf(stderr, "tune: %s\n", err);
        return 2;
    }
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int s = 0; (o.formats & (1u << f)) && s < suite.n; s++) {
            mq_problem p = {(mq_format)f, suite.s[s].M, suite.s[s].N, suite.s[s].K, o.group};
            mq_error e;
            if (mq_problem_check(&p, &e)) {
                fprintf(stderr, "tune: %s %s: %s\n", suite.s[s].model, suite.s[s].layer, e.msg);
                return 2;
            }
        }
    static tuner T;
    T.o = &o;
    T.w.fd = -1;
    char dir[4096], path[4200], chip_path[4200], why[512], note[4400];
    snprintf(dir, sizeof dir, "%s", o.out_dir ? o.out_dir : "");
    if (!o.out_dir)
        snprintf(dir, sizeof dir, "results/%s", o.chip);
    snprintf(chip_path, sizeof chip_path, "%s/tune-chip.csv", dir);
    mq_table *check_table = NULL;
    mq_table_set ts = {.lock_fd = -1};
    int from_snapshot = 0, threads = o.threads;
    struct stat sb;
    rc = 2; /* until the run gets going, a failure is the environment's or the input's */
    mq_model pred = {MQ_MODEL_ROOFLINE, {0}, 0, 0, NAN, NAN};
    memcpy(pred.theta, default_theta, sizeof default_theta);
    char pred_note[4608] = "documented defaults (no measurements of this chip)";
    if (!measured) {
        /* the chip's own stored measurements (a backend that is the chip,
         * e.g. Metal on a Mac: not the CPU model) set the coefficients */
        char mpath[4300];
        snprintf(mpath, sizeof mpath, "%s/measured.csv", dir);
        int nfit = stored_model(mpath, &chip, &pred, err, sizeof err);
        if (nfit < 0) {
            fprintf(stderr, "tune: %s\n", err);
            goto out;
        }
        if (nfit > 0)
            snprintf(pred_note, sizeof pred_note,
                     "fitted on %d rows measured on %s (%s); held-out MAPE %.1f%%, Spearman "
                     "%.3f",
                     nfit, chip.name, mpath, 100 * pred.mape, pred.spearman);
    }
    if (o.check) { /* the table is read before anything is written */
        char tp[4300];
        mq_error e;
        snprintf(tp, sizeof tp, "%s/table.csv", dir);
        if (mq_table_load(tp, o.chip, &check_table, &e)) {
            fprintf(stderr, "tune: %s\n", e.msg);
            goto out;
        }
    } else if (mq_table_set_begin(dir, &ts, err, sizeof err)) {
        fprintf(stderr, "tune: %s\n", err);
        goto out;
    }
    /* a resumed host run takes the chip as the interrupted run measured it:
     * the probes vary between runs, and the guided search's choices follow
     * the chip's figures, so only the same figures replay the same run */
    if (!metal && measured && !o.check && o.resume && stat(chip_path, &sb) == 0) {
        if (mq_chip_snapshot_load(chip_path, &chip, err, sizeof err)) {
            fprintf(stderr, "tune: %s\n", err);
            goto out;
        }
        if (!chip.is_host) {
            fprintf(stderr, "tune: %s describes chip %s, not host\n", chip_path, chip.name);
            goto out;
        }
        int cores = (int)chip.v[MQ_CHIP_GPU_CORES];
        if (threads && threads != cores) {
            fprintf(stderr, "tune: --threads %d differs from the resumed run's %d workers (%s)\n",
                    threads, cores, chip_path);
            goto out;
        }
        threads = cores;
        from_snapshot = 1;
    }
    /* every chosen candidate runs: on Metal when that is the chip, else on
     * the CPU model, measured or not */
    T.be = metal ? metal : mq_backend_open("cpu", threads, why, sizeof why, note, sizeof note);
    metal = NULL;
    if (!T.be) {
        fprintf(stderr, "tune: %s\n", why);
        goto out;
    }
    if (T.be->chip[0] == '\0' && measured && !from_snapshot) {
        if (mq_chip_find(NULL, "host", mq_backend_cpu_threads(T.be), &chip, err, sizeof err)) {
            fprintf(stderr, "tune: %s\n", err);
            goto out;
        }
        if (!o.check && (mq_make_parent_dirs(chip_path, err, sizeof err) ||
                         mq_chip_write(chip_path, &chip, err, sizeof err))) {
            fprintf(stderr, "tune: %s\n", err);
            goto out;
        }
    }
    T.chip = &chip;
    snprintf(path, sizeof path, "%s/%s", dir, o.check ? "check-results.csv" : "tune-results.csv");
    err[0] = '\0';
    if (mq_make_parent_dirs(path, err, sizeof err) ||
        (o.resume && stat(path, &sb) == 0 && mq_results_load(path, &T.own, err, sizeof err)) ||
        (measured && mq_results_open(path, &T.w, err, sizeof err))) {
        fprintf(stderr, "tune: %s\n", err);
        goto out;
    }
    if (backend_note[0]) /* inputs and outputs are good: say how the chip is tuned */
        fprintf(stderr, "tune: %s\n", backend_note);
    if (mq_results_writer_note(&T.w, note, sizeof note) ||
        mq_results_torn_note(&T.own, path, note, sizeof note))
        fprintf(stderr, "tune: %s\n", note);
    if (o.resume && measured)
        fprintf(stderr, "tune: resuming: %d rows of %s can be reused%s\n", T.own.n, path,
                from_snapshot ? "; the chip as the interrupted run measured it (tune-chip.csv)"
                              : "");
    if (o.check) {
        rc = run_check(&T, &suite, check_table);
        goto out;
    }
    if (!measured)
        fprintf(stderr, "tune: %s is predicted: cost model %s; chosen candidates are verified "
                        "on the CPU model\n",
                chip.name, pred_note);
    rc = tune_suite(&T, &suite, measured, &pred, pred_note, dir, &ts);
out:
    if (rc && ts.lock_fd >= 0)
        mq_table_set_abort(&ts); /* the published set stays as it was */
    mq_table_set_end(&ts);
    mq_table_free(check_table);
    mq_results_close(&T.w);
    mq_results_free(&T.own);
    mq_suite_free(&suite);
    mq_backend_destroy(T.be);
    mq_backend_destroy(metal);
    free(T.rows.f);
    free(T.rows.t);
    return rc;
}

/* Tune every distinct shape of the suite, write the set into this run's
 * generation and publish it. 0; 1 when a shape had no verified candidate
 * (a finding: with none at all, nothing is published); 2 when the run could
 * not go on (a row or a file could not be written). */
static int tune_suite(tuner *T, const mq_suite *suite, int measured, const mq_model *pred,
                      const char *pred_note, const char *dir, mq_table_set *ts)
{
    const options *o = T->o;
    const mq_chip *chip = T->chip;
    char err[4400];
    int rc = 0;
    mq_table_entry *ent = NULL;
    /* two layers of one shape are one problem */
    char *repeat = calloc((size_t)(suite->n ? suite->n : 1), 1);
    int distinct = 0, nprob = 0;
    for (int s = 0; repeat && s < suite->n; s++) {
        for (int t = 0; t < s && !repeat[s]; t++)
            repeat[s] = suite->s[t].M == suite->s[s].M && suite->s[t].N == suite->s[s].N &&
                        suite->s[t].K == suite->s[s].K;
        distinct += !repeat[s];
    }
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        nprob += (o->formats >> f & 1u) ? distinct : 0;
    mq_choice *choices = calloc((size_t)(nprob ? nprob : 1), sizeof *choices);
    int nchoice = 0, unverified = 0, tty = isatty(fileno(stderr)) && !o->quiet;
    double t0 = mq_now(), fraction_sum = 0;
    int gap_n = 0;
    double gap_sum = 0, gap_max = 0;
    mq_limits lim = mq_chip_limits(chip);
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int s = 0; (o->formats & (1u << f)) && s < suite->n; s++) {
            mq_problem p = {(mq_format)f, suite->s[s].M, suite->s[s].N, suite->s[s].K, o->group};
            if (repeat[s])
                continue;
            int n, base[MQ_BASE_COUNT];
            cand *cs = build_cands(&p, chip, &n, base);
            if (!cs)
                continue;
            int pick = -1;
            double btime[MQ_BASE_COUNT];
            if (measured) {
                int msame[64];
                int nsame = mq_shapes_ms_sharing(suite->s, suite->n, s, p.N, p.K, msame, 64);
                mq_error e;
                if (mq_bench_problem_setup(&T->bp, &p, 0, msame, nsame, &e)) {
                    fprintf(stderr, "tune: %s\n", e.msg);
                    free(cs);
                    rc = 2;
                    goto done;
                }
                int before = T->timed + T->reused;
                if (o->exhaustive)
                    for (int i = 0; i < n && !T->failed; i++)
                        measure(T, &p, &cs[i]);
                else
                    search_guided(T, &p, cs, n, base);
                fraction_sum += (double)(T->timed + T->reused - before) / n;
                for (int i = 0; i < n; i++)
                    if (cs[i].time > 0 && (pick < 0 || cs[i].time < cs[pick].time))
                        pick = i;
                for (int b = 0; b < MQ_BASE_COUNT; b++)
                    btime[b] = base[b] >= 0 ? cs[base[b]].time : -1;
                /* exhaustive data of this build for this problem: how far is the pick? */
                if (!o->exhaustive && pick >= 0 && T->own.n) {
                    double ex = INFINITY;
                    int have = 0;
                    for (int i = 0; i < T->own.n; i++) {
                        const mq_result *r = &T->own.r[i];
                        if (!strcmp(r->status, "ok") && !memcmp(&r->p, &p, sizeof p)) {
                            have++;
                            ex = fmin(ex, r->st.median);
                        }
                    }
                    if (have >= n && ex > 0) {
                        double g = cs[pick].time / ex - 1;
                        gap_sum += g;
                        gap_max = fmax(gap_max, g);
                        gap_n++;
                    }
                }
            } else {
                /* predicted: best first, the first that verifies on the CPU model wins */
                for (int i = 0; i < n; i++)
                    cs[i].time = mq_model_predict(pred, &cs[i].f);
                for (int b = 0; b < MQ_BASE_COUNT; b++)
                    btime[b] = base[b] >= 0 ? cs[base[b]].time : -1;
                mq_error e;
                int msame[64];
                int nsame = mq_shapes_ms_sharing(suite->s, suite->n, s, p.N, p.K, msame, 64);
                if (mq_bench_problem_setup(&T->bp, &p, 1, msame, nsame, &e)) {
                    fprintf(stderr, "tune: %s\n", e.msg);
                    free(cs);
                    rc = 2;
                    goto done;
                }
                mq_measure_opts vo = T->o->mo;
                vo.max_reps = 0;
                for (int tries = 0; tries < n && pick < 0; tries++) {
                    int best = -1;
                    for (int i = 0; i < n; i++)
                        if (cs[i].time > 0 && (best < 0 || cs[i].time < cs[best].time))
                            best = i;
                    if (best < 0)
                        break;
                    static mq_measurement m;
                    mq_measure(T->be, &T->bp, &cs[best].c, &lim, &vo, &m);
                    if (!strcmp(m.status, "ok"))
                        pick = best;
                    else
                        cs[best].time = -1; /* wrong on the CPU model: never chosen */
                }
            }
            if (pick >= 0) {
                mq_choice *c = &choices[nchoice++];
                c->p = p;
                c->c = cs[pick].c;
                c->expected_s = cs[pick].time;
                c->measured = measured;
                for (int b = 0; b < MQ_BASE_COUNT; b++)
                    c->speedup[b] = btime[b] > 0 ? btime[b] / cs[pick].time : 0;
            } else if (!T->failed) {
                fprintf(stderr, "tune: %s M=%d N=%d K=%d: no candidate verified\n",
                        mq_format_name(p.format), p.M, p.N, p.K);
                unverified++;
            }
            if (tty) {
                double el = mq_now() - t0;
                int done = nchoice;
                fprintf(stderr, "\r[%d/%d shapes] ETA %ds ", done, nprob,
                        done ? (int)(el / done * (nprob - done)) : 0);
            }
            free(cs);
            if (T->failed) {
                rc = 2; /* a row could not be stored: said where by measure() */
                goto done;
            }
        }
    if (tty)
        fputc('\n', stderr);
    mq_bench_problem_free(&T->bp);
    if (nchoice == 0) {
        fprintf(stderr, "tune: no shape has a verified candidate: nothing is written, the table "
                        "in %s stays as it was\n",
                dir);
        rc = 1;
        goto done;
    }
    /* the model and its quality on held-out rows */
    mq_model fit = *pred;
    char fit_note[4608];
    snprintf(fit_note, sizeof fit_note, "%s", pred_note);
    if (measured && T->rows.n >= 4 * MQ_MODEL_NPARAM &&
        mq_model_fit_holdout(MQ_MODEL_ROOFLINE, T->rows.f, T->rows.t, T->rows.n, 0.2, &fit, err,
                             sizeof err) == 0)
        snprintf(fit_note, sizeof fit_note, "fitted on %d rows measured on %s", fit.n_fit,
                 chip->name);
    int nent = mq_table_build(choices, nchoice, &ent);
    const char *source = measured ? "measured" : "predicted";
    /* the set is written where nobody reads it, then published in one step */
    char tpath[4400], hpath[4400], mpath[4400], cpath[4400];
    mq_table_set_path(ts, "table.csv", tpath, sizeof tpath);
    mq_table_set_path(ts, "table.h", hpath, sizeof hpath);
    mq_table_set_path(ts, "model.csv", mpath, sizeof mpath);
    mq_table_set_path(ts, "chip.csv", cpath, sizeof cpath);
    if (nent < 0 || mq_table_write_csv(tpath, chip->name, T->be->name, source, ent, nent, err,
                                       sizeof err) ||
        mq_table_write_header(hpath, chip->name, source, ent, nent, err, sizeof err) ||
        mq_model_write(mpath, &fit, chip->name, fit_note, err, sizeof err) ||
        mq_chip_write(cpath, chip, err, sizeof err) || mq_table_set_commit(ts, err, sizeof err)) {
        fprintf(stderr, "tune: %s; the table in %s stays as it was\n",
                nent < 0 ? "out of memory" : err, dir);
        rc = 2;
        goto done;
    }
    snprintf(tpath, sizeof tpath, "%s/table.csv", dir);
    snprintf(hpath, sizeof hpath, "%s/table.h", dir);
    /* the summary */
    printf("%-7s %-5s %-6s %-6s %-54s %11s %7s %7s %7s  %s\n", "format", "M", "N", "K",
           "chosen candidate", "time ms", "xseed", "xstripe", "xmlx", "source");
    double geo[MQ_BASE_COUNT] = {0};
    int geon[MQ_BASE_COUNT] = {0};
    for (int i = 0; i < nchoice; i++) {
        char name[128];
        mq_candidate_str(&choices[i].c, name, sizeof name);
        printf("%-7s %-5d %-6d %-6d %-54s %11.4f", mq_format_name(choices[i].p.format),
               choices[i].p.M, choices[i].p.N, choices[i].p.K, name,
               choices[i].expected_s * 1e3);
        for (int b = 0; b < MQ_BASE_COUNT; b++) {
            if (choices[i].speedup[b] > 0) {
                printf(" %7.2f", choices[i].speedup[b]);
                geo[b] += log(choices[i].speedup[b]);
                geon[b]++;
            } else {
                printf(" %7s", "n/a");
            }
        }
        printf("  %s\n", source);
    }
    printf("\n%s table for %s: %d shapes, %d rows -> %s, %s\n", source, chip->name, nchoice, nent,
           tpath, hpath);
    for (int b = 0; b < MQ_BASE_COUNT; b++)
        if (geon[b])
            printf("geometric-mean speedup over the %s rule: %.2fx (%d shapes)\n",
                   mq_baseline_name((mq_baseline)b), exp(geo[b] / geon[b]), geon[b]);
    printf("cost model (%s): %s", mq_model_kind_name(fit.kind), fit_note);
    if (fit.n_holdout)
        printf("; held-out %d rows: MAPE %.1f%%, Spearman %.3f", fit.n_holdout, 100 * fit.mape,
               fit.spearman);
    printf("\n");
    if (measured)
        printf("timed %d candidates (%d reused), %.0f%% of each shape's space on average, in "
               "%.1f s\n",
               T->timed, T->reused, 100 * fraction_sum / (nchoice ? nchoice : 1),
               mq_now() - t0);
    else
        printf("predicted in %.1f s\n", mq_now() - t0);
    if (gap_n)
        printf("against this build's exhaustive data on %d shapes: the guided pick is %.1f%% "
               "slower on average, %.1f%% at worst\n",
               gap_n, 100 * gap_sum / gap_n, 100 * gap_max);
    if (unverified) {
        fprintf(stderr, "tune: %d of %d shapes had no verified candidate (listed above): the "
                        "table has the other %d\n",
                unverified, nprob, nchoice);
        rc = 1;
    }
done:
    mq_bench_problem_free(&T->bp);
    free(ent);
    free(choices);
    free(repeat);
    return rc;
}
