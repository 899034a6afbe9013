/* test_search.c - the guided search and its replay: the residual Gaussian
 * process against values worked out by hand; the search on a real H100
 * space whose "measured" times are the model's own (the first pick is the
 * best), and on one where the model is wrong about a variant (the search
 * finds the best within 20 timings where the model's order does not);
 * every candidate timed at most once, the budget kept, the same picks
 * twice; tune --replay's trace from a results file written here, and its
 * refusals (nothing created). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "chips.h"
#include "model.h"
#include "replay.h"
#include "residual_gp.h"
#include "search.h"

static void test_gp(void)
{
    mq_gp g;
    CHECK(mq_gp_init(&g, 8) == 0, "mq_gp_init: expected room for 8 observations");
    mq_candidate a = {MQ_VAR_LANE_GEMM, {16, 64, 64, 0, 1}};
    mq_candidate b = {MQ_VAR_LANE_GEMM, {16, 128, 64, 0, 1}};
    mq_candidate far = {MQ_VAR_MLX_SPLITK, {64, 8, 512, 0, 16}};
    mq_gp_input in[3];
    mq_gp_input_of(&a, &in[0]);
    mq_gp_input_of(&b, &in[1]);
    mq_gp_input_of(&far, &in[2]);
    CHECK(in[1].x[1] - in[0].x[1] == 1, "a tile twice as wide is 1 apart, got %g",
          in[1].x[1] - in[0].x[1]);
    double m, sd, sd0;
    mq_gp_predict(&g, &in[0], &m, &sd0);
    CHECK(m == 0 && sd0 > 1, "no observation: mean 0 and the prior's sd (> 1), got %g, %g", m,
          sd0);
    double r[2] = {0.7, 0.9};
    CHECK(mq_gp_fit(&g, in, r, 2) == 0, "fit on 2 observations");
    mq_gp_predict(&g, &in[0], &m, &sd);
    CHECK(fabs(m - 0.7) < 0.05 && sd < 0.1,
          "at an observed input: its residual 0.7 (+-0.05), sd < 0.1; got %g, %g", m, sd);
    mq_gp_predict(&g, &in[2], &m, &sd);
    CHECK(m > 0.3 && m < 0.9 && sd > 0.3 && sd < sd0,
          "far away, another variant: the shared constant's pull (0.3..0.9) and most of the "
          "prior's sd; got %g, %g",
          m, sd);
    /* expected improvement: (best - m) Phi(z) + sd phi(z) */
    double ei = mq_gp_expected_improvement(0, 0, 1);
    CHECK(fabs(ei - 1 / sqrt(2 * M_PI)) < 1e-12, "EI at the best with sd 1: phi(0) = %.12f, got "
          "%.12f", 1 / sqrt(2 * M_PI), ei);
    CHECK(mq_gp_expected_improvement(0, -1, 0.5) > mq_gp_expected_improvement(0, -0.5, 0.5) &&
              mq_gp_expected_improvement(0, 0.5, 1) > mq_gp_expected_improvement(0, 0.5, 0.2),
          "EI grows as the mean falls and as the sd grows");
    mq_gp_free(&g);
}

/* A real space: fp4 M=16 4096x4096 on the h100 row, the default model. */
typedef struct {
    mq_chip chip;
    mq_tune_opts o;
    mq_model prior;
    mq_problem p;
    mq_cand *cs;
    int n, base[MQ_BASE_COUNT];
    double *truth;
} space;

static int space_open(space *s, int evals)
{
    memset(s, 0, sizeof *s);
    mq_chip_db db;
    char err[512];
    if (mq_chips_load(mq_chips_default_path(), &db, err, sizeof err) ||
        mq_chip_find(&db, "h100", 0, &s->chip, err, sizeof err)) {
        CHECK(0, "the h100 row of the chips file: %s", err);
        return -1;
    }
    mq_chips_free(&db);
    s->o.formats = 1u << MQ_FMT_FP4;
    s->o.group = 128;
    s->o.evals = evals;
    mq_model_defaults(&s->prior);
    s->p = (mq_problem){MQ_FMT_FP4, 16, 4096, 4096, 128};
    s->cs = mq_tune_candidates(&s->p, &s->chip, &s->n, s->base);
    s->truth = s->cs ? malloc(sizeof *s->truth * (size_t)s->n) : NULL;
    CHECK(s->truth && s->n > 100, "expected over 100 candidates of fp4 16x4096x4096 on h100, "
          "got %d", s->n);
    return s->truth && s->n > 100 ? 0 : -1;
}

/* Replay the guided search on the space with its truth; the order of
 * evaluation into order[] (room for n), the count back. */
static int search(space *s, int *order)
{
    mq_tuner T = {.o = &s->o, .chip = &s->chip, .lim = &s->chip.lim, .prior = &s->prior};
    double *trace = malloc(sizeof *trace * (size_t)s->n);
    for (int i = 0; i < s->n; i++) {
        s->cs[i].measured = 0;
        s->cs[i].time = -1;
    }
    T.replay_cs = s->cs;
    T.replay_t = s->truth;
    T.trace = trace;
    mq_tune_search_guided(&T, &s->p, s->cs, s->n);
    int k = 0;
    for (int e = 0; e < T.ntrace; e++) /* the trace holds times: find each one's candidate */
        for (int i = 0; i < s->n; i++)
            if (s->cs[i].measured && s->truth[i] == trace[e]) {
                order[k++] = i;
                break;
            }
    free(trace);
    free(T.rows.f);
    free(T.rows.t);
    free(T.guide);
    return T.ntrace == k ? k : -1;
}

static double best_of(const space *s, const int *order, int k)
{
    double b = INFINITY;
    for (int e = 0; e < k; e++)
        b = fmin(b, s->truth[order[e]]);
    return b;
}

static void test_guided(void)
{
    space s;
    if (space_open(&s, 20))
        return;
    int *order = malloc(sizeof *order * (size_t)s.n), *again = malloc(sizeof *again * (size_t)s.n);
    /* the model is right (distinct times): its fastest is timed first */
    double opt = INFINITY;
    for (int i = 0; i < s.n; i++) {
        s.truth[i] = mq_model_predict(&s.prior, &s.cs[i].f) * (1 + 1e-9 * i);
        opt = fmin(opt, s.truth[i]);
    }
    int k = search(&s, order);
    CHECK(k == 20, "the budget: 20 timings, got %d", k);
    CHECK(k > 0 && s.truth[order[0]] == opt, "a right model: the first timing is the best");
    /* the model is wrong: the variant it likes least is 5x faster than it
     * thinks, everything else as predicted */
    int worst = -1;
    for (int i = 0; i < s.n; i++)
        if (worst < 0 || s.truth[i] > s.truth[worst])
            worst = i;
    mq_variant v = s.cs[worst].c.variant;
    opt = INFINITY;
    for (int i = 0; i < s.n; i++) {
        if (s.cs[i].c.variant == v)
            s.truth[i] /= 5;
        opt = fmin(opt, s.truth[i]);
    }
    k = search(&s, order);
    int distinct = 1;
    for (int a = 0; a < k; a++)
        for (int b = a + 1; b < k; b++)
            distinct &= order[a] != order[b];
    CHECK(k == 20 && distinct, "20 timings, each of a different candidate (got %d, distinct %d)",
          k, distinct);
    CHECK(best_of(&s, order, k) <= 1.03 * opt,
          "a model wrong about %s: the search finds the best within 3%% in 20 timings (best "
          "found %g s, the best %g s)",
          mq_variant_get(v)->name, best_of(&s, order, k), opt);
    /* every 4th timing from the 8th on is a local step: a candidate of the
     * incumbent's variant one step (1 in the log2 inputs) from it */
    for (int e = 8; e < k; e += 4) {
        int inc = order[0];
        for (int a = 1; a < e; a++)
            if (s.truth[order[a]] < s.truth[inc])
                inc = order[a];
        mq_gp_input x, y;
        mq_gp_input_of(&s.cs[inc].c, &x);
        mq_gp_input_of(&s.cs[order[e]].c, &y);
        double d = 0;
        for (int j = 0; j < MQ_GP_DIM; j++)
            d += fabs(x.x[j] - y.x[j]);
        CHECK(x.variant == y.variant && d <= 1.01,
              "timing %d: a neighbour of the incumbent (same variant, 1 step away), got "
              "variant %d vs %d at distance %g",
              e, y.variant, x.variant, d);
    }
    /* the model's own order would not: the test means something */
    int *by_model = malloc(sizeof *by_model * (size_t)s.n);
    for (int i = 0; i < s.n; i++)
        by_model[i] = i;
    for (int a = 0; a < s.n; a++) /* selection sort of the first 20 by predicted time */
        for (int b = a + 1; a < 20 && b < s.n; b++)
            if (mq_model_predict(&s.prior, &s.cs[by_model[b]].f) <
                mq_model_predict(&s.prior, &s.cs[by_model[a]].f)) {
                int t = by_model[a];
                by_model[a] = by_model[b];
                by_model[b] = t;
            }
    CHECK(best_of(&s, by_model, 20) > 1.03 * opt,
          "the model's first 20 miss the best by over 3%% (else this case tests nothing)");
    int k2 = search(&s, again);
    CHECK(k2 == k && !memcmp(order, again, sizeof *order * (size_t)k),
          "the same space twice: the same 20 picks in the same order");
    free(by_model);
    free(order);
    free(again);
    free(s.cs);
    free(s.truth);
}

/* The space as a results file of ok rows (every 10th a wrong row). */
static int write_rows(const space *s, const char *path)
{
    mq_result *rows = calloc((size_t)s->n, sizeof *rows);
    const mq_result **ptr = malloc(sizeof *ptr * (size_t)s->n);
    char err[4400];
    for (int i = 0; i < s->n; i++) {
        mq_result *r = &rows[i];
        r->schema = MQ_RESULTS_SCHEMA;
        snprintf(r->tool_version, sizeof r->tool_version, "test");
        snprintf(r->git_rev, sizeof r->git_rev, "test");
        snprintf(r->host, sizeof r->host, "test");
        snprintf(r->date, sizeof r->date, "2026-11-27T00:00:00Z");
        snprintf(r->chip, sizeof r->chip, "h100");
        snprintf(r->backend, sizeof r->backend, "cuda");
        r->p = s->p;
        r->c = s->cs[i].c;
        snprintf(r->status, sizeof r->status, i % 10 == 3 ? "wrong" : "ok");
        r->st.median = r->st.p10 = r->st.p90 = s->truth[i];
        r->st.n = 1;
        r->samples = &s->truth[i];
        r->nsamples = 1;
        ptr[i] = r;
    }
    int rc = mq_results_write(path, ptr, s->n, err, sizeof err);
    CHECK(rc == 0, "writing the replay's rows: %s", err);
    free(rows);
    free(ptr);
    return rc;
}

static void test_replay(void)
{
    space s;
    if (space_open(&s, 40))
        return;
    for (int i = 0; i < s.n; i++) /* the model right up to a smooth, variant-wise error */
        s.truth[i] = mq_model_predict(&s.prior, &s.cs[i].f) *
                     exp(0.3 * sin(s.cs[i].c.p.tile_n * 0.01 + s.cs[i].c.variant));
    char dir[] = "/tmp/mq-test-replay.XXXXXX", path[128], trace[128];
    if (!mkdtemp(dir) || (snprintf(path, sizeof path, "%s/rows.csv", dir), write_rows(&s, path)))
        return;
    snprintf(trace, sizeof trace, "%s/trace.csv", dir);
    mq_tuner T = {.o = &s.o, .chip = &s.chip, .lim = &s.chip.lim, .prior = &s.prior};
    mq_replay_opts ro = {path, 3, 3, 50, trace};
    FILE *out = tmpfile();
    CHECK(mq_tune_replay(&T, &ro, out) == 0, "replay of %s: expected 0", path);
    FILE *tf = fopen(trace, "r");
    char line[1024];
    int rows = 0, monotone = 1, found = 1;
    while (tf && fgets(line, sizeof line, tf)) {
        if (rows++ == 0)
            continue;
        char st[16];
        double r[MQ_REPLAY_NCHECK];
        int seed;
        if (sscanf(line, "%15[^,],%d,cuda,fp4,16,4096,4096,128,%*d,%*g,%lf,%lf,%lf,%lf,%lf,%lf",
                   st, &seed, &r[0], &r[1], &r[2], &r[3], &r[4], &r[5]) != 8) {
            CHECK(0, "a trace row of the form strategy,seed,cuda,fp4,16,4096,...: got %s", line);
            continue;
        }
        for (int k = 1; k < MQ_REPLAY_NCHECK - 1; k++) /* 80 > the budget of 40: as at 40 */
            monotone &= r[k] <= r[k - 1];
        if (!strcmp(st, "guided"))
            found &= r[4] < 0.03;
    }
    CHECK(rows == 1 + 2 * 3, "the trace: a header and 2 strategies x 3 seeds, got %d lines", rows);
    CHECK(monotone, "each run's regret never grows with more timings");
    CHECK(found, "guided, every seed: within 3%% of the best after 40 timings");
    if (tf)
        fclose(tf);
    /* refused: no space big enough; nothing created */
    unlink(trace);
    ro.min_candidates = 100000;
    struct stat sb;
    CHECK(mq_tune_replay(&T, &ro, out) == 2 && stat(trace, &sb) != 0,
          "no space with 100000 candidates: expected 2 and no trace file");
    fclose(out);
    unlink(path);
    rmdir(dir);
    free(T.rows.f);
    free(T.rows.t);
    free(T.guide);
    free(s.cs);
    free(s.truth);
}

/* The guide (the run's model) is refitted once the rows have grown by an
 * eighth since its last fit, not on every 4th timing: with 200 rows from
 * earlier shapes, 20 more timings leave it as fitted on the 200; 20 more
 * after those (240 >= 200 + 25) refit it. */
static void test_guide_refits(void)
{
    space s;
    if (space_open(&s, 20))
        return;
    for (int i = 0; i < s.n; i++)
        s.truth[i] = mq_model_predict(&s.prior, &s.cs[i].f) * (1.2 + 0.1 * (i % 7));
    mq_tuner T = {.o = &s.o, .chip = &s.chip, .lim = &s.chip.lim, .prior = &s.prior};
    double *trace = malloc(sizeof *trace * (size_t)s.n);
    for (int i = 0; i < 200 && i < s.n; i++) /* earlier shapes' rows */
        mq_rows_add(&T.rows, &s.cs[i].f, s.truth[i]);
    T.replay_cs = s.cs;
    T.replay_t = s.truth;
    T.trace = trace;
    mq_tune_search_guided(&T, &s.p, s.cs, s.n);
    CHECK(T.rows.n == 220 && T.guide_fitted && T.guide_rows == 200,
          "200 rows, then 20 timings: the guide fitted once, on 200 rows (got %d rows, fitted "
          "%d, on %d)", T.rows.n, T.guide_fitted, T.guide_rows);
    T.ntrace = 0;
    mq_tune_search_guided(&T, &s.p, s.cs, s.n); /* 20 more, of candidates not yet timed */
    CHECK(T.rows.n == 240 && T.guide_rows >= 225 && T.guide_rows <= 240,
          "20 more timings: refitted once the rows reached 225 (got %d rows, last fit on %d)",
          T.rows.n, T.guide_rows);
    free(trace);
    free(T.rows.f);
    free(T.rows.t);
    free(T.guide);
    free(s.cs);
    free(s.truth);
}

int main(void)
{
    test_gp();
    test_guided();
    test_guide_refits();
    test_replay();
    return check_done("search");
}
