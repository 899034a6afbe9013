/* model_lookup.c - `model lookup` (see model_cmd.h): a dispatch table's
 * lookup judged on stored measurements, apart from model_main.c because it
 * judges a table, not a fitted model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "baselines.h"
#include "model_cmd.h"
#include "model_store.h"
#include "probes.h"
#include "stale.h"
#include "table_write.h"

int mq_model_lookup_cmd(const char *table_path, const char *model_path, const mq_chip *chip,
                        const mq_model_rows *R, int strict)
{
    mq_table *t;
    mq_error e;
    if (mq_table_load(table_path, NULL, &t, &e)) {
        fprintf(stderr, "model: %s\n", e.msg);
        return 2;
    }
    if (mq_stale_check("model", table_path, mq_table_kernel_build(t), strict)) {
        mq_table_free(t);
        return 2;
    }
    if (model_path) {
        static mq_model m;
        char err[4400];
        static mq_table_param q[MQ_TABLE_MODEL_MAX];
        if (mq_model_read(model_path, &m, err, sizeof err)) {
            fprintf(stderr, "model: %s\n", err);
            mq_table_free(t);
            return 2;
        }
        if (mq_stale_check("model", model_path, m.kernel_build, strict)) {
            mq_table_free(t);
            return 2;
        }
        if (mq_table_set_model(t, q, mq_table_model_params(chip->v, &m, q), &e)) {
            fprintf(stderr, "model: %s: %s\n", model_path, e.msg);
            mq_table_free(t);
            return 2;
        }
    }
    printf("table %s (%s)%s%s on %d rows of %s\n", table_path,
           mq_table_has_model(t) ? "with a cost model" : "no cost model",
           model_path ? ", cost model from " : "", model_path ? model_path : "", R->n, chip->name);
    printf("  %-7s %-5s %-6s %-6s %-46s %-8s %9s %9s %9s %8s %8s\n", "format", "M", "N", "K",
           "table pick", "level", "pick ms", "base ms", "best ms", "xbase", "vs best");
    char *done = calloc((size_t)(R->n ? R->n : 1), 1);
    double lg_base = 0, lg_best = 0, worst = 0, lookup_s = 0;
    int cnt = 0, unmeasured = 0, nlook = 0, nbase = 0;
    for (int i = 0; done && i < R->n; i++) {
        if (done[i])
            continue;
        const mq_problem *p = &R->r[i].p;
        double best = INFINITY, bbase = INFINITY;
        for (int j = i; j < R->n; j++)
            if (mq_model_same_problem(&R->r[j].p, p)) {
                done[j] = 1;
                best = fmin(best, R->t[j]);
            }
        for (int b = 0; b < MQ_BASE_COUNT; b++) {
            mq_candidate bc;
            int k;
            if (mq_baseline_candidate((mq_baseline)b, p, chip, &bc) == 0 &&
                (k = mq_model_rows_find(R, p, &bc)) >= 0)
                bbase = fmin(bbase, R->t[k]);
        }
        mq_lookup_level lv;
        double t0 = mq_now();
        mq_candidate pc = mq_table_lookup(t, p, &chip->lim, &lv);
        lookup_s += mq_now() - t0;
        nlook++;
        int k = mq_model_rows_find(R, p, &pc);
        char name[128];
        mq_candidate_str(&pc, name, sizeof name);
        double pt = k >= 0 ? R->t[k] : -1;
        if (k < 0) {
            unmeasured++;
            printf("  %-7s %-5d %-6d %-6d %-46s %-8s %9s %9.4f %9.4f  (the pick was not "
                   "measured)\n",
                   mq_format_name(p->format), p->M, p->N, p->K, name, mq_lookup_level_name(lv),
                   "-", bbase * 1e3, best * 1e3);
            continue;
        }
        printf("  %-7s %-5d %-6d %-6d %-46s %-8s %9.4f %9.4f %9.4f %7.2fx %+7.1f%%\n",
               mq_format_name(p->format), p->M, p->N, p->K, name, mq_lookup_level_name(lv),
               pt * 1e3, bbase * 1e3, best * 1e3, bbase / pt, 100 * (pt / best - 1));
        lg_best += log(pt / best);
        worst = fmax(worst, pt / best - 1);
        cnt++;
        if (isfinite(bbase)) {
            lg_base += log(bbase / pt);
            nbase++;
        }
    }
    free(done);
    mq_table_free(t);
    if (cnt) {
        printf("%d problems with a measured pick: %.1f%% slower than the measured best "
               "(geometric mean), %.1f%% at worst; ",
               cnt, 100 * (exp(lg_best / cnt) - 1), 100 * worst);
        if (nbase)
            printf("%.3fx the best baseline rule (geometric mean over the %d with a measured "
                   "baseline); ",
                   exp(lg_base / nbase), nbase);
        else
            printf("no baseline rule was measured; ");
        printf("%d picks not measured; %.1f us per lookup\n", unmeasured,
               1e6 * lookup_s / (nlook ? nlook : 1));
    } else {
        fprintf(stderr, "model: no problem of the rows has a measured pick\n");
        return 2;
    }
    return 0;
}
