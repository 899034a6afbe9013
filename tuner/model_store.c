/* model_store.c - see model_store.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "csvfile.h"
#include "model_store.h"
#include "numparse.h"

static const char *const header[] = {
    "kind", "th_launch", "th_dispatch", "th_compute", "th_memory", "th_splitk", "th_wave",
    "th_kstep", "th_row_piece", "n_fit", "n_holdout", "mape", "spearman",
};
enum { NCOL = sizeof header / sizeof header[0] };

int mq_model_write(const char *path, const mq_model *m, const char *chip, const char *note,
                   char *err, size_t errlen)
{
    char tmp[4200];
    FILE *f = mq_atomic_open(path, tmp, sizeof tmp, err, errlen);
    if (!f)
        return -1;
    fprintf(f, "# mq cost model for %s: %s\n", chip, note);
    for (int i = 0; i < NCOL; i++)
        fprintf(f, "%s%c", header[i], i == NCOL - 1 ? '\n' : ',');
    fprintf(f, "%s", mq_model_kind_name(m->kind));
    for (int j = 0; j < MQ_MODEL_NPARAM; j++)
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
    memset(m, 0, sizeof *m);
    if (t.nrows != 2 || t.rows[0].nfields != NCOL || t.rows[1].nfields != NCOL) {
        snprintf(err, errlen, "%s:%d: expected a header and one row of %d fields (%s,...)", path,
                 t.nrows ? t.rows[t.nrows - 1].line : 1, NCOL, header[0]);
        goto out;
    }
    for (int i = 0; i < NCOL; i++)
        if (strcmp(t.rows[0].fields[i], header[i])) {
            snprintf(err, errlen, "%s:%d: column %d is '%s', expected '%s'", path,
                     t.rows[0].line, i + 1, t.rows[0].fields[i], header[i]);
            goto out;
        }
    const mq_csv_row *r = &t.rows[1];
    if (!strcmp(r->fields[0], "roofline"))
        m->kind = MQ_MODEL_ROOFLINE;
    else if (!strcmp(r->fields[0], "linear"))
        m->kind = MQ_MODEL_LINEAR;
    else {
        snprintf(err, errlen, "%s:%d: unknown model kind '%s'", path, r->line, r->fields[0]);
        goto out;
    }
    /* every number checked before use: coefficients finite, counts whole,
     * quality figures in their ranges or nan (not computed) */
    for (int i = 1; i < NCOL; i++) {
        const char *v = r->fields[i];
        char why[160];
        int bad;
        if (i <= MQ_MODEL_NPARAM)
            bad = mq_parse_double(v, -1e12, 1e12, &m->theta[i - 1], why, sizeof why);
        else if (i == 9)
            bad = mq_parse_int(v, 0, 1 << 30, &m->n_fit, why, sizeof why);
        else if (i == 10)
            bad = mq_parse_int(v, 0, 1 << 30, &m->n_holdout, why, sizeof why);
        else if (i == 11)
            bad = mq_parse_double_or_nan(v, 0, 1e9, &m->mape, why, sizeof why);
        else
            bad = mq_parse_double_or_nan(v, -1, 1, &m->spearman, why, sizeof why);
        if (bad) {
            snprintf(err, errlen, "%s:%d: %s: %s", path, r->line, header[i], why);
            goto out;
        }
    }
    rc = 0;
out:
    mq_csv_free(&t);
    return rc;
}
