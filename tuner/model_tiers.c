/* model_tiers.c - `model tiers` (see model_cmd.h): the Apple chips' decode
 * share of bandwidth and prefill share of FP16 peak, fitted on public
 * whole-model figures as functions of the chip's description
 * (chip_tiers.h), checked on the figures held out of the fit, and held
 * against the values the chips file gives every Apple chip. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chip_tiers.h"
#include "cli.h"
#include "model_cmd.h"

/* The held-out targets: this share of the check figures within this factor
 * of the function's prediction, and each tier's geometric-mean factor too. */
#define TIER_WITHIN 1.2
#define TIER_SHARE_WITHIN 0.9

static const char *const tier_names[] = {"base", "pro", "max", "ultra"};
#define NTIER 4

static int tier_index(const mq_chip *c)
{
    const char *t = mq_tier_label(c);
    for (int i = 0; i < NTIER; i++)
        if (!strcmp(t, tier_names[i]))
            return i;
    return -1;
}

/* Every figure: achieved and predicted rates; the held-out summary. Returns
 * 1 when the held-out targets are missed. */
static int report_figures(const mq_llm_figures *lf, const mq_tiers *t)
{
    printf("  %-10s %-5s %-5s %9s %9s %6s %9s %9s %6s\n", "chip", "tier", "role", "tg t/s",
           "pred", "ratio", "pp t/s", "pred", "ratio");
    int nchk = 0, within = 0;
    double tier_log[NTIER][2] = {{0}}, worst = 1;
    int tier_n[NTIER] = {0};
    for (int i = 0; i < lf->n; i++) {
        const mq_llm_figure *f = &lf->f[i];
        double x[MQ_TIER_NX], share, eff;
        (void)mq_tier_describe(&f->chip, x);
        mq_tiers_predict(t, x, &share, &eff);
        double r_tg = share / mq_llm_figure_share(f), r_pp = eff / mq_llm_figure_eff(f);
        printf("  %-10s %-5s %-5s %9.2f %9.2f %5.3fx %9.2f %9.2f %5.3fx\n", f->chip.name,
               mq_tier_label(&f->chip), f->role == MQ_TIER_FIT ? "fit" : "check",
               f->decode_tps, r_tg * f->decode_tps, r_tg, f->prefill_tps,
               r_pp * f->prefill_tps, r_pp);
        if (f->role != MQ_TIER_CHECK)
            continue;
        int k = tier_index(&f->chip);
        double r[2] = {r_tg, r_pp};
        for (int j = 0; j < 2; j++) {
            double dev = r[j] > 1 ? r[j] : 1 / r[j];
            nchk++;
            within += dev <= TIER_WITHIN;
            worst = dev > worst ? dev : worst;
            if (k >= 0)
                tier_log[k][j] += log(r[j]);
        }
        if (k >= 0)
            tier_n[k]++;
    }
    int miss = nchk == 0 || within < TIER_SHARE_WITHIN * nchk;
    printf("held out: %d of %d predictions (decode and prefill) within %.1fx, worst %.3fx\n",
           within, nchk, TIER_WITHIN, worst);
    for (int k = 0; k < NTIER; k++) {
        if (!tier_n[k])
            continue;
        double g_tg = exp(tier_log[k][0] / tier_n[k]), g_pp = exp(tier_log[k][1] / tier_n[k]);
        printf("  %-5s %d held out: geometric-mean ratio decode %.3fx, prefill %.3fx\n",
               tier_names[k], tier_n[k], g_tg, g_pp);
        for (int j = 0; j < 2; j++) {
            double g = j ? g_pp : g_tg;
            miss |= (g > 1 ? g : 1 / g) > TIER_WITHIN;
        }
    }
    return miss;
}

/* Every Apple chip of the chips file: the functions' shares, and their
 * values relative to the reference chip against the file's decode_bw_rel and
 * prefill_rel. Returns 1 when any differs by more than the file's three
 * decimals, 2 when the reference chip is missing. */
static int report_chips(const mq_chip_db *db, const mq_tiers *t)
{
    double xref[MQ_TIER_NX];
    int ref = -1;
    for (int i = 0; i < db->n && ref < 0; i++)
        if (!strcmp(db->chips[i].name, MQ_TIER_REFERENCE) &&
            mq_tier_describe(&db->chips[i], xref) == 0)
            ref = i;
    if (ref < 0) {
        fprintf(stderr, "model: %s: no Apple chip '%s' (the chip the relative rates are "
                "relative to)\n", db->path, MQ_TIER_REFERENCE);
        return 2;
    }
    int differ = 0;
    printf("chips file %s: the functions' decode share and prefill efficiency, and relative "
           "to %s\n(decode_bw_rel, prefill_rel: min(1, f / f(%s)), three decimals):\n",
           db->path, MQ_TIER_REFERENCE, MQ_TIER_REFERENCE);
    printf("  %-10s %-5s %6s %6s %8s %8s\n", "chip", "tier", "share", "eff", "bw_rel",
           "pp_rel");
    for (int i = 0; i < db->n; i++) {
        const mq_chip *c = &db->chips[i];
        double x[MQ_TIER_NX], share, eff, bw_rel, pp_rel;
        if (mq_tier_describe(c, x))
            continue;
        mq_tiers_predict(t, x, &share, &eff);
        mq_tiers_relative(t, x, xref, &bw_rel, &pp_rel);
        double have_b = c->v[MQ_CHIP_DECODE_BW_REL], have_p = c->v[MQ_CHIP_PREFILL_REL];
        int ok = fabs(have_b - bw_rel) <= 0.0005 + 1e-9 && fabs(have_p - pp_rel) <= 0.0005 + 1e-9;
        differ |= !ok;
        printf("  %-10s %-5s %6.3f %6.3f %8.3f %8.3f", c->name, mq_tier_label(c), share, eff,
               bw_rel, pp_rel);
        if (ok)
            printf("\n");
        else
            printf("   the file says %.3f %.3f: update it\n", have_b, have_p);
    }
    return differ;
}

int mq_model_tiers_cmd(const char *const *files, int nfiles, const char *chips_path)
{
    if (nfiles != 1)
        return mq_cli_fail("model", "tiers takes one figures file", "");
    mq_llm_figures lf;
    char err[4400];
    if (mq_llm_figures_load(files[0], chips_path, &lf, err, sizeof err)) {
        fprintf(stderr, "model: %s\n", err);
        return 2;
    }
    mq_tiers t;
    if (mq_tiers_fit(&lf, &t, err, sizeof err)) {
        fprintf(stderr, "model: %s: %s\n", files[0], err);
        mq_llm_figures_free(&lf);
        return 2;
    }
    mq_chip_db db;
    if (mq_chips_load(chips_path, &db, err, sizeof err)) {
        fprintf(stderr, "model: %s\n", err);
        mq_llm_figures_free(&lf);
        return 2;
    }
    printf("llm figures %s: %d (%d fit, %d check)\n", files[0], lf.n, t.nfit, lf.n - t.nfit);
    static const char *const xname[MQ_TIER_NX] = {"1", "log2 GB/s", "log2 cores", "ultra",
                                                 "gen-13"};
    for (int w = 0; w < 2; w++) {
        printf("log %s =", w ? "prefill_eff" : "decode_bw_share");
        for (int j = 0; j < MQ_TIER_NX; j++)
            printf(" %+.4f x %s", w ? t.eff[j] : t.share[j], xname[j]);
        printf("\n");
    }
    int rc = report_figures(&lf, &t), chips_rc = report_chips(&db, &t);
    rc = chips_rc == 2 ? 2 : rc | chips_rc;
    printf("sources:\n");
    for (int i = 0; i < lf.n; i++)
        printf("  line %d: %s\n", lf.f[i].line, lf.f[i].source);
    mq_chips_free(&db);
    mq_llm_figures_free(&lf);
    return rc;
}
