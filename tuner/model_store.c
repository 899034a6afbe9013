/* model_store.c - see model_store.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "csvfile.h"
#include "model_store.h"
#include "numparse.h"

/* columns: model, th_<term> x MQ_MODEL_NTERM, n_fit, n_holdout, mape, spearman */
enum { NCOL = 1 + MQ_MODEL_NTERM + 4 };

static void column_name(int i, char *buf, size_t n)
{
    static const char *const tail[] = {"n_fit", "n_holdout", "mape", "spearman"};
    if (i == 0)
        snprintf(buf, n, "model");
    else if (i <= MQ_MODEL_NTERM)
        snprintf(buf, n, "th_%s", mq_model_term_name(i - 1));
    else
        snprintf(buf, n, "%s", tail[i - 1 - MQ_MODEL_NTERM]);
}

int mq_model_write(const char *path, const mq_model *m, const char *chip, const char *note,
                   char *err, size_t errlen)
{
    char tmp[4200], name[64];
    FILE *f = mq_atomic_open(path, tmp, sizeof tmp, err, errlen);
    if (!f)
        return -1;
    fprintf(f, "# mq cost model for %s: %s\n", chip, note);
    fprintf(f, "# t = max(unique bytes / bandwidth, useful flops / peak) + sum th_X * X; units:");
    for (int j = 0; j < MQ_MODEL_NTERM; j++)
        fprintf(f, "%s %s: %s", j ? ";" : "", mq_model_term_name(j), mq_model_term_unit(j));
    fputc('\n', f);
    for (int i = 0; i < NCOL; i++) {
        column_name(i, name, sizeof name);
        fprintf(f, "%s%c", name, i == NCOL - 1 ? '\n' : ',');
    }
    fprintf(f, "floor");
    for (int j = 0; j < MQ_MODEL_NTERM; j++)
        fprintf(f, ",%.9g", m->theta[j]);
    fprintf(f, ",%d,%d,%.4f,%.4f\n", m->n_fit, m->n_holdout, m->mape, m->spearman);
    return mq_atomic_commit(f, tmp, path, err, errlen);
}

int mq_model_read(const char *path, mq_model *m, char *err, size_t errlen)
{
    mq_csv_table t;
    if (mq_csv_read(path, &t, err, errlen))
        return -1;
    int rc = -1;
    char name[64];
    memset(m, 0, sizeof *m);
    if (t.nrows >= 1 && t.rows[0].nfields >= 1 && !strcmp(t.rows[0].fields[0], "kind")) {
        snprintf(err, errlen, "%s:%d: a cost model of an older tune (column 'kind'): rerun tune",
                 path, t.rows[0].line);
        goto out;
    }
    if (t.nrows != 2 || t.rows[0].nfields != NCOL || t.rows[1].nfields != NCOL) {
        snprintf(err, errlen, "%s:%d: expected a header and one row of %d fields (model,...)",
                 path, t.nrows ? t.rows[t.nrows - 1].line : 1, NCOL);
        goto out;
    }
    for (int i = 0; i < NCOL; i++) {
        column_name(i, name, sizeof name);
        if (strcmp(t.rows[0].fields[i], name)) {
            snprintf(err, errlen, "%s:%d: column %d is '%s', expected '%s'", path,
                     t.rows[0].line, i + 1, t.rows[0].fields[i], name);
            goto out;
        }
    }
    const mq_csv_row *r = &t.rows[1];
    if (strcmp(r->fields[0], "floor")) {
        snprintf(err, errlen, "%s:%d: unknown model '%s' (expected floor)", path, r->line,
                 r->fields[0]);
        goto out;
    }
    /* every number checked before use: coefficients finite and >= 0 (a
     * negative one would let a prediction fall below the floor), counts
     * whole, quality figures in their ranges or nan (not computed) */
    for (int i = 1; i < NCOL; i++) {
        const char *v = r->fields[i];
        char why[160];
        int bad, k = i - 1 - MQ_MODEL_NTERM;
        if (i <= MQ_MODEL_NTERM)
            bad = mq_parse_double(v, 0, 1e12, &m->theta[i - 1], why, sizeof why);
        else if (k == 0)
            bad = mq_parse_int(v, 0, 1 << 30, &m->n_fit, why, sizeof why);
        else if (k == 1)
            bad = mq_parse_int(v, 0, 1 << 30, &m->n_holdout, why, sizeof why);
        else if (k == 2)
            bad = mq_parse_double_or_nan(v, 0, 1e9, &m->mape, why, sizeof why);
        else
            bad = mq_parse_double_or_nan(v, -1, 1, &m->spearman, why, sizeof why);
        if (bad) {
            column_name(i, name, sizeof name);
            snprintf(err, errlen, "%s:%d: %s: %s", path, r->line, name, why);
            goto out;
        }
    }
    rc = 0;
out:
    mq_csv_free(&t);
    return rc;
}
