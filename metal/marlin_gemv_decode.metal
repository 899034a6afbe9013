// marlin_gemv_decode.metal - the decode path for fp4 and u4 (M up to 16
// rows per threadgroup; metal/mq_gemv.h): 16-byte loads of packed words,
// decoded in registers, no simdgroup matrices, no staging. Threadgroup
// memory: the simdgroups' partial sums (none with one simdgroup).
#include "mq_gemv.h"

kernel void marlin_gemv_decode_fp4(device const half *A [[buffer(0)]],
                                   device const uint *packed [[buffer(1)]],
                                   device const half *scales [[buffer(2)]],
                                   device half *C [[buffer(3)]],
                                   constant MqParams &p [[buffer(4)]], GEMV_POSITIONS)
{
    GEMV_RED_DECL
    MQ_CHECK_PLAN(GEMV_RED_BYTES);
    MqWeights w = {packed, scales, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    mq_gemv<GEMV_FP4, 4>(A, w, C, p, red, nullptr, tg, tid, sg, lane);
}

kernel void marlin_gemv_decode_u4(device const half *A [[buffer(0)]],
                                  device const uint *packed [[buffer(1)]],
                                  device const half *scales [[buffer(2)]],
                                  device half *C [[buffer(3)]],
                                  constant MqParams &p [[buffer(4)]],
                                  device const uchar *zeros [[buffer(5)]], GEMV_POSITIONS)
{
    GEMV_RED_DECL
    MQ_CHECK_PLAN(GEMV_RED_BYTES);
    MqWeights w = {packed, scales, zeros, nullptr, nullptr, nullptr, nullptr, nullptr};
    mq_gemv<GEMV_U4, 4>(A, w, C, p, red, nullptr, tg, tid, sg, lane);
}

