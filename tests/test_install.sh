#!/bin/sh
# test_install.sh - `make install PREFIX=...` gives a user what they link:
# libmq.a, mq.h and mq.pc, and the tools as mq-*. A program built with
# nothing but the installed files (flags from mq.pc through pkg-config, or
# read from the file where pkg-config is absent) runs a GEMM on the CPU
# model; an installed tool answers --help. Installing again over it, and
# from another directory, works; bad input is refused with nothing made.
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
for f in lib/libmq.a include/mq.h include/mq_lane_layout.h lib/pkgconfig/mq.pc bin/mq-tune bin/mq-bench bin/mq-merge bin/mq-compare bin/mq-plot bin/mq-kernel-bench; do
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
check "and runs a GEMM through the installed library: '$out'" [ "$out" = "ok 11 variants" ]
"$d/prefix/bin/mq-tune" --help >/dev/null 2>&1; rc=$?
check "an installed tool answers --help (rc $rc)" [ "$rc" -eq 0 ]
scripts/install.sh "$B" "$d/prefix" >"$d/install.log" 2>&1; rc=$?
check "an install over an installed prefix exits 0 (rc $rc: $(tail -n 3 "$d/install.log"))" [ "$rc" -eq 0 ]
Babs=$(cd "$B" && pwd) src=$(pwd)
(cd "$d" && sh "$src/scripts/install.sh" "$Babs" "$d/other" >"$d/install.log" 2>&1); rc=$?
check "the install from another directory than the source tree exits 0 (rc $rc: $(tail -n 3 "$d/install.log"))" \
    sh -c "[ $rc -eq 0 ] && cmp -s '$d/prefix/include/mq.h' '$d/other/include/mq.h'"
# bad input: exit 2, one line on stderr naming it, nothing on stdout, nothing made
# refused DESC NEEDLE ARGS...
t=$(mktemp -d)
refused() {
    desc=$1 needle=$2; shift 2
    before=$(cd "$d" && find . | sort)
    scripts/install.sh "$@" >"$t/out" 2>"$t/err"; rc=$?
    err=$(cat "$t/err"); so=$(cat "$t/out"); lines=$(grep -c . "$t/err")
    case $err in *"$needle"*) named=1 ;; *) named=0 ;; esac
    check "$desc: exit 2, one line naming '$needle', no stdout (got $rc, $lines lines: $err; stdout: $so)" \
        [ "$rc-$lines-$named-${#so}" = 2-1-1-0 ]
    check "$desc: nothing made" [ "$before" = "$(cd "$d" && find . | sort)" ]
}
printf 'a file\n' > "$d/file"
refused "a file where DEST_PREFIX's directory goes" "$d/file' is in the way of DEST_PREFIX" "$B" "$d/file/prefix"
refused "a build directory without the tools" "'$d/prefix/include/libmq.a' is missing" "$d/prefix/include" "$d/new"
refused "no DEST_PREFIX" "missing DEST_PREFIX" "$B"
if [ "$(id -u)" -ne 0 ]; then
    mkdir "$d/ro" && chmod 555 "$d/ro"
    refused "a DEST_PREFIX in a directory that cannot be written" "cannot write in '$d/ro'" "$B" "$d/ro/prefix"
    chmod 755 "$d/ro"
else
    skip "a read-only DEST_PREFIX (this test runs as root, which writes anywhere)"
fi
rm -rf "$d" "$t"
test_summary install "$passed" "$failed" "${skipped:-0}"
[ "$failed" -eq 0 ]
