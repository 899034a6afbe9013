/* moe_data.c - see moe_data.h. */
#include <stdlib.h>
#include <string.h>

#include "csvfile.h"
#include "moe_data.h"
#include "numparse.h"

#define MAX_MODELS 10
#define MAX_TOKENS 64

typedef struct {
    int tokens;
    double best[2]; /* fused, unfused: the lowest median, ms; 0: none */
} token_point;

typedef struct {
    char name[64];
    token_point pt[MAX_TOKENS];
    int ntok;
} model_series;

static int by_tokens(const void *a, const void *b)
{
    int x = ((const token_point *)a)->tokens, y = ((const token_point *)b)->tokens;
    return (x > y) - (x < y);
}

int mq_plot_moe_data(const char *const *paths, int npaths, FILE *data, mq_plot_moe_info *info,
                     char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    static const char *const need[] = {"model", "tokens", "path", "status", "median_s",
                                       "host", "threads", "routing", "format"};
    model_series *ms = calloc(MAX_MODELS, sizeof *ms);
    int nm = 0, rc = -1;
    mq_csv_table t;
    memset(&t, 0, sizeof t);
    if (!ms) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int pi = 0; pi < npaths; pi++) {
        const char *path = paths[pi];
        if (mq_csv_read_appended(path, &t, err, errlen))
            goto done;
        int col[9];
        for (int i = 0; i < 9; i++)
            if ((col[i] = mq_csv_column(&t, need[i])) < 0) {
                snprintf(err, errlen, "%s: no '%s' column (not a moe-bench results file)", path,
                         need[i]);
                goto done;
            }
        int dev_col = mq_csv_column(&t, "device"); /* schema 2 */
        for (int r = 1; r < t.nrows; r++) {
            const mq_csv_row *row = &t.rows[r];
            if (row->nfields < 28 || strcmp(row->fields[col[3]], "ok"))
                continue;
            int tok, which = !strcmp(row->fields[col[2]], "unfused");
            double med;
            if (mq_parse_int(row->fields[col[1]], 1, 1 << 20, &tok, NULL, 0) ||
                mq_parse_double(row->fields[col[4]], 1e-12, 1e9, &med, NULL, 0)) {
                snprintf(err, errlen, "%s:%d: bad tokens or median_s", path, row->line);
                goto done;
            }
            int m = 0;
            while (m < nm && strcmp(ms[m].name, row->fields[col[0]]))
                m++;
            if (m == nm) {
                if (nm == MAX_MODELS)
                    continue;
                snprintf(ms[nm++].name, sizeof ms[0].name, "%s", row->fields[col[0]]);
            }
            model_series *s = &ms[m];
            int k = 0;
            while (k < s->ntok && s->pt[k].tokens != tok)
                k++;
            if (k == s->ntok) {
                if (k == MAX_TOKENS)
                    continue;
                s->pt[s->ntok++].tokens = tok;
            }
            double *b = &s->pt[k].best[which];
            if (!*b || med * 1e3 < *b)
                *b = med * 1e3;
            snprintf(info->host, sizeof info->host, "%s", row->fields[col[5]]);
            snprintf(info->format, sizeof info->format, "%s", row->fields[col[8]]);
            snprintf(info->routing, sizeof info->routing, "%s", row->fields[col[7]]);
            if (dev_col >= 0 && dev_col < row->nfields)
                snprintf(info->device, sizeof info->device, "%s", row->fields[dev_col]);
            mq_parse_int(row->fields[col[6]], 0, 1 << 20, &info->threads, NULL, 0);
            info->rows++;
        }
        mq_csv_free(&t);
        memset(&t, 0, sizeof t);
    }
    for (int m = 0; m < nm; m++) {
        model_series *s = &ms[m];
        int both = 0;
        for (int k = 0; k < s->ntok; k++)
            both += s->pt[k].best[0] > 0 && s->pt[k].best[1] > 0;
        if (!both)
            continue;
        qsort(s->pt, (size_t)s->ntok, sizeof s->pt[0], by_tokens);
        for (int w = 0; w < 2; w++) {
            for (int k = 0; k < s->ntok; k++)
                if (s->pt[k].best[w] > 0)
                    fprintf(data, "%d %.6g\n", s->pt[k].tokens, s->pt[k].best[w]);
            fprintf(data, "\n\n");
        }
        size_t l = strlen(info->labels);
        snprintf(info->labels + l, sizeof info->labels - l, "%s%s", l ? " " : "", s->name);
        info->nseries++;
    }
    if (!info->nseries) {
        snprintf(err, errlen, "%s: no model with both fused and unfused rows that are ok",
                 paths[npaths - 1]);
        goto done;
    }
    rc = 0;
done:
    free(ms);
    mq_csv_free(&t);
    return rc;
}
