/* public_figures.h - published timings of quantized GEMMs on chips this
 * project cannot run on (harness/public-figures.csv: each with its source),
 * and what the cost model makes of them: the coefficients a chip that was
 * never measured starts from are fitted on the figures marked "fit"; the
 * figures marked "check" stay out of that fit and test it, each on its
 * predicted time and, where one problem has several figures, on whether
 * the model ranks them as the published measurements do (e.g. MLX's
 * split-K against its plain qmm). */
#ifndef MQ_PUBLIC_FIGURES_H
#define MQ_PUBLIC_FIGURES_H

#include <stddef.h>

#include "chips.h"
#include "model.h"

enum { MQ_PUBLIC_CHECK, MQ_PUBLIC_FIT, MQ_PUBLIC_COMPARE };

typedef struct {
    mq_chip chip;
    mq_problem p;
    int best;          /* the candidate is the model's best legal one (a figure of
                        * another implementation: what a good kernel reaches) */
    mq_candidate c;    /* when !best */
    double published_s;
    int role;          /* MQ_PUBLIC_CHECK, _FIT or _COMPARE */
    char source[300];
    int line;
} mq_public_figure;

typedef struct {
    mq_public_figure *f;
    int n;
} mq_public_figures;

/* Load and validate a figures file against the chips file: every chip
 * known, every shape and candidate legal on its chip, times > 0, a role and
 * a source on every row. -1 and "PATH:LINE: problem" on error. */
int mq_public_figures_load(const char *path, const char *chips_path, mq_public_figures *out,
                           char *err, size_t errlen);
void mq_public_figures_free(mq_public_figures *pf);

/* The terms the figures fit (by model.csv name); every other coefficient
 * keeps the value it has in m. */
extern const char *const mq_public_fit_terms[];
#define MQ_PUBLIC_NFIT 2

/* Fit those terms on the "fit" figures (relative least squares, GSL;
 * coefficients >= 0; a "best" figure's candidate is re-chosen with each
 * fit until the choice stops changing). 0, or -1 with a message. */
int mq_public_fit(const mq_public_figures *pf, mq_model *m, char *err, size_t errlen);

/* The model's time for figure i (with m, on the figure's chip) and, for a
 * "best" figure, the candidate it chose. -1 when nothing is legal. */
double mq_public_predict(const mq_public_figure *f, const mq_model *m, mq_candidate *chosen);

#endif
