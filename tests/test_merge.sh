#!/bin/sh
# test_merge.sh - merge keeps its promises on inputs no shard writes and on
# a hostile output directory (issue 38):
#   1. manifests of one sweep id that disagree on the shard count (1/1 and
#      4000/4096 indexed past merge's table of shards) are one error
#      naming both files: exit 2, nothing on stdout, nothing written;
#   2. an error found after the report was made (the output cannot be
#      replaced) prints no report: stdout is empty beside the one line;
#   3. the same shard given twice with the same units (a shard rerun on
#      another machine) merges, its rows reported as duplicates;
#   4. --out is never written through a link: links planted at the
#      temporary names of the next few hundred process ids, and at the
#      output's own name, leave the files they point at unchanged and create
#      none (a link at the output's name is replaced, as rename does);
#   5. rows of results schema 1 and 2 merge (2 is 1 plus idle_s).
# The other bad inputs are tests/badinput/merge.cases.
# usage: test_merge.sh BUILD_DIR
B=$(cd "${1:-build}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/../scripts/portable.sh"
passed=0; failed=0
check() {
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
has() { case "$1" in *"$2"*) return 0 ;; *) return 1 ;; esac; }
lines() { printf '%s\n' "$1" | grep -c .; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cd "$d" || exit 2
sw="--shape 1x256x512 --formats fp4 --budget 0.002 --max-reps 2 --no-probes --quiet --threads 1"
# shellcheck disable=SC2086 # the options are meant to split
"$B/bench" $sw --shard 1/1 --out one.csv >/dev/null 2>&1
check "bench --shard 1/1 wrote its rows and manifest" test -s one.manifest.csv
# run merge ARGS...: rc, out (stdout) and err (stderr) of one merge
run() { "$B/merge" "$@" > stdout 2> stderr; rc=$?; out=$(cat stdout); err=$(cat stderr); }

# 1. one sweep id, shard counts 1 and 4096
cp one.csv huge.csv
sed 's/shard 1 of 1 owns/shard 4000 of 4096 owns/; s/^\([0-9a-f]*,[a-z]*\),1,1,/\1,4000,4096,/' \
    one.manifest.csv > huge.manifest.csv
run --out m.csv one.csv huge.csv
check "shard counts 1 and 4096 of one sweep: exit 2 (got $rc: $err)" [ "$rc" -eq 2 ]
check "one line on stderr naming both manifests: $err" \
    eval '[ "$(lines "$err")" -eq 1 ] && has "$err" one.manifest.csv && has "$err" huge.manifest.csv && has "$err" "shard count"'
check "nothing on stdout (got: $out)" [ -z "$out" ]
check "nothing written" [ ! -e m.csv ]
run --out m.csv huge.csv one.csv
check "and in the other order (rc $rc): $err" eval '[ "$rc" -eq 2 ] && [ -z "$out" ] && [ ! -e m.csv ]'

# 2. the output cannot be replaced (a directory): found after the report is made
mkdir adir
run --out adir one.csv
check "an output that cannot be replaced: exit 2 (got $rc: $err)" [ "$rc" -eq 2 ]
check "one line on stderr, naming it: $err" eval '[ "$(lines "$err")" -eq 1 ] && has "$err" "adir: cannot replace"'
check "no report on stdout beside it (got: $out)" [ -z "$out" ]
run --out m.csv one.csv
check "a good merge still reports on stdout (rc $rc)" \
    eval '[ "$rc" -eq 0 ] && has "$out" "1 of 1 shard among the inputs" && has "$out" "merged "'
check "and nothing on stderr (got: $err)" [ -z "$err" ]
rm -f m.csv

# 3. the same shard twice, same units: a rerun, its rows duplicates
mkdir rerun
cp one.csv one.manifest.csv rerun/
run --out m.csv one.csv rerun/one.csv
check "a shard given twice with the same units merges (rc $rc: $err)" [ "$rc" -eq 0 ]
check "still 1 of 1 shard, its rows duplicates" \
    eval 'has "$out" "1 of 1 shard among the inputs" && has "$out" "duplicate:"'
rm -f m.csv

# 4. links planted at the temporary names and at the output's name. The
# links are made by one ln (each a file of outside/ named like the link it
# becomes), so the pids after $p are not spent planting; the shell's own
# redirections make the files they point at.
mkdir o outside outside/new
echo precious > outside/linked.csv
p=$(sh -c 'echo $$')
i=1; tm=""; tn=""
while [ "$i" -le 2000 ]; do
    echo precious > "outside/m.csv.tmp.$((p + i))"
    tm="$tm $d/outside/m.csv.tmp.$((p + i))"
    tn="$tn $d/outside/new/n.csv.tmp.$((p + i))"   # a file it would create
    i=$((i + 1))
done
# shellcheck disable=SC2086 # the lists are meant to split
ln -s $tm $tn o/
ln -s "$d/outside/linked.csv" o/m.csv
run --out o/m.csv one.csv
check "merge past the planted links exits 0 (rc $rc: $err)" [ "$rc" -eq 0 ]
check "the files the temporary names link to are unchanged" \
    [ -z "$(cat outside/m.csv.tmp.* | grep -v '^precious$')" ]
check "the file the output's name linked to is unchanged" [ "$(cat outside/linked.csv)" = precious ]
check "the output is a file of its own now, with the rows" \
    eval '[ -f o/m.csv ] && [ ! -L o/m.csv ] && grep -q "^\"[123]\"," o/m.csv'
p=$(sh -c 'echo $$')
ln -s "$d/outside/new/n.csv.tmp.$((p + 1))" "$d/outside/new/n.csv.tmp.$((p + 2))" \
    "$d/outside/new/n.csv.tmp.$((p + 3))" o/ 2>/dev/null
run --out o/n.csv one.csv
check "merge to a name with dangling links planted exits 0 (rc $rc: $err)" [ "$rc" -eq 0 ]
check "and creates nothing they point at: $(ls outside/new | tr '\n' ' ')" \
    [ -z "$(ls outside/new)" ]

# 5. schema 1 rows (another build's) and this build's schema 3 rows merge:
#    3 is 1 plus idle_s and kernel_build; the output is schema 3, each row keeps its number
"$B/bench" --shape 1x64x128 --formats fp4 --budget 0.002 --max-reps 2 --no-probes --quiet \
    --threads 1 --candidate "marlin_gemm_fused_fp4 8 64 64 0 1" --out two.csv >/dev/null 2>&1
run --allow-mixed-builds --out s12.csv "$ROOT/tests/data/bench-llama3-8b-host.csv" two.csv
check "schema 1 and schema 3 rows merge without --allow-mixed-schemas (rc $rc: $err)" [ "$rc" -eq 0 ]
check "the merged file is schema 3 with rows of both" \
    eval 'head -1 s12.csv | grep -q "schema 3" && grep -q "^\"1\"," s12.csv && grep -q "^\"3\"," s12.csv'

cd / || exit 2
test_summary merge "$passed" "$failed"
[ "$failed" -eq 0 ]
