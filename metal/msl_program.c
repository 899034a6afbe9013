/* msl_program.c - see msl_program.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msl_program.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

static const mq_msl_program programs[] = {
    {MQ_VAR_MARLIN_FP4, -1, "marlin_gemm_fp4.metal", "marlin_gemm_fp4", {MQ_MSL_END}},
    {MQ_VAR_MARLIN_FP4_STRIPED, -1, "marlin_gemm_fp4_striped.metal", "marlin_gemm_fp4_striped",
     {MQ_MSL_WORKSPACE, MQ_MSL_END}},
    {MQ_VAR_FUSED_FP4, -1, "marlin_gemm_fused.metal", "marlin_gemm_fused_fp4", {MQ_MSL_END}},
    {MQ_VAR_FUSED_U4, -1, "marlin_gemm_fused.metal", "marlin_gemm_fused_u4", {MQ_MSL_ZEROS, MQ_MSL_END}},
    {MQ_VAR_TRELLIS_PACKED, -1, "gemm_trellis.metal", "gemm_trellis_packed",
     {MQ_MSL_GRID, MQ_MSL_SU, MQ_MSL_SV, MQ_MSL_END}},
    {MQ_VAR_TRELLIS_DECODE, -1, "gemm_trellis.metal", "gemm_trellis_packed_decode",
     {MQ_MSL_GRID, MQ_MSL_SU, MQ_MSL_SV, MQ_MSL_END}},
    {MQ_VAR_MLX_SPLITK, MQ_FMT_FP4, "mlx_qmm_splitk.metal", "mlx_qmm_splitk_fp4",
     {MQ_MSL_WORKSPACE, MQ_MSL_END}},
    {MQ_VAR_MLX_SPLITK, MQ_FMT_U4, "mlx_qmm_splitk.metal", "mlx_qmm_splitk_u4",
     {MQ_MSL_WORKSPACE, MQ_MSL_ZEROS, MQ_MSL_END}},
};

const mq_msl_program *mq_msl_program_of(const mq_problem *p, const mq_candidate *c)
{
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++)
        if (programs[i].v == c->variant &&
            (programs[i].format < 0 || programs[i].format == (int)p->format))
            return &programs[i];
    return NULL;
}

int mq_metal_program(const mq_problem *p, const mq_candidate *c, const char **file,
                     const char **function, char *defines, size_t n, char *err, size_t errlen)
{
    const mq_msl_program *pi = mq_msl_program_of(p, c);
    const mq_variant_info *vi = mq_variant_get(c->variant);
    if (!pi || !vi || !mq_variant_serves(c->variant, p->format)) {
        snprintf(err, errlen, "no Metal kernel for %s on %s", vi ? vi->name : "(unknown variant)",
                 mq_format_name(p->format));
        return -1;
    }
    *file = pi->file;
    *function = pi->function;
    snprintf(defines, n, "TILE_M=%d TILE_N=%d TILE_K=%d SG_M=%d SG_N=%d TRELLIS_BITS=%d",
             c->p.tile_m, c->p.tile_n, c->p.tile_k, vi->sg_m, vi->sg_n,
             mq_format_is_trellis(p->format) ? mq_format_bits(p->format) : 4);
    return 0;
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

