/* plot_main.c - the plot command: extracts a plot's data from results files
 * (plot_data.c) into a temporary directory and runs the matching gnuplot
 * script from plots/ twice, for a PNG and an SVG, each written to a
 * temporary name and renamed into place. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chips.h"
#include "args.h"
#include "cli.h"
#include "gnuplot.h"
#include "model_store.h"
#include "numparse.h"
#include "history_data.h"
#include "moe_data.h"
#include "plot_data.h"
#include "results.h"
#include "target.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

#define MAX_RESULTS 16

typedef struct {
    const char *kind, *chip, *chips, *chip_file, *model, *out, *nightly, *filter;
    const char *results[MAX_RESULTS];
    int nresults;
    mq_problem p;
    int max_m, width, height;
    mq_regress_opts ro;
} options;

static const char *const kinds[] = {"occupancy", "splitk", "roofline", "model", "history",
                                    "moe"};
enum { NKINDS = sizeof kinds / sizeof kinds[0] };

static void usage(FILE *f)
{
    fprintf(f,
        "usage: plot KIND [options]\n"
        "Draws a plot from results files with gnuplot (scripts in plots/), as PNG and SVG.\n"
        "KIND:\n"
        "  occupancy  latency against threadgroups per core for one shape, a line per split_k:\n"
        "             the best measured candidate at each occupancy and the cost model's curve\n"
        "  splitk     latency against split_k for the small-M shapes of one N x K, a line per M\n"
        "  roofline   achieved GFLOP/s and GB/s against arithmetic intensity, the chip's ceilings\n"
        "  model      the cost model's prediction against the measured latency, y = x, its quality\n"
        "  history    the nightly runs against the baseline, one line per benchmark, regressions\n"
        "             marked (from --nightly-dir)\n"
        "  moe        the MoE block's latency against tokens from a moe-bench results file\n"
        "             (--results): per model, the best fused candidate and the unfused baseline\n"
        "  all        occupancy, splitk, roofline and model for the chip (those with data)\n\n"
        "options:\n"
        "  --chip CHIP         the chip (default host)\n"
        "  --results FILE      a results file; repeat to merge several (default\n"
        "                      results/CHIP/tune-results.csv)\n"
        "  --shape MxNxK       the shape (default 1x4096x14336); splitk uses its N and K\n"
        "  --format F          fp4, u4, trellis2, trellis3, trellis4 (default fp4)\n"
        "  --group G           quantization group (default 128)\n"
        "  --max-m M           splitk: the Ms drawn, up to M (default 16)\n"
        "  --model FILE        the fitted model (default results/CHIP/model.csv; absent: no\n"
        "                      model curve)\n"
        "  --chip-file FILE    the chip as tune saw it (default results/CHIP/chip.csv when it\n"
        "                      exists, else the chips file; host is measured if neither)\n"
        "  --chips FILE        chip descriptions (default harness/chips.csv or $MQ_CHIPS)\n"
        "  --nightly-dir DIR   history: the runs and baseline.csv (default results/nightly)\n"
        "  --bench TEXT        history: only benchmarks whose name contains TEXT\n"
        "  --alpha A, --min-effect E, --min-samples N   history: the detector (as compare)\n"
        "  --out DIR           where the images go (default results/CHIP/plots; history:\n"
        "                      NIGHTLY_DIR/plots)\n"
        "  --size WxH          image size in pixels (default 1000x650)\n\n"
        "Exit status: 0 drawn, 2 bad input (no data, a broken file) or an environment\n"
        "error (gnuplot, an unwritable or full --out); an existing image is never left\n"
        "half-written.\n\n"
        "examples:\n"
        "  plot occupancy --chip host --shape 1x4096x14336 --results results/host/examples/"
        "sweep-4096x14336.csv\n"
        "  plot splitk --chip m4max --shape 1x4096x14336   (the model only: no measurements)\n"
        "  plot history --nightly-dir results/nightly\n");
}

static int add_results(const char *v, void *dst, char *err, size_t errlen)
{
    options *o = dst;
    (void)err;
    (void)errlen;
    if (o->nresults == MAX_RESULTS)
        return -1;
    o->results[o->nresults++] = v;
    return 0;
}

static int parse_shape(const char *v, void *dst, char *err, size_t errlen)
{
    mq_problem *p = dst;
    (void)err;
    (void)errlen;
    return mq_cli_shape(v, &p->M, &p->N, &p->K);
}

static int parse_format(const char *v, void *dst, char *err, size_t errlen)
{
    unsigned mask = 0;
    if (mq_cli_formats(v, &mask, err, errlen) || (mask & (mask - 1))) {
        err[0] = '\0'; /* the option's own words */
        return -1;
    }
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        if (mask == 1u << f)
            *(mq_format *)dst = (mq_format)f;
    return 0;
}

static int parse_size(const char *v, void *dst, char *err, size_t errlen)
{
    options *o = dst;
    int wh[2];
    (void)err;
    (void)errlen;
    if (mq_parse_dims(v, 2, 150, 10000, wh, NULL, 0) || wh[0] < 200)
        return -1;
    o->width = wh[0];
    o->height = wh[1];
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->chip = "host";
    o->chips = mq_chips_default_path();
    o->p = (mq_problem){MQ_FMT_FP4, 1, 4096, 14336, 128};
    o->max_m = 16;
    o->width = 1000;
    o->height = 650;
    o->nightly = "results/nightly";
    o->ro = mq_regress_defaults();
    if (argc < 2)
        return mq_cli_fail("plot", "missing KIND", "");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return -1;
    }
    o->kind = argv[1];
    int ok = !strcmp(o->kind, "all");
    for (int k = 0; k < NKINDS; k++)
        ok |= !strcmp(o->kind, kinds[k]);
    if (!ok)
        return mq_cli_fail("plot", "unknown KIND (occupancy, splitk, roofline, model, history, "
                                   "moe, all)",
                           o->kind);
    const mq_arg args[] = {
        MQ_OPT_STR("--chip", &o->chip),
        MQ_OPT_STR("--chips", &o->chips),
        MQ_OPT_STR("--chip-file", &o->chip_file),
        MQ_OPT_STR("--model", &o->model),
        MQ_OPT_STR("--out", &o->out),
        MQ_OPT_STR("--nightly-dir", &o->nightly),
        MQ_OPT_STR("--bench", &o->filter),
        MQ_OPT_CUSTOM("--results", o, add_results, "too many --results (at most 16)"),
        MQ_OPT_CUSTOM("--shape", &o->p, parse_shape, "bad --shape (MxNxK, all positive)"),
        MQ_OPT_CUSTOM("--format", &o->p.format, parse_format,
                      "bad --format (one of fp4, u4, trellis2..4)"),
        MQ_OPT_INT("--group", &o->p.group, 1, 1 << 20, "bad --group"),
        MQ_OPT_INT("--max-m", &o->max_m, 1, 1 << 20, "bad --max-m"),
        MQ_OPT_CUSTOM("--size", o, parse_size, "bad --size (WxH, 200x150 to 10000x10000)"),
        MQ_OPT_DOUBLE("--alpha", &o->ro.alpha, 1e-12, 0.5, "bad --alpha"),
        MQ_OPT_DOUBLE("--min-effect", &o->ro.min_effect, 0, 10, "bad --min-effect"),
        MQ_OPT_INT("--min-samples", &o->ro.min_samples, 2, 1000000, "bad --min-samples"),
    };
    int rc = mq_args_parse("plot", argc, argv, 2, args, sizeof args / sizeof args[0], NULL, 0,
                           NULL);
    if (rc == 1) {
        usage(stdout);
        return -1;
    }
    if (rc)
        return rc;
    mq_error e;
    if (strcmp(o->kind, "history") && strcmp(o->kind, "moe") &&
        mq_problem_check(&o->p, &e) != MQ_OK) {
        fprintf(stderr, "plot: %s\n", e.msg);
        return 2;
    }
    return 0;
}

/* ---- inputs ------------------------------------------------------------- */

typedef struct {
    mq_results files[MAX_RESULTS];
    int nfiles;
    const mq_result **rows;
    mq_model model;
    int have_model;
    char model_note[200];
    mq_plot_src src;
} inputs;

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int load_inputs(const options *o, inputs *in, char *err, size_t errlen)
{
    memset(in, 0, sizeof *in);
    char path[4200];
    /* the chip: as tune saw it (results/CHIP/chip.csv or --chip-file), else
     * described or measured (harness/target.c) */
    snprintf(path, sizeof path, "results/%s/chip.csv", o->chip);
    if (o->chip_file && !exists(o->chip_file)) {
        snprintf(err, errlen, "%s: cannot open: %s", o->chip_file, strerror(ENOENT));
        return -1;
    }
    mq_target t;
    mq_target_opts to = {o->chip, o->chips, NULL, 0, o->chip_file ? o->chip_file : path,
                         MQ_TARGET_NO_BACKEND};
    if (mq_target_open(&to, &t, err, errlen))
        return -1;
    in->src.chip = t.chip;
    mq_target_close(&t);
    /* the model: absent is fine (no curve), broken is an error */
    snprintf(path, sizeof path, "results/%s/model.csv", o->chip);
    const char *mf = o->model ? o->model : path;
    if (o->model || exists(mf)) {
        if (mq_model_read(mf, &in->model, err, errlen))
            return -1;
        in->have_model = 1;
        in->src.model = &in->model;
    }
    /* the results: the chip's ok rows of every file */
    snprintf(path, sizeof path, "results/%s/tune-results.csv", o->chip);
    const char *deflt[1] = {path};
    const char *const *files = o->nresults ? o->results : deflt;
    int nf = o->nresults ? o->nresults : exists(path) ? 1 : 0;
    size_t total = 0;
    for (int i = 0; i < nf; i++) {
        if (mq_results_load(files[i], &in->files[i], err, errlen))
            return -1;
        in->nfiles++;
        total += (size_t)in->files[i].n;
    }
    in->rows = calloc(total ? total : 1, sizeof *in->rows);
    if (!in->rows) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < in->nfiles; i++)
        for (int j = 0; j < in->files[i].n; j++) {
            const mq_result *r = &in->files[i].r[j];
            if (!strcmp(r->status, "ok") && !strcmp(r->chip, o->chip) && r->st.median > 0)
                in->rows[in->src.nrows++] = r;
        }
    in->src.rows = in->rows;
    return 0;
}

static void free_inputs(inputs *in)
{
    for (int i = 0; i < in->nfiles; i++)
        mq_results_free(&in->files[i]);
    free(in->rows);
}

/* "CPU model: 2 cores, 34 GB/s, 0.2 FP16 TFLOP/s" or "40 GPU cores, ..." */
static void chip_words(const mq_chip *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s%.0f %s, %.0f GB/s, %.2g FP16 TFLOP/s", c->is_host ? "CPU model: " : "",
             c->v[MQ_CHIP_GPU_CORES], c->is_host ? "cores" : "GPU cores",
             c->v[MQ_CHIP_MEM_BW_GBS], c->v[MQ_CHIP_FP16_TFLOPS]);
}

/* What the solid and dashed lines are, given what there is to draw. */
static void legend_words(const mq_plot_series_info *si, const char *at, const char *model,
                         char *buf, size_t n)
{
    if (si->measured_points && si->model_points)
        snprintf(buf, n, "solid: the best measured candidate at each %s\ndashed: %s", at, model);
    else if (si->measured_points)
        snprintf(buf, n, "the best measured candidate at each %s (%s)", at, model);
    else
        snprintf(buf, n, "no measurements of this chip\ndashed: the best at each %s by the %s", at,
                 model);
}

static void model_words(const inputs *in, char *buf, size_t n)
{
    if (!in->have_model)
        snprintf(buf, n, "no cost model");
    else if (in->model.n_holdout)
        snprintf(buf, n, "cost model (held-out MAPE %.0f%%, Spearman %.2f)",
                 100 * in->model.mape, in->model.spearman);
    else if (in->model.n_fit)
        snprintf(buf, n, "cost model (fitted on %d rows, none held out)", in->model.n_fit);
    else
        snprintf(buf, n, "cost model (default coefficients)");
}

/* One plot of the chip (not history). 0 drawn, -1 with err. */
static int plot_chip(const options *o, inputs *in, const char *kind, const char *outdir,
                     char *err, size_t errlen)
{
    mq_scratch s = {.n = 0};
    if (mq_scratch_make(&s, err, errlen))
        return -1;
    char dpath[400], vars[4096], title[1024], cw[200], mw[200], lw[400], base[256];
    FILE *f = mq_scratch_open(&s, "data.txt", dpath, sizeof dpath);
    int rc = f ? 0 : -1;
    if (!f)
        snprintf(err, errlen, "%s: cannot write: %s", dpath, strerror(errno));
    const mq_problem *p = &o->p;
    const char *fmt = mq_format_name(p->format);
    mq_plot_series_info si = {0};
    model_words(in, mw, sizeof mw);
    chip_words(&in->src.chip, cw, sizeof cw);
    size_t vl = 0;
    if (rc == 0 && !strcmp(kind, "occupancy")) {
        rc = mq_plot_occupancy_data(&in->src, p, f, &si, err, errlen);
        legend_words(&si, "occupancy", mw, lw, sizeof lw);
        snprintf(title, sizeof title,
                 "%s: %s M=%d N=%d K=%d g=%d - latency vs threadgroups per core\n%s\n%s",
                 in->src.chip.name, fmt, p->M, p->N, p->K, p->group, cw, lw);
        snprintf(base, sizeof base, "occupancy-%s-%s-%dx%dx%d", in->src.chip.name, fmt, p->M,
                 p->N, p->K);
        vl = (size_t)snprintf(vars, sizeof vars, "cores = %g\n",
                              in->src.chip.v[MQ_CHIP_GPU_CORES]);
    } else if (rc == 0 && !strcmp(kind, "splitk")) {
        rc = mq_plot_splitk_data(&in->src, p->format, p->N, p->K, p->group, o->max_m, f, &si, err,
                                 errlen);
        legend_words(&si, "split_k", mw, lw, sizeof lw);
        snprintf(title, sizeof title, "%s: %s N=%d K=%d g=%d, M <= %d - latency vs split-K\n%s\n%s",
                 in->src.chip.name, fmt, p->N, p->K, p->group, o->max_m, cw, lw);
        snprintf(base, sizeof base, "splitk-%s-%s-%dx%d", in->src.chip.name, fmt, p->N, p->K);
    } else if (rc == 0 && !strcmp(kind, "roofline")) {
        int np = mq_plot_roofline_data(&in->src, f, err, errlen);
        rc = np < 0 ? -1 : 0;
        snprintf(title, sizeof title,
                 "%s: roofline of %d measured candidates over %d shapes (all formats)\n%s",
                 in->src.chip.name, in->src.nrows, np, cw);
        snprintf(base, sizeof base, "roofline-%s", in->src.chip.name);
        vl = (size_t)snprintf(vars, sizeof vars, "bw = %g\npeak = %g\n",
                              in->src.chip.v[MQ_CHIP_MEM_BW_GBS],
                              1e3 * in->src.chip.v[MQ_CHIP_FP16_TFLOPS]);
    } else if (rc == 0) {
        double mape = 0, rho = 0;
        double lo = 0, hi = 0;
        int n = mq_plot_model_data(&in->src, f, &si, &mape, &rho, &lo, &hi, err, errlen);
        rc = n < 0 ? -1 : 0;
        vl = (size_t)snprintf(vars, sizeof vars, "lo = %g\nhi = %g\n", lo, hi);
        snprintf(title, sizeof title,
                 "%s: %s vs measurement\n%s\non these %d rows: MAPE %.0f%%, Spearman %.3f",
                 in->src.chip.name, mw, cw, n, 100 * mape, rho);
        snprintf(base, sizeof base, "model-%s", in->src.chip.name);
    }
    if (f)
        fclose(f);
    if (rc == 0) {
        FILE *v = fmemopen(vars + vl, sizeof vars - vl, "w");
        if (v) {
            mq_gp_string(v, "data", dpath);
            mq_gp_string(v, "ttl", title);
            mq_gp_string(v, "labels", si.labels);
            fprintf(v, "nseries = %d\nhas_meas = %d\nhas_model = %d\n", si.nseries,
                    si.measured_points > 0, si.model_points > 0);
            fclose(v);
        }
        rc = mq_gnuplot_draw(&s, o->width, o->height, kind, vars, outdir, base, err, errlen);
    }
    mq_scratch_remove(&s);
    return rc;
}

static int plot_history(const options *o, const char *outdir, char *err, size_t errlen)
{
    mq_scratch s = {.n = 0};
    if (mq_scratch_make(&s, err, errlen))
        return -1;
    char lp[400], mp[400], gp[400];
    FILE *l = mq_scratch_open(&s, "lines.txt", lp, sizeof lp);
    FILE *m = mq_scratch_open(&s, "marks.txt", mp, sizeof mp);
    FILE *g = mq_scratch_open(&s, "geo.txt", gp, sizeof gp);
    mq_plot_history_info hi;
    int rc = -1;
    if (!l || !m || !g)
        snprintf(err, errlen, "%s: cannot write: %s", s.dir, strerror(errno));
    else
        rc = mq_plot_history_data(o->nightly, o->filter, &o->ro, l, m, g, &hi, err, errlen);
    if (l)
        fclose(l);
    if (m)
        fclose(m);
    if (g)
        fclose(g);
    if (rc == 0) {
        char vars[8192], title[1024];
        snprintf(title, sizeof title,
                 "nightly history of %s: %d benchmark%s%s%s, %d run%s from %.10s to %.10s\n"
                 "grey: each benchmark's median / the baseline's median\nred, green: regressed, "
                 "improved (Mann-Whitney U, alpha %g, change >= %.0f%%)",
                 o->nightly, hi.nbench, hi.nbench == 1 ? "" : "s", o->filter ? " matching " : "",
                 o->filter ? o->filter : "", hi.nruns, hi.nruns == 1 ? "" : "s", hi.first,
                 hi.last, o->ro.alpha, 100 * o->ro.min_effect);
        FILE *v = fmemopen(vars, sizeof vars, "w");
        if (v) {
            mq_gp_string(v, "lines", lp);
            mq_gp_string(v, "marks", mp);
            mq_gp_string(v, "geo", gp);
            mq_gp_string(v, "ttl", title);
            mq_gp_string(v, "first", hi.first);
            mq_gp_string(v, "last", hi.last);
            fprintf(v, "nbench = %d\nmin_effect = %g\n", hi.nbench, o->ro.min_effect);
            fclose(v);
        }
        rc = mq_gnuplot_draw(&s, o->width, o->height, "history", vars, outdir, "history", err,
                             errlen);
    }
    mq_scratch_remove(&s);
    return rc;
}

/* The MoE plot of one moe-bench results file: OUTDIR/moe-FILE.{png,svg}. */
static int plot_moe(const options *o, const char *outdir, char *err, size_t errlen)
{
    if (o->nresults < 1) {
        snprintf(err, errlen, "plot moe takes --results FILE (moe-bench results; repeat to "
                              "merge runs)");
        return -1;
    }
    mq_scratch s = {.n = 0};
    if (mq_scratch_make(&s, err, errlen))
        return -1;
    char dpath[400], vars[4096], title[1024], base[256];
    FILE *f = mq_scratch_open(&s, "data.txt", dpath, sizeof dpath);
    mq_plot_moe_info mi;
    int rc = -1;
    if (!f)
        snprintf(err, errlen, "%s: cannot write: %s", s.dir, strerror(errno));
    else
        rc = mq_plot_moe_data((const char *const *)o->results, o->nresults, f, &mi, err, errlen);
    if (f)
        fclose(f);
    if (rc == 0) {
        const char *b = strrchr(o->results[0], '/');
        b = b ? b + 1 : o->results[0];
        int stem = (int)strcspn(b, ".");
        snprintf(base, sizeof base, "%s%.*s", strncmp(b, "moe", 3) ? "moe-" : "",
                 stem < 200 ? stem : 200, b);
        char where[256];
        if (mi.device[0])
            snprintf(where, sizeof where, "on %s", mi.device);
        else
            snprintf(where, sizeof where, "on the CPU model: %s, %d threads", mi.host,
                     mi.threads);
        snprintf(title, sizeof title,
                 "MoE block (gemm_trellis_moe, %s, %s routing) %s\n"
                 "solid: the best fused candidate at each token count; dashed: the unfused "
                 "baseline", mi.format, mi.routing, where);
        FILE *v = fmemopen(vars, sizeof vars, "w");
        if (v) {
            mq_gp_string(v, "data", dpath);
            mq_gp_string(v, "ttl", title);
            mq_gp_string(v, "labels", mi.labels);
            fprintf(v, "nseries = %d\n", mi.nseries);
            fclose(v);
        }
        rc = mq_gnuplot_draw(&s, o->width, o->height, "moe", vars, outdir, base, err, errlen);
    }
    mq_scratch_remove(&s);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    int prc = parse_args(argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc;
    char err[4600], outdir[4200];
    if (!strcmp(o.kind, "history")) {
        snprintf(outdir, sizeof outdir, "%s/plots", o.nightly);
        if (plot_history(&o, o.out ? o.out : outdir, err, sizeof err)) {
            fprintf(stderr, "plot: %s\n", err);
            return 2;
        }
        return 0;
    }
    snprintf(outdir, sizeof outdir, "results/%s/plots", o.chip);
    if (!strcmp(o.kind, "moe")) {
        if (plot_moe(&o, o.out ? o.out : outdir, err, sizeof err)) {
            fprintf(stderr, "plot: %s\n", err);
            return 2;
        }
        return 0;
    }
    inputs in;
    if (load_inputs(&o, &in, err, sizeof err)) {
        fprintf(stderr, "plot: %s\n", err);
        free_inputs(&in);
        return 2;
    }
    /* plot all skips what it cannot draw, and says so once it has drawn
     * something; when it drew nothing, the first failure is its one line */
    int drawn = 0, failed = 0;
    char first[4600] = "", skipped[4 * 4700] = "";
    size_t sl = 0;
    for (int k = 0; k < NKINDS; k++) {
        if ((strcmp(o.kind, "all") && strcmp(o.kind, kinds[k])) || !strcmp(kinds[k], "history") ||
            !strcmp(kinds[k], "moe"))
            continue;
        if (plot_chip(&o, &in, kinds[k], o.out ? o.out : outdir, err, sizeof err)) {
            if (!failed++)
                snprintf(first, sizeof first, "%s", err);
            if (sl < sizeof skipped)
                sl += (size_t)snprintf(skipped + sl, sizeof skipped - sl, "plot: skipped: %s\n",
                                       err);
        } else {
            drawn++;
        }
    }
    free_inputs(&in);
    /* a plot that could not be drawn is bad input (no data, a broken file)
     * or the environment (gnuplot, the disk): 2 */
    if (drawn && !strcmp(o.kind, "all")) {
        fputs(skipped, stderr);
        return 0;
    }
    if (failed)
        fprintf(stderr, "plot: %s\n", first);
    return drawn && !failed ? 0 : 2;
}
