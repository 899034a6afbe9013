/* work_features.c - see work_features.h. */
#include "work_features.h"

mq_status mq_features_compute(const mq_problem *p, const mq_candidate *c, const mq_chip *chip,
                              mq_features *f, mq_error *err)
{
    mq_plan plan;
    mq_status st = mq_plan_candidate(p, c, &chip->lim, &plan, err);
    if (st == MQ_OK)
        mq_features_of(p, c, &plan, chip->v, f);
    return st;
}

void mq_features_from_plan(const mq_problem *p, const mq_candidate *c, const mq_plan *plan,
                           const mq_chip *chip, mq_features *f)
{
    mq_features_of(p, c, plan, chip->v, f);
}
