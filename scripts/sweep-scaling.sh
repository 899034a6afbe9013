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
# brew install gsl libcsv parallel). Every setting, and SWEEP_ARGS through
# bench --explain, is checked before anything is built or made.
#
# usage: scripts/sweep-scaling.sh [NAME=VALUE...]   (each setting an argument
#                                  or in the environment)
#   OUT=/tmp/sweep-scaling  where the results go (letters, digits and
#   . _ / + - , = : @ only), the sweeps in OUT/sweeps/TAG
#   SHARDS="16 8 4 2 1"  SWEEP_ARGS="..."  UNSHARDED=0|1  TAG=name (the sweeps'
#   subdirectory, default scaling)  LIMIT_S=540 (each sweep's time limit)
#   OVERSUB=K: K*N shards on N workers (parallel hands the next shard to the
#   first free worker); busy_balance (wall / the workers' mean busy time) is
#   then the measure of balance. At most 4096 shards (the tools' limit)
#   BUILD=build  the tools' directory (made with make BUILD=...)
# Output: OUT/scaling.csv (one row per run), OUT/summary.txt, OUT/sweeps/TAG
# (merged rows, reports, joblogs, tables) and OUT/sweep-scaling.tar.gz (those
# and the logs).
# Exit status: 0 done, 1 the build failed, 2 a bad setting (one line, nothing made).
set -u
cd "$(dirname "$0")/.."
. scripts/portable.sh
die() { echo "sweep-scaling: $*" >&2; exit 2; }
for a in "$@"; do
    case "$a" in
    OUT=* | SHARDS=* | SWEEP_ARGS=* | UNSHARDED=* | TAG=* | LIMIT_S=* | OVERSUB=* | BUILD=*)
        # shellcheck disable=SC2034 # v is read by the eval
        v=${a#*=}; eval "${a%%=*}=\$v" ;;
    --help | -h) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *=*) die "unknown setting '$a' (OUT, SHARDS, SWEEP_ARGS, UNSHARDED, TAG, LIMIT_S, OVERSUB, BUILD; see --help)" ;;
    *) die "unknown argument '$a' (settings are NAME=VALUE; see --help)" ;;
    esac
done
OUT=${OUT:-/tmp/sweep-scaling}
SHARDS=${SHARDS:-16 8 4 2 1}
SWEEP_ARGS=${SWEEP_ARGS:---backend cpu --suite llama3-8b --m 1 --formats fp4,u4,trellis3 --space full --budget 0.05 --no-probes}
UNSHARDED=${UNSHARDED:-0}
TAG=${TAG:-scaling}
LIMIT_S=${LIMIT_S:-540}
OVERSUB=${OVERSUB:-1}
BUILD=${BUILD:-build}

# ---- every setting checked before anything is built or made -----------------
num() { # num NAME VALUE LO HI: VALUE an integer in LO..HI, else die
    case $2 in '' | *[!0-9]* | 0*) die "bad $1 '$2' ($3 to $4)" ;; esac
    [ ${#2} -le 9 ] && [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] || die "bad $1 '$2' ($3 to $4)"
}
dir_ok() { # dir_ok NAME DIR: every part of DIR that exists is a directory
    p=$2
    while [ ! -e "$p" ] && [ ! -L "$p" ]; do p=$(dirname "$p"); done
    [ -d "$p" ] || die "$1 '$2': '$p' is in the way (not a directory)"
}
num OVERSUB "$OVERSUB" 1 4096
num LIMIT_S "$LIMIT_S" 1 604800
maxn=0
for w in $SHARDS; do
    num SHARDS "$w" 1 4096
    [ $((w * OVERSUB)) -le 4096 ] ||
        die "SHARDS '$w' times OVERSUB '$OVERSUB' is $((w * OVERSUB)) shards (at most 4096, as the tools take)"
    [ $((w * OVERSUB)) -gt "$maxn" ] && maxn=$((w * OVERSUB))
done
[ "$maxn" -gt 0 ] || die "bad SHARDS '$SHARDS' (shard counts, e.g. \"16 8 4 2 1\")"
case $UNSHARDED in 0 | 1) ;; *) die "bad UNSHARDED '$UNSHARDED' (0 or 1)" ;; esac
case $TAG in '' | .* | *[!A-Za-z0-9._-]*) die "bad TAG '$TAG' (a name: letters, digits, '.', '_', '-', not starting with '.')" ;; esac
case $BUILD in '' | *[!A-Za-z0-9./_-]*) die "bad BUILD '$BUILD' (a path without spaces or shell characters)" ;; esac
dir_ok OUT "$OUT"
case $OUT in '' | *[!A-Za-z0-9._/+,=:@-]*) die "bad OUT '$OUT' (letters, digits and . _ / + - , = : @ only)" ;; esac
# the sweeps go under OUT, named relative to the repository as
# sweep-parallel.sh takes its --out (an absolute OUT through ../ to /)
case $OUT in
/*) dir=$(pwd -P | sed 's,/[^/]*,../,g')${OUT#/}/sweeps/$TAG ;;
*) dir=$OUT/sweeps/$TAG ;;
esac
dir_ok TAG "$dir"
for a in $SWEEP_ARGS; do
    case "$a" in
    --shard | --shard=* | --out | --threads | --resume | --explain | --help | -h)
        die "bad SWEEP_ARGS: '$a' is the sweep's to set" ;;
    esac
done
args_ok() { # SWEEP_ARGS as bench takes them, shard 1 of the most shards (it writes nothing)
    # shellcheck disable=SC2086 # SWEEP_ARGS is a list of arguments
    msg=$("$BUILD/bench" $SWEEP_ARGS --threads 1 --shard "1/$maxn" --explain 2>&1 >/dev/null) ||
        die "$(printf '%s\n' "$msg" | grep . | tail -n 1)"
}
[ -x "$BUILD/bench" ] && args_ok # before the build when the tools are there

if ! is_macos && { ! pkg-config --exists gsl 2>/dev/null || ! command -v parallel >/dev/null 2>&1; }; then
    # portable-begin: Debian packages unpacked on a Linux machine
    mkdir -p /tmp/deps
    for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/deps; done
    [ -f .debs/deps.tar.xz ] && tar xJf .debs/deps.tar.xz -C /tmp/deps
    L=/tmp/deps/usr/lib/x86_64-linux-gnu
    export CPPFLAGS="-I/tmp/deps/usr/include" LDFLAGS="-L$L"
    export LD_LIBRARY_PATH="$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PATH="$PATH:/tmp/deps/usr/bin"
    # portable-end
fi
log=$(mktemp)
# the build's log: moved into OUT once that is made; on a failed build kept
# (the message names it); removed on every other way out before the move
keep_log=0
trap '[ "$keep_log" = 1 ] || rm -f "$log"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
if ! make -j"$(ncpu)" BUILD="$BUILD" "$BUILD/bench" "$BUILD/merge" "$BUILD/tune" > "$log" 2>&1; then
    echo "sweep-scaling: the build failed (make BUILD=$BUILD): $(grep -m 1 -i 'error' "$log" || tail -n 1 "$log") (the log: $log)" >&2
    keep_log=1
    exit 1
fi
args_ok
mkdir -p "$OUT" "$dir" || die "$OUT or $dir: cannot create the directory"
mv "$log" "$OUT/build.log"
trap - EXIT INT TERM HUP
S=$OUT/summary.txt
say() { echo "$*" | tee -a "$S"; }
say "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(cpu_name), $(ncpu) cores, $(mem_gib) GiB; $(parallel --version 2>/dev/null | head -1)"
[ -f "$OUT/scaling.csv" ] || echo "run,shards,wall_s,speedup_vs_1,shard_max_s,shard_mean_s,shard_min_s,imbalance,est_imbalance,rows,merge_exit,same_picks_as_1,picks,workers,busy_balance" > "$OUT/scaling.csv"
# the picks of a table: format N K m_lo m_hi -> the chosen candidate
picks() { grep -v '^#' "$1" | tr -d '"' | awk -F, 'NR > 1 && $3 > 0 { print $1, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }' | sort; }
for w in $SHARDS; do
    n=$((w * OVERSUB))
    run=$dir/shards-$n
    rm -rf "$run"
    est=$("$BUILD/bench" $SWEEP_ARGS --threads 1 --shard "1/$n" --explain | sed -n 's/^estimated imbalance.*: //p')
    say "== $n shards on $w workers ($SWEEP_ARGS), estimated imbalance $est"
    run_timeout "$LIMIT_S" scripts/sweep-parallel.sh --build "$BUILD" --jobs "$w" --shards "$n" --threads 1 --out "$run" -- $SWEEP_ARGS > "$OUT/shards-$n.log" 2>&1
    mrc=$?
    cat "$OUT/shards-$n.log" | tee -a "$S"
    wall=$(sed -n 's/.*the shards ran in \([0-9.]*\) s.*/\1/p' "$OUT/shards-$n.log")
    stats=$(tail -n +2 "$run/joblog.txt" | awk '{ t = $4 + 0; s += t; if (t > mx) mx = t; if (mn == "" || t < mn) mn = t; k++ }
        END { if (k) printf "%.1f,%.1f,%.1f,%.3f", mx, s / k, mn, mx / (s / k) }')
    busy=$(tail -n +2 "$run/joblog.txt" | awk -v w="$w" -v wall="$wall" '{ s += $4 } END { if (s > 0 && wall != "") printf "%.3f", wall / (s / w) }')
    rows=$(grep -c '^"[123]",' "$run/merged.csv" 2>/dev/null)
    "$BUILD/tune" --chip host --threads 1 --from-results "$run/merged.csv" --out-dir "$run/table" > "$OUT/table-$n.log" 2>&1
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
    run_timeout "$LIMIT_S" "$BUILD/bench" $SWEEP_ARGS --threads 1 --quiet --out "$run/all.csv" > "$OUT/unsharded.log" 2>&1
    rc=$?
    t1=$(now_ns)
    wall=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.1f", ns / 1e9 }')
    rows=$(grep -c '^"[123]",' "$run/all.csv")
    "$BUILD/tune" --chip host --threads 1 --from-results "$run/all.csv" --out-dir "$run/table" > "$OUT/table-unsharded.log" 2>&1
    picks "$run/table/table.csv" > "$run/picks.txt"
    same="" np=$(nlines < "$run/picks.txt")
    [ -f "$dir/shards-1/picks.txt" ] && same=$(comm -12 "$run/picks.txt" "$dir/shards-1/picks.txt" | nlines)
    echo "$TAG-unsharded,0,$wall,,,,,,,$rows,$rc,$same,$np,1," >> "$OUT/scaling.csv"
    say "unsharded: wall $wall s (exit $rc), $rows rows, picks same as 1 shard: ${same:-?} of $np"
fi
cp "$OUT/scaling.csv" "$dir/" 2>/dev/null
(cd "$OUT" && tar czf sweep-scaling.tar.gz "sweeps/$TAG" ./*.log 2>/dev/null)
say "== done $(date -u +%Y-%m-%dT%H:%M:%SZ)"
