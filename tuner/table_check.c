/* table_check.c - see table_check.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table_check.h"

/* --check: a table on shapes it was not tuned on. Every candidate of each
 * shape is timed (the exhaustive best), as are the baselines and the
 * table's pick (found by lookup, with its level). */
int mq_tune_check(mq_tuner *T, const mq_suite *suite, const mq_table *table)
{
    mq_error e;
    printf("%-7s %-5s %-6s %-6s %-54s %-8s %9s %9s %9s %8s %8s\n", "format", "M", "N", "K",
           "table pick", "level", "pick ms", "base ms", "best ms", "xbase", "vs best");
    double lg_base = 0, lg_best = 0, worst = 0;
    int cnt = 0;
    for (int f = 0; f < MQ_FMT_COUNT; f++)
        for (int s = 0; (T->o->formats & (1u << f)) && s < suite->n; s++) {
            mq_problem p = {(mq_format)f, suite->s[s].M, suite->s[s].N, suite->s[s].K,
                            T->o->group};
            int n, base[MQ_BASE_COUNT];
            mq_cand *cs = mq_tune_candidates(&p, T->chip, &n, base);
            if (!cs)
                continue;
            mq_lookup_level lv;
            mq_candidate pc = mq_table_lookup(table, &p, T->lim, &lv);
            int pick = mq_tune_find(cs, n, &pc);
            if (pick < 0) {
                cs[n].c = pc;
                cs[n].time = -1;
                pick = n++;
            }
            int msame[64];
            int nsame = mq_shapes_ms_sharing(suite->s, suite->n, s, p.N, p.K, msame, 64);
            if (mq_bench_problem_setup(&T->bp, &p, 0, msame, nsame, &e)) {
                fprintf(stderr, "tune: %s\n", e.msg);
                free(cs);
                return 2;
            }
            double best = INFINITY, bbase = INFINITY;
            for (int i = 0; i < n && !T->failed; i++) {
                double t = mq_tune_measure(T, &p, &cs[i]);
                if (t > 0)
                    best = fmin(best, t);
            }
            for (int b = 0; b < MQ_BASE_COUNT; b++)
                if (base[b] >= 0 && cs[base[b]].time > 0)
                    bbase = fmin(bbase, cs[base[b]].time);
            double pt = cs[pick].time;
            char name[128];
            mq_candidate_str(&pc, name, sizeof name);
            printf("%-7s %-5d %-6d %-6d %-54s %-8s %9.4f %9.4f %9.4f %7.2fx %+7.1f%%\n",
                   mq_format_name(p.format), p.M, p.N, p.K, name, mq_lookup_level_name(lv),
                   pt * 1e3, bbase * 1e3, best * 1e3, bbase / pt, 100 * (pt / best - 1));
            fflush(stdout);
            if (pt > 0 && isfinite(bbase) && isfinite(best)) {
                lg_base += log(bbase / pt);
                lg_best += log(pt / best);
                worst = fmax(worst, pt / best - 1);
                cnt++;
            }
            free(cs);
            if (T->failed) {
                mq_bench_problem_free(&T->bp);
                return 2;
            }
        }
    mq_bench_problem_free(&T->bp);
    if (cnt)
        printf("\n%d shapes not in the tuning suite: the table's picks are %.2fx the best "
               "baseline (geometric mean) and %.1f%% slower than the exhaustive best on "
               "average (geometric), %.1f%% at worst\n",
               cnt, exp(lg_base / cnt), 100 * (exp(lg_best / cnt) - 1), 100 * worst);
    return 0;
}

