#!/bin/sh
# gpu-mma.sh - one device call for the MMA kernels' rework: make test-gpu
# (every variant verified on the GPU, with its time limit TEST_S), then
# gpu-run.sh's mma stage on MMA_SHAPES / MMA_FORMATS. Output in $OUT.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
L=/tmp/deps/usr/lib/x86_64-linux-gnu
export CPPFLAGS="-I/tmp/deps/usr/include" LDFLAGS="-L$L" LD_LIBRARY_PATH="$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MQ_CUDA_CACHE=/tmp/mq-cuda-cache
if [ "${TEST_S:-0}" -gt 0 ]; then
    scripts/gpu-run.sh > /dev/null 2>&1 # the build and the dependencies
    MQ_TEST_VERBOSE=1 timeout "$TEST_S" make test-gpu > "$OUT/test-gpu.log" 2>&1
    echo "test-gpu exit $?"
    grep -E "^gpu_cuda: [a-z]|FAIL|passed" "$OUT/test-gpu.log" | grep -v "/[0-9]* " | head -20
fi
cp "$OUT/summary.txt" "$OUT/summary-test.txt" 2>/dev/null
scripts/gpu-run.sh mma > /dev/null 2>&1
grep -vE "^== (20|host)" "$OUT/summary.txt"
tar czf "$OUT/mma.tar.gz" results/*/"${MMA_DIR:-mma}"
