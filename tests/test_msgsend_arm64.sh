#!/bin/sh
# test_msgsend_arm64.sh - the stand-in's objc_msgSend for AArch64
# (tests/objc_standin/msgsend.S) checked the way tests/msgsend_abi.c checks
# the native one, cross-compiled with aarch64-linux-gnu-gcc and run under
# qemu-aarch64: the arm64 ABI of an arm64 Linux runner (a Mac builds and runs
# msgsend_abi natively). Skipped, saying so, where the tools are missing
# (CI installs gcc-aarch64-linux-gnu and qemu-user).
cd "$(dirname "$0")/.." || exit 1
cc=aarch64-linux-gnu-gcc
if ! command -v "$cc" >/dev/null 2>&1 || ! command -v qemu-aarch64 >/dev/null 2>&1; then
    echo "skipped on $(uname -s): no $cc or qemu-aarch64 (CI installs gcc-aarch64-linux-gnu and qemu-user)"
    echo "test_msgsend_arm64: 0 passed, 0 failed, 1 skipped"
    exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mq-arm64.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
if ! "$cc" -std=c11 -O1 -Wall -Wextra -Werror -fno-pie -no-pie -static -Ibackends/metal \
    tests/msgsend_abi.c tests/objc_standin/msgsend.S -o "$tmp/msgsend_abi" 2>"$tmp/cc.log"; then
    cat "$tmp/cc.log"
    echo "test_msgsend_arm64: 0 passed, 1 failed"
    exit 1
fi
out=$(qemu-aarch64 "$tmp/msgsend_abi" 2>&1)
rc=$?
printf '%s\n' "$out" | grep -v '^msgsend_abi:'
line=$(printf '%s\n' "$out" | tail -n 1)
case "$line" in
msgsend_abi:*) echo "test_msgsend_arm64 (AArch64 under qemu):${line#msgsend_abi:}" ;;
*) echo "test_msgsend_arm64: 0 passed, 1 failed" ;;
esac
[ $rc -eq 0 ]
