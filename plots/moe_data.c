/* moe_data.c - see moe_data.h. The files are read by moe-bench's own
 * reader (harness/moe_results.c), so a row the plot draws is one moe-bench
 * wrote whole and readable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe_data.h"
#include "moe_results.h"

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

/* One ok row into its model's series (the lowest median of its path and
 * token count); models past MAX_MODELS and token counts past MAX_TOKENS are
 * left out. */
static void add_point(model_series *ms, int *nm, const mq_moe_result *r)
{
    int m = 0;
    while (m < *nm && strcmp(ms[m].name, r->model))
        m++;
    if (m == *nm) {
        if (*nm == MAX_MODELS)
            return;
        snprintf(ms[(*nm)++].name, sizeof ms[0].name, "%s", r->model);
    }
    model_series *s = &ms[m];
    int k = 0;
    while (k < s->ntok && s->pt[k].tokens != r->tokens)
        k++;
    if (k == s->ntok) {
        if (k == MAX_TOKENS)
            return;
        s->pt[s->ntok++].tokens = r->tokens;
    }
    double *b = &s->pt[k].best[!r->fused];
    if (!*b || r->median_s * 1e3 < *b)
        *b = r->median_s * 1e3;
}

int mq_plot_moe_data(const char *const *paths, int npaths, FILE *data, mq_plot_moe_info *info,
                     char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    model_series *ms = calloc(MAX_MODELS, sizeof *ms);
    int nm = 0, rc = -1;
    if (!ms) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* every file read whole through moe-bench's own reader: each row with
     * the header's field count and every number it holds readable */
    for (int pi = 0; pi < npaths; pi++) {
        mq_moe_results rs;
        if (mq_moe_results_load(paths[pi], &rs, err, errlen))
            goto done;
        for (int i = 0; i < rs.n; i++) {
            const mq_moe_result *r = &rs.r[i];
            if (strcmp(r->status, "ok"))
                continue;
            add_point(ms, &nm, r);
            snprintf(info->host, sizeof info->host, "%s", r->host);
            snprintf(info->format, sizeof info->format, "%s", mq_format_name(r->format));
            snprintf(info->routing, sizeof info->routing, "%s", r->routing);
            snprintf(info->device, sizeof info->device, "%s", r->device);
            info->threads = r->threads;
            info->rows++;
        }
        mq_moe_results_free(&rs);
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
    return rc;
}
