#!/usr/bin/env bash
# test_sweep.sh - sweeps split into shards: bench --shard covers the work
# list exactly once whatever the shard count; merge keeps every row, names
# duplicates, missing and incomplete shards, and refuses mixed builds; a
# small sweep through GNU parallel with 2 local workers merges to exactly
# the keys of an unsharded run; a shard killed mid-run is resumed by
# rerunning the sweep, as is a shard whose files are gone though parallel
# logged it as ended well; tune --shard and tune --from-results build the table
# from merged rows; the Slurm sweep runs its array job on a stub sbatch and,
# where a single-node Slurm starts here, on a real one.
# usage: test_sweep.sh BUILD_DIR
B=${1:-build}
cd "$(dirname "$0")/.." || exit 2
. scripts/portable.sh
passed=0; failed=0; skipped=0
check() {
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
has() { case "$1" in *"$2"*) return 0 ;; *) return 1 ;; esac; }
# exit status $1 was $2 and output $3 says $4
rc_says() { [ "$1" -eq "$2" ] && has "$3" "$4"; }
# every condition, each a string for eval (check takes one command)
all() { for c in "$@"; do eval "$c" || return 1; done; }
# the key columns of a results file's rows (chip .. split_k), sorted
keys() { grep -h '^"[123]",' "$@" | cut -d, -f6-18 | sort; }
# the same of a manifest's units (chip .. split_k)
mkeys() { grep -hv '^#' "$@" | grep -v '^sweep,' | cut -d, -f5-17 | tr -d '"' | sort; }
plain() { tr -d '"'; }
d=$(mktemp -d)
rel=results/sweeps/test-$$     # sweep-parallel writes under the repository
trap '[ -f "$d/slurm/slurmctld.pid" ] && scripts/slurm-local.sh stop "$d/slurm"; rm -rf "$d" "$rel"' EXIT
# a small sweep: a shape listed twice is one problem
sweep=(--shape 1x256x512 --shape 4x512x256 --shape 1x256x512 --shape 2x512x512
       --formats fp4,u4 --budget 0.002 --max-reps 3 --no-probes --quiet)

# the unsharded run
"$B/bench" "${sweep[@]}" --threads 1 --out "$d/all.csv" >/dev/null 2>&1; rc=$?
check "the unsharded run exits 0 (rc $rc)" [ "$rc" -eq 0 ]
n_all=$(keys "$d/all.csv" | nlines)
check "the unsharded run measured a shape listed twice once: no duplicate key" \
    [ -z "$(keys "$d/all.csv" | uniq -d)" ]
check "the unsharded run has rows ($n_all)" [ "$n_all" -ge 8 ]

# every shard count covers the work list exactly once, and is the same on every run
for n in 1 3 7; do
    for i in $(seq 1 $n); do
        "$B/bench" "${sweep[@]}" --threads 1 --shard "$i/$n" --out "$d/s$n/$i.csv" >/dev/null 2>&1
    done
    check "$n shards' manifests list the unsharded run's keys exactly" \
        [ "$(mkeys "$d"/s$n/*.manifest.csv | plain)" = "$(keys "$d/all.csv" | plain)" ]
    check "$n shards' rows are the unsharded run's keys exactly" \
        [ "$(keys "$d"/s$n/*.csv)" = "$(keys "$d/all.csv")" ]
done
id1=$(sed -n 's/^# sweep \([0-9a-f]*\):.*/\1/p' "$d/s3/2.manifest.csv")
"$B/bench" "${sweep[@]}" --threads 1 --shard 2/3 --out "$d/again.csv" >/dev/null 2>&1
id2=$(sed -n 's/^# sweep \([0-9a-f]*\):.*/\1/p' "$d/again.manifest.csv")
check "a shard's sweep id is the same on a second run ($id1, $id2)" all '[ -n "$id1" ]' '[ "$id1" = "$id2" ]'
"$B/bench" "${sweep[@]}" --group 64 --threads 1 --shard 2/3 --out "$d/t2.csv" >/dev/null 2>&1
id3=$(sed -n 's/^# sweep \([0-9a-f]*\):.*/\1/p' "$d/t2.manifest.csv")
check "another work list (--group 64) is another sweep ($id3)" all '[ -n "$id3" ]' '[ "$id3" != "$id1" ]'
est=$(sed -n 's/^# sweep [0-9a-f]*: \([0-9]*\) units.*/\1/p' "$d/s7/1.manifest.csv")
check "the manifest says the sweep's unit count ($est = $n_all)" [ "$est" = "$n_all" ]

# merge: complete, missing, incomplete, duplicates, mixed builds, bad manifest
out=$("$B/merge" --out "$d/m3.csv" "$d"/s3/{1,2,3}.csv 2>&1); rc=$?
check "merging the 3 shards exits 0 (rc $rc)" [ "$rc" -eq 0 ]
check "and reports every shard complete" has "$out" "3 of 3 shards among the inputs"
check "the merged rows are the unsharded keys" [ "$(keys "$d/m3.csv")" = "$(keys "$d/all.csv")" ]
check "merge reports each row's provenance" has "$out" "host $(hostname)"
out=$("$B/merge" --out "$d/m.csv" "$d"/s3/{1,3}.csv 2>&1); rc=$?
check "a missing shard is a finding (rc $rc)" [ "$rc" -eq 1 ]
check "named: '$(printf '%s\n' "$out" | grep missing | head -1)'" has "$out" "shard 2/3: missing"
check "and the merged file is still written" test -s "$d/m.csv"
"$B/merge" --out "$d/m.csv" --allow-gaps "$d"/s3/{1,3}.csv >/dev/null 2>&1; rc=$?
check "--allow-gaps exits 0 (rc $rc)" [ "$rc" -eq 0 ]
mkdir "$d/inc"
cp "$d"/s3/* "$d/inc/"
sed '$d' "$d/s3/2.csv" > "$d/inc/2.csv"   # the shard lost its last row
out=$("$B/merge" --out "$d/m.csv" "$d"/inc/{1,2,3}.csv 2>&1); rc=$?
check "an incomplete shard is a finding (rc $rc)" [ "$rc" -eq 1 ]
check "named with its first missing unit: '$(printf '%s\n' "$out" | grep incomplete)'" \
    has "$out" "shard 2/3 ($d/inc/2.manifest.csv): incomplete: 1 of"
cp "$d/s3/2.csv" "$d/dup.csv"
out=$("$B/merge" --out "$d/m.csv" "$d"/s3/{1,2,3}.csv "$d/dup.csv" 2>&1); rc=$?
check "a duplicate key is reported, not a failure (rc $rc)" [ "$rc" -eq 0 ]
check "with the files it is in" has "$out" "duplicate:"
check "and one row of each key kept" [ "$(keys "$d/m.csv")" = "$(keys "$d/all.csv")" ]
"$B/merge" --out "$d/mall.csv" --keep all "$d"/s3/{1,2,3}.csv "$d/dup.csv" >/dev/null 2>&1
check "--keep all keeps both rows" \
    [ "$(keys "$d/mall.csv" | wc -l)" -eq $((n_all + $(keys "$d/dup.csv" | wc -l))) ]
out=$("$B/merge" --out "$d/m.csv" "$d/s3/1.csv" "$d/s3/../s3/1.csv" 2>&1); rc=$?
check "a file given twice is refused (rc $rc): $out" rc_says "$rc" 2 "$out" "given twice"
sed 's/^\("[123]","[^"]*","\)[^"]*"/\1deadbeef0000"/' "$d/s3/3.csv" > "$d/other-build.csv"
cp "$d/s3/3.manifest.csv" "$d/other-build.manifest.csv"
echo keep > "$d/m.csv"
out=$("$B/merge" --out "$d/m.csv" "$d/s3/1.csv" "$d/other-build.csv" 2>&1); rc=$?
check "mixed builds are refused (rc $rc): $out" rc_says "$rc" 2 "$out" "refusing to mix builds"
check "and nothing is written" [ "$(cat "$d/m.csv")" = keep ]
"$B/merge" --out "$d/m.csv" --allow-mixed-builds "$d/s3/1.csv" "$d/other-build.csv" >/dev/null 2>&1
rc=$?
check "unless allowed (rc $rc)" [ "$rc" -eq 1 ]
cp "$d/s3/1.csv" "$d/badman.csv"
sed '5s/,fp4,/,fp5,/;5s/,u4,/,u5,/' "$d/s3/1.manifest.csv" > "$d/badman.manifest.csv"
out=$("$B/merge" --out "$d/m.csv" "$d/badman.csv" 2>&1); rc=$?
check "a malformed manifest is bad input naming its line (rc $rc): $out" \
    rc_says "$rc" 2 "$out" "badman.manifest.csv:5: format"
out=$("$B/merge" --out "$d/m.csv" "$d/nope.csv" 2>&1); rc=$?
check "a missing input is bad input (rc $rc)" rc_says "$rc" 2 "$out" "nope.csv"
out=$("$B/bench" "${sweep[@]}" --shard 4/3 2>&1); rc=$?
check "bench --shard 4/3 is refused (rc $rc): $out" rc_says "$rc" 2 "$out" "--shard '4/3'"

# tune --from-results: each problem's pick is its fastest ok row
out=$("$B/tune" --chip host --threads 1 --from-results "$d/m3.csv" --out-dir "$d/tf" 2>&1); rc=$?
check "tune --from-results exits 0 (rc $rc)" [ "$rc" -eq 0 ]
check "and times nothing" has "$out" "nothing timed"
want=$(grep -h '^"[123]",' "$d/m3.csv" | plain | awk -F, '$19 == "ok" {
        k = $8 " " $9 " " $10 " " $11; if (!(k in best) || $21 + 0 < best[k]) { best[k] = $21 + 0; c[k] = $13 " " $14 " " $15 " " $16 " " $17 " " $18 } }
    END { for (k in c) print k, c[k] }' | sort)
got=$(grep -v '^#' "$d/tf/table.csv" | plain | awk -F, 'NR > 1 && $3 > 0 { print $1, $18, $3, $4, $7, $8, $9, $10, $11, $12 }' | sort)
check "the table's picks are the fastest ok rows, problem by problem" all '[ -n "$got" ]' '[ "$got" = "$want" ]'
"$B/merge" --out "$d/m3r.csv" "$d"/s3/{3,1,2}.csv >/dev/null 2>&1
"$B/tune" --chip host --threads 1 --from-results "$d/m3r.csv" --out-dir "$d/tr" >/dev/null 2>&1
check "the shards merged in another order give the same table" \
    [ "$(grep -v '^#' "$d/tf/table.csv" | sort)" = "$(grep -v '^#' "$d/tr/table.csv" | sort)" ]
# --from-results --model: the table carries the given model, not a fit on the rows
given=results/host/model.csv
out=$("$B/tune" --chip host --threads 1 --from-results "$d/m3.csv" --model "$given" \
      --out-dir "$d/tm" 2>&1); rc=$?
check "tune --from-results --model exits 0 and says whose model (rc $rc): $out" \
    all '[ "$rc" -eq 0 ]' 'has "$out" "rows fitted elsewhere"'
check "its model.csv holds the given model's terms, value for value" \
    all '[ -n "$(grep "^dispatch," "$given")" ]' \
        '[ "$(grep -v "^#" "$given")" = "$(grep -v "^#" "$d/tm/model.csv")" ]'
check "and its picks are those of the rows (as without --model)" \
    [ "$(grep -v '^#' "$d/tf/table.csv" | sort)" = "$(grep -v '^#' "$d/tm/table.csv" | sort)" ]
out=$("$B/tune" --chip host --suite smoke --model "$given" --out-dir "$d/tn" 2>&1); rc=$?
check "--model on a measured chip without --from-results is refused (rc $rc): $out" \
    rc_says "$rc" 2 "$out" "--model is for predicted chips and --from-results"
out=$("$B/tune" --chip host --from-results 2>&1); rc=$?
check "tune --from-results without files is refused (rc $rc)" [ "$rc" -eq 2 ]
out=$("$B/tune" --chip m4max --from-results "$d/m3.csv" --out-dir "$d/tx" 2>&1); rc=$?
check "--from-results without rows of the chip is refused (rc $rc): $out" \
    rc_says "$rc" 2 "$out" "no rows of chip m4max"

# tune --shard: rows and a manifest per shard, no table; merged, a table of every problem
targs=(--chip host --suite smoke --m 1,2 --formats fp4 --evals 5 --budget 0.002 --threads 1 --quiet)
for i in 1 2; do "$B/tune" "${targs[@]}" --shard "$i/2" --out-dir "$d/ts" >/dev/null 2>&1; done
check "tune --shard writes no table" [ ! -e "$d/ts/table.csv" ]
out=$("$B/merge" --out "$d/ts/merged.csv" "$d"/ts/tune-shard-*-of-2.csv 2>&1); rc=$?
check "the tune shards merge complete (rc $rc)" rc_says "$rc" 0 "$out" "2 of 2 shards"
out=$("$B/tune" "${targs[@]}" --from-results "$d/ts/merged.csv" --out-dir "$d/ts" 2>&1); rc=$?
check "and --from-results tables every problem of the suite (rc $rc): $(grep '^measured table' <<< "$out")" \
    rc_says "$rc" 0 "$out" "measured table for host: 4 shapes"

# GNU parallel, 2 local workers: the merged sweep is the unsharded run's keys exactly
if command -v parallel >/dev/null 2>&1; then
    out=$(scripts/sweep-parallel.sh --build "$B" --jobs 2 --shards 5 --out "$rel/p" -- "${sweep[@]}" 2>&1); rc=$?
    check "sweep-parallel.sh with 2 workers exits 0 (rc $rc)" [ "$rc" -eq 0 ]
    check "its merged file has the unsharded run's keys exactly (no loss, no duplicate)" \
        [ "$(keys "$rel/p/merged.csv")" = "$(keys "$d/all.csv")" ]
    check "parallel ran 5 shards" [ "$(tail -n +2 "$rel/p/joblog.txt" | wc -l)" -eq 5 ]
    # a shard parallel logged as ended well whose files are gone runs again, alone
    grep -v '^3[[:space:]]' "$rel/p/joblog.txt" > "$d/joblog-kept"
    rm -f "$rel/p/shard-3-of-5.csv" "$rel/p/shard-3-of-5.manifest.csv"
    out=$(scripts/sweep-parallel.sh --build "$B" --jobs 2 --shards 5 --out "$rel/p" -- "${sweep[@]}" 2>&1); rc=$?
    check "a shard whose files are gone is run again (rc $rc): $out" \
        rc_says "$rc" 0 "$out" "no manifest here of shard(s) 3: they run again"
    check "and only it: the other shards' joblog lines are unchanged" \
        all '[ "$(grep -v "^3[[:space:]]" "$rel/p/joblog.txt")" = "$(cat "$d/joblog-kept")" ]' \
            '[ "$(grep -c "^3[[:space:]]" "$rel/p/joblog.txt")" -eq 1 ]'
    check "and the merge again has the unsharded run's keys exactly" \
        [ "$(keys "$rel/p/merged.csv")" = "$(keys "$d/all.csv")" ]
    # a shard killed mid-run, then the same sweep again: only it reruns, and resumes
    slow=(--shape 1x256x512 --shape 4x512x256 --formats fp4,u4 --ci 0 --budget 0.05
          --max-reps 4000 --no-probes --quiet)
    scripts/sweep-parallel.sh --build "$B" --jobs 2 --shards 2 --out "$rel/k" -- "${slow[@]}" >/dev/null 2>&1 &
    sp=$!
    for _ in $(seq 400); do
        n=$(grep -c '^"[123]",' "$rel/k/shard-2-of-2.csv" 2>/dev/null)
        [ "${n:-0}" -ge 1 ] && break
        sleep 0.05
    done
    pkill -9 -f -- "--shard 2/2 --out $rel/k/" ; wait $sp; rc=$?
    before=$(grep -c '^"[123]",' "$rel/k/shard-2-of-2.csv")
    check "the sweep with a killed shard is a finding (rc $rc)" [ "$rc" -eq 1 ]
    check "merge named the killed shard incomplete" grep -q "shard 2/2 .*incomplete" "$rel/k/merge.txt"
    out=$(scripts/sweep-parallel.sh --build "$B" --jobs 2 --shards 2 --out "$rel/k" -- "${slow[@]}" 2>&1); rc=$?
    check "rerunning the sweep completes it (rc $rc)" [ "$rc" -eq 0 ]
    check "only the killed shard ran again" \
        [ "$(tail -n +2 "$rel/k/joblog.txt" | awk '{ print $1 }' | sort | uniq -c | awk '$1 > 1' | wc -l)" -eq 1 ]
    check "it resumed: its $before rows were skipped" \
        grep -q "$before skipped (--resume)" "$rel/k/shards.log"
    "$B/bench" "${slow[@]}" --threads 1 --explain 2>/dev/null | grep -c '^  legal' > "$d/nlegal"
    check "the resumed sweep has every key once" \
        all '[ -z "$(keys "$rel/k/merged.csv" | uniq -d)" ]' '[ "$(keys "$rel/k/merged.csv" | wc -l)" -eq "$(cat "$d/nlegal")" ]'
    # the hosts of an --sshloginfile, through an ssh that runs here (results come back by rsync)
    if command -v rsync >/dev/null 2>&1; then
        # sshd gives the remote command the login shell in SHELL, which
        # parallel's remote wrapper execs; CI's environment has none: set it
        # (getent is Linux's: elsewhere the SHELL already set, or /bin/sh)
        printf '#!/bin/sh\n# a stand-in for ssh: drop the options and the host, run the command here\nwhile [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) shift; break ;; esac; done\n[ "$1" = -- ] && shift\nlogin=$(getent passwd "$(id -un)" 2>/dev/null | cut -d: -f7); export SHELL=${login:-${SHELL:-/bin/sh}}\nexec sh -c "$*"\n' > "$d/fake-ssh" # portable: getent only where it exists
        chmod +x "$d/fake-ssh"
        printf '1/macmini1\n1/macmini2\n' > "$d/hosts"
        mkdir -p "$d/remote"
        cp -r "$B" Makefile "$d/remote/" 2>/dev/null
        out=$(scripts/sweep-parallel.sh --shards 3 --sshloginfile "$d/hosts" --ssh "$d/fake-ssh" \
            --remote-dir "$d/remote" --build "$(basename "$B")" --out "$rel/r" -- "${sweep[@]}" 2>&1); rc=$?
        check "sweep-parallel.sh over --sshloginfile exits 0 (rc $rc): $(tail -2 <<< "$out")" [ "$rc" -eq 0 ]
        check "the hosts' shards came back with their manifests" \
            [ "$(ls "$rel"/r/shard-*-of-3.manifest.csv 2>/dev/null | wc -l)" -eq 3 ]
        check "and merged to the unsharded keys" [ "$(keys "$rel/r/merged.csv")" = "$(keys "$d/all.csv")" ]
    else
        echo "test_sweep: rsync is not installed: the --sshloginfile sweep is not tested" >&2
    fi
else
    failed=$((failed + 1))
    echo "FAIL: GNU parallel is not installed (make deps installs it)" >&2
fi

# Slurm: the array job and the merge after it, on a stub sbatch that runs them here
mkdir -p "$d/stub"
cat > "$d/stub/sbatch" <<'EOF'
#!/bin/bash
# a stand-in for sbatch: runs an array job's tasks one after another, then says its id
log=$(dirname "$0")/calls; echo "sbatch $*" >> "$log"
script=${@: -1}
range=$(sed -n 's/^#SBATCH --array=\([0-9]*-[0-9]*\).*/\1/p' "$script")
rc=0
if [ -n "$range" ]; then
    for i in $(seq ${range%-*} ${range#*-}); do SLURM_ARRAY_TASK_ID=$i bash "$script" > /dev/null 2>&1 || rc=$?; done
else
    bash "$script" || rc=$?
fi
echo $((RANDOM + 1))
case " $* " in *" --wait "*) exit $rc ;; esac
exit 0
EOF
chmod +x "$d/stub/sbatch"
out=$(PATH="$d/stub:$PATH" scripts/sweep-slurm.sh --build "$B" --shards 3 --wait --out "$rel/sl" -- "${sweep[@]}" 2>&1); rc=$?
check "sweep-slurm.sh on a stub sbatch exits 0 (rc $rc): $(tail -1 <<< "$out")" [ "$rc" -eq 0 ]
check "it submitted the array job, then the merge after it" \
    grep -q -- "--dependency=afterany:" "$d/stub/calls"
check "the job script is an array of 3 shard tasks" grep -q -- "--array=1-3" "$rel/sl/shards.sbatch"
check "its merged file has the unsharded keys exactly" [ "$(keys "$rel/sl/merged.csv")" = "$(keys "$d/all.csv")" ]
# a legal but unusual sweep directory (every character the scripts let
# through besides letters and digits): job scripts bash accepts, and a sweep
# that runs and merges
odd="$d/odd,dir=1:a@b+c_d.e-f"
out=$(scripts/sweep-slurm.sh --build "$B" --shards 3 --dry-run --out "$odd" -- "${sweep[@]}" 2>&1); rc=$?
check "sweep-slurm.sh --dry-run --out '$odd' exits 0 (rc $rc): $out" [ "$rc" -eq 0 ]
check "and writes job scripts that bash -n accepts" \
    all 'bash -n "$odd/shards.sbatch"' 'bash -n "$odd/merge.sbatch"'
out=$(PATH="$d/stub:$PATH" scripts/sweep-slurm.sh --build "$B" --shards 3 --wait --out "$odd" -- "${sweep[@]}" 2>&1); rc=$?
check "and the sweep into it runs and merges to the unsharded keys (rc $rc): $(tail -1 <<< "$out")" \
    all '[ "$rc" -eq 0 ]' '[ "$(keys "$odd/merged.csv")" = "$(keys "$d/all.csv")" ]'
# a repository whose path has a space: the job scripts name the sweep
# directory by its full path, so a relative --out is refused (one line,
# nothing made); an absolute one works (the repository is quoted for cd)
spaced="$d/my repo"
mkdir -p "$spaced"
cp -r scripts "$spaced/"
Babs=$(cd "$B" && pwd)
listing=$(cd "$spaced" && find . | sort)
out=$("$spaced/scripts/sweep-slurm.sh" --build "$Babs" --shards 2 --dry-run --out sl -- "${sweep[@]}" 2>&1 >"$d/stdout"); rc=$?
check "a repository path with a space and a relative --out: exit 2, one line, nothing on stdout (rc $rc): $out" \
    all '[ "$rc" -eq 2 ]' '[ "$(printf "%s\n" "$out" | nlines)" -eq 1 ]' '[ ! -s "$d/stdout" ]' \
        'has "$out" "bad sweep directory '"'"'$spaced/sl'"'"'"'
check "and nothing made in the repository" [ "$(cd "$spaced" && find . | sort)" = "$listing" ]
out=$(PATH="$d/stub:$PATH" "$spaced/scripts/sweep-slurm.sh" --build "$Babs" --shards 2 --wait \
    --out "$d/spaced-sweep" -- "${sweep[@]}" 2>&1); rc=$?
check "with an absolute --out it runs and merges (rc $rc): $(tail -1 <<< "$out")" \
    all '[ "$rc" -eq 0 ]' 'bash -n "$d/spaced-sweep/shards.sbatch"' \
        '[ "$(keys "$d/spaced-sweep/merged.csv")" = "$(keys "$d/all.csv")" ]'
out=$(scripts/sweep-slurm.sh --build "$B" --shards 0 -- --suite smoke 2>&1); rc=$?
check "sweep-slurm.sh --shards 0 is refused (rc $rc)" [ "$rc" -eq 2 ]
out=$(scripts/sweep-slurm.sh --build "$B" --shards 2 -- --shard 1/2 2>&1); rc=$?
check "a tool --shard of its own is refused (rc $rc): $out" rc_says "$rc" 2 "$out" "sweep's to set"
# bad input is refused before anything is made: no shard starts, and the
# sweep directory named by --out does not appear (tests/badinput/sweeps.cases
# has the rest of the bad input, run from a scratch directory)
for bad in "parallel --shards 99999 -- --suite smoke" "parallel --shards 2 -- --formats fp5" \
           "parallel --tool tune --shards 2 -- --chip host --evals 0" "parallel --shards" \
           "slurm --shards 99999 --dry-run -- --suite smoke" "slurm --shards 2 --dry-run -- --formats fp5" \
           "slurm --shards 2 -- --chip m9" "slurm --shards 2 --dry-run --out"; do
    # shellcheck disable=SC2086 # $bad is the script's name and its arguments
    out=$(scripts/sweep-${bad%% *}.sh --build "$B" --out "$rel/bad" ${bad#* } 2>&1 >"$d/stdout"); rc=$?
    check "sweep-$bad: exit 2, one line, nothing on stdout (rc $rc): $out" \
        all '[ "$rc" -eq 2 ]' '[ "$(printf "%s\n" "$out" | nlines)" -eq 1 ]' '[ ! -s "$d/stdout" ]'
done
check "and no sweep directory was made: '$(ls -d "$rel/bad" 2>/dev/null)'" [ ! -e "$rel/bad" ]
# there is no default sweep directory (results/sweeps was one): a sweep
# without --out is refused, and nothing is made under results/
listing=$(find results | sort)
for s in "parallel --shards 2" "slurm --shards 2 --dry-run"; do
    # shellcheck disable=SC2086 # $s is the script's name and its arguments
    out=$(scripts/sweep-${s%% *}.sh --build "$B" ${s#* } -- "${sweep[@]}" 2>&1 >"$d/stdout"); rc=$?
    check "sweep-$s without --out: exit 2, one line naming --out (rc $rc): $out" \
        all '[ "$rc" -eq 2 ]' '[ "$(printf "%s\n" "$out" | nlines)" -eq 1 ]' '[ ! -s "$d/stdout" ]' \
            'has "$out" "--out DIR is required" || has "$out" "is not installed"'
done
check "and nothing was made under results/" [ "$(find results | sort)" = "$listing" ]

# sweep-scaling: its build's log (a mktemp file) goes with it when the run
# stops after the build: here a stand-in make "builds" a bench that refuses
# the sweep's arguments (the check that runs again after the build)
mkdir -p "$d/scal/bin" "$d/scal/tmp" "$d/scal/build"
cat > "$d/scal/bin/make" <<'EOF'
#!/bin/sh
# a stand-in for make: BUILD/bench, a bench that refuses every argument
for a in "$@"; do case "$a" in BUILD=*) b=${a#BUILD=} ;; esac; done
printf '#!/bin/sh\necho "bench: refused after the build" >&2\nexit 2\n' > "$b/bench"
chmod +x "$b/bench"
echo "built $b/bench"
EOF
chmod +x "$d/scal/bin/make"
out=$(PATH="$d/scal/bin:$PATH" TMPDIR="$d/scal/tmp" scripts/sweep-scaling.sh BUILD="$d/scal/build" \
      OUT="$d/scal/out" SHARDS=1 2>&1 >"$d/stdout"); rc=$?
check "sweep-scaling refused after its build: exit 2, its one line, nothing on stdout (rc $rc): $out" \
    all '[ "$rc" -eq 2 ]' '[ "$(printf "%s\n" "$out" | nlines)" -eq 1 ]' '[ ! -s "$d/stdout" ]' \
        'has "$out" "bench: refused after the build"'
check "and leaves no build log in TMPDIR: '$(ls "$d/scal/tmp")'" [ -z "$(ls -A "$d/scal/tmp")" ]
check "and makes no OUT" [ ! -e "$d/scal/out" ]

# and on a real single-node Slurm when one starts here
if conf=$(scripts/slurm-local.sh start "$d/slurm" 2>"$d/slurm-start.err"); then
    eval "$conf"
    out=$(run_timeout 300 scripts/sweep-slurm.sh --build "$B" --shards 3 --wait --out "$rel/real" -- "${sweep[@]}" 2>&1); rc=$?
    check "sweep-slurm.sh on a real Slurm exits 0 (rc $rc): $(tail -1 <<< "$out")" [ "$rc" -eq 0 ]
    check "Slurm ran 3 array tasks" [ "$(ls "$rel"/real/slurm-*_*.out 2>/dev/null | wc -l)" -eq 3 ]
    check "their merged file has the unsharded keys exactly" [ "$(keys "$rel/real/merged.csv")" = "$(keys "$d/all.csv")" ]
    scripts/slurm-local.sh stop "$d/slurm"
    unset SLURM_CONF
elif is_macos; then
    skip "a real Slurm (Homebrew packages none: $(cat "$d/slurm-start.err")); the sweep is tested on the stub sbatch"
else
    echo "test_sweep: no single-node Slurm here ($(cat "$d/slurm-start.err")): tested on the stub sbatch only" >&2
fi

test_summary sweep "$passed" "$failed" "$skipped"
[ "$failed" -eq 0 ]
