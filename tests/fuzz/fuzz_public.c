/* fuzz_public.c - a published-figures file (mq_public_figures_load, then
 * the fit and the predictions on what loaded): every loaded figure has a
 * positive finite time, a known role and a source, and the fit leaves
 * finite, non-negative coefficients. */
#include <math.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "public_figures.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("public-figures.csv", data, size);
    mq_public_figures pf;
    char err[1024];
    if (!path || mq_public_figures_load(path, mq_chips_default_path(), &pf, err, sizeof err))
        return 0;
    for (int i = 0; i < pf.n; i++) {
        const mq_public_figure *f = &pf.f[i];
        if (!(f->published_s > 0) || !isfinite(f->published_s) || f->role < MQ_PUBLIC_CHECK ||
            f->role > MQ_PUBLIC_COMPARE || !f->source[0])
            abort();
    }
    static mq_model m;
    mq_model_defaults(&m);
    if (pf.n <= 8 && mq_public_fit(&pf, &m, err, sizeof err) == 0)
        for (int j = 0; j < MQ_MODEL_NTERM; j++)
            if (!isfinite(m.theta[j]) || m.theta[j] < 0)
                abort();
    mq_public_figures_free(&pf);
    return 0;
}
