/* test_bench_io.c - the bytes the measuring moves outside a kernel: the
 * CPU backend's sized read (what the read probe times: every byte read
 * once, a cold read timed with its empty dispatch) and quantized weight
 * sets kept in files between processes (MQ_WEIGHT_CACHE: stored, read back
 * bit for bit, damaged files ignored, cold copies equal to the set). Apart
 * from test_harness.c, whose parts are the harness's data (statistics,
 * chips, the candidate space, the results store) and verification. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "measure.h"

static char tmpdir[] = "/tmp/mq-test-bench-io-XXXXXX";

/* The CPU backend's sized read: every byte read once (the sum of a buffer
 * of ones is its length, for lengths short of, equal to and past the
 * dispatch's chunks), and a cold read timed with its empty dispatch. */
static void test_sized_read(void)
{
    mq_error e;
    mq_ctx *ctx = NULL;
    CHECK(mq_ctx_create(3, &ctx, &e) == MQ_OK, "a 3-worker context: %s", e.msg);
    static const size_t ns[] = {0, 1, 63, 64, 65, 1000, 100003};
    float *buf = malloc(100003 * sizeof *buf);
    for (size_t i = 0; buf && i < 100003; i++)
        buf[i] = 1.0f;
    for (size_t i = 0; ctx && buf && i < sizeof ns / sizeof ns[0]; i++) {
        float got = mq_ctx_read(ctx, buf, ns[i] * sizeof *buf);
        CHECK(got == (float)ns[i], "expected the read of %zu floats of 1 to sum to %zu, got %.1f",
              ns[i], ns[i], got);
    }
    CHECK(ctx && mq_ctx_read(ctx, NULL, 4096) == 0.0f, "expected a dispatch reading nothing");
    free(buf);
    mq_ctx_destroy(ctx);
    mq_backend_opts bo = {2};
    mq_backend *cpu = mq_backend_cpu_open(&bo, &e);
    double gbs = 0, empty = -1;
    CHECK(cpu && cpu->probe_read_at, "expected the CPU backend to have a sized read probe");
    if (cpu && cpu->probe_read_at) {
        cpu->cache_bytes = 4 << 20; /* a few copies, not a whole host's L3 */
        mq_status st = cpu->probe_read_at(cpu, 1 << 20, &gbs, &empty, &e);
        CHECK(st == MQ_OK && gbs > 0 && isfinite(gbs) && empty >= 0 && empty < 1,
              "expected a positive rate and an empty dispatch under a second, got %s %.3g GB/s "
              "%.3g s",
              st ? e.msg : "ok", gbs, empty);
    }
    mq_backend_close(cpu);
}

/* Weight sets across processes (MQ_WEIGHT_CACHE): the first setup stores
 * the quantized set, the next reads it back bit for bit, for every format;
 * a damaged file is ignored (the weights are quantized again); and cold
 * copies are equal to the set they copy. */
static void test_weight_cache(void)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/wcache", tmpdir);
    mkdir(dir, 0755);
    setenv("MQ_WEIGHT_CACHE", dir, 1);
    static const mq_format fs[] = {MQ_FMT_FP4, MQ_FMT_U4, MQ_FMT_TRELLIS3};
    for (size_t f = 0; f < sizeof fs / sizeof fs[0]; f++) {
        mq_problem p = {fs[f], 2, 64, 256, 64};
        mq_error e;
        mq_bench_problem a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        CHECK(mq_bench_problem_setup(&a, &p, 0, NULL, 0, &e) == 0, "set up: %s", e.msg);
        snprintf(path, sizeof path, "%s/%s-64x256-g64.w", dir, mq_format_name(fs[f]));
        CHECK(access(path, R_OK) == 0, "expected the quantized set stored as %s", path);
        CHECK(mq_bench_problem_setup(&b, &p, 0, NULL, 0, &e) == 0, "set up again: %s", e.msg);
        void **fa[8], **fb[8], **fc[8];
        size_t ba[8], bb[8], bc[8];
        int nf = mq_weights_fields(&a.copies[0], fa, ba);
        mq_weights_fields(&b.copies[0], fb, bb);
        mq_weights_fields(&a.copies[a.ncopies - 1], fc, bc);
        int same = a.copies[0].n_levels == b.copies[0].n_levels, copies_same = a.ncopies > 1;
        for (int i = 0; i < nf; i++) {
            same = same && ba[i] == bb[i] && (!ba[i] || !memcmp(*fa[i], *fb[i], ba[i]));
            copies_same = copies_same && ba[i] == bc[i] && (!ba[i] || !memcmp(*fa[i], *fc[i], ba[i]));
        }
        CHECK(same, "%s: expected the set read back to equal the one quantized",
              mq_format_name(fs[f]));
        CHECK(copies_same, "%s: expected the last cold copy (of %d) to equal the set",
              mq_format_name(fs[f]), a.ncopies);
        mq_bench_problem_free(&b);
        FILE *t = fopen(path, "r+b"); /* damage the header: ignored, quantized again */
        if (t) {
            fputs("junk", t);
            fclose(t);
        }
        CHECK(mq_bench_problem_setup(&b, &p, 0, NULL, 0, &e) == 0 && b.copies[0].K == 256,
              "a damaged file is ignored and the weights quantized again: %s", e.msg);
        mq_bench_problem_free(&b);
        /* a good header over a damaged body (every byte past it 0xff: NaN
         * scales): ignored too, the set quantized again equal to the first */
        t = fopen(path, "r+b");
        long size = 0;
        if (t && fseek(t, 0, SEEK_END) == 0 && (size = ftell(t)) > 200 && fseek(t, 150, SEEK_SET) == 0)
            for (long i = 150; i < size; i++)
                fputc(0xff, t);
        if (t)
            fclose(t);
        int again = mq_bench_problem_setup(&b, &p, 0, NULL, 0, &e) == 0;
        CHECK(again, "%s: a file with a good header and a damaged body is ignored, not an "
                     "error: %s", mq_format_name(fs[f]), again ? "ok" : e.msg);
        if (again) {
            mq_weights_fields(&b.copies[0], fb, bb);
            same = 1;
            for (int i = 0; i < nf; i++)
                same = same && ba[i] == bb[i] && (!ba[i] || !memcmp(*fa[i], *fb[i], ba[i]));
            CHECK(same, "%s: expected the damaged body's set quantized again, equal to the first",
                  mq_format_name(fs[f]));
            mq_bench_problem_free(&b);
        }
        mq_bench_problem_free(&a);
    }
    unsetenv("MQ_WEIGHT_CACHE");
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_sized_read();
    test_weight_cache();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_done("bench_io");
}
