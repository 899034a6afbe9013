/* model_cmd.h - the model command's subcommands that live in files of
 * their own (model_main.c keeps the options, fit and eval): lookup
 * (model_lookup.c), public (model_public.c) and tiers (model_tiers.c), each
 * a report of its own on stdout. */
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

/* model tiers: the Apple chips' decode share and prefill efficiency fitted
 * on the whole-model figures of files[0] (chip_tiers.h), every figure and
 * the held-out check reported, and every Apple chip of chips_path held
 * against the functions' values. 0, 1 when the held-out targets are missed
 * or a chip's decode_bw_rel / prefill_rel differ from the fit, 2 on bad
 * input (one line on stderr). */
int mq_model_tiers_cmd(const char *const *files, int nfiles, const char *chips_path);

#endif
