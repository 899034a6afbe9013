/* summary.c - see summary.h. */
#include <math.h>
#include <stdio.h>

#include "summary.h"

void mq_tune_print_summary(const mq_tune_summary *s)
{
    printf("%-7s %-5s %-6s %-6s %-54s %11s %7s %7s %7s  %s\n", "format", "M", "N", "K",
           "chosen candidate", "time ms", "xseed", "xstripe", "xmlx", "source");
    double geo[MQ_BASE_COUNT] = {0};
    int geon[MQ_BASE_COUNT] = {0};
    for (int i = 0; i < s->nchoice; i++) {
        const mq_choice *c = &s->choices[i];
        char name[128];
        mq_candidate_str(&c->c, name, sizeof name);
        printf("%-7s %-5d %-6d %-6d %-54s %11.4f", mq_format_name(c->p.format), c->p.M, c->p.N,
               c->p.K, name, c->expected_s * 1e3);
        for (int b = 0; b < MQ_BASE_COUNT; b++) {
            if (c->speedup[b] > 0) {
                printf(" %7.2f", c->speedup[b]);
                geo[b] += log(c->speedup[b]);
                geon[b]++;
            } else {
                printf(" %7s", "n/a");
            }
        }
        printf("  %s\n", s->source);
    }
    printf("\n%s table for %s: %d shapes, %d rows -> %s, %s\n", s->source, s->chip, s->nchoice,
           s->nent, s->table_csv, s->table_h);
    for (int b = 0; b < MQ_BASE_COUNT; b++)
        if (geon[b])
            printf("geometric-mean speedup over the %s rule: %.2fx (%d shapes)\n",
                   mq_baseline_name((mq_baseline)b), exp(geo[b] / geon[b]), geon[b]);
    printf("cost model: %s", s->fit_note);
    if (s->fit->n_holdout)
        printf("; held-out shapes (%d rows): MAPE %.1f%%, Spearman %.3f", s->fit->n_holdout,
               100 * s->fit->mape, s->fit->spearman);
    printf("\n");
    if (s->from_rows)
        printf("picked from the rows of %d measured candidates (--from-results): nothing timed, "
               "in %.1f s\n",
               s->from_rows, s->seconds);
    else if (s->measured)
        printf("timed %d candidates (%d reused), %.0f%% of each shape's space on average, in "
               "%.1f s\n",
               s->timed, s->reused, 100 * s->space_fraction, s->seconds);
    else
        printf("predicted in %.1f s\n", s->seconds);
    if (s->gap_n)
        printf("against this build's exhaustive data on %d shapes: the guided pick is %.1f%% "
               "slower on average, %.1f%% at worst\n",
               s->gap_n, 100 * s->gap_mean, 100 * s->gap_max);
}
