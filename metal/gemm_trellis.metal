// gemm_trellis.metal - the trellis (EXL3-style) kernels (seed 004):
// weights are TRELLIS_BITS-bit codebook indices packed LSB-first in 16x16
// tiles, w[k][n] = grid[index] * tscale[k / group][n] * su[k] * sv[n].
// gemm_trellis_packed (prefill, 64x64 tiles by default) and
// gemm_trellis_packed_decode (decode, 32x128 by default: fewer rows, wider
// columns, more threadgroups along N for M of 1-32) share the fused body:
// the A tile double-buffered in threadgroup memory, the codebook decoded
// per simdgroup into its staging block. The tile sizes come from the
// candidate; only the defaults and the entry names differ.
#include "mq_fused.h"

// the double-buffered A tile, then per simdgroup a B staging block and an
// epilogue block (8x8 halves each)
#define MQ_TRELLIS_SMEM (2 * TILE_M * A_LD + SIMDGROUPS * 128)

#define MQ_TRELLIS_KERNEL(name)                                                             \
    kernel void name(device const half *A [[buffer(0)]],                                   \
                     device const uchar *indices [[buffer(1)]],                            \
                     device const float *tscales [[buffer(2)]],                            \
                     device half *C [[buffer(3)]],                                         \
                     constant MqParams &p [[buffer(4)]],                                   \
                     device const float *grid [[buffer(5)]],                               \
                     device const float *su [[buffer(6)]],                                 \
                     device const float *sv [[buffer(7)]],                                 \
                     uint2 tg [[threadgroup_position_in_grid]],                            \
                     uint tid [[thread_index_in_threadgroup]],                             \
                     uint sg [[simdgroup_index_in_threadgroup]],                           \
                     uint lane [[thread_index_in_simdgroup]])                              \
    {                                                                                       \
        threadgroup half smem[MQ_TRELLIS_SMEM];                                             \
        MQ_CHECK_PLAN(sizeof(smem));                                                        \
        MqWeights w = {nullptr, nullptr, nullptr, indices, tscales, grid, su, sv};         \
        mq_fused_gemm<MQ_DEQ_TRELLIS, 2, true>(A, w, C, p, smem, tg, tid, sg, lane);             \
    }

MQ_TRELLIS_KERNEL(gemm_trellis_packed)
MQ_TRELLIS_KERNEL(gemm_trellis_packed_decode)
