#!/usr/bin/env bash
# sweep-slurm.sh - one bench (or tune) sweep as a Slurm job array: one array
# task per shard (bench --shard $SLURM_ARRAY_TASK_ID/N), then a merge job
# that runs once every task has ended (afterany: a failed task leaves its
# shard incomplete, and merge names it). The job scripts are written into
# the sweep directory, so what was submitted can be read and resubmitted.
# To finish a sweep after killed or failed tasks, run the same command
# again: every task resumes its own rows (bench --resume), and the tasks
# whose shards are complete end at once.
#
# usage: scripts/sweep-slurm.sh [options] -- TOOL-ARGS...
#   --shards N          array tasks, one shard each (required)
#   --threads T         CPU-model workers per shard and --cpus-per-task (default 1)
#   --tool bench|tune   default bench
#   --out DIR           sweep directory on the cluster's shared file system
#                       (required): shard-I-of-N.csv
#                       (bench) or tune-shard-I-of-N.csv (tune), manifests,
#                       slurm-JOB_TASK.out, merged.csv, merge.txt. Its full path
#                       (this repository's, when --out is relative), --build and
#                       the sbatch values: letters, digits and . _ / + - , = : @
#                       only (they go into the job scripts' command lines)
#   --build DIR         the tools (default build; on the shared file system)
#   --partition P, --time T, --account A, --max-running K (array %K)
#                       passed to sbatch
#   --wait              block until the merge job ends; exit with merge's status
#   --dry-run           write the job scripts and print the sbatch commands only
# Exit status: 0 submitted (with --wait: merge's, 0 complete, 1 shards missing
# or incomplete), 2 bad usage, sbatch missing or refusing.
#
# examples:
#   scripts/sweep-slurm.sh --shards 64 --partition cpu --time 2:00:00 \
#       --out /shared/sweeps/all -- --suite all --m all --space full
#   scripts/sweep-slurm.sh --shards 8 --dry-run --out /tmp/sweep-8b -- --suite llama3-8b
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
    echo "sweep-slurm: $*" >&2
    exit 2
}
. scripts/sweep-common.sh

shards="" threads=1 tool=bench out="" build=build wait=0 dry=0 maxrun=""
sbatch_opts=()
while [ $# -gt 0 ]; do
    case "$1" in
    --shards) sweep_need "$@"; shards=$2; shift 2 ;;
    --threads) sweep_need "$@"; threads=$2; shift 2 ;;
    --tool) sweep_need "$@"; tool=$2; shift 2 ;;
    --out) sweep_need "$@"; out=$2; shift 2 ;;
    --build) sweep_need "$@"; build=$2; shift 2 ;;
    --partition | --time | --account)
        sweep_need "$@"; sweep_word "$1" "$2"; sbatch_opts+=("$1=$2"); shift 2 ;;
    --max-running) sweep_need "$@"; maxrun=$2; shift 2 ;;
    --wait) wait=1; shift ;;
    --dry-run) dry=1; shift ;;
    --help | -h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (the tool's own options go after --; see --help)" ;;
    esac
done
# every value, then the tool's arguments, before anything is made (with
# --dry-run too: the job scripts it writes are the ones that would run)
[ -n "$shards" ] || die "--shards N is required"
sweep_int --shards "$shards" 1 4096 ": the tools' --shard stops there"
sweep_int --threads "$threads" 1 1024 ", as the tools take"
[ -z "$maxrun" ] || sweep_int --max-running "$maxrun" 1 4096
sweep_word --out "$out"
sweep_word --build "$build"
# the job scripts name the sweep directory by its full path: this
# repository's (the current directory) unless --out is absolute
case "$out" in /*) full=$out ;; *) full=$PWD/$out ;; esac
sweep_word "sweep directory" "$full"
[ -n "$out" ] && sweep_dir_ok --out "$out"
sweep_check "$tool" "$build" "$@"
[ "$dry" = 1 ] || command -v sbatch >/dev/null 2>&1 ||
    die "sbatch is not installed (Debian: apt-get install slurm-wlm, or make deps; macOS has no Slurm package: --dry-run writes the job scripts for a cluster)"
sweep_tool_ok "$tool" "$build" "$threads" "$shards" "$@"
[ -n "$out" ] || die "--out DIR is required: the sweep directory (on the shared file system; relative: to the repository)"
mkdir -p "$out" 2>/dev/null || die "$out: cannot create the sweep directory"
root=$PWD
abs=$(CDPATH='' cd -- "$out" && pwd)
sweep_word "sweep directory" "$abs"
run=$(sweep_command "$tool" "$build" "$threads" "$abs" '${SLURM_ARRAY_TASK_ID}' "$shards" "$@")
glob=$(sweep_results "$tool" "$abs" '*' "$shards")
cat >"$out/shards.sbatch" <<EOF
#!/bin/bash
# one shard of the sweep per array task (written by scripts/sweep-slurm.sh)
#SBATCH --job-name=mq-$tool-shards
#SBATCH --array=1-$shards${maxrun:+%$maxrun}
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=$threads
#SBATCH --output=$abs/slurm-%A_%a.out
cd $(printf '%q' "$root")
exec $run
EOF
cat >"$out/merge.sbatch" <<EOF
#!/bin/bash
# the sweep's shards into one file, once every array task has ended
#SBATCH --job-name=mq-$tool-merge
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --output=$abs/slurm-merge-%j.out
cd $(printf '%q' "$root")
shopt -s nullglob
files=($glob)
[ \${#files[@]} -gt 0 ] || { echo "merge: no shard left a results file in $abs" >&2; exit 2; }
$build/merge --out $abs/merged.csv "\${files[@]}" >$abs/merge.txt
EOF
chmod +x "$out/shards.sbatch" "$out/merge.sbatch"
if [ "$dry" = 1 ]; then
    echo "sbatch --parsable ${sbatch_opts[*]:-}${sbatch_opts[*]:+ }$out/shards.sbatch"
    echo "sbatch --parsable ${sbatch_opts[*]:-}${sbatch_opts[*]:+ }--dependency=afterany:JOB $out/merge.sbatch"
    exit 0
fi
job=$(sbatch --parsable ${sbatch_opts[@]+"${sbatch_opts[@]}"} "$out/shards.sbatch") ||
    die "sbatch refused the array job ($out/shards.sbatch)"
job=${job%%;*}
wopt=()
[ "$wait" = 1 ] && wopt=(--wait)
echo "sweep-slurm: array job $job: $shards shards of '$tool $*'; merge after it; sweep in $out" >&2
set +e
mjob=$(sbatch --parsable ${sbatch_opts[@]+"${sbatch_opts[@]}"} ${wopt[@]+"${wopt[@]}"} \
    --dependency="afterany:$job" "$out/merge.sbatch")
mrc=$?
set -e
if [ "$wait" = 0 ]; then
    [ $mrc = 0 ] || die "sbatch refused the merge job ($out/merge.sbatch)"
    echo "sweep-slurm: merge job ${mjob%%;*}: watch with 'squeue -j $job,${mjob%%;*}'; then $out/merge.txt" >&2
    exit 0
fi
cat "$out/merge.txt" 2>/dev/null | grep -E '^(sweep|  shard|merged)' | grep -v ': complete' >&2 || true
echo "sweep-slurm: merge exit $mrc; merged into $out/merged.csv (report $out/merge.txt)" >&2
exit $mrc
