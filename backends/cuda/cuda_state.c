/* cuda_state.c - the cuda backend's lowest layer (cuda_state.h): the
 * failure rule every driver call goes through, device buffers grown on
 * demand, and the weight sets uploaded once and kept resident. Apart from
 * cuda.c because the MoE block (cuda_moe.c), the probes and the compiler
 * (cuda_compile.c) need them too, and none of those may call back into
 * cuda.c (tests/check_cycles.sh). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_state.h"

mq_status mq_cuda_fail(cuda_state *s, mq_error *err, CUresult r, const char *what)
{
    if (r == 700 || r == 719 || r == 714 || r == 715 || r == 716 || r == 717 || r == 718)
        /* illegal address, launch failure, exceptions: the context is gone */
        snprintf(s->broken, sizeof s->broken, "%s: %s (the CUDA context is lost; restart)", what,
                 mq_cuda_error(&s->api, r));
    return mq_fail(err, MQ_E_ARG, "cuda: %s: %s", what, mq_cuda_error(&s->api, r));
}

mq_status mq_cuda_ensure(cuda_state *s, dbuf *b, size_t n, mq_error *err)
{
    if (n == 0)
        n = 16;
    if (b->p && b->n >= n)
        return MQ_OK;
    if (b->p)
        s->api.MemFree(b->p);
    b->p = 0;
    b->n = 0;
    CU(s->api.MemAlloc(&b->p, n), "cuMemAlloc");
    b->n = n;
    return MQ_OK;
}

void mq_cuda_free_weights(cuda_state *s, weight_entry *e)
{
    for (int j = 0; j < MQ_MSL_W_COUNT; j++)
        if (e->buf[j])
            s->api.MemFree(e->buf[j]);
    memset(e, 0, sizeof *e);
}

weight_entry *mq_cuda_weights_for(cuda_state *s, const mq_weights *w, mq_error *err)
{
    uint64_t print = mq_msl_weights_print(w);
    for (int i = 0; i < s->nweights; i++)
        if (s->weights[i].w == w && s->weights[i].print == print)
            return &s->weights[i];
    weight_entry *e;
    if (s->nweights < MQ_CUDA_MAX_WEIGHTS) {
        e = &s->weights[s->nweights++];
    } else {
        e = &s->weights[s->next_weight];
        s->next_weight = (s->next_weight + 1) % MQ_CUDA_MAX_WEIGHTS;
    }
    mq_cuda_free_weights(s, e);
    const void *ptr[MQ_MSL_W_COUNT];
    size_t bytes[MQ_MSL_W_COUNT];
    mq_msl_weight_arrays(w, ptr, bytes);
    for (int i = 0; i < MQ_MSL_W_COUNT; i++) {
        if (!ptr[i])
            continue;
        CUresult r = s->api.MemAlloc(&e->buf[i], bytes[i]);
        if (!r)
            r = s->api.MemcpyHtoD(e->buf[i], ptr[i], bytes[i]);
        if (r) {
            mq_cuda_fail(s, err, r, "uploading the weights");
            mq_cuda_free_weights(s, e);
            return NULL;
        }
    }
    e->w = w;
    e->print = print;
    return e;
}
