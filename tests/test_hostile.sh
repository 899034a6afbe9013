#!/bin/sh
# test_hostile.sh - the tools in a directory someone else can write to:
# links planted where a tool will write (its temporary names, its lock, its
# `current` link), a results file that is a link, and a second writer on
# the same results file. Nothing outside the output directory may change,
# no link the tool did not make is followed or deleted through, and no row
# is ever lost in silence: a second writer is refused with one line.
# usage: test_hostile.sh BUILD_DIR
B=$(cd "${1:-build}" && pwd)
root=$(pwd)
. "$root/scripts/portable.sh"
passed=0; failed=0
check() {
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
d=$(mktemp -d)
cd "$d" || exit 1
quick="--chip m4max --shape 3x64x256 --formats u4 --budget 0.01 --max-reps 5"
cand="marlin_gemm_fused_u4 8 64 64 0 1"
printf 'outside, must stay\n' > outside.txt
sum0=$($MQ_SHA256 outside.txt)
outside_kept() { [ "$($MQ_SHA256 outside.txt)" = "$sum0" ]; }

# plant NAME.tmp.PID links to outside.txt for the next 400 process ids (the
# names a writer of predictable temporary files takes), in one process so
# that planting does not use up the ids it plants
plant() {
    perl -e 'my ($name, $to) = @ARGV; my $next = $$ + 1;
             symlink($to, "$name.tmp." . ($next + $_)) for 0 .. 399' "$1" "$d/outside.txt"
}
unplant() { find "$(dirname "$1")" -name "$(basename "$1").tmp.*" -type l -exec rm -f {} +; }

# ---- 1. a planted `tables/current -> ..` is refused, nothing deleted ------
mkdir -p t1/tables
printf 'keep\n' > t1/precious.txt
ln -s .. t1/tables/current
before=$(ls -A t1 t1/tables)
out=$("$B/tune" --chip m4max --suite smoke --m 1 --out-dir t1 2>&1 >/dev/null); rc=$?
check "tune with tables/current -> ..: exits 2 (got $rc: $out)" [ "$rc" -eq 2 ]
check "tune with tables/current -> ..: names the link (got: $out)" \
    sh -c "printf '%s' '$out' | grep -q 'tables/current: not a link to a table generation'"
check "tune with tables/current -> ..: the directory's files stay" [ -f t1/precious.txt ]
check "tune with tables/current -> ..: nothing created or removed" [ "$(ls -A t1 t1/tables)" = "$before" ]
for target in "$d" "$d/outside.txt" ../../etc 20261125T000000Z-1; do
    rm -f t1/tables/current; ln -s "$target" t1/tables/current
    "$B/tune" --chip m4max --suite smoke --m 1 --out-dir t1 >/dev/null 2>&1; rc=$?
    check "tune with tables/current -> $target: exits 2 (got $rc)" [ "$rc" -eq 2 ]
done
check "tune with planted current links: outside.txt unchanged" outside_kept
rm -f t1/tables/current
"$B/tune" --chip m4max --suite smoke --m 1 --out-dir t1 >/dev/null 2>&1; rc=$?
check "tune once the link is gone: exits 0 (got $rc)" [ "$rc" -eq 0 ]
check "tune once the link is gone: the unrelated file stays" [ -f t1/precious.txt ]

# ---- 2. planted temporary names: never written through ---------------------
# (the names a writer of PATH.tmp.PID files, as before, would take: today's
# names are unguessable, so these guard against that scheme coming back)
mkdir -p t2
plant t2/table.csv; plant t2/tables/current
"$B/tune" --chip m4max --suite smoke --m 1 --out-dir t2 >/dev/null 2>&1; rc=$?
check "tune among planted temporary names: exits 0 (got $rc)" [ "$rc" -eq 0 ]
check "tune among planted temporary names: outside.txt unchanged" outside_kept
check "tune among planted temporary names: table.csv is tune's link" \
    sh -c '[ "$(readlink t2/table.csv)" = tables/current/table.csv ]'
# another host's temporary file (a shard of a sweep on a shared directory)
# is never taken for a dead writer's; this host's dead writer's file goes
dead=$(sh -c 'echo $$')
printf 'x\n' > "t2/pub.csv.tmp.00000000.$dead.abcdef"; printf 'x\n' > "t2/pub.csv.tmp.ffffffff.$dead.abcdef"
printf 'x\n' > "t2/pub.csv.tmp.$dead"
"$B/model" public "$root/harness/public-figures.csv" --out t2/pub.csv >/dev/null 2>&1
check "another host's temporary files stay (one of the two marks is not this host's)" \
    [ "$(ls t2 | grep -c 'pub.csv.tmp.[0f]\{8\}')" -ge 1 ]
check "this host's dead writer's temporary file is removed" [ ! -e "t2/pub.csv.tmp.$dead" ]
plant new.csv
"$B/bench" $quick --candidate "$cand" --out new.csv >/dev/null 2>&1; rc=$?
check "bench (a new file) among planted temporary names: exits 0 (got $rc)" [ "$rc" -eq 0 ]
check "bench (a new file) among planted temporary names: outside.txt unchanged" outside_kept
check "bench (a new file): the results file is a file of its own" sh -c "[ -f new.csv ] && [ ! -L new.csv ]"
unplant new.csv
plant pub.csv
"$B/model" public "$root/harness/public-figures.csv" --out pub.csv >/dev/null 2>&1
check "model public among planted temporary names: outside.txt unchanged" outside_kept
# a planted lock link: tune's lock is opened without following it
mkdir -p t3/tables
ln -s "$d/outside.txt" t3/tables/.lock
"$B/tune" --chip m4max --suite smoke --m 1 --out-dir t3 >/dev/null 2>&1; rc=$?
check "tune with tables/.lock a planted link: exits 2 (got $rc)" [ "$rc" -eq 2 ]
check "tune with tables/.lock a planted link: outside.txt unchanged" outside_kept

# ---- 3. a results file that is a link is not appended through ------------
ln -s "$d/outside.txt" linked.csv
out=$("$B/bench" $quick --candidate "$cand" --out linked.csv 2>&1 >/dev/null); rc=$?
check "bench --out a symbolic link: exits 2 (got $rc: $out)" [ "$rc" -eq 2 ]
check "bench --out a symbolic link: says so (got: $out)" \
    sh -c "printf '%s' '$out' | grep -q 'linked.csv: .*symbolic link'"
check "bench --out a symbolic link: outside.txt unchanged" outside_kept

# ---- 4. two writers on one results file: refused, never rows lost ----------
# a held lock: the second writer is refused at once, the file untouched
"$B/bench" $quick --candidate "$cand" --out held.csv >/dev/null 2>&1
sum=$($MQ_SHA256 held.csv)
if command -v perl >/dev/null 2>&1; then
    perl -e 'use Fcntl qw(:flock); open(my $f, ">>", $ARGV[0]) or die; flock($f, LOCK_EX) or die;
             open(my $r, ">", $ARGV[1]); close $r; sleep 20' held.csv held.ready &
    holder=$!
    i=0; while [ ! -f held.ready ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    out=$("$B/bench" $quick --candidate "$cand" --out held.csv 2>&1 >/dev/null); rc=$?
    kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
    check "bench on a file another process appends to: exits 2 (got $rc: $out)" [ "$rc" -eq 2 ]
    check "bench on a file another process appends to: one line naming it (got: $out)" \
        sh -c "[ \$(printf '%s\n' '$out' | grep -c .) -eq 1 ] && printf '%s' '$out' | grep -q 'held.csv: .*another process is appending'"
    check "bench on a file another process appends to: the file untouched" [ "$($MQ_SHA256 held.csv)" = "$sum" ]
fi
# the race on a new file: each trial, both benches' rows are in it, or one
# was refused (exit 2) and the other's rows are all there
lost=0
for trial in 1 2 3 4 5 6; do
    rm -f race.csv
    "$B/bench" --chip m4max --shape 64x256x512 --formats u4 --budget 0.02 --max-reps 20 \
        --out race.csv >/dev/null 2>a.err & pa=$!
    "$B/bench" --chip m4max --shape 7x128x256 --formats u4 --budget 0.02 --max-reps 20 \
        --out race.csv >/dev/null 2>b.err & pb=$!
    wait $pa; ra=$?; wait $pb; rb=$?
    rows=$(grep -c '^"[123]",' race.csv)
    a=$(grep -c '"u4","64",' race.csv); b=$(grep -c '"u4","7",' race.csv)
    ok=0
    [ $ra -eq 0 ] && [ $rb -eq 0 ] && [ "$a" -gt 0 ] && [ "$b" -gt 0 ] && ok=1
    [ $ra -eq 2 ] && [ $rb -eq 0 ] && [ "$a" -eq 0 ] && [ "$b" -gt 0 ] && grep -q 'another process' a.err && ok=1
    [ $ra -eq 0 ] && [ $rb -eq 2 ] && [ "$b" -eq 0 ] && [ "$a" -gt 0 ] && grep -q 'another process' b.err && ok=1
    [ $ok -eq 1 ] || { lost=$((lost + 1)); echo "trial $trial: exits $ra/$rb, rows $rows ($a + $b)" >&2; }
    "$B/compare" race.csv race.csv >/dev/null 2>&1 || { lost=$((lost + 1)); echo "trial $trial: race.csv does not load" >&2; }
done
check "two benches on one new file, 6 trials: no rows lost in silence ($lost bad)" [ "$lost" -eq 0 ]

cd "$root" || exit 1
rm -rf "$d"
echo "hostile: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
