#!/bin/sh
# nightly-eval.sh - how far the A/B nightly can be trusted on this machine
# (the targets of BENCHMARKS.md "Issue 17"), each night in its own
# NIGHTLY_DIR under $EVAL_DIR (default results/host/nightly-eval):
#   scripts/nightly-eval.sh aa N             N A/A nights: A = this commit built in a
#                                            worktree, B = this tree's build (the same code)
#   scripts/nightly-eval.sh plant F N [VAR]  N nights with B slowed by the fraction F in
#                                            the variant VAR (default marlin_gemm_fused_u4)
#   scripts/nightly-eval.sh stored N         N nights of the stored-baseline mode (the
#                                            duration of the nightly before the A/B)
#   scripts/nightly-eval.sh bisect N [VAR]   N bisects over a synthetic history of 16
#                                            commits, the 11th planting a 10% slowdown of VAR
# Each appends one line per night to $EVAL_DIR/KIND.txt: its exit status, its
# wall time, and the A/B summary (or the bisect's answer and steps). The
# environment of scripts/nightly.sh applies (NIGHTLY_BENCH_ARGS, NIGHTLY_ROUNDS, ...).
set -u
root=$(pwd)
eval_dir=${EVAL_DIR:-results/host/nightly-eval}
case $eval_dir in /*) ;; *) eval_dir=$root/$eval_dir ;; esac
mkdir -p "$eval_dir"
kind=${1:-}
frac=
n=${3:-${2:-1}}
make all > /dev/null || exit 2
stamp() { date -u +%Y-%m-%dT%H:%M:%SZ; }

case "$kind" in
aa | plant | stored)
    [ "$kind" = plant ] && { frac=${2:?fraction}; n=${3:-1}; var=${4:-marlin_gemm_fused_u4}; }
    [ "$kind" = plant ] || n=${2:-1}
    i=1
    while [ "$i" -le "$n" ]; do
        d=$eval_dir/$kind${frac:+-$frac}-night$i
        rm -rf "$d"
        t0=$(date +%s)
        rc=0
        if [ "$kind" = stored ]; then
            # the first stored run becomes its baseline; the second is the night timed
            NIGHTLY_DIR=$d scripts/nightly.sh --stored > "$d.log" 2>&1
            t0=$(date +%s)
            NIGHTLY_DIR=$d scripts/nightly.sh --stored >> "$d.log" 2>&1 || rc=$?
        elif [ "$kind" = plant ]; then
            NIGHTLY_DIR=$d NIGHTLY_A_REV=HEAD NIGHTLY_PLANT=$var:$frac scripts/nightly.sh \
                > "$d.log" 2>&1 || rc=$?
        else
            NIGHTLY_DIR=$d NIGHTLY_A_REV=HEAD scripts/nightly.sh > "$d.log" 2>&1 || rc=$?
        fi
        t1=$(date +%s)
        summary=$(grep -h "A/B, " "$d"/ab/*/verdict.txt 2>/dev/null | tail -1)
        caught=
        [ "$kind" = plant ] && caught=" planted $var flagged: $(cat "$d"/*-ab.md 2>/dev/null | grep -c "^| regressed .*$var"); others flagged: $(grep '^| regressed' "$d"/*-ab.md 2>/dev/null | grep -vc "$var" || true)"
        echo "$(stamp) night $i exit $rc wall $((t1 - t0)) s;$caught $summary" | tee -a "$eval_dir/$kind${frac:+-$frac}.txt"
        i=$((i + 1))
    done
    ;;
bisect)
    n=${2:-1}
    var=${3:-marlin_gemm_fused_u4}
    make BUILD=build-plant PLANT=1 build-plant/bench > /dev/null || exit 2
    i=1
    while [ "$i" -le "$n" ]; do
        hist=$eval_dir/bisect-history$i
        planted=$(sh scripts/nightly-history.sh "$hist" 16 11 "$var:0.10") || exit 2
        t0=$(date +%s)
        rc=0
        out=$(cd "$hist" && NIGHTLY_DIR=$hist/nightly NIGHTLY_A_BENCH=$root/build-plant/bench \
            NIGHTLY_BISECT_BUILD="mkdir -p build && cp $root/build-plant/bench build/bench" \
            sh scripts/nightly.sh bisect HEAD~16 HEAD --bench "$var" 2>&1) || rc=$?
        t1=$(date +%s)
        found=no
        case "$out" in *"first bad commit $planted "*) found=yes ;; esac
        steps=$(echo "$out" | sed -n 's/.* in \([0-9]*\) steps.*/\1/p')
        echo "$(stamp) bisect $i exit $rc wall $((t1 - t0)) s; found the planted commit: $found; steps: ${steps:-?}; $out" |
            tee -a "$eval_dir/bisect.txt"
        cp "$hist"/nightly/bisect-*.md "$eval_dir/bisect$i.md" 2>/dev/null
        rm -rf "$hist"
        i=$((i + 1))
    done
    ;;
*)
    echo "usage: nightly-eval.sh aa N | plant FRACTION N [VARIANT] | stored N | bisect N [VARIANT]" >&2
    exit 2
    ;;
esac
