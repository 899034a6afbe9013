/* plot_data.c - see plot_data.h. Every "best at each x" curve is a sort by
 * (series, x, latency) and a pass that keeps the first point of each x. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "plot_data.h"
#include "space.h"
#include "work_features.h"

typedef struct {
    double series, x, y;
} point;

typedef struct {
    point *p;
    int n, cap;
} points;

static int points_add(points *ps, double series, double x, double y)
{
    if (mq_grow(&ps->p, &ps->cap, ps->n + 1, sizeof *ps->p, 256))
        return -1;
    ps->p[ps->n++] = (point){series, x, y};
    return 0;
}

static int point_cmp(const void *a, const void *b)
{
    const point *p = a, *q = b;
    if (p->series != q->series)
        return p->series < q->series ? -1 : 1;
    if (p->x != q->x)
        return p->x < q->x ? -1 : 1;
    return (p->y > q->y) - (p->y < q->y);
}

/* Sort, then keep the lowest y of each (series, x). */
static void points_lower_envelope(points *ps)
{
    if (ps->n > 1) /* qsort's pointer must not be NULL, even for no elements */
        qsort(ps->p, (size_t)ps->n, sizeof *ps->p, point_cmp);
    int m = 0;
    for (int i = 0; i < ps->n; i++)
        if (m == 0 || ps->p[m - 1].series != ps->p[i].series || ps->p[m - 1].x != ps->p[i].x)
            ps->p[m++] = ps->p[i];
    ps->n = m;
}

/* Write the points of one series as a block ("NaN NaN" when it has none,
 * so that block numbers stay in step), then the two blank lines that end a
 * gnuplot dataset. */
static int write_block(FILE *f, const points *ps, double series)
{
    int k = 0;
    for (int i = 0; i < ps->n; i++)
        if (ps->p[i].series == series) {
            fprintf(f, "%.9g %.9g\n", ps->p[i].x, ps->p[i].y);
            k++;
        }
    if (!k)
        fprintf(f, "NaN NaN\n");
    fprintf(f, "\n\n");
    return k;
}

/* The distinct series values of two point sets, ascending. */
static int series_union(const points *a, const points *b, double *out, int cap)
{
    int n = 0;
    const points *sets[2] = {a, b};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < sets[s]->n; i++) {
            int j = 0;
            while (j < n && out[j] != sets[s]->p[i].series)
                j++;
            if (j == n && n < cap)
                out[n++] = sets[s]->p[i].series;
        }
    for (int i = 1; i < n; i++) /* insertion sort: a handful of values */
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            double t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

static int same_problem(const mq_problem *a, const mq_problem *b)
{
    return a->format == b->format && a->M == b->M && a->N == b->N && a->K == b->K &&
           a->group == b->group;
}

/* The model's predictions over the full space of p: (series_of(c), x_of(c),
 * predicted ms) for every legal candidate. */
typedef double (*axis_fn)(const mq_candidate *c, const mq_features *f, const mq_chip *chip);

static int model_points(const mq_plot_src *s, const mq_problem *p, axis_fn series_of,
                        axis_fn x_of, points *out)
{
    mq_space sp;
    if (mq_space_enumerate(p, &s->chip, MQ_SPACE_FULL, &sp))
        return -1;
    int rc = 0;
    for (int i = 0; i < sp.n && rc == 0; i++) {
        mq_features f;
        if (!sp.e[i].legal)
            continue;
        mq_features_from_plan(p, &sp.e[i].c, &sp.e[i].plan, &s->chip, &f);
        rc = points_add(out, series_of(&sp.e[i].c, &f, &s->chip), x_of(&sp.e[i].c, &f, &s->chip),
                        mq_model_predict(s->model, &f) * 1e3);
    }
    mq_space_free(&sp);
    return rc;
}

static double axis_split_k(const mq_candidate *c, const mq_features *f, const mq_chip *chip)
{
    (void)f;
    (void)chip;
    return c->p.split_k;
}

static double axis_tgs_per_core(const mq_candidate *c, const mq_features *f, const mq_chip *chip)
{
    (void)c;
    return f->threadgroups / chip->v[MQ_CHIP_GPU_CORES];
}

/* Write the blocks of every series (measured, then model, per series) and
 * name them in info. */
static void write_series(FILE *f, points *meas, points *model, mq_plot_series_info *info,
                         const char *prefix)
{
    points_lower_envelope(meas);
    points_lower_envelope(model);
    double ser[32];
    int ns = series_union(meas, model, ser, 32);
    memset(info, 0, sizeof *info);
    size_t used = 0;
    for (int i = 0; i < ns; i++) {
        info->measured_points += write_block(f, meas, ser[i]);
        info->model_points += write_block(f, model, ser[i]);
        if (used < sizeof info->labels)
            used += (size_t)snprintf(info->labels + used, sizeof info->labels - used, "%s%s%g",
                                     i ? " " : "", prefix, ser[i]);
    }
    info->nseries = ns;
}

int mq_plot_occupancy_data(const mq_plot_src *s, const mq_problem *p, FILE *f,
                           mq_plot_series_info *info, char *err, size_t errlen)
{
    points meas = {0}, model = {0};
    int rc = 0;
    for (int i = 0; i < s->nrows && rc == 0; i++) {
        const mq_result *r = s->rows[i];
        mq_features ft;
        if (!same_problem(&r->p, p) ||
            mq_features_compute(&r->p, &r->c, &s->chip, &ft, NULL) != MQ_OK)
            continue;
        rc = points_add(&meas, r->c.p.split_k, axis_tgs_per_core(&r->c, &ft, &s->chip),
                        r->st.median * 1e3);
    }
    if (rc == 0 && s->model)
        rc = model_points(s, p, axis_split_k, axis_tgs_per_core, &model);
    if (rc) {
        snprintf(err, errlen, "out of memory");
    } else if (meas.n + model.n == 0) {
        snprintf(err, errlen, "nothing to draw: no ok rows of %s %dx%dx%d g=%d on %s in the "
                              "results, and no model",
                 mq_format_name(p->format), p->M, p->N, p->K, p->group, s->chip.name);
        rc = -1;
    } else {
        write_series(f, &meas, &model, info, "");
    }
    free(meas.p);
    free(model.p);
    return rc;
}

int mq_plot_splitk_data(const mq_plot_src *s, mq_format fmt, int N, int K, int group, int max_m,
                        FILE *f, mq_plot_series_info *info, char *err, size_t errlen)
{
    points meas = {0}, model = {0};
    int rc = 0, ms[32], nm = 0;
    for (int i = 0; i < s->nrows && rc == 0; i++) {
        const mq_result *r = s->rows[i];
        if (r->p.format != fmt || r->p.N != N || r->p.K != K || r->p.group != group ||
            r->p.M > max_m)
            continue;
        rc = points_add(&meas, r->p.M, r->c.p.split_k, r->st.median * 1e3);
        int j = 0;
        while (j < nm && ms[j] != r->p.M)
            j++;
        if (j == nm && nm < 32)
            ms[nm++] = r->p.M;
    }
    if (nm == 0) /* nothing measured: the model's view of the usual decode batches */
        for (int m = 1; m <= max_m && nm < 32; m *= 4)
            ms[nm++] = m;
    for (int j = 0; rc == 0 && s->model && j < nm; j++) {
        mq_problem p = {fmt, ms[j], N, K, group};
        points one = {0};
        rc = model_points(s, &p, axis_split_k, axis_split_k, &one);
        for (int i = 0; rc == 0 && i < one.n; i++)
            rc = points_add(&model, ms[j], one.p[i].x, one.p[i].y);
        free(one.p);
    }
    if (rc) {
        snprintf(err, errlen, "out of memory");
    } else if (meas.n + model.n == 0) {
        snprintf(err, errlen, "nothing to draw: no ok rows of %s Nx K = %dx%d g=%d with M <= %d "
                              "on %s in the results, and no model",
                 mq_format_name(fmt), N, K, group, max_m, s->chip.name);
        rc = -1;
    } else {
        write_series(f, &meas, &model, info, "M=");
    }
    free(meas.p);
    free(model.p);
    return rc;
}

/* Bytes a GEMM must move at least once: the stored weights, FP16
 * activations in and FP16 output out. */
static double gemm_bytes(const mq_problem *p)
{
    return (double)p->N * p->K * mq_weight_bytes_per_element(p->format, p->group) +
           2.0 * p->M * p->K + 2.0 * p->M * p->N;
}

int mq_plot_roofline_data(const mq_plot_src *s, FILE *f, char *err, size_t errlen)
{
    int nprob = 0;
    const mq_result **best = calloc((size_t)(s->nrows ? s->nrows : 1), sizeof *best);
    if (!best) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < s->nrows; i++) { /* the fastest row of each problem */
        const mq_result *r = s->rows[i];
        int j = 0;
        while (j < nprob && !same_problem(&best[j]->p, &r->p))
            j++;
        if (j == nprob)
            best[nprob++] = r;
        else if (r->st.median < best[j]->st.median)
            best[j] = r;
    }
    for (int b = 0; b < 2; b++) { /* block 0: every row; block 1: the fastest */
        const mq_result *const *set = b == 0 ? s->rows : best;
        int n = b == 0 ? s->nrows : nprob;
        for (int i = 0; i < n; i++) {
            const mq_problem *p = &set[i]->p;
            double flops = 2.0 * p->M * p->N * (double)p->K, bytes = gemm_bytes(p);
            fprintf(f, "%.6g %.6g %.6g\n", flops / bytes, flops / set[i]->st.median / 1e9,
                    bytes / set[i]->st.median / 1e9);
        }
        fprintf(f, "\n\n");
    }
    free(best);
    if (nprob == 0) {
        snprintf(err, errlen, "nothing to draw: no ok rows of chip %s in the results (a roofline "
                              "needs measurements)",
                 s->chip.name);
        return -1;
    }
    return nprob;
}

int mq_plot_model_data(const mq_plot_src *s, FILE *f, mq_plot_series_info *info, double *mape,
                       double *spearman, double *lo, double *hi, char *err, size_t errlen)
{
    *lo = INFINITY;
    *hi = 0;
    memset(info, 0, sizeof *info);
    if (!s->model) {
        snprintf(err, errlen, "no cost model for %s (run tune --chip %s first)", s->chip.name,
                 s->chip.name);
        return -1;
    }
    mq_features *ft = malloc(sizeof *ft * (size_t)(s->nrows ? s->nrows : 1));
    double *t = malloc(sizeof *t * (size_t)(s->nrows ? s->nrows : 1));
    int *fmt = malloc(sizeof *fmt * (size_t)(s->nrows ? s->nrows : 1));
    int n = 0;
    for (int i = 0; ft && t && fmt && i < s->nrows; i++) {
        const mq_result *r = s->rows[i];
        if (mq_features_compute(&r->p, &r->c, &s->chip, &ft[n], NULL) != MQ_OK)
            continue;
        t[n] = r->st.median;
        fmt[n++] = (int)r->p.format;
    }
    int rc = 0;
    if (!ft || !t || !fmt) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    } else if (n < 2) {
        snprintf(err, errlen, "nothing to draw: %d ok rows of chip %s in the results (need 2)", n,
                 s->chip.name);
        rc = -1;
    } else {
        mq_model_quality(s->model, ft, t, n, mape, spearman);
        size_t used = 0;
        for (int fm = 0; fm < MQ_FMT_COUNT; fm++) {
            int k = 0;
            for (int i = 0; i < n; i++)
                if (fmt[i] == fm) {
                    double pr = mq_model_predict(s->model, &ft[i]) * 1e3, me = t[i] * 1e3;
                    fprintf(f, "%.9g %.9g\n", pr, me);
                    if (pr > 0)
                        *lo = fmin(*lo, pr);
                    *lo = fmin(*lo, me);
                    *hi = fmax(*hi, fmax(pr, me));
                    k++;
                }
            if (!k)
                continue;
            fprintf(f, "\n\n");
            info->measured_points += k;
            used += (size_t)snprintf(info->labels + used, sizeof info->labels - used, "%s%s",
                                     info->nseries ? " " : "", mq_format_name((mq_format)fm));
            info->nseries++;
        }
    }
    free(ft);
    free(t);
    free(fmt);
    return rc ? rc : n;
}
