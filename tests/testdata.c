/* testdata.c - see testdata.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testdata.h"

float td_uniform(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / 8388608.0f - 1.0f;
}

void td_fill_weights(float *W, int K, int N, uint32_t seed)
{
    for (long i = 0; i < (long)K * N; i++)
        W[i] = td_uniform(&seed) * 0.1f;
}

void td_fill_activations(uint16_t *A, int M, int K, uint32_t seed)
{
    for (long i = 0; i < (long)M * K; i++)
        A[i] = mq_float_to_half(td_uniform(&seed));
}

long td_count_outside_bound(const float *C, const double *ref, const double *absref,
                            long count, int K, double *worst_ratio)
{
    long bad = 0;
    double worst = 0;
    const double u = ldexp(1.0, -24);
    for (long i = 0; i < count; i++) {
        double bound = (2.0 * K + 3) * u * absref[i] + 1e-30;
        double err = fabs((double)C[i] - ref[i]);
        if (!(err <= bound)) /* also catches NaN */
            bad++;
        if (!(err / bound <= worst))
            worst = err / bound;
    }
    *worst_ratio = worst;
    return bad;
}

mq_chip td_toy_chip(void)
{
    mq_chip c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "toy5");
    double v[MQ_CHIP_NFIELDS] = {5, 8192, 256, 32, 4, 100, 1, 1, 0, 0};
    memcpy(c.v, v, sizeof v);
    return c;
}
