/* space.c - see space.h; the grid itself is kernels/candidate_grid.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candidate_grid.h"
#include "grow.h"
#include "space.h"

int mq_space_kind_parse(const char *s, mq_space_kind *out)
{
    if (!strcmp(s, "seed"))
        *out = MQ_SPACE_SEED;
    else if (!strcmp(s, "full"))
        *out = MQ_SPACE_FULL;
    else
        return -1;
    return 0;
}

static int add(mq_space *s, int *cap, const mq_problem *p, const mq_limits *lim, mq_candidate c,
               const char *space_reason)
{
    if (mq_grow(&s->e, cap, s->n + 1, sizeof *s->e, 256))
        return -1;
    mq_space_entry *e = &s->e[s->n++];
    memset(e, 0, sizeof *e);
    e->c = c;
    if (space_reason) {
        snprintf(e->reason, sizeof e->reason, "%s", space_reason);
        return 0;
    }
    mq_error err;
    if (mq_plan_candidate(p, &c, lim, &e->plan, &err) == MQ_OK) {
        e->legal = 1;
        s->legal++;
    } else {
        snprintf(e->reason, sizeof e->reason, "%s", err.msg);
    }
    return 0;
}

typedef struct {
    mq_space *s;
    int cap;
    const mq_problem *p;
    const mq_limits *lim;
} walk;

static int visit(const mq_candidate *c, const char *pointless, void *ctx)
{
    walk *w = ctx;
    return add(w->s, &w->cap, w->p, w->lim, *c, pointless);
}

int mq_space_enumerate(const mq_problem *p, const mq_chip *chip, mq_space_kind kind,
                       mq_space *out)
{
    memset(out, 0, sizeof *out);
    walk w = {out, 0, p, &chip->lim};
    if (mq_candidate_grid(p, chip->lim.cores, kind == MQ_SPACE_SEED, visit, &w)) {
        mq_space_free(out);
        return -1;
    }
    return 0;
}

void mq_space_free(mq_space *s)
{
    free(s->e);
    memset(s, 0, sizeof *s);
}
