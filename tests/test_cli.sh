#!/bin/sh
# test_cli.sh - kernel-bench and bench from the outside: bad arguments give
# a one-line error naming the problem and exit code 2; a tiny run verifies,
# times and writes its CSV (kernel-bench atomically, with no temporary file
# left behind; bench appending to the results store).
# usage: test_cli.sh BUILD_DIR
B=${1:-build}
. "$(dirname "$0")/../scripts/portable.sh"
bench="$B/kernel-bench"
passed=0; failed=0
check() { # check "description" condition...
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
expect_usage_error() { # expect_usage_error "needle" args...   (runs $bench)
    needle=$1; shift
    out=$("$bench" "$@" 2>&1); rc=$?
    lines=$(printf '%s\n' "$out" | nlines)
    check "'$*' exits 2 (got $rc)" [ "$rc" -eq 2 ]
    check "'$*' prints one line (got $lines)" [ "$lines" -eq 1 ]
    case "$out" in *"$needle"*) ok=1 ;; *) ok=0 ;; esac
    check "'$*' names the problem: expected '$needle' in '$out'" [ "$ok" -eq 1 ]
}
expect_usage_error "unknown option '--frobnicate'" --frobnicate
expect_usage_error "bad shape" --shape 4x4
expect_usage_error "bad shape" --shape 0x64x64
expect_usage_error "unknown format 'int3'" --formats int3
expect_usage_error "unknown variant 'nope'" --candidate "nope 64 64 32 0 1"
expect_usage_error "missing value for '--group'" --group
expect_usage_error "K=100 is not a multiple of the group size 32" --shape 1x64x100 --group 32 --probe-trials 1

dir=$(mktemp -d)
out=$("$bench" --shape 3x40x256 --formats u4 --group 64 --min-time 0.01 --probe-trials 1 \
      --candidate "marlin_gemm_fused_u4 8 32 64 0 1" --candidate "mlx_qmm_splitk 32 32 32 0 2" \
      --candidate "marlin_gemm_fused_u4 12 32 64 0 1" --csv "$dir/r.csv" 2>&1); rc=$?
check "a tiny run exits 0 (got $rc)" [ "$rc" -eq 0 ]
case "$out" in *"best u4 M=3"*) ok=1 ;; *) ok=0 ;; esac
check "the run names the best candidate" [ "$ok" -eq 1 ]
case "$out" in *"illegal: tile_m=12"*) ok=1 ;; *) ok=0 ;; esac
check "an illegal candidate prints its reason" [ "$ok" -eq 1 ]
rows=$(nlines < "$dir/r.csv" 2>/dev/null || echo 0)
check "the CSV has a header and 3 rows (got $rows lines)" [ "$rows" -eq 4 ]
check "the CSV's rows say ok twice" [ "$(grep -c '"ok"' "$dir/r.csv")" -eq 2 ]
check "no temporary file is left" [ "$(ls "$dir" | wc -l)" -eq 1 ]
"$bench" --shape 1x32x64 --group 32 --formats fp4 --min-time 0.01 --probe-trials 1 \
    --candidate "marlin_gemm_fused_fp4 8 32 32 0 1" --csv "$dir/missing/r.csv" >/dev/null 2>"$dir/err"; rc=$?
check "an unwritable CSV path exits 2 (got $rc)" [ "$rc" -eq 2 ]
check "and says which file" grep -q "missing/r.csv" "$dir/err"
rm -rf "$dir"

bench="$B/bench"
expect_usage_error "unknown option '--frobnicate'" --frobnicate
expect_usage_error "unknown chip 'm9' (known: host, m1, m1pro" --chip m9
expect_usage_error "unknown suite 'llama5'" --suite llama5
expect_usage_error "bad M list '1,x'" --m 1,x
expect_usage_error "bad --space" --space half
expect_usage_error "K=100 is not a multiple of the group size 128" --shape 1x64x100
# (on a Mac, run-tests.sh makes Metal unavailable to every test but the Metal ones)
expect_usage_error "backend metal: unavailable: " --backend metal
expect_usage_error "bad candidate" --candidate "marlin_gemm_fp4 64"
dir=$(mktemp -d)
printf 'chip,field,value,source\nm1,gpu_cores,8,x\n' > "$dir/chips.csv"
expect_usage_error "chip m1 has no tg_mem_bytes" --chips "$dir/chips.csv" --chip m1
out=$("$bench" --chip m4max --shape 1x64x256 --space full --explain 2>&1); rc=$?
check "--explain exits 0 (got $rc)" [ "$rc" -eq 0 ]
case "$out" in *"rejected marlin_gemm_fp4 tm=16"*"already covers M=1"*) ok=1 ;; *) ok=0 ;; esac
check "--explain lists rejected candidates with their reasons" [ "$ok" -eq 1 ]
out=$("$bench" --chip m4max --shape 3x64x256 --formats u4 --budget 0.01 \
      --candidate "marlin_gemm_fused_u4 8 64 64 0 1" --candidate "marlin_gemm_fused_u4 12 64 64 0 1" \
      --out "$dir/r.csv" 2>&1); rc=$?
check "bench on two candidates exits 0 (got $rc)" [ "$rc" -eq 0 ]
case "$out" in *"illegal: tile_m=12"*"1 ok, 0 wrong, 0 error, 1 illegal"*) ok=1 ;; *) ok=0 ;; esac
check "bench reports the refused candidate and the counts" [ "$ok" -eq 1 ]
check "the results file has a comment, a header and 2 rows" [ "$(wc -l < "$dir/r.csv")" -eq 4 ]
# chip host: the machine's probes and, per problem, a cold read of the best row's size;
# --no-probes takes neither (the nightly's A/B rounds)
out=$("$bench" --chip host --shape 1x64x256 --formats u4 --budget 0.01 \
      --candidate "marlin_gemm_fused_u4 8 64 64 0 1" --out "$dir/p.csv" 2>&1); rc=$?
case "$out" in *"machine probes"*"a cold read of the same"*) ok=1 ;; *) ok=0 ;; esac
check "bench --chip host prints the machine's probes and the sized cold read (rc $rc)" [ "$ok" -eq 1 ]
out=$("$bench" --chip host --no-probes --shape 1x64x256 --formats u4 --budget 0.01 \
      --candidate "marlin_gemm_fused_u4 8 64 64 0 1" --out "$dir/p.csv" 2>&1); rc=$?
case "$out" in *"probes"*|*"a cold read"*) ok=0 ;; *"1 ok, 0 wrong"*) ok=1 ;; *) ok=0 ;; esac
check "bench --no-probes measures and verifies, and takes no probe (rc $rc: $out)" [ "$ok" -eq 1 ]
out=$("$bench" --chip m4max --shape 3x64x256 --formats u4 --budget 0.01 --resume \
      --candidate "marlin_gemm_fused_u4 8 64 64 0 1" --out "$dir/r.csv" 2>&1); rc=$?
case "$out" in *"0 ok, 0 wrong, 0 error, 0 illegal, 1 skipped"*) ok=1 ;; *) ok=0 ;; esac
check "--resume skips what this build measured (rc $rc)" [ "$ok" -eq 1 ]
printf '"broken\n' >> "$dir/r.csv"
out=$("$bench" --chip m4max --shape 3x64x256 --formats u4 --budget 0.01 \
      --candidate "marlin_gemm_fused_u4 8 64 64 0 1" --out "$dir/r.csv" 2>&1); rc=$?
case "$out" in *"r.csv:5: malformed CSV"*) ok=1 ;; *) ok=0 ;; esac
check "a damaged results file is refused with its line, nothing appended (rc $rc)" [ "$ok" -eq 1 ] 
check "and exits 2 (bad input; got $rc)" [ "$rc" -eq 2 ]
rm -rf "$dir"

bench="$B/tune"
expect_usage_error "--chip is required" --suite smoke
expect_usage_error "unknown chip 'm9'" --chip m9
expect_usage_error "--search exhaustive needs a backend that is the chip" --chip m4max --search exhaustive
expect_usage_error "unknown suite 'gpt9'" --chip m4max --suite gpt9
dir=$(mktemp -d)
out=$("$bench" --chip m4max --suite smoke --m 1,16 --out-dir "$dir" 2>&1); rc=$?
check "tune --chip m4max exits 0 (got $rc)" [ "$rc" -eq 0 ]
case "$out" in *"predicted table for m4max"*"defaults fitted on public figures"*) ok=1 ;; *) ok=0 ;; esac
check "the summary says the table is predicted, from default coefficients" [ "$ok" -eq 1 ]
check "table.csv, table.h and model.csv are written" \
    test -s "$dir/table.csv" -a -s "$dir/table.h" -a -s "$dir/model.csv"
cat > "$dir/use.c" <<'C'
#include <stdio.h>
#include "mq.h"
#include "table.h"
int main(void)
{
    mq_table *t;
    mq_error e;
    if (mq_table_from_rows(mq_table_m4max_chip, mq_table_m4max_rows, mq_table_m4max_count, &t, &e))
        return 1;
    mq_problem p = {MQ_FMT_FP4, 1, 256, 512, 128};
    mq_lookup_level lv;
    mq_table_lookup(t, &p, NULL, &lv);
    printf("%s", mq_lookup_level_name(lv));
    if (mq_table_set_model(t, mq_table_m4max_model, mq_table_m4max_model_count, &e))
        return 1;
    mq_problem unseen = {MQ_FMT_FP4, 3, 5120, 13824, 128};
    mq_table_lookup(t, &unseen, NULL, &lv);
    printf(" %s\n", mq_lookup_level_name(lv));
    mq_table_free(t);
    return 0;
}
C
san=""  # a sanitizer build's library needs the sanitizer runtimes to link
nm "$B/libmq.a" 2>/dev/null | grep -q __asan && san="-fsanitize=address,undefined"
# shellcheck disable=SC2086 # the flags are meant to split
${CC:-gcc} -std=c11 -Wall -Wextra -Werror $san $(dep_cflags) -Ikernels -I"$dir" "$dir/use.c" "$B/libmq.a" \
    $(dep_ldflags) -lcsv -lm -pthread -o "$dir/use" 2>"$dir/cc.err"; rc=$?
check "the generated table.h compiles into a program (rc $rc: $(head -c 300 "$dir/cc.err"))" [ "$rc" -eq 0 ]
check "its compiled-in table answers a suite shape exactly and, with its compiled-in cost model, an unseen shape by the model" \
    [ "$("$dir/use" 2>&1)" = "exact model" ]
rm -rf "$dir"

# --replay's own options without --replay: refused in one line, exit 2, nothing made
for opt in "--seeds 3" "--strategy random" "--min-candidates 5" "--trace $dir/tr.csv"; do
    # shellcheck disable=SC2086 # opt: an option and its value
    out=$("$B/tune" --chip host --suite smoke $opt --out-dir "$dir/noreplay" 2>&1); rc=$?
    ok=0
    [ "$rc" -eq 2 ] && echo "$out" | grep -q "are for --replay" && [ ! -e "$dir/noreplay" ] &&
        [ ! -e "$dir/tr.csv" ] && ok=1
    check "tune $opt without --replay: exit 2 naming --replay, nothing made (got $rc: $out)" \
        [ "$ok" -eq 1 ]
done
# tune --explain: every input checked, the work listed, nothing measured or made
out=$("$B/tune" --chip m4max --suite smoke --explain --out-dir "$dir/explained" 2>&1); rc=$?
check "tune --explain exits 0 (got $rc: $out)" [ "$rc" -eq 0 ]
case "$out" in *"units, estimated"*"shard 1/1"*) ok=1 ;; *) ok=0 ;; esac
check "tune --explain lists the work: $out" [ "$ok" -eq 1 ]
check "tune --explain creates nothing" [ ! -e "$dir/explained" ]
out=$("$B/tune" --chip host --suite smoke --shard 2/3 --explain --out-dir "$dir/explained" 2>&1); rc=$?
case "$out" in *"shard 3/3"*) ok=1 ;; *) ok=0 ;; esac
check "tune --shard 2/3 --explain lists each shard's share (rc $rc): $out" [ "$rc" -eq 0 ] && [ "$ok" -eq 1 ]
expect_usage_error "unknown format 'fp5'" --chip m4max --formats fp5 --explain
# tune --check: every candidate timed, then the pick, the sweep's best and the best
# baseline re-timed in interleaved rounds (the sweep's minimum is biased low)
dir=$(mktemp -d)
printf 'model,layer,N,K\nx,a,256,512\n' > "$dir/tuned.csv"
printf 'model,layer,N,K\nx,b,384,512\n' > "$dir/unseen.csv"
"$B/tune" --chip host --suite "$dir/tuned.csv" --m 1,4 --formats fp4 --evals 8 --budget 0.01 \
    --quiet --out-dir "$dir/t" >/dev/null 2>&1
out=$("$B/tune" --chip host --check "$dir/unseen.csv" --m 1,4 --formats fp4 --budget 0.01 \
    --out-dir "$dir/t" 2>&1); rc=$?
check "tune --check exits 0 (got $rc: $out)" [ "$rc" -eq 0 ]
case "$out" in *"2 shapes not in the tuning suite"*"re-timed (3 interleaved rounds"*"2 shapes: the picks are"*) ok=1 ;; *) ok=0 ;; esac
check "tune --check reports the sweep and the re-timed comparison on both shapes: expected '2 shapes not in the tuning suite ... re-timed (3 interleaved rounds ... 2 shapes' in: $out" [ "$ok" -eq 1 ]
rows=$(grep -c '"ok"' "$dir/t/check-results.csv" 2>/dev/null || echo 0)
sweep=$(printf '%s\n' "$out" | grep -c '^fp4 ')
check "the re-timings are not stored: one row per candidate ($rows rows, $sweep shapes)" \
    [ "$rows" -gt 10 -a "$(cut -d, -f8-18 "$dir/t/check-results.csv" | sort | uniq -d | wc -l)" -eq 0 ]
rm -rf "$dir"
# the guided search times every variant that serves the format at least once per shape
# (its seed configuration), however few rows its first model fits had
dir=$(mktemp -d)
printf 'model,layer,N,K\nx,a,256,512\n' > "$dir/one.csv"
"$B/tune" --chip host --suite "$dir/one.csv" --m 1 --formats fp4 --evals 12 --budget 0.005 \
    --quiet --out-dir "$dir/t" >/dev/null 2>&1
want=$("$B/bench" --chip host --shape 1x256x512 --formats fp4 --space full --explain 2>/dev/null |
    awk '$1 == "legal" {print $2}' | sort -u | tr '\n' ' ')
got=$(grep '"ok"' "$dir/t/tune-results.csv" 2>/dev/null | cut -d, -f13 | tr -d '"' | sort -u | tr '\n' ' ')
check "tune --evals 12 times every variant serving fp4 at least once: expected '$want', got '$got'" \
    [ -n "$want" -a "$want" = "$got" ]
rm -rf "$dir"
# moe-bench: bad input named in one line with exit 2; a tiny run verifies, times, writes
bench="$B/moe-bench"
dir=$(mktemp -d)
expect_usage_error "unknown MoE suite 'llama'" --suite llama
expect_usage_error "bad --format 'fp4'" --format fp4
expect_usage_error "bad --tokens" --tokens 1,x
expect_usage_error "none.csv: cannot open" --routing "$dir/none.csv" --out "$dir/x.csv"
printf 'token,slot,expert,prob\n0,0,3,0.6\n0,1,200,0.4\n' > "$dir/bad.csv"
expect_usage_error "bad.csv:3: expert '200' is not in 0..7" --suite mixtral-8x7b --routing "$dir/bad.csv" --out "$dir/x.csv"
printf 'token,slot,expert,prob\n0,0,3,0.6\n0,0,4,0.4\n' > "$dir/dup.csv"
expect_usage_error "dup.csv:3: token 0 slot 0 given twice" --suite mixtral-8x7b --routing "$dir/dup.csv" --out "$dir/x.csv"
printf 'token,slot,expert,prob\n0,0,3,0.6\n0,1,3,0.4\n' > "$dir/twice.csv"
expect_usage_error "routes to expert 3 twice" --suite mixtral-8x7b --routing "$dir/twice.csv" --out "$dir/x.csv"
printf 'token,slot,expert,prob\n0,0,1,0.7\n0,1,2,0.3\n' > "$dir/k2.csv"
expect_usage_error "2 experts per token, but qwen3-30b-a3b routes 8" --routing "$dir/k2.csv" --out "$dir/x.csv"
out=$("$bench" --suite qwen3-30b-a3b --tokens 1,3 --max-candidates 2 --budget 0.005 \
      --rotations 2 --threads 2 --out "$dir/m.csv" 2>&1); rc=$?
check "a tiny moe-bench run exits 0 (got $rc: $out)" [ "$rc" -eq 0 ]
case "$out" in *"3 tokens"*"speed-up"*) ok=1 ;; *) ok=0 ;; esac
check "moe-bench prints fused against unfused per token count" [ "$ok" -eq 1 ]
check "moe-bench wrote 2 x (2 fused + 1 unfused) ok rows" [ "$(grep -c ',"ok",' "$dir/m.csv")" -eq 6 ]
check "and no temporary file" [ "$(ls "$dir" | grep -c tmp)" -eq 0 ]
"$bench" --suite qwen3-30b-a3b --tokens 1 --max-candidates 1 --budget 0.005 --rotations 1 \
    --threads 2 --out "$dir/m.csv" > /dev/null 2>&1
check "a second run appends its 2 rows to the same file" [ "$(grep -c ',"ok",' "$dir/m.csv")" -eq 8 ]
printf 'a,b\n1,2\n' > "$dir/other.csv"
expect_usage_error "other.csv: not a moe-bench results file" --tokens 1 --out "$dir/other.csv"
{ echo token,slot,expert,prob; for t in 0 1; do for k in 0 1 2 3 4 5 6 7; do
    echo "$t,$k,$((k * 3 + t)),0.125"; done; done; } > "$dir/rec.csv"
out=$("$bench" --routing "$dir/rec.csv" --max-candidates 1 --budget 0.005 \
      --rotations 1 --threads 2 --out "$dir/r.csv" 2>&1); rc=$?
check "a recorded routing runs (exit $rc: $out)" [ "$rc" -eq 0 ]
check "its rows name the file and its 2 tokens" grep -q '"qwen3-30b-a3b","trellis3",2,128,8,.*rec.csv",1,0.125,16,' "$dir/r.csv"
expect_usage_error "unknown backend 'tpu'" --backend tpu --out "$dir/x.csv"
expect_usage_error "unknown chip 'nosuch'" --chip nosuch --out "$dir/x.csv"
# --candidate: a results file's candidate text, timed instead of the space
expect_usage_error "--candidate: bad MoE candidate 'lane_trellis 8 64 256 0 4'" \
    --candidate "lane_trellis 8 64 256 0 4" --out "$dir/x.csv"
expect_usage_error "unknown variant 'nope'" \
    --candidate "gemm_trellis_moe[nope tm=1 tn=64 tk=128 tg=0 sk=1] i_split=1 fuse_gate_up=1" \
    --out "$dir/x.csv"
check "a bad --candidate creates no results file" [ ! -e "$dir/x.csv" ]
named='gemm_trellis_moe[gemv_trellis_decode tm=1 tn=64 tk=128 tg=0 sk=1] i_split=2 fuse_gate_up=1'
out=$("$bench" --suite qwen3-30b-a3b --tokens 1 --candidate "$named" --budget 0.005 \
      --rotations 1 --threads 2 --out "$dir/n.csv" 2>&1); rc=$?
check "moe-bench --candidate exits 0 (got $rc: $out)" [ "$rc" -eq 0 ]
check "it timed the named candidate alone beside the baseline (2 ok rows)" \
    [ "$(grep -c ',"ok",' "$dir/n.csv")" -eq 2 ]
check "its row names the candidate as given" grep -qF "\"$named\",\"ok\"" "$dir/n.csv"
# a kernel that leaves a meeting's counter set (planted in a copy of metal/)
# computed a wrong result: its row says so and moe-bench exits 1
mdir=$(mktemp -d)
cp -R "$(dirname "$0")/../metal/." "$mdir/"
sed 's/atomic_store_explicit(cnt, 0u, memory_order_relaxed);/(void)0;/' \
    "$mdir/mq_meet.h" > "$mdir/mq_meet.h.tmp" && mv "$mdir/mq_meet.h.tmp" "$mdir/mq_meet.h"
parts='gemm_trellis_moe[lane_trellis tm=8 tn=64 tk=256 tg=0 sk=4] i_split=1 fuse_gate_up=0'
out=$(MQ_METAL_DIR="$mdir" MQ_MSL_CACHE="$mdir/cache" "$bench" --backend msl-cpu \
      --suite qwen3-30b-a3b --tokens 1 --threads 2 --candidate "$parts" --out "$dir/w.csv" 2>&1)
rc=$?
check "a meeting's counter left set makes moe-bench exit 1 (got $rc: $out)" [ "$rc" -eq 1 ]
check "its row is wrong, naming the counter" grep -q '"wrong","the lane block.s gate/up left tile counter' "$dir/w.csv"
rm -rf "$mdir"
# the GPU path on the CPU executor: the MSL kernels of 2 fused candidates and the
# unfused baseline's dense launches verified end to end, not timed
out=$("$bench" --backend msl-cpu --suite qwen3-30b-a3b --tokens 3 --max-candidates 2 \
      --threads 2 --out "$dir/g.csv" 2>&1); rc=$?
check "moe-bench --backend msl-cpu exits 0 (got $rc: $out)" [ "$rc" -eq 0 ]
check "its 3 rows are verified, none timed, the backend named" \
    [ "$(grep -c ',"verified",.*,"msl-cpu",' "$dir/g.csv")" -eq 3 ]
check "and the unfused baseline ran as dense launches" grep -q '"unfused","unfused\[per expert: dense' "$dir/g.csv"
check "and the first candidate is the lane block's" grep -q '"fused","gemm_trellis_moe\[lane_trellis[^"]*","verified"' "$dir/g.csv"
# the MoE rows of a dispatch table: tune --moe-results takes the fastest verified fused
# rows measured here (the CPU model on this host) into the table it writes
printf 'model,layer,N,K\nx,a,256,512\n' > "$dir/one.csv"
out=$("$B/tune" --chip host --suite "$dir/one.csv" --m 1 --formats fp4 --evals 4 --budget 0.005 \
      --quiet --threads 2 --out-dir "$dir/t" --moe-results "$dir/m.csv" 2>&1); rc=$?
check "tune --moe-results exits 0 (got $rc: $out)" [ "$rc" -eq 0 ]
check "its table has the MoE layer's row (experts 128, top_k 8, from 1 token)" \
    grep -q '^"trellis3","128","2048","768","1",.*"measured-moe",.*"128","8","[0-9]*","[01]","0","0"$' "$dir/t/table.csv"
out=$("$B/tune" --chip host --suite "$dir/one.csv" --m 1 --formats fp4 --evals 4 --quiet \
      --out-dir "$dir/t" --moe-results "$dir/g.csv" 2>&1); rc=$?
ok=0; [ "$rc" -eq 2 ] && case "$out" in *"no verified, timed fused rows of backend cpu"*) ok=1 ;; esac
check "rows measured on another backend are refused, exit 2 (got $rc: $out)" [ "$ok" -eq 1 ]
# rows of another kernel build: said, and with --strict refused before anything is made
check "moe-bench's rows record its kernel build" grep -q ',"k[0-9a-f]*-[0-9a-f]*"$' "$dir/m.csv"
sed 's/,"k[0-9a-f]*-[0-9a-f]*"$/,"k00000000-0"/' "$dir/m.csv" > "$dir/m-old.csv"
out=$("$B/tune" --chip host --suite "$dir/one.csv" --m 1 --formats fp4 --evals 4 --budget 0.005 \
      --quiet --threads 2 --out-dir "$dir/t-old" --moe-results "$dir/m-old.csv" 2>&1); rc=$?
ok=0; [ "$rc" -eq 0 ] && case "$out" in *"warning: $dir/m-old.csv was measured on kernel build k00000000-0"*) ok=1 ;; esac
check "another build's MoE rows: a warning naming the file and build, exit 0 (got $rc: $out)" \
    [ "$ok" -eq 1 ]
out=$("$B/tune" --chip host --suite "$dir/one.csv" --m 1 --formats fp4 --evals 4 --quiet \
      --strict --out-dir "$dir/t-strict" --moe-results "$dir/m-old.csv" 2>&1); rc=$?
ok=0; [ "$rc" -eq 2 ] && [ ! -e "$dir/t-strict" ] && case "$out" in *"k00000000-0"*) ok=1 ;; esac
check "with --strict: exit 2, nothing made (got $rc: $out)" [ "$ok" -eq 1 ]
out=$("$B/tune" --chip host --suite "$dir/one.csv" --m 1 --formats fp4 --quiet \
      --out-dir "$dir/t" --moe-results "$dir/none.csv" 2>&1); rc=$?
ok=0; [ "$rc" -eq 2 ] && case "$out" in *"none.csv"*) ok=1 ;; esac
check "a missing --moe-results file: exit 2 naming it (got $rc: $out)" [ "$ok" -eq 1 ]
rm -rf "$dir"
echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
