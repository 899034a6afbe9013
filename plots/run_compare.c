/* run_compare.c - see run_compare.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "run_compare.h"

int mq_compare_runs(const mq_results *base, const mq_results *cur, const mq_regress_opts *o,
                    mq_run_comparison *out)
{
    memset(out, 0, sizeof *out);
    out->geomean = 1.0;
    out->pairs = calloc((size_t)(cur->n ? cur->n : 1), sizeof *out->pairs);
    if (!out->pairs)
        return -1;
    double lg = 0;
    for (int i = 0; i < cur->n; i++) {
        const mq_result *n = &cur->r[i];
        if (strcmp(n->status, "ok"))
            continue;
        mq_run_pair *pr = &out->pairs[out->n];
        /* a suite may measure one benchmark more than once (two layers of
         * the same shape): the k-th occurrence pairs with the k-th in the
         * baseline, or its last when the baseline has fewer */
        int k = mq_results_occurrence(cur, i);
        for (int j = 0, seen = 0; j < base->n && seen <= k; j++) {
            const mq_result *b = &base->r[j];
            if (!strcmp(b->status, "ok") && mq_result_same_key(b, n)) {
                pr->b = b;
                seen++;
            }
        }
        if (!pr->b)
            continue;
        pr->n = n;
        mq_compare_samples(pr->b->samples, pr->b->nsamples, n->samples, n->nsamples, o, &pr->c);
        out->counts[pr->c.verdict]++;
        if (pr->c.verdict != MQ_UNRELIABLE)
            lg += log(pr->c.ratio);
        out->n++;
    }
    int judged = out->n - out->counts[MQ_UNRELIABLE];
    if (judged)
        out->geomean = exp(lg / judged);
    return 0;
}

int mq_results_occurrence(const mq_results *rs, int i)
{
    int k = 0;
    for (int j = 0; j < i; j++)
        k += !strcmp(rs->r[j].status, "ok") && mq_result_same_key(&rs->r[j], &rs->r[i]);
    return k;
}

const mq_result *mq_results_kth_ok(const mq_results *rs, const mq_result *r, int k)
{
    for (int j = 0; j < rs->n; j++)
        if (!strcmp(rs->r[j].status, "ok") && mq_result_same_key(&rs->r[j], r) && k-- == 0)
            return &rs->r[j];
    return NULL;
}

int mq_results_median_of(const mq_results *runs, int nruns, const mq_result ***rows, int *n_out)
{
    *n_out = 0;
    *rows = NULL;
    if (nruns < 1)
        return 0;
    const mq_results *first = &runs[0];
    const mq_result **out = calloc((size_t)(first->n ? first->n : 1), sizeof *out);
    const mq_result **cand = calloc((size_t)nruns, sizeof *cand);
    if (!out || !cand) {
        free(out);
        free(cand);
        return -1;
    }
    for (int i = 0; i < first->n; i++) {
        const mq_result *r = &first->r[i];
        if (strcmp(r->status, "ok"))
            continue;
        int k = mq_results_occurrence(first, i), n = 0;
        for (int q = 0; q < nruns; q++) {
            const mq_result *x = mq_results_kth_ok(&runs[q], r, k);
            if (x)
                cand[n++] = x;
        }
        if (n < nruns)
            continue; /* not measured ok in every run */
        for (int a = 1; a < n; a++) /* a handful of runs: insertion sort by median */
            for (int b = a; b > 0 && cand[b]->st.median < cand[b - 1]->st.median; b--) {
                const mq_result *t = cand[b];
                cand[b] = cand[b - 1];
                cand[b - 1] = t;
            }
        out[(*n_out)++] = cand[(n - 1) / 2];
    }
    free(cand);
    *rows = out;
    return 0;
}

void mq_run_comparison_free(mq_run_comparison *rc)
{
    free(rc->pairs);
    memset(rc, 0, sizeof *rc);
}

void mq_result_name(const mq_result *r, char *buf, size_t n)
{
    char cand[128];
    mq_candidate_str(&r->c, cand, sizeof cand);
    snprintf(buf, n, "%s %s %s M=%d N=%d K=%d g=%d %s", r->chip, r->backend,
             mq_format_name(r->p.format), r->p.M, r->p.N, r->p.K, r->p.group, cand);
}

int mq_history_open(const char *path, const char *kind, const char *header, int *created,
                    char *err, size_t errlen)
{
    int fd = mq_append_open(path, created, err, errlen);
    if (fd < 0)
        return -1;
    /* read through the descriptor that will append: what is checked is
     * what gets the row */
    char first[512];
    size_t hl = strlen(header);
    struct stat sb;
    ssize_t got = fstat(fd, &sb) ? -1 : sb.st_size == 0 ? 0 : pread(fd, first, sizeof first, 0);
    if (got < 0) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        mq_append_abort(fd, path, *created);
        return -1;
    }
    size_t n = (size_t)got;
    int whole = n >= hl && !memcmp(first, header, hl);
    int torn = n < hl && n == (size_t)sb.st_size && !memcmp(first, header, n); /* also empty */
    if (whole || torn)
        return fd;
    snprintf(err, errlen, "%s: not a %s history file (its first line is not '%.*s'): nothing is "
                          "appended to it",
             path, kind, (int)(hl ? hl - 1 : 0), header);
    mq_append_abort(fd, path, *created);
    return -1;
}

int mq_output_settle(FILE **f, const char *tmp, const char *path, char *err, size_t errlen)
{
    if (!*f)
        return 0;
    if (fflush(*f) || ferror(*f)) {
        /* the stream's error indicator is set: the commit fails on it, names
         * the OS error behind it, and removes the temporary file */
        (void)mq_atomic_commit(*f, tmp, path, err, errlen);
        *f = NULL;
        return -1;
    }
    if (fsync(fileno(*f))) {
        snprintf(err, errlen, "%s: cannot write: %s (the old file, if any, is kept)", path,
                 strerror(errno));
        mq_atomic_abort(*f, tmp);
        *f = NULL;
        return -1;
    }
    return 0;
}
