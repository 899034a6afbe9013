/* cuda_module.c - see cuda_module.h. The signatures are read from the
 * executor's preprocessing (the same reader msl-cpu binds with), so both
 * backends bind the same parameters the same way: [[buffer(n)]] from the
 * launch's buffer table, position attributes from the PTX special
 * registers (backends/cuda/metal_stdlib). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_module.h"
#include "grow.h"
#include "msl_cpu/msl_exec.h"
#include "msl_program.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

const char *mq_cuda_include_dir(void)
{
    const char *d = getenv("MQ_CUDA_INCLUDE");
    return d && *d ? d : MQ_SOURCE_DIR "/backends/cuda";
}

/* MQ_CUDA_MIN_BLOCKS=N, 1..32 (an experiment's knob): the entries ask the
 * compiler for registers that let N thread blocks share an SM. 0 when it is
 * unset, -1 and a message naming it when it is not such a number. */
static long min_blocks_of(char *err, size_t errlen)
{
    const char *mb = getenv("MQ_CUDA_MIN_BLOCKS");
    if (!mb || !*mb)
        return 0;
    char *end = NULL;
    long v = strtol(mb, &end, 10);
    if (*end || v < 1 || v > 32) {
        snprintf(err, errlen, "MQ_CUDA_MIN_BLOCKS='%s' is not a whole number from 1 to 32", mb);
        return -1;
    }
    return v;
}

char *mq_cuda_source(const char *file, const char *src, const char *defines, mq_cuda_kernel *ks,
                     int *nk, char *err, size_t errlen)
{
    const long min_blocks = min_blocks_of(err, errlen);
    if (min_blocks < 0)
        return NULL;
    char *pre = mq_msl_preprocessed(file, src, defines, NULL, err, errlen);
    if (!pre)
        return NULL;
    mq_msl_kernel_sig *sig = calloc(MQ_CUDA_MAX_KERNELS, sizeof *sig);
    int n = 0;
    if (!sig || mq_msl_read_kernels(pre, sig, MQ_CUDA_MAX_KERNELS, &n, err, errlen)) {
        if (!sig)
            snprintf(err, errlen, "out of memory");
        free(sig);
        free(pre);
        return NULL;
    }
    free(pre);
    char *body = src ? strdup(src) : mq_metal_source(file, err, errlen);
    char *cu = body ? mq_msl_translate_cuda(body) : NULL;
    free(body);
    if (!cu) {
        if (src || body)
            snprintf(err, errlen, "out of memory translating %s", file);
        free(sig);
        return NULL;
    }
    mq_strbuf t = {0};
    mq_sb_printf(&t, "%s\n", cu);
    free(cu);
    mq_sb_printf(&t, "\n// ---- the entries (backends/cuda/cuda_module.c) ----\n"
            "#if defined(__clang__) && !defined(__CUDACC_RTC__)\n"
            "#pragma clang force_cuda_host_device end\n"
            "#endif\n"
            "#ifdef MQ_PLAN_THREADS\n");
    if (min_blocks > 0)
        mq_sb_printf(&t, "#define MQ_CUDA_BOUNDS __launch_bounds__(MQ_PLAN_THREADS, %ld)\n",
                     min_blocks);
    else
        mq_sb_printf(&t, "#define MQ_CUDA_BOUNDS __launch_bounds__(MQ_PLAN_THREADS)\n");
    mq_sb_printf(&t, "#else\n"
            "#define MQ_CUDA_BOUNDS\n"
            "#endif\n");
    for (int i = 0; i < n; i++) {
        const mq_msl_kernel_sig *k = &sig[i];
        snprintf(ks[i].name, sizeof ks[i].name, "%s", k->name);
        ks[i].used = k->used;
        mq_sb_printf(&t, "extern \"C\" __global__ void MQ_CUDA_BOUNDS mq_cuda_entry_%s(metal::mq_cuda_buffers mq_b)\n{\n",
            k->name);
        /* a constant-space reference binds to a copy in registers: with
         * generic pointers the compiler would otherwise reload it from
         * memory after every store that might alias it */
        for (int j = 0; j < k->nparam; j++)
            if (k->param[j].buffer >= 0 && strchr(k->param[j].type, '&'))
                mq_sb_printf(&t, "    metal::mq_detail::noref<%s>::type mq_c%d = *(metal::mq_detail::noref<%s>::type *)mq_b.p[%d];\n",
                    k->param[j].type, j, k->param[j].type, k->param[j].buffer);
        mq_sb_printf(&t, "    %s(", k->name);
        for (int j = 0; j < k->nparam; j++) {
            const mq_msl_param *p = &k->param[j];
            if (p->buffer < 0)
                mq_sb_printf(&t, "%smetal::mq_detail::position<%s>(metal::mq_detail::pos_%s())",
                    j ? ",\n        " : "", p->type, p->attr);
            else if (strchr(p->type, '&'))
                mq_sb_printf(&t, "%smq_c%d", j ? ",\n        " : "", j);
            else
                mq_sb_printf(&t, "%s(%s)mq_b.p[%d]", j ? ",\n        " : "", p->type, p->buffer);
        }
        mq_sb_printf(&t, ");\n}\n");
    }
    *nk = n;
    free(sig);
    if (t.oom) {
        free(t.s);
        snprintf(err, errlen, "out of memory writing the CUDA source of %s", file);
        return NULL;
    }
    return t.s;
}
