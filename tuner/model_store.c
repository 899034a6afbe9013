/* model_store.c - see model_store.h. The file is long-form CSV, one row per
 * coefficient: term,variant,value,unit (variant empty for a shared term),
 * then one row per measured kernel, kernel:FORMAT:TMxTNxTK,variant,factor,
 * and the rows n_fit, n_holdout, mape and spearman. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "csvfile.h"
#include "model_store.h"
#include "numparse.h"

static const char *const quality[] = {"n_fit", "n_holdout", "mape", "spearman"};

int mq_model_write(const char *path, const mq_model *m, const char *chip, const char *note,
                   char *err, size_t errlen)
{
    char tmp[4200];
    FILE *f = mq_atomic_open(path, tmp, sizeof tmp, err, errlen);
    if (!f)
        return -1;
    fprintf(f, "# mq cost model for %s: %s\n", chip, note);
    if (m->kernel_build[0]) /* the kernels its rows measured */
        fprintf(f, "# kernels=%s\n", m->kernel_build);
    fprintf(f, "# t = max(unique bytes / bandwidth, useful flops / peak) + the sum of value x "
               "count over the terms (tuner/model.h)\n");
    fprintf(f, "term,variant,value,unit\n");
    for (int j = 0; j < MQ_MODEL_NTERM; j++) {
        int v = mq_model_term_variant(j);
        if (v >= mq_variant_count())
            continue;
        fprintf(f, "%s,%s,%.9g,%s\n", mq_model_term_name(j),
                v < 0 ? "" : mq_variant_get((mq_variant)v)->name, m->theta[j],
                mq_model_term_unit(j));
    }
    for (int i = 0; i < m->n_kernel; i++) {
        const mq_kernel_factor *k = &m->kernel[i];
        if (k->variant >= mq_variant_count())
            continue;
        char key[64];
        mq_kernel_factor_key(k, key, sizeof key);
        fprintf(f, "kernel:%s,%s,%.6g,x the terms above the floor (from %d fitted rows)\n", key,
                mq_variant_get((mq_variant)k->variant)->name, k->factor, k->rows);
    }
    fprintf(f, "n_fit,,%d,rows\nn_holdout,,%d,rows\nmape,,%.4f,share\nspearman,,%.4f,rank "
               "correlation\n",
            m->n_fit, m->n_holdout, m->mape, m->spearman);
    return mq_atomic_commit(f, tmp, path, err, errlen);
}

int mq_model_read(const char *path, mq_model *m, char *err, size_t errlen)
{
    mq_csv_table t;
    if (mq_csv_read(path, &t, err, errlen))
        return -1;
    int rc = -1;
    char seen[MQ_MODEL_NTERM + 4] = {0};
    memset(m, 0, sizeof *m);
    if (t.nrows >= 1 && t.rows[0].nfields >= 1 && !strcmp(t.rows[0].fields[0], "kind")) {
        snprintf(err, errlen, "%s:%d: a cost model of an older tune (column 'kind'): rerun tune",
                 path, t.rows[0].line);
        goto out;
    }
    if (t.nrows < 1 || t.rows[0].nfields != 4 || strcmp(t.rows[0].fields[0], "term") ||
        strcmp(t.rows[0].fields[1], "variant") || strcmp(t.rows[0].fields[2], "value") ||
        strcmp(t.rows[0].fields[3], "unit")) {
        snprintf(err, errlen, "%s:%d: expected the header term,variant,value,unit", path,
                 t.nrows ? t.rows[0].line : 1);
        goto out;
    }
    for (int i = 0; i < t.ncomments; i++) { /* "# kernels=ID": the rows' kernel build */
        const char *c = t.comments[i] + strspn(t.comments[i], " ");
        if (!strncmp(c, "kernels=", 8) && strlen(c + 8) < sizeof m->kernel_build)
            snprintf(m->kernel_build, sizeof m->kernel_build, "%s", c + 8);
    }
    for (int i = 1; i < t.nrows; i++) {
        const mq_csv_row *r = &t.rows[i];
        char why[200];
        if (r->nfields != 4) {
            snprintf(err, errlen, "%s:%d: %d fields, expected 4 (term,variant,value,unit)",
                     path, r->line, r->nfields);
            goto out;
        }
        const char *term = r->fields[0], *var = r->fields[1], *v = r->fields[2];
        int q = -1;
        for (int k = 0; k < 4; k++)
            if (!strcmp(term, quality[k]))
                q = k;
        if (q >= 0) {
            int bad = q == 0   ? mq_parse_int(v, 0, 1 << 30, &m->n_fit, why, sizeof why)
                      : q == 1 ? mq_parse_int(v, 0, 1 << 30, &m->n_holdout, why, sizeof why)
                      : q == 2 ? mq_parse_double_or_nan(v, 0, 1e9, &m->mape, why, sizeof why)
                               : mq_parse_double_or_nan(v, -1, 1, &m->spearman, why,
                                                        sizeof why);
            if (bad || seen[MQ_MODEL_NTERM + q]++) {
                snprintf(err, errlen, "%s:%d: %s: %s", path, r->line, term,
                         bad ? why : "given twice");
                goto out;
            }
            continue;
        }
        mq_variant vid = (mq_variant)-1;
        mq_error e;
        if (*var && mq_variant_from_name(var, &vid, &e) != MQ_OK) {
            snprintf(err, errlen, "%s:%d: %s", path, r->line, e.msg);
            goto out;
        }
        if (!strncmp(term, "kernel:", 7)) {
            mq_kernel_factor k;
            double fac;
            const char *from = strstr(r->fields[3], "from ");
            int rows = 0;
            why[0] = '\0';
            if (!*var)
                snprintf(why, sizeof why, "no variant");
            else if (!mq_parse_double(v, 1e-6, 1e6, &fac, why, sizeof why) &&
                     !mq_kernel_factor_parse(term + 7, (int)vid, fac, &k, why, sizeof why)) {
                if (from && sscanf(from, "from %d", &rows) == 1 && rows >= 0 && rows < 65536)
                    k.rows = (unsigned short)rows;
                if (mq_model_kernel_factor(m, k.variant, k.format, k.tile_m, k.tile_n,
                                           k.tile_k) != 1.0)
                    snprintf(why, sizeof why, "given twice");
                else if (mq_model_set_kernel_factor(m, &k))
                    snprintf(why, sizeof why, "more than %d kernels", MQ_MODEL_MAXKERNEL);
            }
            if (why[0]) {
                snprintf(err, errlen, "%s:%d: %s: %s", path, r->line, term, why);
                goto out;
            }
            continue;
        }
        int j = mq_model_term_index(term, *var ? (int)vid : -1);
        if (j < 0) {
            snprintf(err, errlen, "%s:%d: unknown term '%s'%s%s", path, r->line, term,
                     *var ? " of variant " : "", var);
            goto out;
        }
        /* finite and >= 0: a negative coefficient would let a prediction
         * fall below the floor */
        if (mq_parse_double(v, 0, 1e12, &m->theta[j], why, sizeof why) || seen[j]++) {
            snprintf(err, errlen, "%s:%d: %s%s%s: %s", path, r->line, term, *var ? "@" : "",
                     var, seen[j] > 1 ? "given twice" : why);
            goto out;
        }
    }
    for (int j = 0; j < MQ_MODEL_NSHARED; j++)
        if (!seen[j]) {
            snprintf(err, errlen, "%s: no row for the term '%s'", path, mq_model_term_name(j));
            goto out;
        }
    for (int k = 0; k < 4; k++)
        if (!seen[MQ_MODEL_NTERM + k]) {
            snprintf(err, errlen, "%s: no row '%s'", path, quality[k]);
            goto out;
        }
    rc = 0;
out:
    mq_csv_free(&t);
    return rc;
}
