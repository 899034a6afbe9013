#!/bin/sh
# install-deps.sh - install the Debian packages the project needs, only when
# missing: libgsl-dev (fits, statistics), libcsv-dev (results files), gnuplot
# (plots), clang (its clang++ checks the Metal kernels' syntax in make test),
# libclang-rt-dev (libFuzzer, for make fuzz), parallel (GNU parallel: sharded
# sweeps, scripts/sweep-parallel.sh), rsync (parallel brings results back from
# remote hosts with it), slurm-wlm (scripts/sweep-slurm.sh; the tests start a
# single-node Slurm with it).
# Uses sudo when not root.
set -eu
need=""
for pkg in libgsl-dev libcsv-dev gnuplot-nox clang libclang-rt-dev parallel rsync slurm-wlm; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
        need="$need $pkg"
done
# gnuplot (any flavour) satisfies the plotting need
if command -v gnuplot >/dev/null 2>&1; then need=$(echo "$need" | sed 's/gnuplot-nox//'); fi
# any clang++ (clang-14, ...) serves the syntax check
if command -v clang++ >/dev/null 2>&1; then need=$(echo "$need" | sed 's/clang//'); fi
# any clang whose runtime has libFuzzer serves make fuzz
if command -v clang >/dev/null 2>&1 &&
    [ -n "$(clang -print-resource-dir 2>/dev/null)" ] &&
    ls "$(clang -print-resource-dir)"/lib/*/libclang_rt.fuzzer*.a >/dev/null 2>&1; then
    need=$(echo "$need" | sed 's/libclang-rt-dev//')
fi
need=$(echo "$need" | xargs)
[ -z "$need" ] && exit 0
echo "install-deps: installing $need"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need
