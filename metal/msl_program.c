/* msl_program.c - see msl_program.h. */
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
    return out;
}

int mq_metal_program(const mq_problem *p, const mq_candidate *c, const char **file,
                     const char **function, char *defines, size_t n, char *err, size_t errlen)
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
     * check (MQ_CHECK_PLAN in mq_metal.h). The limits do not change them,
     * only whether a chip can run the candidate, which the caller decided
     * (an H100 block has 48 KB where an Apple threadgroup has 32 KB): the
     * plan is made with room for every described chip */
    mq_plan plan;
    mq_error e;
    const mq_limits roomy = {1 << 20, 4096, 32, 0};
    if (mq_plan_candidate(p, c, &roomy, &plan, &e)) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    snprintf(defines, n,
             "TILE_M=%d TILE_N=%d TILE_K=%d SG_M=%d SG_N=%d TRELLIS_BITS=%d MQ_TILE_PAD=%d "
             "MQ_PLAN_TG_BYTES=%d MQ_PLAN_THREADS=%d",
             c->p.tile_m, c->p.tile_n, c->p.tile_k, vi->sg_m, vi->sg_n,
             mq_format_is_trellis(p->format) ? mq_format_bits(p->format) : 4, vi->tile_pad,
             plan.tg_mem_bytes, plan.threads_per_tg);
    return 0;
}

void mq_msl_params_of(const mq_problem *p, const mq_plan *plan, const mq_weights *w,
                      mq_msl_params *out)
{
    *out = (mq_msl_params){(uint32_t)p->M, (uint32_t)p->N, (uint32_t)p->K, (uint32_t)p->group,
                           (uint32_t)plan->m_tiles, (uint32_t)plan->n_tiles,
                           (uint32_t)plan->k_slices, (uint32_t)plan->k_slice_len,
                           (uint32_t)plan->threadgroups, (uint32_t)plan->work_per_tg,
                           (uint32_t)w->n_levels};
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

mq_status mq_msl_plan_run(const mq_problem *p, const mq_candidate *c, const mq_limits *lim,
                          mq_msl_run_plan *out, mq_error *err)
{
    mq_status st = mq_plan_candidate(p, c, lim, &out->plan, err);
    if (st)
        return st;
    char msg[512];
    if (mq_metal_program(p, c, &out->file, &out->function, out->defines, sizeof out->defines, msg,
                         sizeof msg))
        return mq_fail(err, MQ_E_ILLEGAL, "%s", msg);
    mq_msl_program_of(p, c, &out->prog);
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

/* ---- the MoE block ---- */

/* K, N of projection j (gate, up: hidden -> inter; down: inter -> hidden) */
static void moe_dims(const mq_moe_weights *mw, int j, int *K, int *N)
{
    *K = j == MQ_MOE_DOWN ? mw->inter : mw->hidden;
    *N = j == MQ_MOE_DOWN ? mw->hidden : mw->inter;
}

/* bytes of field f of projection j for all experts */
static size_t moe_field_bytes(const mq_moe_weights *mw, mq_msl_moe_buffer f, int j)
{
    int K, N;
    moe_dims(mw, j, &K, &N);
    size_t E = (size_t)mw->experts, G = (size_t)mq_group_count(K, mw->group);
    switch (f) {
    case MQ_MSL_MOE_INDICES:
        return E * (size_t)((K + 15) / 16) * (size_t)((N + 15) / 16) *
               (size_t)mq_trellis_tile_bytes(mq_format_bits(mw->format));
    case MQ_MSL_MOE_TSCALES:
        return E * G * (size_t)N * sizeof(float);
    case MQ_MSL_MOE_SU:
        return E * (size_t)K * sizeof(float);
    case MQ_MSL_MOE_SV:
        return E * (size_t)N * sizeof(float);
    default:
        return 16 * sizeof(float); /* the codebook, padded to 16 levels */
    }
}

#define CDIV(a, b) (((a) + (b)-1) / (b))

mq_status mq_msl_moe_plan_of(const mq_moe_problem *p, const mq_moe_weights *mw,
                             const mq_moe_candidate *c, mq_msl_moe_plan *out, mq_error *err)
{
    memset(out, 0, sizeof *out);
    mq_status st = mq_moe_candidate_check(p, c, err);
    if (st)
        return st;
    const mq_params *q = &c->inner.p;
    if (c->inner.variant != MQ_VAR_GEMV_TRELLIS)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "the MSL kernel streams the weights (inner gemv_trellis_decode); %s is "
                       "the CPU model's",
                       mq_variant_get(c->inner.variant)->name);
    /* the decode path's planner counts the simdgroups of a tile (kernels/variants.c) */
    const mq_limits roomy = {1 << 20, 4096, 32, 0};
    mq_problem gu = {p->format, q->tile_m, p->inter, p->hidden, p->group};
    mq_plan gp, dp;
    if ((st = mq_plan_candidate(&gu, &c->inner, &roomy, &gp, err)))
        return st;
    int simdgroups = gp.simdgroups;
    size_t tg = (size_t)4 * (32 + (size_t)(simdgroups + 1) * q->tile_m * q->tile_n);
    if (tg > 32768)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "tile_m=%d x tile_n=%d x %d simdgroups needs %zu bytes of threadgroup "
                       "memory (32768 at most)",
                       q->tile_m, q->tile_n, simdgroups, tg);
    /* the down kernel: its own tile, or the inner one's */
    int dtn = c->down_tile_n ? c->down_tile_n : q->tile_n;
    int dtk = c->down_tile_k ? c->down_tile_k : q->tile_k;
    mq_problem dn = {p->format, q->tile_m, p->hidden, p->inter, p->group};
    mq_candidate dc = {MQ_VAR_GEMV_TRELLIS, {q->tile_m, dtn, dtk, 0, 1}};
    if ((st = mq_plan_candidate(&dn, &dc, &roomy, &dp, err)))
        return st;
    int dsg = dp.simdgroups;
    size_t dtg = (size_t)4 * (16 + (size_t)dsg * q->tile_m * dtn);
    if (dtg > 32768)
        return mq_fail(err, MQ_E_ILLEGAL,
                       "the down tile: tile_m=%d x tile_n=%d x %d simdgroups needs %zu bytes of "
                       "threadgroup memory (32768 at most)",
                       q->tile_m, dtn, dsg, dtg);
    size_t R = (size_t)p->tokens * p->top_k, E = (size_t)p->experts;
    unsigned threads = 32u * (unsigned)simdgroups;
    int len = mq_moe_chunk_len(p, c);
    out->mp = (mq_msl_moe_params){(uint32_t)p->tokens, (uint32_t)p->hidden, (uint32_t)p->inter,
                                  (uint32_t)p->experts, (uint32_t)p->top_k, (uint32_t)p->group,
                                  (uint32_t)mw->w[0][0].n_levels, (uint32_t)len,
                                  (uint32_t)c->i_split};
    snprintf(out->defines, sizeof out->defines,
             "TRELLIS_BITS=%d TILE_M=%d TILE_N=%d TILE_K=%d MOE_FUSE=%d", mq_format_bits(p->format),
             q->tile_m, q->tile_n, q->tile_k, c->fuse_gate_up);
    /* the grids are sized for every expert a routing could touch (the
     * touched ones are known on the device only) */
    unsigned slots = (unsigned)(R < E ? R : E);
    static const char *const fn[MQ_MSL_MOE_DISPATCHES] = {
        "moe_route", "gemm_trellis_moe", "gemm_trellis_moe_down", "moe_combine"};
    const unsigned grids[MQ_MSL_MOE_DISPATCHES][3] = {
        {1, 1, 1},
        {(unsigned)CDIV(p->inter, q->tile_n), slots, 1},
        {(unsigned)CDIV(p->hidden, dtn), slots, (unsigned)c->i_split},
        {(unsigned)CDIV(p->tokens * p->hidden, (int)threads), 1, 1}};
    for (int k = 0; k < MQ_MSL_MOE_DISPATCHES; k++) {
        out->d[k].function = fn[k];
        memcpy(out->d[k].grid, grids[k], sizeof grids[k]);
        out->d[k].threads = k == 2 ? 32u * (unsigned)dsg : threads;
        if (k == 2)
            snprintf(out->d[k].defines, sizeof out->d[k].defines,
                     "TRELLIS_BITS=%d TILE_M=%d TILE_N=%d TILE_K=%d",
                     mq_format_bits(p->format), q->tile_m, dtn, dtk);
        else
            snprintf(out->d[k].defines, sizeof out->d[k].defines, "%s", out->defines);
    }
    size_t *b = out->bytes;
    b[MQ_MSL_MOE_X] = (size_t)p->tokens * p->hidden * 2;
    b[MQ_MSL_MOE_IDS] = b[MQ_MSL_MOE_PROBS] = R * 4;
    b[MQ_MSL_MOE_PARAMS] = sizeof out->mp;
    b[MQ_MSL_MOE_ROUTE] = (2 * R + 2 * E + 2) * 4;
    for (int f = MQ_MSL_MOE_INDICES; f <= MQ_MSL_MOE_GRID; f++)
        for (int j = 0; j < MQ_MOE_PROJS; j++)
            b[f] += moe_field_bytes(mw, (mq_msl_moe_buffer)f, j);
    b[MQ_MSL_MOE_H] = R * (size_t)p->inter * 2;
    b[MQ_MSL_MOE_Y] = (size_t)c->i_split * R * (size_t)p->hidden * 4;
    b[MQ_MSL_MOE_OUT] = (size_t)p->tokens * p->hidden * 4;
    if (err) {
        err->code = MQ_OK;
        err->msg[0] = 0;
    }
    return MQ_OK;
}

int mq_msl_moe_space(const mq_moe_problem *p, const mq_moe_weights *mw, int max_rows,
                     int i_splits, mq_moe_candidate *cs, int cap)
{
    static const int splits[] = {1, 2, 4, 8, 16}, tns[] = {64, 32, 128, 16};
    int lo = 1, hi = 16, n = 0;
    if (max_rows > 0) { /* the one tile_m that takes an expert's rows in one pass */
        while (lo < 16 && lo < max_rows)
            lo *= 2;
        hi = lo;
    }
    for (int s = 0; s < (i_splits ? 5 : 1); s++)
        for (int tm = lo; tm <= hi; tm *= 2)
            for (int t = 0; t < 4; t++)
                for (int sgs = 8; sgs >= 1; sgs /= 2)
                    for (int fuse = 0; fuse <= 1; fuse++) {
                        int tn = tns[t], k_per_sg = 8 * (32 / (tn / 4));
                        mq_moe_candidate c;
                        memset(&c, 0, sizeof c);
                        c.inner.variant = MQ_VAR_GEMV_TRELLIS;
                        c.inner.p = (mq_params){tm, tn, k_per_sg * sgs, 0, 1};
                        c.i_split = splits[s];
                        c.fuse_gate_up = fuse;
                        mq_msl_moe_plan plan;
                        if (n < cap && mq_msl_moe_plan_of(p, mw, &c, &plan, NULL) == MQ_OK)
                            cs[n++] = c;
                    }
    return n;
}

/* The dense candidate of the unfused baseline for n rows of one expert (the
 * CPU model's dense rule: the decode kernel up to 16 rows, the prefill
 * kernel's default tile above). */
static mq_candidate unfused_dense(int n)
{
    mq_candidate c;
    memset(&c, 0, sizeof c);
    if (n <= 16) {
        int tm = 1;
        while (tm < n)
            tm *= 2;
        c.variant = MQ_VAR_GEMV_TRELLIS;
        c.p = (mq_params){tm, 64, 128, 0, 1};
    } else {
        c.variant = MQ_VAR_TRELLIS_PACKED;
        c.p = (mq_params){64, 64, 32, 0, 1};
    }
    return c;
}

static mq_msl_moe_step glue_step(const mq_msl_moe_plan *b, const char *fn, size_t threads_total)
{
    mq_msl_moe_step st;
    memset(&st, 0, sizeof st);
    st.file = MQ_MSL_MOE_FILE;
    st.function = fn;
    snprintf(st.defines, sizeof st.defines, "%s", b->defines);
    st.threads = b->d[0].threads;
    st.grid[0] = (unsigned)((threads_total + st.threads - 1) / st.threads);
    st.grid[1] = st.grid[2] = 1;
    return st;
}

mq_status mq_msl_moe_unfused_plan(const mq_moe_problem *p, const mq_moe_weights *mw,
                                  const int32_t *expert_ids, const mq_table *dense,
                                  mq_msl_moe_unfused *out, mq_error *err)
{
    memset(out, 0, sizeof *out);
    mq_moe_candidate fc;
    memset(&fc, 0, sizeof fc);
    fc.inner.variant = MQ_VAR_GEMV_TRELLIS;
    fc.inner.p = (mq_params){1, 64, 128, 0, 1}; /* the glue's module: 256 threads */
    fc.i_split = fc.fuse_gate_up = 1;
    mq_status st = mq_msl_moe_plan_of(p, mw, &fc, &out->base, err);
    if (st)
        return st;
    size_t R = (size_t)p->tokens * p->top_k, E = (size_t)p->experts;
    for (size_t i = 0; i < R; i++) /* the ids index the counts (mq_moe_routing_check: all) */
        if (expert_ids[i] < 0 || expert_ids[i] >= p->experts)
            return mq_fail(err, MQ_E_ARG, "token %zu slot %zu: expert %d is not in 0..%d",
                           i / (size_t)p->top_k, i % (size_t)p->top_k, (int)expert_ids[i],
                           p->experts - 1);
    size_t H = (size_t)p->hidden, I = (size_t)p->inter;
    int *offs = calloc(E + 1, sizeof *offs);
    out->steps = calloc(3 * E + 5, sizeof *out->steps);
    out->dparams = calloc(3 * E, MQ_MSL_MOE_DPARAMS_STRIDE);
    if (!offs || !out->steps || !out->dparams) {
        free(offs);
        mq_msl_moe_unfused_free(out);
        return mq_fail(err, MQ_E_NOMEM, "out of memory for the unfused plan of %d experts",
                       p->experts);
    }
    for (size_t i = 0; i < R; i++)
        offs[expert_ids[i] + 1]++;
    for (size_t e = 0; e < E; e++)
        offs[e + 1] += offs[e];
    const mq_msl_moe_plan *b = &out->base;
    out->steps[out->nsteps++] = (mq_msl_moe_step){.file = MQ_MSL_MOE_FILE, .function = "moe_route",
                                                  .grid = {1, 1, 1}, .threads = b->d[0].threads};
    snprintf(out->steps[0].defines, sizeof out->steps[0].defines, "%s", b->defines);
    out->steps[out->nsteps++] = glue_step(b, "moe_gather", R * H / 8);
    /* per projection, the per-expert stride of each weight field */
    size_t fstride[MQ_MOE_PROJS][MQ_MSL_MOE_NBUF], fbase[MQ_MOE_PROJS][MQ_MSL_MOE_NBUF];
    for (int f = MQ_MSL_MOE_INDICES; f <= MQ_MSL_MOE_SV; f++) {
        size_t at = 0;
        for (int j = 0; j < MQ_MOE_PROJS; j++) {
            size_t n = moe_field_bytes(mw, (mq_msl_moe_buffer)f, j);
            fbase[j][f] = at;
            fstride[j][f] = n / E;
            at += n;
        }
    }
    const mq_limits lim = mq_limits_default();
    int nd = 0;
    for (int j = 0; j < MQ_MOE_PROJS && !st; j++) {
        if (j == MQ_MOE_DOWN) /* after gate and up of every expert */
            out->steps[out->nsteps++] = glue_step(b, "moe_swiglu", R * I);
        for (size_t e = 0; e < E && !st; e++) {
            int n = offs[e + 1] - offs[e];
            if (!n)
                continue;
            int K, N;
            moe_dims(mw, j, &K, &N);
            mq_problem dp = {p->format, n, N, K, p->group};
            mq_candidate dc = dense ? mq_table_lookup(dense, &dp, &lim, NULL) : unfused_dense(n);
            mq_msl_run_plan rp;
            /* the decode kernel's K step halved until its partials fit */
            while ((st = mq_msl_plan_run(&dp, &dc, &lim, &rp, err)) == MQ_E_ILLEGAL &&
                   dc.variant == MQ_VAR_GEMV_TRELLIS && dc.p.tile_k > 32)
                dc.p.tile_k /= 2;
            if (st)
                break;
            if (rp.plan.k_slices > 1 || rp.plan.workspace_bytes) {
                st = mq_fail(err, MQ_E_ILLEGAL, "the unfused baseline's dense kernel splits K");
                break;
            }
            mq_msl_moe_step *s = &out->steps[out->nsteps++];
            s->file = rp.file;
            s->function = rp.function;
            snprintf(s->defines, sizeof s->defines, "%s", rp.defines);
            s->grid[0] = (unsigned)rp.plan.grid_x;
            s->grid[1] = (unsigned)rp.plan.grid_y;
            s->grid[2] = (unsigned)rp.plan.grid_z;
            s->threads = (unsigned)rp.plan.threads_per_tg;
            s->dense = 1;
            size_t row0 = (size_t)offs[e];
            /* A, codes, scales, C, params */
            s->bind[0] = j == MQ_MOE_DOWN ? MQ_MSL_MOE_H : MQ_MSL_MOE_XG;
            s->off[0] = row0 * (size_t)K * 2;
            s->bind[1] = MQ_MSL_MOE_INDICES;
            s->off[1] = fbase[j][MQ_MSL_MOE_INDICES] + e * fstride[j][MQ_MSL_MOE_INDICES];
            s->bind[2] = MQ_MSL_MOE_TSCALES;
            s->off[2] = fbase[j][MQ_MSL_MOE_TSCALES] + e * fstride[j][MQ_MSL_MOE_TSCALES];
            s->bind[3] = j == MQ_MOE_DOWN ? MQ_MSL_MOE_YH : MQ_MSL_MOE_GU;
            s->off[3] = (j == MQ_MOE_UP ? R * I * 2 : 0) + row0 * (size_t)N * 2;
            s->bind[4] = MQ_MSL_MOE_DPARAMS;
            s->off[4] = (size_t)nd * MQ_MSL_MOE_DPARAMS_STRIDE;
            s->nbind = 5;
            for (int i = 0; rp.prog.extra[i] != MQ_BUF_END && s->nbind < 8; i++) {
                mq_buffer_kind k = rp.prog.extra[i];
                int f = k == MQ_BUF_GRID ? MQ_MSL_MOE_GRID : k == MQ_BUF_SU ? MQ_MSL_MOE_SU
                                                                             : MQ_MSL_MOE_SV;
                s->bind[s->nbind] = f;
                s->off[s->nbind++] = f == MQ_MSL_MOE_GRID
                                         ? (size_t)j * 16 * sizeof(float)
                                         : fbase[j][f] + e * fstride[j][f];
            }
            mq_msl_params_of(&dp, &rp.plan, &mw->w[j][e],
                             (mq_msl_params *)((char *)out->dparams +
                                               (size_t)nd * MQ_MSL_MOE_DPARAMS_STRIDE));
            nd++;
        }
    }
    free(offs);
    if (st) {
        mq_msl_moe_unfused_free(out);
        return st;
    }
    out->steps[out->nsteps++] = glue_step(b, "moe_weighted_sum", (size_t)p->tokens * H);
    out->dparams_bytes = (size_t)(nd ? nd : 1) * MQ_MSL_MOE_DPARAMS_STRIDE;
    size_t *by = out->base.bytes;
    by[MQ_MSL_MOE_XG] = R * H * 2;
    by[MQ_MSL_MOE_GU] = 2 * R * I * 2;
    by[MQ_MSL_MOE_YH] = R * H * 2;
    by[MQ_MSL_MOE_DPARAMS] = out->dparams_bytes;
    return MQ_OK;
}

void mq_msl_moe_unfused_free(mq_msl_moe_unfused *u)
{
    free(u->steps);
    free(u->dparams);
    u->steps = NULL;
    u->dparams = NULL;
    u->nsteps = 0;
}

void mq_msl_moe_field(const mq_moe_weights *mw, mq_msl_moe_buffer f, void *dst)
{
    char *d = dst;
    for (int j = 0; j < MQ_MOE_PROJS; j++) {
        size_t n = moe_field_bytes(mw, f, j);
        const void *src = f == MQ_MSL_MOE_INDICES   ? (const void *)mw->indices[j]
                          : f == MQ_MSL_MOE_TSCALES ? (const void *)mw->tscales[j]
                          : f == MQ_MSL_MOE_SU      ? (const void *)mw->su[j]
                          : f == MQ_MSL_MOE_SV      ? (const void *)mw->sv[j]
                                                    : NULL;
        if (src) {
            memcpy(d, src, n);
        } else { /* the codebook: its levels, zero above */
            memset(d, 0, n);
            memcpy(d, mw->grid[j], (size_t)mw->w[j][0].n_levels * sizeof(float));
        }
        d += n;
    }
}
