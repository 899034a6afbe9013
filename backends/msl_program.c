/* msl_program.c - see msl_program.h: the program of a candidate from its
 * variant's row (file, function, buffers, macros), its parameters and its
 * weight arrays. The MoE block's plans are msl_moe_plan.c and
 * msl_moe_unfused.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "msl_program.h"

const mq_msl_program *mq_msl_program_of(const mq_problem *p, const mq_candidate *c,
                                         mq_msl_program *out)
{
    const mq_variant_info *vi = mq_variant_get(c->variant);
    if (!vi || !vi->msl_file || !vi->msl_function || !mq_variant_serves(c->variant, p->format))
        return NULL;
    /* the function's name with the format put in, kept per variant and format
     * so the pointer stays valid */
    static char names[64][MQ_FMT_COUNT][96];
    if ((unsigned)c->variant >= 64)
        return NULL;
    char *fn = names[c->variant][p->format];
    snprintf(fn, sizeof names[0][0], vi->msl_function, mq_format_name(p->format));
    out->file = vi->msl_file;
    out->function = fn;
    int n = 0;
    for (int i = 0; i < 4 && vi->msl_buffers[i] != MQ_BUF_END; i++)
        out->extra[n++] = vi->msl_buffers[i];
    if (p->format == MQ_FMT_U4) /* zero points follow the variant's own buffers */
        out->extra[n++] = MQ_BUF_ZEROS;
    out->extra[n] = MQ_BUF_END;
    out->layout = vi->layout;
    return out;
}

int mq_msl_bind_slot(const mq_msl_program *prog, int slot)
{
    if (prog->layout != MQ_LAYOUT_LANE)
        return slot;
    return slot == MQ_MSL_W_CODES    ? MQ_MSL_W_LANE_CODES
           : slot == MQ_MSL_W_SCALES ? MQ_MSL_W_LANE_SCALES
           : slot == MQ_MSL_W_ZEROS  ? MQ_MSL_W_LANE_ZEROS
                                     : slot;
}

/* MQ_OK, or MQ_E_WEIGHTS when w lacks the arrays the program reads. */
static mq_status weights_ready(const mq_msl_program *prog, const mq_weights *w, mq_error *err)
{
    if (prog->layout == MQ_LAYOUT_LANE &&
        (!w->lane_codes || !w->lane_scales || (w->format == MQ_FMT_U4 && !w->lane_zeros)))
        return mq_fail(err, MQ_E_WEIGHTS,
                       "%s reads the lane layout: the weights were not prepared for it "
                       "(mq_weights_prepare_lane)",
                       prog->function);
    return MQ_OK;
}

int mq_metal_program(const mq_problem *p, const mq_candidate *c, const mq_plan *plan,
                     const char **file, const char **function, char *defines, size_t n,
                     char *err, size_t errlen)
{
    mq_msl_program prog;
    const mq_msl_program *pi = mq_msl_program_of(p, c, &prog);
    const mq_variant_info *vi = mq_variant_get(c->variant);
    if (!pi) {
        snprintf(err, errlen, "no Metal kernel for %s on %s", vi ? vi->name : "(unknown variant)",
                 mq_format_name(p->format));
        return -1;
    }
    *file = pi->file;
    *function = pi->function;
    /* the planner's threadgroup memory and threads, for the kernel's own
     * check (MQ_CHECK_PLAN in mq_metal.h), from the caller's plan */
    snprintf(defines, n,
             "TILE_M=%d TILE_N=%d TILE_K=%d SG_M=%d SG_N=%d TRELLIS_BITS=%d MQ_TILE_PAD=%d "
             "MQ_PLAN_TG_BYTES=%d MQ_PLAN_THREADS=%d MQ_PLAN_STAGES=%d",
             c->p.tile_m, c->p.tile_n, c->p.tile_k, vi->sg_m, vi->sg_n,
             mq_format_is_trellis(p->format) ? mq_format_bits(p->format) : 4, vi->tile_pad,
             plan->tg_mem_bytes, plan->threads_per_tg, plan->stages);
    /* the lane kernel's window of K per scaled add of its sums, where the
     * planner chose one (metal/mq_lane.h's LANE_ACC_SCALE) */
    if (plan->scale_k) {
        size_t used = strlen(defines);
        snprintf(defines + used, n > used ? n - used : 0, " MQ_PLAN_SCALE_K=%d", plan->scale_k);
    }
    return 0;
}

void mq_msl_params_of(const mq_problem *p, const mq_plan *plan, const mq_weights *w,
                      mq_msl_params *out)
{
    *out = (mq_msl_params){(uint32_t)p->M, (uint32_t)p->N, (uint32_t)p->K, (uint32_t)p->group,
                           (uint32_t)plan->m_tiles, (uint32_t)plan->n_tiles,
                           (uint32_t)plan->k_slices, (uint32_t)plan->k_slice_len,
                           (uint32_t)plan->threadgroups, (uint32_t)plan->work_per_tg,
                           (uint32_t)w->n_levels,
                           (uint32_t)(w->format == MQ_FMT_FP4 && w->lane_scales_small)};
}

void mq_msl_weight_arrays(const mq_weights *w, const void *ptr[MQ_MSL_W_COUNT],
                          size_t bytes[MQ_MSL_W_COUNT])
{
    size_t K = (size_t)w->K, N = (size_t)w->N, G = (size_t)mq_group_count(w->K, w->group);
    for (int i = 0; i < MQ_MSL_W_COUNT; i++) {
        ptr[i] = NULL;
        bytes[i] = 0;
    }
    if (mq_format_is_trellis(w->format)) {
        size_t tiles = ((K + 15) / 16) * ((N + 15) / 16);
        ptr[MQ_MSL_W_CODES] = w->indices;
        bytes[MQ_MSL_W_CODES] = tiles * (size_t)mq_trellis_tile_bytes(mq_format_bits(w->format));
        ptr[MQ_MSL_W_SCALES] = w->tscales;
        bytes[MQ_MSL_W_SCALES] = G * N * sizeof(float);
        ptr[MQ_MSL_W_GRID] = w->grid;
        bytes[MQ_MSL_W_GRID] = (size_t)w->n_levels * sizeof(float);
        ptr[MQ_MSL_W_SU] = w->su;
        bytes[MQ_MSL_W_SU] = K * sizeof(float);
        ptr[MQ_MSL_W_SV] = w->sv;
        bytes[MQ_MSL_W_SV] = N * sizeof(float);
    } else {
        ptr[MQ_MSL_W_CODES] = w->packed;
        bytes[MQ_MSL_W_CODES] = K / 8 * N * sizeof(uint32_t);
        ptr[MQ_MSL_W_SCALES] = w->scales;
        bytes[MQ_MSL_W_SCALES] = G * N * sizeof(uint16_t);
        if (w->format == MQ_FMT_U4) {
            ptr[MQ_MSL_W_ZEROS] = w->zeros;
            bytes[MQ_MSL_W_ZEROS] = G * N;
        }
    }
    mq_lane_geom g;
    if (w->lane_codes && mq_lane_geometry(w->format, w->K, w->N, w->group, &g, NULL) == MQ_OK) {
        ptr[MQ_MSL_W_LANE_CODES] = w->lane_codes;
        bytes[MQ_MSL_W_LANE_CODES] = g.code_words * sizeof(uint32_t);
        ptr[MQ_MSL_W_LANE_SCALES] = w->lane_scales;
        bytes[MQ_MSL_W_LANE_SCALES] = w->lane_scales ? g.scale_count * g.scale_size : 0;
        ptr[MQ_MSL_W_LANE_ZEROS] = w->lane_zeros;
        bytes[MQ_MSL_W_LANE_ZEROS] = w->lane_zeros ? g.scale_count : 0;
    }
}

int mq_msl_weight_slot_of(mq_buffer_kind k)
{
    switch (k) {
    case MQ_BUF_ZEROS:
        return MQ_MSL_W_ZEROS;
    case MQ_BUF_GRID:
        return MQ_MSL_W_GRID;
    case MQ_BUF_SU:
        return MQ_MSL_W_SU;
    case MQ_BUF_SV:
        return MQ_MSL_W_SV;
    default:
        return -1;
    }
}

mq_status mq_msl_run_plan_of(const mq_problem *p, const mq_candidate *c, const mq_plan *plan,
                             const mq_weights *w, mq_msl_run_plan *out, mq_error *err)
{
    out->plan = plan;
    char msg[512];
    if (mq_metal_program(p, c, plan, &out->file, &out->function, out->defines,
                         sizeof out->defines, msg, sizeof msg))
        return mq_fail(err, MQ_E_ILLEGAL, "%s", msg);
    mq_msl_program_of(p, c, &out->prog);
    if (w) {
        mq_status st = weights_ready(&out->prog, w, err);
        if (st)
            return st;
    }
    /* A, codes, scales, C, the parameters, then the variant's own buffers */
    int n = 5;
    out->bind[0] = out->bind[3] = out->bind[4] = MQ_MSL_BIND_OWN;
    out->bind[1] = mq_msl_bind_slot(&out->prog, MQ_MSL_W_CODES);
    out->bind[2] = mq_msl_bind_slot(&out->prog, MQ_MSL_W_SCALES);
    for (int i = 0; out->prog.extra[i] != MQ_BUF_END && n < MQ_MSL_BINDINGS; i++) {
        int slot = mq_msl_bind_slot(&out->prog, mq_msl_weight_slot_of(out->prog.extra[i]));
        out->bind[n++] = slot < 0 ? MQ_MSL_BIND_WORKSPACE : slot;
    }
    out->nbind = n;
    return MQ_OK;
}

static uint64_t sample_print(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; b && n && i < 512; i++) {
        h ^= b[i * (n - 1) / 511];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t mq_msl_weights_print(const mq_weights *w)
{
    uint64_t h = 14695981039346656037ull ^ (uint64_t)w->format ^ ((uint64_t)w->K << 8) ^
                 ((uint64_t)w->N << 32) ^ ((uint64_t)w->group << 56);
    const void *ptr[MQ_MSL_W_COUNT];
    size_t bytes[MQ_MSL_W_COUNT];
    mq_msl_weight_arrays(w, ptr, bytes);
    for (int i = 0; i < MQ_MSL_W_COUNT; i++)
        h = sample_print(h, ptr[i], bytes[i]);
    return h;
}
