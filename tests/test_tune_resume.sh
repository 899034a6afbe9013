#!/bin/sh
# test_tune_resume.sh - tune --resume finishes the run it resumes: it takes
# the chip as the interrupted run measured it (DIR/tune-chip.csv, not a new
# probe of the host), reuses every row already stored, and - given the same
# measurements - ends with the same table as a run that was never stopped.
# usage: test_tune_resume.sh BUILD_DIR
B=${1:-build}
passed=0; failed=0
check() {
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
has() { case "$1" in *"$2"*) return 0 ;; *) return 1 ;; esac; }
rows() { n=$(grep -c '^"[123]",' "$1" 2>/dev/null); echo "${n:-0}"; }
table_rows() { grep -v '^#' "$1"; }   # the table without its dated comment
args="--chip host --suite smoke --m 1,3 --formats fp4 --evals 10 --budget 0.005 --threads 2"
d=$(mktemp -d)

# an uninterrupted run
out=$("$B/tune" $args --out-dir "$d/u" 2>&1); rc=$?
check "an uninterrupted tune --chip host exits 0 (rc $rc)" [ "$rc" -eq 0 ]
check "it keeps the chip it measured in tune-chip.csv" test -s "$d/u/tune-chip.csv"
total=$(rows "$d/u/tune-results.csv")
check "and stored its rows ($total)" [ "$total" -ge 10 ]

# resuming a finished run times nothing and ends with the same table
mkdir "$d/f"
cp "$d/u/tune-results.csv" "$d/u/tune-chip.csv" "$d/f/"
out=$("$B/tune" $args --out-dir "$d/f" --resume 2>&1); rc=$?
check "resuming a finished run exits 0 (rc $rc)" [ "$rc" -eq 0 ]
check "and times no candidate: '$(printf '%s\n' "$out" | grep '^timed')'" has "$out" "timed 0 candidates ($total reused)"
check "the same table as the uninterrupted run" \
    [ "$(table_rows "$d/u/table.csv")" = "$(table_rows "$d/f/table.csv")" ]
check "the resumed run says it took the interrupted run's chip" has "$out" "the chip as the interrupted run measured it"

# the chip comes from the snapshot, not a new probe: plant a figure in it
mkdir "$d/c"
cp "$d/u/tune-results.csv" "$d/c/"
sed 's/^"host","mem_bw_gbs","[^"]*",/"host","mem_bw_gbs","12.345",/' "$d/u/tune-chip.csv" > "$d/c/tune-chip.csv"
"$B/tune" $args --out-dir "$d/c" --resume >/dev/null 2>&1
check "the resumed run's chip is the snapshot's (mem_bw_gbs 12.345 in its chip.csv)" \
    grep -q '^"host","mem_bw_gbs","12.345",' "$d/c/chip.csv"

# a run stopped partway: every stored row is reused, the rest are timed
for k in 1 4 $((total - 2)); do
    mkdir "$d/p$k"
    head -n $((k + 2)) "$d/u/tune-results.csv" > "$d/p$k/tune-results.csv"
    cp "$d/u/tune-chip.csv" "$d/p$k/"
    out=$("$B/tune" $args --out-dir "$d/p$k" --resume 2>&1); rc=$?
    check "stopped after $k rows: the resumed run exits 0 (rc $rc)" [ "$rc" -eq 0 ]
    check "stopped after $k rows: all $k are reused: '$(printf '%s\n' "$out" | grep '^timed')'" \
        has "$out" "($k reused)"
done

# killed for real, then resumed
"$B/tune" $args --out-dir "$d/k" >/dev/null 2>&1 &
pid=$!
i=0
while [ "$(rows "$d/k/tune-results.csv")" -lt 3 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
present=$(rows "$d/k/tune-results.csv")
out=$("$B/tune" $args --out-dir "$d/k" --resume 2>&1); rc=$?
check "killed with $present rows stored, the resumed run exits 0 (rc $rc)" [ "$rc" -eq 0 ]
check "and reuses all $present: '$(printf '%s\n' "$out" | grep '^timed')'" has "$out" "($present reused)"
left=$(ls "$d/k/tables" | grep -v current)
check "and the killed run's unpublished generation is gone (left: $left)" [ "$(printf '%s\n' "$left" | grep -c .)" -eq 1 ]
rm -rf "$d"
echo "tune_resume: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
