/* registry.c - the backends this build has, and opening one by name. */
#include <stdio.h>
#include <string.h>

#include "backend.h"

const mq_backend_kind mq_backend_kinds[] = {
    {"metal", mq_backend_metal_open}, /* the MSL kernels on an Apple GPU (macOS) */
    {"cuda", mq_backend_cuda_open},   /* the MSL kernels on an NVIDIA GPU (NVRTC) */
    {"cpu", mq_backend_cpu_open},     /* the CPU model of every variant, here */
    /* the Metal kernels on the CPU, verification only: after cpu, so "auto"
     * never picks it */
    {"msl-cpu", mq_backend_msl_cpu_open},
};
const int mq_backend_nkinds = (int)(sizeof mq_backend_kinds / sizeof mq_backend_kinds[0]);

int mq_backend_is_device(const mq_backend *b)
{
    return b && strcmp(b->name, "cpu") != 0 && !b->verify_only;
}

mq_backend *mq_backend_open(const char *name, const mq_backend_opts *o, char *note,
                            size_t note_n, mq_error *err)
{
    size_t used = 0;
    if (note_n)
        note[0] = '\0';
    int any = !strcmp(name, "auto");
    for (int i = 0; i < mq_backend_nkinds; i++) {
        const mq_backend_kind *k = &mq_backend_kinds[i];
        if (!any && strcmp(name, k->name))
            continue;
        mq_error e;
        mq_backend *b = k->open(o, &e);
        if (b && used && used < note_n) /* auto passed something over: say what runs instead */
            snprintf(note + used, note_n - used, "; %s instead",
                     strcmp(k->name, "cpu") ? k->name : "timing on the CPU model");
        if (b)
            return b;
        if (!any) {
            mq_fail(err, e.code, "%s: %s", k->name, e.msg);
            return NULL;
        }
        /* auto: say what was passed over */
        if (used < note_n)
            used += (size_t)snprintf(note + used, note_n - used, "%s%s: %s", used ? "; " : "",
                                     k->name, e.msg);
    }
    if (any) {
        mq_fail(err, MQ_E_ARG, "no backend could be opened (%s)", note_n ? note : "");
        return NULL;
    }
    char known[256] = "auto";
    for (int i = 0; i < mq_backend_nkinds; i++) {
        size_t l = strlen(known);
        snprintf(known + l, sizeof known - l, ", %s", mq_backend_kinds[i].name);
    }
    mq_fail(err, MQ_E_ARG, "unknown backend '%s' (known: %s)", name, known);
    return NULL;
}

void mq_backend_close(mq_backend *b)
{
    if (b && b->close)
        b->close(b);
}
