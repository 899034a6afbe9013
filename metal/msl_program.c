/* msl_program.c - see msl_program.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msl_program.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

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

const char *mq_metal_source_dir(void)
{
    const char *d = getenv("MQ_METAL_DIR");
    return d && *d ? d : MQ_SOURCE_DIR "/metal";
}

static char *read_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read the Metal source", path);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0, got;
    char chunk[8192];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + got + 1 > cap) {
            cap = (len + got + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                snprintf(err, errlen, "out of memory reading %s", path);
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, got);
        len += got;
    }
    fclose(f);
    if (!buf && !(buf = calloc(1, 1)))
        snprintf(err, errlen, "out of memory reading %s", path);
    else
        buf[len] = 0;
    return buf;
}

/* Append text to a growing string; -1 on out of memory. */
static int append(char **s, size_t *len, size_t *cap, const char *t, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t nc = (*len + n + 1) * 2;
        char *ns = realloc(*s, nc);
        if (!ns)
            return -1;
        *s = ns;
        *cap = nc;
    }
    memcpy(*s + *len, t, n);
    *len += n;
    (*s)[*len] = 0;
    return 0;
}

/* Expand #include "x" lines (depth-limited: headers have include guards). */
static int expand(const char *file, int depth, char **out, size_t *len, size_t *cap, char *err,
                  size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", mq_metal_source_dir(), file);
    if (depth > 8) {
        snprintf(err, errlen, "%s: #include nested too deeply", path);
        return -1;
    }
    char *text = read_file(path, err, errlen);
    if (!text)
        return -1;
    int rc = 0;
    for (char *line = text; rc == 0 && *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) + 1 : strlen(line);
        char inc[256];
        if (sscanf(line, " #include \"%255[^\"]\"", inc) == 1)
            rc = expand(inc, depth + 1, out, len, cap, err, errlen);
        else if (append(out, len, cap, line, n))
            rc = -1, snprintf(err, errlen, "out of memory reading %s", path);
        line += n;
    }
    free(text);
    return rc;
}

char *mq_metal_source(const char *file, char *err, size_t errlen)
{
    char *out = NULL;
    size_t len = 0, cap = 0;
    if (expand(file, 0, &out, &len, &cap, err, errlen)) {
        free(out);
        return NULL;
    }
    return out;
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

mq_status mq_msl_moe_plan_of(const mq_moe_problem *p, const mq_moe_weights *mw,
                             const mq_moe_candidate *c, mq_msl_moe_plan *out, mq_error *err)
{
    memset(out, 0, sizeof *out);
    mq_status st = mq_moe_problem_check(p, err);
    if (st)
        return st;
    int rows = c->inner.p.tile_m, unit = p->group, units = mq_group_count(p->inter, p->group);
    if (rows < 1 || rows > 16)
        return mq_fail(err, MQ_E_ILLEGAL, "tile_m=%d: the MSL kernel holds 1..16 rows a pass",
                       rows);
    if (c->i_split < 1 || c->i_split > units)
        return mq_fail(err, MQ_E_ILLEGAL, "i_split=%d is outside 1..%d (inter=%d in %d-row groups)",
                       c->i_split, units, p->inter, unit);
    int len = (units + c->i_split - 1) / c->i_split * unit;
    if ((c->i_split - 1) * len >= p->inter)
        return mq_fail(err, MQ_E_ILLEGAL, "i_split=%d leaves an empty chunk (inter=%d in chunks "
                                          "of %d)", c->i_split, p->inter, len);
    size_t R = (size_t)p->tokens * p->top_k, E = (size_t)p->experts;
    out->mp = (mq_msl_moe_params){(uint32_t)p->tokens, (uint32_t)p->hidden, (uint32_t)p->inter,
                                  (uint32_t)p->experts, (uint32_t)p->top_k, (uint32_t)p->group,
                                  (uint32_t)mw->w[0][0].n_levels, (uint32_t)len,
                                  (uint32_t)c->i_split};
    snprintf(out->defines, sizeof out->defines, "TRELLIS_BITS=%d MOE_ROWS=%d MOE_THREADS=%d",
             mq_format_bits(p->format), rows, MQ_MSL_MOE_THREADS);
    out->route_grid = 1;
    out->moe_grid = (unsigned)(E * (size_t)c->i_split);
    out->combine_grid = (unsigned)(((size_t)p->tokens * p->hidden + MQ_MSL_MOE_THREADS - 1) /
                                   MQ_MSL_MOE_THREADS);
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
