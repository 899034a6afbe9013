/* chip_tiers.c - see chip_tiers.h. */
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip_tiers.h"
#include "figures_file.h"
#include "numparse.h"

static const char *const columns[] = {"chip",        "workload",    "bytes_per_token",
                                      "flops_per_token", "prefill_tps", "decode_tps",
                                      "role",        "source"};
#define NCOL ((int)(sizeof columns / sizeof *columns))

void mq_llm_figures_free(mq_llm_figures *lf)
{
    free(lf->f);
    lf->f = NULL;
    lf->n = 0;
}

int mq_tier_describe(const mq_chip *c, double x[MQ_TIER_NX])
{
    int gen = 0, used = 0;
    char tier = 0;
    if (sscanf(c->arch, "applegpu_g%d%c%n", &gen, &tier, &used) != 2 || c->arch[used] ||
        gen < 1 || gen > 99 || !strchr("gsd", tier) || !(c->v[MQ_CHIP_MEM_BW_GBS] > 0) ||
        !(c->v[MQ_CHIP_GPU_CORES] > 0))
        return -1;
    x[0] = 1.0;
    x[1] = log2(c->v[MQ_CHIP_MEM_BW_GBS]);
    x[2] = log2(c->v[MQ_CHIP_GPU_CORES]);
    x[3] = tier == 'd';
    x[4] = gen - 13;
    return 0;
}

const char *mq_tier_label(const mq_chip *c)
{
    double x[MQ_TIER_NX];
    if (mq_tier_describe(c, x))
        return "";
    if (x[3] > 0)
        return "ultra";
    static const char *const named[] = {"max", "pro"}; /* the s tier, told apart by name */
    for (size_t i = 0; i < sizeof named / sizeof *named; i++)
        if (strstr(c->name, named[i]))
            return named[i];
    return "base";
}

double mq_llm_figure_share(const mq_llm_figure *f)
{
    return f->decode_tps * f->bytes_per_token / (f->chip.v[MQ_CHIP_MEM_BW_GBS] * 1e9);
}

double mq_llm_figure_eff(const mq_llm_figure *f)
{
    double peak = fmax(f->chip.v[MQ_CHIP_FP16_TFLOPS], f->chip.v[MQ_CHIP_FP32_TFLOPS]);
    return f->prefill_tps * f->flops_per_token / (peak * 1e12);
}

static int parse_row(const char *path, const mq_csv_row *r, const int *col, void *ctx,
                     void *elem, char *err, size_t errlen)
{
    const char *chips = ctx;
    mq_llm_figure *f = elem;
    const char *v[NCOL];
    char why[200], cerr[600];
    for (int j = 0; j < NCOL; j++)
        v[j] = mq_figure_field(r, col, j);
    memset(f, 0, sizeof *f);
    f->line = r->line;
    if (mq_chip_load_named(chips, v[0], &f->chip, cerr, sizeof cerr)) {
        snprintf(err, errlen, "%s:%d: chip: %s", path, r->line, cerr);
        return -1;
    }
    double x[MQ_TIER_NX];
    if (mq_tier_describe(&f->chip, x)) {
        snprintf(err, errlen, "%s:%d: chip: '%s' is not an Apple GPU (arch '%s')", path, r->line,
                 v[0], f->chip.arch);
        return -1;
    }
    if (!v[1][0] || strlen(v[1]) >= sizeof f->workload) {
        snprintf(err, errlen, "%s:%d: workload: empty or longer than %zu characters", path,
                 r->line, sizeof f->workload - 1);
        return -1;
    }
    snprintf(f->workload, sizeof f->workload, "%s", v[1]);
    double *num[] = {&f->bytes_per_token, &f->flops_per_token, &f->prefill_tps, &f->decode_tps};
    for (int j = 0; j < 4; j++)
        if (mq_parse_double(v[2 + j], 1e-3, 1e15, num[j], why, sizeof why)) {
            snprintf(err, errlen, "%s:%d: %s: %s", path, r->line, columns[2 + j], why);
            return -1;
        }
    static const char *const roles[] = {"check", "fit"};
    f->role = -1;
    for (int j = 0; j < 2; j++)
        if (!strcmp(v[6], roles[j]))
            f->role = j;
    if (f->role < 0) {
        snprintf(err, errlen, "%s:%d: role: '%s' is not 'fit' or 'check'", path, r->line, v[6]);
        return -1;
    }
    if (!v[7][0] || strlen(v[7]) >= sizeof f->source) {
        snprintf(err, errlen, "%s:%d: source: %s", path, r->line,
                 v[7][0] ? "longer than 299 characters"
                         : "empty (every figure names where it was published)");
        return -1;
    }
    snprintf(f->source, sizeof f->source, "%s", v[7]);
    /* a rate above what the chip is advertised to reach is a wrong row */
    const struct {
        const char *what, *of;
        double v;
    } got[] = {{"decode", "bandwidth", mq_llm_figure_share(f)},
               {"prefill", "FP16 peak", mq_llm_figure_eff(f)}};
    for (int j = 0; j < 2; j++)
        if (!(got[j].v > 0 && got[j].v <= 1)) {
            snprintf(err, errlen,
                     "%s:%d: the figures give a %s at %.3g of %s's advertised %s (must be in "
                     "(0, 1])", path, r->line, got[j].what, got[j].v, f->chip.name, got[j].of);
            return -1;
        }
    return 0;
}

int mq_llm_figures_load(const char *path, const char *chips_path, mq_llm_figures *out,
                        char *err, size_t errlen)
{
    void *f;
    int rc = mq_figures_read(path, columns, NCOL, sizeof *out->f, parse_row, (void *)chips_path,
                             &f, &out->n, err, errlen);
    out->f = f;
    return rc;
}

/* Ordinary least squares of log(y) on the descriptions of the fit rows
 * (GSL); which = 0: decode share, 1: prefill efficiency. */
static int fit_one(const mq_llm_figures *lf, int which, double *coef, char *err, size_t errlen)
{
    int n = 0;
    for (int i = 0; i < lf->n; i++)
        n += lf->f[i].role == MQ_TIER_FIT;
    if (n < 2 * MQ_TIER_NX) {
        snprintf(err, errlen, "%d figures with role 'fit' are too few to fit %d coefficients "
                 "(need %d)", n, MQ_TIER_NX, 2 * MQ_TIER_NX);
        return -1;
    }
    gsl_matrix *X = gsl_matrix_alloc((size_t)n, MQ_TIER_NX);
    gsl_matrix *cov = gsl_matrix_alloc(MQ_TIER_NX, MQ_TIER_NX);
    gsl_vector *y = gsl_vector_alloc((size_t)n), *c = gsl_vector_alloc(MQ_TIER_NX);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc((size_t)n, MQ_TIER_NX);
    int rc = -1;
    if (!X || !cov || !y || !c || !w) {
        snprintf(err, errlen, "out of memory fitting the tier functions");
        goto out;
    }
    size_t k = 0;
    for (int i = 0; i < lf->n; i++) {
        const mq_llm_figure *f = &lf->f[i];
        if (f->role != MQ_TIER_FIT)
            continue;
        double x[MQ_TIER_NX];
        (void)mq_tier_describe(&f->chip, x); /* the loader checked it */
        for (int j = 0; j < MQ_TIER_NX; j++)
            gsl_matrix_set(X, k, (size_t)j, x[j]);
        gsl_vector_set(y, k++, log(which ? mq_llm_figure_eff(f) : mq_llm_figure_share(f)));
    }
    double chisq;
    size_t rank;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int st = gsl_multifit_linear_tsvd(X, y, 1e-10, c, cov, &chisq, &rank, w);
    gsl_set_error_handler(old);
    if (st != GSL_SUCCESS || rank < MQ_TIER_NX) {
        snprintf(err, errlen, "the 'fit' figures do not pin down the %s function (rank %zu of "
                 "%d: they need chips of several bandwidths, core counts, generations and an "
                 "Ultra)", which ? "prefill" : "decode", rank, MQ_TIER_NX);
        goto out;
    }
    for (int j = 0; j < MQ_TIER_NX; j++)
        coef[j] = gsl_vector_get(c, (size_t)j);
    rc = 0;
out:
    if (w)
        gsl_multifit_linear_free(w);
    gsl_matrix_free(X);
    gsl_matrix_free(cov);
    gsl_vector_free(y);
    gsl_vector_free(c);
    return rc;
}

int mq_tiers_fit(const mq_llm_figures *lf, mq_tiers *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (fit_one(lf, 0, t->share, err, errlen) || fit_one(lf, 1, t->eff, err, errlen))
        return -1;
    for (int i = 0; i < lf->n; i++)
        t->nfit += lf->f[i].role == MQ_TIER_FIT;
    return 0;
}

void mq_tiers_predict(const mq_tiers *t, const double x[MQ_TIER_NX], double *share, double *eff)
{
    double ls = 0, le = 0;
    for (int j = 0; j < MQ_TIER_NX; j++) {
        ls += t->share[j] * x[j];
        le += t->eff[j] * x[j];
    }
    *share = fmin(1.0, exp(ls));
    *eff = fmin(1.0, exp(le));
}

void mq_tiers_relative(const mq_tiers *t, const double x[MQ_TIER_NX],
                       const double xref[MQ_TIER_NX], double *bw_rel, double *prefill_rel)
{
    double s, e, sr, er;
    mq_tiers_predict(t, x, &s, &e);
    mq_tiers_predict(t, xref, &sr, &er);
    *bw_rel = fmin(1.0, s / sr);
    *prefill_rel = fmin(1.0, e / er);
}
