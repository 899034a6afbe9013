#!/bin/sh
# sweep-scaling.sh - how a sharded sweep scales on one many-core machine:
# the same bench sweep (SWEEP_ARGS, CPU backend, one worker thread per
# shard) through scripts/sweep-parallel.sh with N shards on N local
# workers for each N of SHARDS; per N the wall time of the shards, each
# shard's own time (parallel's joblog) and the imbalance (slowest shard /
# mean), the estimated imbalance (bench --explain --shard), merge's verdict,
# and the table tune --from-results builds from the merged rows. With
# UNSHARDED=1, the same sweep as one plain bench run too. Nothing is
# installed: libgsl/libcsv and GNU parallel come from .debs/deps.tar.xz
# (usr/ trees) or .debs/*.deb when a Linux machine lacks them (on macOS:
# brew install gsl libcsv parallel).
#
# usage: scripts/sweep-scaling.sh             (OUT: where the results go, default
#                                              /tmp/sweep-scaling)
#   SHARDS="16 8 4 2 1"  SWEEP_ARGS="..."  UNSHARDED=0|1  TAG=name (a results
#   subdirectory, default scaling)  LIMIT_S=540 (each sweep's time limit)
#   OVERSUB=K: K*N shards on N workers (parallel hands the next shard to the
#   first free worker); busy_balance (wall / the workers' mean busy time) is
#   then the measure of balance
# Output: OUT/scaling.csv (one row per run), OUT/summary.txt and
# OUT/sweep-scaling.tar.gz (merged rows, reports, joblogs, tables).
set -u
cd "$(dirname "$0")/.."
. scripts/portable.sh
OUT=${OUT:-/tmp/sweep-scaling}
SHARDS=${SHARDS:-16 8 4 2 1}
SWEEP_ARGS=${SWEEP_ARGS:---backend cpu --suite llama3-8b --m 1 --formats fp4,u4,trellis3 --space full --budget 0.05 --no-probes}
UNSHARDED=${UNSHARDED:-0}
TAG=${TAG:-scaling}
LIMIT_S=${LIMIT_S:-540}
OVERSUB=${OVERSUB:-1}
mkdir -p "$OUT" /tmp/deps
S=$OUT/summary.txt
say() { echo "$*" | tee -a "$S"; }
if ! is_macos && { ! pkg-config --exists gsl 2>/dev/null || ! command -v parallel >/dev/null 2>&1; }; then
    # portable-begin: Debian packages unpacked on a Linux machine
    for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/deps; done
    [ -f .debs/deps.tar.xz ] && tar xJf .debs/deps.tar.xz -C /tmp/deps
    L=/tmp/deps/usr/lib/x86_64-linux-gnu
    export CPPFLAGS="-I/tmp/deps/usr/include" LDFLAGS="-L$L"
    export LD_LIBRARY_PATH="$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PATH="$PATH:/tmp/deps/usr/bin"
    # portable-end
fi
say "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(cpu_name), $(ncpu) cores, $(mem_gib) GiB; $(parallel --version 2>/dev/null | head -1)"
if ! make -j"$(ncpu)" build/bench build/merge build/tune > "$OUT/build.log" 2>&1; then
    say "build failed:"; tail -20 "$OUT/build.log" | tee -a "$S"; exit 1
fi
dir=results/sweeps/$TAG
mkdir -p "$dir"
[ -f "$OUT/scaling.csv" ] || echo "run,shards,wall_s,speedup_vs_1,shard_max_s,shard_mean_s,shard_min_s,imbalance,est_imbalance,rows,merge_exit,same_picks_as_1,picks,workers,busy_balance" > "$OUT/scaling.csv"
# the picks of a table: format N K m_lo m_hi -> the chosen candidate
picks() { grep -v '^#' "$1" | tr -d '"' | awk -F, 'NR > 1 && $3 > 0 { print $1, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }' | sort; }
for w in $SHARDS; do
    n=$((w * OVERSUB))
    run=$dir/shards-$n
    rm -rf "$run"
    est=$(build/bench $SWEEP_ARGS --threads 1 --shard "1/$n" --explain | sed -n 's/^estimated imbalance.*: //p')
    say "== $n shards on $w workers ($SWEEP_ARGS), estimated imbalance $est"
    run_timeout "$LIMIT_S" scripts/sweep-parallel.sh --jobs "$w" --shards "$n" --threads 1 --out "$run" -- $SWEEP_ARGS > "$OUT/shards-$n.log" 2>&1
    mrc=$?
    cat "$OUT/shards-$n.log" | tee -a "$S"
    wall=$(sed -n 's/.*the shards ran in \([0-9.]*\) s.*/\1/p' "$OUT/shards-$n.log")
    stats=$(tail -n +2 "$run/joblog.txt" | awk '{ t = $4 + 0; s += t; if (t > mx) mx = t; if (mn == "" || t < mn) mn = t; k++ }
        END { if (k) printf "%.1f,%.1f,%.1f,%.3f", mx, s / k, mn, mx / (s / k) }')
    busy=$(tail -n +2 "$run/joblog.txt" | awk -v w="$w" -v wall="$wall" '{ s += $4 } END { if (s > 0 && wall != "") printf "%.3f", wall / (s / w) }')
    rows=$(grep -c '^"1",' "$run/merged.csv" 2>/dev/null)
    build/tune --chip host --threads 1 --from-results "$run/merged.csv" --out-dir "$run/table" > "$OUT/table-$n.log" 2>&1
    picks "$run/table/table.csv" > "$run/picks.txt" 2>/dev/null
    same="" np=$(nlines < "$run/picks.txt")
    if [ -f "$dir/shards-1/picks.txt" ]; then
        same=$(comm -12 "$run/picks.txt" "$dir/shards-1/picks.txt" | nlines)
    fi
    one=$(awk -F, -v t="$TAG" '$1 == t && $2 == 1 { print $3 }' "$OUT/scaling.csv" | tail -1)
    sp=""
    [ -n "$one" ] && [ -n "$wall" ] && sp=$(awk -v a="$one" -v b="$wall" 'BEGIN { printf "%.2f", a / b }')
    echo "$TAG,$n,$wall,$sp,$stats,$est,$rows,$mrc,$same,$np,$w,$busy" >> "$OUT/scaling.csv"
    say "$n shards on $w workers: wall $wall s, speed-up vs 1 shard ${sp:-?}, shards max/mean/min/imbalance $stats, workers' busy balance $busy, $rows rows, merge exit $mrc, picks same as 1 shard: ${same:-?} of $np"
done
if [ "$UNSHARDED" = 1 ]; then
    run=$dir/unsharded
    rm -rf "$run" && mkdir -p "$run"
    say "== unsharded: bench $SWEEP_ARGS --threads 1"
    t0=$(now_ns)
    run_timeout "$LIMIT_S" build/bench $SWEEP_ARGS --threads 1 --quiet --out "$run/all.csv" > "$OUT/unsharded.log" 2>&1
    rc=$?
    t1=$(now_ns)
    wall=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.1f", ns / 1e9 }')
    rows=$(grep -c '^"1",' "$run/all.csv")
    build/tune --chip host --threads 1 --from-results "$run/all.csv" --out-dir "$run/table" > "$OUT/table-unsharded.log" 2>&1
    picks "$run/table/table.csv" > "$run/picks.txt"
    same="" np=$(nlines < "$run/picks.txt")
    [ -f "$dir/shards-1/picks.txt" ] && same=$(comm -12 "$run/picks.txt" "$dir/shards-1/picks.txt" | nlines)
    echo "$TAG-unsharded,0,$wall,,,,,,,$rows,$rc,$same,$np,1," >> "$OUT/scaling.csv"
    say "unsharded: wall $wall s (exit $rc), $rows rows, picks same as 1 shard: ${same:-?} of $np"
fi
cp "$OUT/scaling.csv" "$dir/" 2>/dev/null
tar czf "$OUT/sweep-scaling.tar.gz" "$dir" "$OUT"/*.log 2>/dev/null
say "== done $(date -u +%Y-%m-%dT%H:%M:%SZ)"
