/* from_results.c - see from_results.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "from_results.h"

/* --from-results: every file's rows in one set (each file loaded and
 * validated as any results file). 0 or -1 with a message. */
int mq_from_results_load(const char *const *files, int nfiles, mq_results *all, char *err,
                         size_t errlen)
{
    memset(all, 0, sizeof *all);
    for (int i = 0; i < nfiles; i++) {
        mq_results rs;
        if (mq_results_load(files[i], &rs, err, errlen))
            return -1;
        mq_result *r = realloc(all->r, sizeof *r * (size_t)(all->n + rs.n + 1));
        if (!r) {
            mq_results_free(&rs);
            snprintf(err, errlen, "%s: out of memory", files[i]);
            return -1;
        }
        all->r = r;
        memcpy(all->r + all->n, rs.r, sizeof *r * (size_t)rs.n); /* the samples move too */
        all->n += rs.n;
        free(rs.r);
    }
    return 0;
}

/* The rows --from-results builds from: the chip's rows of one backend and
 * one build. The backend into backend; -1 with a message when the chip has
 * no rows, or its rows mix backends or builds (merge says which). */
int mq_from_results_check(const mq_results *all, const char *chip, int group,
                          const char *first_file, int nfiles, const char **backend,
                          const char **kbuild, char *err, size_t errlen)
{
    const mq_result *first = NULL;
    for (int i = 0; i < all->n; i++) {
        const mq_result *r = &all->r[i];
        if (strcmp(r->chip, chip) || r->p.group != group)
            continue;
        if (!first) {
            first = r;
        } else if (strcmp(r->backend, first->backend)) {
            snprintf(err, errlen, "--from-results: %s's rows come from the %s and the %s "
                                  "backends: give rows of one backend",
                     chip, first->backend, r->backend);
            return -1;
        } else if (strcmp(r->git_rev, first->git_rev) ||
                   strcmp(r->tool_version, first->tool_version) ||
                   strcmp(r->kernel_build, first->kernel_build)) { /* a dirty tree's two */
            snprintf(err, errlen, "--from-results: %s's rows mix builds (%s and %s): merge "
                                  "them first (merge --allow-mixed-builds) to say so",
                     chip, first->git_rev, r->git_rev);
            return -1;
        }
    }
    if (!first) {
        snprintf(err, errlen, "--from-results: no rows of chip %s with group %d in %s%s", chip,
                 group, first_file, nfiles > 1 ? " and the other files" : "");
        return -1;
    }
    *backend = first->backend;
    *kbuild = first->kernel_build;
    return 0;
}

/* --from-results without --suite or --m: the distinct shapes of the chip's
 * rows (of --formats when given; else their formats go to *formats). */
int mq_from_results_suite(const mq_results *all, const char *chip, const char *backend,
                           int formats_given, unsigned *formats, mq_suite *suite)
{
    memset(suite, 0, sizeof *suite);
    unsigned seen = 0;
    for (int i = 0; i < all->n; i++) {
        const mq_result *r = &all->r[i];
        if (strcmp(r->chip, chip) || strcmp(r->backend, backend) ||
            (formats_given && !(*formats & (1u << r->p.format))))
            continue;
        seen |= 1u << r->p.format;
        int have = 0;
        for (int k = 0; k < suite->n && !have; k++)
            have = suite->s[k].M == r->p.M && suite->s[k].N == r->p.N && suite->s[k].K == r->p.K;
        if (have)
            continue;
        mq_shape *ns = realloc(suite->s, sizeof *ns * (size_t)(suite->n + 1));
        if (!ns)
            return -1;
        suite->s = ns;
        mq_shape *sh = &suite->s[suite->n++];
        memset(sh, 0, sizeof *sh);
        snprintf(sh->model, sizeof sh->model, "rows");
        snprintf(sh->layer, sizeof sh->layer, "%dx%dx%d", r->p.M, r->p.N, r->p.K);
        sh->M = r->p.M;
        sh->N = r->p.N;
        sh->K = r->p.K;
    }
    if (!formats_given)
        *formats = seen;
    return 0;
}

