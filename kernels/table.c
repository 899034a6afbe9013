/* table.c - dispatch tables: loading the CSV that tune writes (libcsv, via
 * csvfile.c), tables from compiled-in rows, and the lookup with its
 * fallbacks: exact shape -> nearest shape (distance in log N, log K, within
 * the M range; see adapt_to_n) -> the chip's default for the format -> the
 * seed rule. A candidate that is not legal for the asked problem is skipped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csvfile.h"
#include "numparse.h"
#include "table_columns.h"
#include "mq_internal.h"

struct mq_table {
    char chip[32];
    mq_table_row *rows;
    int n;
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
};

static const char *const level_names[] = {"exact", "nearest", "default", "builtin"};

const char *mq_lookup_level_name(mq_lookup_level l)
{
    return (unsigned)l < 4 ? level_names[l] : "?";
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
    if (n > 0)
        memcpy(t->rows, rows, sizeof *rows * (size_t)n);
    t->n = n;
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

int mq_table_rows(const mq_table *t, const mq_table_row **rows)
{
    *rows = t ? t->rows : NULL;
    return t ? t->n : 0;
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
    char schema[16] = "", tchip[32] = "";
    for (int i = 0; i < t.ncomments; i++) {
        meta(t.comments[i], "schema", schema, sizeof schema);
        meta(t.comments[i], "chip", tchip, sizeof tchip);
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
        if (!why[0] && r->m_lo > r->m_hi)
            snprintf(why, sizeof why, "m_lo %d is above m_hi %d", r->m_lo, r->m_hi);
        if (why[0])
            st = mq_fail(err, MQ_E_ARG, "%s:%d: %s", path, t.rows[i].line, why);
        else
            n++;
    }
    mq_csv_free(&t);
    if (st == MQ_OK)
        st = mq_table_from_rows(tchip, rows, n, out, err);
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

mq_candidate mq_table_lookup(const mq_table *t, const mq_problem *p, const mq_limits *lim,
                             mq_lookup_level *level)
{
    const mq_table_row *r = NULL;
    mq_lookup_level lv = MQ_LOOKUP_BUILTIN;
    if (t && (r = covering(t, p, p->N, p->K, 0, lim)) != NULL) {
        lv = MQ_LOOKUP_EXACT;
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
