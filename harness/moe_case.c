/* moe_case.c - see moe_case.h: one case of moe-bench set up, its
 * reference made, and each candidate verified against it, then timed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_case.h"
#include "probes.h"

uint64_t mq_moe_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The sampled tokens: first, middle, last (distinct). */
static void case_samples(mq_moe_case *mc)
{
    const mq_moe_problem *p = mc->p;
    int cand[3] = {0, p->tokens / 2, p->tokens - 1};
    mc->nsample = 0;
    for (int i = 0; i < 3; i++) {
        int dup = 0;
        for (int j = 0; j < mc->nsample; j++)
            dup |= mc->sample[j] == cand[i];
        if (!dup)
            mc->sample[mc->nsample++] = cand[i];
    }
}

int mq_moe_case_arith(const mq_moe_case *mc, const mq_moe_candidate *c)
{
    if (!c) /* the dense kernels' FP16 weights and outputs (a device) */
        return mc->half_mid ? MQ_MOE_HALF_WEIGHTS | MQ_MOE_HALF_STORES : 0;
    /* the lane block decodes its levels as FP16; the seed block in FP32 */
    return mq_variant_get(c->inner.variant)->layout == MQ_LAYOUT_LANE ? MQ_MOE_HALF_WEIGHTS : 0;
}

/* The float64 reference of the sampled tokens of routing r (a sub-problem
 * of those tokens alone: a token's output depends on its row and routing
 * only), and its bound for the path's arithmetic; made once per routing
 * and path. */
int mq_moe_case_reference(mq_moe_case *mc, int r, int arith, char *err, size_t errlen)
{
    if (mc->ref[r] && mc->bound[arith][r])
        return 0;
    const mq_moe_problem *p = mc->p;
    int H = p->hidden, K = p->top_k;
    mq_moe_problem sp = *p;
    sp.tokens = mc->nsample;
    size_t n = (size_t)mc->nsample * H;
    uint16_t *xs = malloc(n * sizeof *xs);
    int32_t *ids = malloc((size_t)3 * K * sizeof *ids);
    float *pr = malloc((size_t)3 * K * sizeof *pr);
    double *ref = malloc(n * sizeof *ref), *bound = malloc(n * sizeof *bound);
    int rc = -1;
    mq_error e;
    snprintf(e.msg, sizeof e.msg, "out of memory");
    if (xs && ids && pr && ref && bound) {
        for (int i = 0; i < mc->nsample; i++) {
            int t = mc->sample[i];
            memcpy(xs + (size_t)i * H, mc->x + (size_t)t * H, (size_t)H * sizeof *xs);
            memcpy(ids + i * K, mc->ids[r] + (size_t)t * K, (size_t)K * sizeof *ids);
            memcpy(pr + i * K, mc->probs[r] + (size_t)t * K, (size_t)K * sizeof *pr);
        }
        rc = mq_moe_reference_arith(&sp, mc->mw, xs, ids, pr, arith, ref, bound, &e) ? -1 : 0;
    }
    if (!rc) {
        if (!mc->ref[r]) {
            mc->ref[r] = ref;
            ref = NULL;
        }
        mc->bound[arith][r] = bound;
        bound = NULL;
    } else {
        snprintf(err, errlen, "the reference of routing %d: %s", r, e.msg);
    }
    free(xs);
    free(ids);
    free(pr);
    free(ref);
    free(bound);
    return rc;
}

/* Outputs of the sampled tokens of routing r outside the bound of the path
 * checked; the worst ratio (made worse only) */
static long case_verify(const mq_moe_case *mc, int r, int arith, double *worst)
{
    long bad = 0;
    int H = mc->p->hidden;
    const double *ref = mc->ref[r];
    const double *bound = mc->bound[arith][r];
    for (int i = 0; i < mc->nsample; i++)
        for (int n = 0; n < H; n++) {
            double got = mc->out[(size_t)mc->sample[i] * H + n];
            double q = fabs(got - ref[(size_t)i * H + n]) / bound[(size_t)i * H + n];
            if (!(q <= 1))
                bad++;
            if (!(q <= *worst))
                *worst = q;
        }
    return bad;
}

/* The fewest rows any touched expert gets in any of the case's routings. */
int mq_moe_case_fewest_rows(const mq_moe_case *mc)
{
    const mq_moe_problem *p = mc->p;
    int fewest = p->tokens * p->top_k;
    int *count = calloc((size_t)p->experts, sizeof *count);
    for (int r = 0; count && r < mc->rotations; r++) {
        memset(count, 0, (size_t)p->experts * sizeof *count);
        for (int i = 0; i < p->tokens * p->top_k; i++)
            count[mc->ids[r][i]]++;
        for (int e = 0; e < p->experts; e++)
            if (count[e] && count[e] < fewest)
                fewest = count[e];
    }
    int ok = count != NULL;
    free(count);
    return ok ? fewest : 1;
}

/* Run once on routing 0 and verify; then time over the rotated routings
 * until the budget is spent (5 repetitions at least, 200 at most): the
 * device's own time where the backend has one, else the wall clock; a
 * verify-only backend (the MSL executor) is not timed ("verified"). c
 * NULL: the unfused baseline. */
void mq_moe_case_measure(mq_backend *b, mq_moe_case *mc, const mq_moe_candidate *c,
                         double budget, mq_moe_meas *m)
{
    mq_error e;
    memset(m, 0, sizeof *m);
    if (c)
        mq_moe_candidate_str(c, m->cand, sizeof m->cand);
    else
        snprintf(m->cand, sizeof m->cand, "unfused[per expert: dense trellis x3 (%s), SwiGLU, sum]",
                 mc->dense ? "tuned per shape in this run" : "the dense rule");
    const mq_moe_problem *p = mc->p;
    const int arith = mq_moe_case_arith(mc, c);
#define RUN(r)                                                                                 \
    (c ? b->run_moe(b, p, mc->mw, mc->x, mc->ids[r], mc->probs[r], mc->out, c, mc->lim, &e)   \
       : b->run_moe_unfused(b, p, mc->mw, mc->x, mc->ids[r], mc->probs[r], mc->out,        \
                            mc->dense, &e))
    char err[300];
    if (mq_moe_case_reference(mc, 0, arith, err, sizeof err)) {
        snprintf(m->status, sizeof m->status, "error");
        snprintf(m->error, sizeof m->error, "%.200s", err);
        return;
    }
    mq_status rs = RUN(0);
    if (rs) { /* MQ_E_WRONG: the run broke what it must leave behind */
        snprintf(m->status, sizeof m->status, rs == MQ_E_WRONG ? "wrong" : "error");
        snprintf(m->error, sizeof m->error, "%s", e.msg);
        return;
    }
    long bad = case_verify(mc, 0, arith, &m->worst);
    if (bad) {
        snprintf(m->status, sizeof m->status, "wrong");
        snprintf(m->error, sizeof m->error,
                 "%ld outputs of the sampled tokens outside the bound (worst %.3g x)", bad,
                 m->worst);
        return;
    }
    if (b->verify_only) {
        snprintf(m->status, sizeof m->status, "verified");
        return;
    }
    double samples[200], t_end = mq_now() + budget;
    int n = 0;
    while (n < 200 && (n < 5 || mq_now() < t_end)) {
        int r = (n + 1) % mc->rotations;
        /* every routing's output is checked too (its reference made once, before its
         * first timed run, outside the timed region) */
        if (mq_moe_case_reference(mc, r, arith, err, sizeof err)) {
            snprintf(m->status, sizeof m->status, "error");
            snprintf(m->error, sizeof m->error, "%.200s", err);
            return;
        }
        double t0 = mq_now();
        if ((rs = RUN(r)) != MQ_OK) { /* a run that fails gets no time */
            snprintf(m->status, sizeof m->status, rs == MQ_E_WRONG ? "wrong" : "error");
            snprintf(m->error, sizeof m->error, "routing %d: %.200s", r, e.msg);
            return;
        }
        double dt = b->device_time ? b->device_time(b) : -1;
        samples[n++] = dt >= 0 ? dt : mq_now() - t0;
        if ((bad = case_verify(mc, r, arith, &m->worst)) != 0) {
            snprintf(m->status, sizeof m->status, "wrong");
            snprintf(m->error, sizeof m->error,
                     "routing %d: %ld outputs of the sampled tokens outside the bound (worst "
                     "%.3g x)", r, bad, m->worst);
            return;
        }
    }
#undef RUN
    mq_stats_compute(samples, n, &m->st);
    snprintf(m->status, sizeof m->status, "ok");
}

int mq_moe_case_setup(mq_moe_case *mc, const mq_moe_problem *p, const mq_moe_weights *mw,
                      const mq_moe_routing_file *rf, mq_route_kind kind, int rotations,
                      const mq_moe_bench_opts *o, int half_mid, const mq_moe_model *md)
{
    const int R = rotations;
    mq_error e;
    snprintf(e.msg, sizeof e.msg, "out of memory");
    memset(mc, 0, sizeof *mc);
    mc->p = p;
    mc->mw = mw;
    mc->rotations = R;
    mc->ids = calloc((size_t)R, sizeof *mc->ids);
    mc->probs = calloc((size_t)R, sizeof *mc->probs);
    mc->x = malloc((size_t)p->tokens * p->hidden * sizeof *mc->x);
    mc->out = malloc((size_t)p->tokens * p->hidden * sizeof *mc->out);
    int ok = mc->ids && mc->probs && mc->x && mc->out;
    for (int r = 0; ok && r < R; r++) {
        mc->ids[r] = malloc((size_t)p->tokens * p->top_k * sizeof **mc->ids);
        mc->probs[r] = malloc((size_t)p->tokens * p->top_k * sizeof **mc->probs);
        ok = mc->ids[r] && mc->probs[r];
        if (ok && rf) {
            memcpy(mc->ids[r], rf->ids, (size_t)p->tokens * p->top_k * sizeof **mc->ids);
            memcpy(mc->probs[r], rf->probs, (size_t)p->tokens * p->top_k * sizeof **mc->probs);
            ok = mq_moe_routing_check(p, mc->ids[r], mc->probs[r], &e) == MQ_OK;
        } else if (ok) {
            ok = mq_moe_routing_generate(p, kind, o->zipf_s, o->seed + 1000u * r, mc->ids[r],
                                         mc->probs[r], &e) == MQ_OK;
        }
    }
    uint64_t s = o->seed ^ 0x78ull;
    for (size_t i = 0; ok && i < (size_t)p->tokens * p->hidden; i++) /* N(0,1)-ish */
        mc->x[i] = mq_float_to_half(
            (float)(((double)(mq_moe_splitmix64(&s) >> 11) * 0x1.0p-53 - 0.5) * 3.4641016));
    case_samples(mc);
    mc->half_mid = half_mid;
    mc->lim = o->lim;
    char err[512];
    if (!ok || mq_moe_case_reference(mc, 0, 0, err, sizeof err)) {
        fprintf(stderr, "moe-bench: %s, %d tokens: %s\n", md->name, p->tokens, ok ? err : e.msg);
        return -1;
    }
    return 0;
}

void mq_moe_case_free(mq_moe_case *mc)
{
    for (int r = 0; mc->ids && mc->probs && r < mc->rotations; r++) {
        free(mc->ids[r]);
        free(mc->probs[r]);
    }
    free(mc->ids);
    free(mc->probs);
    free(mc->x);
    free(mc->out);
    for (int r = 0; r < MQ_MOE_MAX_ROTATIONS; r++) {
        free(mc->ref[r]);
        for (int a = 0; a < 4; a++)
            free(mc->bound[a][r]);
    }
}
