// marlin_zero_reduction.metal - the seeds' helper that clears a reduction
// buffer before partial sums are accumulated into it (needed by reductions
// that add into the buffer, e.g. with atomics; mq's workspace reduction
// overwrites every element, so the backend uses it only to clear a reused
// workspace when asked). One thread per float4, the tail element-wise.
#include "mq_metal.h"

kernel void marlin_zero_reduction(device float *buf [[buffer(0)]],
                                  constant uint &count [[buffer(1)]],
                                  uint gid [[thread_position_in_grid]])
{
    const uint i = gid * 4u;
    if (i + 3u < count) {
        ((device float4 *)buf)[gid] = float4(0.0f);
    } else {
        for (uint j = i; j < count; j++)
            buf[j] = 0.0f;
    }
}
