/* table_columns.h - the dispatch table's CSV columns, declared once for its
 * writer (tuner/table_write.c) and its reader (kernels/table.c). The reader
 * needs the columns up to expected_s; the rest are for people, but for
 * expected_m, which the model lookup reads where it is present. */
#ifndef MQ_TABLE_COLUMNS_H
#define MQ_TABLE_COLUMNS_H

enum {
    MQ_TCOL_FORMAT,
    MQ_TCOL_GROUP,
    MQ_TCOL_N,
    MQ_TCOL_K,
    MQ_TCOL_M_LO,
    MQ_TCOL_M_HI,
    MQ_TCOL_VARIANT,
    MQ_TCOL_TILE_M,
    MQ_TCOL_TILE_N,
    MQ_TCOL_TILE_K,
    MQ_TCOL_NUM_THREADGROUPS,
    MQ_TCOL_SPLIT_K,
    MQ_TCOL_EXPECTED_S,
    MQ_TCOL_REQUIRED,              /* the columns the lookup reads end here */
    MQ_TCOL_SOURCE = MQ_TCOL_REQUIRED,
    MQ_TCOL_SPEEDUP_SEED,          /* then one per baseline rule, in mq_baseline order */
    MQ_TCOL_SPEEDUP_STRIPE,
    MQ_TCOL_SPEEDUP_MLX,
    MQ_TCOL_EXPECTED_M,            /* optional: the M of expected_s (the model's calibration) */
    MQ_TCOL_EXPERTS,               /* optional, the MoE rows' (0 on dense rows): */
    MQ_TCOL_TOP_K,
    MQ_TCOL_I_SPLIT,
    MQ_TCOL_FUSE_GATE_UP,
    MQ_TCOL_DOWN_TILE_N,
    MQ_TCOL_DOWN_TILE_K,
    MQ_TCOL_COUNT
};

extern const char *const mq_table_columns[MQ_TCOL_COUNT];

#endif
