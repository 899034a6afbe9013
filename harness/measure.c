/* measure.c - see measure.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "measure.h"
#include "probes.h"
#include "weight_cache.h"

static int sample_rows(int M, int *rows)
{
    int n = 0, cand[3] = {0, M / 2, M - 1};
    for (int i = 0; i < 3; i++) {
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= rows[j] == cand[i];
        if (!dup)
            rows[n++] = cand[i];
    }
    return n;
}

static int cached_slot(const mq_bench_problem *bp, int row)
{
    for (int i = 0; i < bp->nref; i++)
        if (bp->ref_rows[i] == row)
            return i;
    return -1;
}

/* Rows [from, to) of A: each row seeded by its index alone. */
static void fill_rows(uint16_t *A, int K, int from, int to)
{
    for (int r = from; r < to; r++) {
        uint32_t st = 777u + (uint32_t)r * 2654435761u;
        for (int k = 0; k < K; k++) {
            st = st * 1664525u + 1013904223u;
            A[(size_t)r * K + k] = mq_float_to_half((float)(st >> 8) / 8388608.0f - 1.0f);
        }
    }
}

/* Grow A and C to max_m rows and cache the reference of the sampled rows
 * of every M in ms, all missing rows in one pass over the weights. */
static int prepare_rows(mq_bench_problem *bp, const int *ms, int nms, mq_error *err)
{
    int K = bp->p.K, N = bp->p.N, need_m = bp->max_m;
    for (int i = 0; i < nms; i++)
        need_m = ms[i] > need_m ? ms[i] : need_m;
    if (need_m > bp->max_m) {
        uint16_t *A = realloc(bp->A, sizeof *A * (size_t)need_m * K);
        float *C = A ? realloc(bp->C, sizeof *C * (size_t)need_m * N) : NULL;
        if (A)
            bp->A = A;
        if (!A || !C)
            return mq_fail(err, MQ_E_NOMEM, "out of memory for M=%d activations", need_m), -1;
        bp->C = C;
        fill_rows(bp->A, K, bp->max_m, need_m);
        bp->max_m = need_m;
    }
    int missing[3 * 64], nmiss = 0;
    for (int i = 0; i < nms; i++) {
        int rows[3], n = sample_rows(ms[i], rows);
        for (int j = 0; j < n; j++) {
            int dup = cached_slot(bp, rows[j]) >= 0;
            for (int q = 0; q < nmiss; q++)
                dup |= missing[q] == rows[j];
            if (!dup && nmiss < 3 * 64)
                missing[nmiss++] = rows[j];
        }
    }
    if (!nmiss)
        return 0;
    int total = bp->nref + nmiss;
    int *rr = realloc(bp->ref_rows, sizeof *rr * (size_t)total);
    if (rr)
        bp->ref_rows = rr;
    double *rc = rr ? realloc(bp->ref_cache, sizeof *rc * (size_t)total * N) : NULL;
    if (rc)
        bp->ref_cache = rc;
    double *ac = rc ? realloc(bp->abs_cache, sizeof *ac * (size_t)total * N) : NULL;
    if (ac)
        bp->abs_cache = ac;
    uint16_t *Asub = ac ? malloc(sizeof *Asub * (size_t)nmiss * K) : NULL;
    if (!Asub)
        return mq_fail(err, MQ_E_NOMEM, "out of memory for the reference"), -1;
    for (int j = 0; j < nmiss; j++)
        memcpy(Asub + (size_t)j * K, bp->A + (size_t)missing[j] * K, sizeof *Asub * (size_t)K);
    int rcode = mq_reference_gemm(&bp->copies[0], Asub, nmiss, bp->ref_cache + (size_t)bp->nref * N,
                                  bp->abs_cache + (size_t)bp->nref * N, err);
    free(Asub);
    if (rcode)
        return -1;
    for (int j = 0; j < nmiss; j++)
        bp->ref_rows[bp->nref + j] = missing[j];
    bp->nref = total;
    return 0;
}

static size_t device_cache_bytes;

void mq_bench_set_device_cache(size_t bytes) { device_cache_bytes = bytes; }

/* The float weights before quantization: one buffer for the process, grown
 * as shapes need, so each shape does not fault in hundreds of MB afresh. */
static float *float_weights(size_t n)
{
    static float *buf;
    static size_t cap;
    if (n > cap) {
        free(buf);
        buf = malloc(n * sizeof *buf);
        cap = buf ? n : 0;
    }
    return buf;
}

int mq_problem_fits_memory(const mq_problem *p, char *err, size_t errlen)
{
    double kn = (double)p->K * p->N, need = kn * 4 + kn + (double)p->M * p->K * 6 +
                                           (double)p->M * p->N * 12;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && page > 0 ? (double)pages * page : 0;
    if (have <= 0 || need <= have)
        return 0;
    snprintf(err, errlen, "needs %.1f GB of memory to set up (M=%d N=%d K=%d); this machine has "
                          "%.1f GB",
             need / 1e9, p->M, p->N, p->K, have / 1e9);
    return -1;
}

/* The problem's weights: reproducible pseudo-random floats, quantized to
 * its format (or read back from MQ_WEIGHT_CACHE); trellis with
 * pseudo-random signs su and sv, so that a kernel that drops or misplaces
 * them fails its check. */
static int quantized_weights(const mq_problem *p, mq_weights *w0, mq_error *err)
{
    char cache[4200];
    mq_weight_cache_path(p, cache, sizeof cache);
    if (mq_weight_cache_read(cache, p, w0) == 0)
        return 0;
    float *W = float_weights((size_t)p->K * p->N);
    if (!W)
        return mq_fail(err, MQ_E_NOMEM, "out of memory for N=%d K=%d weights", p->N, p->K), -1;
    uint32_t st = 12345u + (uint32_t)p->N * 7u + (uint32_t)p->K;
    for (size_t i = 0; i < (size_t)p->K * p->N; i++) {
        st = st * 1664525u + 1013904223u;
        W[i] = ((float)(st >> 8) / 8388608.0f - 1.0f) * 0.05f;
    }
    float *signs = mq_format_is_trellis(p->format)
                       ? malloc(sizeof(float) * ((size_t)p->K + (size_t)p->N))
                       : NULL;
    if (mq_format_is_trellis(p->format) && !signs)
        return mq_fail(err, MQ_E_NOMEM, "out of memory for N=%d K=%d signs", p->N, p->K), -1;
    for (size_t i = 0; signs && i < (size_t)p->K + (size_t)p->N; i++) {
        st = st * 1664525u + 1013904223u;
        signs[i] = (st >> 31) ? -1.0f : 1.0f;
    }
    mq_trellis_opts to = {signs, signs ? signs + p->K : NULL, NULL, 0};
    int bad = mq_quantize(p->format, W, p->K, p->N, p->group, &to, w0, err) != MQ_OK;
    free(signs);
    if (bad)
        return -1;
    mq_weight_cache_write(cache, p, w0);
    return 0;
}

static int setup_weights(mq_bench_problem *bp, const mq_problem *p, int warm, mq_error *err)
{
    mq_weights w0;
    if (quantized_weights(p, &w0, err))
        return -1;
    /* the lane layout beside the seeds' (done once, as a runtime prepares its
     * weights; copies carry both), for the variants that read it */
    if (mq_weights_prepare_lane(&w0, err)) {
        mq_weights_free(&w0);
        return -1;
    }
    /* enough copies that the set exceeds twice the last-level cache: the
     * host's, or the device's where that is larger (a GPU's L2) */
    long llc = mq_cache_bytes(3);
    if (llc <= 0)
        llc = 32L << 20;
    if (device_cache_bytes > (size_t)llc)
        llc = (long)device_cache_bytes;
    size_t bytes = mq_weights_bytes(&w0);
    size_t copies = warm ? 1 : mq_cold_copies(bytes, (size_t)llc);
    bp->ncopies = copies > 4096 ? 4096 : (int)copies;
    bp->copies = calloc((size_t)bp->ncopies, sizeof *bp->copies);
    if (!bp->copies) {
        mq_weights_free(&w0);
        return mq_fail(err, MQ_E_NOMEM, "out of memory for weight copies"), -1;
    }
    bp->copies[0] = w0;
    if (bp->ncopies > 1 &&
        mq_weights_copies(&w0, bp->ncopies - 1, bp->copies + 1, &bp->copies_block, err))
        return -1;
    return 0;
}

int mq_bench_problem_setup(mq_bench_problem *bp, const mq_problem *p, int warm, const int *ms,
                           int nms, mq_error *err)
{
    if (mq_problem_check(p, err))
        return -1;
    /* the same weights serve every M: only the activation rows grow */
    int same = bp->copies && bp->warm == warm && bp->p.format == p->format &&
               bp->p.N == p->N && bp->p.K == p->K && bp->p.group == p->group;
    if (!same) {
        mq_bench_problem_free(bp);
        bp->p = *p;
        bp->warm = warm;
        if (setup_weights(bp, p, warm, err))
            return -1;
    }
    bp->p = *p;
    if (prepare_rows(bp, &p->M, 1, err) || (ms && prepare_rows(bp, ms, nms, err)))
        return -1;
    bp->nrows = sample_rows(p->M, bp->rows);
    for (int i = 0; i < bp->nrows; i++)
        bp->slot[i] = cached_slot(bp, bp->rows[i]);
    return 0;
}

void mq_bench_problem_free(mq_bench_problem *bp)
{
    for (int i = 0; bp->copies && i < bp->ncopies; i++)
        mq_weights_free(&bp->copies[i]); /* copies 1.. borrow copies_block */
    mq_weights_copies_free(bp->copies_block);
    free(bp->copies);
    free(bp->A);
    free(bp->C);
    free(bp->ref_rows);
    free(bp->ref_cache);
    free(bp->abs_cache);
    memset(bp, 0, sizeof *bp);
}

/* The bound follows what the kernels compute. With u = 2^-24 (FP32) and
 * h = 2^-11 (FP16, unit roundoff):
 *  - FP32 accumulation of the K products (the CPU model splits each FP16
 *    activation into two exact bf16 parts, 2K rounded terms), plus three
 *    roundings (a group's scale, the group partials, grid*scale of trellis
 *    weights): |s - sum a*w| <= (2K+3) u sum|a*w| (tests/testdata.h);
 *  - weights dequantized to FP16 first (the Metal kernels' B tiles and
 *    fragments): each w becomes w(1+d), |d| <= h, so the products add at most
 *    h sum|a*w| (the products of two FP16 values are exact in FP32, so the
 *    accumulation term above still holds, on sum|a*w|(1+h));
 *  - C stored as FP16: a further h |s| <= h (|ref| + the error so far), and
 *    2^-25 absolute where s falls in FP16's subnormal range.
 * A wrong column, a lost K slice or a wrong nibble costs |a*w| itself, far
 * above this at the shapes verified. */
double mq_verify_bound(int K, double sum_abs, double ref, const mq_backend_arith *arith)
{
    const double u = ldexp(1.0, -24), h = ldexp(1.0, -11);
    int hw = arith && arith->half_weights, ho = arith && arith->half_output;
    double acc = (2.0 * K + 3) * u * (hw ? 1 + h : 1) + (hw ? h : 0);
    double before_store = acc * sum_abs;
    double store = ho ? h * (fabs(ref) + before_store) + ldexp(1.0, -25) : 0;
    return before_store + store + 1e-30;
}

int mq_bench_verify(const mq_bench_problem *bp, const mq_backend_arith *arith,
                    double *worst_ratio)
{
    int N = bp->p.N, bad = 0;
    double worst = 0;
    for (int r = 0; r < bp->nrows; r++)
        for (int n = 0; n < N; n++) {
            double got = bp->C[(size_t)bp->rows[r] * N + n];
            size_t at = (size_t)bp->slot[r] * N + n;
            double ref = bp->ref_cache[at];
            double bound = mq_verify_bound(bp->p.K, bp->abs_cache[at], ref, arith);
            double e = fabs(got - ref) / bound;
            if (!(e <= 1.0))
                bad++;
            if (!(e <= worst))
                worst = e;
        }
    *worst_ratio = worst;
    return bad;
}

mq_measure_opts mq_measure_defaults(void)
{
    mq_measure_opts o = {0.5, 0.02, 5, 1000, 1};
    return o;
}

static const mq_weights *next_weights(mq_bench_problem *bp)
{
    bp->next_copy = (bp->next_copy + 1) % bp->ncopies;
    return &bp->copies[bp->next_copy];
}

/* A run after verification failed (a GPU's command buffer can fail at any
 * time): the candidate gets an error row and none of its samples. */
static void timed_run_failed(mq_measurement *m, const char *which, int nth, const mq_error *err)
{
    m->nsamples = 0;
    memset(&m->st, 0, sizeof m->st);
    snprintf(m->status, sizeof m->status, "error");
    snprintf(m->error, sizeof m->error, "%s run %d failed: %.200s", which, nth, err->msg);
}

/* Where the backend's samples are queued launches: MQ_IDLE_REPS more runs
 * with one launch on an idle device each (rotated weight copies, as the
 * samples), their median into m->idle_s; the backend's queued timing back
 * after, whatever happened. 0, or the failed run's number (1-based) and err. */
static int idle_median(mq_backend *b, mq_bench_problem *bp, const mq_candidate *c,
                       const mq_plan *plan, mq_measurement *m, mq_error *err)
{
    double t[MQ_IDLE_REPS];
    int n = 0, rc = 0;
    b->set_idle_timing(b, 1);
    for (; n < MQ_IDLE_REPS && rc == 0; n++) {
        double t0 = mq_now();
        rc = b->run(b, &bp->p, next_weights(bp), bp->A, bp->C, c, plan, err) ? -1 : 0;
        m->kernel_s += mq_now() - t0;
        double dev = b->device_time ? b->device_time(b) : -1;
        t[n] = dev >= 0 ? dev : 0;
    }
    b->set_idle_timing(b, 0);
    if (rc)
        return n;
    mq_stats st;
    mq_stats_compute(t, n, &st);
    m->idle_s = st.median;
    return 0;
}

void mq_measure(mq_backend *b, mq_bench_problem *bp, const mq_candidate *c,
                const mq_limits *lim, const mq_measure_opts *o, mq_measurement *m)
{
    mq_error err;
    mq_plan plan;
    memset(m, 0, offsetof(mq_measurement, samples));
    m->nsamples = 0;
    m->gflops = m->weight_gbs = m->worst_ratio = m->kernel_s = m->idle_s = 0;
    if (mq_plan_candidate(&bp->p, c, lim, &plan, &err)) {
        snprintf(m->status, sizeof m->status, err.code == MQ_E_ILLEGAL ? "illegal" : "error");
        snprintf(m->error, sizeof m->error, "%s", err.msg);
        return;
    }
    /* correctness first: a wrong output never gets a time */
    for (size_t i = 0; i < (size_t)bp->p.M * bp->p.N; i++)
        bp->C[i] = NAN;
    double t0 = mq_now();
    mq_status st = MQ_OK;
    for (int i = 0; b->prepare && bp->prepared != b && st == MQ_OK && i < bp->ncopies; i++)
        st = b->prepare(b, &bp->copies[i], &err); /* uploads, once per weight copy */
    if (st == MQ_OK)
        bp->prepared = b;
    if (st == MQ_OK)
        st = b->run(b, &bp->p, &bp->copies[0], bp->A, bp->C, c, &plan, &err);
    m->kernel_s += mq_now() - t0;
    if (st) {
        snprintf(m->status, sizeof m->status, "error");
        snprintf(m->error, sizeof m->error, "%s", err.msg);
        return;
    }
    int bad = mq_bench_verify(bp, &b->arith, &m->worst_ratio);
    if (bad) {
        snprintf(m->status, sizeof m->status, "wrong");
        snprintf(m->error, sizeof m->error,
                 "%d of %d sampled outputs outside the %s bound (worst %.3g x the bound)", bad,
                 bp->nrows * bp->p.N,
                 b->arith.half_output || b->arith.half_weights ? "FP16/FP32" : "FP32",
                 m->worst_ratio);
        return;
    }
    if (o->max_reps == 0 || b->verify_only) { /* verification only: no time */
        snprintf(m->status, sizeof m->status, "verified");
        return;
    }
    for (int i = 0; i < o->warmups; i++) {
        t0 = mq_now();
        st = b->run(b, &bp->p, next_weights(bp), bp->A, bp->C, c, &plan, &err);
        m->kernel_s += mq_now() - t0;
        if (st) {
            timed_run_failed(m, "warm-up", i + 1, &err);
            return;
        }
    }
    double spent = 0;
    int max = o->max_reps < MQ_MAX_SAMPLES ? o->max_reps : MQ_MAX_SAMPLES;
    while (m->nsamples < max) {
        const mq_weights *w = next_weights(bp);
        t0 = mq_now();
        st = b->run(b, &bp->p, w, bp->A, bp->C, c, &plan, &err);
        double wall = mq_now() - t0;
        if (st) { /* a failed run has no time: the row is an error, not a sample */
            m->kernel_s += spent + wall;
            timed_run_failed(m, "timed", m->nsamples + 1, &err);
            return;
        }
        /* the device's own clock where it has one (Metal's GPU timestamps) */
        double dev = b->device_time ? b->device_time(b) : -1;
        double dt = dev >= 0 ? dev : wall;
        m->samples[m->nsamples++] = dt;
        spent += wall;
        if (m->nsamples < o->min_reps)
            continue;
        if (spent >= o->budget_s)
            break;
        /* the stopping rule needs a sort: check every rep early, then every
         * n/8 reps, so the checks cost O(n log n) in all */
        int every = m->nsamples / 8 > 1 ? m->nsamples / 8 : 1;
        if (o->ci_rel > 0 && (m->nsamples < 32 || m->nsamples % every == 0)) {
            mq_stats_compute(m->samples, m->nsamples, &m->st);
            if (mq_stats_ci_rel(&m->st) <= o->ci_rel)
                break;
        }
    }
    m->kernel_s += spent;
    int failed_idle = b->set_idle_timing ? idle_median(b, bp, c, &plan, m, &err) : 0;
    if (failed_idle) {
        timed_run_failed(m, "idle", failed_idle, &err);
        return;
    }
    mq_stats_compute(m->samples, m->nsamples, &m->st);
    snprintf(m->status, sizeof m->status, "ok");
    m->gflops = 2.0 * bp->p.M * bp->p.N * (double)bp->p.K / m->st.median / 1e9;
    m->weight_gbs = (double)mq_weights_bytes(&bp->copies[0]) / m->st.median / 1e9;
}

void mq_result_from_measurement(mq_result *r, const mq_measurement *m)
{
    r->idle_s = m->idle_s;
    mq_result_stamp(r);
    snprintf(r->status, sizeof r->status, "%s", m->status);
    snprintf(r->error, sizeof r->error, "%s", m->error);
    r->st = m->st;
    r->gflops = m->gflops;
    r->weight_gbs = m->weight_gbs;
    r->samples = (double *)m->samples;
    r->nsamples = m->nsamples;
}
