#!/bin/sh
# nightly.sh - the nightly regression run: build, measure the nightly suite
# into $NIGHTLY_DIR/DATE.csv, compare it with the accepted baseline (Markdown
# report DATE-report.md, a row appended to history.csv). Exit 1 when
# something regressed, 0 otherwise. The first run becomes the baseline.
#   scripts/nightly.sh            run, compare, record
#   scripts/nightly.sh --accept   make the latest run the baseline
# Environment: NIGHTLY_DIR (default results/nightly), NIGHTLY_BENCH_ARGS
# (default: the Llama-3-8B layers at M 1 and 16, fp4 and u4, seed space).
set -eu
dir=${NIGHTLY_DIR:-results/nightly}
args=${NIGHTLY_BENCH_ARGS:---suite llama3-8b --m 1,16 --formats fp4,u4}
mkdir -p "$dir"
if [ "${1:-}" = "--accept" ]; then
    latest=$(ls "$dir" | grep -E '^[0-9]{4}-[0-9]{2}-[0-9]{2}\.csv$' | sort | tail -n 1)
    [ -n "$latest" ] || { echo "nightly: no run in $dir to accept" >&2; exit 2; }
    cp "$dir/$latest" "$dir/baseline.csv.tmp" && mv "$dir/baseline.csv.tmp" "$dir/baseline.csv"
    echo "nightly: $dir/$latest is the baseline now"
    exit 0
fi
make all >/dev/null
day=$(date -u +%Y-%m-%d)
out="$dir/$day.csv"
rm -f "$out"
# shellcheck disable=SC2086 # the arguments are meant to split
build/bench $args --quiet --out "$out"
if [ ! -f "$dir/baseline.csv" ]; then
    cp "$out" "$dir/baseline.csv"
    echo "nightly: no baseline yet: $out is the baseline"
    exit 0
fi
build/compare "$dir/baseline.csv" "$out" --report "$dir/$day-report.md" --history "$dir/history.csv"
