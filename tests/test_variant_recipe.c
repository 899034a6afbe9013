/* test_variant_recipe.c - the README's recipe "add a variant with an
 * existing schedule" followed to the letter: the only thing this test adds
 * is one row, an existing variant (marlin_gemm_fused_fp4) under a second
 * name. Everything else must then know it without another change: names,
 * the candidate space, the planner, the CPU model (its output identical to
 * the original's), the MSL program of the Metal side, and the dispatch
 * table's CSV and C header. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "chips.h"
#include "msl_program.h"
#include "mq.h"
#include "space.h"
#include "table_write.h"
#include "testdata.h"

/* The row: the recipe's one step. */
static const mq_variant_info copy_row = {
    .name = "marlin_gemm_fused_fp4_copy",
    .formats = 1u << MQ_FMT_FP4,
    .schedule = MQ_SCHED_GRID2D,
    .dequant = MQ_DEQ_FUSED,
    .a_stages = 1,
    .sg_m = 32,
    .sg_n = 32,
    .staging_bytes_per_sg = 128,
    .tile_quantum = 8,
    .defaults = {64, 64, 32, 0, 1},
    .msl_file = "marlin_gemm_fused.metal",
    .msl_function = "marlin_gemm_fused_fp4",
    .summary = "marlin_gemm_fused_fp4 under a second name (the recipe's test)",
};

int main(void)
{
    mq_error e;
    mq_variant id;
    int before = mq_variant_count();
    /* the original's tile-row pad too (a build knob, 8 halves by default) */
    mq_variant_info row = copy_row;
    row.tile_pad = mq_variant_get(MQ_VAR_FUSED_FP4)->tile_pad;
    CHECK(mq_variant_register(&row, &id, &e) == MQ_OK, "the row registers: %s", e.msg);
    CHECK(mq_variant_count() == before + 1 && (int)id == before,
          "it is variant %d of %d (got id %d, count %d)", before, before + 1, (int)id,
          mq_variant_count());
    mq_variant found;
    CHECK(mq_variant_from_name("marlin_gemm_fused_fp4_copy", &found, &e) == MQ_OK && found == id,
          "its name finds it");
    CHECK(mq_variant_register(&row, &found, &e) != MQ_OK && strstr(e.msg, "exists already"),
          "a second row of the same name is refused: '%s'", e.msg);
    mq_variant_info bad = row;
    bad.name = "bad_region";
    bad.sg_m = 12;
    CHECK(mq_variant_register(&bad, &found, &e) != MQ_OK && strstr(e.msg, "multiples of 8"),
          "a simdgroup region that is not a multiple of 8 is refused: '%s'", e.msg);

    /* the space: the copy's candidates are the original's, legal alike */
    mq_chip chip = td_toy_chip();
    mq_problem p = {MQ_FMT_FP4, 3, 200, 384, 128};
    mq_space sp;
    CHECK(mq_space_enumerate(&p, &chip, MQ_SPACE_FULL, &sp) == 0, "the space enumerates");
    int orig = 0, copy = 0;
    for (int i = 0; i < sp.n; i++) {
        orig += sp.e[i].legal && sp.e[i].c.variant == MQ_VAR_FUSED_FP4;
        copy += sp.e[i].legal && sp.e[i].c.variant == id;
    }
    mq_space_free(&sp);
    CHECK(copy > 0 && copy == orig, "the copy has as many legal candidates as the original (%d, %d)",
          copy, orig);

    /* the planner and the CPU model: the same plan, the same output bit for bit */
    mq_candidate c0 = {MQ_VAR_FUSED_FP4, {16, 64, 128, 0, 1}}, c1 = {id, {16, 64, 128, 0, 1}};
    mq_plan p0, p1;
    CHECK(mq_plan_candidate(&p, &c0, NULL, &p0, &e) == MQ_OK &&
              mq_plan_candidate(&p, &c1, NULL, &p1, &e) == MQ_OK &&
              !memcmp(&p0, &p1, sizeof p0),
          "the planner gives the copy the original's plan");
    float *W = malloc(sizeof *W * (size_t)p.K * p.N);
    uint16_t *A = malloc(sizeof *A * (size_t)p.M * p.K);
    float *C0 = malloc(sizeof *C0 * (size_t)p.M * p.N), *C1 = malloc(sizeof *C1 * (size_t)p.M * p.N);
    mq_weights w;
    mq_ctx *ctx;
    td_fill_weights(W, p.K, p.N, 7);
    td_fill_activations(A, p.M, p.K, 8);
    CHECK(mq_quantize(MQ_FMT_FP4, W, p.K, p.N, p.group, NULL, &w, &e) == MQ_OK, "quantize");
    CHECK(mq_ctx_create(2, &ctx, &e) == MQ_OK, "a context");
    CHECK(mq_gemm(ctx, &p, &w, A, C0, &c0, NULL, &e) == MQ_OK &&
              mq_gemm(ctx, &p, &w, A, C1, &c1, NULL, &e) == MQ_OK,
          "both run: %s", e.msg);
    CHECK(!memcmp(C0, C1, sizeof *C0 * (size_t)p.M * p.N),
          "the copy's output is the original's, bit for bit");
    mq_ctx_destroy(ctx);
    mq_weights_free(&w);
    free(W);
    free(A);
    free(C0);
    free(C1);

    /* the Metal side: the program comes from the row */
    const char *file, *fn;
    char defines[200], err[256];
    CHECK(td_metal_program(&p, &c1, NULL, &file, &fn, defines, sizeof defines, err, sizeof err) == 0 &&
              !strcmp(file, "marlin_gemm_fused.metal") && !strcmp(fn, "marlin_gemm_fused_fp4") &&
              strstr(defines, "TILE_M=16 TILE_N=64 TILE_K=128"),
          "its MSL program is the row's file and function with the candidate's macros (%s)",
          err);

    /* the table: written by name, loaded back, compiled-in form by id */
    mq_choice ch = {p, c1, 1e-3, 1, {2, 0, 1.5}};
    mq_table_entry *ent;
    int n = mq_table_build(&ch, 1, &ent);
    char dir[] = "/tmp/mq-test-recipe-XXXXXX", csv[128], h[128];
    CHECK(n > 0 && mkdtemp(dir) != NULL, "a table is built");
    snprintf(csv, sizeof csv, "%s/table.csv", dir);
    snprintf(h, sizeof h, "%s/table.h", dir);
    CHECK(mq_table_write_csv(csv, "toy", "cpu", "measured", "", ent, n, NULL, NULL, err, sizeof err) == 0 &&
              mq_table_write_header(h, "toy", "measured", "", ent, n, NULL, NULL, err, sizeof err) == 0,
          "the table is written: %s", err);
    mq_table *t;
    mq_lookup_level lv;
    CHECK(mq_table_load(csv, "toy", &t, &e) == MQ_OK, "and loads: %s", e.msg);
    mq_candidate got = mq_table_lookup(t, &p, NULL, &lv);
    CHECK(got.variant == id && lv == MQ_LOOKUP_EXACT,
          "the lookup answers the copy exactly (variant %d, level %s)", (int)got.variant,
          mq_lookup_level_name(lv));
    mq_table_free(t);
    FILE *f = fopen(h, "r");
    char text[4096] = "";
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[len] = '\0';
    if (f)
        fclose(f);
    char want[64];
    snprintf(want, sizeof want, "(mq_variant)%d /* marlin_gemm_fused_fp4_copy */", (int)id);
    CHECK(strstr(text, want) != NULL, "table.h names it by id: expected '%s'", want);
    free(ent);
    unlink(csv);
    unlink(h);
    rmdir(dir);
    return check_done("variant_recipe");
}
