/* probes.h - this machine's own limits, measured: streaming-read bandwidth
 * and FP32 FMA peak, on the same number of threads the kernels use. The
 * benchmark reports kernels as fractions of these, measured in the same run. */
#ifndef MQ_PROBES_H
#define MQ_PROBES_H

#include <stddef.h>

typedef struct {
    double read_gbs;     /* best of the trials, GB/s (1e9 bytes) */
    double fma_gflops;   /* best of the trials, GFLOP/s (an FMA is 2 flops) */
    size_t read_bytes;   /* buffer size streamed per trial */
    int threads;
} mq_machine_probe;

/* The read probe's default buffer: far larger than any L3. */
#define MQ_PROBE_READ_BYTES ((size_t)512 << 20)

/* buffer_bytes: 0 for the default (MQ_PROBE_READ_BYTES). */
int mq_probe_machine(int threads, size_t buffer_bytes, int trials, mq_machine_probe *out);

/* Size in bytes of a cache level (2 or 3) of this machine: the kernel's
 * sysfs description of cpu0 first (sysconf can report a whole host's L3
 * inside a VM), then sysconf; on macOS sysctl (level 2: the performance
 * cores' L2; level 3: 0 on Apple Silicon, which reports none); 0 when
 * unknown. */
long mq_cache_bytes(int level);

/* Whether the probes are skipped (bench --no-probes: repeated runs whose
 * shares of the machine's limits nobody reads, the nightly's A/B rounds):
 * the host chip's measured limits are then 0 and bench takes no probes. */
void mq_probes_set_skip(int skip);
int mq_probes_skip(void);

/* Monotonic clock in seconds. */
double mq_now(void);

#endif
