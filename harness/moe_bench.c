/* moe_bench.c - see moe_bench.h. The models' MoE layers come from their
 * published configurations (hidden_size, the expert MLP's intermediate
 * size, routed experts, experts per token):
 *   Qwen3-30B-A3B    huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json
 *   Mixtral-8x7B     huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json
 *   DeepSeek-V2-Lite huggingface.co/deepseek-ai/DeepSeek-V2-Lite/blob/main/config.json
 *                    (64 routed experts; its 2 shared experts are a dense MLP, not here)
 *   gpt-oss-20b      huggingface.co/openai/gpt-oss-20b/blob/main/config.json
 *                    (its SwiGLU is clamped; the block here is the plain one) */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "msl_program.h"
#include "moe_bench.h"
#include "moe_results.h"
#include "probes.h"
#include "stats.h"
#include "version.h"

static const mq_moe_model models[] = {
    {"qwen3-30b-a3b", "huggingface.co/Qwen/Qwen3-30B-A3B config.json", 2048, 768, 128, 8},
    {"mixtral-8x7b", "huggingface.co/mistralai/Mixtral-8x7B-v0.1 config.json", 4096, 14336, 8,
     2},
    {"deepseek-v2-lite", "huggingface.co/deepseek-ai/DeepSeek-V2-Lite config.json", 2048, 1408,
     64, 6},
    {"gpt-oss-20b", "huggingface.co/openai/gpt-oss-20b config.json", 2880, 2880, 32, 4},
};
#define NMODELS (int)(sizeof models / sizeof models[0])

const char *mq_moe_suite_names(void)
{
    return "qwen3-30b-a3b, mixtral-8x7b, deepseek-v2-lite, gpt-oss-20b, all";
}

int mq_moe_suite(const char *name, const mq_moe_model **out, int cap, char *err, size_t errlen)
{
    int n = 0;
    for (int i = 0; i < NMODELS; i++)
        if ((!strcmp(name, "all") || !strcmp(name, models[i].name)) && n < cap)
            out[n++] = &models[i];
    if (!n)
        snprintf(err, errlen, "unknown MoE suite '%s' (known: %s)", name, mq_moe_suite_names());
    return n ? n : -1;
}

/* ---- measuring ---- */

/* splitmix64 for activations */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The fused space measured: inner kernels (the streaming path at 1..16 rows
 * a pass up to the most rows an expert gets; when an expert gets more than
 * 16, output tiles first and the streaming path at 16 rows), intermediate
 * splits, gate/up fused or not; legal ones only, in that order (so
 * --max-candidates keeps the likeliest). */
static int fused_space(const mq_moe_problem *p, int max_rows, mq_moe_candidate *cs, int cap)
{
    static const int splits[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
    /* the prefill kernel's default first (the unfused baseline's own tile) */
    static const int tiles[][3] = {{64, 64, 32}, {32, 64, 32}, {64, 128, 32}, {128, 64, 64}};
    mq_candidate inner[16];
    int ni = 0;
    for (int i = 0; max_rows > 16 && i < 4; i++) { /* an expert gets more than 16: tiles first */
        inner[ni].variant = MQ_VAR_TRELLIS_PACKED;
        inner[ni++].p = (mq_params){tiles[i][0], tiles[i][1], tiles[i][2], 0, 1};
    }
    for (int tm = max_rows > 16 ? 16 : 1; tm <= 16 && ni < 16; tm *= 2) {
        inner[ni].variant = MQ_VAR_GEMV_TRELLIS;
        inner[ni++].p = (mq_params){tm, 64, 128, 0, 1};
        if (tm >= max_rows)
            break;
    }
    int n = 0;
    for (int i = 0; i < ni; i++)
        for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++)
            for (int f = 1; f >= 0; f--) {
                mq_moe_candidate c = {inner[i], splits[s], f, 0, 0};
                if (n < cap && mq_moe_candidate_check(p, &c, NULL) == MQ_OK)
                    cs[n++] = c;
            }
    return n;
}

#define MOE_MAX_ROTATIONS 64 /* --rotations at most */

typedef struct {
    const mq_moe_problem *p;
    const mq_moe_weights *mw;
    const uint16_t *x;
    int32_t **ids;   /* [rotations] */
    float **probs;
    int rotations;
    int sample[3], nsample;  /* tokens whose reference is kept */
    int half_mid;            /* the unfused path's dense kernels write FP16 (a device) */
    /* per routing, made when first needed: [nsample][hidden] each */
    double *ref[MOE_MAX_ROTATIONS], *bound[MOE_MAX_ROTATIONS];
    double *bound_h[MOE_MAX_ROTATIONS]; /* with FP16 intermediates (the unfused path when
                                         * half_mid) */
    const mq_table *dense;   /* the unfused baseline's dense kernels (NULL: the rule) */
    float *out;
} moe_case;

/* The sampled tokens: first, middle, last (distinct). */
static void case_samples(moe_case *mc)
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

/* The float64 reference of the sampled tokens of routing r (a sub-problem
 * of those tokens alone: a token's output depends on its row and routing
 * only), and its bound for the path checked (unfused with half_mid: the
 * FP16-intermediate one); made once per routing and path. */
static int case_reference(moe_case *mc, int r, int unfused, char *err, size_t errlen)
{
    int half = unfused && mc->half_mid;
    if (mc->ref[r] && (half ? mc->bound_h[r] : mc->bound[r]))
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
        rc = mq_moe_reference_arith(&sp, mc->mw, xs, ids, pr, half, ref, bound, &e) ? -1 : 0;
    }
    if (!rc) {
        if (!mc->ref[r]) {
            mc->ref[r] = ref;
            ref = NULL;
        }
        double **slot = half ? &mc->bound_h[r] : &mc->bound[r];
        *slot = bound;
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
static long case_verify(const moe_case *mc, int r, int unfused, double *worst)
{
    long bad = 0;
    int H = mc->p->hidden;
    const double *ref = mc->ref[r];
    const double *bound = unfused && mc->half_mid ? mc->bound_h[r] : mc->bound[r];
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

typedef struct {
    char status[16], error[256], cand[192];
    mq_stats st;
    double worst;
} moe_meas;

/* The fewest rows any touched expert gets in any of the case's routings. */
static int fewest_rows(const moe_case *mc)
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
static void measure(mq_backend *b, moe_case *mc, const mq_moe_candidate *c, double budget,
                    moe_meas *m)
{
    mq_error e;
    memset(m, 0, sizeof *m);
    if (c)
        mq_moe_candidate_str(c, m->cand, sizeof m->cand);
    else
        snprintf(m->cand, sizeof m->cand, "unfused[per expert: dense trellis x3 (%s), SwiGLU, sum]",
                 mc->dense ? "tuned per shape in this run" : "the dense rule");
    const mq_moe_problem *p = mc->p;
#define RUN(r)                                                                                 \
    (c ? b->run_moe(b, p, mc->mw, mc->x, mc->ids[r], mc->probs[r], mc->out, c, &e)            \
       : b->run_moe_unfused(b, p, mc->mw, mc->x, mc->ids[r], mc->probs[r], mc->out,        \
                            mc->dense, &e))
    char err[300];
    if (case_reference(mc, 0, !c, err, sizeof err)) {
        snprintf(m->status, sizeof m->status, "error");
        snprintf(m->error, sizeof m->error, "%.200s", err);
        return;
    }
    if (RUN(0)) {
        snprintf(m->status, sizeof m->status, "error");
        snprintf(m->error, sizeof m->error, "%s", e.msg);
        return;
    }
    long bad = case_verify(mc, 0, !c, &m->worst);
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
        if (case_reference(mc, r, !c, err, sizeof err)) {
            snprintf(m->status, sizeof m->status, "error");
            snprintf(m->error, sizeof m->error, "%.200s", err);
            return;
        }
        double t0 = mq_now();
        if (RUN(r)) { /* a run that fails gets no time: its rows would be too fast */
            snprintf(m->status, sizeof m->status, "error");
            snprintf(m->error, sizeof m->error, "routing %d: %.200s", r, e.msg);
            return;
        }
        double dt = b->device_time ? b->device_time(b) : -1;
        samples[n++] = dt >= 0 ? dt : mq_now() - t0;
        if ((bad = case_verify(mc, r, !c, &m->worst)) != 0) {
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

/* The second stage of the MSL kernel's search: the best gate/up tile kept,
 * the down kernel's own tile_n (16..128) and simdgroups (1..8) with i_split
 * 1..16, the legal ones not measured yet, at most max. The count. */
static int down_stage(const mq_moe_problem *p, const mq_moe_weights *mw,
                      const mq_moe_candidate *best, mq_moe_candidate *cs, int cap, int max)
{
    static const int splits[] = {1, 2, 4, 8, 16};
    int n = 0;
    for (int s = 0; s < 5; s++)
        for (int tn = 16; tn <= 128; tn *= 2)
            for (int sgs = 1; sgs <= 8; sgs *= 2) {
                mq_moe_candidate c = *best;
                c.i_split = splits[s];
                c.down_tile_n = tn;
                c.down_tile_k = 8 * (128 / tn) * sgs;
                if (tn == best->inner.p.tile_n && c.down_tile_k == best->inner.p.tile_k)
                    continue; /* the space had it */
                mq_msl_moe_plan plan;
                if (n < cap && n < max && mq_msl_moe_plan_of(p, mw, &c, &plan, NULL) == MQ_OK)
                    cs[n++] = c;
            }
    return n;
}

/* The unfused baseline's dense kernels on a device, tuned in this run: for
 * each row-count bucket (powers of two from the fewest rows a touched expert gets in
 * the case's routings, the first bucket taking every count below, up to the most)
 * and each projection shape (gate/up: N=inter K=hidden; down: N=hidden
 * K=inter), every legal decode-path candidate (16 rows a pass above 16
 * rows, where the tile kernels join them) timed on the backend (median device time of 7 runs over
 * experts in rotation) and the fastest kept, as rows of a table for
 * mq_table_lookup, so the baseline runs the best dense kernel of each shape,
 * not a fixed rule. NULL when nothing could be timed (the rule then). */
static mq_table *tune_dense(mq_backend *b, const mq_moe_problem *p, const mq_moe_weights *mw,
                            int min_rows, int max_rows, int quiet)
{
    static const int tiles[][4] = {{MQ_VAR_TRELLIS_PACKED, 64, 64, 32},
                                   {MQ_VAR_TRELLIS_PACKED, 32, 64, 32},
                                   {MQ_VAR_TRELLIS_PACKED, 64, 128, 32},
                                   {MQ_VAR_TRELLIS_PACKED, 128, 64, 64},
                                   {MQ_VAR_TRELLIS_DECODE, 32, 128, 32}};
    mq_table_row rows[64];
    int nrows = 0, prev = 0;
    const mq_limits lim = mq_limits_default();
    mq_error e;
    uint64_t seed = 99;
    int n = 1;
    while (n * 2 < min_rows) /* buckets no routing reaches are not tuned: the first row tuned */
        n *= 2;              /* takes every count below it */
    const int first = n;
    for (; prev < max_rows && n <= 4096 && nrows + 2 <= 64; prev = n, n *= 2)
        for (int j = 0; j < 2; j++) {
            int K = j ? p->inter : p->hidden, N = j ? p->hidden : p->inter;
            mq_problem dp = {p->format, n, N, K, p->group};
            uint16_t *A = malloc((size_t)n * K * sizeof *A);
            float *C = malloc((size_t)n * N * sizeof *C);
            for (size_t i = 0; A && i < (size_t)n * K; i++)
                A[i] = mq_float_to_half((float)((double)(mix(&seed) >> 11) * 0x1.0p-53 - 0.5));
            mq_candidate cs[32];
            int nc = 0;
            for (int t = 0; t < 4; t++) /* above 16 rows: 16 a pass, as the fused kernel */
                for (int sgs = 1; sgs <= 8; sgs *= 2) {
                    int tn = 16 << t;
                    cs[nc].variant = MQ_VAR_GEMV_TRELLIS;
                    cs[nc].p = (mq_params){n < 16 ? n : 16, tn, 8 * (128 / tn) * sgs, 0, 1};
                    nc++;
                }
            for (int t = 0; n > 16 && t < 5; t++) {
                cs[nc].variant = (mq_variant)tiles[t][0];
                cs[nc].p = (mq_params){tiles[t][1], tiles[t][2], tiles[t][3], 0, 1};
                nc++;
            }
            double best = 0;
            mq_candidate bc;
            memset(&bc, 0, sizeof bc);
            for (int ci = 0; A && C && ci < nc; ci++) {
                mq_plan plan;
                if (mq_plan_candidate(&dp, &cs[ci], &lim, &plan, NULL))
                    continue;
                double t[7];
                int k = 0;
                for (int r = 0; r < 7; r++) {
                    const mq_weights *w = &mw->w[j ? MQ_MOE_DOWN : MQ_MOE_GATE][r % (p->experts < 4 ? p->experts : 4)];
                    if (b->run(b, &dp, w, A, C, &cs[ci], &lim, &e))
                        break;
                    double dt = b->device_time ? b->device_time(b) : -1;
                    if (dt < 0)
                        break;
                    t[k++] = dt;
                }
                if (k < 7)
                    continue;
                mq_stats st;
                mq_stats_compute(t, k, &st);
                if (!best || st.median < best) {
                    best = st.median;
                    bc = cs[ci];
                }
            }
            free(A);
            free(C);
            if (!best)
                continue;
            rows[nrows++] = (mq_table_row){p->format, p->group, N, K, n == first ? 1 : prev + 1,
                                           n >= max_rows ? 1 << 30 : n, bc, best, n,
                                           0, 0, 0, 0, 0, 0};
            if (!quiet) {
                char cand[128];
                mq_candidate_str(&bc, cand, sizeof cand);
                fprintf(stderr, "moe-bench: the baseline's dense kernel for %d-%d rows of N=%d K=%d: "
                                "%s (%.4f ms)\n", rows[nrows - 1].m_lo, n, N, K, cand, best * 1e3);
            }
        }
    mq_table *t = NULL;
    if (nrows && mq_table_from_rows("", rows, nrows, &t, &e))
        t = NULL;
    return t;
}

/* One results row appended whole (or not at all); -1 with the message. */
static int write_row(int fd, const char *out_path, const mq_moe_model *md,
                     const mq_moe_problem *p, const char *routing,
                     const mq_moe_routing_summary *rs, const mq_backend *b, int fused,
                     const moe_meas *m, size_t touched_bytes, double probe_gbs, char *err,
                     size_t errlen)
{
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    int ok = !strcmp(m->status, "ok") && m->st.median > 0;
    mq_moe_result r = {
        .schema = MQ_MOE_RESULTS_SCHEMA, .tool_version = MQ_TOOL_VERSION,
        .git_rev = mq_git_rev(), .host = mq_host_name(), .date = date, .model = md->name,
        .format = p->format, .tokens = p->tokens, .experts = p->experts, .top_k = p->top_k,
        .hidden = p->hidden, .inter = p->inter, .group = p->group, .routing = routing,
        .route_max_tokens = rs->max_tokens, .route_mean_tokens = rs->mean_tokens,
        .route_touched = rs->touched, .threads = b->threads, .fused = fused,
        .candidate = m->cand, .status = m->status, .error = m->error, .median_s = m->st.median,
        .p10_s = m->st.p10, .p90_s = m->st.p90, .reps = m->st.n,
        .touched_gbs = ok ? touched_bytes / m->st.median / 1e9 : 0,
        .worst_of_bound = m->worst, .backend = b->name, .device = b->device,
        .read_probe_gbs = probe_gbs};
    return mq_moe_results_append(fd, out_path, &r, err, errlen);
}

/* What a case's rows share. */
typedef struct {
    int fd;
    const char *out_path;
    const mq_moe_model *md;
    const mq_moe_problem *p;
    const char *routing;
    const mq_moe_routing_summary *rs;
    mq_backend *b;
    size_t touched;
    double probe_gbs;
} moe_rowctx;

/* Measure c (NULL: the unfused baseline), append its row and say so when
 * it computed a wrong result: 2 when the row could not be written, 1
 * wrong, 0 otherwise. */
static int measure_row(const moe_rowctx *x, moe_case *mc, const mq_moe_candidate *c,
                       double budget, moe_meas *m)
{
    char err[512];
    measure(x->b, mc, c, budget, m);
    if (write_row(x->fd, x->out_path, x->md, x->p, x->routing, x->rs, x->b, c != NULL, m,
                  x->touched, x->probe_gbs, err, sizeof err)) {
        fprintf(stderr, "moe-bench: %s\n", err);
        return 2;
    }
    if (strcmp(m->status, "wrong"))
        return 0;
    fprintf(stderr, "moe-bench: %s, %d tokens: %s WRONG: %s\n", x->md->name, x->p->tokens,
            c ? m->cand : "unfused", m->error);
    return 1;
}

int mq_moe_bench(const mq_moe_model *const_models, int nmodels, const int *tokens, int ntokens,
                 const mq_moe_bench_opts *o, const char *out_path)
{
    const mq_moe_model *mods = const_models;
    char err[512];
    mq_error e;
    mq_backend *b = NULL;
    mq_route_kind kind = MQ_ROUTE_UNIFORM;
    int from_file = mq_route_kind_from_name(o->routing, &kind, NULL) != MQ_OK;
    /* a recorded routing, read and checked against every model before anything is
     * written (each model's copy is the one it runs) */
    mq_moe_routing_file *rfs = calloc((size_t)nmodels, sizeof *rfs);
    int fd = -1, bad = !rfs;
    for (int mi = 0; from_file && !bad && mi < nmodels; mi++) {
        bad = mq_moe_routing_read(o->routing, mods[mi].experts, &rfs[mi], err, sizeof err);
        if (!bad && rfs[mi].top_k != mods[mi].top_k) {
            snprintf(err, sizeof err, "%s: %d experts per token, but %s routes %d", o->routing,
                     rfs[mi].top_k, mods[mi].name, mods[mi].top_k);
            bad = 1;
        }
    }
    char note[256] = "";
    mq_backend_opts bo = {o->threads};
    if (!bad && !(b = mq_backend_open(o->backend ? o->backend : "cpu", &bo, note, sizeof note,
                                      &e))) {
        snprintf(err, sizeof err, "%s", e.msg);
        bad = 1;
    }
    if (!bad && (!b->run_moe || !b->run_moe_unfused)) {
        snprintf(err, sizeof err, "backend %s does not run the MoE block", b->name);
        bad = 1;
    }
    /* the results file last: a bad routing or backend creates nothing */
    if (!bad && (fd = mq_moe_results_open(out_path, err, sizeof err)) < 0)
        bad = 1;
    if (bad) {
        fprintf(stderr, "moe-bench: %s\n", rfs ? err : "out of memory");
        for (int mi = 0; rfs && mi < nmodels; mi++)
            mq_moe_routing_file_free(&rfs[mi]);
        free(rfs);
        if (fd >= 0)
            close(fd);
        if (b)
            mq_backend_close(b);
        return 2;
    }
    if (note[0] && !o->quiet)
        fprintf(stderr, "moe-bench: %s\n", note);
    int rc = 0;
    for (int mi = 0; mi < nmodels && rc != 2; mi++) {
        const mq_moe_model *md = &mods[mi];
        mq_moe_problem base = {o->format, 1, md->hidden, md->inter, md->experts, md->top_k,
                               o->group};
        const mq_moe_routing_file rf = rfs[mi];
        mq_moe_weights mw;
        if (mq_moe_weights_alloc(&mw, &base, &e)) {
            fprintf(stderr, "moe-bench: %s: %s\n", md->name, e.msg);
            rc = 2;
            break;
        }
        mq_moe_weights_fill_random(&mw, o->seed + (uint64_t)mi);
        int nt = from_file ? 1 : ntokens;
        for (int ti = 0; ti < nt && rc != 2; ti++) {
            mq_moe_problem p = base;
            p.tokens = from_file ? rf.tokens : tokens[ti];
            int R = from_file || o->rotations < 1 ? 1 : o->rotations;
            moe_case mc;
            mq_table *dense = NULL;
            memset(&mc, 0, sizeof mc);
            mc.p = &p;
            mc.mw = &mw;
            mc.rotations = R;
            mc.ids = calloc((size_t)R, sizeof *mc.ids);
            mc.probs = calloc((size_t)R, sizeof *mc.probs);
            uint16_t *x = malloc((size_t)p.tokens * p.hidden * sizeof *x);
            mc.out = malloc((size_t)p.tokens * p.hidden * sizeof *mc.out);
            int ok = mc.ids && mc.probs && x && mc.out;
            for (int r = 0; ok && r < R; r++) {
                mc.ids[r] = malloc((size_t)p.tokens * p.top_k * sizeof **mc.ids);
                mc.probs[r] = malloc((size_t)p.tokens * p.top_k * sizeof **mc.probs);
                ok = mc.ids[r] && mc.probs[r];
                if (ok && from_file) {
                    memcpy(mc.ids[r], rf.ids, (size_t)p.tokens * p.top_k * sizeof **mc.ids);
                    memcpy(mc.probs[r], rf.probs, (size_t)p.tokens * p.top_k * sizeof **mc.probs);
                    ok = mq_moe_routing_check(&p, mc.ids[r], mc.probs[r], &e) == MQ_OK;
                } else if (ok) {
                    ok = mq_moe_routing_generate(&p, kind, o->zipf_s, o->seed + 1000u * r,
                                                 mc.ids[r], mc.probs[r], &e) == MQ_OK;
                }
            }
            uint64_t s = o->seed ^ 0x78ull;
            for (size_t i = 0; ok && i < (size_t)p.tokens * p.hidden; i++) /* N(0,1)-ish */
                x[i] = mq_float_to_half((float)(((double)(mix(&s) >> 11) * 0x1.0p-53 - 0.5) *
                                                3.4641016));
            mc.x = x;
            case_samples(&mc);
            mc.half_mid = b->arith.half_output;
            if (!ok || case_reference(&mc, 0, 0, err, sizeof err)) {
                fprintf(stderr, "moe-bench: %s, %d tokens: %s\n", md->name, p.tokens,
                        ok ? err : e.msg);
                rc = 2;
                goto next_case;
            }
            const char *routing = from_file ? o->routing : mq_route_kind_name(kind);
            mq_moe_routing_summary rs = mq_moe_routing_summarize(&p, mc.ids[0]);
            size_t touched = mq_moe_weights_bytes_touched(&mw, mc.ids[0], p.tokens, p.top_k);
            if (mq_backend_is_device(b) && !b->verify_only)
                mc.dense = dense = tune_dense(b, &p, &mw, fewest_rows(&mc), rs.max_tokens,
                                              o->quiet);
            mq_moe_candidate cs[512];
            int nc = strcmp(b->name, "cpu") ? mq_msl_moe_space(&p, &mw, rs.max_tokens, 1, cs, 512)
                                            : fused_space(&p, rs.max_tokens, cs, 512);
            /* the device's read rate of the same bytes, rotated past its cache
             * as the routings rotate the experts */
            double probe_gbs = 0, probe_empty = 0;
            if (b->probe_read_at && !b->verify_only &&
                b->probe_read_at(b, touched, &probe_gbs, &probe_empty, &e))
                probe_gbs = 0;
            if (o->max_candidates > 0 && nc > o->max_candidates)
                nc = o->max_candidates;
            moe_meas best, m, mu;
            memset(&best, 0, sizeof best);
            /* the baseline first, so a run stopped in the fused space still
             * has what its rows compare with */
            const moe_rowctx rx = {fd, out_path, md, &p, routing, &rs, b, touched, probe_gbs};
            int st = measure_row(&rx, &mc, NULL, o->budget_s * 4, &mu);
            if (st == 2) {
                rc = 2;
                goto next_case;
            }
            if (st)
                rc = rc ? rc : 1;
            int have_best = 0, best_ci = -1, staged = 0;
            for (int ci = 0; ci < nc; ci++) {
                if ((st = measure_row(&rx, &mc, &cs[ci], o->budget_s, &m)) == 2) {
                    rc = 2;
                    goto next_case;
                }
                if (st) {
                    rc = rc ? rc : 1;
                } else if (!strcmp(m.status, "ok") && (!have_best || m.st.median < best.st.median)) {
                    best = m;
                    best_ci = ci;
                    have_best = 1;
                }
                /* on a device, once the space is measured: the down kernel's own
                 * tiles (and i_split) with the best gate/up tile fixed */
                if (ci == nc - 1 && !staged && best_ci >= 0 && strcmp(b->name, "cpu")) {
                    staged = 1;
                    nc += down_stage(&p, &mw, &cs[best_ci], cs + nc, 512 - nc,
                                     o->max_candidates > 0 ? o->max_candidates : 512);
                }
            }
            {
                if (have_best && !strcmp(mu.status, "ok")) {
                    double gbs = touched / best.st.median / 1e9;
                    printf("%-17s %-8s %5d tokens  %s max %d/expert, %d touched: fused %.4f ms "
                           "(%s, %.1f GB/s",
                           md->name, mq_format_name(p.format), p.tokens, routing, rs.max_tokens,
                           rs.touched, best.st.median * 1e3, best.cand, gbs);
                    if (probe_gbs > 0)
                        printf(" = %.1f%% of the read probe's %.1f GB/s", 100 * gbs / probe_gbs,
                               probe_gbs);
                    printf(")  unfused %.4f ms  speed-up %.2fx\n", mu.st.median * 1e3,
                           mu.st.median / best.st.median);
                } else if (b->verify_only && !strcmp(mu.status, "verified")) {
                    printf("%-17s %5d tokens: %d fused candidates and the unfused baseline run "
                           "on %s, verified (not timed)\n",
                           md->name, p.tokens, nc, b->name);
                } else
                    printf("%-17s %5d tokens: unfused %s %s\n", md->name, p.tokens, mu.status,
                           mu.error);
                fflush(stdout);
            }
        next_case:
            mq_table_free(dense);
            for (int r = 0; mc.ids && mc.probs && r < R; r++) {
                free(mc.ids[r]);
                free(mc.probs[r]);
            }
            free(mc.ids);
            free(mc.probs);
            free(x);
            free(mc.out);
            for (int r = 0; r < MOE_MAX_ROTATIONS; r++) {
                free(mc.ref[r]);
                free(mc.bound[r]);
                free(mc.bound_h[r]);
            }
        }
        mq_moe_weights_free(&mw);
    }
    for (int mi = 0; mi < nmodels; mi++)
        mq_moe_routing_file_free(&rfs[mi]);
    free(rfs);
    mq_backend_close(b);
    if (close(fd)) {
        fprintf(stderr, "moe-bench: %s: %s\n", out_path, strerror(errno));
        return 2;
    }
    return rc;
}
