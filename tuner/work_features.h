/* work_features.h - a candidate's features (kernels/cost_model.h) on a
 * chip as the harness describes it (harness/chips.h). */
#ifndef MQ_FEATURES_H
#define MQ_FEATURES_H

#include "chips.h"
#include "cost_model.h"
#include "mq.h"

/* Features of a legal candidate; MQ_E_ILLEGAL (with the reason) otherwise. */
mq_status mq_features_compute(const mq_problem *p, const mq_candidate *c, const mq_chip *chip,
                              mq_features *out, mq_error *err);

/* The same from a plan already made (mq_plan_candidate on the chip's
 * limits, e.g. a space entry's): the plan is computed once and carried. */
void mq_features_from_plan(const mq_problem *p, const mq_candidate *c, const mq_plan *plan,
                           const mq_chip *chip, mq_features *out);

#endif
