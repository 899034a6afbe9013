/* model_store.h - a fitted cost model on disk (results/CHIP/model.csv): its
 * coefficients and held-out quality, with a comment line saying what
 * it was fitted on. Read back by plot to draw the model's curve next to the
 * measurements. */
#ifndef MQ_MODEL_STORE_H
#define MQ_MODEL_STORE_H

#include <stddef.h>

#include "model.h"

/* Written atomically. note: "fitted on N rows measured on host", etc. */
int mq_model_write(const char *path, const mq_model *m, const char *chip, const char *note,
                   char *err, size_t errlen);
/* -1 and "PATH:LINE: problem" on a missing, malformed or unknown-kind file. */
int mq_model_read(const char *path, mq_model *m, char *err, size_t errlen);

#endif
