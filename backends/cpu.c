/* cpu.c - the CPU model as a backend: mq_gemm of the runtime library on a
 * context of worker threads (one per core unless told otherwise). Its times
 * are this machine's (the chip 'host'), never an Apple GPU's. */
#include <stdlib.h>

#include "backend.h"

static mq_status cpu_run(mq_backend *b, const mq_problem *p, const mq_weights *w,
                         const uint16_t *A, float *C, const mq_candidate *c, const mq_limits *lim,
                         mq_error *err)
{
    return mq_gemm((mq_ctx *)b->state, p, w, A, C, c, lim, err);
}

static void cpu_close(mq_backend *b)
{
    mq_ctx_destroy((mq_ctx *)b->state);
    free(b);
}

mq_backend *mq_backend_cpu_open(const mq_backend_opts *o, mq_error *err)
{
    mq_backend *b = calloc(1, sizeof *b);
    mq_ctx *ctx = NULL;
    if (!b) {
        mq_fail(err, MQ_E_NOMEM, "unavailable: out of memory for the CPU backend");
        return NULL;
    }
    if (mq_ctx_create(o ? o->threads : 0, &ctx, err)) {
        free(b);
        return NULL;
    }
    b->name = "cpu";
    b->threads = mq_ctx_threads(ctx);
    b->run = cpu_run;
    b->close = cpu_close;
    b->state = ctx;
    return b;
}
