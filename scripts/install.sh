#!/bin/sh
# install.sh - what `make install` does, from a finished build: libmq.a,
# mq.h (with mq_lane_layout.h, which it includes), the tools as mq-NAME and
# a pkg-config file mq.pc.
# usage: scripts/install.sh BUILD_DIR DEST_PREFIX [PREFIX_IN_PC]
#   DEST_PREFIX is where files go ($DESTDIR$PREFIX); PREFIX_IN_PC is the
#   prefix mq.pc names (default DEST_PREFIX).
# Bad input (a missing argument or one too many, a build directory that is
# not a finished build, a file where a directory of DEST_PREFIX would go) is
# refused before anything is made: one line "install: ..." on stderr, exit 2.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd) # the source tree: mq.h, version.h
tools="kernel-bench bench merge tune compare plot"
usage="usage: scripts/install.sh BUILD_DIR DEST_PREFIX [PREFIX_IN_PC]"
fail() { echo "install: $*" >&2; exit 2; }
# oneline TEXT: TEXT with its line breaks as spaces (a refusal is one line)
oneline() { printf '%s' "$1" | tr '\n\r' '  '; }
[ $# -ge 1 ] || fail "missing BUILD_DIR and DEST_PREFIX ($usage)"
[ $# -ge 2 ] || fail "missing DEST_PREFIX ($usage)"
[ $# -le 3 ] || fail "unexpected argument '$(oneline "$4")' ($usage)"
B=$1
dest=$2
prefix=${3:-$2}
[ -n "$B" ] || fail "empty BUILD_DIR ($usage)"
[ -n "$dest" ] || fail "empty DEST_PREFIX ($usage)"
[ -e "$B" ] || fail "build directory '$(oneline "$B")' does not exist (make BUILD=DIR all builds one)"
[ -d "$B" ] || fail "build directory '$(oneline "$B")' is not a directory"
for f in libmq.a $tools; do
    [ -f "$B/$f" ] || fail "'$(oneline "$B/$f")' is missing: '$(oneline "$B")' is not a finished build (make all)"
done
for f in "$src/kernels/mq.h" "$src/kernels/mq_lane_layout.h" "$src/harness/version.h"; do
    [ -f "$f" ] || fail "'$f' is missing: the script runs from its source tree"
done
# each directory to make: the first path up from it that exists must be a
# directory (not a file in the way) that can be written in; each file to
# install must not be a directory
for d in "$dest/lib/pkgconfig" "$dest/include" "$dest/bin"; do
    p=$d
    while [ ! -e "$p" ] && [ ! -L "$p" ]; do p=$(dirname "$p"); done
    [ -d "$p" ] || fail "'$(oneline "$p")' is in the way of DEST_PREFIX '$(oneline "$dest")' (not a directory)"
    [ -w "$p" ] || fail "cannot write in '$(oneline "$p")' (DEST_PREFIX '$(oneline "$dest")')"
done
for f in lib/libmq.a include/mq.h include/mq_lane_layout.h lib/pkgconfig/mq.pc $(printf 'bin/mq-%s ' $tools); do
    [ ! -d "$dest/$f" ] || fail "'$(oneline "$dest/$f")' is in the way (a directory where a file goes)"
done
version=$(sed -n 's/^#define MQ_TOOL_VERSION "\(.*\)"/\1/p' "$src/harness/version.h")
install -d "$dest/lib/pkgconfig" "$dest/include" "$dest/bin"
install -m 644 "$B/libmq.a" "$dest/lib/libmq.a"
install -m 644 "$src/kernels/mq.h" "$dest/include/mq.h"
install -m 644 "$src/kernels/mq_lane_layout.h" "$dest/include/mq_lane_layout.h"
for t in $tools; do
    install -m 755 "$B/$t" "$dest/bin/mq-$t"
done
cat > "$dest/lib/pkgconfig/mq.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: mq
Description: Marlin-style quantized GEMM: CPU model, formats and dispatch-table lookup
Version: $version
Libs: -L\${libdir} -lmq
Libs.private: -lcsv -lm -pthread
Cflags: -I\${includedir}
PC
echo "installed libmq.a, mq.h, mq.pc and mq-{kernel-bench,bench,merge,tune,compare,plot} under $dest"
