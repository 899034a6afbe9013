// mq_fixup.h - a tile whose K is split between threadgroups, summed inside
// the kernel (the variants marked `fixup` in kernels/variants.c) instead of
// by a second dispatch: each share of the tile writes its partial sums to
// its plane of the workspace and arrives at the tile's counter; the last to
// arrive sums the planes in plane order (the same sum whichever share comes
// last) into C and sets the counter back to zero, so the counters the host
// zeroed once stay zero. No threadgroup waits for another, so none needs
// another to be running: the fix-up of Stream-K (Osama et al., PPoPP 2023)
// without its waiting, the "last block" reduction of CUDA's
// threadFenceReduction sample. What orders the partials before the arrival
// and the reads after it: device-scope fences around a relaxed atomic, and
// on Apple GPUs a workspace declared coherent(device) (both Metal 3.2:
// macOS 15, iOS 18); in the cuda prelude membar.gl, atom.add and gpu-scope
// loads (MQ_PRELUDE_DEVICE_SCOPE); in the executor the host's atomics.
// Measured on an H100: a second dispatch cost about 4 us of queued device
// time (docs/performance.md, "Split tiles summed in the kernel").
#ifndef MQ_FIXUP_H
#define MQ_FIXUP_H

#if defined(__METAL_VERSION__)
#define MQ_COHERENT coherent(device)
#else
#define MQ_COHERENT
#endif

#ifdef MQ_PRELUDE_DEVICE_SCOPE
#define MQ_LOAD_DEVICE_SCOPE(p) metal::mq_load_gpu_scope(p)
#define MQ_LOAD4_DEVICE_SCOPE(p) metal::mq_load4_gpu_scope(p)
#else
#define MQ_LOAD_DEVICE_SCOPE(p) (*(p))
#define MQ_LOAD4_DEVICE_SCOPE(p) (*(MQ_COHERENT device const float4 *)(p))
#endif
// planes read at once by the last share (each thread's loads in flight)
#define MQ_FIXUP_BATCH 8

// Where a part of a shared tile stands: the tile's counter (its index in
// the column-major tile order), how many shares the tile has, and which
// planes hold its partials: plane s when s == 0 or (first + s) % every == 0
// (K split on the grid: every plane, every = 1; on stripes: the plane of
// each share's first slice).
struct MqShare {
    uint tile, shares, first, every;
};

// After this threadgroup's partial of the tile at (row0, col0) is in its
// plane (written by any of its threads): arrive; the last share writes C.
// flag: one uint of threadgroup memory no thread reads or writes meanwhile.
inline void mq_fixup_arrive(device half *C, MQ_COHERENT device float *workspace,
                            constant MqParams &p, MqShare sh, uint row0, uint col0,
                            threadgroup uint *flag, uint tid)
{
    const size_t plane = size_t(p.M) * p.N;
    // the tiles' counters follow the k_slices planes (the planner's counters_at)
    MQ_COHERENT device atomic_uint *cnt =
        (MQ_COHERENT device atomic_uint *)(workspace + size_t(p.k_slices) * plane) + sh.tile;
    // every thread's stores of the partial ordered before the arrival
    atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);
    threadgroup_barrier(mem_flags::mem_device);
    if (tid == 0u)
        flag[0] = atomic_fetch_add_explicit(cnt, 1u, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (flag[0] + 1u == sh.shares) { // the last: the other shares' stores are visible
        atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);
        // 4 columns a thread where the rows start on 16 bytes (N % 4 == 0),
        // else 1; the planes of a batch loaded before they are added, in
        // plane order either way
        const uint vw = p.N % 4u == 0u ? 4u : 1u;
        for (uint e = tid * vw; e < uint(TILE_M * TILE_N); e += uint(THREADS) * vw) {
            const uint m = row0 + e / uint(TILE_N), n = col0 + e % uint(TILE_N);
            if (m >= p.M || n >= p.N)
                continue;
            MQ_COHERENT device float *at = workspace + size_t(m) * p.N + n;
            float4 sum = float4(0.0f);
            for (uint s0 = 0; s0 < p.k_slices; s0 += uint(MQ_FIXUP_BATCH)) {
                float4 v[MQ_FIXUP_BATCH];
                MQ_UNROLL
                for (uint j = 0; j < uint(MQ_FIXUP_BATCH); j++) {
                    const uint s = s0 + j;
                    v[j] = float4(0.0f);
                    if (s < p.k_slices && (s == 0u || (sh.first + s) % sh.every == 0u)) {
                        if (vw == 4u)
                            v[j] = MQ_LOAD4_DEVICE_SCOPE(at + s * plane);
                        else
                            v[j].x = MQ_LOAD_DEVICE_SCOPE(at + s * plane);
                    }
                }
                MQ_UNROLL
                for (uint j = 0; j < uint(MQ_FIXUP_BATCH); j++) {
                    sum.x += v[j].x;
                    sum.y += v[j].y;
                    sum.z += v[j].z;
                    sum.w += v[j].w;
                }
            }
            device half *out = C + size_t(m) * p.N + n;
            out[0] = half(sum.x);
            if (vw == 4u) { // (n + 3 < N: N and the tile's columns are multiples of 4)
                out[1] = half(sum.y);
                out[2] = half(sum.z);
                out[3] = half(sum.w);
            }
        }
        if (tid == 0u)
            atomic_store_explicit(cnt, 0u, memory_order_relaxed);
    }
    // flag read by every thread before the caller reuses the memory
    threadgroup_barrier(mem_flags::mem_threadgroup);
}

#endif
