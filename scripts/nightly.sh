#!/bin/sh
# nightly.sh - the nightly regression run: build, measure the nightly suite
# into $NIGHTLY_DIR/DATE.csv (DATE.rHHMMSS.csv for another run that day),
# compare it with the accepted baseline (Markdown report DATE-report.md, a
# row appended to history.csv), re-measure what regressed in a confirmation
# pass (confirm/DATE.csv, report DATE-confirm.md). Exit 1 when a regression
# repeated, 0 otherwise, 2 when the run itself failed. The first run becomes
# the baseline.
#   scripts/nightly.sh            run, compare, record, draw
#   scripts/nightly.sh --accept   a new baseline: the median of the latest runs
# Then it redraws the plots in $NIGHTLY_DIR/plots: the history of every run
# against the baseline, and the roofline of this run.
# Environment: NIGHTLY_DIR (default results/nightly), NIGHTLY_CHIP (default
# host), NIGHTLY_BENCH_ARGS (default: the Llama-3-8B layers at M 1 and 16,
# fp4 and u4, seed space), NIGHTLY_CONFIRM (default 1; 0: no confirmation).
set -eu
dir=${NIGHTLY_DIR:-results/nightly}
chip=${NIGHTLY_CHIP:-host}
args="--chip $chip ${NIGHTLY_BENCH_ARGS:---suite llama3-8b --m 1,16 --formats fp4,u4}"
mkdir -p "$dir"
if [ "${1:-}" = "--accept" ]; then
    # the baseline: per benchmark, the median of the last NIGHTLY_ACCEPT_RUNS
    # runs (default 3), so that one fast or slow run does not set the bar
    runs=$(ls "$dir" | grep -E '^[0-9]{4}-[0-9]{2}-[0-9]{2}(\.r[0-9]{6})?\.csv$' | sort |
           tail -n "${NIGHTLY_ACCEPT_RUNS:-3}")
    [ -n "$runs" ] || { echo "nightly: no run in $dir to accept" >&2; exit 2; }
    make all >/dev/null
    # shellcheck disable=SC2046 # one argument per run file
    build/compare --median-of "$dir/baseline.csv" $(printf "$dir/%s " $runs) || exit 2
    echo "nightly: the baseline is the median of" $runs
    exit 0
fi
make all >/dev/null
day=$(date -u +%Y-%m-%d)
# DATE.csv; a second run on the same day is DATE.rHHMMSS.csv (sorts after it)
stamp=$day
[ ! -e "$dir/$day.csv" ] || stamp="$day.r$(date -u +%H%M%S)"
out="$dir/$stamp.csv"
# shellcheck disable=SC2086 # the arguments are meant to split
bench_rc=0
build/bench $args --quiet --out "$out" || bench_rc=$?
# bench: 1 is a finding (a kernel computed a wrong result), 2 a failed run
[ "$bench_rc" -le 1 ] || exit 2
rc=0
if [ ! -f "$dir/baseline.csv" ]; then
    cp "$out" "$dir/baseline.csv"
    echo "nightly: no baseline yet: $out is the baseline"
else
    mkdir -p "$dir/confirm"
    build/compare "$dir/baseline.csv" "$out" --report "$dir/$stamp-report.md" \
        --history "$dir/history.csv" --rerun-list "$dir/confirm/$stamp.rerun" || rc=$?
    # Confirmation pass: re-measure only what regressed, in fresh processes;
    # only regressions that repeat fail the night (a one-off on a noisy host
    # does not). NIGHTLY_CONFIRM=0 turns it off.
    if [ "$rc" -eq 1 ] && [ "${NIGHTLY_CONFIRM:-1}" != 0 ]; then
        conf="$dir/confirm/$stamp.csv"
        rm -f "$conf"
        while IFS= read -r line; do
            eval "build/bench $line --quiet --out \"\$conf\"" >/dev/null || [ $? -eq 1 ] || exit 2
        done < "$dir/confirm/$stamp.rerun"
        rc=0
        build/compare "$dir/baseline.csv" "$conf" --report "$dir/$stamp-confirm.md" \
            >/dev/null || rc=$?
        echo "nightly: confirmation pass: $(grep -c '^| regressed' "$dir/$stamp-confirm.md" || true) of" \
             "$(wc -l < "$dir/confirm/$stamp.rerun") regressions repeated ($dir/$stamp-confirm.md)"
    fi
fi
[ "$rc" -le 1 ] || exit "$rc"
if [ "$bench_rc" -eq 1 ]; then
    echo "nightly: a kernel computed wrong results in $out (status wrong): the night fails" >&2
    rc=1
fi
# the pictures: every run against the baseline, and this run's roofline
build/plot history --nightly-dir "$dir" --out "$dir/plots" || exit 2
build/plot roofline --chip "$chip" --results "$out" --out "$dir/plots" || exit 2
exit "$rc"
