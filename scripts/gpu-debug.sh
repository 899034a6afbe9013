#!/bin/sh
# gpu-debug.sh - a short diagnostic on the GPU machine: build, one candidate
# per MMA variant timed with its compile, the probes, then make test-gpu with
# line-buffered output under a time limit (TEST_S, default 300 s).
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT" /tmp/deps
for f in .debs/*.deb; do dpkg -x "$f" /tmp/deps; done
L=/tmp/deps/usr/lib/x86_64-linux-gnu
export CPPFLAGS="-I/tmp/deps/usr/include" LDFLAGS="-L$L" LD_LIBRARY_PATH="$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MQ_CUDA_CACHE=/tmp/mq-cuda-cache
make -j"$(nproc)" build/bench build/tests/gpu_cuda > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 2; }
for spec in ; do
    for mm in fp32 tensor; do
        t0=$(date +%s.%N)
        MQ_CUDA_MMA=$mm timeout 120 build/bench --backend cuda --shape 64x256x512 --formats fp4 \
            --candidate "$spec" --budget 0.01 --out /tmp/dbg.csv > /tmp/dbg.log 2>&1
        echo "$spec $mm: exit $? in $(echo "$(date +%s.%N) - $t0" | bc) s: $(grep -E 'probes|^best|wrong|error' /tmp/dbg.log | tr '\n' ' ' | cut -c1-400)"
    done
done
MQ_TEST_VERBOSE=1 timeout "${TEST_S:-300}" stdbuf -oL -eL build/tests/gpu_cuda > "$OUT/gpu_cuda.log" 2>&1; echo "gpu_cuda exit $?"; tail -8 "$OUT/gpu_cuda.log"
