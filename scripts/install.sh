#!/bin/sh
# install.sh - what `make install` does, from a finished build: libmq.a,
# mq.h, the tools as mq-NAME and a pkg-config file mq.pc.
# usage: scripts/install.sh BUILD_DIR DEST_PREFIX [PREFIX_IN_PC]
#   DEST_PREFIX is where files go ($DESTDIR$PREFIX); PREFIX_IN_PC is the
#   prefix mq.pc names (default DEST_PREFIX).
set -eu
B=$1
dest=$2
prefix=${3:-$2}
version=$(sed -n 's/^#define MQ_TOOL_VERSION "\(.*\)"/\1/p' harness/version.h)
install -d "$dest/lib/pkgconfig" "$dest/include" "$dest/bin"
install -m 644 "$B/libmq.a" "$dest/lib/libmq.a"
install -m 644 kernels/mq.h "$dest/include/mq.h"
for t in kernel-bench bench merge tune compare plot; do
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
