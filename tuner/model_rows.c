/* model_rows.c - see model_rows.h: the rows read from the results files,
 * kept with their features, and found by problem and candidate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "model_rows.h"
#include "work_features.h"

static int rows_add(mq_model_rows *R, const mq_result *r, const mq_features *f)
{
    int fcap = R->cap, tcap = R->cap;
    if (mq_grow(&R->f, &fcap, R->n + 1, sizeof *R->f, 1024) ||
        mq_grow(&R->t, &tcap, R->n + 1, sizeof *R->t, 1024) ||
        mq_grow(&R->r, &R->cap, R->n + 1, sizeof *R->r, 1024))
        return -1; /* some arrays may have grown: R->cap stays what all hold */
    R->f[R->n] = *f;
    R->t[R->n] = r->st.median;
    R->r[R->n] = *r;
    R->r[R->n].samples = NULL;
    R->r[R->n].nsamples = 0;
    R->n++;
    return 0;
}

void mq_model_rows_free(mq_model_rows *R)
{
    free(R->f);
    free(R->t);
    free(R->r);
}

int mq_model_rows_load(const char *const *files, int nfiles, const mq_chip *chip,
                       mq_model_rows *R)
{
    for (int i = 0; i < nfiles; i++) {
        mq_results rs;
        char err[4400];
        if (mq_results_load(files[i], &rs, err, sizeof err)) {
            fprintf(stderr, "model: %s\n", err);
            return 2;
        }
        int kept = 0;
        for (int j = 0; j < rs.n; j++) {
            const mq_result *r = &rs.r[j];
            mq_features f;
            if (strcmp(r->status, "ok") || strcmp(r->chip, chip->name) || !(r->st.median > 0) ||
                mq_features_compute(&r->p, &r->c, chip, &f, NULL) != MQ_OK)
                continue;
            if (rows_add(R, r, &f)) {
                mq_results_free(&rs);
                fprintf(stderr, "model: out of memory\n");
                return 2;
            }
            kept++;
        }
        mq_results_free(&rs);
        if (!kept) {
            fprintf(stderr, "model: %s: no timed rows of chip %s\n", files[i], chip->name);
            return 2;
        }
    }
    return 0;
}

int mq_model_same_problem(const mq_problem *a, const mq_problem *b)
{
    return a->format == b->format && a->M == b->M && a->N == b->N && a->K == b->K &&
           a->group == b->group;
}

int mq_model_rows_find(const mq_model_rows *R, const mq_problem *p, const mq_candidate *c)
{
    for (int i = 0; i < R->n; i++)
        if (mq_model_same_problem(&R->r[i].p, p) && R->r[i].c.variant == c->variant &&
            !memcmp(&R->r[i].c.p, &c->p, sizeof c->p))
            return i;
    return -1;
}
