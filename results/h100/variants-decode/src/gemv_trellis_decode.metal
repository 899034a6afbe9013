// gemv_trellis_decode.metal - the decode path for the trellis formats
// (metal/mq_gemv.h): 8 rows of 4 indices per lane and step, the codebook
// in threadgroup memory, su on the activations, tscale x sv per column and
// 8 K. Threadgroup memory: the lookup table (gemv_trellis_lut: 2 KB at 2
// bits, 8 KB at 3, 64 B at 4) and the simdgroups' partial sums (none with
// one simdgroup).
#include "mq_gemv.h"

#define GEMV_TRELLIS_KERNEL(name, bits)                                                     \
    kernel void name(device const half *A [[buffer(0)]],                                   \
                     device const uchar *indices [[buffer(1)]],                            \
                     device const float *tscales [[buffer(2)]],                            \
                     device half *C [[buffer(3)]], constant MqParams &p [[buffer(4)]],     \
                     device const float *grid [[buffer(5)]],                               \
                     device const float *su [[buffer(6)]],                                 \
                     device const float *sv [[buffer(7)]], GEMV_POSITIONS)                 \
    {                                                                                       \
        GEMV_RED_DECL                                                                       \
        threadgroup float lut[GEMV_LUT_FLOATS(bits)];                                       \
        MQ_CHECK_PLAN_IF((bits) == TRELLIS_BITS, GEMV_RED_BYTES + sizeof(lut));             \
        gemv_trellis_lut<bits>(lut, grid, p.n_levels, tid);                                 \
        threadgroup_barrier(mem_flags::mem_threadgroup);                                    \
        MqWeights w = {nullptr, nullptr, nullptr, indices, tscales, grid, su, sv};         \
        mq_gemv<GEMV_TRELLIS, bits>(A, w, C, p, red, lut, tg, tid, sg, lane);               \
    }

GEMV_TRELLIS_KERNEL(gemv_trellis_decode_trellis2, 2)
GEMV_TRELLIS_KERNEL(gemv_trellis_decode_trellis3, 3)
GEMV_TRELLIS_KERNEL(gemv_trellis_decode_trellis4, 4)
