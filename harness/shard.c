/* shard.c - see shard.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "csvfile.h"
#include "grow.h"
#include "numparse.h"
#include "shard.h"

int mq_shard_parse(const char *text, mq_shard *s, char *err, size_t errlen)
{
    char a[32], b[32], why[160];
    const char *slash = strchr(text, '/');
    size_t la = slash ? (size_t)(slash - text) : 0;
    if (!slash || la == 0 || la >= sizeof a || strlen(slash + 1) >= sizeof b) {
        snprintf(err, errlen, "bad --shard '%.60s' (expected I/N, e.g. 3/16)", text);
        return -1;
    }
    memcpy(a, text, la);
    a[la] = '\0';
    snprintf(b, sizeof b, "%s", slash + 1);
    if (mq_parse_int(b, 1, MQ_SHARD_MAX, &s->count, why, sizeof why) ||
        mq_parse_int(a, 1, s->count, &s->index, why, sizeof why)) {
        snprintf(err, errlen, "bad --shard '%.60s': %s (expected I/N with 1 <= I <= N <= %d)",
                 text, why, MQ_SHARD_MAX);
        return -1;
    }
    return 0;
}

int mq_work_add(mq_work_list *w, const mq_work_unit *u)
{
    if (mq_grow(&w->u, &w->cap, w->n + 1, sizeof *w->u, 256))
        return -1;
    w->u[w->n++] = *u;
    return 0;
}

void mq_work_free(mq_work_list *w)
{
    free(w->u);
    memset(w, 0, sizeof *w);
}

/* What one CPU-model worker spends on one kernel run, in picoseconds per
 * weight (a pass over cold weights: unpacking, dequantizing, one
 * multiply-add) and per further multiply-add of a token row; per
 * candidate, beyond its timed runs: a fixed part (planning, verifying the
 * sampled rows, the row's write) and its warm-ups; per problem: generating
 * and quantizing the weights and the float64 reference (per weight; the
 * first touch of the cold copies' memory, most of a process's setup, is
 * paid once per shard, whatever its problems). Fitted on 86 shards of a
 * 2866-candidate single-thread sweep on a 16-core x86-64 host, 2 to 16
 * shards at a time (each shard's wall time against its rows; residual
 * 0.6 s rms; BENCHMARKS.md, issue 18). The timed part is bound by the
 * budget rather than by the repetitions: short kernels run until the
 * confidence rule or the budget stops them, long ones for their minimum
 * repetitions. These are the CPU model's figures: another machine or
 * backend keeps the shares balanced as far as its times scale alike across
 * shapes (assumed, not measured). */
static const struct {
    int64_t ps_weight, ps_setup_weight;
} format_cost[MQ_FMT_COUNT] = {
    [MQ_FMT_FP4] = {180, 26000},      [MQ_FMT_U4] = {200, 26000},
    [MQ_FMT_TRELLIS2] = {260, 41000}, [MQ_FMT_TRELLIS3] = {260, 41000},
    [MQ_FMT_TRELLIS4] = {260, 41000},
};
enum {
    PS_MAC = 24,          /* a further token row's multiply-add */
    CANDIDATE_US = 500,   /* a candidate's fixed part */
    SETUP_US = 0,         /* a problem's fixed part (a shard's, about 1 s, is the same for all) */
    CI_STOP_PERCENT = 80, /* of the budget, where the confidence rule stops a typical kernel */
};

static int64_t kernel_us(const mq_problem *p)
{
    int64_t nk = (int64_t)p->N * p->K;
    int64_t ps = nk * format_cost[p->format].ps_weight + nk * (int64_t)(p->M - 1) * PS_MAC;
    return ps / 1000000 + 1;
}

int64_t mq_work_candidate_cost_us(const mq_problem *p, const mq_measure_opts *mo)
{
    int64_t k = kernel_us(p), budget = (int64_t)(mo->budget_s * 1e6);
    int64_t timed = 0;
    if (mo->max_reps > 0) {
        /* every repetition, or until the one that crosses the budget; the
         * confidence rule stops most a little before; never fewer than the
         * minimum repetitions */
        int64_t all = mo->max_reps * k, to_budget = budget + k;
        timed = all < to_budget ? all : to_budget;
        if (mo->ci_rel > 0)
            timed = timed * CI_STOP_PERCENT / 100;
        int64_t least = (mo->min_reps < mo->max_reps ? mo->min_reps : mo->max_reps) * k;
        timed = timed > least ? timed : least;
    }
    return CANDIDATE_US + (1 + mo->warmups) * k + timed;
}

int64_t mq_work_setup_cost_us(const mq_problem *p)
{
    int64_t nk = (int64_t)p->N * p->K;
    return SETUP_US + nk * format_cost[p->format].ps_setup_weight / 1000000;
}

/* FNV-1a, 64 bits, over a buffer. */
static uint64_t fnv(uint64_t h, const void *buf, size_t n)
{
    const unsigned char *b = buf;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The id hashes fields one by one (never struct padding). */
static uint64_t hash_unit(uint64_t h, const mq_work_unit *u)
{
    const int32_t f[] = {(int32_t)u->p.format, u->p.M, u->p.N, u->p.K, u->p.group,
                         (int32_t)u->c.variant, u->c.p.tile_m, u->c.p.tile_n, u->c.p.tile_k,
                         u->c.p.num_threadgroups, u->c.p.split_k, u->whole, u->rows, u->shard};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        unsigned char le[4] = {(unsigned char)f[i], (unsigned char)(f[i] >> 8),
                               (unsigned char)(f[i] >> 16), (unsigned char)(f[i] >> 24)};
        h = fnv(h, le, 4);
    }
    return h;
}

/* Pack the units in order into shards of at most cap each (a shard pays
 * the setup of each problem it meets); the shards used, or nshards + 1
 * when they do not fit. With assign, each unit's shard is set. */
static int pack(mq_work_list *w, int64_t cap, int nshards, int assign)
{
    int s = 0;
    int64_t cur = 0;
    for (int i = 0; i < w->n; i++) {
        const mq_work_unit *u = &w->u[i];
        int met = i > 0 && cur > 0 && !memcmp(&w->u[i - 1].p, &u->p, sizeof u->p);
        int64_t c = u->cost_us + (met ? 0 : u->setup_us);
        if (cur > 0 && cur + c > cap) { /* the next shard, which meets this problem anew */
            if (++s >= nshards)
                return nshards + 1;
            cur = 0;
            c = u->cost_us + u->setup_us;
        }
        cur += c;
        if (assign)
            w->u[i].shard = s + 1;
    }
    return s + 1;
}

typedef struct {
    int64_t num, den; /* the unit's place in the mixed list, a fraction of 1 */
    int problem, at;
    mq_work_unit u;
} placed;

static int by_place(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    int64_t l = x->num * y->den, r = y->num * x->den; /* both below 2^40 */
    int c = (l > r) - (l < r);
    if (!c)
        c = (x->problem > y->problem) - (x->problem < y->problem);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* Mix the list so that contiguous shares hold problems of several kinds: a
 * problem whose setup is cheap next to its measuring (at most 1/20 of it)
 * is cut into slices (up to one per shard), which go evenly between the
 * problems kept whole; an estimate that is off for one kind of kernel
 * (short ones, which the confidence rule stops early on a quiet machine
 * and late on a busy one) then moves every shard alike, for at most 5%
 * more setup. -1 on out of memory (the list is left as it was). */
static int mix(mq_work_list *w, int nshards)
{
    enum { SETUP_SHARE = 20 };
    size_t cap = (size_t)w->n + 1;
    placed *t = malloc(sizeof *t * cap);
    int *start = malloc(sizeof *start * cap), *slices = malloc(sizeof *slices * cap);
    if (!t || !start || !slices) {
        free(t);
        free(start);
        free(slices);
        return -1;
    }
    /* each problem's first unit and slices; the problems kept whole counted */
    int nprob = 0, whole = 0;
    for (int i = 0, e; i < w->n; i = e) {
        int64_t cost = 0;
        for (e = i; e < w->n && !memcmp(&w->u[e].p, &w->u[i].p, sizeof w->u[i].p); e++)
            cost += w->u[e].cost_us;
        int64_t setup = w->u[i].setup_us, k = setup > 0 ? cost / (SETUP_SHARE * setup) : nshards;
        start[nprob] = i;
        slices[nprob] = (int)(k < 1 ? 1 : k > nshards ? nshards : k > e - i ? e - i : k);
        whole += slices[nprob++] == 1;
    }
    start[nprob] = w->n;
    /* a whole problem sits at the middle of its place among the whole
     * ones, (r + 1/2) / whole; slice s of S at (s + 1/2) / S */
    for (int p = 0, rank = -1; p < nprob; p++) {
        int first = start[p], n = start[p + 1] - first;
        rank += slices[p] == 1;
        for (int i = first; i < first + n; i++) {
            int64_t s = (int64_t)(i - first) * slices[p] / n;
            t[i] = slices[p] == 1
                       ? (placed){2 * (int64_t)rank + 1, 2 * (int64_t)whole, p, i, w->u[i]}
                       : (placed){2 * s + 1, 2 * (int64_t)slices[p], p, i, w->u[i]};
        }
    }
    qsort(t, (size_t)w->n, sizeof *t, by_place);
    for (int i = 0; i < w->n; i++)
        w->u[i] = t[i].u;
    free(t);
    free(start);
    free(slices);
    return 0;
}

void mq_work_split(mq_work_list *w, int nshards)
{
    if (nshards > 1)
        (void)mix(w, nshards); /* out of memory: the list as it is, still a valid split */
    /* the smallest cap the units fit into nshards shards with: the
     * optimum of contiguous shares, found by bisection */
    int64_t lo = 1, hi = 1;
    for (int i = 0; i < w->n; i++) {
        int64_t c = w->u[i].cost_us + w->u[i].setup_us;
        lo = c > lo ? c : lo;
        hi += c;
    }
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (pack(w, mid, nshards, 0) <= nshards)
            hi = mid;
        else
            lo = mid + 1;
    }
    pack(w, lo, nshards, 1);
    w->nshards = nshards;
    uint64_t h = 14695981039346656037ull;
    unsigned char ns[4] = {(unsigned char)nshards, (unsigned char)(nshards >> 8), 0, 0};
    h = fnv(h, ns, 4);
    for (int i = 0; i < w->n; i++)
        h = hash_unit(h, &w->u[i]);
    w->id = h;
}

int64_t mq_work_total_us(const mq_work_list *w)
{
    int64_t total = 0, cost;
    int units;
    for (int s = 1; s <= w->nshards; s++) {
        mq_work_shard_totals(w, s, &units, &cost);
        total += cost;
    }
    return total;
}

void mq_work_shard_totals(const mq_work_list *w, int shard, int *units, int64_t *cost_us)
{
    *units = 0;
    *cost_us = 0;
    for (int i = 0; i < w->n; i++)
        if (w->u[i].shard == shard) {
            int met = *units > 0 && !memcmp(&w->u[i - 1].p, &w->u[i].p, sizeof w->u[i].p);
            (*units)++;
            *cost_us += w->u[i].cost_us + (met ? 0 : w->u[i].setup_us);
        }
}

int mq_shard_plan_print(const mq_work_list *w, FILE *f)
{
    int64_t total = mq_work_total_us(w), most = 0;
    fprintf(f, "sweep %016llx: %d units, estimated %.1f s, in %d shards\n",
            (unsigned long long)w->id, w->n, total / 1e6, w->nshards);
    for (int s = 1; s <= w->nshards; s++) {
        int units;
        int64_t cost;
        mq_work_shard_totals(w, s, &units, &cost);
        most = cost > most ? cost : most;
        fprintf(f, "  shard %d/%d: %d units, estimated %.1f s\n", s, w->nshards, units,
                cost / 1e6);
    }
    fprintf(f, "estimated imbalance (slowest shard / mean): %.3f\n",
            total > 0 ? (double)most * w->nshards / (double)total : 1.0);
    return 0;
}

void mq_manifest_path(const char *results_path, char *out, size_t n)
{
    size_t len = strlen(results_path);
    if (len >= 4 && !strcmp(results_path + len - 4, ".csv"))
        len -= 4;
    snprintf(out, n, "%.*s.manifest.csv", (int)len, results_path);
}

static const char *const mcols[] = {
    "sweep", "kind", "shard", "shards", "chip", "backend", "format", "M", "N", "K", "group",
    "variant", "tile_m", "tile_n", "tile_k", "num_threadgroups", "split_k", "rows", "cost_us",
};
enum { NMCOL = (int)(sizeof mcols / sizeof mcols[0]) };

int mq_manifest_write(const char *path, const mq_work_list *w, const mq_shard *s,
                      const char *kind, const char *chip, const char *backend, char *err,
                      size_t errlen)
{
    char tmp[4200];
    int units;
    int64_t cost;
    mq_work_shard_totals(w, s->index, &units, &cost);
    FILE *f = mq_atomic_open(path, tmp, sizeof tmp, err, errlen);
    if (!f)
        return -1;
    int64_t total = mq_work_total_us(w);
    fprintf(f, "# mq shard manifest, schema 1: the units of work shard %d of %d owns\n",
            s->index, s->count);
    fprintf(f, "# sweep %016llx: %d units, estimated %.1f s; this shard: %d units, %.1f s\n",
            (unsigned long long)w->id, w->n, total / 1e6, units, cost / 1e6);
    fprintf(f, "# kind %s, chip %s, backend %s\n", kind, chip, backend);
    for (int i = 0; i < NMCOL; i++)
        fprintf(f, "%s%c", mcols[i], i == NMCOL - 1 ? '\n' : ',');
    for (int i = 0; i < w->n; i++) {
        const mq_work_unit *u = &w->u[i];
        if (u->shard != s->index)
            continue;
        fprintf(f, "%016llx,%s,%d,%d,%s,%s,%s,%d,%d,%d,%d,", (unsigned long long)w->id, kind,
                s->index, s->count, chip, backend, mq_format_name(u->p.format), u->p.M, u->p.N,
                u->p.K, u->p.group);
        if (u->whole)
            fprintf(f, "*,*,*,*,*,*,");
        else
            fprintf(f, "%s,%d,%d,%d,%d,%d,", mq_variant_get(u->c.variant)->name,
                    u->c.p.tile_m, u->c.p.tile_n, u->c.p.tile_k, u->c.p.num_threadgroups,
                    u->c.p.split_k);
        fprintf(f, "%d,%lld\n", u->rows, (long long)u->cost_us);
    }
    return mq_atomic_commit(f, tmp, path, err, errlen);
}

/* A sweep id as the writer prints it: exactly 16 hex digits (strtoull alone
 * would take a sign, spaces or fewer digits). 0, or -1. */
static int parse_id(const char *s, uint64_t *id)
{
    if (strlen(s) != 16 || strspn(s, "0123456789abcdefABCDEF") != 16)
        return -1;
    *id = strtoull(s, NULL, 16);
    return 0;
}

/* One manifest row into u (the sweep's fields must agree with the
 * comment lines', in m). */
static int parse_mrow(char **f, const mq_manifest *m, mq_work_unit *u, char *why, size_t n)
{
    char bad[160];
    mq_error e;
    uint64_t id;
    if (parse_id(f[0], &id))
        return snprintf(why, n, "sweep: '%.40s' is not a 16-digit hex id", f[0]), -1;
    int shard, shards;
    if (mq_parse_int(f[3], 1, MQ_SHARD_MAX, &shards, bad, sizeof bad))
        return snprintf(why, n, "shards: %s", bad), -1;
    if (mq_parse_int(f[2], 1, shards, &shard, bad, sizeof bad))
        return snprintf(why, n, "shard: %s", bad), -1;
    if (strcmp(f[1], "bench") && strcmp(f[1], "tune"))
        return snprintf(why, n, "kind: '%.40s' is not bench or tune", f[1]), -1;
    if (id != m->id || shard != m->shard || shards != m->nshards ||
               strcmp(f[1], m->kind) || strcmp(f[4], m->chip) || strcmp(f[5], m->backend)) {
        return snprintf(why, n, "sweep, kind, shard, chip or backend differs from the comment "
                                "lines'"),
               -1;
    }
    memset(u, 0, sizeof *u);
    u->shard = shard;
    if (mq_format_from_name(f[6], &u->p.format, &e))
        return snprintf(why, n, "format: %.200s", e.msg), -1;
    int *dims[] = {&u->p.M, &u->p.N, &u->p.K, &u->p.group};
    for (int i = 0; i < 4; i++)
        if (mq_parse_int(f[7 + i], 1, 1 << 24, dims[i], bad, sizeof bad))
            return snprintf(why, n, "%s: %s", mcols[7 + i], bad), -1;
    /* a tune unit is a whole problem (every field of its candidate '*'), a
     * bench unit one candidate: anything else is no writer's */
    u->whole = !strcmp(f[11], "*");
    if (u->whole != !strcmp(m->kind, "tune"))
        return snprintf(why, n, "variant: '%.40s' in a %s manifest (expected %s)", f[11],
                        m->kind, u->whole ? "a candidate's variant" : "'*', a whole problem"),
               -1;
    for (int i = 12; u->whole && i < 17; i++)
        if (strcmp(f[i], "*"))
            return snprintf(why, n, "%s: '%.40s' in a whole problem's row (expected '*')",
                            mcols[i], f[i]),
                   -1;
    if (!u->whole) {
        if (mq_variant_from_name(f[11], &u->c.variant, &e))
            return snprintf(why, n, "variant: %.200s", e.msg), -1;
        int *params[] = {&u->c.p.tile_m, &u->c.p.tile_n, &u->c.p.tile_k,
                         &u->c.p.num_threadgroups, &u->c.p.split_k};
        for (int i = 0; i < 5; i++)
            if (mq_parse_int(f[12 + i], 0, 1 << 24, params[i], bad, sizeof bad))
                return snprintf(why, n, "%s: %s", mcols[12 + i], bad), -1;
    }
    long cost;
    if (mq_parse_int(f[17], 0, 1 << 24, &u->rows, bad, sizeof bad))
        return snprintf(why, n, "rows: %s", bad), -1;
    if (mq_parse_long(f[18], 0, 1L << 50, &cost, bad, sizeof bad))
        return snprintf(why, n, "cost_us: %s", bad), -1;
    u->cost_us = cost;
    return 0;
}

/* mq_csv_parse_rows' parser: the manifest's next unit. */
static int take_unit(char **f, void *manifest, char *why, size_t n)
{
    mq_manifest *m = manifest;
    if (parse_mrow(f, m, &m->u[m->n], why, n))
        return -1;
    m->cost_us += m->u[m->n++].cost_us;
    return 0;
}

/* True when s holds nothing but blanks from position at on (sscanf's %n:
 * what follows the last field of a comment line must be nothing). */
static int rest_blank(const char *s, int at)
{
    return at > 0 && s[at + strspn(s + at, " \t")] == '\0';
}

/* The three comment lines (they say the sweep even of a shard that owns no
 * unit): the schema, the shard of its count, the sweep's id and unit
 * counts, the kind, chip and backend. Numbers are taken as text
 * and range-checked (sscanf's %d overflows silently). 0, or -1 with the
 * reason (after "PATH: ") in why. */
static int parse_comments(const mq_csv_table *t, mq_manifest *m, char *why, size_t n)
{
    char schema[12], shard[12], shards[12], id[17], units[12], mine[12], bad[160];
    int at = 0, v;
    const char *c0 = t->ncomments >= 3 ? t->comments[0] : "";
    if (t->ncomments < 3 ||
        sscanf(c0, " mq shard manifest, schema %11[0-9]: the units of work shard %11[0-9] of "
                   "%11[0-9] owns%n",
               schema, shard, shards, &at) != 3 ||
        !rest_blank(c0, at))
        return snprintf(why, n, "not a shard manifest (expected its three comment lines, the "
                                "first '# mq shard manifest, schema 1: ...')"),
               -1;
    if (mq_parse_int(schema, 1, 1, &v, bad, sizeof bad))
        return snprintf(why, n, "manifest schema %.12s: this tool reads schema 1", schema), -1;
    if (mq_parse_int(shards, 1, MQ_SHARD_MAX, &m->nshards, bad, sizeof bad) ||
        mq_parse_int(shard, 1, m->nshards, &m->shard, bad, sizeof bad))
        return snprintf(why, n, "shard %.12s of %.12s (expected I of N with 1 <= I <= N <= %d)",
                        shard, shards, MQ_SHARD_MAX),
               -1;
    at = 0;
    if (sscanf(t->comments[1], " sweep %16[0-9a-fA-F]: %11[0-9] units, estimated %*[^;]; this "
                               "shard: %11[0-9] units,%n",
               id, units, mine, &at) != 3 ||
        !at || parse_id(id, &m->id) ||
        mq_parse_int(units, 0, 1 << 30, &m->sweep_units, bad, sizeof bad) ||
        mq_parse_int(mine, 0, m->sweep_units, &m->shard_units, bad, sizeof bad))
        return snprintf(why, n, "second comment line: expected '# sweep ID: U units, estimated "
                                "S s; this shard: u units, s s' (a 16-digit ID, u <= U)"),
               -1;
    at = 0;
    if (sscanf(t->comments[2], " kind %7[a-z], chip %31[^,], backend %15s%n", m->kind, m->chip,
               m->backend, &at) != 3 ||
        !rest_blank(t->comments[2], at) || (strcmp(m->kind, "bench") && strcmp(m->kind, "tune")))
        return snprintf(why, n, "third comment line: expected '# kind bench|tune, chip C, "
                                "backend B'"),
               -1;
    return 0;
}

int mq_manifest_load(const char *path, mq_manifest *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    mq_csv_table t;
    if (mq_csv_read(path, &t, err, errlen))
        return -1;
    char why[400];
    int rc = -1, header = t.nrows >= 1 && t.rows[0].nfields == NMCOL;
    for (int i = 0; header && i < NMCOL; i++)
        header = !strcmp(t.rows[0].fields[i], mcols[i]);
    if (parse_comments(&t, m, why, sizeof why))
        snprintf(err, errlen, "%s: %s", path, why);
    else if (!header)
        snprintf(err, errlen, "%s: expected the header 'sweep,kind,shard,...,rows,cost_us' of "
                              "%d columns after the comment lines", path, NMCOL);
    else if (!(m->u = calloc((size_t)t.nrows, sizeof *m->u)))
        snprintf(err, errlen, "%s: out of memory", path);
    else if (mq_csv_parse_rows(&t, path, NMCOL, take_unit, m, err, errlen) == 0) {
        rc = 0;
        if (m->n != m->shard_units) { /* a manifest cut short, or edited */
            snprintf(err, errlen, "%s: %d unit rows, but its comment line says shard %d/%d owns "
                                  "%d", path, m->n, m->shard, m->nshards, m->shard_units);
            rc = -1;
        }
    }
    mq_csv_free(&t);
    if (rc)
        mq_manifest_free(m);
    return rc;
}

void mq_manifest_free(mq_manifest *m)
{
    free(m->u);
    m->u = NULL;
    m->n = 0;
}
