#!/bin/sh
# install-deps.sh - install the Debian packages the project needs, only when
# missing: libgsl-dev (fits, statistics), libcsv-dev (results files), gnuplot
# (plots), clang (its clang++ checks the Metal kernels' syntax in make test),
# libclang-rt-dev (libFuzzer, for make fuzz), parallel (GNU parallel: sharded
# sweeps, scripts/sweep-parallel.sh), rsync (parallel brings results back from
# remote hosts with it), slurm-wlm (scripts/sweep-slurm.sh; the tests start a
# single-node Slurm with it).
# Uses sudo when not root.
# On macOS (Darwin) Homebrew instead, never as root (Homebrew refuses it):
# gsl, libcsv, gnuplot (with its cairo terminals), parallel, and rsync where
# the system has none; clang and clang++ are the Xcode Command Line Tools'.
# Skipped there: Slurm (no Homebrew formula for the workload manager; the
# formula named slurm is an unrelated network monitor), so the Slurm sweep
# tests skip; libFuzzer (Apple's clang has none: for make fuzz, brew install
# llvm and put $(brew --prefix llvm)/bin first in PATH).
set -eu

darwin_deps() {
    if ! xcode-select -p >/dev/null 2>&1; then
        echo "install-deps: no Xcode Command Line Tools (clang, make): run xcode-select --install" >&2
        return 1
    fi
    if ! command -v brew >/dev/null 2>&1; then
        echo "install-deps: no Homebrew (https://brew.sh): install gsl, libcsv, gnuplot and parallel yourself" >&2
        return 0 # the build says what it cannot find
    fi
    have=$(brew list --formula -1 2>/dev/null || true)
    need=""
    for f in gsl libcsv gnuplot parallel; do
        echo "$have" | grep -qx "$f" || need="$need $f"
    done
    command -v rsync >/dev/null 2>&1 || need="$need rsync"
    need=$(echo "$need" | xargs)
    [ -z "$need" ] && return 0
    echo "install-deps: brew install $need (skipped on macOS: Slurm, which Homebrew lacks; libFuzzer, which needs brew's llvm)"
    brew install $need
}

if [ "$(uname -s)" = Darwin ]; then
    darwin_deps
    exit
fi
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
