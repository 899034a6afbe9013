#!/bin/sh
# test_stale.sh - a model or rows measured on another kernel build than this
# one's: tune says so on one line naming the file and both builds and goes
# on (a warning), or with --strict stops with exit 2 and creates nothing;
# today's build's model passes without a word.
# usage: test_stale.sh BUILD_DIR
B=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
passed=0; failed=0
check() {
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
has() { case "$1" in *"$2"*) return 0 ;; *) return 1 ;; esac; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
now=$(sed -n 's/^# kernels=//p' "$root/results/m4max/model.csv")
check "results/m4max/model.csv records a kernel build (got '$now')" has "$now" "k"
sed "s/^# kernels=.*/# kernels=kdeadbeef-1/" "$root/results/m4max/model.csv" > "$d/stale.csv"

# today's model: no warning
err=$("$B/tune" --chip m4max --model "$root/results/m4max/model.csv" --explain --out-dir "$d/a" 2>&1 >/dev/null); rc=$?
check "today's model: exit 0 (rc $rc)" [ "$rc" -eq 0 ]
check "today's model: no warning ('$err')" sh -c "! printf '%s' \"\$1\" | grep -q 'kernel build'" - "$err"

# another build's model: a warning naming the file and both builds
err=$("$B/tune" --chip m4max --model "$d/stale.csv" --explain --out-dir "$d/b" 2>&1 >/dev/null); rc=$?
check "another build's model: exit 0, a warning (rc $rc)" [ "$rc" -eq 0 ]
check "the warning names the file and both builds: '$err'" \
    has "$err" "tune: warning: $d/stale.csv was measured on kernel build kdeadbeef-1, not this build's $now"

# --strict: exit 2, one line, nothing created
err=$("$B/tune" --chip m4max --model "$d/stale.csv" --strict --out-dir "$d/c" 2>&1 >/dev/null); rc=$?
check "--strict: exit 2 (rc $rc)" [ "$rc" -eq 2 ]
check "--strict: one line ($(printf '%s\n' "$err" | wc -l))" [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
check "--strict: the error names the file: '$err'" has "$err" "tune: $d/stale.csv was measured on kernel build kdeadbeef-1"
check "--strict: nothing created" [ ! -e "$d/c" ]

# rows that do not record their build (schema 1): --from-results says so
err=$("$B/tune" --chip host --from-results "$root/tests/data/bench-llama3-8b-host.csv" --strict --out-dir "$d/e" 2>&1 >/dev/null); rc=$?
check "--from-results of rows without a kernel build, --strict: exit 2 (rc $rc)" [ "$rc" -eq 2 ]
check "and says the rows do not record one: '$err'" has "$err" "rows was measured on a kernel build it does not record"
check "and creates nothing" [ ! -e "$d/e" ]

# model fit records the build its rows measured (the published h100 tune's rows)
set -- "$root"/results/h100/tune-k*/tune-results.csv.gz # one of them: all record a build
gzip -dc "$1" > "$d/h100-rows.csv"
rows_build=$(awk -F, 'NR == 3 { gsub(/"/, "", $NF); print $NF }' "$d/h100-rows.csv")
"$B/model" fit --chip h100 --holdout none --out "$d/fit.csv" "$d/h100-rows.csv" > /dev/null 2>&1; rc=$?
check "model fit on the h100 tune's rows: exit 0 (rc $rc)" [ "$rc" -eq 0 ]
check "the fitted model records the rows' build $rows_build" \
    grep -qx "# kernels=$rows_build" "$d/fit.csv"

echo "stale: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
