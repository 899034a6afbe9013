#!/bin/sh
# refit-check.sh - the H100 cost model refitted on today's kernels, checked
# one unseen shape at a time: for each shape of the unseen suite, fit on the
# other rows (the tune's, the grid's and the other four unseen shapes' every
# candidate), then report the held-out shape's MAPE and Spearman and the
# lookup's pick (TABLE with that model) against the shape's measured best.
# usage: scripts/refit-check.sh DIR TABLE ROWS...
#   DIR    where the fits and reports go
#   TABLE  the dispatch table to look up with (results/h100/grid-k3f3afccc/table.csv,
#          or the published results/h100/table.csv)
#   ROWS   results files: the unseen suite's every candidate (fp4, M 1,16) and
#          the fit rows (gpu-run.sh refit, the published tune's rows)
set -eu
B=${BUILD:-build}
[ $# -ge 3 ] || { echo "usage: scripts/refit-check.sh DIR TABLE ROWS..." >&2; exit 2; }
D=$1 table=$2
shift 2
mkdir -p "$D"
all="$D/all-rows.csv"
# the rows of every file as one (the results header once)
awk 'FNR == 1 && NR > 1 { next } FNR == 2 && NR > 2 { next } { print }' "$@" > "$all"
lsum=0 nl=0
# the unseen suite's shapes (harness/suites.c)
for s in gemma2-9b,down_proj,3584,14336 mistral-nemo-12b,q_proj,4096,5120 \
         phi3-medium,gate_up_proj,17920,5120 qwen2.5-14b,down_proj,5120,13824 \
         deepseek-v2-lite,expert_gate_up,1408,2048; do
    name=${s%%,*} N=$(echo "$s" | cut -d, -f3) K=$(echo "$s" | cut -d, -f4)
    printf 'model,layer,N,K,M\n%s,\n' "$s" > "$D/hold-$name.csv"
    "$B/model" fit --chip h100 --holdout "$D/hold-$name.csv" --out "$D/model-$name.csv" "$all" \
        > "$D/fit-$name.txt"
    awk -F, -v n="\"$N\"" -v k="\"$K\"" 'NR <= 2 || ($10 == n && $11 == k)' "$all" \
        > "$D/rows-$name.csv"
    "$B/model" lookup --chip h100 --table "$table" --model "$D/model-$name.csv" \
        "$D/rows-$name.csv" > "$D/lookup-$name.txt" 2>&1
    echo "== $name (N=$N K=$K) held out"
    grep -E "^held-out shapes: [0-9]+ rows" "$D/fit-$name.txt"
    grep -E "^  (fp4|u4) " "$D/lookup-$name.txt"
    # each pick's time over the best (the last column, "+x.x%")
    for p in $(awk '$1 ~ /^(fp4|u4)$/ && $NF ~ /%$/ { v = $NF; sub(/%/, "", v); print v }' \
               "$D/lookup-$name.txt"); do
        lsum=$(awk -v s="$lsum" -v p="$p" 'BEGIN { print s + log(1 + p / 100) }')
        nl=$((nl + 1))
    done
done
awk -v s="$lsum" -v n="$nl" 'BEGIN { printf "lookup over %d problems: %.1f%% slower than the measured best (geometric mean)\n", n, 100 * (exp(s / n) - 1) }'
