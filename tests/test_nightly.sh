#!/bin/sh
# test_nightly.sh - the nightly entry point end to end on a tiny suite: the
# first run becomes the baseline, the second is compared with it (report and
# history written, plots redrawn), --accept makes the median of the runs the baseline,
# and a planted regression fails the night after the confirmation pass.
# usage: test_nightly.sh BUILD_DIR   (the entry point builds with make: BUILD must be build)
passed=0; failed=0
check() {
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
dir=$(mktemp -d)
export NIGHTLY_DIR="$dir"
export NIGHTLY_CHIP=m4max
export NIGHTLY_BENCH_ARGS="--suite smoke --m 1 --formats u4 --budget 0.02 --warm"
out=$(scripts/nightly.sh 2>&1); rc=$?
check "the first nightly run exits 0 (got $rc: $out)" [ "$rc" -eq 0 ]
check "and becomes the baseline" test -s "$dir/baseline.csv"
out=$(scripts/nightly.sh 2>&1); rc=$?
check "the second run compares: exit 0 or 1, not $rc" [ "$rc" -eq 0 -o "$rc" -eq 1 ]
day=$(date -u +%Y-%m-%d)
second=$(ls "$dir" | grep -E "^$day\.r[0-9]{6}\.csv\$")
check "the second run of the day is $day.rHHMMSS.csv (got '$second')" [ -n "$second" ]
check "its Markdown report is written" grep -q "# Regression report" "$dir/${second%.csv}-report.md"
check "history.csv has its header and one row" [ "$(wc -l < "$dir/history.csv")" -eq 2 ]
for f in history.png history.svg roofline-m4max.png roofline-m4max.svg; do
    check "the plot $f is redrawn" test -s "$dir/plots/$f"
done
out=$(scripts/nightly.sh --accept 2>&1); rc=$?
check "--accept exits 0 ($out)" [ "$rc" -eq 0 ]
rows() { grep -c '^"1"' "$1"; }
check "the baseline holds every benchmark of the runs ($(rows "$dir/baseline.csv") rows)" \
    [ "$(rows "$dir/baseline.csv")" -eq "$(rows "$dir/$second")" ]
case "$out" in *"median of $day.csv $second"*) ok=1 ;; *) ok=0 ;; esac
check "and is the median of the two runs ($out)" [ "$ok" -eq 1 ]
# a planted regression: the baseline's times divided by 100, so the next run is
# far slower (more than these tiny shapes' noise); it is confirmed; the night fails
awk 'BEGIN { FS = OFS = "\",\"" }
     /^#/ || /^"schema"/ { print; next }
     { for (i = 21; i <= 26; i++) $i = $i * 0.01
       s = substr($30, 1, length($30) - 1); n = split(s, v, ";"); s = ""
       for (j = 1; j <= n; j++) s = s (j > 1 ? ";" : "") sprintf("%.6e", v[j] * 0.01)
       $30 = s "\""; print }' "$dir/baseline.csv" > "$dir/fast.csv" && mv "$dir/fast.csv" "$dir/baseline.csv"
sleep 1
out=$(scripts/nightly.sh 2>&1); rc=$?
check "a run 100x slower than the baseline fails the night: exit 1 (got $rc: $out)" [ "$rc" -eq 1 ]
case "$out" in *"confirmation pass: "*" regressions repeated"*) ok=1 ;; *) ok=0 ;; esac
check "the confirmation pass re-measured the regressions and says so ($out)" [ "$ok" -eq 1 ]
third=$(ls "$dir/confirm" | grep -E '\.csv$' | tail -n 1)
check "the confirmation run is stored apart from the nightly runs (confirm/$third)" [ -n "$third" ]
check "the confirmation report lists the repeated regressions" \
    grep -q "^| regressed" "$dir/${third%.csv}-confirm.md"
rm -rf "$dir"
echo "nightly: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
