#!/bin/sh
# tune-speed-ab.sh - is the host tune slower under one tune binary than under
# another? Both tune the same suite on this machine in alternating rounds
# (old, new, old, new, ...), so each is read against the run-to-run noise of
# the same session: back-to-back runs of one binary here differ by up to 25%.
# Reports per binary each round's wall time (the whole process) and timings
# (what tune counts) with the medians, and the new/old ratio of the
# medians; and the picks: per table row (format, N, K, M range) the median
# over rounds of its measured time, new over old as a geometric mean over the
# rows both tables have (each table's times are from its own run).
# usage: scripts/tune-speed-ab.sh DIR OLD_TUNE NEW_TUNE [ROUNDS] [TUNE ARGS...]
#   DIR       where each run's directory and summary.txt go
#   ROUNDS    alternating pairs (default 4)
#   TUNE ARGS what to tune (default: --suite llama3-8b --m 1,16); --chip host,
#             --quiet and --out-dir are added
set -eu
. "$(dirname "$0")/portable.sh"
[ $# -ge 3 ] || { echo "usage: scripts/tune-speed-ab.sh DIR OLD_TUNE NEW_TUNE [ROUNDS] [TUNE ARGS...]" >&2; exit 2; }
D=$1 old=$2 new=$3
shift 3
rounds=4
if [ $# -gt 0 ]; then rounds=$1; shift; fi
[ $# -gt 0 ] || set -- --suite llama3-8b --m 1,16
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "tune-speed-ab: $b: not an executable" >&2; exit 2; }
done
case $rounds in '' | *[!0-9]*) echo "tune-speed-ab: bad ROUNDS '$rounds'" >&2; exit 2 ;; esac
mkdir -p "$D"
# awk: the median of a[1..n] (sorts a)
MED='function med(a, n,   i, j, x) { for (i = 2; i <= n; i++) { x = a[i]
    for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }'
: > "$D/times.txt"
r=1
while [ "$r" -le "$rounds" ]; do
    for side in old new; do
        bin=$old; [ "$side" = new ] && bin=$new
        out="$D/$side-$r"
        rm -rf "$out"
        t0=$(now_ns)
        "$bin" --chip host --quiet --out-dir "$out" "$@" > "$out.log" 2>&1 ||
            { echo "tune-speed-ab: $side round $r failed ($out.log)" >&2; exit 1; }
        t1=$(now_ns)
        # the process's wall time, and the timings tune counts ("timed N candidates ...")
        n=$(grep -E '^timed [0-9]+ candidates' "$out.log" | tail -1 | awk '{print $2}')
        s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
        echo "$side $r $n $s" | tee -a "$D/times.txt"
    done
    r=$((r + 1))
done
# the rows of each table: key, measured time (expected_s)
for side in old new; do
    for t in "$D/$side"-*/table.csv; do
        grep -v '^#' "$t" | tr -d '"' | awk -F, -v side="$side" \
            'NR > 1 && $3 > 0 { print side, $1 "/" $3 "x" $4 "/M" $5 "-" $6, $13 }'
    done
done > "$D/picks.txt"
{
    echo "tune-speed-ab: $rounds alternating rounds on $(hostname), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "old: $old; new: $new; tune args: $*"
    awk "$MED"'
         { k = $1; n[k]++; s[k, n[k]] = $4; c[k, n[k]] = $3; list[k] = list[k] " " $4 }
         END { for (k in n) { for (i = 1; i <= n[k]; i++) { a[i] = s[k, i]; b[i] = c[k, i] }
                 ms[k] = med(a, n[k]); mc[k] = med(b, n[k])
                 printf "%s: wall s%s; median %.1f s, median %d timings\n", k, list[k], ms[k], mc[k] }
               printf "new / old wall time (medians): %.3fx\n", ms["new"] / ms["old"] }' "$D/times.txt"
    awk "$MED"'
         { n[$1, $2]++; t[$1, $2, n[$1, $2]] = $3; keys[$2] = 1 }
         END { for (k in keys) if (n["old", k] && n["new", k]) {
                 for (i = 1; i <= n["old", k]; i++) a[i] = t["old", k, i]; o = med(a, n["old", k])
                 for (i = 1; i <= n["new", k]; i++) a[i] = t["new", k, i]; w = med(a, n["new", k])
                 if (o > 0 && w > 0) { ls += log(w / o); m++ } }
               if (m) printf "picks: new / old measured time %.3fx (geometric mean over %d table rows)\n", exp(ls / m), m }' "$D/picks.txt"
} | tee "$D/summary.txt"
