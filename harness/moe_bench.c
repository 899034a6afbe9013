/* moe_bench.c - see moe_bench.h. The models' MoE layers come from their
 * published configurations (hidden_size, the expert MLP's intermediate
 * size, routed experts, experts per token):
 *   Qwen3-30B-A3B    huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json
 *   Mixtral-8x7B     huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json
 *   DeepSeek-V2-Lite huggingface.co/deepseek-ai/DeepSeek-V2-Lite/blob/main/config.json
 *                    (64 routed experts; its 2 shared experts are a dense MLP, not here)
 *   gpt-oss-20b      huggingface.co/openai/gpt-oss-20b/blob/main/config.json
 *                    (its SwiGLU is clamped; the block here is the plain one)
 * The measuring of one case is moe_case.c, what it measures moe_space.c;
 * here the run: its routing, backend and results file, every model and
 * token count, a row per measurement and a summary line per case. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "moe_bench.h"
#include "moe_case.h"
#include "moe_results.h"
#include "moe_space.h"
#include "msl_program.h"
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

/* One results row appended whole (or not at all); -1 with the message. */
static int write_row(int fd, const char *out_path, const mq_moe_model *md,
                     const mq_moe_problem *p, const char *routing,
                     const mq_moe_routing_summary *rs, const mq_backend *b, int fused,
                     const mq_moe_meas *m, size_t touched_bytes, double probe_gbs, char *err,
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
        .read_probe_gbs = probe_gbs, .kernel_build = mq_kernel_build()};
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
static int measure_row(const moe_rowctx *x, mq_moe_case *mc, const mq_moe_candidate *c,
                       double budget, mq_moe_meas *m)
{
    char err[512];
    mq_moe_case_measure(x->b, mc, c, budget, m);
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


/* What a run holds open: each model's copy of a recorded routing (zeroed
 * when the routing is generated), the backend and the results file. */
typedef struct {
    mq_moe_routing_file *rfs; /* [nmodels] */
    int nmodels;
    mq_backend *b;
    int fd;
} moe_run;

/* Open a run: a recorded routing read and checked against every model
 * before anything is written (each model's copy is the one it runs), the
 * backend, then the results file last (a bad routing or backend creates
 * nothing). 0, or 2 with the message on stderr and nothing left open. */
static int run_open(moe_run *run, const mq_moe_model *mods, int nmodels, int from_file,
                    const mq_moe_bench_opts *o, const char *out_path)
{
    char err[512];
    mq_error e;
    mq_backend *b = NULL;
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
    *run = (moe_run){rfs, nmodels, b, fd};
    return 0;
}

/* Close what run_open opened: 0, or 2 when the results file could not be
 * closed (said on stderr). */
static int run_close(moe_run *run, const char *out_path)
{
    for (int mi = 0; mi < run->nmodels; mi++)
        mq_moe_routing_file_free(&run->rfs[mi]);
    free(run->rfs);
    mq_backend_close(run->b);
    if (close(run->fd)) {
        fprintf(stderr, "moe-bench: %s: %s\n", out_path, strerror(errno));
        return 2;
    }
    return 0;
}

/* A case's baseline and the fastest of its fused candidates. */
typedef struct {
    mq_moe_meas unfused, best;
    int have_best;
    int ncand; /* the candidates measured (the second stage's included) */
} moe_outcome;

/* The baseline first, so a run stopped in the fused space still has what
 * its rows compare with; then the nc candidates of cs (room for cap), and
 * on a device, once the space is measured, the second stage around the
 * best (not for candidates named with --candidate). 0, 1 when something
 * computed a wrong result, 2 when a row could not
 * be written. */
static int measure_space(const moe_rowctx *x, mq_moe_case *mc, mq_moe_candidate *cs, int nc,
                         int cap, const mq_moe_bench_opts *o, moe_outcome *out)
{
    int rc = 0;
    mq_moe_meas m;
    memset(&out->best, 0, sizeof out->best);
    out->have_best = 0;
    out->ncand = nc;
    int st = measure_row(x, mc, NULL, o->budget_s * 4, &out->unfused);
    if (st == 2)
        return 2;
    if (st)
        rc = 1;
    int best_ci = -1, staged = 0;
    for (int ci = 0; ci < nc; ci++) {
        if ((st = measure_row(x, mc, &cs[ci], o->budget_s, &m)) == 2)
            return 2;
        if (st) {
            rc = 1;
        } else if (!strcmp(m.status, "ok") &&
                   (!out->have_best || m.st.median < out->best.st.median)) {
            out->best = m;
            best_ci = ci;
            out->have_best = 1;
        }
        /* on a device, once the space is measured: the down kernel's own
         * tiles (and i_split) with the best gate/up tile fixed */
        if (ci == nc - 1 && !staged && best_ci >= 0 && strcmp(x->b->name, "cpu") &&
            !o->ncandidates) {
            staged = 1;
            nc += mq_moe_down_stage(x->p, mc->mw, &cs[best_ci], cs + nc, cap - nc,
                                    o->max_candidates > 0 ? o->max_candidates : cap);
            out->ncand = nc;
        }
    }
    return rc;
}

/* A case's summary line on stdout. */
static void print_case(const moe_rowctx *x, const moe_outcome *out)
{
    const mq_moe_model *md = x->md;
    const mq_moe_problem *p = x->p;
    const mq_moe_meas *mu = &out->unfused, *best = &out->best;
    if (out->have_best && !strcmp(mu->status, "ok")) {
        double gbs = x->touched / best->st.median / 1e9;
        printf("%-17s %-8s %5d tokens  %s max %d/expert, %d touched: fused %.4f ms "
               "(%s, %.1f GB/s",
               md->name, mq_format_name(p->format), p->tokens, x->routing, x->rs->max_tokens,
               x->rs->touched, best->st.median * 1e3, best->cand, gbs);
        if (x->probe_gbs > 0)
            printf(" = %.1f%% of the read probe's %.1f GB/s", 100 * gbs / x->probe_gbs,
                   x->probe_gbs);
        printf(")  unfused %.4f ms  speed-up %.2fx\n", mu->st.median * 1e3,
               mu->st.median / best->st.median);
    } else if (x->b->verify_only && !strcmp(mu->status, "verified")) {
        printf("%-17s %5d tokens: %d fused candidates and the unfused baseline run "
               "on %s, verified (not timed)\n",
               md->name, p->tokens, out->ncand, x->b->name);
    } else
        printf("%-17s %5d tokens: unfused %s %s\n", md->name, p->tokens, mu->status,
               mu->error);
    fflush(stdout);
}

#define MOE_MAX_CANDIDATES 512 /* of a case, the second stage's included */

/* One case: model md's layer (weights mw) at p->tokens tokens, routed as
 * rf says (NULL: generated as kind says): the baseline's dense kernels
 * tuned on a device, the read probe, every candidate measured with a row
 * each, and the summary line. 0, 1 when something computed a wrong
 * result, 2 when the run cannot go on. */
static int bench_case(const moe_run *run, const mq_moe_model *md, const mq_moe_problem *p,
                      const mq_moe_weights *mw, const mq_moe_routing_file *rf,
                      mq_route_kind kind, const mq_moe_bench_opts *o, const char *out_path)
{
    mq_backend *b = run->b;
    mq_error e;
    mq_moe_case mc;
    int R = rf || o->rotations < 1 ? 1 : o->rotations;
    if (mq_moe_case_setup(&mc, p, mw, rf, kind, R, o, b->arith.half_output, md)) {
        mq_moe_case_free(&mc);
        return 2;
    }
    const char *routing = rf ? o->routing : mq_route_kind_name(kind);
    mq_moe_routing_summary rs = mq_moe_routing_summarize(p, mc.ids[0]);
    size_t touched = mq_moe_weights_bytes_touched(mw, mc.ids[0], p->tokens, p->top_k);
    mq_table *dense = NULL;
    if (mq_backend_is_device(b) && !b->verify_only)
        mc.dense = dense = mq_moe_tune_dense(b, p, mw, mq_moe_case_fewest_rows(&mc),
                                             rs.max_tokens, o->quiet);
    mq_moe_candidate cs[MOE_MAX_CANDIDATES];
    int nc;
    if (o->ncandidates > 0) { /* the named ones, in order (an illegal one: its row says why) */
        nc = o->ncandidates < MOE_MAX_CANDIDATES ? o->ncandidates : MOE_MAX_CANDIDATES;
        memcpy(cs, o->candidates, (size_t)nc * sizeof *cs);
    } else {
        nc = strcmp(b->name, "cpu")
                 ? mq_msl_moe_space(p, mw, o->lim, rs.max_tokens, 1, cs, MOE_MAX_CANDIDATES)
                 : mq_moe_fused_space(p, rs.max_tokens, cs, MOE_MAX_CANDIDATES);
        if (o->max_candidates > 0 && nc > o->max_candidates)
            nc = o->max_candidates;
    }
    /* the device's read rate of the same bytes, rotated past its cache
     * as the routings rotate the experts */
    double probe_gbs = 0, probe_empty = 0;
    if (b->probe_read_at && !b->verify_only &&
        b->probe_read_at(b, touched, &probe_gbs, &probe_empty, &e))
        probe_gbs = 0;
    const moe_rowctx x = {run->fd, out_path, md, p, routing, &rs, b, touched, probe_gbs};
    moe_outcome out;
    int rc = measure_space(&x, &mc, cs, nc, MOE_MAX_CANDIDATES, o, &out);
    if (rc != 2)
        print_case(&x, &out);
    mq_table_free(dense);
    mq_moe_case_free(&mc);
    return rc;
}

int mq_moe_bench(const mq_moe_model *const_models, int nmodels, const int *tokens, int ntokens,
                 const mq_moe_bench_opts *o, const char *out_path)
{
    const mq_moe_model *mods = const_models;
    mq_error e;
    mq_route_kind kind = MQ_ROUTE_UNIFORM;
    int from_file = mq_route_kind_from_name(o->routing, &kind, NULL) != MQ_OK;
    moe_run run;
    if (run_open(&run, mods, nmodels, from_file, o, out_path))
        return 2;
    int rc = 0;
    for (int mi = 0; mi < nmodels && rc != 2; mi++) {
        const mq_moe_model *md = &mods[mi];
        mq_moe_problem base = {o->format, 1, md->hidden, md->inter, md->experts, md->top_k,
                               o->group};
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
            p.tokens = from_file ? run.rfs[mi].tokens : tokens[ti];
            int st = bench_case(&run, md, &p, &mw, from_file ? &run.rfs[mi] : NULL, kind, o,
                                out_path);
            if (st == 2 || (st && !rc))
                rc = st;
        }
        mq_moe_weights_free(&mw);
    }
    int close_rc = run_close(&run, out_path);
    return close_rc ? close_rc : rc;
}
