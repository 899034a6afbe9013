/* table_check.c - see table_check.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table_check.h"

/* The sweep's fastest of hundreds of timings is biased low (the minimum
 * of noisy times), and a machine drifts over the minutes of a sweep: the
 * pick, the sweep's best and the best baseline are timed again in
 * CHECK_ROUNDS interleaved rounds (one after the other, round after round)
 * and compared on the median of their rounds. Not stored: the results
 * file keeps one row per candidate. */
#define CHECK_ROUNDS 3

static double retime(mq_tuner *T, const mq_candidate *c)
{
    static mq_measurement m;
    mq_measure(T->be, &T->bp, c, T->lim, &T->o->mo, &m);
    T->kernel_s += m.kernel_s;
    return strcmp(m.status, "ok") ? -1 : m.st.median;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Re-time the candidates idx[0..3) in interleaved rounds; out[j] is the
 * median of candidate j's rounds (-1 if one failed). A candidate named
 * twice (the pick is the sweep's best, or a baseline) is timed once. */
static void retime_interleaved(mq_tuner *T, const mq_cand *cs, const int idx[3], double out[3])
{
    double t[3][CHECK_ROUNDS];
    int first[3]; /* the first j naming the same candidate */
    for (int j = 0; j < 3; j++) {
        first[j] = j;
        for (int i = 0; i < j; i++)
            if (idx[i] == idx[j]) {
                first[j] = first[i];
                break;
            }
    }
    for (int r = 0; r < CHECK_ROUNDS; r++)
        for (int j = 0; j < 3; j++)
            if (first[j] == j)
                t[j][r] = retime(T, &cs[idx[j]].c);
    for (int j = 0; j < 3; j++) {
        if (first[j] != j) {
            out[j] = out[first[j]];
            continue;
        }
        qsort(t[j], CHECK_ROUNDS, sizeof t[j][0], dbl_cmp);
        out[j] = t[j][0] > 0 ? t[j][CHECK_ROUNDS / 2] : -1;
    }
}

/* --check: a table on shapes it was not tuned on. Every candidate of each
 * shape is timed (the exhaustive best), as are the baselines and the
 * table's pick (found by lookup, with its level); then the pick, the best
 * and the best baseline again, interleaved (above). */
int mq_tune_check(mq_tuner *T, const mq_suite *suite, const mq_table *table)
{
    mq_error e;
    printf("%-7s %-5s %-6s %-6s %-54s %-8s %9s %9s %9s %8s %8s %8s %8s\n", "format", "M",
           "N", "K", "table pick", "level", "pick ms", "base ms", "best ms", "xbase",
           "vs best", "re-xbase", "re-vs");
    double lg_base = 0, lg_best = 0, worst = 0, rlg_base = 0, rlg_best = 0, rworst = 0;
    int cnt = 0, rcnt = 0;
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
            int ibest = -1, ibase = -1;
            for (int i = 0; i < n && !T->failed; i++) {
                double t = mq_tune_measure(T, &p, &cs[i]);
                if (t > 0 && t < best) {
                    best = t;
                    ibest = i;
                }
            }
            for (int b = 0; b < MQ_BASE_COUNT; b++)
                if (base[b] >= 0 && cs[base[b]].time > 0 && cs[base[b]].time < bbase) {
                    bbase = cs[base[b]].time;
                    ibase = base[b];
                }
            double pt = cs[pick].time;
            /* the confirmation rounds: pick, best, best baseline */
            double re[3] = {-1, -1, -1};
            if (!T->failed && pt > 0 && ibest >= 0 && ibase >= 0) {
                int idx[3] = {pick, ibest, ibase};
                retime_interleaved(T, cs, idx, re);
            }
            char name[128];
            mq_candidate_str(&pc, name, sizeof name);
            printf("%-7s %-5d %-6d %-6d %-54s %-8s %9.4f %9.4f %9.4f %7.2fx %+7.1f%%",
                   mq_format_name(p.format), p.M, p.N, p.K, name, mq_lookup_level_name(lv),
                   pt * 1e3, bbase * 1e3, best * 1e3, bbase / pt, 100 * (pt / best - 1));
            if (re[0] > 0 && re[1] > 0 && re[2] > 0) {
                /* the best of the three re-timed is the reference: the sweep's
                 * best may lose its place to the pick once re-timed */
                double rb = fmin(re[0], fmin(re[1], re[2]));
                printf(" %7.2fx %+7.1f%%\n", re[2] / re[0], 100 * (re[0] / rb - 1));
                rlg_base += log(re[2] / re[0]);
                rlg_best += log(re[0] / rb);
                rworst = fmax(rworst, re[0] / rb - 1);
                rcnt++;
            } else {
                printf(" %8s %8s\n", "-", "-");
            }
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
    if (rcnt)
        printf("re-timed (%d interleaved rounds of the pick, the sweep's best and the best "
               "baseline; medians), %d shapes: the picks are %.2fx the best baseline and %.1f%% "
               "slower than the best of the three (geometric mean), %.1f%% at worst\n",
               CHECK_ROUNDS, rcnt, exp(rlg_base / rcnt), 100 * (exp(rlg_best / rcnt) - 1),
               100 * rworst);
    return 0;
}

