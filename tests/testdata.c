/* testdata.c - see testdata.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "msl_program.h"
#include "space.h"
#include "testdata.h"

float td_uniform(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / 8388608.0f - 1.0f;
}

void td_fill_weights(float *W, int K, int N, uint32_t seed)
{
    for (long i = 0; i < (long)K * N; i++)
        W[i] = td_uniform(&seed) * 0.1f;
}

void td_fill_activations(uint16_t *A, int M, int K, uint32_t seed)
{
    for (long i = 0; i < (long)M * K; i++)
        A[i] = mq_float_to_half(td_uniform(&seed));
}

long td_count_outside_bound(const float *C, const double *ref, const double *absref,
                            long count, int K, double *worst_ratio)
{
    long bad = 0;
    double worst = 0;
    const double u = ldexp(1.0, -24);
    for (long i = 0; i < count; i++) {
        double bound = (2.0 * K + 3) * u * absref[i] + 1e-30;
        double err = fabs((double)C[i] - ref[i]);
        if (!(err <= bound)) /* also catches NaN */
            bad++;
        if (!(err / bound <= worst))
            worst = err / bound;
    }
    *worst_ratio = worst;
    return bad;
}

mq_chip td_toy_chip(void)
{
    mq_chip c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "toy5");
    double v[MQ_CHIP_NFIELDS] = {5, 8192, 256, 32, 4, 100, 1, 1, 0, 0};
    memcpy(c.v, v, sizeof v);
    mq_chip_set_limits(&c);
    return c;
}

static int same_tiles(const mq_candidate *a, const mq_candidate *b)
{
    return a->variant == b->variant && a->p.tile_m == b->p.tile_m && a->p.tile_n == b->p.tile_n &&
           a->p.tile_k == b->p.tile_k;
}

int mq_test_pick(const mq_problem *p, const mq_chip *chip, mq_test_job *js, int n, int cap)
{
    mq_space sp;
    if (mq_space_enumerate(p, chip, MQ_SPACE_FULL, &sp))
        return n;
    for (int v = 0; v < mq_variant_count(); v++) {
        if (!mq_variant_serves((mq_variant)v, p->format))
            continue;
        const mq_variant_info *vi = mq_variant_get((mq_variant)v);
        int lo = -1, hi = -1, seed = -1;
        for (int i = 0; i < sp.n; i++) {
            const mq_candidate *c = &sp.e[i].c;
            if (!sp.e[i].legal || (int)c->variant != v || c->p.split_k != 1)
                continue;
            long area = (long)c->p.tile_m * c->p.tile_n * c->p.tile_k;
            if (lo < 0 || area < (long)sp.e[lo].c.p.tile_m * sp.e[lo].c.p.tile_n * sp.e[lo].c.p.tile_k)
                lo = i;
            if (hi < 0 || area > (long)sp.e[hi].c.p.tile_m * sp.e[hi].c.p.tile_n * sp.e[hi].c.p.tile_k)
                hi = i;
            if (seed < 0 && c->p.tile_m == vi->defaults.tile_m && c->p.tile_n == vi->defaults.tile_n &&
                c->p.tile_k == vi->defaults.tile_k)
                seed = i;
        }
        int picks[3] = {lo, seed, hi};
        for (int k = 0; k < 3; k++) {
            int dup = picks[k] < 0;
            for (int j = 0; j < k && !dup; j++)
                dup = picks[j] == picks[k];
            if (!dup && n < cap)
                js[n++] = (mq_test_job){*p, sp.e[picks[k]].c};
        }
        int base = seed >= 0 ? seed : lo;
        for (int sk = 2; sk <= 3 && base >= 0; sk++)
            for (int i = 0; i < sp.n; i++)
                if (sp.e[i].legal && sp.e[i].c.p.split_k == sk &&
                    same_tiles(&sp.e[i].c, &sp.e[base].c)) {
                    if (n < cap)
                        js[n++] = (mq_test_job){*p, sp.e[i].c};
                    break;
                }
    }
    mq_space_free(&sp);
    return n;
}

int td_metal_program(const mq_problem *p, const mq_candidate *c, const mq_limits *lim,
                     const char **file, const char **function, char *defines, size_t n,
                     char *err, size_t errlen)
{
    const mq_limits roomy = {1 << 20, 4096, 32, 0, 0};
    mq_plan plan;
    mq_error e;
    if (mq_plan_candidate(p, c, lim ? lim : &roomy, &plan, &e)) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    return mq_metal_program(p, c, &plan, file, function, defines, n, err, errlen);
}

/* The programs seen so far, by hash: slot = index into ps + 1, 0 empty;
 * PROGRAM_SLOTS a power of two over twice any cap (a linear scan with
 * strcmp, hundreds of thousands of candidates against a thousand programs,
 * took most of a minute under ASan) */
#define PROGRAM_SLOTS 16384
static unsigned program_hash(const char *file, const char *defines)
{
    unsigned h = 2166136261u; /* FNV-1a over file, a 0 byte, defines */
    for (const char *s = file; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    h *= 16777619u;
    for (const char *s = defines; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* One candidate's program into ps unless it is there; the new count. */
static int add_program(mq_test_program *ps, int n, int cap, int *slots, const mq_problem *p,
                       const mq_candidate *c, const mq_limits *lim, int *missing)
{
    const char *file, *fn;
    char defines[256], err[256];
    if (td_metal_program(p, c, lim, &file, &fn, defines, sizeof defines, err, sizeof err)) {
        fprintf(stderr, "no program for a legal candidate: %s\n", err);
        (*missing)++;
        return n;
    }
    unsigned h = program_hash(file, defines) & (PROGRAM_SLOTS - 1);
    for (; slots[h]; h = (h + 1) & (PROGRAM_SLOTS - 1)) {
        const mq_test_program *q = &ps[slots[h] - 1];
        if (!strcmp(q->file, file) && !strcmp(q->defines, defines))
            return n;
    }
    if (n == cap || n >= PROGRAM_SLOTS / 2)
        return n;
    snprintf(ps[n].file, sizeof ps[n].file, "%s", file);
    snprintf(ps[n].defines, sizeof ps[n].defines, "%s", defines);
    slots[h] = n + 1;
    return n + 1;
}

int mq_test_programs(const char *arch_prefix, mq_test_program *ps, int cap,
                     int (*counts)[MQ_FMT_COUNT], int *missing)
{
    *missing = 0;
    char err[512];
    mq_chip_db db;
    if (mq_chips_load(mq_chips_default_path(), &db, err, sizeof err)) {
        fprintf(stderr, "chips: %s\n", err);
        return -1;
    }
    static const int ms[] = {1, 3, 16, 64, 512}, groups[] = {32, 64, 128};
    static const int nk[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {200, 384}, {768, 2048}};
    int np = 0, *slots = calloc(PROGRAM_SLOTS, sizeof *slots);
    if (!slots) {
        mq_chips_free(&db);
        return -1;
    }
    for (int ci = 0; ci < db.n; ci++) {
        if (strncmp(db.chips[ci].arch, arch_prefix, strlen(arch_prefix)))
            continue;
        for (int f = 0; f < MQ_FMT_COUNT; f++)
            for (int gi = 0; gi < 3; gi++)
                for (int mi = 0; mi < 5; mi++)
                    for (int si = 0; si < 5; si++) {
                        mq_problem p = {(mq_format)f, ms[mi], nk[si][0], nk[si][1], groups[gi]};
                        mq_space sp;
                        if (mq_problem_check(&p, NULL) ||
                            mq_space_enumerate(&p, &db.chips[ci], MQ_SPACE_FULL, &sp))
                            continue;
                        for (int i = 0; i < sp.n; i++)
                            if (sp.e[i].legal) {
                                np = add_program(ps, np, cap, slots, &p, &sp.e[i].c,
                                                 &db.chips[ci].lim, missing);
                                if (counts && (int)sp.e[i].c.variant < MQ_VAR_COUNT)
                                    counts[sp.e[i].c.variant][f]++;
                            }
                        mq_space_free(&sp);
                    }
    }
    free(slots);
    mq_chips_free(&db);
    return np;
}

void mq_test_define_flags(FILE *f, const char *defines)
{
    char d[64];
    int k;
    while (sscanf(defines, " %63s%n", d, &k) == 1) {
        fprintf(f, " -D%s", d);
        defines += k;
    }
}

int mq_test_run_programs(const char *dir, const mq_test_program *ps, int np, const char *what)
{
    char cmd[512], path[512];
    snprintf(cmd, sizeof cmd, "xargs -d '\\n' -P \"$(nproc)\" -n 1 sh -c < %s/cmds", dir);
    int bad = system(cmd) != 0;
    for (int i = 0; i < np; i++) {
        snprintf(path, sizeof path, "%s/%d.bad", dir, i);
        if (access(path, F_OK))
            continue;
        bad++;
        char line[512] = "";
        snprintf(path, sizeof path, "%s/%d.log", dir, i);
        FILE *l = fopen(path, "r");
        while (l && fgets(line, sizeof line, l) && !strstr(line, "error"))
            ;
        if (l)
            fclose(l);
        line[strcspn(line, "\n")] = 0;
        CHECK(0, "expected metal/%s with %s to %s: %s", ps[i].file, ps[i].defines, what, line);
    }
    return bad;
}

mq_model td_model(const double *shared, int n)
{
    mq_model m;
    memset(&m, 0, sizeof m);
    for (int j = 0; j < n && j < MQ_MODEL_NSHARED; j++)
        m.theta[j] = shared[j];
    return m;
}

long td_outside(const float *got, const double *ref, const double *bound, size_t n,
                double *worst)
{
    long bad = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs(got[i] - ref[i]) / bound[i];
        if (!(r <= 1))
            bad++;
        if (!(r <= *worst))
            *worst = r;
    }
    return bad;
}

void td_probe16_inputs(uint32_t codes[128], uint16_t act[8 * 64], float ref[16][8])
{
    float a[8][64], wt[16][64];
    uint32_t x = 12345u;
    for (int i = 0; i < 128; i++) {
        x = x * 1664525u + 1013904223u;
        codes[i] = x;
    }
    for (int i = 0; i < 8 * 64; i++) { /* A[m][k] in -4..4 */
        x = x * 1664525u + 1013904223u;
        a[i / 64][i % 64] = (float)((int)(x >> 24) % 9 - 4);
        act[i] = mq_float_to_half(a[i / 64][i % 64]);
    }
    for (unsigned L = 0; L < 32; L++) /* W^T[n][k]: lane L's word w, pair p, element j */
        for (unsigned w = 0; w < 4; w++)
            for (unsigned q = 0; q < 8; q++) {
                unsigned p = q & 3, j = q >> 2;
                unsigned r = ((L / 4) & 4) + (L / 2) % 4, c = ((L / 4) & 2) * 2 + (L % 2) * 2;
                wt[8 * (p & 1) + r][16 * w + 8 * (p >> 1) + c + j] =
                    (float)((int)((codes[L * 4 + w] >> (4 * q)) & 15u) - 8);
            }
    for (int n = 0; n < 16; n++)
        for (int m = 0; m < 8; m++) {
            double t = n < 8 ? 1 : -2;
            for (int k = 0; k < 64; k++)
                t += (double)wt[n][k] * a[m][k];
            ref[n][m] = (float)t;
        }
}

/* The value of macro KEY in defines ("A=1 B=2"), -1 when absent. */
static long macro(const char *defines, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = defines; (p = strstr(p, key)); p += kl)
        if ((p == defines || p[-1] == ' ') && p[kl] == '=')
            return strtol(p + kl + 1, NULL, 10);
    return -1;
}

/* The measures of a program: the macros that vary, then the tile's volume,
 * its output area (TILE_M x TILE_N: the accumulators) and the volume per
 * thread (TILE_M x TILE_N x TILE_K / MQ_PLAN_THREADS), the last two where
 * the registers peak. */
static const char *const keys[] = {"TILE_M", "TILE_N",          "TILE_K",          "SG_M",
                                   "SG_N",   "MQ_PLAN_THREADS", "MQ_PLAN_TG_BYTES"};
enum {
    NKEYS = sizeof keys / sizeof keys[0],
    M_THREADS = 5,
    M_VOLUME = NKEYS,
    M_AREA,
    M_PER_THREAD,
    NMEASURES
};

static long measure(const char *defines, int v)
{
    if (v < NKEYS)
        return macro(defines, keys[v]);
    long area = macro(defines, "TILE_M") * macro(defines, "TILE_N");
    long threads = macro(defines, "MQ_PLAN_THREADS");
    if (v == M_AREA)
        return area;
    if (v == M_PER_THREAD)
        return area * macro(defines, "TILE_K") / (threads > 0 ? threads : 1);
    return area * macro(defines, "TILE_K");
}

/* Among the programs of g's group (its file, and its trellis width when
 * by_width), keep the first with the smallest and the first with the
 * largest value of each measure in vs. */
static void mark_extremes(const mq_test_program *ps, int np, int g, int by_width, const int *vs,
                          int nv, char *keep)
{
    long bits = macro(ps[g].defines, "TRELLIS_BITS");
    for (int k = 0; k < nv; k++) {
        int lo = g, hi = g;
        long vlo = measure(ps[g].defines, vs[k]), vhi = vlo;
        for (int i = g + 1; i < np; i++) {
            if (strcmp(ps[i].file, ps[g].file) ||
                (by_width && macro(ps[i].defines, "TRELLIS_BITS") != bits))
                continue;
            long x = measure(ps[i].defines, vs[k]);
            if (x < vlo)
                lo = i, vlo = x;
            if (x > vhi)
                hi = i, vhi = x;
        }
        keep[lo] = keep[hi] = 1;
    }
}

int mq_test_subset(const mq_test_program *ps, int np, char *keep)
{
    int all[NMEASURES], per_width[] = {M_VOLUME, M_THREADS, M_AREA};
    for (int v = 0; v < NMEASURES; v++)
        all[v] = v;
    memset(keep, 0, (size_t)np);
    for (int g = 0; g < np; g++) {
        int first_of_file = 1, first_of_width = 1;
        for (int i = 0; i < g && first_of_width; i++)
            if (!strcmp(ps[i].file, ps[g].file)) {
                first_of_file = 0;
                first_of_width = macro(ps[i].defines, "TRELLIS_BITS") !=
                                 macro(ps[g].defines, "TRELLIS_BITS");
            }
        if (first_of_file)
            mark_extremes(ps, np, g, 0, all, NMEASURES, keep);
        if (first_of_width)
            mark_extremes(ps, np, g, 1, per_width, 3, keep);
    }
    int n = 0;
    for (int i = 0; i < np; i++)
        n += keep[i];
    return n;
}

const char *mq_test_repeat(void)
{
    const char *r = getenv("MQ_TEST_REPEAT");
    return r && *r ? r : NULL;
}

int td_planted_dir(const char *file, const char *from, const char *to, char *dir, size_t n)
{
    snprintf(dir, n, "/tmp/mq-planted-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    char cmd[1024], path[512];
    snprintf(cmd, sizeof cmd, "cp %s/*.metal %s/*.h %s/", mq_metal_source_dir(), mq_metal_source_dir(),
             dir);
    int rc = system(cmd) ? -1 : 0;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    char *text = calloc(1, 1 << 20);
    size_t got = f && text ? fread(text, 1, (1 << 20) - 1, f) : 0;
    if (f)
        fclose(f);
    char *at = rc == 0 && text ? strstr(text, from) : NULL;
    rc = -1;
    if (at && got) {
        f = fopen(path, "w");
        if (f) {
            fprintf(f, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
            rc = fclose(f) ? -1 : 0;
        }
    }
    free(text);
    if (rc) { /* nothing planted: no directory left behind */
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) {
        }
    }
    return rc;
}

int td_scale_fp4_weights(mq_bench_problem *bp, int e)
{
    if (!bp->copies || bp->ncopies != 1 || bp->p.format != MQ_FMT_FP4)
        return -1;
    mq_weights *w = &bp->copies[0];
    size_t n = (size_t)mq_group_count(w->K, w->group) * (size_t)w->N;
    for (size_t i = 0; i < n; i++) {
        float s = ldexpf(mq_half_to_float(w->scales[i]), e);
        if (!(fabsf(s) < 65504.0f))
            return -1;
        w->scales[i] = mq_float_to_half(s);
    }
    if (mq_weights_prepare_lane(w, NULL))
        return -1;
    for (size_t i = 0; i < (size_t)bp->nref * (size_t)w->N; i++) {
        bp->ref_cache[i] = ldexp(bp->ref_cache[i], e);
        bp->abs_cache[i] = ldexp(bp->abs_cache[i], e);
    }
    bp->prepared = NULL; /* the backend takes the new arrays */
    return 0;
}

void td_run_candidate(mq_backend *b, const mq_problem *p, const mq_candidate *c,
                      const mq_limits *lim, int *stages, mq_measurement *m)
{
    mq_plan plan;
    *stages = mq_plan_candidate(p, c, lim, &plan, NULL) == MQ_OK ? plan.stages : -1;
    snprintf(m->status, sizeof m->status, "unplanned");
    m->error[0] = 0;
    mq_bench_problem bp;
    memset(&bp, 0, sizeof bp);
    mq_error e;
    if (mq_bench_problem_setup(&bp, p, 1, NULL, 0, &e)) {
        snprintf(m->error, sizeof m->error, "set up: %.200s", e.msg);
        return;
    }
    mq_measure_opts mo = mq_measure_defaults();
    mq_measure(b, &bp, c, lim, &mo, m);
    mq_bench_problem_free(&bp);
}

int td_run_planted(const char *file, const char *from, const char *to, const mq_problem *p,
                   const mq_candidate *c, const mq_limits *lim, mq_measurement *m)
{
    char dir[64];
    if (td_planted_dir(file, from, to, dir, sizeof dir))
        return -1;
    setenv("MQ_METAL_DIR", dir, 1);
    mq_backend_opts bo = {1};
    mq_error e;
    mq_backend *b = mq_backend_msl_cpu_open(&bo, &e);
    int stages, opened = b != NULL;
    if (b)
        td_run_candidate(b, p, c, lim, &stages, m);
    mq_backend_close(b);
    unsetenv("MQ_METAL_DIR");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {
    }
    return opened ? 0 : -2;
}
