#!/bin/sh
# test_nightly.sh - the nightly entry point end to end on a tiny suite.
# A/B nights: the first accepts this commit as A and becomes the stored
# baseline; the A/B report, ab-history.csv, the stored report and the plots
# are written; a planted slowdown (a PLANT build, B only) fails the night and
# the report names the kernel; --accept records A. The stored-history mode
# (--stored) as before: baseline, comparison, a planted regression confirmed.
# Bisect over a synthetic history of 8 commits, one of which plants a
# slowdown (.nightly-plant), names that commit. Bad input (arguments,
# settings, revisions, the directory it runs in) is refused before anything
# is made or built: exit 2, one line on stderr, nothing on stdout, nothing
# created (the rest of the refusals: tests/badinput/scripts.cases).
# usage: test_nightly.sh BUILD_DIR   (the entry point builds with make: BUILD must be build)
. scripts/portable.sh
passed=0; failed=0
check() {
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
# shellcheck disable=SC2086 # the checksum command is meant to split
snap() { find . \( -type f -o -type l \) -print | sort | xargs $MQ_SHA256 2>/dev/null; find . | sort; }
# refused DESC NEEDLE CMD...: CMD exits 2 with one line on stderr naming
# NEEDLE, nothing on stdout, every file under the current directory as it was
refused() {
    desc=$1 needle=$2; shift 2
    before=$(snap)
    "$@" > "$rtmp/out" 2> "$rtmp/err"; rc=$?
    err=$(cat "$rtmp/err"); so=$(cat "$rtmp/out"); lines=$(grep -c . "$rtmp/err")
    case $err in *"$needle"*) named=1 ;; *) named=0 ;; esac
    check "$desc: exit 2, one line on stderr naming '$needle', nothing on stdout (got $rc, $lines lines: $err; stdout: $so)" \
        [ "$rc-$lines-$named-${#so}" = 2-1-1-0 ]
    check "$desc: nothing created or changed" [ "$before" = "$(snap)" ]
}
root=$(pwd)
rtmp=$(mktemp -d)
dir=$(mktemp -d)
export NIGHTLY_DIR="$dir"
export NIGHTLY_CHIP=m4max
# one worker: on a 2-vCPU host the two-worker pool gives some processes 10x
# slower medians on these microsecond kernels, which no few-round test rides out
export NIGHTLY_BENCH_ARGS="--backend cpu --threads 1 --suite smoke --m 1 --formats u4 --warm"
export NIGHTLY_ROUNDS=4
export NIGHTLY_A_BENCH="$root/build/bench" # A = this build (no worktree build in the test)
day=$(date -u +%Y-%m-%d)

# ---- refusals in a repository (a synthetic one: nothing else writes there)
rep=$rtmp/rep
sh scripts/nightly-history.sh "$rep" 2 1 marlin_gemv_decode:2.0 > /dev/null
cd "$rep" || exit 1
export NIGHTLY_DIR="$rep/nightly"
refused "an unknown argument runs no night" "unknown argument '--bogus'" sh scripts/nightly.sh --bogus
refused "a misspelt --accept accepts nothing" "unknown argument '--acept'" sh scripts/nightly.sh --acept
refused "--accept with more arguments" "unexpected argument 'now' after --accept" sh scripts/nightly.sh --accept now
refused "an unknown A revision" "NIGHTLY_A_REV 'no-such-rev' is not a commit" \
    env NIGHTLY_A_REV=no-such-rev NIGHTLY_A_BENCH= sh scripts/nightly.sh
refused "an A revision that is no commit (a file's blob)" "NIGHTLY_A_REV 'HEAD:step.txt' is not a commit" \
    env NIGHTLY_A_REV=HEAD:step.txt sh scripts/nightly.sh
mkdir -p "$rep/badrev" && echo junk > "$rep/badrev/accepted-rev"
refused "a stored accepted revision that is no commit" "badrev/accepted-rev: 'junk' is not a commit" \
    env NIGHTLY_DIR="$rep/badrev" sh scripts/nightly.sh
refused "an unknown GOOD" "GOOD 'no-such-rev' is not a commit" sh scripts/nightly.sh bisect no-such-rev HEAD
refused "an unknown BAD" "BAD 'HEAD~9' is not a commit" sh scripts/nightly.sh bisect HEAD~2 HEAD~9
refused "GOOD after BAD" "is not an ancestor of BAD" sh scripts/nightly.sh bisect HEAD HEAD~2
refused "GOOD and BAD the same commit" "GOOD and BAD are the same commit" sh scripts/nightly.sh bisect HEAD~1 HEAD^
refused "more bisect rounds than compare --ab reads" "bad NIGHTLY_BISECT_MAX_ROUNDS '65'" \
    env NIGHTLY_BISECT_MAX_ROUNDS=65 sh scripts/nightly.sh bisect HEAD~2 HEAD
refused "a run from a subdirectory of the repository" "run it from the repository's top directory" \
    sh -c 'cd scripts && exec sh ./nightly.sh bisect HEAD~2 HEAD'
refused "--stored from a subdirectory" "run it from the repository's top directory" \
    sh -c 'cd scripts && exec sh ./nightly.sh --stored'
git rm -q Makefile && git commit -qm "no Makefile"
refused "a repository without the project's Makefile" "no Makefile in '$(pwd -P)'" sh scripts/nightly.sh
git reset -q --hard HEAD~1
echo broken > .nightly-plant
refused "a tree whose .nightly-plant is no VARIANT:FRACTION" ".nightly-plant: bad 'broken'" \
    env NIGHTLY_A_BENCH= sh scripts/nightly.sh
rm -f .nightly-plant
# the bench settings, checked by B's bench once it is built (bench --explain)
# and before the results directory is made or another revision built: here
# a stand-in make and this build's bench copied in (the repository has no sources)
mkdir -p "$rtmp/bin" && printf '#!/bin/sh\nexit 0\n' > "$rtmp/bin/make" && chmod +x "$rtmp/bin/make"
cp "$root/build/bench" build/bench
path0=$PATH
PATH="$rtmp/bin:$PATH"
refused "an unknown NIGHTLY_CHIP" "nightly: bench: unknown chip 'm9'" \
    env NIGHTLY_CHIP=m9 sh scripts/nightly.sh
refused "bad NIGHTLY_BENCH_ARGS" "nightly: bench: unknown format 'fp5'" \
    sh -c 'NIGHTLY_BENCH_ARGS="--suite smoke --formats fp5" exec sh scripts/nightly.sh'
refused "bad NIGHTLY_AB_ARGS" "nightly: bench: bad --budget '-1'" \
    sh -c 'NIGHTLY_AB_ARGS="--budget -1" exec sh scripts/nightly.sh'
refused "an unknown NIGHTLY_CHIP, --stored" "nightly: bench: unknown chip 'm9'" \
    sh -c 'NIGHTLY_CHIP=m9 exec sh scripts/nightly.sh --stored'
PATH=$path0
check "and no results directory was made ($NIGHTLY_DIR)" [ ! -e "$NIGHTLY_DIR" ]
rm -f build/bench
mkdir "$rtmp/empty" && cd "$rtmp/empty" && git init -q && cp "$root/Makefile" . || exit 1
refused "a repository without a commit" "the repository has no commit" sh "$rep/scripts/nightly.sh"
cd "$root" || exit 1
export NIGHTLY_DIR="$dir"

# ---- A/B nights
out=$(scripts/nightly.sh 2>&1); rc=$?
check "the first A/B night exits 0 (got $rc: $out)" [ "$rc" -eq 0 ]
check "it accepts this commit as A" [ "$(cat "$dir/accepted-rev" 2>/dev/null)" = "$(git rev-parse HEAD)" ]
check "4 rounds of A and of B are stored" [ "$(ls "$dir/ab/$day" | grep -c '^[ab]\.[1-4]\.csv$')" -eq 8 ]
check "the A/B report is written" grep -q "# A/B report" "$dir/$day-ab.md"
check "ab-history.csv has its header and one row" [ "$(wc -l < "$dir/ab-history.csv")" -eq 2 ]
check "B's median is the stored baseline" test -s "$dir/baseline.csv"
sleep 1
out=$(scripts/nightly.sh 2>&1); rc=$?
check "an A/A night (the same build on both sides) exits 0, got $rc: $out" [ "$rc" -eq 0 ]
second=$(ls "$dir" | grep -E "^$day\.r[0-9]{6}\.csv\$")
check "the second night of the day is $day.rHHMMSS.csv (got '$second')" [ -n "$second" ]
check "and has its stored-trend report" grep -q "# Regression report" "$dir/${second%.csv}-report.md"
for f in history.png history.svg roofline-m4max.png roofline-m4max.svg; do
    check "the plot $f is redrawn" test -s "$dir/plots/$f"
done
sleep 1
# a planted slowdown of one kernel, 3x, on B only (make PLANT=1: a test-only build)
out=$(NIGHTLY_PLANT=marlin_gemv_decode:2.0 scripts/nightly.sh 2>&1); rc=$?
check "a planted 3x slowdown of one kernel fails the night: exit 1 (got $rc: $out)" [ "$rc" -eq 1 ]
third=$(ls "$dir" | grep -E "^$day\.r[0-9]{6}-ab\.md\$" | tail -n 1)
check "the A/B report lists the planted kernel as regressed" \
    grep -q "^| regressed .*marlin_gemv_decode" "$dir/$third"
# the plant slows its kernel only: every other benchmark far from 3x (a verdict
# on them is a test at alpha 0.01, which a few of these microsecond kernels
# fail by chance now and then: the ratio, not the verdict, is what a leak shows)
check "and no other kernel: every other benchmark's B/A under 1.5" \
    sh -c "grep '^| [a-z]* | [0-9.]* |' '$dir/$third' | grep -v marlin_gemv_decode | awk -F' [|] ' '{ if (\$2 >= 1.5) bad = 1; n++ } END { exit bad || !n }'"
out=$(scripts/nightly.sh --accept 2>&1); rc=$?
check "--accept exits 0 ($out)" [ "$rc" -eq 0 ]
case "$out" in *"A is now $(git rev-parse HEAD)"*) ok=1 ;; *) ok=0 ;; esac
check "and records this commit as A ($out)" [ "$ok" -eq 1 ]
out=$(NIGHTLY_A_REV=no-such-rev NIGHTLY_A_BENCH= scripts/nightly.sh 2>&1); rc=$?
check "an unknown A revision: exit 2 (got $rc)" [ "$rc" -eq 2 ]
case "$out" in *"'no-such-rev' is not a commit"*) ok=1 ;; *) ok=0 ;; esac
check "naming it ($out)" [ "$ok" -eq 1 ]
rm -rf "$dir"

# ---- the stored-history mode
dir=$(mktemp -d)
export NIGHTLY_DIR="$dir"
out=$(scripts/nightly.sh --stored 2>&1); rc=$?
check "the first stored run exits 0 (got $rc: $out)" [ "$rc" -eq 0 ]
check "and becomes the baseline" test -s "$dir/baseline.csv"
# a planted regression: the baseline's times divided by 100, so the next run is
# far slower (more than these tiny shapes' noise); it is confirmed; the night fails
# (samples_s is field 30: the last, closing quote and all, in schema 1; idle_s follows in 2)
awk 'BEGIN { FS = OFS = "\",\"" }
     /^#/ || /^"schema"/ { print; next }
     { for (i = 21; i <= 26; i++) $i = $i * 0.01
       q = NF == 30; s = q ? substr($30, 1, length($30) - 1) : $30
       n = split(s, v, ";"); s = ""
       for (j = 1; j <= n; j++) s = s (j > 1 ? ";" : "") sprintf("%.6e", v[j] * 0.01)
       $30 = s (q ? "\"" : ""); print }' "$dir/baseline.csv" > "$dir/fast.csv" && mv "$dir/fast.csv" "$dir/baseline.csv"
sleep 1
out=$(scripts/nightly.sh --stored 2>&1); rc=$?
check "a run 100x slower than the baseline fails the stored night: exit 1 (got $rc: $out)" [ "$rc" -eq 1 ]
case "$out" in *"confirmation pass: "*" regressions repeated"*) ok=1 ;; *) ok=0 ;; esac
check "the confirmation pass re-measured the regressions and says so ($out)" [ "$ok" -eq 1 ]
conf=$(ls "$dir/confirm" | grep -E '\.csv$' | tail -n 1)
check "the confirmation report lists the repeated regressions" \
    grep -q "^| regressed" "$dir/${conf%.csv}-confirm.md"
rm -rf "$dir"

# ---- bisect over a synthetic history: 8 commits after GOOD, the 5th plants
# a 3x slowdown of one kernel (.nightly-plant, read by the PLANT build); the
# bisect first measures BAD against GOOD (what it hunts), and a step is good
# only when its interval rules out half of that (compare --rule-out)
make BUILD=build-plant PLANT=1 build-plant/bench > /dev/null || { echo "FAIL: the PLANT build" >&2; exit 1; }
hist=$(mktemp -d)
planted=$(sh scripts/nightly-history.sh "$hist" 8 5 marlin_gemv_decode:2.0)
export NIGHTLY_DIR="$hist/nightly" NIGHTLY_ROUNDS=3
export NIGHTLY_BISECT_BUILD="mkdir -p build && cp $root/build-plant/bench build/bench"
out=$(cd "$hist" && sh scripts/nightly.sh bisect HEAD~8 HEAD --bench marlin_gemv_decode 2>&1); rc=$?
check "bisect finds a first bad commit: exit 1 (got $rc: $out)" [ "$rc" -eq 1 ]
case "$out" in *"first bad commit $planted in "[1-4]" steps"*) ok=1 ;; *) ok=0 ;; esac
check "the planted commit, in at most 4 steps (log2 8 + 1) ($out)" [ "$ok" -eq 1 ]
rep=$(ls "$hist/nightly"/bisect-*.md 2>/dev/null | head -1)
check "the bisect report names it and gives each step's A/B" \
    sh -c "grep -q 'First bad commit: .$planted' '$rep' && grep -q '^| 1 |' '$rep'"
# calibration starts at NIGHTLY_ROUNDS (3) and adds rounds while inconclusive
crounds=$(sed -n 's/^BAD against GOOD: A\/B, \([0-9]*\) rounds.*/\1/p' "$rep")
check "and what it hunted: BAD against GOOD in 3 or more rounds (got '$crounds'), and the slowdown a good step rules out" \
    sh -c "[ '${crounds:-0}' -ge 3 ] && grep -q 'stays under +[0-9.]*%' '$rep'"
hunt=$(sed -n 's/.*stays under +\([0-9.]*\)%.*/\1/p' "$rep")
check "a 3x slowdown hunted: a good step must rule out +30% or more (got +$hunt%)" \
    awk -v h="$hunt" 'BEGIN { exit !(h >= 30) }'
# no slowdown between GOOD and BAD (the commits before the planted one): nothing
# to bisect. This is an A/A: at the default 3% minimum effect a burst of load on
# this 2-vCPU host now and then passes for a regression (1 run in ~10 with a
# build running beside it); the check is of what the script does when BAD is
# not slower, so it asks for a 20% effect, which no such burst reaches
rm -f "$hist/nightly"/bisect-*.md
out=$(cd "$hist" && NIGHTLY_MIN_EFFECT=0.2 sh scripts/nightly.sh bisect HEAD~8 HEAD~5 --bench marlin_gemv_decode 2>&1); rc=$?
check "BAD no slower than GOOD: exit 0 and nothing to bisect (got $rc: $out)" \
    sh -c "[ $rc -eq 0 ] && grep -q 'Nothing to bisect' $hist/nightly/bisect-*.md"
out=$(cd "$hist" && sh scripts/nightly.sh bisect HEAD HEAD~8 2>&1); rc=$?
check "GOOD after BAD: exit 2 (got $rc: $out)" [ "$rc" -eq 2 ]
out=$(cd "$hist" && NIGHTLY_BISECT_MAX_ROUNDS=65 sh scripts/nightly.sh bisect HEAD~8 HEAD 2>&1); rc=$?
case "$out" in *"bad NIGHTLY_BISECT_MAX_ROUNDS '65'"*) ok=1 ;; *) ok=0 ;; esac
check "more bisect rounds than compare --ab reads: exit 2 naming the variable (got $rc: $out)" \
    [ "$rc-$ok" = 2-1 ]
rm -rf "$hist" "$rtmp"
echo "nightly: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
