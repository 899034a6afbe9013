#!/bin/sh
# check_layers.sh - no include runs back up the floors. The floors, lowest
# first: kernels metal backends harness tuner plots. A .c or .h file may
# include headers of its own folder and of the folders below it; an include
# of a folder above it (or of a header no floor has) fails the check with
# FILE:LINE and both floors named. The Makefile gives each folder only the
# include paths of its floor and below, so such an include would not even
# build; this script says why, and guards files the build does not compile.
# A header inside a backend's folder (backends/cuda/...) is that folder's
# own: from outside it is named with its folder ("msl_cpu/msl_exec.h").
# It first proves itself on a small tree with one planted upward include
# and one planted private one.
floors="kernels metal backends harness tuner plots"
rank() { i=0; for f in $floors; do [ "$f" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo -1; }
where() { # the floor under $1 that holds header $2 ("" if none; "FLOOR
    # SUBFOLDER" when only a subfolder of it does, e.g. backends/cuda's own)
    for f in $floors; do
        [ -d "$1/$f" ] || continue
        [ -f "$1/$f/$2" ] && { echo "$f"; return; }
        sub=$(find "$1/$f" -mindepth 2 -path "$1/$f/*/$2" -type f 2>/dev/null | head -n 1)
        [ -n "$sub" ] && { sub=${sub#"$1/"}; echo "$f ${sub%/*}"; return; }
    done
}
upward() { # every upward or unknown include under root $1, one line each
    for dir in $floors; do
        [ -d "$1/$dir" ] || continue
        r=$(rank "$dir")
        # the floor's files, its subfolders' too (backends/cuda, ...)
        for file in $(find "$1/$dir" \( -name '*.c' -o -name '*.h' \) -type f | sort); do
            rel=${file#"$1/"}
            grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
            while IFS= read -r line; do
                n=${line%%:*}
                h=$(printf '%s' "$line" | sed 's/.*include[[:space:]]*"\([^"]*\)".*/\1/')
                # beside the file first (the compiler's rule for quotes), then the floors
                if [ -f "${file%/*}/$h" ]; then at=$dir; else at=$(where "$1" "$h"); fi
                case $at in *" "*)
                    # a header of a backend's folder, named from outside it
                    # without its folder: the build gives no -I for it
                    case $h in */*) at=${at%% *} ;;
                    *) echo "$rel:$n includes \"$h\", private to ${at#* } (name it by its folder)"; continue ;;
                    esac ;;
                esac
                if [ -z "$at" ]; then
                    echo "$rel:$n includes \"$h\", which no floor holds"
                elif [ "$(rank "$at")" -gt "$r" ]; then
                    echo "$rel:$n ($dir) includes \"$h\" from $at, a floor above it"
                fi
            done
        done
    done
}
passed=0; failed=0
t=$(mktemp -d)
mkdir -p "$t/kernels" "$t/tuner"
printf '#include "mq.h"\n' > "$t/kernels/ok.c"; : > "$t/kernels/mq.h"
printf '#include "model.h"\n' > "$t/kernels/bad.c"; : > "$t/tuner/model.h"
mkdir -p "$t/backends/cuda"; : > "$t/backends/cuda/inner.h"
printf '#include "cuda/inner.h"\n' > "$t/backends/ok.c"
printf '#include "inner.h"\n' > "$t/backends/cuda/ok2.c"
mkdir -p "$t/harness"; printf '#include "inner.h"\n' > "$t/harness/bad2.c"
planted=$(upward "$t")
rm -rf "$t"
case "$planted" in
    *"kernels/bad.c:1 (kernels) includes \"model.h\" from tuner, a floor above it"*"harness/bad2.c:1 includes \"inner.h\", private to backends/cuda"*|\
    *"harness/bad2.c:1 includes \"inner.h\", private to backends/cuda"*"kernels/bad.c:1 (kernels) includes \"model.h\" from tuner, a floor above it"*)
        [ "$(printf '%s\n' "$planted" | grep -c .)" -eq 2 ] && passed=$((passed + 1)) ||
            { failed=$((failed + 1)); echo "FAIL: the planted tree should give exactly the two planted findings, gave: $planted" >&2; } ;;
    *) failed=$((failed + 1)); echo "FAIL: a planted upward include (kernels/bad.c) or private include (harness/bad2.c) was not found: '$planted'" >&2 ;;
esac
found=$(upward .)
if [ -n "$found" ]; then
    printf 'FAIL: %s\n' "$found" | sed 's/^FAIL: /FAIL: /' >&2
    failed=$((failed + $(printf '%s\n' "$found" | grep -c .)))
else
    passed=$((passed + 1))
fi
echo "layers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
