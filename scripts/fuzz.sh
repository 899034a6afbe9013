#!/bin/sh
# fuzz.sh - run every parser's fuzz target (built by `make fuzz`) for a few
# seconds each, from seed corpora made of the project's committed files.
# A crash, a leak or undefined behaviour stops the run and fails it; the
# input that did it is left in FUZZ_DIR as crash-* / leak-* (libFuzzer).
# usage: scripts/fuzz.sh [FUZZ_BUILD_DIR] [SECONDS_PER_TARGET]
set -eu
B=${1:-build-fuzz}
secs=${2:-5}
corpus="$B/corpus"
scratch="$B/scratch"
mkdir -p "$scratch"
seed() { # seed TARGET FILE... : the first 8 KiB of each file (links followed)
    t=$1; shift
    mkdir -p "$corpus/$t"
    for f in "$@"; do
        [ -e "$f" ] || continue
        head -c 8192 "$f" > "$corpus/$t/seed-$(echo "$f" | tr '/.' '__')"
    done
}
seed results results/host/examples/nightly/*.csv results/nightly/*.csv
seed table results/*/table.csv
seed chips harness/chips.csv results/*/chip.csv
seed model results/*/model.csv
seed suite tests/fuzz/seeds/suite.csv
seed public harness/public-figures.csv
seed tiers harness/llm-figures.csv
seed manifest tests/data/shard-*-of-*.manifest.csv tests/fuzz/seeds/merge-manifest-*.csv
seed moe_results tests/data/moe-*.csv results/devcpu/moe-*.csv
seed routing tests/fuzz/seeds/routing.csv
seed weight_cache tests/fuzz/seeds/weight-cache.bin
# merge: MANIFEST %% RESULTS %% MANIFEST of real shards (tests/fuzz/fuzz_merge.c)
seed merge tests/fuzz/seeds/merge-*
mkdir -p "$corpus/compare" "$corpus/cli"
a=results/host/examples/nightly/baseline.csv
b=$(ls results/host/examples/nightly/2026-*.csv | head -n 1)
{ head -n 20 "$a"; printf '%%%%\n'; head -n 20 "$b"; } > "$corpus/compare/seed-pair"
printf '1x4096x14336' > "$corpus/cli/shape"
printf 'fp4,u4,trellis3' > "$corpus/cli/formats"
printf 'marlin_gemm_fp4 64 64 32 0 1' > "$corpus/cli/candidate"
status=0
ok=0
bad=0
for t in results table chips suite model compare cli public manifest merge moe_results routing \
    weight_cache tiers; do
    printf 'fuzz_%s: ' "$t"
    if TMPDIR="$scratch" "$B/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=16384 \
        -artifact_prefix="$B/" -print_final_stats=1 "$corpus/$t" > "$B/fuzz_$t.log" 2>&1; then
        grep -E '^stat::number_of_executed_units' "$B/fuzz_$t.log" | sed 's/.*: */executions: /'
        ok=$((ok + 1))
    else
        bad=$((bad + 1))
        echo "FAILED (see $B/fuzz_$t.log)"
        tail -n 30 "$B/fuzz_$t.log"
        status=1
    fi
    rm -f "$scratch"/mq-fuzz-*
done
echo "fuzz: $ok passed, $bad failed"
exit $status
