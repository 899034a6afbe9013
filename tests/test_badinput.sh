#!/bin/sh
# test_badinput.sh - every tool, fed bad input the way a user (or a broken
# file) would: each invocation must exit 2, print exactly one line, name the
# value, field or file at fault, and leave every file in its working
# directory byte for byte as it was (nothing created, nothing half written).
# The cases are a table: TOOL|NEEDLE|ARGUMENTS (ARGUMENTS split by the shell;
# files named are made in the scratch directory below).
# usage: test_badinput.sh BUILD_DIR
B=$(cd "${1:-build}" && pwd)
root=$(pwd)
. "$root/scripts/portable.sh"
passed=0; failed=0
check() {
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
d=$(mktemp -d)
cd "$d" || exit 1
# ---- fixtures -------------------------------------------------------------
"$B/bench" --chip m4max --shape 3x64x256 --formats u4 --budget 0.01 --max-reps 5 \
    --candidate "marlin_gemm_fused_u4 8 64 64 0 1" --out good.csv >/dev/null 2>&1
sed 's/^"1",/"9",/' good.csv > newer.csv                       # a schema from the future
{ cat good.csv; printf '"broken\n'; } > malformed.csv        # an unterminated quote
{ head -n 2 good.csv; printf '1,"0.4.0","r","h","d","m4max","cpu","u4",3,64,256,64,"marlin_gemm_fused_u4",8,64,64,0,1,"ok","",1e-3,1e-3,1e-3,0,1e-3,1e-3,1,1,1,"1e-3"\n'; } > oknumbers.csv
sed 's/,3,64,256,64,/,3,4294967552,256,64,/' oknumbers.csv > wrapped.csv   # N past 2^32
sed 's/,"ok","",1e-3,/,"ok","",nan,/' oknumbers.csv > nanmedian.csv
printf 'model,layer,N,K\nx,y,64,\000256\n' > nul.csv            # a NUL byte in a field
sed 's/^m4max,gpu_cores,40,/m4max,gpu_cores,nan,/' "$root/harness/chips.csv" > nanchips.csv
sed 's/^m4max,mem_bw_gbs,[^,]*,/m4max,mem_bw_gbs,inf,/' "$root/harness/chips.csv" > infchips.csv
printf 'term,variant,value,unit\nn_holdout,,1e10,rows\n' > hugemodel.csv
printf 'term,variant,value,unit\nn_fit,,1e20,rows\n' > fitmodel.csv
cp "$root/results/m4max/model.csv" goodmodel.csv
printf 'just some text\n' > file                               # a file where a directory should be
mkdir -p garbage/host foreign/host empty/host
printf 'not,a,table\n' > garbage/host/table.csv
"$B/tune" --chip m4max --suite smoke --m 1 --out-dir foreign/m4 >/dev/null 2>&1
cp -L foreign/m4/table.csv foreign/host/table.csv              # m4max's table where host's belongs
sed 's/^# cost-model: term traffic /# cost-model: term launch /' foreign/host/table.csv > badterm.csv
pubhead='chip,format,group,M,N,K,variant,tile_m,tile_n,tile_k,num_threadgroups,split_k,published_ms,role,source'
pubrow='u4,64,12,2560,2560,mlx_qmm_splitk,32,32,32,0,1,0.079'
printf '%s\nm9,%s,fit,"x"\n' "$pubhead" "$pubrow" > pubchip.csv          # unknown chip
printf '%s\nm3max,%s,guess,"x"\n' "$pubhead" "$pubrow" > pubrole.csv      # unknown role
printf '%s\nm3max,%s,fit,\n' "$pubhead" "$pubrow" > pubsource.csv        # no source
printf '%s\nm3max,u4,64,12,2560,2560,mlx_qmm_splitk,32,32,32,0,1,0,fit,"x"\n' "$pubhead" > pubtime.csv
printf '%s\nm3max,u4,64,12,2560,2500,mlx_qmm_splitk,32,32,32,0,1,0.079,fit,"x"\n' "$pubhead" > pubgroup.csv
printf '%s\nm3max,u4,64,12,2560,2560,mlx_qmm_splitk,32,4096,32,0,1,0.079,fit,"x"\n' "$pubhead" > pubtile.csv
rm -rf foreign/m4
printf 'token,slot,expert,prob\n0,0,3,0.6\n0,1,200,0.4\n' > route.csv   # an expert out of range

# ---- the cases --------------------------------------------------------------
cat > cases.txt <<'EOF'
bench|unknown chip 'm9'|--chip m9
bench|bad shape (expected MxNxK, positive) '1x4294967552x512'|--shape 1x4294967552x512
bench|bad shape (expected MxNxK, positive) '1x-5x512'|--shape 1x-5x512
bench|K=100 is not a multiple of the group size 128|--chip m4max --shape 1x64x100
bench|empty name in the format list ''|--formats ''
bench|empty name in the format list ','|--formats ,
bench|unknown format 'fp5'|--formats fp4,fp5
bench|bad candidate 'marlin_gemm_fp4 64 64 32 0 99999999999': split_k '99999999999' is out of range|--chip m4max --shape 1x64x256 --candidate 'marlin_gemm_fp4 64 64 32 0 99999999999'
bench|malformed.csv:4: malformed CSV|--chip m4max --shape 3x64x256 --formats u4 --out malformed.csv
bench|malformed.csv:4: malformed CSV|--chip m4max --shape 3x64x256 --formats u4 --out malformed.csv --resume
bench|newer.csv:3: schema 9 is newer than this tool's 1|--chip m4max --shape 3x64x256 --formats u4 --out newer.csv
bench|wrapped.csv:3: N: '4294967552' is out of range|--chip m4max --shape 3x64x256 --formats u4 --out wrapped.csv
bench|nanmedian.csv:3: median_s: 'nan' is not a finite number|--chip m4max --shape 3x64x256 --formats u4 --out nanmedian.csv
bench|nanchips.csv:|--chips nanchips.csv --chip m4max --shape 1x64x256 --explain
bench|gpu_cores of m4max: 'nan' is not a finite number|--chips nanchips.csv --chip m4max --shape 1x64x256
bench|mem_bw_gbs of m4max: 'inf' is not a finite number|--chips infchips.csv --chip m4max --shape 1x64x256 --explain
bench|no-such-chips.csv: cannot open|--chips no-such-chips.csv --chip m4max --shape 1x64x256
bench|nul.csv:2: a NUL byte in the line|--chip m4max --suite nul.csv
bench|no-such-suite.csv: cannot open|--chip m4max --suite no-such-suite.csv
bench|file: cannot create the directory: a file of that name is in the way|--chip m4max --shape 3x64x256 --formats u4 --out file/r.csv
bench|bad --budget 'nan'|--budget nan
bench|bad thread count '4294967297'|--threads 4294967297
tune|unknown chip 'm9'|--chip m9
tune|empty name in the format list ''|--chip m4max --formats ''
tune|gpu_cores of m4max: 'nan' is not a finite number|--chip m4max --chips nanchips.csv
tune|bad M list '1,4294967297'|--chip m4max --m 1,4294967297
tune|empty/host/table.csv: cannot open|--chip host --check heldout --out-dir empty/host
tune|garbage/host/table.csv: not a dispatch table|--chip host --check heldout --out-dir garbage/host
tune|the table is for chip 'm4max', not 'host'|--chip host --check heldout --out-dir foreign/host
tune|file: cannot create the directory: a file of that name is in the way|--chip m4max --suite smoke --out-dir file/t
tune|nul.csv:2: a NUL byte in the line|--chip m4max --suite nul.csv
compare|no-such.csv: cannot open|good.csv no-such.csv
compare|newer.csv:3: schema 9 is newer|good.csv newer.csv
compare|malformed.csv:4: malformed CSV|malformed.csv good.csv
compare|nul.csv:2: a NUL byte in the line|good.csv nul.csv
compare|wrapped.csv:3: N: '4294967552' is out of range|good.csv wrapped.csv
compare|a third file 'good.csv'|good.csv good.csv good.csv
compare|bad --alpha 'nan'|good.csv good.csv --alpha nan
compare|bad --min-samples '1e3'|good.csv good.csv --min-samples 1e3
compare|file/r.md.tmp.|good.csv good.csv --report file/r.md
compare|file/h.csv: cannot open for appending: Not a directory|good.csv good.csv --history file/h.csv
compare|file/r.txt.tmp.|good.csv good.csv --rerun-list file/r.txt
compare|malformed.csv:4: malformed CSV|--median-of out.csv good.csv malformed.csv
plot|unknown chip 'm9'|occupancy --chip m9 --out plots
plot|bad --shape (MxNxK, all positive) '1x4294967552x512'|occupancy --shape 1x4294967552x512
plot|bad --size (WxH, 200x150 to 10000x10000) '4294968296x600'|occupancy --size 4294968296x600
plot|hugemodel.csv:2: n_holdout: '1e10' is not an integer|occupancy --chip m4max --model hugemodel.csv --out plots
plot|fitmodel.csv:2: n_fit: '1e20' is not an integer|occupancy --chip m4max --model fitmodel.csv --out plots
plot|newer.csv:3: schema 9 is newer|roofline --chip m4max --results newer.csv --out plots
plot|nul.csv:|roofline --chip m4max --results nul.csv --out plots
plot|file: cannot create the directory: a file of that name is in the way|occupancy --chip m4max --model goodmodel.csv --out file/plots
plot|no-such.csv: cannot open|roofline --chip m4max --results no-such.csv --out plots
model|lookup needs --table|lookup --chip m4max good.csv
model|pubchip.csv:2: chip:|public pubchip.csv
model|pubrole.csv:2: role: 'guess'|public pubrole.csv
model|pubsource.csv:2: source: empty|public pubsource.csv
model|pubtime.csv:2: published_ms|public pubtime.csv
model|pubgroup.csv:2: shape|public pubgroup.csv
model|pubtile.csv:2: the candidate is not legal on m3max|public pubtile.csv
model|missing.csv|public missing.csv
model|--table is for lookup|fit --chip m4max --table foreign/host/table.csv good.csv
model|garbage/host/table.csv: not a dispatch table|lookup --chip m4max --table garbage/host/table.csv good.csv
model|badterm.csv: cost model: unknown term 'launch'|lookup --chip m4max --table badterm.csv good.csv
kernel-bench|bad shape (expected MxNxK, positive) '1x4294967552x512'|--shape 1x4294967552x512
kernel-bench|empty name in the format list ','|--formats ,
kernel-bench|file/k.csv.tmp.|--shape 1x64x256 --csv file/k.csv
moe-bench|unknown MoE suite 'llama'|--suite llama
moe-bench|route.csv:3: expert '200' is not in 0..7|--suite mixtral-8x7b --routing route.csv
moe-bench|good.csv: not a moe-bench results file|--tokens 1 --out good.csv
moe-bench|bad --tokens|--tokens 0
EOF

# shellcheck disable=SC2086 # the checksum command is meant to split
snapshot() { find . -path ./cases.txt -prune -o \( -type f -o -type l \) -print | sort | xargs $MQ_SHA256 2>/dev/null; find . | sort; }
n=0
while IFS='|' read -r tool needle args; do
    [ -n "$tool" ] || continue
    n=$((n + 1))
    before=$(snapshot)
    out=$(eval "\"$B/$tool\" $args" 2>&1); rc=$?
    lines=$(printf '%s\n' "$out" | grep -c .)
    check "$tool $args: exits 2 (got $rc: $out)" [ "$rc" -eq 2 ]
    check "$tool $args: prints one line (got $lines: $out)" [ "$lines" -eq 1 ]
    case "$out" in *"$needle"*) ok=1 ;; *) ok=0 ;; esac
    check "$tool $args: names the problem: expected '$needle' in '$out'" [ "$ok" -eq 1 ]
    after=$(snapshot)
    check "$tool $args: leaves every file as it was" [ "$before" = "$after" ]
    if [ "$before" != "$after" ]; then
        printf '%s\n' "$before" > ../before.$$; printf '%s\n' "$after" > ../after.$$
        diff ../before.$$ ../after.$$ | head -5 >&2; rm -f ../before.$$ ../after.$$
    fi
done < cases.txt
check "the table has every tool's cases ($n)" [ "$n" -ge 50 ]
cd "$root" || exit 1
rm -rf "$d"
echo "badinput: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
