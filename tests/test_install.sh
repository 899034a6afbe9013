#!/bin/sh
# test_install.sh - `make install PREFIX=...` gives a user what they link:
# libmq.a, mq.h and mq.pc, and the tools as mq-*. A program built with
# nothing but the installed files (flags from mq.pc through pkg-config, or
# read from the file where pkg-config is absent) runs a GEMM on the CPU
# model; an installed tool answers --help.
# usage: test_install.sh BUILD_DIR (the files of a finished build are installed
# by scripts/install.sh, the script make install runs)
B=${1:-build}
. "$(dirname "$0")/../scripts/portable.sh"
passed=0; failed=0
check() {
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
d=$(mktemp -d)
scripts/install.sh "$B" "$d/prefix" >"$d/install.log" 2>&1; rc=$?
check "the install (make install's script) exits 0 (rc $rc: $(tail -n 3 "$d/install.log"))" [ "$rc" -eq 0 ]
for f in lib/libmq.a include/mq.h lib/pkgconfig/mq.pc bin/mq-tune bin/mq-bench bin/mq-merge bin/mq-compare bin/mq-plot bin/mq-kernel-bench; do
    check "installs $f" test -s "$d/prefix/$f"
done
if command -v pkg-config >/dev/null 2>&1; then
    flags=$(PKG_CONFIG_PATH="$d/prefix/lib/pkgconfig" pkg-config --static --cflags --libs mq)
else
    flags="-I$d/prefix/include -L$d/prefix/lib -lmq -lcsv -lm -pthread"
fi
cat > "$d/use.c" <<'C'
#include <stdio.h>
#include "mq.h"
int main(void)
{
    mq_problem p = {MQ_FMT_FP4, 2, 64, 128, 32};
    float W[128 * 64];
    uint16_t A[2 * 128];
    float C[2 * 64];
    for (int i = 0; i < 128 * 64; i++)
        W[i] = (float)((i * 37) % 17 - 8) / 8;
    for (int i = 0; i < 2 * 128; i++)
        A[i] = 0x3c00; /* 1.0 */
    mq_weights w;
    mq_ctx *ctx;
    mq_error e;
    if (mq_quantize(MQ_FMT_FP4, W, 128, 64, 32, NULL, &w, &e) || mq_ctx_create(1, &ctx, &e) ||
        mq_gemm(ctx, &p, &w, A, C, NULL, NULL, &e)) {
        printf("error: %s\n", e.msg);
        return 1;
    }
    printf("ok %d variants\n", mq_variant_count());
    mq_ctx_destroy(ctx);
    mq_weights_free(&w);
    return 0;
}
C
san=""  # a sanitizer build's library needs the sanitizer runtimes to link
nm "$B/libmq.a" 2>/dev/null | grep -q __asan && san="-fsanitize=address,undefined"
# shellcheck disable=SC2086 # the flags are meant to split
${CC:-gcc} -std=c11 $san $(dep_cflags) "$d/use.c" $flags $(dep_ldflags) -o "$d/use" 2>"$d/cc.err"; rc=$?
check "a program builds from the installed files alone (rc $rc: $(head -c 300 "$d/cc.err"))" [ "$rc" -eq 0 ]
out=$("$d/use" 2>&1)
check "and runs a GEMM through the installed library: '$out'" [ "$out" = "ok 9 variants" ]
"$d/prefix/bin/mq-tune" --help >/dev/null 2>&1; rc=$?
check "an installed tool answers --help (rc $rc)" [ "$rc" -eq 0 ]
rm -rf "$d"
echo "install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
