#!/bin/sh
# gpu-tune-peers.sh - on an NVIDIA GPU machine, in one call: tune the chip's
# table on the peers' shapes (results/peer-shapes.csv) at the peers' sizes
# (M 1,16,64,128,512), fp4 and u4, then time that table's picks beside the
# peers (scripts/gpu-peers.sh run) in the same run; the device time of every
# mq figure is MQ_CUDA_TIMING (default queued: launches back to back, as a
# runtime issues them). Results: $OUT/tune.log, the table set
# ($OUT/gpu-results.tar.gz) and $OUT/peers.tgz (peers/: peers.csv, peers.md).
#   scripts/gpu-tune-peers.sh [--samples N]
set -u
samples=30
while [ $# -gt 0 ]; do
    case $1 in
    --samples) [ $# -ge 2 ] || { echo "gpu-tune-peers: --samples needs a number" >&2; exit 2; }
               samples=$2; shift 2 ;;
    *) echo "gpu-tune-peers: unknown argument '$1' (usage: scripts/gpu-tune-peers.sh [--samples N])" >&2
       exit 2 ;;
    esac
done
case $samples in ''|*[!0-9]*) echo "gpu-tune-peers: --samples '$samples' is not a whole number" >&2; exit 2 ;; esac
: "${OUT:?gpu-tune-peers: OUT (the results directory) is not set}"
export MQ_CUDA_TIMING=${MQ_CUDA_TIMING:-queued}
TUNE_SUITE=results/peer-shapes.csv TUNE_M=1,16,64,128,512 STAGE_S=400 scripts/gpu-run.sh tune || exit 1
L=/tmp/deps/usr/lib/x86_64-linux-gnu
export CPPFLAGS="-I/tmp/deps/usr/include" LDFLAGS="-L$L" LD_LIBRARY_PATH="$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
timeout 180 scripts/gpu-peers.sh run --samples "$samples" --out "$OUT/peers" > "$OUT/peers.log" 2>&1
echo "gpu-peers exit $?" >> "$OUT/peers.log"
# the device brings back at most 8 files: the peers' directory as one
tar czf "$OUT/peers.tgz" -C "$OUT" peers && rm -rf "$OUT/peers"
