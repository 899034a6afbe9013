/* table_write.c - see table_write.h. */
#include <csv.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "table_columns.h"
#include "table_write.h"
#include "version.h"

static int cmp_choice(const void *a, const void *b)
{
    const mq_choice *x = a, *y = b;
    int k[8] = {x->p.format, y->p.format, x->p.group, y->p.group,
                x->p.N,      y->p.N,      x->p.K,     y->p.K};
    for (int i = 0; i < 8; i += 2)
        if (k[i] != k[i + 1])
            return k[i] < k[i + 1] ? -1 : 1;
    return x->p.M - y->p.M;
}

static int same_shape(const mq_problem *a, const mq_problem *b)
{
    return a->format == b->format && a->group == b->group && a->N == b->N && a->K == b->K;
}

static int same_cand(const mq_candidate *a, const mq_candidate *b)
{
    return a->variant == b->variant && !memcmp(&a->p, &b->p, sizeof a->p);
}

int mq_table_build(const mq_choice *ch, int n, mq_table_entry **out)
{
    mq_choice *s = malloc(sizeof *s * (size_t)(n ? n : 1));
    mq_table_entry *e = calloc((size_t)(2 * n + 1), sizeof *e);
    if (!s || !e) {
        free(s);
        free(e);
        return -1;
    }
    memcpy(s, ch, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_choice);
    int m = 0;
    /* the same problem twice (two layers of one shape): keep the first */
    int u = 0;
    for (int i = 0; i < n; i++)
        if (u == 0 || !same_shape(&s[i].p, &s[u - 1].p) || s[i].p.M != s[u - 1].p.M)
            s[u++] = s[i];
    n = u;
    for (int i = 0; i < n; i++) {
        int first = i == 0 || !same_shape(&s[i].p, &s[i - 1].p);
        int last = i == n - 1 || !same_shape(&s[i].p, &s[i + 1].p);
        if (!first && same_cand(&e[m - 1].row.c, &s[i].c)) {
            e[m - 1].row.m_hi = last ? 1 << 30 : s[i].p.M;
            continue;
        }
        mq_table_entry *t = &e[m++];
        t->row = (mq_table_row){s[i].p.format, s[i].p.group, s[i].p.N, s[i].p.K,
                                first ? 1 : s[i - 1].p.M + 1, last ? 1 << 30 : s[i].p.M,
                                s[i].c, s[i].expected_s, s[i].p.M, 0, 0, 0, 0, 0, 0};
        t->measured = s[i].measured;
        memcpy(t->speedup, s[i].speedup, sizeof t->speedup);
    }
    /* defaults: per (format, group) the candidate chosen for the most shapes */
    int shapes_end = m;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int d = shapes_end; d < m; d++)
            seen |= e[d].row.format == s[i].p.format && e[d].row.group == s[i].p.group;
        if (seen)
            continue;
        int best = i, best_count = 0;
        for (int j = 0; j < n; j++) {
            if (s[j].p.format != s[i].p.format || s[j].p.group != s[i].p.group)
                continue;
            int count = 0;
            for (int q = 0; q < n; q++)
                count += s[q].p.format == s[j].p.format && s[q].p.group == s[j].p.group &&
                         same_cand(&s[q].c, &s[j].c);
            if (count > best_count) {
                best_count = count;
                best = j;
            }
        }
        mq_table_entry *t = &e[m++];
        t->row = (mq_table_row){s[i].p.format, s[i].p.group, 0, 0, 1, 1 << 30, s[best].c, 0, 0,
                                0, 0, 0, 0, 0, 0};
        t->measured = s[best].measured;
    }
    free(s);
    *out = e;
    return m;
}

int mq_table_model_params(const double fig[MQ_CHIP_NFIELDS], const mq_model *m,
                          mq_table_param out[MQ_TABLE_MODEL_MAX])
{
    int n = 0;
    for (int f = 0; f < MQ_CHIP_NFIELDS; f++)
        out[n++] = (mq_table_param){"chip", mq_chip_field_names[f], "", fig[f], 0, 0, 0};
    for (int j = 0; j < MQ_MODEL_NTERM; j++) {
        int v = mq_model_term_variant(j);
        if (m->theta[j] <= 0 || v >= mq_variant_count())
            continue;
        out[n++] = (mq_table_param){"term", mq_model_term_name(j),
                                    v < 0 ? "" : mq_variant_get((mq_variant)v)->name,
                                    m->theta[j], 0, 0, 0};
    }
    for (int i = 0; i < m->n_kernel; i++) {
        const mq_kernel_factor *k = &m->kernel[i];
        if (k->variant >= mq_variant_count())
            continue;
        out[n++] = (mq_table_param){"kernel", mq_format_name((mq_format)k->format),
                                    mq_variant_get((mq_variant)k->variant)->name, k->factor,
                                    k->tile_m, k->tile_n, k->tile_k};
    }
    return n;
}

static void field(FILE *f, const char *s, int last)
{
    csv_fwrite(f, s, strlen(s));
    fputc(last ? '\n' : ',', f);
}

int mq_table_write_csv(const char *path, const char *chip, const char *backend,
                       const char *source, const char *kernel_build, const mq_table_entry *e,
                       int n, const double *fig, const mq_model *m, char *err, size_t errlen)
{
    char tmp[4200];
    FILE *f = mq_atomic_open(path, tmp, sizeof tmp, err, errlen);
    if (!f)
        return -1;
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(f,
            "# mq dispatch table: schema=%d chip=%s backend=%s source=%s tool=%s rev=%s "
            "kernels=%s date=%s\n",
            MQ_TABLE_SCHEMA, chip, backend, source, MQ_TOOL_VERSION, mq_git_rev(),
            kernel_build[0] ? kernel_build : "-", date);
    fprintf(f, "# rows with N=0 K=0 are the chip's default per format; speedups are over "
               "each baseline rule (0: the rule does not serve the format)\n");
    if (fig && m) {
        static mq_table_param q[MQ_TABLE_MODEL_MAX];
        int nq = mq_table_model_params(fig, m, q);
        fprintf(f, "# the cost model the lookup chooses with for shapes no row has: the chip's "
                   "figures and the model's coefficients (KIND NAME VARIANT VALUE)\n");
        for (int i = 0; i < nq; i++) {
            char name[96];
            if (q[i].tile_m)
                snprintf(name, sizeof name, "%s:%dx%dx%d", q[i].name, q[i].tile_m, q[i].tile_n,
                         q[i].tile_k);
            else
                snprintf(name, sizeof name, "%s", q[i].name);
            fprintf(f, "# cost-model: %s %s %s %.9g\n", q[i].kind, name,
                    q[i].variant[0] ? q[i].variant : "-", q[i].value);
        }
    }
    for (int i = 0; i < MQ_TCOL_COUNT; i++)
        field(f, mq_table_columns[i], i == MQ_TCOL_COUNT - 1);
    for (int i = 0; i < n; i++) {
        const mq_table_row *r = &e[i].row;
        char v[MQ_TCOL_COUNT][64];
        const struct {
            int col, value;
        } ints[] = {{MQ_TCOL_GROUP, r->group},
                    {MQ_TCOL_N, r->N},
                    {MQ_TCOL_K, r->K},
                    {MQ_TCOL_M_LO, r->m_lo},
                    {MQ_TCOL_M_HI, r->m_hi},
                    {MQ_TCOL_TILE_M, r->c.p.tile_m},
                    {MQ_TCOL_TILE_N, r->c.p.tile_n},
                    {MQ_TCOL_TILE_K, r->c.p.tile_k},
                    {MQ_TCOL_NUM_THREADGROUPS, r->c.p.num_threadgroups},
                    {MQ_TCOL_SPLIT_K, r->c.p.split_k}};
        for (size_t j = 0; j < sizeof ints / sizeof ints[0]; j++)
            snprintf(v[ints[j].col], 64, "%d", ints[j].value);
        snprintf(v[MQ_TCOL_FORMAT], 64, "%s", mq_format_name(r->format));
        snprintf(v[MQ_TCOL_VARIANT], 64, "%s", mq_variant_get(r->c.variant)->name);
        snprintf(v[MQ_TCOL_EXPECTED_S], 64, "%.6g", r->expected_s);
        snprintf(v[MQ_TCOL_SOURCE], 64, "%s",
                 r->N == 0       ? "default"
                 : r->experts    ? "measured-moe"
                 : e[i].measured ? "measured"
                                 : "predicted");
        for (int j = 0; j < MQ_BASE_COUNT; j++)
            snprintf(v[MQ_TCOL_SPEEDUP_SEED + j], 64, "%.3f", e[i].speedup[j]);
        snprintf(v[MQ_TCOL_EXPECTED_M], 64, "%d", r->expected_m);
        const int moe[6] = {r->experts,      r->top_k,       r->i_split,
                            r->fuse_gate_up, r->down_tile_n, r->down_tile_k};
        for (int j = 0; j < 6; j++)
            snprintf(v[MQ_TCOL_EXPERTS + j], 64, "%d", moe[j]);
        for (int j = 0; j < MQ_TCOL_COUNT; j++)
            field(f, v[j], j == MQ_TCOL_COUNT - 1);
    }
    return mq_atomic_commit(f, tmp, path, err, errlen);
}

static const char *const fmt_enum[MQ_FMT_COUNT] = {"MQ_FMT_FP4", "MQ_FMT_U4", "MQ_FMT_TRELLIS2",
                                                   "MQ_FMT_TRELLIS3", "MQ_FMT_TRELLIS4"};
/* A variant in C: its enum constant, or its id for one registered at run
 * time (the same registration order gives the same id). */
static const char *var_enum(mq_variant v, char *buf, size_t n)
{
    const mq_variant_info *vi = mq_variant_get(v);
    if (vi && vi->enum_name)
        return vi->enum_name;
    snprintf(buf, n, "(mq_variant)%d /* %s */", (int)v, vi ? vi->name : "?");
    return buf;
}

int mq_table_write_header(const char *path, const char *chip, const char *source,
                          const char *kernel_build, const mq_table_entry *e, int n,
                          const double *fig, const mq_model *m, char *err, size_t errlen)
{
    char tmp[4200];
    FILE *f = mq_atomic_open(path, tmp, sizeof tmp, err, errlen);
    if (!f)
        return -1;
    fprintf(f,
            "/* Dispatch table for %s (%s), generated by tune %s at revision %s.\n"
            " * Compile it in and load it with\n"
            " *   mq_table_from_rows(mq_table_%s_chip, mq_table_%s_rows, mq_table_%s_count, &t, &err);\n"
            " * and give it its cost model (shapes no row has are chosen by it) with\n"
            " *   mq_table_set_model(t, mq_table_%s_model, mq_table_%s_model_count, &err);\n"
            " * Do not edit: rerun tune. */\n"
            "#ifndef MQ_TABLE_%s_H\n#define MQ_TABLE_%s_H\n\n#include \"mq.h\"\n\n"
            "static const char mq_table_%s_chip[] = \"%s\";\n"
            "/* the kernel build the picks were measured on: compare mq_kernel_build() */\n"
            "#define MQ_TABLE_%s_KERNEL_BUILD \"%s\"\n"
            "static const mq_table_row mq_table_%s_rows[] = {\n",
            chip, source, MQ_TOOL_VERSION, mq_git_rev(), chip, chip, chip, chip, chip, chip, chip,
            chip, chip, chip, kernel_build, chip);
    for (int i = 0; i < n; i++) {
        const mq_table_row *r = &e[i].row;
        char vb[96];
        fprintf(f, "    {%s, %d, %d, %d, %d, %d, {%s, {%d, %d, %d, %d, %d}}, %.6g, %d, %d, %d, %d, "
                   "%d, %d, %d},\n",
                fmt_enum[r->format], r->group, r->N, r->K, r->m_lo, r->m_hi,
                var_enum(r->c.variant, vb, sizeof vb), r->c.p.tile_m, r->c.p.tile_n, r->c.p.tile_k,
                r->c.p.num_threadgroups, r->c.p.split_k, r->expected_s, r->expected_m,
                r->experts, r->top_k, r->i_split, r->fuse_gate_up, r->down_tile_n,
                r->down_tile_k);
    }
    fprintf(f, "};\nstatic const int mq_table_%s_count = %d;\n\n", chip, n);
    static mq_table_param q[MQ_TABLE_MODEL_MAX];
    int nq = fig && m ? mq_table_model_params(fig, m, q) : 0;
    /* a program may compile the rows in without the model: no unused warning */
    fprintf(f, "#if defined(__GNUC__)\n#define MQ_TABLE_%s_UNUSED __attribute__((unused))\n#else\n"
               "#define MQ_TABLE_%s_UNUSED\n#endif\n",
            chip, chip);
    fprintf(f, "static const mq_table_param mq_table_%s_model[] MQ_TABLE_%s_UNUSED = {\n", chip,
            chip);
    for (int i = 0; i < nq; i++)
        fprintf(f, "    {\"%s\", \"%s\", \"%s\", %.9g, %d, %d, %d},\n", q[i].kind, q[i].name,
                q[i].variant, q[i].value, q[i].tile_m, q[i].tile_n, q[i].tile_k);
    if (!nq)
        fprintf(f, "    {\"\", \"\", \"\", 0, 0, 0, 0} /* no model */\n");
    fprintf(f, "};\nstatic const int mq_table_%s_model_count MQ_TABLE_%s_UNUSED = %d;\n\n#endif\n",
            chip, chip, nq);
    return mq_atomic_commit(f, tmp, path, err, errlen);
}
