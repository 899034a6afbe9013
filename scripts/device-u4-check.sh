#!/bin/sh
# device-u4-check.sh - the fused u4 CPU model on a host with AVX-512 BF16
# (its VDPBF16PS path cannot run on the development machine): the variant
# tests (u4 zero points included) on that path, and kernel-bench of the
# fused u4 (and, as a control, fp4) kernels with the per-weight (q - z)
# decode against the previous s*(sum a*q - z*sum a) form, interleaved
# new/old/new/old on the same threads. Runs on the device machine:
# libgsl/libcsv unpacked from .debs/ (dpkg -x), the previous tile_fused.c
# in .debs/tile_fused_old.c. Output under $OUT (summary.txt, logs).
set -eu
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT" /tmp/deps
for f in .debs/*.deb; do dpkg -x "$f" /tmp/deps; done
L=/tmp/deps/usr/lib/x86_64-linux-gnu
export CPPFLAGS="-I/tmp/deps/usr/include" LDFLAGS="-L$L" LD_LIBRARY_PATH="$L"
S="$OUT/summary.txt"
{ lscpu | grep -E 'Model name|^CPU\(s\)'; grep -o -m1 'avx512_bf16' /proc/cpuinfo || echo "no avx512_bf16"; } > "$S"
make -j16 BUILD=build-new build-new/tests/test_variants build-new/kernel-bench > "$OUT/build.log" 2>&1
rm -rf /tmp/old && mkdir /tmp/old && cp -r Makefile kernels metal backends harness tuner plots tests scripts /tmp/old/
cp .debs/tile_fused_old.c /tmp/old/kernels/tile_fused.c
(cd /tmp/old && make -j16 BUILD=build-old build-old/tests/test_variants build-old/kernel-bench >> "$OUT/build.log" 2>&1)
echo "== new: test_variants" >> "$S"; ./build-new/tests/test_variants 2>&1 | tail -3 >> "$S"
echo "== old: test_variants" >> "$S"; /tmp/old/build-old/tests/test_variants 2>&1 | tail -3 >> "$S"
for rep in 1 2; do
  for v in new old; do
    b=./build-new/kernel-bench; [ $v = old ] && b=/tmp/old/build-old/kernel-bench
    for sh in 1x4096x14336 16x4096x14336; do
      echo "== $v (round $rep) $sh" >> "$S"
      $b --shape $sh --formats u4 --candidate 'marlin_gemm_fused_u4 16 64 128 0 1' \
         --candidate 'marlin_gemm_fused_u4 64 64 32 0 1' --min-time 0.5 --probe-trials 3 \
         2>&1 | grep -E '^u4 ' >> "$S" || true
      $b --shape $sh --formats fp4 --candidate 'marlin_gemm_fused_fp4 16 64 128 0 1' \
         --min-time 0.5 --probe-trials 3 2>&1 | grep -E '^fp4 ' >> "$S" || true
    done
  done
done
cat "$S"
