/* test_table.c - dispatch tables: built from choices and written, then
 * loaded, every lookup returns the written candidate; each fallback level
 * (exact, nearest, default, builtin) is reached; a table carrying its cost
 * model chooses unseen shapes by it (its calibrated rows, else the whole
 * grid: both checked against a brute-force argmin), and refuses a bad
 * cost-model line; a newer schema, another chip and a malformed row are
 * refused; mq_gemm asks the context's table; and a tune killed while it
 * runs leaves the previous table intact. */
#include <libgen.h>
#include <math.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "chips.h"
#include "model.h"
#include "mq.h"
#include "results.h"
#include "model_store.h"
#include "moe_rows.h"
#include "space.h"
#include "table_write.h"
#include "testdata.h"
#include "work_features.h"

static char dir[] = "/tmp/mq-test-table-XXXXXX";

static const char *in_dir(const char *name)
{
    static char buf[4][512];
    static int slot;
    char *p = buf[slot++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static mq_choice choice(mq_format f, int M, int N, int K, mq_candidate c)
{
    mq_choice ch;
    memset(&ch, 0, sizeof ch);
    ch.p = (mq_problem){f, M, N, K, 128};
    ch.c = c;
    ch.expected_s = 1e-3 * M;
    ch.measured = 1;
    ch.speedup[0] = 1.5;
    return ch;
}

static int same(const mq_candidate *a, const mq_candidate *b)
{
    return a->variant == b->variant && !memcmp(&a->p, &b->p, sizeof a->p);
}

static void test_round_trip(void)
{
    mq_candidate small = {MQ_VAR_FUSED_FP4, {8, 1024, 128, 0, 1}};
    mq_candidate mid = {MQ_VAR_FUSED_FP4, {16, 256, 128, 0, 1}};
    mq_candidate big = {MQ_VAR_MARLIN_FP4, {64, 128, 32, 0, 1}};
    mq_candidate u4c = {MQ_VAR_FUSED_U4, {16, 512, 128, 0, 1}};
    mq_choice ch[] = {
        choice(MQ_FMT_FP4, 1, 4096, 4096, small),  choice(MQ_FMT_FP4, 4, 4096, 4096, small),
        choice(MQ_FMT_FP4, 16, 4096, 4096, mid),   choice(MQ_FMT_FP4, 64, 4096, 4096, big),
        choice(MQ_FMT_FP4, 1, 14336, 4096, small), choice(MQ_FMT_FP4, 64, 14336, 4096, big),
        choice(MQ_FMT_U4, 1, 4096, 4096, u4c),
        choice(MQ_FMT_FP4, 4, 4096, 4096, small), /* a second layer of the same shape */
    };
    int nch = (int)(sizeof ch / sizeof ch[0]);
    mq_table_entry *e;
    int n = mq_table_build(ch, nch, &e);
    /* fp4 4096x4096: {1..4 small} {5..16 mid} {17.. big}; fp4 14336: {1 small}
     * {2.. big}; u4: {1..}; defaults: fp4 (small: 3 shapes of 6), u4 */
    CHECK(n == 8, "8 rows (3 + 2 + 1 merged M ranges, 2 defaults), got %d", n);
    char err[512];
    CHECK(mq_table_write_csv(in_dir("table.csv"), "m4max", "cpu", "measured", mq_kernel_build(), e, n, NULL, NULL, err,
                             sizeof err) == 0,
          "write the CSV: %s", err);
    CHECK(mq_table_write_header(in_dir("table.h"), "m4max", "measured", mq_kernel_build(), e, n, NULL, NULL, err,
                                sizeof err) == 0,
          "write the header: %s", err);
    mq_table *t;
    mq_error me;
    CHECK(mq_table_load(in_dir("table.csv"), "m4max", &t, &me) == MQ_OK, "load: %s", me.msg);
    if (!t) {
        free(e);
        return;
    }
    CHECK(!strcmp(mq_table_kernel_build(t), mq_kernel_build()) && mq_kernel_build()[0] == 'k',
          "the table says the kernel build it was written for: expected %s, got '%s'",
          mq_kernel_build(), mq_table_kernel_build(t));
    int bad = 0;
    for (int i = 0; i < nch; i++) {
        mq_lookup_level lv;
        mq_candidate got = mq_table_lookup(t, &ch[i].p, NULL, &lv);
        bad += !same(&got, &ch[i].c) || lv != MQ_LOOKUP_EXACT;
    }
    CHECK(bad == 0, "every written shape looks up its own candidate, exactly (%d wrong)", bad);
    mq_lookup_level lv;
    mq_problem q = {MQ_FMT_FP4, 10, 4096, 4096, 128};
    mq_candidate got = mq_table_lookup(t, &q, NULL, &lv);
    CHECK(same(&got, &mid) && lv == MQ_LOOKUP_EXACT, "M=10 falls in the (4, 16] range");
    q.M = 2000;
    got = mq_table_lookup(t, &q, NULL, &lv);
    CHECK(same(&got, &big) && lv == MQ_LOOKUP_EXACT, "M=2000 falls in the last range");
    q = (mq_problem){MQ_FMT_FP4, 1, 12288, 4096, 128}; /* nearest: 14336x4096 */
    got = mq_table_lookup(t, &q, NULL, &lv);
    CHECK(same(&got, &small) && lv == MQ_LOOKUP_NEAREST,
          "an unseen 12288x4096 takes the nearest shape 14336x4096's candidate (level %s)",
          mq_lookup_level_name(lv));
    /* with 4 cores known: 1024-wide tiles give 12 threadgroups (3 full rounds),
     * as good as the neighbour's 14 tiles rescaled: kept as it is */
    mq_limits four = mq_limits_default();
    four.cores = 4;
    got = mq_table_lookup(t, &q, &four, &lv);
    CHECK(same(&got, &small), "12 tiles on 4 cores fill them: tile_n stays 1024");
    /* 5 cores: 12 threadgroups fill 12/15; 14 tiles of 880 fill 14/15: rescaled */
    mq_limits five = four;
    five.cores = 5;
    mq_candidate rescaled = small;
    rescaled.p.tile_n = 880;
    got = mq_table_lookup(t, &q, &five, &lv);
    CHECK(same(&got, &rescaled) && lv == MQ_LOOKUP_NEAREST,
          "on 5 cores the neighbour's 14 column tiles (tile_n 880) fill them better; got "
          "tile_n %d", got.p.tile_n);
    q = (mq_problem){MQ_FMT_FP4, 1, 4096, 4096, 64}; /* no group-64 shapes: default */
    got = mq_table_lookup(t, &q, NULL, &lv);
    CHECK(same(&got, &small) && lv == MQ_LOOKUP_DEFAULT,
          "group 64 (no shapes) takes the chip's fp4 default (level %s)",
          mq_lookup_level_name(lv));
    q = (mq_problem){MQ_FMT_TRELLIS3, 1, 4096, 4096, 128}; /* nothing for trellis */
    got = mq_table_lookup(t, &q, NULL, &lv);
    mq_candidate seed = mq_default_candidate(&q);
    CHECK(same(&got, &seed) && lv == MQ_LOOKUP_BUILTIN,
          "trellis3 (not in the table) takes the seed rule (level %s)", mq_lookup_level_name(lv));
    q = (mq_problem){MQ_FMT_FP4, 4, 4096, 256, 128}; /* tk=128 is legal; table's small... */
    got = mq_table_lookup(NULL, &q, NULL, &lv);
    CHECK(lv == MQ_LOOKUP_BUILTIN, "no table at all: the seed rule");

    /* mq_gemm with no candidate asks the context's table */
    mq_ctx *ctx;
    mq_ctx_create(2, &ctx, &me);
    mq_problem gp = {MQ_FMT_FP4, 1, 4096, 4096, 128};
    mq_weights w;
    float *W = malloc(sizeof(float) * 4096 * 4096);
    td_fill_weights(W, 4096, 4096, 3);
    mq_quantize(MQ_FMT_FP4, W, 4096, 4096, 128, NULL, &w, &me);
    free(W);
    uint16_t *A = malloc(2 * 4096);
    float *C = malloc(4 * 4096);
    td_fill_activations(A, 1, 4096, 4);
    mq_trace_entry tr[64];
    int count = 0;
    mq_ctx_set_table(ctx, t);
    mq_ctx_set_trace(ctx, tr, 64, &count);
    CHECK(mq_gemm(ctx, &gp, &w, A, C, NULL, NULL, &me) == MQ_OK, "gemm: %s", me.msg);
    CHECK(count == 4, "the table's 8x1024 tiles ran: 4 threadgroups for N=4096, got %d", count);
    mq_ctx_set_trace(ctx, NULL, 0, NULL);
    mq_ctx_destroy(ctx);
    mq_weights_free(&w);
    free(A);
    free(C);
    mq_table_free(t);

    /* the generated header compiles into an identical table */
    FILE *h = fopen(in_dir("table.h"), "r");
    char text[16384];
    size_t len = h ? fread(text, 1, sizeof text - 1, h) : 0;
    if (h)
        fclose(h);
    text[len] = '\0';
    CHECK(strstr(text, "{MQ_FMT_FP4, 128, 4096, 4096, 1, 4, {MQ_VAR_FUSED_FP4, {8, 1024, 128, 0, 1}}") != NULL &&
              strstr(text, "mq_table_m4max_count = 8;"),
          "the header lists the rows as mq_table_row initializers");
    free(e);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

/* What the model lookup must answer, found the slow way: over the rows of
 * p's format, group and M range, the prediction on p times the row's
 * measured / predicted ratio at its own shape (1 for a kernel the model has
 * a factor for); none legal: the lowest
 * prediction over every legal, sensible candidate of the space. */
static mq_candidate brute_model_pick(const mq_table_entry *e, int n, const mq_problem *p,
                                     const mq_chip *chip, const mq_model *m, int *from_rows)
{
    double best = INFINITY;
    mq_candidate pick = {0};
    for (int i = 0; i < n; i++) {
        const mq_table_row *r = &e[i].row;
        mq_features f, g;
        if (r->format != p->format || r->group != p->group || r->N == 0 || p->M < r->m_lo ||
            p->M > r->m_hi || mq_features_compute(p, &r->c, chip, &f, NULL) != MQ_OK)
            continue;
        mq_problem at = {r->format, r->expected_m, r->N, r->K, r->group};
        /* a kernel the model holds a factor for is not calibrated on its row */
        int has = mq_model_has_kernel(m, r->c.variant, (int)r->format, r->c.p.tile_m,
                                      r->c.p.tile_n, r->c.p.tile_k);
        double ratio = !has && mq_features_compute(&at, &r->c, chip, &g, NULL) == MQ_OK
                           ? r->expected_s / mq_model_predict(m, &g) : 1;
        double s = mq_model_predict(m, &f) * ratio;
        if (s < best) {
            best = s;
            pick = r->c;
        }
    }
    *from_rows = isfinite(best);
    if (*from_rows)
        return pick;
    mq_space sp;
    mq_space_enumerate(p, chip, MQ_SPACE_FULL, &sp);
    for (int i = 0; i < sp.n; i++) {
        mq_features f;
        if (!sp.e[i].legal)
            continue;
        mq_features_from_plan(p, &sp.e[i].c, &sp.e[i].plan, chip, &f);
        double s = mq_model_predict(m, &f);
        if (s < best) {
            best = s;
            pick = sp.e[i].c;
        }
    }
    mq_space_free(&sp);
    return pick;
}

static void test_model_lookup(void)
{
    mq_chip chip;
    char err[4400];
    CHECK(mq_chip_load_named(mq_chips_default_path(), "m4max", &chip, err, sizeof err) == 0,
          "m4max from chips.csv: %s", err);
    const double shared[] = {1e-5, 0.25, 0.6, 0.25, 2e-6, 0, 0, 0, 2e-8, 1e-9, 1e-10};
    mq_model m = td_model(shared, (int)(sizeof shared / sizeof shared[0]));
    mq_candidate small = {MQ_VAR_FUSED_FP4, {8, 256, 64, 0, 1}};
    mq_candidate mid = {MQ_VAR_MLX_SPLITK, {16, 64, 64, 0, 4}};
    mq_candidate big = {MQ_VAR_MARLIN_FP4, {64, 64, 32, 0, 1}};
    mq_choice ch[] = {
        choice(MQ_FMT_FP4, 1, 4096, 4096, small),  choice(MQ_FMT_FP4, 16, 4096, 4096, mid),
        choice(MQ_FMT_FP4, 64, 4096, 4096, big),   choice(MQ_FMT_FP4, 1, 14336, 4096, mid),
        choice(MQ_FMT_FP4, 64, 14336, 4096, big),  choice(MQ_FMT_FP4, 1, 4096, 14336, small),
    };
    int nch = (int)(sizeof ch / sizeof ch[0]);
    mq_table_entry *e;
    int n = mq_table_build(ch, nch, &e);
    const mq_problem unseen[] = {
        {MQ_FMT_FP4, 1, 12288, 4096, 128},  {MQ_FMT_FP4, 3, 5120, 13824, 128},
        {MQ_FMT_FP4, 16, 3584, 14336, 128}, {MQ_FMT_FP4, 200, 1408, 2048, 128},
        {MQ_FMT_FP4, 1, 4096, 4096, 64}, /* no group-64 rows: the whole grid */
        {MQ_FMT_U4, 4, 2048, 2048, 128},    /* no u4 rows: the whole grid */
    };
    /* the kernel the terms alone would pick for a shape the grid answers
     * runs 100x slower than they say: the table must carry that */
    int fr;
    mq_candidate plain = brute_model_pick(e, n, &unseen[4], &chip, &m, &fr);
    mq_kernel_factor slow = {(unsigned char)plain.variant, (unsigned char)unseen[4].format,
                             (unsigned short)plain.p.tile_m, (unsigned short)plain.p.tile_n,
                             (unsigned short)plain.p.tile_k, 1, 100.0f};
    CHECK(mq_model_set_kernel_factor(&m, &slow) == 0, "a kernel factor is accepted");
    mq_candidate slowed = brute_model_pick(e, n, &unseen[4], &chip, &m, &fr);
    CHECK(!same(&plain, &slowed), "a kernel 100x slower than its terms is no longer picked");
    /* the small kernel measured (factor 1): its rows are not calibrated any more */
    mq_kernel_factor known = {(unsigned char)small.variant, (unsigned char)MQ_FMT_FP4,
                              (unsigned short)small.p.tile_m, (unsigned short)small.p.tile_n,
                              (unsigned short)small.p.tile_k, 3, 1.0f};
    CHECK(mq_model_set_kernel_factor(&m, &known) == 0 &&
              mq_model_has_kernel(&m, small.variant, MQ_FMT_FP4, small.p.tile_m,
                                  small.p.tile_n, small.p.tile_k) &&
              !mq_model_has_kernel(&m, mid.variant, MQ_FMT_FP4, mid.p.tile_m, mid.p.tile_n,
                                   mid.p.tile_k),
          "expected the model to hold a factor for the small kernel and none for the mid one");
    CHECK(mq_table_write_csv(in_dir("model-table.csv"), "m4max", "cpu", "measured", mq_kernel_build(), e, n,
                             chip.v, &m, err, sizeof err) == 0,
          "write a table with its cost model: %s", err);
    mq_table *t = NULL;
    mq_error me;
    CHECK(mq_table_load(in_dir("model-table.csv"), "m4max", &t, &me) == MQ_OK &&
              mq_table_has_model(t),
          "the table loads with its cost model: %s", me.msg);
    if (!t) {
        free(e);
        return;
    }
    mq_lookup_level lv;
    int bad = 0;
    for (int i = 0; i < nch; i++) {
        mq_candidate got = mq_table_lookup(t, &ch[i].p, NULL, &lv);
        bad += !same(&got, &ch[i].c) || lv != MQ_LOOKUP_EXACT;
    }
    CHECK(bad == 0, "a table with a model still answers its own shapes exactly (%d wrong)", bad);
    int nrows = 0, ngrid = 0;
    mq_limits lim = chip.lim;
    for (size_t i = 0; i < sizeof unseen / sizeof unseen[0]; i++) {
        int from_rows;
        mq_candidate want = brute_model_pick(e, n, &unseen[i], &chip, &m, &from_rows);
        mq_candidate got = mq_table_lookup(t, &unseen[i], &lim, &lv);
        char a[128], b[128];
        mq_candidate_str(&want, a, sizeof a);
        mq_candidate_str(&got, b, sizeof b);
        CHECK(lv == MQ_LOOKUP_MODEL && same(&got, &want),
              "%s M=%d %dx%d g%d: the model's pick %s (%s), got %s (level %s)",
              mq_format_name(unseen[i].format), unseen[i].M, unseen[i].N, unseen[i].K,
              unseen[i].group, a, from_rows ? "from the rows" : "from the grid", b,
              mq_lookup_level_name(lv));
        mq_candidate no_lim = mq_table_lookup(t, &unseen[i], NULL, &lv);
        CHECK(same(&no_lim, &got), "with no limits given, the table's chip's limits are used");
        nrows += from_rows;
        ngrid += !from_rows;
    }
    CHECK(nrows >= 3 && ngrid >= 2, "both ways were exercised (%d from rows, %d from the grid)",
          nrows, ngrid);
    mq_table_free(t);
    free(e);

    /* a bad cost-model line is refused, naming it */
    FILE *f = fopen(in_dir("model-table.csv"), "r");
    static char text[65536];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    const struct {
        const char *from, *to, *says;
    } cases[] = {
        {"# cost-model: term dispatch - ", "# cost-model: term launch - ", "unknown term 'launch'"},
        {"# cost-model: term wave - ", "# cost-model: term wave - -", "out of range"},
        {"# cost-model: chip gpu_cores - ", "# not-a-model: chip gpu_cores - ",
         "chip figure 'gpu_cores' is missing"},
        {"# cost-model: term traffic - ", "# cost-model: term traffic gemm_nope ",
         "unknown variant"},
        {"# cost-model: chip simd_width - 32", "# cost-model: chip simd_width - 32 extra",
         "expected KIND NAME VARIANT VALUE"},
        {"# cost-model: kernel fp4:", "# cost-model: kernel fp9:", "fp9"},
        {"# cost-model: kernel fp4:", "# cost-model: kernel fp4:x", "expected a kernel"},
        {"# cost-model: kernel fp4:", "# cost-model: kernel fp4:-", "expected a kernel"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *at = strstr(text, cases[i].from);
        CHECK(at != NULL, "the written table has a line '%s'", cases[i].from);
        if (!at)
            continue;
        static char edited[70000];
        size_t pre = (size_t)(at - text);
        snprintf(edited, sizeof edited, "%.*s%s%s", (int)pre, text, cases[i].to,
                 at + strlen(cases[i].from));
        write_text(in_dir("bad-model.csv"), edited);
        t = NULL;
        CHECK(mq_table_load(in_dir("bad-model.csv"), NULL, &t, &me) != MQ_OK && !t &&
                  strstr(me.msg, "bad-model.csv") && strstr(me.msg, cases[i].says),
              "'%s' is refused saying '%s': '%s'", cases[i].to, cases[i].says, me.msg);
        mq_table_free(t);
    }
}

static void test_refusals(void)
{
    mq_table *t = NULL;
    mq_error e;
    CHECK(mq_table_load(in_dir("table.csv"), "m1", &t, &e) != MQ_OK &&
              strstr(e.msg, "the table is for chip 'm4max', not 'm1'"),
          "a foreign table is refused: '%s'", e.msg);
    FILE *f = fopen(in_dir("table.csv"), "r");
    char text[16384];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    char *s = strstr(text, "schema=1");
    s[7] = '2';
    write_text(in_dir("newer.csv"), text);
    CHECK(mq_table_load(in_dir("newer.csv"), NULL, &t, &e) != MQ_OK &&
              strstr(e.msg, "table schema 2 is newer than this library's 1"),
          "a newer schema is refused: '%s'", e.msg);
    s[7] = '1';
    char bad[17000];
    snprintf(bad, sizeof bad,
             "%sfp4,128,x,4096,1,1,marlin_gemm_fp4,64,64,32,0,1,1e-3,measured,1,1,1,1,0,0,0,0,0,0\n",
             text);
    write_text(in_dir("bad.csv"), bad);
    CHECK(mq_table_load(in_dir("bad.csv"), NULL, &t, &e) != MQ_OK &&
              strstr(e.msg, "bad.csv:12: N: 'x' is not an integer"),
          "a malformed row is refused with its line: '%s'", e.msg);
    CHECK(mq_table_load(in_dir("missing.csv"), NULL, &t, &e) != MQ_OK &&
              strstr(e.msg, "cannot open"),
          "a missing table: '%s'", e.msg);
}

static int run_tune(const char *tune, const char *out, int kill_after_ms)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(127);
        execl(tune, tune, "--chip", "m4max", "--suite", "smoke", "--m", "all", "--out-dir", out,
              "--quiet", (char *)NULL);
        _exit(127);
    }
    if (kill_after_ms) {
        struct timespec ts = {0, kill_after_ms * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_killed_tune(const char *tune)
{
    char out[600];
    snprintf(out, sizeof out, "%s/m4max", dir);
    CHECK(run_tune(tune, out, 0) == 0, "tune --chip m4max on the smoke suite exits 0");
    char path[700];
    snprintf(path, sizeof path, "%s/table.csv", out);
    FILE *f = fopen(path, "r");
    char before[65536] = "", after[65536] = "";
    size_t nb = f ? fread(before, 1, sizeof before - 1, f) : 0;
    if (f)
        fclose(f);
    CHECK(nb > 100, "a first table was written (%zu bytes)", nb);
    int killed = 0;
    for (int ms = 20; ms <= 320; ms *= 2) /* kill at several points of a second run */
        killed += run_tune(tune, out, ms) == 128 + SIGKILL;
    f = fopen(path, "r");
    size_t na = f ? fread(after, 1, sizeof after - 1, f) : 0;
    if (f)
        fclose(f);
    CHECK(killed > 0, "at least one run was killed midway (%d)", killed);
    mq_table *t;
    mq_error e;
    CHECK(mq_table_load(path, "m4max", &t, &e) == MQ_OK,
          "after the kills the table still loads: %s", e.msg);
    mq_table_free(t);
    /* the same build and inputs write the same rows; only the date line may differ */
    char *rb = strchr(before, '\n'), *ra = strchr(after, '\n');
    CHECK(na > 100 && rb && ra && !strcmp(rb, ra),
          "the table is the previous one or a complete new one, never a half table");
}

/* A predicted chip with stored measurements of its own (here: synthetic
 * "metal" rows from a known model) gets its coefficients from them. */
static void test_stored_measurements(const char *tune)
{
    char err[512], out[600], path[700];
    snprintf(out, sizeof out, "%s/stored", dir);
    snprintf(path, sizeof path, "%s/measured.csv", out);
    mkdir(out, 0755);
    mq_chip chip;
    if (mq_chip_load_named(mq_chips_default_path(), "m4max", &chip, err, sizeof err)) {
        CHECK(0, "chips: %s", err);
        return;
    }
    mq_model truth = td_model((const double[]){4e-6, 1.2, 1.5, 1.3, 1e-6, 0, 0, 0, 10e-9}, 9);
    mq_results_writer w;
    CHECK(mq_results_open(path, &w, err, sizeof err) == 0, "measured.csv: %s", err);
    int rows = 0;
    static mq_features feats[4096];
    static double times[4096];
    static const int Ms[] = {1, 16, 128};
    for (int i = 0; i < 3; i++) {
        mq_problem p = {MQ_FMT_FP4, Ms[i], 4096, 4096, 128};
        mq_space sp;
        mq_space_enumerate(&p, &chip, MQ_SPACE_FULL, &sp);
        for (int j = 0; j < sp.n; j += 3) { /* every third legal point */
            mq_features f;
            if (!sp.e[j].legal || mq_features_compute(&p, &sp.e[j].c, &chip, &f, NULL))
                continue;
            mq_result r;
            memset(&r, 0, sizeof r);
            mq_result_stamp(&r);
            snprintf(r.chip, sizeof r.chip, "m4max");
            snprintf(r.backend, sizeof r.backend, "metal");
            r.p = p;
            r.c = sp.e[j].c;
            snprintf(r.status, sizeof r.status, "ok");
            r.st.median = mq_model_predict(&truth, &f);
            mq_results_append(&w, &r, err, sizeof err);
            if (rows < 4096) {
                feats[rows] = f;
                times[rows] = r.st.median;
            }
            rows++;
        }
        mq_space_free(&sp);
    }
    mq_results_close(&w);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(127);
        execl(tune, tune, "--chip", "m4max", "--suite", "smoke", "--m", "1", "--out-dir", out,
              "--quiet", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tune with stored measurements exits 0");
    snprintf(path, sizeof path, "%s/model.csv", out);
    FILE *f = fopen(path, "r");
    char line1[8192] = "";
    if (f) {
        if (!fgets(line1, sizeof line1, f))
            line1[0] = '\0';
        fclose(f);
    }
    CHECK(strstr(line1, "measured on m4max") != NULL,
          "the model says it was fitted on m4max's own %d rows: '%.120s'", rows, line1);
    mq_model got;
    double mape = 1, rho = 0;
    CHECK(mq_model_read(path, &got, err, sizeof err) == 0, "model.csv reads back: %s", err);
    mq_model_quality(&got, feats, times, rows < 4096 ? rows : 4096, &mape, &rho);
    CHECK(mape < 0.02 && rho > 0.99,
          "the stored model predicts the stored rows (MAPE %.4f < 2%%, Spearman %.4f > 0.99)",
          mape, rho);
}

/* The MoE block's rows: made from moe-bench results (the fastest verified
 * fused row per layer and token count, ranges merged, other backends'
 * rows left out), written with the dense rows, loaded back, and served by
 * mq_table_lookup_moe only. */
/* One moe-bench results row (schema 2, every column) of the trellis3
 * layer 256x384 with 8 experts, top 2. */
static int moe_row(char *b, size_t n, const char *host, int tokens, const char *path,
                   const char *cand, const char *status, double median, const char *backend,
                   const char *device)
{
    return snprintf(b, n, "2,\"0.2.0\",\"r\",\"%s\",\"2026-11-25T00:00:00Z\",\"m\",\"trellis3\",%d,8,2,"
                          "256,384,128,\"uniform\",1,1,2,1,\"%s\",\"%s\",\"%s\",\"\",%g,%g,%g,5,1,0.1,"
                          "\"%s\",\"%s\",0\n",
                    host, tokens, path, cand, status, median, median, median, backend, device);
}

/* The schema 2 file text (hdr, then rows) as schema 3: each row of kernel
 * build "kA", except row `odd` (1-based; 0: none) of "kB". */
static void moe_as_schema3(const char *text, const char *hdr, int odd, char *out, size_t n)
{
    size_t len = (size_t)snprintf(out, n, "%.*s,kernel_build\n", (int)strlen(hdr) - 1, hdr);
    const char *p = text + strlen(hdr);
    for (int row = 1; *p && len < n; row++) {
        const char *e = strchr(p, '\n');
        len += (size_t)snprintf(out + len, n - len, "3%.*s,\"%s\"\n", (int)(e - p) - 1, p + 1,
                                row == odd ? "kB" : "kA");
        p = e + 1;
    }
}

/* Schema 3 rows say their kernel build: tune --moe-results takes it, and
 * refuses the counted rows of two builds. */
static void moe_rows_builds(const char *text, const char *hdr)
{
    char t3[8192], kb[MQ_MOE_KBUILD_LEN] = "x", err[512];
    mq_table_entry *e = NULL;
    moe_as_schema3(text, hdr, 0, t3, sizeof t3);
    write_text(in_dir("moe3.csv"), t3);
    int n = mq_moe_table_entries(in_dir("moe3.csv"), "cpu", "", "h", &e, kb, err, sizeof err);
    CHECK(n == 2 && !strcmp(kb, "kA"),
          "schema 3: the same 2 rows, of kernel build kA: got %d rows, build '%s' (%s)", n, kb,
          n < 0 ? err : "");
    free(e);
    e = NULL;
    moe_as_schema3(text, hdr, 3, t3, sizeof t3); /* a counted row (cpu on h) of kB */
    write_text(in_dir("moe3.csv"), t3);
    n = mq_moe_table_entries(in_dir("moe3.csv"), "cpu", "", "h", &e, kb, err, sizeof err);
    CHECK(n == -1 && strstr(err, "moe3.csv:4:") && strstr(err, "'kB'") && strstr(err, "'kA'"),
          "rows of two kernel builds: refused, naming the line and both builds: got %d (%s)", n,
          err);
    free(e);
    e = NULL;
    moe_as_schema3(text, hdr, 8, t3, sizeof t3); /* another host's row of kB: not counted */
    write_text(in_dir("moe3.csv"), t3);
    n = mq_moe_table_entries(in_dir("moe3.csv"), "cpu", "", "h", &e, kb, err, sizeof err);
    CHECK(n == 2 && !strcmp(kb, "kA"),
          "another host's row of another build does not count: expected 2 rows of kA, got %d "
          "'%s' (%s)", n, kb, n < 0 ? err : "");
    free(e);
}

static void test_moe_rows(void)
{
    static const char *hdr =
        "schema,tool_version,git_rev,host,date,model,format,tokens,experts,top_k,hidden,inter,"
        "group,routing,route_max_tokens,route_mean_tokens,route_touched,threads,path,candidate,"
        "status,error,median_s,p10_s,p90_s,reps,touched_gbs,worst_of_bound,backend,device,"
        "read_probe_gbs\n";
    const char *c1 = "gemm_trellis_moe[gemv_trellis_decode tm=1 tn=64 tk=128 tg=0 sk=1] "
                     "i_split=2 fuse_gate_up=1";
    const char *c2 = "gemm_trellis_moe[gemv_trellis_decode tm=4 tn=64 tk=128 tg=0 sk=1] "
                     "i_split=1 fuse_gate_up=1";
    char text[8192];
    size_t len = (size_t)snprintf(text, sizeof text, "%s", hdr);
    len += (size_t)moe_row(text + len, sizeof text - len, "h", 1, "fused", c1, "ok", 2e-4, "cpu", "");
    len += (size_t)moe_row(text + len, sizeof text - len, "h", 1, "fused", c2, "ok", 3e-4, "cpu", "");
    len += (size_t)moe_row(text + len, sizeof text - len, "h", 2, "fused", c1, "ok", 3e-4, "cpu", "");
    len += (size_t)moe_row(text + len, sizeof text - len, "h", 4, "fused", c2, "ok", 5e-4, "cpu", "");
    len += (size_t)moe_row(text + len, sizeof text - len, "h", 4, "fused", c1, "wrong", 1e-5, "cpu", "");
    len += (size_t)moe_row(text + len, sizeof text - len, "h", 4, "unfused", "x", "ok", 1e-5, "cpu", "");
    len += (size_t)moe_row(text + len, sizeof text - len, "h", 4, "fused", c1, "ok", 1e-6, "cuda", "GPU");
    len += (size_t)moe_row(text + len, sizeof text - len, "other", 4, "fused", c1, "ok", 1e-6, "cpu", "");
    write_text(in_dir("moe.csv"), text);
    mq_table_entry *me = NULL;
    char err[512];
    char kb[MQ_MOE_KBUILD_LEN] = "x";
    int n = mq_moe_table_entries(in_dir("moe.csv"), "cpu", "", "h", &me, kb, err, sizeof err);
    CHECK(n == 2 && me[0].row.m_lo == 1 && me[0].row.m_hi == 2 && me[0].row.i_split == 2 &&
              me[1].row.m_lo == 3 && me[1].row.m_hi == 1 << 30 && me[1].row.c.p.tile_m == 4 &&
              me[0].row.experts == 8 && me[0].row.top_k == 2 && me[0].row.N == 256 &&
              me[0].row.K == 384 && fabs(me[0].row.expected_s - 2e-4) < 1e-12,
          "expected 2 MoE rows (tokens 1-2: the faster of token 1's two rows, merged with "
          "token 2; 3 on: tile_m 4), the wrong, unfused and foreign rows left out: got %d (%s)",
          n, n < 0 ? err : "");
    CHECK(kb[0] == '\0', "rows of schema 2 record no kernel build: expected \"\", got '%s'", kb);
    moe_rows_builds(text, hdr);
    mq_table_entry *none = NULL;
    CHECK(mq_moe_table_entries(in_dir("moe.csv"), "cuda", "H200", "h", &none, NULL, err,
                               sizeof err) ==
                  -1 &&
              strstr(err, "no verified, timed fused rows of backend cuda on H200"),
          "no rows of this device: '%s'", err);
    len = (size_t)snprintf(text, sizeof text, "%s", hdr);
    moe_row(text + len, sizeof text - len, "h", 1, "fused", "gemm_trellis_moe[x]", "ok", 2e-4, "cpu", "");
    write_text(in_dir("moe-bad.csv"), text);
    mq_table_entry *bad = NULL;
    CHECK(mq_moe_table_entries(in_dir("moe-bad.csv"), "cpu", "", "h", &bad, NULL, err,
                               sizeof err) ==
                  -1 && strstr(err, "moe-bad.csv:2:") && strstr(err, "candidate"),
          "an unreadable candidate is named with its line: '%s'", err);
    /* written after the dense rows, read back, served by the MoE lookup only */
    mq_candidate dc = {MQ_VAR_GEMV_DECODE, {1, 64, 128, 0, 1}};
    mq_choice ch[1] = {choice(MQ_FMT_FP4, 1, 4096, 4096, dc)};
    mq_table_entry *de = NULL;
    int nd = mq_table_build(ch, 1, &de);
    mq_table_entry *all = calloc((size_t)(nd + n), sizeof *all);
    if (nd > 0 && n > 0 && all) {
        memcpy(all, de, sizeof *de * (size_t)nd);
        memcpy(all + nd, me, sizeof *me * (size_t)n);
    }
    CHECK(mq_table_write_csv(in_dir("moe-table.csv"), "host", "cpu", "measured", mq_kernel_build(), all, nd + n,
                             NULL, NULL, err, sizeof err) == 0,
          "the table with MoE rows is written: %s", err);
    mq_table *t = NULL;
    mq_error e;
    const mq_table_row *rows;
    CHECK(mq_table_load(in_dir("moe-table.csv"), "host", &t, &e) == MQ_OK &&
              mq_table_moe_rows(t, &rows) == 2 && mq_table_rows(t, &rows) == nd,
          "loaded back: %d dense and 2 MoE rows (%s)", nd, e.msg);
    mq_lookup_level lv = MQ_LOOKUP_EXACT;
    mq_problem dp = {MQ_FMT_FP4, 1, 4096, 4096, 128};
    mq_candidate got = mq_table_lookup(t, &dp, NULL, &lv);
    CHECK(lv == MQ_LOOKUP_EXACT && same(&got, &dc), "the dense lookup still answers exactly");
    mq_moe_problem mp = {MQ_FMT_TRELLIS3, 2, 256, 384, 8, 2, 128};
    mq_moe_candidate mc = mq_table_lookup_moe(t, &mp, 4, &lv);
    CHECK(lv == MQ_LOOKUP_EXACT && mc.i_split == 2 && mc.inner.p.tile_m == 1,
          "2 tokens of the tuned layer: its row, exactly (level %s, i_split %d)",
          mq_lookup_level_name(lv), mc.i_split);
    mp.tokens = 9;
    mc = mq_table_lookup_moe(t, &mp, 4, &lv);
    CHECK(lv == MQ_LOOKUP_EXACT && mc.inner.p.tile_m == 4, "9 tokens: the last range's row");
    mq_moe_problem other = {MQ_FMT_TRELLIS3, 3, 512, 768, 16, 4, 128};
    mc = mq_table_lookup_moe(t, &other, 4, &lv);
    CHECK(lv == MQ_LOOKUP_NEAREST && mc.inner.p.tile_m == 4,
          "another layer: the nearest layer's row for its tokens (level %s)",
          mq_lookup_level_name(lv));
    mq_moe_problem small = {MQ_FMT_TRELLIS3, 1, 256, 128, 8, 2, 128}; /* 1 group: no i_split 2 */
    mc = mq_table_lookup_moe(t, &small, 4, &lv);
    CHECK(lv == MQ_LOOKUP_BUILTIN && mc.i_split == 1,
          "a row whose candidate is not legal for the problem is passed over (level %s)",
          mq_lookup_level_name(lv));
    mq_moe_problem t4 = {MQ_FMT_TRELLIS4, 1, 256, 384, 8, 2, 128};
    mq_table_lookup_moe(t, &t4, 4, &lv);
    CHECK(lv == MQ_LOOKUP_BUILTIN, "another format: the built-in default");
    mq_table_free(t);
    free(all);
    free(de);
    free(me);
}

int main(int argc, char **argv)
{
    (void)argc;
    if (!mkdtemp(dir))
        return 1;
    char self[4096], tune[4200];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(tune, sizeof tune, "%s/../tune", dirname(self));
    test_round_trip();
    test_refusals();
    test_model_lookup();
    test_moe_rows();
    test_killed_tune(tune);
    test_stored_measurements(tune);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_done("table");
}
