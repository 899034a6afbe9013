/* figures_file.c - see figures_file.h. */
#include <stdio.h>
#include <stdlib.h>

#include "figures_file.h"

const char *mq_figure_field(const mq_csv_row *r, const int *col, int j)
{
    return col[j] < r->nfields ? r->fields[col[j]] : "";
}

int mq_figures_read(const char *path, const char *const *columns, int ncol, size_t elem_size,
                    mq_figure_parser parse, void *ctx, void **out, int *nout, char *err,
                    size_t errlen)
{
    *out = NULL;
    *nout = 0;
    mq_csv_table t;
    if (mq_csv_read(path, &t, err, errlen))
        return -1;
    int col[32], rc = -1, n = 0;
    char *elems = NULL;
    if (ncol > 32) {
        snprintf(err, errlen, "%s: more than 32 columns asked for", path);
        goto done;
    }
    if (t.nrows < 2) {
        snprintf(err, errlen, "%s: no figures (a header line and one row per figure)", path);
        goto done;
    }
    for (int j = 0; j < ncol; j++)
        if ((col[j] = mq_csv_column(&t, columns[j])) < 0) {
            snprintf(err, errlen, "%s:%d: no column '%s' in the header", path, t.rows[0].line,
                     columns[j]);
            goto done;
        }
    if (!(elems = calloc((size_t)t.nrows, elem_size))) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto done;
    }
    for (int i = 1; i < t.nrows; i++)
        if (parse(path, &t.rows[i], col, ctx, elems + (size_t)n++ * elem_size, err,
                  errlen))
            goto done;
    rc = 0;
done:
    if (rc)
        free(elems);
    else {
        *out = elems;
        *nout = n;
    }
    mq_csv_free(&t);
    return rc;
}
