#!/usr/bin/env bash
# macos-cross.sh - CI's proof of the macOS build without a Mac: on Linux,
# compile and link the library, every tool, every test program and the test
# libraries (the Makefile's `all` and the fault library) as arm64 Mach-O
# files against the macOS SDK's libc and libSystem, through the Makefile's own
# Darwin branch (UNAME_S=Darwin UNAME_M=arm64). A call to anything libSystem
# does not export (pthread_barrier_wait, say) fails the link, so a Linux-only
# function cannot reach a Mac unseen. Nothing here runs on macOS: on a Mac,
# the native `make` / `make test` is the check.
#
# The toolchain is Zig's (`zig cc`: clang with the macOS libc headers and
# libSystem's link stubs (.tbd) built in; PyPI's ziglang, the version pinned
# below): the one route that needs no Apple SDK, which Apple's licence keeps
# off package registries. GSL and libcsv are built for aarch64-apple-darwin
# from Debian bookworm's source packages (apt-get source through a private
# deb-src list; nothing in /etc/apt changes). Toolchain and libraries are
# cached under ${XDG_CACHE_HOME:-~/.cache}/mq-macos-cross, keyed by their
# versions: only the first run builds them (minutes); later runs compile the
# project only.
#
# Usage: scripts/macos-cross.sh  (BUILD=build-macos, JOBS=nproc by default)
# Exit status: 0 everything linked and is arm64 Mach-O; 1 a compile or link
# failed or an output is not what it should be; 2 the toolchain or the
# libraries could not be had (no network, no pip), or this is macOS.
# Last line: "macOS arm64 cross-build: N of N programs linked (Mach-O arm64)".
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(uname -s)" = Darwin ]; then
    echo "macos-cross.sh: this machine is a Mac: the native 'make' and 'make test' are the check here (this script cross-links the macOS build on Linux, for CI)" >&2
    exit 2
fi

ZIG_VERSION=0.14.1    # PyPI ziglang; its clang is LLVM 19, its macOS SDK 15.1
MACOS_MIN=11.0        # the first macOS on Apple Silicon
DEBIAN_SUITE=bookworm # GSL's and libcsv's sources
DEBIAN_MIRROR=${MQ_DEBIAN_MIRROR:-http://deb.debian.org/debian}
BUILD_DIR=${BUILD:-build-macos}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mq-macos-cross
# the build is this script's alone: no flags from the environment
unset CFLAGS CPPFLAGS LDFLAGS LDLIBS ARCH OPT SAN CC AR BREW_PREFIX MQ_ZIG_CACHE

t_start=$(date +%s)
die() {
    echo "macos-cross.sh: $*" >&2
    exit 2
}
elapsed() { echo "$(($(date +%s) - t_start)) s"; }
mkdir -p "$CACHE"

# ---- the toolchain: zig from PyPI, and wrappers that make it a cross cc/ar --
ZIG_HOME=$CACHE/zig-$ZIG_VERSION
if [ ! -x "$ZIG_HOME/ziglang/zig" ]; then
    echo "== macos-cross: installing ziglang $ZIG_VERSION from PyPI into $ZIG_HOME"
    command -v python3 >/dev/null || die "python3 is needed to install ziglang (pip)"
    rm -rf "$ZIG_HOME" # a partial one
    tmp=$(mktemp -d "$CACHE/zig-tmp.XXXXXX")
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --disable-pip-version-check --no-warn-script-location --no-cache-dir -q \
        --target "$tmp" "ziglang==$ZIG_VERSION" ||
        { rm -rf "$tmp"; die "pip could not install ziglang==$ZIG_VERSION"; }
    # another run may have put it there meanwhile: theirs is as good
    mv -T "$tmp" "$ZIG_HOME" 2>/dev/null || rm -rf "$tmp"
fi
ZIG=$ZIG_HOME/ziglang/zig
[ "$("$ZIG" version)" = "$ZIG_VERSION" ] || die "$ZIG is not zig $ZIG_VERSION"

# cc, ar, ranlib for the target. zig keeps every object it compiles in its
# cache: the libraries' build uses the shared one ($ZIG_HOME/cache), the
# project's its build directory's (MQ_ZIG_CACHE), so the shared cache does
# not grow with every run. Apple clang spells CPUs apple-m1, zig apple_m1:
# the -mcpu name is translated, so the Makefile passes Apple's spelling.
# A link keeps every object's code (--no-gc-sections): zig's linker drops
# unreferenced code before it resolves symbols when optimizing, where
# Apple's ld (no -dead_strip in the Makefile) reports an undefined symbol in
# any object it is given.
BIN=$ZIG_HOME/bin-macos$MACOS_MIN
mkdir -p "$BIN"
for t in cc ar ranlib; do
    {
        echo '#!/bin/sh'
        echo "# zig $t for arm64 macOS $MACOS_MIN (written by scripts/macos-cross.sh)"
        echo "ZIG='$ZIG' TARGET=aarch64-macos.$MACOS_MIN-none"
        echo "export ZIG_GLOBAL_CACHE_DIR=\"\${MQ_ZIG_CACHE:-$ZIG_HOME/cache}\""
        echo 'export ZIG_LOCAL_CACHE_DIR="$ZIG_GLOBAL_CACHE_DIR"'
        if [ $t = cc ]; then
            cat <<'WRAPPER'
link=-Wl,--no-gc-sections
for a; do
    shift
    case $a in
    -mcpu=*)
        cpu=${a#-mcpu=}
        name=${cpu%%+*}
        a=-mcpu=$(echo "$name" | tr - _)${cpu#"$name"}
        ;;
    -c | -E | -S | -M | -MM) link= ;; # no link: the flag would be unused
    esac
    set -- "$@" "$a"
done
exec "$ZIG" cc -target "$TARGET" $link "$@"
WRAPPER
        else
            echo "exec \"\$ZIG\" $t \"\$@\""
        fi
    } >"$BIN/$t.tmp"
    chmod +x "$BIN/$t.tmp"
    mv -f "$BIN/$t.tmp" "$BIN/$t"
done
CROSS_CC=$BIN/cc
CROSS_AR=$BIN/ar
CROSS_RANLIB=$BIN/ranlib

# Mach-O header check: "exec" or "dylib" for a 64-bit arm64 Mach-O file
# with no undefined references (MH_NOUNDEFS), else what it is. The header
# (<mach-o/loader.h>): magic cf fa ed fe, cputype 0x0100000c (CPU_TYPE_ARM64),
# cpusubtype, filetype (2 MH_EXECUTE, 6 MH_DYLIB), ncmds, sizeofcmds, flags.
macho_kind() {
    [ -f "$1" ] || { echo missing; return; }
    local h
    h=$(od -An -tx1 -N28 "$1" 2>/dev/null | tr -d ' \n')
    [ "${h:0:8}" = cffaedfe ] || { echo "not a 64-bit Mach-O file"; return; }
    [ "${h:8:8}" = 0c000001 ] || { echo "Mach-O, not arm64"; return; }
    # flags, little-endian at byte 24; MH_NOUNDEFS is bit 0
    [ $((0x${h:48:2} & 1)) = 1 ] || { echo "Mach-O arm64 with undefined references"; return; }
    case ${h:24:8} in
    02000000) echo exec ;;
    06000000) echo dylib ;;
    *) echo "Mach-O arm64 of file type ${h:24:8}" ;;
    esac
}

# The toolchain must refuse what macOS lacks: a call to pthread_barrier_wait
# (not in libSystem) fails the link of an executable and of a dylib, also
# from a function nothing calls in an object of its own (optimized, as the
# project's are); and a plain program links and is an arm64 Mach-O
# executable.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mq-macos-cross.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
printf 'int pthread_barrier_wait(void *);\nint uses_barrier(void);\nint uses_barrier(void) { return pthread_barrier_wait(0); }\n' >"$scratch/undef.c"
printf 'int main(void) { return 0; }\n' >"$scratch/ok.c"
MQ_ZIG_CACHE=$scratch/zig-cache "$CROSS_CC" -O2 -c "$scratch/undef.c" -o "$scratch/undef.o" &&
    MQ_ZIG_CACHE=$scratch/zig-cache "$CROSS_CC" -O2 -c "$scratch/ok.c" -o "$scratch/ok.o" ||
    die "the toolchain cannot compile for arm64 macOS"
if "$CROSS_CC" -O2 "$scratch/ok.o" "$scratch/undef.o" -o "$scratch/undef" >/dev/null 2>&1 ||
    "$CROSS_CC" -O2 -shared "$scratch/undef.o" -o "$scratch/undef.dylib" >/dev/null 2>&1; then
    echo "macos-cross.sh: the toolchain linked a call to a function libSystem lacks: it would not catch one in the project" >&2
    exit 1
fi
"$CROSS_CC" -O2 "$scratch/ok.o" -o "$scratch/ok" || die "the toolchain cannot link a trivial arm64 macOS program"
[ "$(macho_kind "$scratch/ok")" = exec ] ||
    die "the toolchain's output is not an arm64 Mach-O executable: $(macho_kind "$scratch/ok")"
echo "== macos-cross: zig $ZIG_VERSION, target aarch64-macos $MACOS_MIN; an undefined libSystem symbol fails the link ($(elapsed))"

# ---- GSL and libcsv for the target, from Debian's sources -------------------
APT_DIR=$CACHE/apt
apt_private() { # apt_private apt-get|apt-cache ARGS...
    local tool=$1 sandbox=()
    shift
    [ "$(id -u)" = 0 ] && sandbox=(-o APT::Sandbox::User=root) # no _apt: the cache is root's
    "$tool" -q -o Dir::Etc::SourceList="$APT_DIR/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
        -o Dir::State::Lists="$APT_DIR/lists" -o Dir::Cache="$APT_DIR/cache" \
        -o Debug::NoLocking=1 "${sandbox[@]}" "$@"
}
src_version() { # the version of source package $1 in the private list, if any
    { apt_private apt-cache showsrc "$1" 2>/dev/null || true; } | sed -n 's/^Version: //p' | head -n 1
}
sysroot_for() { echo "$CACHE/sysroot-zig$ZIG_VERSION-macos$MACOS_MIN-gsl$1-libcsv$2"; }
mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
signed=""
[ -f "$keyring" ] && signed="[signed-by=$keyring] "
echo "deb-src ${signed}$DEBIAN_MIRROR $DEBIAN_SUITE main" >"$APT_DIR/sources.list"
# the versions the list names: when those are built, no network is needed
gsl_v=$(src_version gsl)
csv_v=$(src_version libcsv)
if [ -z "$gsl_v" ] || [ -z "$csv_v" ] || [ ! -f "$(sysroot_for "$gsl_v" "$csv_v")/.complete" ]; then
    apt_private apt-get update >/dev/null || die "apt-get update of $DEBIAN_MIRROR $DEBIAN_SUITE (deb-src) failed"
    gsl_v=$(src_version gsl)
    csv_v=$(src_version libcsv)
    [ -n "$gsl_v" ] && [ -n "$csv_v" ] || die "no gsl or libcsv source package in $DEBIAN_SUITE"
fi
SYSROOT=$(sysroot_for "$gsl_v" "$csv_v")

# Both built into $1/sysroot, every step checked (set -e does not reach into
# a function whose status is tested).
build_libs() {
    local work=$1 prefix=$1/sysroot a
    cd "$work" || return 1
    apt_private apt-get source --download-only "gsl=$gsl_v" "libcsv=$csv_v" >download.log 2>&1 ||
        { cat download.log >&2; return 1; }
    mkdir gsl libcsv &&
        tar -xzf gsl_*.orig.tar.gz -C gsl --strip-components=1 &&
        tar -xzf libcsv_*.orig.tar.gz -C libcsv --strip-components=1 || return 1
    local cross=(--host=aarch64-apple-darwin --prefix="$prefix" --disable-shared --enable-static
        CC="$CROSS_CC" AR="$CROSS_AR" RANLIB="$CROSS_RANLIB" CFLAGS=-O2)
    # libcsv's config.sub (2011) predates aarch64-apple-darwin; GSL's knows it
    cp gsl/config.sub libcsv/config.sub || return 1
    (cd libcsv && ./configure "${cross[@]}" >configure.log 2>&1 &&
        make -j"$JOBS" >make.log 2>&1 && make install >install.log 2>&1) ||
        { tail -n 30 libcsv/*.log >&2; return 1; }
    # the dfsg tarball has no manual: everything but doc/
    (cd gsl && ./configure "${cross[@]}" >configure.log 2>&1 &&
        sed -i '/^SUBDIRS = /s/ doc$//' Makefile &&
        make -j"$JOBS" >make.log 2>&1 && make install >install.log 2>&1) ||
        { tail -n 30 gsl/*.log >&2; return 1; }
    for a in libgsl.a libgslcblas.a libcsv.a; do
        [ -f "$prefix/lib/$a" ] || { echo "no $a was built" >&2; return 1; }
    done
    touch "$prefix/.complete"
}
if [ ! -f "$SYSROOT/.complete" ]; then
    echo "== macos-cross: building GSL $gsl_v and libcsv $csv_v for aarch64-apple-darwin (first run only)"
    work=$(mktemp -d "$CACHE/build-tmp.XXXXXX")
    if ! (build_libs "$work"); then
        rm -rf "$work"
        die "building GSL and libcsv for macOS failed"
    fi
    if [ ! -f "$SYSROOT/.complete" ]; then # else a concurrent run's, as good
        rm -rf "$SYSROOT"                   # a partial one
        mv -T "$work/sysroot" "$SYSROOT" || die "cannot move the libraries to $SYSROOT"
    fi
    rm -rf "$work"
fi
echo "== macos-cross: GSL $gsl_v, libcsv $csv_v for arm64 macOS in $SYSROOT ($(elapsed))"

# ---- the project -------------------------------------------------------------
# a build directory from another toolchain or other libraries starts afresh
key="zig $ZIG_VERSION macos $MACOS_MIN gsl $gsl_v libcsv $csv_v"
if [ -d "$BUILD_DIR" ] && [ "$(cat "$BUILD_DIR/.macos-cross" 2>/dev/null)" != "$key" ]; then
    rm -rf "$BUILD_DIR"
fi
mkdir -p "$BUILD_DIR"
echo "$key" >"$BUILD_DIR/.macos-cross"
case $BUILD_DIR in
/*) export MQ_ZIG_CACHE=$BUILD_DIR/.zig-cache ;;
*) export MQ_ZIG_CACHE=$PWD/$BUILD_DIR/.zig-cache ;;
esac
mk=(make --no-print-directory BUILD="$BUILD_DIR" UNAME_S=Darwin UNAME_M=arm64 BREW_PREFIX="$SYSROOT"
    CC="$CROSS_CC" AR="$CROSS_AR" WERROR=1)
# what to build and check, from the Makefile itself: its library, its
# programs (`all`'s tools and tests) and its test libraries
vars=$("${mk[@]}" -s --eval 'mq-macos-cross-list: ; @echo "$(LIB)|$(TOOLS) $(TEST_BIN) $(MSGSEND_ABI)|$(FAULT_LIB) $(STANDIN_LIB)"' mq-macos-cross-list)
IFS='|' read -r lib programs dylibs <<<"$vars"
read -r -a programs <<<"$programs"
read -r -a dylibs <<<"$dylibs"
echo "== macos-cross: make all and the fault library in $BUILD_DIR (-j$JOBS; the log is $BUILD_DIR/make.log)"
build_rc=0
"${mk[@]}" -k -j"$JOBS" all "${dylibs[@]}" >"$BUILD_DIR/make.log" 2>&1 || build_rc=$?
if [ "$build_rc" != 0 ]; then
    grep -E 'error:|warning:|undefined symbol|\*\*\*' "$BUILD_DIR/make.log" | head -n 60 >&2 || true
    echo "macos-cross.sh: make failed (status $build_rc): $BUILD_DIR/make.log has the whole output" >&2
fi

# ---- every output: an arm64 Mach-O file of the right kind -----------------
bad=0
linked=0
for p in "${programs[@]}"; do
    k=$(macho_kind "$p")
    if [ "$k" = exec ]; then linked=$((linked + 1)); else echo "NOT LINKED: $p: $k" >&2; fi
done
for d in "${dylibs[@]}"; do
    k=$(macho_kind "$d")
    [ "$k" = dylib ] || { echo "NOT LINKED: $d: $k" >&2; bad=1; }
done
# the static library: an archive whose members are arm64 Mach-O objects
if [ -f "$lib" ] && [ "$(head -c 7 "$lib")" = '!<arch>' ]; then
    members=$("$CROSS_AR" t "$lib" | grep -c '\.o$' || true)
    one=$("$CROSS_AR" t "$lib" | grep -m 1 '\.o$' || true)
    (cd "$scratch" && "$CROSS_AR" x "$OLDPWD/$lib" "$one") || bad=1
    [ "$(od -An -tx1 -N8 "$scratch/$one" 2>/dev/null | tr -d ' \n')" = cffaedfe0c000001 ] ||
        { echo "NOT arm64: $lib's member $one" >&2; bad=1; }
    echo "== macos-cross: $lib: $members objects; ${dylibs[*]##*/}: dylibs (all arm64 Mach-O)"
else
    echo "NOT BUILT: $lib" >&2
    bad=1
fi
echo "== macos-cross: done ($(elapsed))"
echo "macOS arm64 cross-build: $linked of ${#programs[@]} programs linked (Mach-O arm64)"
[ "$build_rc" = 0 ] && [ "$bad" = 0 ] && [ "$linked" = "${#programs[@]}" ] || exit 1
