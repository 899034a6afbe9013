/* errors.c - status names and the helpers that fill an mq_error. */
#include <stdarg.h>
#include <stdio.h>

#include "mq_internal.h"

const char *mq_status_name(mq_status s)
{
    static const char *const names[] = {
        [MQ_OK] = "ok",           [MQ_E_ARG] = "bad argument",
        [MQ_E_SHAPE] = "bad shape", [MQ_E_WEIGHTS] = "bad weights",
        [MQ_E_ILLEGAL] = "illegal candidate", [MQ_E_NOMEM] = "out of memory",
        [MQ_E_SYSTEM] = "system error", [MQ_E_WRONG] = "wrong result",
    };
    if ((unsigned)s < sizeof names / sizeof names[0] && names[s])
        return names[s];
    return "unknown status";
}

mq_status mq_fail(mq_error *err, mq_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

mq_status mq_ok(mq_error *err)
{
    if (err) {
        err->code = MQ_OK;
        err->msg[0] = '\0';
    }
    return MQ_OK;
}
