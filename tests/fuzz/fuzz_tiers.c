/* fuzz_tiers.c - a whole-model figures file (mq_llm_figures_load, then the
 * tier fit and the predictions on what loaded): every loaded figure is an
 * Apple chip's, with positive finite rates, a share and efficiency in (0, 1]
 * and a source; a fit that succeeds predicts shares in (0, 1]. */
#include <math.h>
#include <stdlib.h>

#include "chip_tiers.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("llm-figures.csv", data, size);
    mq_llm_figures lf;
    char err[1024];
    if (!path || mq_llm_figures_load(path, mq_chips_default_path(), &lf, err, sizeof err))
        return 0;
    for (int i = 0; i < lf.n; i++) {
        const mq_llm_figure *f = &lf.f[i];
        double s = mq_llm_figure_share(f), e = mq_llm_figure_eff(f), x[MQ_TIER_NX];
        if (!(s > 0 && s <= 1) || !(e > 0 && e <= 1) || !f->source[0] ||
            mq_tier_describe(&f->chip, x))
            abort();
    }
    mq_tiers t;
    if (mq_tiers_fit(&lf, &t, err, sizeof err) == 0)
        for (int i = 0; i < lf.n; i++) {
            double x[MQ_TIER_NX], s, e;
            mq_tier_describe(&lf.f[i].chip, x);
            mq_tiers_predict(&t, x, &s, &e);
            if (!(s > 0 && s <= 1) || !(e > 0 && e <= 1))
                abort();
        }
    mq_llm_figures_free(&lf);
    return 0;
}
