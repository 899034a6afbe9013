/* test_moe_route.c - the MoE block's routing kernel (moe_route,
 * metal/gemm_trellis_moe.metal) on the CPU executor, launched as the plans
 * launch it (mq_msl_moe_plan_of's first dispatch), against a counting sort
 * written here: every row list, offset and touched slot exact, across
 * decode and prefill routings (rows staged in threadgroup memory, row
 * counts that pad its last load, and rows past it read from device
 * memory), experts from 8 to 4096 (each thread one
 * expert or a run of them) and two threadgroup sizes; and a planted fault
 * in its scan, caught. Every block (seed, lane, the unfused baseline) reads
 * this list, so their output tests cover it only where a wrong list gives
 * a wrong sum; here each field is held to the sort. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* mkdtemp (macOS) */

#include "check.h"
#include "metal_source.h"
#include "msl_exec.h"
#include "msl_program.h"

static mq_msl_compile_opts copts;

/* The route list moe_route must write (mq_moe.h's MoeRoute): row_token,
 * row_of, offs[E + 1], touched[E], ntouched, as one uint32 array. */
static void route_expected(const mq_moe_problem *p, const int32_t *ids, uint32_t *r)
{
    uint32_t R = (uint32_t)(p->tokens * p->top_k), E = (uint32_t)p->experts;
    uint32_t *row_token = r, *row_of = r + R, *offs = r + 2 * R, *touched = offs + E + 1;
    uint32_t nt = 0, at = 0;
    offs[0] = 0;
    for (uint32_t e = 0; e < E; e++) {
        uint32_t first = at;
        for (uint32_t i = 0; i < R; i++)
            if ((uint32_t)ids[i] == e) {
                row_token[at] = i / (uint32_t)p->top_k;
                row_of[i] = at++;
            }
        if (at > first)
            touched[nt++] = e;
        offs[e + 1] = at;
    }
    touched[E] = nt; /* ntouched */
}

/* Run route dispatch d (src: NULL for the file's own text) over ids; the
 * route buffer's words into got (n words). 0, or -1 with err. */
static int run_route(const mq_msl_moe_plan *pl, const char *src, const int32_t *ids, size_t R,
                     uint32_t *got, size_t n, char *err, size_t errlen)
{
    const mq_msl_dispatch *d = &pl->d[0];
    mq_msl_module *m = mq_msl_module_load(d->file, src, d->defines, &copts, err, errlen);
    if (!m)
        return -1;
    mq_msl_buffer b_ids = {0}, b_par = {0}, b_route = {0};
    mq_msl_launch l = {{0}, {1, 1, 1}, {d->threads, 1, 1}, 1, 0};
    int rc = -1;
    if (!mq_msl_buffer_alloc(&b_ids, R * 4, err, errlen) &&
        !mq_msl_buffer_alloc(&b_par, sizeof pl->mp, err, errlen) &&
        !mq_msl_buffer_alloc(&b_route, n * 4, err, errlen)) {
        memcpy(b_ids.data, ids, R * 4);
        memcpy(b_par.data, &pl->mp, sizeof pl->mp);
        memset(b_route.data, 0xa5, n * 4); /* what the kernel leaves unwritten shows */
        l.buffers[MQ_MSL_MOE_IDS] = &b_ids;
        l.buffers[MQ_MSL_MOE_PARAMS] = &b_par;
        l.buffers[MQ_MSL_MOE_ROUTE] = &b_route;
        rc = mq_msl_run(m, d->function, &l, err, errlen);
        if (rc == 0)
            memcpy(got, b_route.data, n * 4);
    }
    mq_msl_buffer_free(&b_ids);
    mq_msl_buffer_free(&b_par);
    mq_msl_buffer_free(&b_route);
    mq_msl_module_free(m);
    return rc;
}

typedef struct {
    int tokens, experts, top_k;
    mq_route_kind route;
    const char *what;
} route_case;

/* The first word of got that differs from want (-1: none). */
static long first_diff(const uint32_t *got, const uint32_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            return (long)i;
    return -1;
}

/* Case rc under the seed block's plan of inner tile (tile_n, tile_k):
 * its route list against the sort; with src, a planted source that must
 * differ. */
static void check_case(const route_case *rc, int tile_n, int tile_k, const char *src)
{
    mq_moe_problem p = {MQ_FMT_TRELLIS3, rc->tokens, 32, 32, rc->experts, rc->top_k, 32};
    mq_error e;
    mq_moe_weights mw;
    if (mq_moe_weights_alloc(&mw, &p, &e)) {
        CHECK(0, "%s: weights for the plan: %s", rc->what, e.msg);
        return;
    }
    mq_moe_candidate c;
    memset(&c, 0, sizeof c);
    c.inner.variant = MQ_VAR_GEMV_TRELLIS;
    c.inner.p = (mq_params){1, tile_n, tile_k, 0, 1};
    c.i_split = c.fuse_gate_up = 1;
    mq_msl_moe_plan pl;
    size_t R = (size_t)p.tokens * p.top_k, n = 2 * R + 2 * (size_t)p.experts + 2;
    int32_t *ids = malloc(R * sizeof *ids);
    float *pr = malloc(R * sizeof *pr);
    uint32_t *want = malloc(n * 4), *got = malloc(n * 4);
    char err[1024] = "";
    if (!ids || !pr || !want || !got) {
        CHECK(0, "%s: memory", rc->what);
    } else if (mq_msl_moe_plan_of(&p, &mw, &c, NULL, &pl, &e) ||
               mq_moe_routing_generate(&p, rc->route, 1.5, 11, ids, pr, &e)) {
        CHECK(0, "%s: the plan of tile %dx%d and the routing: %s", rc->what, tile_n, tile_k,
              e.msg);
    } else {
        CHECK(pl.bytes[MQ_MSL_MOE_ROUTE] == n * 4,
              "%s: the plan's route buffer holds the list (%zu bytes, got %zu)", rc->what,
              n * 4, pl.bytes[MQ_MSL_MOE_ROUTE]);
        memset(want, 0xa5, n * 4); /* touched past ntouched: never written */
        route_expected(&p, ids, want);
        int ran = run_route(&pl, src, ids, R, got, n, err, sizeof err) == 0;
        long at = ran ? first_diff(got, want, n) : -2;
        if (src)
            CHECK(ran && at >= 0, "%s: the planted fault changes the route list (%s)", rc->what,
                  ran ? "it did not" : err);
        else
            CHECK(ran && at < 0,
                  "%s, %u threads: the route list as the counting sort writes it: %s word %ld of "
                  "%zu is %u, expected %u",
                  rc->what, pl.d[0].threads, ran ? "" : err, at, n, at >= 0 ? got[at] : 0,
                  at >= 0 ? want[at] : 0);
    }
    free(ids), free(pr), free(want), free(got);
    mq_moe_weights_free(&mw);
}

int main(void)
{
    static char cache[] = "/tmp/mq-moe-route-XXXXXX";
    if (!mkdtemp(cache)) {
        CHECK(0, "a cache directory for the executor's modules");
        return check_done("moe_route");
    }
    copts.cache_dir = cache;
    static const route_case cases[] = {
        {1, 128, 8, MQ_ROUTE_UNIFORM, "one token, top 8 of 128 (Qwen3's decode)"},
        {16, 128, 8, MQ_ROUTE_ZIPF, "16 tokens, Zipf, top 8 of 128"},
        {200, 8, 2, MQ_ROUTE_UNIFORM, "200 tokens, top 2 of 8 (400 rows)"},
        {300, 64, 6, MQ_ROUTE_ZIPF, "300 tokens, top 6 of 64 (1800 rows, past the staged 1024)"},
        {3, 1000, 4, MQ_ROUTE_ONE, "3 tokens on experts 0..3 of 1000 (runs of experts)"},
        {2, 4096, 8, MQ_ROUTE_UNIFORM, "2 tokens, top 8 of 4096 experts"},
        {5, 8, 8, MQ_ROUTE_UNIFORM, "5 tokens on all 8 experts"},
        {5, 8, 1, MQ_ROUTE_UNIFORM, "5 rows (the staged rows' last load padded by 3)"},
        {7, 16, 3, MQ_ROUTE_ZIPF, "21 rows, Zipf (padded by 3)"},
        {128, 64, 8, MQ_ROUTE_UNIFORM, "1024 rows, the most staged"},
        {205, 32, 5, MQ_ROUTE_ZIPF, "1025 rows, one past the staged"},
    };
    /* two threadgroup sizes: the module's 64 x 128 and 32 x 64 tiles */
    static const int tiles[2][2] = {{64, 128}, {32, 64}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int t = 0; t < 2; t++)
            check_case(&cases[i], tiles[t][0], tiles[t][1], NULL);
    char err[256];
    char *src = mq_metal_source("gemm_trellis_moe.metal", err, sizeof err);
    char *at = src ? strstr(src, "scan_rows[tid] - n_rows") : NULL;
    CHECK(at != NULL, "the route kernel's exclusive row offset to plant a fault in: %s",
          src ? "not found" : err);
    if (at) { /* each run of experts starts one run late: inclusive, not exclusive */
        memcpy(at, "scan_rows[tid]         ", 23);
        check_case(&cases[1], 64, 128, src);
    }
    free(src);
    return check_done("moe_route");
}
