#!/bin/sh
# gpu-peers.sh - issue 40's peers beside this project's tuned picks on an NVIDIA
# GPU machine, in one call: the original Marlin CUDA kernel (IST-DASLab/marlin
# at 2f6d7c1), PyTorch's tinygemm int4 kernel and cuBLAS FP16, timed by
# scripts/peers/peers.py in one process with one protocol, and the picks of
# results/CHIP/table.csv for fp4 and u4 timed by bench --backend cuda in the
# same run; one CSV (peers.csv) and one markdown table (stdout, peers.md).
#   scripts/gpu-peers.sh fetch [MIRROR]  make MARLIN_SRC: git clone of
#                           github.com/IST-DASLab/marlin (or of MIRROR, a local
#                           clone or bare mirror, where there is no network), then
#                           git checkout 2f6d7c1
#   scripts/gpu-peers.sh run [--out DIR] [--samples N] [--no-mq]
# Marlin's code never enters this repository: MARLIN_SRC (default .peers/marlin,
# git-ignored) is read, its three files are copied to a build directory outside
# the checkout ($TMPDIR/mq-peers, kept between runs as torch's extension cache),
# and its known fix for sm_90 with CUDA 13 is made there (cp_async4_stream's L2
# evict_first policy traps: the plain cp.async.cg instead, IST-DASLab/marlin
# issues 40 and 44); torch.utils.cpp_extension.load builds it for the device's
# own architecture.
# Shapes: N x K in {4096x14336, 14336x4096, 4096x4096} (N output features, K
# input features), M in {1, 16, 64, 512}, group 128. mq's candidate per shape
# is what the runtime's lookup (mq_table_lookup) answers on results/CHIP/
# table.csv: build/model lookup run on a placeholder results file (one row per
# problem, its time a dummy; only the "table pick" column is read).
# The two protocols (peers.py; harness/measure.c with backends/cuda/cuda.c):
#   the same: weight copies rotated launch to launch, as many as 2 * L2 / bytes
#   + 2 (bench takes the larger of the host's last-level cache and the GPU's
#   L2); CUDA events around one call on an otherwise idle GPU, synchronized
#   between samples; --samples N samples (bench: --max-reps N --ci 0 --budget
#   600); median, p10 and p90 by GSL's quantiles; the output checked before any
#   time (a wrong one gets none; peers.py writes a wrong peer's times into the
#   detail column only, marked not valid).
#   different: warm-ups: bench 1, peers.py 5. bench's span is its GEMM kernel
#   and, when split_k > 1, its reduction kernel (Marlin reduces inside its one
#   kernel; cuBLAS launches what it launches); bench uploads A and fills C and
#   the workspace with NaN before each sample (outside the events), peers.py
#   reuses them. bench launches from C through the driver; the peers through
#   Python and the torch dispatcher, whose host time between the first event
#   and the launch (a few us) counts in their one-launch figure. bench has no
#   queued figure; peers.py's (20 calls queued behind a spin kernel between two
#   events, divided by 20) is free of host time. bench checks its first run's
#   output (three sampled rows) against float64 within a per-element FP16/FP32
#   bound; peers.py checks the first and every timed output (a race spoils
#   some launches only), max |out - ref| / max |ref| against an FP32 reference
#   of the peer's own dequantized weights (1e-2 for FP16 output, 3e-2 for BF16).
# Environment: MARLIN_SRC, PYTHON (default python3; it needs torch with CUDA,
# numpy, and the toolkit's nvcc and ninja for the extension), BUILD (default
# build), TMPDIR. GSL and libcsv come from .debs/ as scripts/gpu-run.sh takes
# them (dpkg -x), else from the system.
# Exit status: 0 every row ok; 1 a row wrong or in error (peers.csv says which);
# 2 bad input or a missing environment (no GPU, no torch, no Marlin checkout, a
# failed build of the tools): one line on stderr.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=scripts/portable.sh
. "$here/portable.sh"
COMMIT=2f6d7c10e124b3c5fa29ff8d77d568bd7af3274c
URL=https://github.com/IST-DASLab/marlin.git
PY=${PYTHON:-python3}
B=${BUILD:-build}

die() { echo "gpu-peers: $*" >&2; exit 2; }
say() { echo "gpu-peers: $*" >&2; }
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
MARLIN_SRC=$(abs "${MARLIN_SRC:-$root/.peers/marlin}")

usage() {
    cat <<'EOF'
usage: scripts/gpu-peers.sh run [--out DIR] [--samples N] [--no-mq]
       scripts/gpu-peers.sh fetch [MIRROR]
Times issue 40's peers on this machine's NVIDIA GPU beside this project's tuned
picks: Marlin's CUDA kernel (IST-DASLab/marlin 2f6d7c1, built from MARLIN_SRC
with its sm_90 fix), tinygemm (torch's _weight_int4pack_mm) and cuBLAS FP16 in
one Python process, and results/CHIP/table.csv's fp4 and u4 picks with
build/bench --backend cuda, on N x K 4096x14336, 14336x4096, 4096x4096 and
M 1, 16, 64, 512. Writes DIR/peers.csv (one row per peer and shape) and
DIR/peers.md, the markdown table it prints.

  run              build the tools and Marlin, time everything, merge
  fetch [MIRROR]   make MARLIN_SRC: git clone (of MIRROR, a local clone or bare
                   mirror, when given) and git checkout 2f6d7c1
  --out DIR        default $OUT when set, else results/peers-DATE
  --samples N      samples per figure, 1 to 4096 (default 50)
  --no-mq          time the peers only (no build of the tools, no bench)
  --help           this text

MARLIN_SRC: the Marlin checkout (default .peers/marlin, git-ignored); PYTHON:
the Python with torch (default python3); BUILD: the tools' build directory.
Exit status: 0 every row ok, 1 a row wrong or in error, 2 bad input or a
missing environment.
EOF
}

fetch() {
    [ $# -le 1 ] || die "fetch: one argument at most (a local mirror of IST-DASLab/marlin)"
    from=${1:-$URL}
    if [ -e "$MARLIN_SRC" ]; then
        head=$(git -C "$MARLIN_SRC" rev-parse HEAD 2>/dev/null) ||
            die "'$MARLIN_SRC' exists and is not a git checkout"
        [ "$head" = "$COMMIT" ] || die "'$MARLIN_SRC' is at $head, not 2f6d7c1"
        say "$MARLIN_SRC is at 2f6d7c1 already"
        return 0
    fi
    [ $# -eq 0 ] || [ -d "$1" ] || die "fetch: no mirror at '$1'"
    command -v git > /dev/null || die "no git"
    log=$(mktemp) || die "mktemp failed"
    mkdir -p "$(dirname "$MARLIN_SRC")" || die "cannot make $(dirname "$MARLIN_SRC")"
    if ! git clone -q "$from" "$MARLIN_SRC" 2> "$log"; then
        m=$(tail -1 "$log"); rm -f "$log"; rmdir "$(dirname "$MARLIN_SRC")" 2>/dev/null
        die "git clone $from failed: $m"
    fi
    if ! git -C "$MARLIN_SRC" checkout -q "$COMMIT" 2> "$log"; then
        m=$(tail -1 "$log"); rm -f "$log"; rm -rf "$MARLIN_SRC"
        die "git checkout 2f6d7c1 in a clone of $from failed: $m"
    fi
    rm -f "$log"
    say "$MARLIN_SRC at 2f6d7c1 (cloned from $from)"
}

# check_env: every condition a run needs, first failure one line and exit 2
check_env() {
    for f in __init__.py marlin_cuda.cpp marlin_cuda_kernel.cu; do
        [ -f "$MARLIN_SRC/marlin/$f" ] ||
            die "no Marlin checkout at '$MARLIN_SRC' (make it: scripts/gpu-peers.sh fetch [MIRROR])"
    done
    if [ -e "$MARLIN_SRC/.git" ]; then
        head=$(git -C "$MARLIN_SRC" rev-parse HEAD 2>/dev/null) || head='?'
        [ "$head" = "$COMMIT" ] || die "'$MARLIN_SRC' is at $head, not 2f6d7c1"
    fi
    command -v nvidia-smi > /dev/null || die "no NVIDIA GPU (no nvidia-smi)"
    nvidia-smi -L 2>/dev/null | grep -q GPU || die "no NVIDIA GPU (nvidia-smi lists none)"
    "$PY" -c 'import torch' 2>/dev/null || die "no PyTorch for '$PY' (PYTHON names another)"
    "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null ||
        die "PyTorch ('$PY') sees no CUDA device"
    "$PY" -c 'import numpy' 2>/dev/null || die "no numpy for '$PY' (Marlin's pack needs it)"
    "$PY" -c 'import os, sys; from torch.utils.cpp_extension import CUDA_HOME as h
sys.exit(not (h and os.path.exists(os.path.join(h, "bin", "nvcc"))))' 2>/dev/null ||
        die "no CUDA toolkit (nvcc) for torch's extension build (set CUDA_HOME)"
    command -v ninja > /dev/null || die "no ninja on PATH (torch's extension build needs it)"
}

# portable-begin: runs only on the Linux NVIDIA GPU machines (nvidia-smi, dpkg, CUDA)
# build_tools LOG: bench, model and gpu_cuda with the machine's gcc, GSL and
# libcsv from .debs/ as scripts/gpu-run.sh unpacks them
build_tools() {
    deps=${TMPDIR:-/tmp}/mq-peers/deps
    mkdir -p "$deps"
    for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" "$deps"; done
    [ -f .debs/deps.tar.xz ] && tar xJf .debs/deps.tar.xz -C "$deps"
    L=$deps/usr/lib/x86_64-linux-gnu
    export CPPFLAGS="-I$deps/usr/include" LDFLAGS="-L$L" LD_LIBRARY_PATH="$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    make -j"$(ncpu)" BUILD="$B" "$B/bench" "$B/model" "$B/tests/gpu_cuda" > "$1" 2>&1
}

# mq_picks CHIP FILE: the table's lookup per problem as "format M N K variant
# tm tn tk tg sk level" lines; model lookup reads results rows (a placeholder
# row per problem here) and prints each problem's pick, measured or not
mq_picks() {
    rows=$work/lookup-rows.csv
    {
        echo '# mq results, schema 1'
        echo '"schema","tool_version","git_rev","host","date","chip","backend","format","M","N","K","group","variant","tile_m","tile_n","tile_k","num_threadgroups","split_k","status","error","median_s","p10_s","p90_s","mad_s","ci_lo_s","ci_hi_s","reps","gflops","weight_gbs","samples_s"'
        for f in fp4 u4; do for nk in 4096x14336 14336x4096 4096x4096; do for m in 1 16 64 512; do
            printf '"1","0","-","-","2000-01-01T00:00:00Z","%s","cuda","%s","%s","%s","%s","128","marlin_gemv_decode","1","16","1024","0","1","ok","","1","1","1","0","1","1","1","1","1","1"\n' \
                "$1" "$f" "$m" "${nk%x*}" "${nk#*x}"
        done; done; done
    } > "$rows"
    "$B/model" lookup --chip "$1" --table "results/$1/table.csv" "$rows" > "$work/lookup.txt" 2>&1
    awk '$1 ~ /^(fp4|u4)$/ && $6 ~ /^tm=/ { gsub(/[a-z]+=/, "")
        print $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }' "$work/lookup.txt" > "$2"
    [ "$(nlines < "$2")" -eq 24 ] ||
        die "model lookup gave $(nlines < "$2") picks of 24 ($(tail -1 "$work/lookup.txt"))"
}

run() {
    out=${OUT:-} samples=50 mq=1
    while [ $# -gt 0 ]; do
        case $1 in
        --out) { [ $# -ge 2 ] && [ -n "$2" ]; } || die "--out needs a directory"; out=$2; shift 2 ;;
        --samples) [ $# -ge 2 ] || die "--samples needs a number (1 to 4096)"; samples=$2; shift 2 ;;
        --no-mq) mq=0; shift ;;
        --help|-h) usage; exit 0 ;;
        *) die "run: unknown option '$1' (see --help)" ;;
        esac
    done
    case $samples in ''|*[!0-9]*) die "--samples: '$samples' is not a whole number (1 to 4096)" ;; esac
    if [ ${#samples} -gt 4 ] || [ "$samples" -lt 1 ] || [ "$samples" -gt 4096 ]; then
        die "--samples: '$samples' is out of range (1 to 4096)"
    fi
    [ -n "$out" ] || out=$root/results/peers-$(date -u +%Y-%m-%d)
    out=$(abs "$out")
    check_env
    cd "$root" || die "cannot enter $root"
    mkdir -p "$out" || die "cannot make '$out'"
    work=$(mktemp -d) || die "mktemp failed"
    trap 'rm -rf "$work"' EXIT
    { date -u +%Y-%m-%dT%H:%M:%SZ
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
      git describe --always --dirty 2>/dev/null; } > "$out/env.txt" 2>&1
    set --
    if [ "$mq" = 1 ]; then
        say "building the tools ($out/build.log)"
        build_tools "$out/build.log" || die "the build of the tools failed ($out/build.log)"
        CHIP=$("$B/tests/gpu_cuda" --chip-only 2>/dev/null) || CHIP=
        [ -n "$CHIP" ] || CHIP=h100
        [ -f "results/$CHIP/table.csv" ] || die "no table for chip $CHIP (results/$CHIP/table.csv)"
        mq_picks "$CHIP" "$out/mq-picks.txt"
        rm -f "$out/mq-bench.csv" "$out/mq-bench.log"
        say "chip $CHIP: timing the table's 24 picks with bench ($out/mq-bench.log)"
        while read -r f m n k var tm tn tk tg sk level; do
            MQ_CUDA_CACHE=${TMPDIR:-/tmp}/mq-cuda-cache MQ_WEIGHT_CACHE=$work \
                "$B/bench" --backend cuda --chip "$CHIP" --shape "${m}x${n}x${k}" --formats "$f" \
                --candidate "$var $tm $tn $tk $tg $sk" --max-reps "$samples" --ci 0 --budget 600 \
                --quiet --no-probes --out "$out/mq-bench.csv" >> "$out/mq-bench.log" 2>&1 < /dev/null
            say "bench $f ${m}x${n}x${k} $var $tm $tn $tk $tg $sk ($level): exit $?"
        done < "$out/mq-picks.txt"
        [ -f "$out/mq-bench.csv" ] || die "bench wrote no results ($out/mq-bench.log)"
        set -- --mq-csv "$out/mq-bench.csv" --mq-picks "$out/mq-picks.txt"
    fi
    say "the peers (Marlin's build: ${TMPDIR:-/tmp}/mq-peers)"
    "$PY" "$here/peers/peers.py" --marlin-src "$MARLIN_SRC" --out "$out" --samples "$samples" \
        --build-dir "${TMPDIR:-/tmp}/mq-peers" "$@"
}
# portable-end

case ${1:-} in
--help|-h) usage ;;
fetch) shift; fetch "$@" ;;
run) shift; run "$@" ;;
'') die "a subcommand: run or fetch (see --help)" ;;
*) die "unknown subcommand '$1' (run, fetch; see --help)" ;;
esac
