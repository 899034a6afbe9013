// mq_async_copy.h - copies from device into threadgroup memory that
// complete later where the backend has such a copy (the cuda prelude's
// cp.async on sm_80 and later, MQ_PRELUDE_ASYNC_COPY), and at once
// elsewhere (Apple GPUs have none; the executor): one 16-byte copy, the
// groups they are committed in and the wait for them, and the A tile as
// such copies. The lane kernel's pipelines (mq_lane.h, mq_lane_staged.h)
// are built on them.
#ifndef MQ_ASYNC_COPY_H
#define MQ_ASYNC_COPY_H

#include "mq_metal.h"

// 16 bytes from device memory into threadgroup memory, zeros when in is
// false (nothing is read; src must still be a valid pointer): asynchronous
// where the backend copies without registers (the cuda prelude's cp.async,
// MQ_PRELUDE_ASYNC_COPY), in groups closed by mq_copy_commit and waited for
// by mq_copy_wait; a load and a store elsewhere (Apple GPUs, the executor),
// done at once. Both addresses 16-byte aligned.
inline void mq_copy16(threadgroup half *dst, device const half *src, bool in)
{
#ifdef MQ_PRELUDE_ASYNC_COPY
    metal::mq_copy16_async(dst, src, in);
#else
    uint4 v = uint4(0u);
    if (in)
        v = *(device const uint4 *)src;
    *(threadgroup float4 *)dst = as_type<float4>(v);
#endif
}

// The copies issued since the last commit form one group.
inline void mq_copy_commit()
{
#ifdef MQ_PRELUDE_ASYNC_COPY
    metal::mq_copy_async_commit();
#endif
}

// Until at most `pending` of the groups committed are still in flight (a
// constant: the instruction takes it as an immediate); then a barrier
// makes every thread's copies visible.
inline void mq_copy_wait(uint pending)
{
#ifdef MQ_PRELUDE_ASYNC_COPY
    metal::mq_copy_async_wait_pending(pending);
#else
    (void)pending;
#endif
}

// The A tile at (row0, k0) into As (row stride A_LD) by mq_copy16: each
// thread's A_PER_THREAD chunks (a count the compiler knows).
template <typename AS>
inline void mq_copy_a_tile(threadgroup half *As, AS A, uint row0, uint k0, uint k_end,
                           constant MqParams &p, uint tid)
{
    MQ_UNROLL
    for (uint j = 0; j < uint(A_PER_THREAD); j++) {
        const uint i = tid + j * uint(THREADS);
        if (A_CHUNKS % THREADS != 0 && i >= uint(A_CHUNKS))
            break;
        const uint r = row0 + mq_a_chunk_row(i), k = k0 + mq_a_chunk_k(i);
        const bool in = r < mq_a_rows(A, p) && k < k_end;
        mq_copy16(As + mq_a_chunk_row(i) * uint(A_LD) + mq_a_chunk_k(i),
                  in ? mq_a_base(A) + mq_a_row_at(A, r, p) + k : mq_a_base(A), in);
    }
}

#endif
