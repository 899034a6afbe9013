/* commands.c - the stand-in's command queue, command buffers and compute
 * encoders, held to Metal's protocol: one open encoder per command buffer,
 * nothing encoded after endEncoding, no commit with an encoder open, one
 * commit, no wait before it; a dispatch needs a pipeline, every buffer its
 * kernel reads, threads within the pipeline's maximum; setBytes takes at
 * most 4 KB; buffer indices stop at 30. The command buffer retains what it
 * binds (Metal's default), runs its dispatches in order on the MSL executor
 * when committed, and completes (status 4) or fails (status 5, with an
 * NSError) as a GPU's would: a kernel fault, or a planted failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msl_exec.h"
#include "standin.h"

#define MAX_DISPATCHES 8
#define SET_BYTES_MAX 4096 /* Apple: setBytes is for single-use data under 4 KB */


typedef struct {
    id pipeline;                          /* retained */
    id bound[MQ_MSL_MAX_BUFFERS];         /* MTLBuffers, retained */
    mq_msl_buffer bytes[MQ_MSL_MAX_BUFFERS]; /* setBytes copies */
    MTLSize grid, threads;
} dispatch;

typedef struct so_cmdbuf so_cmdbuf;
typedef struct {
    so_object o;
    so_cmdbuf *cb; /* not retained: the command buffer retains its encoder */
    int ended;
    dispatch cur;  /* the bindings the next dispatch takes */
} so_encoder;

struct so_cmdbuf {
    so_object o;
    long number;    /* 1-based, for the faults */
    id encoder;     /* retained while it exists */
    int encoding, committed, status;
    id error;       /* NSError, retained */
    double start, end;
    dispatch d[MAX_DISPATCHES];
    int nd;
};

static long command_buffers;

static void dispatch_clear(dispatch *d)
{
    if (d->pipeline)
        so_release(d->pipeline);
    for (int i = 0; i < MQ_MSL_MAX_BUFFERS; i++) {
        if (d->bound[i])
            so_release(d->bound[i]);
        mq_msl_buffer_free(&d->bytes[i]);
    }
    memset(d, 0, sizeof *d);
}

/* A copy of the bindings for a recorded dispatch (its own references). */
static void dispatch_copy(dispatch *to, const dispatch *from)
{
    memset(to, 0, sizeof *to);
    to->pipeline = so_retain(from->pipeline);
    to->grid = from->grid;
    to->threads = from->threads;
    for (int i = 0; i < MQ_MSL_MAX_BUFFERS; i++) {
        if (from->bound[i])
            to->bound[i] = so_retain(from->bound[i]);
        if (from->bytes[i].data) {
            char err[256];
            if (mq_msl_buffer_alloc(&to->bytes[i], from->bytes[i].bytes, err, sizeof err))
                so_violation("%s", err);
            memcpy(to->bytes[i].data, from->bytes[i].data, from->bytes[i].bytes);
        }
    }
}

static void encoder_dealloc(so_object *o) { dispatch_clear(&((so_encoder *)o)->cur); }

static void cmdbuf_dealloc(so_object *o)
{
    so_cmdbuf *cb = (so_cmdbuf *)o;
    for (int i = 0; i < cb->nd; i++)
        dispatch_clear(&cb->d[i]);
    if (cb->encoder)
        so_release(cb->encoder);
    if (cb->error)
        so_release(cb->error);
}

id so_queue_new(void) { return so_new("MTLCommandQueue", sizeof(so_object), NULL); }

/* ---- queue and command buffer ----------------------------------------------------- */

SO_PROTO0(queue_command_buffer, id);
SO_PROTO0(cb_encoder, id);
SO_PROTO0(cb_commit, void);
SO_PROTO0(cb_wait, void);
SO_PROTO0(cb_status, NSUInteger);
SO_PROTO0(cb_error, id);
SO_PROTO0(cb_gpu_start, double);
SO_PROTO0(cb_gpu_end, double);

static id queue_command_buffer(id self, SEL cmd)
{
    (void)self, (void)cmd;
    so_cmdbuf *cb = so_new("MTLCommandBuffer", sizeof *cb, cmdbuf_dealloc);
    cb->number = ++command_buffers;
    so_count.command_buffers++;
    return so_autorelease(cb);
}

static id cb_encoder(id self, SEL cmd)
{
    (void)cmd;
    so_cmdbuf *cb = self;
    if (cb->committed)
        so_violation("-[MTLCommandBuffer computeCommandEncoder] after commit");
    if (cb->encoding)
        so_violation("-[MTLCommandBuffer computeCommandEncoder] while another encoder is open "
                     "(endEncoding first)");
    so_encoder *e = so_new("MTLComputeCommandEncoder", sizeof *e, encoder_dealloc);
    e->cb = cb;
    if (cb->encoder)
        so_release(cb->encoder);
    cb->encoder = so_retain(e);
    cb->encoding = 1;
    return so_autorelease(e);
}

/* Run the recorded dispatches in order on the executor. */
static void execute(so_cmdbuf *cb)
{
    char msg[1024];
    cb->start = so_now();
    cb->status = 4; /* MTLCommandBufferStatusCompleted */
    for (int i = 0; i < cb->nd && cb->status == 4; i++) {
        dispatch *d = &cb->d[i];
        const mq_msl_module *m;
        const char *name;
        NSUInteger max;
        so_pipeline_kernel(d->pipeline, &m, &name, &max);
        unsigned used = 0;
        mq_msl_kernel(m, name, &used);
        mq_msl_launch l = {{0}, {(unsigned)d->grid.width, (unsigned)d->grid.height,
                                 (unsigned)d->grid.depth},
                           {(unsigned)d->threads.width, (unsigned)d->threads.height,
                            (unsigned)d->threads.depth}, 0, 0};
        for (int k = 0; k < MQ_MSL_MAX_BUFFERS; k++) {
            l.buffers[k] = d->bound[k] ? so_buffer_storage(d->bound[k])
                                       : d->bytes[k].data ? &d->bytes[k] : NULL;
            if ((used >> k & 1u) && !l.buffers[k])
                so_violation("dispatch of %s: its [[buffer(%d)]] is not bound (a GPU fault or "
                             "garbage on a Mac)", name, k);
        }
        so_count.dispatches++;
        if (mq_msl_run(m, name, &l, msg, sizeof msg)) {
            cb->status = 5; /* MTLCommandBufferStatusError */
            char text[1200];
            snprintf(text, sizeof text, "Execution of the command buffer was aborted due to an "
                                        "error during execution. %s", msg);
            cb->error = so_error_new(text);
        }
    }
    cb->end = so_now();
}

static void cb_commit(id self, SEL cmd)
{
    (void)cmd;
    so_cmdbuf *cb = self;
    if (cb->committed)
        so_violation("-[MTLCommandBuffer commit] of a command buffer already committed");
    if (cb->encoding)
        so_violation("-[MTLCommandBuffer commit] with an encoder open (endEncoding first)");
    cb->committed = 1;
    if ((so_cfg.cb_fail && cb->number == so_cfg.cb_fail) ||
        (so_cfg.cb_fail_from && cb->number >= so_cfg.cb_fail_from)) {
        cb->status = 5;
        cb->start = cb->end = so_now();
        cb->error = so_error_new("Execution of the command buffer was aborted due to an error "
                                 "during execution. Internal Error (0000000e:Internal Error) "
                                 "(stand-in fault cb-fail)");
    } else {
        execute(cb);
    }
    if (cb->status != 4)
        so_count.failed_command_buffers++;
}

static void cb_wait(id self, SEL cmd)
{
    (void)cmd;
    if (!((so_cmdbuf *)self)->committed)
        so_violation("-[MTLCommandBuffer waitUntilCompleted] before commit (it never returns)");
}

static NSUInteger cb_status(id self, SEL cmd)
{
    (void)cmd;
    const so_cmdbuf *cb = self;
    return cb->committed ? (NSUInteger)cb->status : 0; /* MTLCommandBufferStatusNotEnqueued */
}

static id cb_error(id self, SEL cmd) { return (void)cmd, ((so_cmdbuf *)self)->error; }

static double cb_gpu_start(id self, SEL cmd) { return (void)cmd, ((so_cmdbuf *)self)->start; }
static double cb_gpu_end(id self, SEL cmd) { return (void)cmd, ((so_cmdbuf *)self)->end; }

/* ---- the compute encoder ------------------------------------------------------------- */

SO_PROTO(enc_set_pipeline, void, id);
SO_PROTO(enc_set_buffer, void, id, NSUInteger, NSUInteger);
SO_PROTO(enc_set_bytes, void, const void *, NSUInteger, NSUInteger);
SO_PROTO(enc_dispatch, void, MTLSize, MTLSize);
SO_PROTO0(enc_end, void);

static so_encoder *open_encoder(id self, const char *what)
{
    so_encoder *e = self;
    if (e->ended)
        so_violation("-[MTLComputeCommandEncoder %s] after endEncoding", what);
    return e;
}

static void check_index(NSUInteger index, const char *what)
{
    if (index >= MQ_MSL_MAX_BUFFERS)
        so_violation("-[MTLComputeCommandEncoder %s] at index %lu: Metal has buffer indices 0-30",
                     what, (unsigned long)index);
}

static void enc_set_pipeline(id self, SEL cmd, id pso)
{
    (void)cmd;
    so_encoder *e = open_encoder(self, "setComputePipelineState:");
    if (!so_is(pso, "MTLComputePipelineState"))
        so_violation("-[MTLComputeCommandEncoder setComputePipelineState:] of a non-pipeline");
    so_retain(pso);
    if (e->cur.pipeline)
        so_release(e->cur.pipeline);
    e->cur.pipeline = pso;
}

static void enc_set_buffer(id self, SEL cmd, id buf, NSUInteger offset, NSUInteger index)
{
    (void)cmd;
    so_encoder *e = open_encoder(self, "setBuffer:offset:atIndex:");
    check_index(index, "setBuffer:offset:atIndex:");
    if (buf && !so_is(buf, "MTLBuffer"))
        so_violation("-[MTLComputeCommandEncoder setBuffer:offset:atIndex:] of a non-buffer");
    if (offset)
        so_violation("setBuffer: offset %lu: the stand-in binds whole buffers only",
                     (unsigned long)offset);
    if (buf)
        so_retain(buf);
    if (e->cur.bound[index])
        so_release(e->cur.bound[index]);
    mq_msl_buffer_free(&e->cur.bytes[index]);
    e->cur.bound[index] = buf;
}

static void enc_set_bytes(id self, SEL cmd, const void *bytes, NSUInteger n, NSUInteger index)
{
    (void)cmd;
    so_encoder *e = open_encoder(self, "setBytes:length:atIndex:");
    check_index(index, "setBytes:length:atIndex:");
    if (n > SET_BYTES_MAX)
        so_violation("-[MTLComputeCommandEncoder setBytes:length:atIndex:] of %lu bytes: Metal "
                     "takes at most 4096 (use a buffer)", (unsigned long)n);
    if (e->cur.bound[index])
        so_release(e->cur.bound[index]);
    e->cur.bound[index] = NULL;
    mq_msl_buffer_free(&e->cur.bytes[index]);
    char err[256];
    if (mq_msl_buffer_alloc(&e->cur.bytes[index], n ? n : 1, err, sizeof err))
        so_violation("%s", err);
    memcpy(e->cur.bytes[index].data, bytes, n);
}

static void enc_dispatch(id self, SEL cmd, MTLSize grid, MTLSize threads)
{
    (void)cmd;
    so_encoder *e = open_encoder(self, "dispatchThreadgroups:threadsPerThreadgroup:");
    const mq_msl_module *m;
    const char *name;
    NSUInteger max;
    if (!e->cur.pipeline || so_pipeline_kernel(e->cur.pipeline, &m, &name, &max))
        so_violation("dispatchThreadgroups: with no compute pipeline set");
    NSUInteger n = threads.width * threads.height * threads.depth;
    if (n == 0 || n > max)
        so_violation("dispatch of %s with %lu threads per threadgroup; the pipeline's "
                     "maxTotalThreadsPerThreadgroup is %lu (Metal's validation rejects it)",
                     name, (unsigned long)n, (unsigned long)max);
    if (!grid.width || !grid.height || !grid.depth)
        so_violation("dispatch of %s over an empty grid", name);
    so_cmdbuf *cb = e->cb;
    if (cb->nd == MAX_DISPATCHES)
        so_violation("more than %d dispatches in one command buffer (the stand-in's limit)",
                     MAX_DISPATCHES);
    e->cur.grid = grid;
    e->cur.threads = threads;
    dispatch_copy(&cb->d[cb->nd++], &e->cur);
}

static void enc_end(id self, SEL cmd)
{
    (void)cmd;
    so_encoder *e = open_encoder(self, "endEncoding");
    e->ended = 1;
    e->cb->encoding = 0;
}

const so_method so_command_methods[] = {
    SO_ROW0("MTLCommandQueue", "commandBuffer", 0, queue_command_buffer, id),
    SO_ROW0("MTLCommandBuffer", "computeCommandEncoder", 0, cb_encoder, id),
    SO_ROW0("MTLCommandBuffer", "commit", 0, cb_commit, void),
    SO_ROW0("MTLCommandBuffer", "waitUntilCompleted", 0, cb_wait, void),
    SO_ROW0("MTLCommandBuffer", "status", 0, cb_status, NSUInteger),
    SO_ROW0("MTLCommandBuffer", "error", 0, cb_error, id),
    SO_ROW0("MTLCommandBuffer", "GPUStartTime", 0, cb_gpu_start, double),
    SO_ROW0("MTLCommandBuffer", "GPUEndTime", 0, cb_gpu_end, double),
    SO_ROW("MTLComputeCommandEncoder", "setComputePipelineState:", 0, enc_set_pipeline, void, id),
    SO_ROW("MTLComputeCommandEncoder", "setBuffer:offset:atIndex:", 0, enc_set_buffer, void, id,
           NSUInteger, NSUInteger),
    SO_ROW("MTLComputeCommandEncoder", "setBytes:length:atIndex:", 0, enc_set_bytes, void,
           const void *, NSUInteger, NSUInteger),
    SO_ROW("MTLComputeCommandEncoder", "dispatchThreadgroups:threadsPerThreadgroup:", 0,
           enc_dispatch, void, MTLSize, MTLSize),
    SO_ROW0("MTLCommandEncoder", "endEncoding", 0, enc_end, void),
};
const int so_command_nmethods = sizeof so_command_methods / sizeof so_command_methods[0];
