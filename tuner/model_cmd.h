/* model_cmd.h - the model command's subcommands that live in files of
 * their own (model_main.c keeps the options, fit and eval): lookup
 * (model_lookup.c) and public (model_public.c), each a report of its own
 * on stdout. */
#ifndef MQ_MODEL_CMD_H
#define MQ_MODEL_CMD_H

#include "chips.h"
#include "model_rows.h"

/* model lookup: the dispatch table's pick (with the cost model of
 * model_path when not NULL, on chip's figures) for every problem of the
 * rows, against the measured best and the best measured baseline rule. 0,
 * or 2 with one line on stderr (the table or model does not load, or no
 * pick was measured, or with strict, either is another kernel build's:
 * stale.h). */
int mq_model_lookup_cmd(const char *table_path, const char *model_path, const mq_chip *chip,
                        const mq_model_rows *R, int strict);

/* model public: the never-measured chips' coefficients fitted on the
 * published figures of files[0] (chips from chips_path), written to
 * out_path when not NULL, then every figure and the rankings reported. 0,
 * 1 when a check figure missed, 2 on bad input (one line on stderr). */
int mq_model_public_cmd(const char *const *files, int nfiles, const char *chips_path,
                        const char *out_path);

#endif
