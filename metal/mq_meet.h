// mq_meet.h - threadgroups that share one output tile, each with its own
// part of K, meeting inside one dispatch instead of in a second one: each
// writes its partial sums to device memory and arrives at the tile's
// counter; the last to arrive reads every part (in part order, so the sum
// is the same whichever comes last) and finishes the tile, and sets the
// counter back to zero, so counters the host zeroed once stay zero. No
// threadgroup waits for another, so none needs another to be running: the
// "last block" reduction of CUDA's threadFenceReduction sample, the fix-up
// of Stream-K (Osama et al., PPoPP 2023) without its waiting. What orders
// the parts before the arrival and the reads after it: device-scope fences
// around a relaxed atomic, and on Apple GPUs a buffer declared
// coherent(device) (both Metal 3.2: macOS 15, iOS 18); in the cuda prelude
// membar.gl, atom.add and loads from L2 (MQ_PRELUDE_DEVICE_SCOPE); in the
// executor the host's atomics. Used by lane_trellis_moe.metal's gate/up
// when its K is split between threadgroups. The Metal 3.2 path has not run
// on Apple hardware (the Metal backend does not run the MoE block yet).
#ifndef MQ_MEET_H
#define MQ_MEET_H

#if defined(__METAL_VERSION__)
#if __METAL_VERSION__ < 320
#error "mq_meet.h needs Metal 3.2 (coherent(device), thread_scope_device fences)"
#endif
#define MQ_COHERENT coherent(device)
#else
#define MQ_COHERENT
#endif

// A float another threadgroup of this dispatch wrote before it arrived.
#ifdef MQ_PRELUDE_DEVICE_SCOPE
#define MQ_LOAD_DEVICE_SCOPE(p) metal::mq_load_gpu_scope(p)
#else
#define MQ_LOAD_DEVICE_SCOPE(p) (*(p))
#endif

// After this threadgroup's part is in device memory (stored by any of its
// threads): arrive at counter cnt, which `parts` threadgroups share. True in
// every thread of the last to arrive, whose reads of the others' parts then
// see them. flag: one uint of threadgroup memory nothing else uses until
// this returns (every thread has read it by then).
inline bool mq_meet_last(MQ_COHERENT device atomic_uint *cnt, uint parts,
                         threadgroup uint *flag, uint tid)
{
    // every thread's stores of the part ordered before the arrival
    atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);
    threadgroup_barrier(mem_flags::mem_device);
    if (tid == 0u) {
        // and the others' stores, which reach this thread through the barrier,
        // ordered before its arrival too (a fence covers its own thread's later
        // atomic; CUTLASS's barrier fences here as well)
        atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);
        const uint before = atomic_fetch_add_explicit(cnt, 1u, memory_order_relaxed);
        if (before + 1u == parts) // every part has arrived: none touches it again
            atomic_store_explicit(cnt, 0u, memory_order_relaxed);
        flag[0] = before;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const bool last = flag[0] + 1u == parts;
    if (last) // the others' stores, fenced before their arrivals, are visible after this
        atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return last;
}

#endif
