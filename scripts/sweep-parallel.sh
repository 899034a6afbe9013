#!/usr/bin/env bash
# sweep-parallel.sh - one bench (or tune) sweep split into shards and run by
# GNU parallel: on local workers by default, or on the hosts of an
# --sshloginfile (a rack of Macs); each shard's results and manifest come
# back to the sweep directory, and merge combines them (naming any shard
# that is missing or incomplete). Rerun the same command after a kill or a
# failed host: parallel reruns only the shards whose jobs did not finish
# (--resume-failed on the joblog) and those whose manifest is not here, and
# each of those resumes its own rows.
#
# usage: scripts/sweep-parallel.sh [options] -- TOOL-ARGS...
#   --shards N          shards (default: the number of jobs; where workers may run
#                       at different speeds, 4x the jobs: the next shard goes to
#                       the first free worker)
#   --jobs J            shards at a time per host (default: cores / threads here;
#                       with --sshloginfile, what the file says, else parallel's
#                       default of one per core)
#   --threads T         CPU-model workers per shard (default 1); the same on
#                       every shard, as the candidate space depends on it
#   --tool bench|tune   default bench
#   --out DIR           sweep directory, relative to the repository (required;
#                       e.g. ../sweeps/NAME, outside the tree): shard-I-of-N.csv
#                       (bench) or tune-shard-I-of-N.csv (tune), their manifests,
#                       joblog.txt, merged.csv, merge.txt. It and --build: letters,
#                       digits and . _ / + - , = : @ only (the shards' command line)
#   --build DIR         the tools (default build)
#   --sshloginfile F    run the shards on F's hosts (parallel --sshloginfile);
#                       each host needs this tree built at --remote-dir, and
#                       rsync (results come back with parallel --return)
#   --remote-dir DIR    the tree on the hosts (default: this tree's path)
#   --ssh CMD           the ssh command parallel uses (parallel --ssh)
# Exit status: merge's (0 complete, 1 shards missing or incomplete), 2 bad
# usage or an environment error (parallel missing, say).
#
# examples:
#   scripts/sweep-parallel.sh --jobs 2 --out ../sweeps/smoke -- --suite smoke --formats fp4,u4
#   scripts/sweep-parallel.sh --shards 16 --out ../sweeps/8b -- \
#       --suite llama3-8b --m 1,16 --space full
#   scripts/sweep-parallel.sh --shards 32 --sshloginfile macs.txt --out results/sweeps/all \
#       --remote-dir /opt/mq -- --chip host --suite all --m all --space full
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
    echo "sweep-parallel: $*" >&2
    exit 2
}
. scripts/sweep-common.sh
. scripts/portable.sh

shards="" jobs="" threads=1 tool=bench out="" build=build sshlogin="" remote="" ssh_cmd=""
while [ $# -gt 0 ]; do
    case "$1" in
    --shards) sweep_need "$@"; shards=$2; shift 2 ;;
    --jobs) sweep_need "$@"; jobs=$2; shift 2 ;;
    --threads) sweep_need "$@"; threads=$2; shift 2 ;;
    --tool) sweep_need "$@"; tool=$2; shift 2 ;;
    --out) sweep_need "$@"; out=$2; shift 2 ;;
    --build) sweep_need "$@"; build=$2; shift 2 ;;
    --sshloginfile) sweep_need "$@"; sshlogin=$2; shift 2 ;;
    --remote-dir) sweep_need "$@"; remote=$2; shift 2 ;;
    --ssh) sweep_need "$@"; ssh_cmd=$2; shift 2 ;;
    --help | -h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (the tool's own options go after --; see --help)" ;;
    esac
done
# every value, then the tool's arguments, before anything is made
sweep_int --threads "$threads" 1 1024 ", as the tools take"
[ -z "$jobs" ] || sweep_int --jobs "$jobs" 1 4096
[ -z "$shards" ] || sweep_int --shards "$shards" 1 4096 ": the tools' --shard stops there"
sweep_word --out "$out"
sweep_word --build "$build"
case "$out" in /*) die "--out must be relative to the repository (the hosts write under --remote-dir): '$out'" ;; esac
[ -n "$out" ] && sweep_dir_ok --out "$out"
sweep_check "$tool" "$build" "$@"
if [ -n "$sshlogin" ]; then
    [ -r "$sshlogin" ] && [ -f "$sshlogin" ] || die "$sshlogin: cannot read the --sshloginfile"
else
    cores=$(ncpu)
    [ -n "$jobs" ] || jobs=$(( cores / threads > 0 ? cores / threads : 1 ))
fi
[ -n "$shards" ] || shards=${jobs:-1}
command -v parallel >/dev/null 2>&1 ||
    die "GNU parallel is not installed (Debian: apt-get install parallel, or make deps; macOS: brew install parallel)"
sweep_tool_ok "$tool" "$build" "$threads" "$shards" "$@"
[ -n "$out" ] || die "--out DIR is required: the sweep directory, relative to the repository (e.g. --out ../sweeps/NAME)"
mkdir -p "$out" 2>/dev/null || die "$out: cannot create the sweep directory"

res=$(sweep_results "$tool" "$out" '{}' "$shards")
cmd=$(sweep_command "$tool" "$build" "$threads" "$out" '{}' "$shards" "$@")
man="${res%.csv}.manifest.csv"
popts=(--joblog "$out/joblog.txt" --resume-failed --halt never --tagstring 'shard {}')
[ -n "$jobs" ] && popts+=(--jobs "$jobs")
if [ -n "$sshlogin" ]; then
    popts+=(--sshloginfile "$sshlogin" --workdir "${remote:-$PWD}" --return "$res" --return "$man")
    [ -n "$ssh_cmd" ] && popts+=(--ssh "$ssh_cmd")
fi
# A job parallel logged as ended well may still have left nothing here: a
# remote wrapper that could not start the job exits 0 (seen when a host's
# environment had no SHELL), a --return that failed, a file deleted since.
# --resume-failed would never rerun it, so its joblog line goes.
if [ -f "$out/joblog.txt" ]; then
    lost=""
    for i in $(seq 1 "$shards"); do
        [ -f "${man//\{\}/$i}" ] || lost+=" $i"
    done
    if [ -n "$lost" ]; then
        awk -v lost="$lost " 'NR == 1 || index(lost, " " $1 " ") == 0' "$out/joblog.txt" >"$out/joblog.txt.tmp"
        mv "$out/joblog.txt.tmp" "$out/joblog.txt"
        echo "sweep-parallel: no manifest here of shard(s)$lost: they run again" >&2
    fi
fi
echo "sweep-parallel: $shards shards of '$tool $*' (--threads $threads), ${jobs:-one per core on each host} at a time${sshlogin:+ on the hosts of $sshlogin}; sweep in $out" >&2
start=$(now_ns)
set +e
seq 1 "$shards" | parallel "${popts[@]}" "$cmd" >"$out/shards.log" 2>&1
prc=$?
set -e
end=$(now_ns)
echo "sweep-parallel: the shards ran in $(awk -v ns=$((end - start)) 'BEGIN { printf "%.1f", ns / 1e9 }') s (parallel exit $prc; per shard: $out/joblog.txt, output: $out/shards.log)" >&2
files=()
for i in $(seq 1 "$shards"); do
    f=${res//\{\}/$i}
    [ -f "$f" ] && files+=("$f")
done
[ ${#files[@]} -gt 0 ] || die "no shard left a results file in $out (see $out/shards.log)"
set +e
"$build/merge" --out "$out/merged.csv" "${files[@]}" >"$out/merge.txt"
mrc=$?
set -e
grep -E '^(sweep|  shard|merged|duplicate)' "$out/merge.txt" | grep -v ': complete' >&2 || true
echo "sweep-parallel: merged into $out/merged.csv (report $out/merge.txt; merge exit $mrc)" >&2
exit $mrc
