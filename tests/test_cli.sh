#!/bin/sh
# test_cli.sh - kernel-bench from the outside: bad arguments give a one-line
# error naming the problem and exit code 2; a tiny run verifies, times and
# writes its CSV atomically (no temporary file left behind).
# usage: test_cli.sh BUILD_DIR
B=${1:-build}
bench="$B/kernel-bench"
passed=0; failed=0
check() { # check "description" condition...
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
expect_usage_error() { # expect_usage_error "needle" args...
    needle=$1; shift
    out=$("$bench" "$@" 2>&1); rc=$?
    lines=$(printf '%s\n' "$out" | wc -l)
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
rows=$(wc -l < "$dir/r.csv" 2>/dev/null || echo 0)
check "the CSV has a header and 3 rows (got $rows lines)" [ "$rows" -eq 4 ]
check "the CSV's rows say ok twice" [ "$(grep -c '"ok"' "$dir/r.csv")" -eq 2 ]
check "no temporary file is left" [ "$(ls "$dir" | wc -l)" -eq 1 ]
"$bench" --shape 1x32x64 --group 32 --formats fp4 --min-time 0.01 --probe-trials 1 \
    --candidate "marlin_gemm_fused_fp4 8 32 32 0 1" --csv "$dir/missing/r.csv" >/dev/null 2>"$dir/err"; rc=$?
check "an unwritable CSV path exits 1 (got $rc)" [ "$rc" -eq 1 ]
check "and says which file" grep -q "missing/r.csv" "$dir/err"
rm -rf "$dir"
echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
