/* table.c - dispatch tables: loading the CSV that tune writes (libcsv, via
 * csvfile.c) with the cost model it carries ("# cost-model:" lines), tables
 * from compiled-in rows, and the lookup with its fallbacks: exact shape ->
 * the cost model over the candidate grid (when the table has one) ->
 * nearest shape (distance in log N, log K, within the M range; see
 * adapt_to_n) -> the chip's default for the format -> the seed rule. A
 * candidate that is not legal for the asked problem is skipped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candidate_grid.h"
#include "cost_model.h"
#include "csvfile.h"
#include "numparse.h"
#include "table_columns.h"
#include "mq_internal.h"

struct mq_table {
    char chip[32];
    char kernel_build[32]; /* "": not recorded */
    mq_table_row *rows; /* the dense rows, then the MoE rows */
    int n, nmoe;
    int has_model;
    double fig[MQ_CHIP_NFIELDS]; /* the chip's figures, for the model */
    mq_model model;
};

const char *const mq_table_columns[MQ_TCOL_COUNT] = {
    [MQ_TCOL_FORMAT] = "format",
    [MQ_TCOL_GROUP] = "group",
    [MQ_TCOL_N] = "N",
    [MQ_TCOL_K] = "K",
    [MQ_TCOL_M_LO] = "m_lo",
    [MQ_TCOL_M_HI] = "m_hi",
    [MQ_TCOL_VARIANT] = "variant",
    [MQ_TCOL_TILE_M] = "tile_m",
    [MQ_TCOL_TILE_N] = "tile_n",
    [MQ_TCOL_TILE_K] = "tile_k",
    [MQ_TCOL_NUM_THREADGROUPS] = "num_threadgroups",
    [MQ_TCOL_SPLIT_K] = "split_k",
    [MQ_TCOL_EXPECTED_S] = "expected_s",
    [MQ_TCOL_SOURCE] = "source",
    [MQ_TCOL_SPEEDUP_SEED] = "speedup_seed",
    [MQ_TCOL_SPEEDUP_STRIPE] = "speedup_stripe",
    [MQ_TCOL_SPEEDUP_MLX] = "speedup_mlx",
    [MQ_TCOL_EXPECTED_M] = "expected_m",
    [MQ_TCOL_EXPERTS] = "experts",
    [MQ_TCOL_TOP_K] = "top_k",
    [MQ_TCOL_I_SPLIT] = "i_split",
    [MQ_TCOL_FUSE_GATE_UP] = "fuse_gate_up",
    [MQ_TCOL_DOWN_TILE_N] = "down_tile_n",
    [MQ_TCOL_DOWN_TILE_K] = "down_tile_k",
};

static const char *const level_names[] = {"exact", "model", "nearest", "default", "builtin"};

const char *mq_lookup_level_name(mq_lookup_level l)
{
    return (unsigned)l < sizeof level_names / sizeof *level_names ? level_names[l] : "?";
}

mq_status mq_table_from_rows(const char *chip, const mq_table_row *rows, int n, mq_table **out,
                             mq_error *err)
{
    mq_table *t = calloc(1, sizeof *t);
    if (!t || (n > 0 && !(t->rows = malloc(sizeof *rows * (size_t)n)))) {
        free(t);
        return mq_fail(err, MQ_E_NOMEM, "out of memory for a %d-row table", n);
    }
    snprintf(t->chip, sizeof t->chip, "%s", chip ? chip : "");
    /* the dense rows first, the MoE rows after them (each in its order) */
    for (int i = 0; i < n; i++)
        if (rows[i].experts <= 0)
            t->rows[t->n++] = rows[i];
    for (int i = 0; i < n; i++)
        if (rows[i].experts > 0)
            t->rows[t->n + t->nmoe++] = rows[i];
    *out = t;
    return mq_ok(err);
}

void mq_table_free(mq_table *t)
{
    if (t)
        free(t->rows);
    free(t);
}

const char *mq_table_chip(const mq_table *t) { return t ? t->chip : ""; }

const char *mq_table_kernel_build(const mq_table *t) { return t ? t->kernel_build : ""; }

int mq_table_rows(const mq_table *t, const mq_table_row **rows)
{
    *rows = t ? t->rows : NULL;
    return t ? t->n : 0;
}

int mq_table_moe_rows(const mq_table *t, const mq_table_row **rows)
{
    *rows = t ? t->rows + t->n : NULL;
    return t ? t->nmoe : 0;
}

/* The MoE row's candidate for p, or 0 when it does not cover p's tokens or
 * is not legal for p. */
static int moe_row_serves(const mq_table_row *r, const mq_moe_problem *p, mq_moe_candidate *c)
{
    if (r->format != p->format || r->group != p->group || p->tokens < r->m_lo ||
        p->tokens > r->m_hi)
        return 0;
    c->inner = r->c;
    c->i_split = r->i_split;
    c->fuse_gate_up = r->fuse_gate_up;
    c->down_tile_n = r->down_tile_n;
    c->down_tile_k = r->down_tile_k;
    return mq_moe_candidate_check(p, c, NULL) == MQ_OK;
}

mq_moe_candidate mq_table_lookup_moe(const mq_table *t, const mq_moe_problem *p, int threads,
                                     mq_lookup_level *level)
{
    mq_moe_candidate c, best;
    memset(&best, 0, sizeof best);
    double best_d = INFINITY;
    for (int i = 0; t && i < t->nmoe; i++) {
        const mq_table_row *r = &t->rows[t->n + i];
        if (!moe_row_serves(r, p, &c))
            continue;
        if (r->N == p->hidden && r->K == p->inter && r->experts == p->experts &&
            r->top_k == p->top_k) {
            if (level)
                *level = MQ_LOOKUP_EXACT;
            return c;
        }
        double d = sqrt(pow(log((double)r->N / p->hidden), 2) +
                        pow(log((double)r->K / p->inter), 2) +
                        pow(log(((double)r->experts / r->top_k) / ((double)p->experts / p->top_k)),
                            2));
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    if (best_d < INFINITY) {
        if (level)
            *level = MQ_LOOKUP_NEAREST;
        return best;
    }
    if (level)
        *level = MQ_LOOKUP_BUILTIN;
    return mq_moe_default_candidate(p, threads);
}

/* The chip figures the model reads (caches, the tensor peak and the copy
 * stages it does not). */
static int figure_needed(int f)
{
    return f != MQ_CHIP_L2_BYTES && f != MQ_CHIP_SLC_BYTES && f != MQ_CHIP_TENSOR_FP16_TFLOPS &&
           f != MQ_CHIP_TG_MEM_PER_CORE_BYTES && f != MQ_CHIP_MAX_THREADS_PER_CORE &&
           f != MQ_CHIP_ASYNC_COPY_STAGES && f != MQ_CHIP_DECODE_BW_REL &&
           f != MQ_CHIP_PREFILL_REL;
}

/* mq_table_set_model into a zeroed model m (large: the caller's heap). */
static mq_status set_model(mq_table *t, const mq_table_param *params, int n, mq_model *mp,
                           mq_error *err)
{
    double fig[MQ_CHIP_NFIELDS];
    char seen[MQ_CHIP_NFIELDS] = {0};
    memset(fig, 0, sizeof fig);
    for (int i = 0; i < n; i++) {
        const mq_table_param *q = &params[i];
        const char *name = q->name ? q->name : "";
        if (!isfinite(q->value) || q->value < 0)
            return mq_fail(err, MQ_E_ARG, "cost model: %s %s: value %g is not a finite "
                           "non-negative number", q->kind ? q->kind : "", name, q->value);
        if (q->kind && !strcmp(q->kind, "chip")) {
            int f = 0;
            while (f < MQ_CHIP_NFIELDS && strcmp(name, mq_chip_field_names[f]))
                f++;
            if (f == MQ_CHIP_NFIELDS)
                return mq_fail(err, MQ_E_ARG, "cost model: unknown chip figure '%s'", name);
            fig[f] = q->value;
            seen[f] = 1;
        } else if (q->kind && !strcmp(q->kind, "term")) {
            int v = -1;
            if (q->variant && q->variant[0]) {
                mq_variant id;
                mq_error e;
                if (mq_variant_from_name(q->variant, &id, &e))
                    return mq_fail(err, MQ_E_ARG, "cost model: term %s: %s", name, e.msg);
                v = (int)id;
            }
            int j = mq_model_term_index(name, v);
            if (j < 0)
                return mq_fail(err, MQ_E_ARG, "cost model: unknown term '%s'", name);
            mp->theta[j] = q->value;
        } else if (q->kind && !strcmp(q->kind, "kernel")) {
            mq_variant id;
            mq_error e;
            mq_kernel_factor k;
            char key[96], why[160];
            snprintf(key, sizeof key, "%s:%dx%dx%d", name, q->tile_m, q->tile_n, q->tile_k);
            if (mq_variant_from_name(q->variant ? q->variant : "", &id, &e))
                return mq_fail(err, MQ_E_ARG, "cost model: kernel %s: %s", key, e.msg);
            if (mq_kernel_factor_parse(key, (int)id, q->value, &k, why, sizeof why))
                return mq_fail(err, MQ_E_ARG, "cost model: %s", why);
            if (mq_model_kernel_factor(mp, k.variant, k.format, k.tile_m, k.tile_n, k.tile_k) !=
                1.0)
                return mq_fail(err, MQ_E_ARG, "cost model: kernel %s of %s given twice", key,
                               q->variant);
            if (mq_model_set_kernel_factor(mp, &k))
                return mq_fail(err, MQ_E_ARG, "cost model: more than %d kernels",
                               MQ_MODEL_MAXKERNEL);
        } else {
            return mq_fail(err, MQ_E_ARG,
                           "cost model: entry '%s' is neither 'chip', 'term' nor 'kernel'",
                           q->kind ? q->kind : "");
        }
    }
    for (int f = 0; f < MQ_CHIP_NFIELDS; f++)
        if (figure_needed(f) && (!seen[f] || !(fig[f] > 0)))
            return mq_fail(err, MQ_E_ARG, "cost model: chip figure '%s' is %s",
                           mq_chip_field_names[f], seen[f] ? "zero" : "missing");
    memcpy(t->fig, fig, sizeof fig);
    t->model = *mp;
    t->has_model = 1;
    return mq_ok(err);
}

mq_status mq_table_set_model(mq_table *t, const mq_table_param *params, int n, mq_error *err)
{
    if (!t)
        return mq_fail(err, MQ_E_ARG, "mq_table_set_model: no table");
    mq_model *m = calloc(1, sizeof *m);
    if (!m)
        return mq_fail(err, MQ_E_NOMEM, "out of memory reading a cost model");
    mq_status st = set_model(t, params, n, m, err);
    free(m);
    return st;
}

int mq_table_has_model(const mq_table *t) { return t && t->has_model; }

#define MODEL_LINE "cost-model:" /* after the "#" the CSV reader strips */

/* A table file's "# cost-model: KIND NAME VARIANT VALUE" lines (VARIANT
 * "-" for a chip figure or a shared term) as parameters; the names point
 * into buf. Returns the count, or -1 and why with the line's text. */
static int model_lines(const mq_csv_table *t, mq_table_param *out, int cap, char *buf,
                       size_t buflen, char *why, size_t whylen)
{
    int n = 0;
    size_t used = 0;
    for (int i = 0; i < t->ncomments; i++) {
        const char *l = t->comments[i];
        while (*l == ' ')
            l++;
        if (strncmp(l, MODEL_LINE, strlen(MODEL_LINE)))
            continue;
        char kind[16], name[64], variant[64], value[64], extra[2];
        if (sscanf(l + strlen(MODEL_LINE), "%15s %63s %63s %63s %1s", kind, name, variant, value,
                   extra) != 4) {
            snprintf(why, whylen, "'%.80s': expected KIND NAME VARIANT VALUE", l);
            return -1;
        }
        double v;
        char b[160];
        if (mq_parse_double(value, 0, 1e30, &v, b, sizeof b)) {
            snprintf(why, whylen, "'%.80s': %s", l, b);
            return -1;
        }
        size_t need = strlen(kind) + strlen(name) + strlen(variant) + 3;
        if (n == cap || used + need > buflen) {
            snprintf(why, whylen, "more than %d cost-model lines", cap);
            return -1;
        }
        int tile[3] = {0, 0, 0};
        if (!strcmp(kind, "kernel")) { /* NAME is FORMAT:TMxTNxTK */
            char *colon = strchr(name, ':');
            char rest[2];
            if (!colon || sscanf(colon + 1, "%dx%dx%d%1s", &tile[0], &tile[1], &tile[2], rest) != 3 ||
                tile[0] < 1 || tile[1] < 1 || tile[2] < 1) {
                snprintf(why, whylen, "'%.80s': expected a kernel FORMAT:TILE_MxTILE_NxTILE_K", l);
                return -1;
            }
            *colon = '\0';
        }
        char *k = buf + used, *nm = k + strlen(kind) + 1, *vr = nm + strlen(name) + 1;
        strcpy(k, kind);
        strcpy(nm, name);
        strcpy(vr, strcmp(variant, "-") ? variant : "");
        used += need;
        out[n++] = (mq_table_param){k, nm, vr, v, tile[0], tile[1], tile[2]};
    }
    return n;
}

/* "key=value" in a comment line such as "# mq dispatch table: schema=1 chip=m4max" */
static int meta(const char *line, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)) != NULL; p += kl) {
        if ((p == line || p[-1] == ' ') && p[kl] == '=') {
            size_t i = 0;
            for (p += kl + 1; *p && *p != ' ' && i + 1 < n; p++)
                out[i++] = *p;
            out[i] = '\0';
            return 1;
        }
    }
    return 0;
}

mq_status mq_table_load(const char *path, const char *chip, mq_table **out, mq_error *err)
{
    char msg[512];
    mq_csv_table t;
    if (mq_csv_read(path, &t, msg, sizeof msg))
        return mq_fail(err, MQ_E_ARG, "%s", msg);
    char schema[16] = "", tchip[32] = "", kbuild[32] = "";
    for (int i = 0; i < t.ncomments; i++) {
        meta(t.comments[i], "schema", schema, sizeof schema);
        meta(t.comments[i], "chip", tchip, sizeof tchip);
        meta(t.comments[i], "kernels", kbuild, sizeof kbuild);
    }
    mq_status st = MQ_OK;
    int sv = 0;
    if (!schema[0] || mq_parse_int(schema, 1, 1 << 30, &sv, NULL, 0))
        st = mq_fail(err, MQ_E_ARG, "%s: not a dispatch table (no 'schema=' line)", path);
    else if (sv > MQ_TABLE_SCHEMA)
        st = mq_fail(err, MQ_E_ARG, "%s: table schema %d is newer than this library's %d", path,
                     sv, MQ_TABLE_SCHEMA);
    else if (chip && strcmp(chip, tchip))
        st = mq_fail(err, MQ_E_ARG, "%s: the table is for chip '%s', not '%s'", path, tchip,
                     chip);
    const char *const *cols = mq_table_columns;
    int idx[MQ_TCOL_REQUIRED];
    for (int j = 0; st == MQ_OK && j < MQ_TCOL_REQUIRED; j++)
        if ((idx[j] = mq_csv_column(&t, cols[j])) < 0)
            st = mq_fail(err, MQ_E_ARG, "%s:%d: the header lacks column '%s'", path,
                         t.nrows ? t.rows[0].line : 1, cols[j]);
    int em_col = mq_csv_column(&t, cols[MQ_TCOL_EXPECTED_M]); /* optional */
    int moe_col[6]; /* optional: experts, top_k, i_split, fuse_gate_up, down_tile_n/k */
    for (int j = 0; j < 6; j++)
        moe_col[j] = mq_csv_column(&t, cols[MQ_TCOL_EXPERTS + j]);
    mq_table_row *rows = st == MQ_OK && t.nrows > 1 ? calloc((size_t)t.nrows, sizeof *rows) : NULL;
    int n = 0;
    for (int i = 1; st == MQ_OK && i < t.nrows; i++) {
        char **f = t.rows[i].fields;
        mq_table_row *r = &rows[n];
        mq_error e;
        int *ints[] = {&r->group, &r->N, &r->K, &r->m_lo, &r->m_hi, &r->c.p.tile_m,
                       &r->c.p.tile_n, &r->c.p.tile_k, &r->c.p.num_threadgroups,
                       &r->c.p.split_k};
        int ji[] = {MQ_TCOL_GROUP,  MQ_TCOL_N,      MQ_TCOL_K,      MQ_TCOL_M_LO,
                    MQ_TCOL_M_HI,   MQ_TCOL_TILE_M, MQ_TCOL_TILE_N, MQ_TCOL_TILE_K,
                    MQ_TCOL_NUM_THREADGROUPS, MQ_TCOL_SPLIT_K};
        char why[400] = "";
        if (t.rows[i].nfields != t.rows[0].nfields)
            snprintf(why, sizeof why, "%d fields, the header has %d", t.rows[i].nfields,
                     t.rows[0].nfields);
        else if (mq_format_from_name(f[idx[MQ_TCOL_FORMAT]], &r->format, &e))
            snprintf(why, sizeof why, "format: %s", e.msg);
        else if (mq_variant_from_name(f[idx[MQ_TCOL_VARIANT]], &r->c.variant, &e))
            snprintf(why, sizeof why, "variant: %s", e.msg);
        for (int j = 0; !why[0] && j < 10; j++) {
            char b[160];
            if (mq_parse_int(f[idx[ji[j]]], 0, 1 << 30, ints[j], b, sizeof b))
                snprintf(why, sizeof why, "%s: %s", cols[ji[j]], b);
        }
        char b[160];
        if (!why[0] && mq_parse_double(f[idx[MQ_TCOL_EXPECTED_S]], 0, 1e6, &r->expected_s, b, sizeof b))
            snprintf(why, sizeof why, "expected_s: %s", b);
        if (!why[0] && em_col >= 0 &&
            mq_parse_int(f[em_col], 0, 1 << 30, &r->expected_m, b, sizeof b))
            snprintf(why, sizeof why, "expected_m: %s", b);
        int *moe_v[6] = {&r->experts,      &r->top_k,       &r->i_split,
                         &r->fuse_gate_up, &r->down_tile_n, &r->down_tile_k};
        for (int j = 0; !why[0] && j < 6; j++)
            if (moe_col[j] >= 0 && mq_parse_int(f[moe_col[j]], 0, 1 << 20, moe_v[j], b, sizeof b))
                snprintf(why, sizeof why, "%s: %s", cols[MQ_TCOL_EXPERTS + j], b);
        if (!why[0] && r->experts > 0 && (moe_col[1] < 0 || moe_col[2] < 0 || moe_col[3] < 0))
            snprintf(why, sizeof why, "an MoE row (experts %d) without top_k, i_split and "
                                      "fuse_gate_up columns", r->experts);
        if (!why[0] && r->m_lo > r->m_hi)
            snprintf(why, sizeof why, "m_lo %d is above m_hi %d", r->m_lo, r->m_hi);
        if (why[0])
            st = mq_fail(err, MQ_E_ARG, "%s:%d: %s", path, t.rows[i].line, why);
        else
            n++;
    }
    enum { MAX_PARAMS = MQ_CHIP_NFIELDS + MQ_MODEL_NTERM + MQ_MODEL_MAXKERNEL };
    mq_table_param *params = NULL;
    char *pbuf = NULL, why[256];
    int np = 0;
    if (st == MQ_OK) {
        params = malloc(sizeof *params * MAX_PARAMS);
        pbuf = malloc(MAX_PARAMS * 160);
        if (!params || !pbuf)
            st = mq_fail(err, MQ_E_NOMEM, "out of memory reading %s", path);
        else if ((np = model_lines(&t, params, MAX_PARAMS, pbuf, MAX_PARAMS * 160, why,
                                   sizeof why)) < 0)
            st = mq_fail(err, MQ_E_ARG, "%s: %s", path, why);
    }
    mq_csv_free(&t);
    if (st == MQ_OK)
        st = mq_table_from_rows(tchip, rows, n, out, err);
    if (st == MQ_OK)
        snprintf((*out)->kernel_build, sizeof (*out)->kernel_build, "%s", kbuild);
    if (st == MQ_OK && np > 0 && (st = mq_table_set_model(*out, params, np, err)) != MQ_OK) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        mq_fail(err, MQ_E_ARG, "%s: %s", path, m);
        mq_table_free(*out);
        *out = NULL;
    }
    free(params);
    free(pbuf);
    free(rows);
    return st;
}

static int legal_for(const mq_problem *p, const mq_candidate *c, const mq_limits *lim)
{
    mq_plan plan;
    return mq_plan_candidate(p, c, lim, &plan, NULL) == MQ_OK;
}

/* A row of (format, group, N, K) covering M that is legal, or NULL. */
static const mq_table_row *covering(const mq_table *t, const mq_problem *p, int N, int K,
                                    int any_group, const mq_limits *lim)
{
    for (int i = 0; i < t->n; i++) {
        const mq_table_row *r = &t->rows[i];
        if (r->format == p->format && (any_group || r->group == p->group) && r->N == N &&
            r->K == K && r->m_lo <= p->M && p->M <= r->m_hi && legal_for(p, &r->c, lim))
            return r;
    }
    return NULL;
}

/* How evenly a candidate's threadgroups fill the cores: tgs over the next
 * multiple of the core count (1 = no core idles in the last round). */
static double core_fill(const mq_problem *p, const mq_candidate *c, const mq_limits *lim)
{
    mq_plan plan;
    if (mq_plan_candidate(p, c, lim, &plan, NULL) != MQ_OK)
        return -1;
    int cores = lim->cores, tgs = plan.threadgroups;
    return (double)tgs / (double)(((tgs + cores - 1) / cores) * cores);
}

/* A neighbour's candidate for another N: when the chip's core count is
 * known, tile_n may be rescaled so the asked N gets as many column tiles as
 * the neighbour's N did (rounded up to the variant's quantum) - taken only
 * when that fills the cores more evenly than the candidate as it is. */
static mq_candidate adapt_to_n(const mq_table_row *r, const mq_problem *p,
                               const mq_limits *lim)
{
    mq_candidate c = r->c;
    if (!lim || lim->cores <= 0)
        return c;
    int tiles = (r->N + c.p.tile_n - 1) / c.p.tile_n;
    int q = mq_variant_get(c.variant)->tile_quantum;
    mq_candidate a = c;
    a.p.tile_n = ((p->N + tiles - 1) / tiles + q - 1) / q * q;
    if (a.p.num_threadgroups) /* striped: one threadgroup per work unit */
        a.p.num_threadgroups = 0;
    return core_fill(p, &a, lim) > core_fill(p, &c, lim) + 1e-9 ? a : c;
}

/* The model's prediction for c on p (the table's chip), or -1 if illegal. */
static double predict(const mq_table *t, const mq_problem *p, const mq_candidate *c,
                      const mq_limits *lim)
{
    mq_plan plan;
    if (mq_plan_candidate(p, c, lim, &plan, NULL) != MQ_OK)
        return -1;
    mq_features f;
    mq_features_of(p, c, &plan, t->fig, &f);
    return mq_model_predict(&t->model, &f);
}

typedef struct {
    const mq_table *t;
    const mq_problem *p;
    const mq_limits *lim;
    mq_candidate best;
    double best_s;
} model_walk;

static int model_visit(const mq_candidate *c, const char *pointless, void *ctx)
{
    model_walk *w = ctx;
    double s = pointless ? -1 : predict(w->t, w->p, c, w->lim);
    if (s >= 0 && s < w->best_s) {
        w->best_s = s;
        w->best = *c;
    }
    return 0;
}

/* The row's time as measured over the model's prediction at the row's own
 * shape and M: how far the model is off for this candidate (1 when the
 * row does not say, or the table is predicted: the ratio is then 1). Only
 * for a kernel the model holds no factor for: a factor is that kernel's
 * ratio learned over all its fitted rows, while one row's ratio adds that
 * shape's own deviation - and its noise, on the time that won the tune
 * for being the lowest (biased low). Measured: with the row's ratio on top
 * of the factors, the lookup on shapes outside the suites came 13.6% and
 * 24.0% from the best on a 16-core CPU (two runs), without it 6.2% and
 * 18.8%; on the H100 4.9% and 5.3%. */
static double calibration(const mq_table *t, const mq_table_row *r, const mq_limits *lim)
{
    if (!(r->expected_s > 0) || r->expected_m <= 0 ||
        mq_model_has_kernel(&t->model, r->c.variant, (int)r->format, r->c.p.tile_m,
                            r->c.p.tile_n, r->c.p.tile_k))
        return 1;
    mq_problem at = {r->format, r->expected_m, r->N, r->K, r->group};
    double s = predict(t, &at, &r->c, lim);
    return s > 0 ? r->expected_s / s : 1;
}

/* The model's choice for p (see MQ_LOOKUP_MODEL): the table's candidates
 * for this M range, each predicted for p and calibrated on its own row;
 * none legal: the whole grid. 0 when nothing is legal. What the table's
 * rows chose were measured best on real shapes (they carry what the model
 * does not know of the chip); the model moves them to the asked shape. */
static int model_choose(const mq_table *t, const mq_problem *p, const mq_limits *lim,
                        mq_candidate *out)
{
    double best = INFINITY;
    for (int i = 0; i < t->n; i++) {
        const mq_table_row *r = &t->rows[i];
        if (r->format != p->format || r->group != p->group || r->N == 0 || p->M < r->m_lo ||
            p->M > r->m_hi)
            continue;
        double s = predict(t, p, &r->c, lim);
        if (s < 0)
            continue;
        s *= calibration(t, r, lim);
        if (s < best) {
            best = s;
            *out = r->c;
        }
    }
    if (isfinite(best))
        return 1;
    model_walk w = {t, p, lim, {0}, INFINITY};
    mq_candidate_grid(p, (int)t->fig[MQ_CHIP_GPU_CORES], 0, model_visit, &w);
    if (!isfinite(w.best_s))
        return 0;
    *out = w.best;
    return 1;
}

mq_candidate mq_table_lookup(const mq_table *t, const mq_problem *p, const mq_limits *lim,
                             mq_lookup_level *level)
{
    const mq_table_row *r = NULL;
    mq_lookup_level lv = MQ_LOOKUP_BUILTIN;
    mq_limits model_lim;
    if (t && t->has_model && !lim) { /* the table's own chip */
        model_lim = mq_limits_of_figures(t->fig);
        lim = &model_lim;
    }
    mq_candidate chosen;
    if (t && (r = covering(t, p, p->N, p->K, 0, lim)) != NULL) {
        lv = MQ_LOOKUP_EXACT;
    } else if (t && t->has_model && model_choose(t, p, lim, &chosen)) {
        if (level)
            *level = MQ_LOOKUP_MODEL;
        return chosen;
    } else if (t) {
        /* shapes of this format and group, nearest first, until one answers */
        double best = INFINITY;
        for (int i = 0; i < t->n; i++) {
            const mq_table_row *c = &t->rows[i];
            if (c->format != p->format || c->group != p->group || c->N == 0)
                continue;
            double d = hypot(log((double)c->N / p->N), log((double)c->K / p->K));
            const mq_table_row *hit;
            if (d < best && (hit = covering(t, p, c->N, c->K, 0, lim)) != NULL) {
                best = d;
                r = hit;
            }
        }
        if (r) {
            lv = MQ_LOOKUP_NEAREST;
            mq_candidate adapted = adapt_to_n(r, p, lim);
            if (level)
                *level = lv;
            return adapted;
        }
        else if ((r = covering(t, p, 0, 0, 0, lim)) != NULL ||
                 (r = covering(t, p, 0, 0, 1, lim)) != NULL)
            lv = MQ_LOOKUP_DEFAULT;
    }
    if (level)
        *level = lv;
    return r ? r->c : mq_default_candidate(p);
}
