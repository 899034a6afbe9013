/* msl_cpu.c - the msl-cpu backend: a candidate's Metal kernels, from the
 * very source the Metal backend compiles (metal/, the same macros), run on
 * the MSL executor (msl_exec.h) and read back as the Metal backend reads
 * them (C as FP16). It verifies; it does not time: the executor's speed
 * says nothing of a GPU's, so the harness takes no samples from it
 * (verify_only) and the tools say so. Needs a C++ compiler at run time
 * (clang++ or g++, or $MQ_MSL_CXX); compiled kernels are cached
 * ($MQ_MSL_CACHE, else ~/.cache/mq-msl). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "msl_exec.h"
#include "msl_program.h"

#define MAX_MODULES 128

typedef struct {
    char key[256];
    mq_msl_module *m;
} module_entry;

typedef struct {
    module_entry mods[MAX_MODULES];
    int nmods, next;
    int workers;
} msl_cpu_state;

static mq_msl_module *module_for(msl_cpu_state *s, const char *file, const char *defines,
                                 mq_error *err)
{
    char key[256], msg[1024];
    snprintf(key, sizeof key, "%s %s", file, defines);
    for (int i = 0; i < s->nmods; i++)
        if (!strcmp(s->mods[i].key, key))
            return s->mods[i].m;
    mq_msl_module *m = mq_msl_module_load(file, NULL, defines, NULL, msg, sizeof msg);
    if (!m) {
        mq_fail(err, MQ_E_ARG, "msl-cpu: %s", msg);
        return NULL;
    }
    module_entry *e;
    if (s->nmods < MAX_MODULES) {
        e = &s->mods[s->nmods++];
    } else { /* a long sweep: the oldest module leaves (nothing holds it) */
        e = &s->mods[s->next];
        s->next = (s->next + 1) % MAX_MODULES;
        mq_msl_module_free(e->m);
    }
    snprintf(e->key, sizeof e->key, "%s", key);
    e->m = m;
    return m;
}

/* A device buffer holding a copy of n bytes (NULL src: filled with fill). */
static int upload(mq_msl_buffer *b, const void *src, size_t n, int fill, mq_error *err)
{
    char msg[256];
    if (mq_msl_buffer_alloc(b, n, msg, sizeof msg)) {
        mq_fail(err, MQ_E_NOMEM, "msl-cpu: %s", msg);
        return -1;
    }
    if (src)
        memcpy(b->data, src, n);
    else
        memset(b->data, fill, n);
    return 0;
}

/* A run's buffers: A, C, the params, the workspace, then the weight
 * arrays by mq_msl_weight_slot (backends/msl_program.h). */
enum { B_A, B_C, B_P, B_WS, B_W, B_COUNT = B_W + MQ_MSL_W_COUNT };

static mq_status msl_cpu_run(mq_backend *b, const mq_problem *p, const mq_weights *w,
                             const uint16_t *A, float *C, const mq_candidate *c,
                             const mq_plan *planned, mq_error *err)
{
    msl_cpu_state *s = b->state;
    mq_msl_run_plan rp;
    mq_status st = mq_msl_run_plan_of(p, c, planned, w, &rp, err);
    if (st)
        return st;
    const mq_plan *plan = rp.plan;
    char msg[1024];
    mq_msl_module *gemm = module_for(s, rp.file, rp.defines, err);
    mq_msl_module *red = gemm && plan->k_slices > 1
                             ? module_for(s, MQ_MSL_REDUCE_FILE, "", err)
                             : NULL;
    if (!gemm || (plan->k_slices > 1 && !red))
        return err->code;

    size_t MN = (size_t)p->M * (size_t)p->N;
    mq_msl_buffer buf[B_COUNT];
    memset(buf, 0, sizeof buf);
    mq_msl_params mp;
    mq_msl_params_of(p, plan, w, &mp);
    int bad = upload(&buf[B_A], A, (size_t)p->M * (size_t)p->K * 2, 0, err) ||
              upload(&buf[B_P], &mp, sizeof mp, 0, err) ||
              /* outputs start as NaN: an element no thread writes cannot pass */
              upload(&buf[B_C], NULL, MN * 2, 0xff, err) ||
              upload(&buf[B_WS], NULL, plan->workspace_bytes ? plan->workspace_bytes : 16, 0xff, err);
    const void *ptr[MQ_MSL_W_COUNT];
    size_t bytes[MQ_MSL_W_COUNT];
    mq_msl_weight_arrays(w, ptr, bytes);
    for (int i = 0; !bad && i < MQ_MSL_W_COUNT; i++)
        bad = ptr[i] && upload(&buf[B_W + i], ptr[i], bytes[i], 0, err);
    if (!bad) {
        /* the binding of metal.c: A, weights, scales, C, params, then the
         * variant's own buffers from index 5 */
        mq_msl_launch l = {{&buf[B_A], NULL, NULL, &buf[B_C], &buf[B_P]},
                           {(unsigned)plan->grid_x, (unsigned)plan->grid_y, (unsigned)plan->grid_z},
                           {(unsigned)plan->threads_per_tg, 1, 1},
                           s->workers,
                           0};
        for (int i = 0; i < rp.nbind; i++) /* the weights and the variant's own buffers */
            if (rp.bind[i] != MQ_MSL_BIND_OWN)
                l.buffers[i] = rp.bind[i] == MQ_MSL_BIND_WORKSPACE ? &buf[B_WS] : &buf[B_W + rp.bind[i]];
        if (mq_msl_run(gemm, rp.function, &l, msg, sizeof msg)) {
            bad = 1;
            mq_fail(err, MQ_E_ARG, "msl-cpu: %s", msg);
        } else if (red) { /* the reduction, after the GEMM as in one command buffer */
            mq_msl_launch r = {{&buf[B_WS], &buf[B_C], &buf[B_P]},
                               {(unsigned)((MN + 255) / 256), 1, 1},
                               {256, 1, 1},
                               s->workers,
                               0};
            if (mq_msl_run(red, MQ_MSL_REDUCE_FUNCTION, &r, msg, sizeof msg)) {
                bad = 1;
                mq_fail(err, MQ_E_ARG, "msl-cpu: %s", msg);
            }
        }
    }
    if (!bad) {
        const uint16_t *out = buf[B_C].data;
        for (size_t i = 0; i < MN; i++)
            C[i] = mq_half_to_float(out[i]);
    }
    for (int i = 0; i < B_COUNT; i++)
        mq_msl_buffer_free(&buf[i]);
    return bad ? (err->code ? err->code : MQ_E_ARG) : MQ_OK;
}

/* Steps of the MoE block on the executor (the fused dispatches or the
 * unfused baseline's plan): the first nbuf buffers made (weight fields in
 * the kernel's layout, the inputs copied, buffer own_buf the plan's own
 * parameters dparams (the unfused dense launches' or the lane kernels'; -1:
 * none), everything else poisoned with NaN but the lane plan's tile
 * counters, zeroed), each step run in order, the counters checked back at
 * zero, out read back. */
static mq_status moe_exec(msl_cpu_state *s, const mq_moe_weights *mw, const void *const in[4],
                          const size_t *bytes, int nbuf, const mq_msl_moe_step *steps,
                          int nsteps, int own_buf, const void *dparams, size_t dparams_bytes,
                          const mq_msl_moe_plan *lane_plan, float *out, mq_error *err)
{
    mq_msl_buffer buf[MQ_MSL_MOE_NBUF];
    memset(buf, 0, sizeof buf);
    int bad = 0;
    char msg[1024];
    for (int i = 0; i < nbuf && !bad; i++) {
        int field = mq_msl_moe_is_field(i) && bytes[i];
        int own = i == own_buf;
        const void *src = i < 4 ? in[i] : own ? dparams : NULL;
        size_t n = own ? dparams_bytes : bytes[i];
        bad = upload(&buf[i], src, n ? n : 16, 0xff, err);
        if (!bad && field)
            bad = mq_msl_moe_field(mw, (mq_msl_moe_buffer)i, buf[i].data, err) != MQ_OK;
    }
    const size_t counters = lane_plan && nbuf > MQ_MSL_MOE_LWORK ? lane_plan->lwork_counters : 0;
    if (!bad && counters)
        memset(buf[MQ_MSL_MOE_LWORK].data, 0, counters);
    for (int k = 0; k < nsteps && !bad; k++) {
        const mq_msl_moe_step *sp = &steps[k];
        mq_msl_module *m = module_for(s, sp->file, sp->defines, err);
        if (!m) {
            bad = 1;
            break;
        }
        mq_msl_buffer view[8];
        mq_msl_launch l;
        memset(&l, 0, sizeof l);
        for (int i = 0; i < (sp->dense ? sp->nbind : nbuf); i++) {
            if (sp->dense) { /* buffer(i): a view from off[i] to the end of its buffer */
                view[i] = buf[sp->bind[i]];
                view[i].data = (char *)view[i].data + sp->off[i];
                view[i].bytes -= sp->off[i];
                l.buffers[i] = &view[i];
            } else {
                l.buffers[i] = &buf[i];
            }
        }
        memcpy(l.grid, sp->grid, sizeof l.grid);
        l.threads[0] = sp->threads;
        l.threads[1] = l.threads[2] = 1;
        l.workers = s->workers;
        if (mq_msl_run(m, sp->function, &l, msg, sizeof msg)) {
            bad = 1;
            mq_fail(err, MQ_E_ARG, "msl-cpu: %s: %s", sp->function, msg);
        }
    }
    if (!bad && counters)
        bad = mq_msl_moe_counters_check(lane_plan, buf[MQ_MSL_MOE_LWORK].data, err) != MQ_OK;
    if (!bad)
        memcpy(out, buf[MQ_MSL_MOE_OUT].data, bytes[MQ_MSL_MOE_OUT]);
    for (int i = 0; i < MQ_MSL_MOE_NBUF; i++)
        mq_msl_buffer_free(&buf[i]);
    return bad ? (err->code ? err->code : MQ_E_ARG) : MQ_OK;
}

static mq_status msl_cpu_run_moe(mq_backend *b, const mq_moe_problem *p,
                                 const mq_moe_weights *mw, const uint16_t *x, const int32_t *ids,
                                 const float *probs, float *out, const mq_moe_candidate *c,
                                 const mq_limits *lim, mq_error *err)
{
    mq_msl_moe_plan plan;
    mq_status st = mq_moe_routing_check(p, ids, probs, err);
    if (st || (st = mq_msl_moe_plan_of(p, mw, c, lim, &plan, err)))
        return st;
    mq_msl_moe_step steps[MQ_MSL_MOE_DISPATCHES];
    memset(steps, 0, sizeof steps);
    for (int k = 0; k < plan.nd; k++) {
        steps[k].file = plan.d[k].file;
        steps[k].function = plan.d[k].function;
        snprintf(steps[k].defines, sizeof steps[k].defines, "%s", plan.d[k].defines);
        memcpy(steps[k].grid, plan.d[k].grid, sizeof steps[k].grid);
        steps[k].threads = plan.d[k].threads;
    }
    const void *in[4] = {x, ids, probs, &plan.mp};
    return moe_exec(b->state, mw, in, plan.bytes, plan.nbuf, steps, plan.nd,
                    plan.nbuf > MQ_MSL_MOE_LPARAMS ? MQ_MSL_MOE_LPARAMS : -1, plan.lane,
                    sizeof plan.lane, &plan, out, err);
}

static mq_status msl_cpu_run_moe_unfused(mq_backend *b, const mq_moe_problem *p,
                                         const mq_moe_weights *mw, const uint16_t *x,
                                         const int32_t *ids, const float *probs, float *out,
                                         const mq_table *dense, mq_error *err)
{
    mq_msl_moe_unfused u;
    mq_status st = mq_moe_routing_check(p, ids, probs, err);
    if (st || (st = mq_msl_moe_unfused_plan(p, mw, ids, dense, &u, err)))
        return st;
    const void *in[4] = {x, ids, probs, &u.base.mp};
    st = moe_exec(b->state, mw, in, u.base.bytes, MQ_MSL_MOE_NBUF, u.steps, u.nsteps, MQ_MSL_MOE_DPARAMS,
                  u.dparams, u.dparams_bytes, NULL, out, err);
    mq_msl_moe_unfused_free(&u);
    return st;
}

static void msl_cpu_close(mq_backend *b)
{
    msl_cpu_state *s = b->state;
    for (int i = 0; s && i < s->nmods; i++)
        mq_msl_module_free(s->mods[i].m);
    free(s);
    free(b);
}

mq_backend *mq_backend_msl_cpu_open(const mq_backend_opts *o, mq_error *err)
{
    const char *cxx = mq_msl_cxx(NULL);
    if (!cxx) {
        mq_fail(err, MQ_E_SYSTEM,
                "unavailable: no C++ compiler to build the Metal kernels (install clang or g++, "
                "or set MQ_MSL_CXX)");
        return NULL;
    }
    msl_cpu_state *s = calloc(1, sizeof *s);
    mq_backend *b = calloc(1, sizeof *b);
    if (!s || !b) {
        free(s);
        free(b);
        mq_fail(err, MQ_E_NOMEM, "unavailable: out of memory");
        return NULL;
    }
    s->workers = o ? o->threads : 0;
    b->name = "msl-cpu";
    b->verify_only = 1;
    /* the Metal kernels' arithmetic: FP16 weights, FP16 C (metal/mq_metal.h) */
    b->arith = (mq_backend_arith){.half_weights = 1, .half_output = 1};
    snprintf(b->device, sizeof b->device, "MSL executor on the CPU (%s)", cxx);
    b->threads = s->workers;
    b->run = msl_cpu_run;
    b->run_moe = msl_cpu_run_moe;
    b->run_moe_unfused = msl_cpu_run_moe_unfused;
    b->close = msl_cpu_close;
    b->state = s;
    return b;
}
