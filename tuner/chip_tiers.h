/* chip_tiers.h - how much of its advertised bandwidth and FP16 peak an Apple
 * chip sustains, as functions of the chip's description, fitted on public
 * whole-model figures (harness/llm-figures.csv: llama.cpp's LLaMA-2 7B Q4_0
 * prefill and decode rates per chip, each with its source).
 *
 * Why: the cost model prices a GEMM from the chip's bandwidth and peak. Taken
 * as advertised, every chip would reach the same share of them, where public
 * measurements show base chips reaching about 0.8 of their bandwidth on a
 * decode, Max chips about 0.6 and Ultra chips about 0.4.
 *
 * Whole-model rates include what a token spends outside its GEMMs, so the
 * cost model takes these functions relative to the chip its default
 * coefficients are fitted on (the M3 Max of harness/public-figures.csv, whose
 * GEMV alone reaches about 0.9 of its bandwidth in MLX's published timing):
 * the chips.csv fields decode_bw_rel and prefill_rel (kernels/cost_model.h)
 * are min(1, f(chip) / f(m3max)). A chip never measured is thus priced
 * slower than the M3 Max where its tier sustains less (Max chips of higher
 * bandwidth, Ultras), never faster than its advertised figures.
 *
 * A figure's achieved share is decode tokens/s x bytes per token / bandwidth,
 * and its efficiency prefill tokens/s x flops per token / FP16 peak (the
 * chips file's figures). Each is fitted as
 *   log(y) = b0 + b1 log2(bandwidth GB/s) + b2 log2(GPU cores) + b3 ultra
 *            + b4 (generation - 13)
 * by least squares (GSL) on the rows with role 'fit'; the rows with role
 * 'check' stay out of the fit and test it. Generation and tier come from the
 * chip's Metal architecture name, applegpu_g<generation><g|s|d> (d: Ultra). */
#ifndef MQ_CHIP_TIERS_H
#define MQ_CHIP_TIERS_H

#include <stddef.h>

#include "chips.h"

enum { MQ_TIER_CHECK, MQ_TIER_FIT };

typedef struct {
    mq_chip chip;
    char workload[64];       /* what was run ("llama2-7b-q4_0") */
    double bytes_per_token;  /* weight bytes a decode token reads */
    double flops_per_token;  /* GEMM flops a prefill token does */
    double prefill_tps, decode_tps;
    int role;                /* MQ_TIER_CHECK or MQ_TIER_FIT */
    char source[300];
    int line;
} mq_llm_figure;

typedef struct {
    mq_llm_figure *f;
    int n;
} mq_llm_figures;

/* Load and validate a figures file against the chips file: every chip known
 * and an Apple GPU (an applegpu_g<N><g|s|d> arch), rates and per-token
 * counts positive, a role and a source on every row. -1 and
 * "PATH:LINE: problem" on error. */
int mq_llm_figures_load(const char *path, const char *chips_path, mq_llm_figures *out,
                        char *err, size_t errlen);
void mq_llm_figures_free(mq_llm_figures *lf);

#define MQ_TIER_NX 5
/* A chip's description as the functions read it: 1, log2 bandwidth, log2
 * cores, ultra (0/1), generation - 13. -1 when the chip is not an Apple GPU
 * (no applegpu_g<N><g|s|d> arch: host, NVIDIA). */
int mq_tier_describe(const mq_chip *c, double x[MQ_TIER_NX]);
/* "base", "pro/max" or "ultra" (arch tier letter g, s, d); "" otherwise.
 * Pro and Max share Metal's tier letter; mq_tier_label names them apart by
 * the chip's name where it says so. */
const char *mq_tier_label(const mq_chip *c);

typedef struct {
    double share[MQ_TIER_NX], eff[MQ_TIER_NX]; /* coefficients of log share, log eff */
    int nfit;
} mq_tiers;

/* A figure's achieved decode share of bandwidth and prefill share of peak. */
double mq_llm_figure_share(const mq_llm_figure *f);
double mq_llm_figure_eff(const mq_llm_figure *f);

/* Fit both functions on the 'fit' rows. -1 and why when they are fewer than
 * 2 x MQ_TIER_NX or the fit fails. */
int mq_tiers_fit(const mq_llm_figures *lf, mq_tiers *t, char *err, size_t errlen);
/* The functions' share and efficiency for a description, each in (0, 1]. */
void mq_tiers_predict(const mq_tiers *t, const double x[MQ_TIER_NX], double *share,
                      double *eff);

/* The chip the relative rates are relative to (the default coefficients'). */
#define MQ_TIER_REFERENCE "m3max"
/* A description's rates relative to the reference's, each min(1, f(x) /
 * f(ref)): the chips file's decode_bw_rel and prefill_rel. */
void mq_tiers_relative(const mq_tiers *t, const double x[MQ_TIER_NX],
                       const double xref[MQ_TIER_NX], double *bw_rel, double *prefill_rel);

#endif
