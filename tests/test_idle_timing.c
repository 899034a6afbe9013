/* test_idle_timing.c - the idle column: where a backend's samples are
 * launches queued back to back (cuda's default), mq_measure times
 * MQ_IDLE_REPS more launches on an idle device and keeps their median
 * (idle_s) apart from the samples; the results store carries it as schema
 * 2's last column, still reads schema 1 files and appends to them in their
 * own width. The backend here is the CPU model with a clock of its own, so
 * the figures are known exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "measure.h"
#include "results.h"

static char tmpdir[] = "/tmp/mq-test-idle-XXXXXX";

static const char *tmp_path(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

/* A backend that queues: the CPU model's run, a device clock of 1 ms a
 * queued launch and 3 ms one launched idle, counting each kind. */
static mq_backend *inner;
static int idle_now, queued_runs, idle_runs, switches;

static mq_status queue_run(mq_backend *b, const mq_problem *p, const mq_weights *w,
                           const uint16_t *A, float *C, const mq_candidate *c,
                           const mq_plan *plan, mq_error *err)
{
    (void)b;
    idle_now ? idle_runs++ : queued_runs++;
    return inner->run(inner, p, w, A, C, c, plan, err);
}

static double queue_time(const mq_backend *b)
{
    (void)b;
    return idle_now ? 3e-3 : 1e-3;
}

static void queue_set_idle(mq_backend *b, int idle)
{
    (void)b;
    idle_now = idle;
    switches++;
}

static void test_measure_idle(void)
{
    mq_error e;
    mq_backend_opts bo = {2};
    inner = mq_backend_cpu_open(&bo, &e);
    CHECK(inner != NULL, "the cpu backend: %s", e.msg);
    if (!inner)
        return;
    mq_backend q = {.name = "queued", .run = queue_run, .device_time = queue_time,
                    .set_idle_timing = queue_set_idle};
    mq_problem p = {MQ_FMT_FP4, 4, 64, 256, 64};
    mq_bench_problem bp;
    memset(&bp, 0, sizeof bp);
    CHECK(mq_bench_problem_setup(&bp, &p, 1, NULL, 0, &e) == 0, "set up: %s", e.msg);
    static mq_measurement m;
    mq_measure_opts o = mq_measure_defaults();
    o.budget_s = 0.01;
    o.min_reps = o.max_reps = 7;
    mq_candidate c = {MQ_VAR_FUSED_FP4, {8, 64, 64, 0, 1}};
    mq_measure(&q, &bp, &c, NULL, &o, &m);
    CHECK(!strcmp(m.status, "ok") && m.nsamples == 7 && m.st.median == 1e-3,
          "expected 7 queued samples of 1 ms (the median), got %s, %d samples, median %g",
          m.status, m.nsamples, m.st.median);
    CHECK(m.idle_s == 3e-3 && idle_runs == MQ_IDLE_REPS && switches == 2 && !idle_now,
          "expected idle_s 3 ms from %d idle launches, the backend switched there and back "
          "(2 switches), got %g from %d launches, %d switches, idle left %d",
          MQ_IDLE_REPS, m.idle_s, idle_runs, switches, idle_now);
    mq_result r;
    memset(&r, 0, sizeof r);
    mq_result_from_measurement(&r, &m);
    CHECK(r.idle_s == 3e-3, "expected the results row to carry idle_s 3 ms, got %g", r.idle_s);
    /* a backend with one timing: no idle launches, no idle_s */
    mq_backend one = {.name = "one", .run = queue_run, .device_time = queue_time};
    idle_runs = 0;
    mq_measure(&one, &bp, &c, NULL, &o, &m);
    CHECK(!strcmp(m.status, "ok") && m.idle_s == 0 && idle_runs == 0,
          "expected no idle launches and idle_s 0 without set_idle_timing, got %g, %d",
          m.idle_s, idle_runs);
    mq_bench_problem_free(&bp);
    mq_backend_close(inner);
}

static mq_result row(int M, double idle)
{
    static double samples[2] = {1e-3, 2e-3};
    mq_result r;
    memset(&r, 0, sizeof r);
    mq_result_stamp(&r);
    snprintf(r.chip, sizeof r.chip, "h100");
    snprintf(r.backend, sizeof r.backend, "cuda");
    r.p = (mq_problem){MQ_FMT_FP4, M, 64, 128, 32};
    r.c = (mq_candidate){MQ_VAR_LANE_GEMM, {16, 64, 64, 0, 1}};
    snprintf(r.status, sizeof r.status, "ok");
    r.samples = samples;
    r.nsamples = r.st.n = 2;
    r.st.median = 1.5e-3;
    r.idle_s = idle;
    return r;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_results_schema(void)
{
    char err[1024];
    /* schema 2: idle_s round-trips, empty when not measured */
    char path[512], one[512];
    snprintf(path, sizeof path, "%s", tmp_path("two.csv"));
    snprintf(one, sizeof one, "%s", tmp_path("one.csv"));
    mq_results_writer w;
    mq_result a = row(1, 4.25e-5), b = row(2, 0);
    CHECK(mq_results_open(path, &w, err, sizeof err) == 0 &&
              mq_results_append(&w, &a, err, sizeof err) == 0 &&
              mq_results_append(&w, &b, err, sizeof err) == 0,
          "expected two rows written: %s", err);
    mq_results_close(&w);
    mq_results rs;
    int rc = mq_results_load(path, &rs, err, sizeof err);
    CHECK(rc == 0 && rs.n == 2 && rs.schema == 3 && rs.r[0].idle_s == 4.25e-5 &&
              rs.r[1].idle_s == 0 && rs.r[0].schema == 3 &&
              !strcmp(rs.r[0].kernel_build, mq_kernel_build()),
          "expected schema 3 rows with idle_s 4.25e-5 and none, this kernel build, got rc %d "
          "(%s), %d rows, "
          "schema %d, idle %g / %g",
          rc, err, rc ? -1 : rs.n, rc ? -1 : rs.schema, rc || rs.n < 1 ? -1 : rs.r[0].idle_s,
          rc || rs.n < 2 ? -1 : rs.r[1].idle_s);
    if (rc == 0)
        mq_results_free(&rs);
    /* schema 1: read, and appended to in its own width */
    write_text(one, "# mq results, schema 1\n"
                    "\"schema\",\"tool_version\",\"git_rev\",\"host\",\"date\",\"chip\","
                    "\"backend\",\"format\",\"M\",\"N\",\"K\",\"group\",\"variant\",\"tile_m\","
                    "\"tile_n\",\"tile_k\",\"num_threadgroups\",\"split_k\",\"status\","
                    "\"error\",\"median_s\",\"p10_s\",\"p90_s\",\"mad_s\",\"ci_lo_s\","
                    "\"ci_hi_s\",\"reps\",\"gflops\",\"weight_gbs\",\"samples_s\"\n"
                    "\"1\",\"0.1\",\"abc\",\"h\",\"2026-11-01T00:00:00Z\",\"h100\",\"cuda\","
                    "\"fp4\",\"1\",\"64\",\"128\",\"32\",\"lane_gemm\",\"16\",\"64\",\"64\","
                    "\"0\",\"1\",\"ok\",\"\",\"0.001\",\"0.001\",\"0.001\",\"0\",\"0.001\","
                    "\"0.001\",\"1\",\"1\",\"1\",\"1e-3\"\n");
    rc = mq_results_load(one, &rs, err, sizeof err);
    CHECK(rc == 0 && rs.n == 1 && rs.schema == 1 && rs.r[0].idle_s == 0,
          "expected a schema 1 file read (1 row, no idle_s), got rc %d: %s", rc, err);
    if (rc == 0)
        mq_results_free(&rs);
    CHECK(mq_results_open(one, &w, err, sizeof err) == 0 && w.schema == 1 &&
              mq_results_append(&w, &a, err, sizeof err) == 0,
          "expected a row appended to the schema 1 file: %s", err);
    mq_results_close(&w);
    rc = mq_results_load(one, &rs, err, sizeof err);
    CHECK(rc == 0 && rs.n == 2 && rs.schema == 1 && rs.r[1].schema == 1 && rs.r[1].idle_s == 0,
          "expected the appended row in schema 1's width (schema 1, no idle_s), got rc %d: %s",
          rc, err);
    if (rc == 0)
        mq_results_free(&rs);
    /* a row of schema 2 where the file has schema 1's columns is refused */
    write_text(tmp_path("mixed.csv"), "");
    {
        FILE *src = fopen(one, "r"), *dst = fopen(tmp_path("mixed.csv"), "w");
        char line[4096];
        for (int i = 0; src && dst && fgets(line, sizeof line, src); i++)
            fputs(i == 2 ? "\"2\"" : "", dst), fputs(i == 2 ? strchr(line, ',') : line, dst);
        if (src)
            fclose(src);
        if (dst)
            fclose(dst);
    }
    rc = mq_results_load(tmp_path("mixed.csv"), &rs, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "a row of schema 2 in a file of schema 1's columns"),
          "expected a schema 2 row in a schema 1 file refused, got %s", rc ? err : "a load");
    if (rc == 0)
        mq_results_free(&rs);
    /* bad idle_s and a renamed column are refused by name */
    FILE *f = fopen(path, "a");
    if (f) {
        fputs("\"2\",\"0.1\",\"abc\",\"h\",\"2026-11-01T00:00:00Z\",\"h100\",\"cuda\",\"fp4\","
              "\"3\",\"64\",\"128\",\"32\",\"lane_gemm\",\"16\",\"64\",\"64\",\"0\",\"1\",\"ok\","
              "\"\",\"0.001\",\"0.001\",\"0.001\",\"0\",\"0.001\",\"0.001\",\"1\",\"1\",\"1\","
              "\"1e-3\",\"-2\",\"k0\"\n",
              f);
        fclose(f);
    }
    rc = mq_results_load(path, &rs, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "idle_s"), "expected a negative idle_s refused by name, got %s",
          rc ? err : "a load");
    if (rc == 0)
        mq_results_free(&rs);
    write_text(tmp_path("renamed.csv"), "\"schema\",\"tool_version\",\"git_rev\",\"host\","
                                        "\"date\",\"chip\",\"backend\",\"format\",\"M\",\"N\","
                                        "\"K\",\"group\",\"variant\",\"tile_m\",\"tile_n\","
                                        "\"tile_k\",\"num_threadgroups\",\"split_k\","
                                        "\"status\",\"error\",\"median_s\",\"p10_s\","
                                        "\"p90_s\",\"mad_s\",\"ci_lo_s\",\"ci_hi_s\",\"reps\","
                                        "\"gflops\",\"weight_gbs\",\"samples_s\",\"idle\"\n");
    rc = mq_results_load(tmp_path("renamed.csv"), &rs, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "column 31 is 'idle', expected 'idle_s'"),
          "expected a renamed column refused naming it, got %s", rc ? err : "a load");
    if (rc == 0)
        mq_results_free(&rs);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_measure_idle();
    test_results_schema();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_done("idle_timing");
}
