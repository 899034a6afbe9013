/* model_public.c - `model public` (see model_cmd.h): the cost model's
 * coefficients for chips never measured, fitted on published figures and
 * checked on others; apart from model_main.c because it reads no results
 * rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model_cmd.h"
#include "model_store.h"
#include "public_figures.h"

int mq_model_public_cmd(const char *const *files, int nfiles, const char *chips_path,
                        const char *out_path)
{
    if (nfiles != 1)
        return mq_cli_fail("model", "public takes one figures file", "");
    mq_public_figures pf;
    char err[4400];
    if (mq_public_figures_load(files[0], chips_path, &pf, err, sizeof err)) {
        fprintf(stderr, "model: %s\n", err);
        return 2;
    }
    static mq_model m;
    mq_model_defaults(&m);
    static mq_model compiled;
    compiled = m;
    int rc = 0;
    if (mq_public_fit(&pf, &m, err, sizeof err)) {
        fprintf(stderr, "model: %s: %s\n", files[0], err);
        mq_public_figures_free(&pf);
        return 2;
    }
    int nfit = 0, ncmp = 0;
    for (int i = 0; i < pf.n; i++) {
        nfit += pf.f[i].role == MQ_PUBLIC_FIT;
        ncmp += pf.f[i].role == MQ_PUBLIC_COMPARE;
    }
    /* the model is written before the report: an error is the only output */
    if (out_path) {
        char note[300];
        snprintf(note, sizeof note,
                 "defaults fitted on %d public figures of %s (%d more held out to check)", nfit,
                 files[0], pf.n - nfit - ncmp);
        if (mq_model_write(out_path, &m, "any", note, err, sizeof err)) {
            fprintf(stderr, "model: %s\n", err);
            mq_public_figures_free(&pf);
            return 2;
        }
    }
    printf("public figures %s: %d (%d fit, %d check, %d compare)\n", files[0], pf.n, nfit,
           pf.n - nfit - ncmp, ncmp);
    for (int k = 0; k < MQ_PUBLIC_NFIT; k++) {
        int j = mq_model_term_index(mq_public_fit_terms[k], -1); /* checked by the fit */
        printf("fitted %-12s %.6g (compiled default %.6g)\n", mq_public_fit_terms[k],
               m.theta[j], compiled.theta[j]);
    }
    printf("  %-6s %-4s %-3s %-4s %-6s %-6s %-52s %-5s %9s %9s %7s\n", "chip", "fmt", "g",
           "M", "N", "K", "candidate", "role", "publ ms", "pred ms", "ratio");
    double *pred = malloc(sizeof *pred * (size_t)pf.n);
    if (!pred) {
        mq_public_figures_free(&pf);
        fprintf(stderr, "model: out of memory\n");
        return 2;
    }
    int nchk = 0, within = 0;
    double logsum = 0, worst = 1;
    for (int i = 0; i < pf.n; i++) {
        const mq_public_figure *f = &pf.f[i];
        mq_candidate c;
        pred[i] = mq_public_predict(f, &m, &c);
        char ctext[120], shown[140];
        mq_candidate_str(&c, ctext, sizeof ctext);
        snprintf(shown, sizeof shown, "%s%s", f->best ? "best: " : "", ctext);
        double ratio = pred[i] / f->published_s;
        printf("  %-6s %-4s %-3d %-4d %-6d %-6d %-52s %-5s %9.4f %9.4f %6.2fx\n", f->chip.name,
               mq_format_name(f->p.format), f->p.group, f->p.M, f->p.N, f->p.K, shown,
               f->role == MQ_PUBLIC_FIT ? "fit" : f->role == MQ_PUBLIC_CHECK ? "check" : "cmp",
               1e3 * f->published_s, 1e3 * pred[i], ratio);
        if (f->role == MQ_PUBLIC_CHECK) {
            double r = ratio > 1 ? ratio : 1 / ratio;
            nchk++;
            within += r <= 1.5;
            logsum += log(r);
            worst = r > worst ? r : worst;
        }
    }
    int pairs = 0, agree = 0;
    for (int i = 0; i < pf.n; i++)
        for (int j = i + 1; j < pf.n; j++) {
            const mq_public_figure *a = &pf.f[i], *b = &pf.f[j];
            if (strcmp(a->chip.name, b->chip.name) || memcmp(&a->p, &b->p, sizeof a->p) ||
                a->role == MQ_PUBLIC_COMPARE || b->role == MQ_PUBLIC_COMPARE)
                continue;
            int pub = a->published_s < b->published_s, mod = pred[i] < pred[j];
            pairs++;
            agree += pub == mod;
            printf("ranking %s %s M=%d %dx%d: lines %d and %d published %.4f and %.4f ms, "
                   "predicted %.4f and %.4f: the model %s\n",
                   a->chip.name, mq_format_name(a->p.format), a->p.M, a->p.N, a->p.K, a->line,
                   b->line, 1e3 * a->published_s, 1e3 * b->published_s, 1e3 * pred[i],
                   1e3 * pred[j], pub == mod ? "agrees" : "DISAGREES");
        }
    if (nchk)
        printf("check figures: %d of %d predicted within 1.5x (geometric-mean factor %.3f, "
               "worst %.3f); rankings agree: %d of %d\n",
               within, nchk, exp(logsum / nchk), worst, agree, pairs);
    printf("sources:\n");
    for (int i = 0; i < pf.n; i++)
        printf("  line %d: %s\n", pf.f[i].line, pf.f[i].source);
    if (within < nchk || agree < pairs)
        rc = 1;
    free(pred);
    mq_public_figures_free(&pf);
    return rc;
}
