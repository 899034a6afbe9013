#!/bin/sh
# test_metal_standin.sh - the Metal backend (backends/metal/metal.c, unmodified)
# end to end on any machine: bench --backend metal through the stand-in
# Objective-C/Metal runtime (tests/objc_standin/, $MQ_OBJC_RUNTIME), its GPU
# work done by the MSL executor. Every message metal.c sends is held to
# Apple's declarations and to what a Mac punishes (reference counts, the
# encoder protocol, limits); the report the stand-in writes at exit is read
# back here. Then each fault a Mac can show (no default device, no device,
# a compile error, a pipeline maximum or SIMD width below the plan, a failed
# command buffer, a failed allocation, a small working set or threadgroup
# memory, another core count) must give an error row or a one-line message,
# never an ok row.
# usage: test_metal_standin.sh BUILD_DIR
B=${1:-build}
lib=""
for ext in .so .dylib; do
    [ -f "$B/tests/libobjc_standin$ext" ] && lib="$(cd "$B/tests" && pwd)/libobjc_standin$ext"
done
passed=0; failed=0
check() { # check "description" command...
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
if [ -z "$lib" ]; then
    echo "FAIL: no $B/tests/libobjc_standin.so or .dylib (make $B/tests/libobjc_standin.so)" >&2
    echo "test_metal_standin: 0 passed, 1 failed"
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mq-standin.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
export MQ_OBJC_RUNTIME="$lib"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
quick="--budget 0.01 --max-reps 2"

# run NAME FAULTS [env=value ...] -- bench args...: output in $tmp/NAME.out,
# exit status in $tmp/NAME.rc, the stand-in's report in $tmp/NAME.rep
run() {
    name=$1; faults=$2; shift 2
    envs=""
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs="$envs $1"; shift; done
    shift
    # shellcheck disable=SC2086 # envs are NAME=value words
    env MQ_STANDIN_FAULTS="$faults" MQ_STANDIN_REPORT="$tmp/$name.rep" $envs \
        "$B/bench" --backend metal "$@" >"$tmp/$name.out" 2>&1
    echo $? >"$tmp/$name.rc"
    [ -f "$tmp/$name.rep" ] || : >"$tmp/$name.rep"
}
rep() { sed -n "s/^$2=//p" "$tmp/$1.rep"; }           # rep NAME FIELD
rc() { cat "$tmp/$1.rc"; }
out_has() { grep -q -- "$2" "$tmp/$1.out"; }          # out_has NAME TEXT
# status column of a results file's rows (the 19th field), one per line
statuses() { sed -n '3,$p' "$1" | cut -d, -f19 | tr -d '"'; }
count_status() { statuses "$1" | grep -c "^$2\$"; }
clean() { # no violation, nothing leaked, every pool popped, every service released
    [ -z "$(rep "$1" violation)" ] && [ "$(rep "$1" objects_alive)" = 0 ] &&
        [ "$(rep "$1" pools_open)" = 0 ] && [ "$(rep "$1" services_open)" = 0 ]
}

# ---- the smoke suite, every candidate verified against the float64 reference ----
run smoke "" -- --suite smoke --out "$tmp/smoke.csv" $quick
rows=$(statuses "$tmp/smoke.csv" | grep -c .)
ok=$(count_status "$tmp/smoke.csv" ok)
check "smoke: bench exits 0 (got $(rc smoke): $(tail -n 3 "$tmp/smoke.out"))" [ "$(rc smoke)" = 0 ]
check "smoke: at least 50 candidates (got $rows)" [ "$rows" -ge 50 ]
check "smoke: every candidate ok, verified before timed ($ok of $rows)" [ "$ok" = "$rows" ]
check "smoke: the rows are the metal backend's on m4max" \
    sh -c "sed -n '3p' '$tmp/smoke.csv' | grep -q '\"m4max\",\"metal\"'"
check "smoke: no violation, no leak, pools popped ($(sed -n '1p;4,5p' "$tmp/smoke.rep" | tr '\n' ' '))" clean smoke
check "smoke: every message's cast checked ($(rep smoke casts_checked))" \
    [ "$(rep smoke casts_checked)" -gt 1000 ]
check "smoke: kernels compiled ($(rep smoke compiles))" [ "$(rep smoke compiles)" -gt 0 ]
check "smoke: compiled with fast math off (compiles with it on: $(rep smoke compiles_fast_math))" \
    [ "$(rep smoke compiles_fast_math)" = 0 ]
check "smoke: MSL 3.0 (MTLLanguageVersion3_0 = 196608; got $(rep smoke language_version))" \
    [ "$(rep smoke language_version)" = 196608 ]
check "smoke: no command buffer failed" [ "$(rep smoke failed_command_buffers)" = 0 ]

one="--shape 16x256x512"
# ---- macOS 14: no mathMode, fast math off through fastMathEnabled ----
run macos14 "" MQ_STANDIN_MACOS=14 -- $one --candidate 'marlin_gemm_fused_fp4 64 64 32 0 1' --out "$tmp/m14.csv" $quick
check "macOS 14: row ok" [ "$(count_status "$tmp/m14.csv" ok)" = 1 ]
check "macOS 14: fastMathEnabled = NO (compiles with fast math: $(rep macos14 compiles_fast_math))" \
    [ "$(rep macos14 compiles_fast_math)" = 0 ]
check "macOS 14: clean" clean macos14

# ---- the device: no default device (a command-line tool), no device at all ----
run nodefault no-default-device -- $one --candidate 'marlin_gemv_decode 4 64 128 0 1' --out "$tmp/nd.csv" $quick
check "no default device: found through MTLCopyAllDevices, row ok ($(tail -n 2 "$tmp/nodefault.out"))" \
    [ "$(count_status "$tmp/nd.csv" ok)" = 1 ]
check "no default device: clean" clean nodefault
run nodevice no-device -- $one --out "$tmp/nodev.csv" $quick
check "no device: exit 2 (got $(rc nodevice))" [ "$(rc nodevice)" = 2 ]
check "no device: one line ($(cat "$tmp/nodevice.out"))" [ "$(grep -c . "$tmp/nodevice.out")" = 1 ]
check "no device: the line names it" grep -q 'unavailable: no Metal device' "$tmp/nodevice.out"
check "no device: no results file" [ ! -e "$tmp/nodev.csv" ]
check "no device: clean" clean nodevice

# ---- a compile error: the log's error line, not its first 300 characters ----
run compile compile-error -- $one --out "$tmp/ce.csv" $quick
check "compile error: no ok row ($(count_status "$tmp/ce.csv" ok))" [ "$(count_status "$tmp/ce.csv" ok)" = 0 ]
check "compile error: the row names the error line past 300 characters of warnings" \
    grep -q "error: use of undeclared identifier 'mq_planted_fault'" "$tmp/ce.csv"
check "compile error: clean" clean compile

# ---- limits from the pipeline and the device, not the chips file ----
run pmax pipeline-max=128 -- $one --candidate 'marlin_gemv_decode 4 64 128 0 1' \
    --candidate 'mlx_qmm_splitk 32 32 32 0 2' --out "$tmp/pm.csv" $quick
check "pipeline max 128: no ok row" [ "$(count_status "$tmp/pm.csv" ok)" = 0 ]
check "pipeline max 128: no 256-thread GEMM or reduction dispatched ($(rep pmax violation))" \
    [ -z "$(rep pmax violation)" ]
check "pipeline max 128: the GEMM's 256 threads named" \
    grep -q "256 threads per threadgroup exceed the pipeline's maximum 128" "$tmp/pm.csv"
check "pipeline max 128: the split-K reduction's 256 threads named" \
    grep -q "marlin_splitk_reduce: 256 threads per threadgroup exceed" "$tmp/pm.csv"
check "pipeline max 128: clean" clean pmax
run simd simd-width=16 -- $one --candidate 'marlin_gemm_fp4 64 64 32 0 1' --out "$tmp/sw.csv" $quick
check "SIMD width 16: an error row naming it" grep -q "SIMD width is 16" "$tmp/sw.csv"
check "SIMD width 16: no ok row" [ "$(count_status "$tmp/sw.csv" ok)" = 0 ]
run tgmem "" MQ_STANDIN_TG_MEM=16384 -- $one --candidate 'marlin_gemm_fp4 64 64 32 0 1' \
    --candidate 'marlin_gemv_decode 4 64 128 0 1' --out "$tmp/tg.csv" $quick
check "16 KB of threadgroup memory: the 19 KB tile refused, named ($(sed -n '3p' "$tmp/tg.csv" | cut -d, -f19-20))" \
    sh -c "sed -n '3p' '$tmp/tg.csv' | grep -q '16384'"
check "16 KB of threadgroup memory: the 8 KB decode still ok" \
    [ "$(count_status "$tmp/tg.csv" ok)" = 1 ]
check "16 KB of threadgroup memory: planned under the device's, said once ($(grep -c 'threadgroup memory: the device' "$tmp/tgmem.out"))" \
    [ "$(grep -c "threadgroup memory: the device's 16384 bytes, not the m4max row's 32768" "$tmp/tgmem.out")" = 1 ]

# ---- a command buffer that fails after verification: an error row, never a time ----
run cbfail cb-fail=3 -- $one --candidate 'marlin_gemm_fp4 64 64 32 0 1' --out "$tmp/cb.csv" $quick
check "failed command buffer: an error row, not ok ($(statuses "$tmp/cb.csv" | tr '\n' ' '))" \
    [ "$(count_status "$tmp/cb.csv" error)" = 1 ]
check "failed command buffer: the row says which run failed and why" \
    grep -q "run 1 failed: metal: the command buffer failed (status 5)" "$tmp/cb.csv"
check "failed command buffer: clean" clean cbfail

# ---- a buffer allocation that fails: an error row, nothing leaked, the rest runs ----
run alloc alloc-fail=1 -- $one --candidate 'marlin_gemm_fp4 64 64 32 0 1' \
    --candidate 'marlin_gemv_decode 4 64 128 0 1' --out "$tmp/al.csv" $quick
check "failed allocation: one error row naming it" grep -q "cannot allocate the weight buffers" "$tmp/al.csv"
check "failed allocation: the next candidate ok" [ "$(count_status "$tmp/al.csv" ok)" = 1 ]
check "failed allocation: clean" clean alloc

# ---- memory: resident weights stay within the recommended working set ----
run wset "" MQ_STANDIN_WORKING_SET=4194304 -- $one --candidate 'marlin_gemv_decode 4 64 128 0 1' \
    --out "$tmp/ws.csv" $quick
check "4 MiB working set: the rotation uploads more than that ($(rep wset buffer_bytes_made) bytes)" \
    [ "$(rep wset buffer_bytes_made)" -gt 4194304 ]
check "4 MiB working set: resident buffers peak within it ($(rep wset peak_buffer_bytes) bytes)" \
    [ "$(rep wset peak_buffer_bytes)" -le 4194304 ]
check "4 MiB working set: row ok" [ "$(count_status "$tmp/ws.csv" ok)" = 1 ]

# ---- identity: the chip row by name and GPU core count ----
run cores32 "" MQ_STANDIN_GPU_CORES=32 -- $one --candidate 'marlin_gemv_decode 4 64 128 0 1' --out "$tmp/c32.csv" $quick
check "a 32-core M4 Max is m4max32 ($(grep -i chip "$tmp/cores32.out" | head -n 1))" \
    sh -c "sed -n '3p' '$tmp/c32.csv' | grep -q '\"m4max32\",\"metal\"'"
run cores0 "" MQ_STANDIN_GPU_CORES=0 -- $one --candidate 'marlin_gemv_decode 4 64 128 0 1' --out "$tmp/c0.csv" $quick
check "an unknown core count: the full part m4max, said so ($(grep -i 'core' "$tmp/cores0.out" | head -n 1))" \
    sh -c "sed -n '3p' '$tmp/c0.csv' | grep -q '\"m4max\",\"metal\"' && grep -qi 'core count unknown' '$tmp/cores0.out'"
check "core count: clean" clean cores32

# ---- on a Mac: the same smoke suite on the real GPU ----
skipped=0
if [ "$(uname -s)" = Darwin ]; then
    (unset MQ_OBJC_RUNTIME; exec "$B/bench" --backend metal --suite smoke --out "$tmp/gpu.csv" \
        $quick) >"$tmp/gpu.out" 2>&1
    grc=$?
    grows=$(statuses "$tmp/gpu.csv" 2>/dev/null | grep -c .)
    gok=$(count_status "$tmp/gpu.csv" ok 2>/dev/null)
    check "the Apple GPU: bench exits 0 ($(tail -n 3 "$tmp/gpu.out"))" [ "$grc" = 0 ]
    check "the Apple GPU: every smoke candidate ok ($gok of $grows)" [ "${gok:-0}" = "$grows" ]
    check "the Apple GPU: at least 50 candidates ($grows)" [ "$grows" -ge 50 ]
    echo "metal (this Mac's GPU): ${gok:-0} of $grows candidates verified"
else
    echo "skipped on $(uname -s): the smoke suite on a real Apple GPU (only a Mac has one)"
    skipped=1
fi

echo "metal (stand-in runtime): $ok of $rows candidates verified; test_metal_standin: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
