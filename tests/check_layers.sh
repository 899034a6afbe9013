#!/bin/sh
# check_layers.sh - no include runs back up the floors. The floors, lowest
# first: kernels metal backends harness tuner plots. A .c or .h file may
# include headers of its own folder and of the folders below it; an include
# of a folder above it (or of a header no floor has) fails the check with
# FILE:LINE and both floors named. The Makefile gives each folder only the
# include paths of its floor and below, so such an include would not even
# build; this script says why, and guards files the build does not compile.
# It first proves itself on a small tree with one planted upward include.
floors="kernels metal backends harness tuner plots"
rank() { i=0; for f in $floors; do [ "$f" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo -1; }
where() { # the folder under $1 that holds header $2 ("" if none)
    for f in $floors; do [ -f "$1/$f/$2" ] && { echo "$f"; return; }; done
}
upward() { # every upward or unknown include under root $1, one line each
    for dir in $floors; do
        [ -d "$1/$dir" ] || continue
        r=$(rank "$dir")
        for file in "$1/$dir"/*.c "$1/$dir"/*.h; do
            [ -f "$file" ] || continue
            grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
            while IFS= read -r line; do
                n=${line%%:*}
                h=$(printf '%s' "$line" | sed 's/.*include[[:space:]]*"\([^"]*\)".*/\1/')
                if [ -f "$1/$dir/$h" ]; then at=$dir; else at=$(where "$1" "$h"); fi
                if [ -z "$at" ]; then
                    echo "$dir/${file##*/}:$n includes \"$h\", which no floor holds"
                elif [ "$(rank "$at")" -gt "$r" ]; then
                    echo "$dir/${file##*/}:$n ($dir) includes \"$h\" from $at, a floor above it"
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
planted=$(upward "$t")
rm -rf "$t"
case "$planted" in
    *"kernels/bad.c:1 (kernels) includes \"model.h\" from tuner, a floor above it"*)
        [ "$(printf '%s\n' "$planted" | grep -c .)" -eq 1 ] && passed=$((passed + 1)) ||
            { failed=$((failed + 1)); echo "FAIL: the planted tree gave more than one finding: $planted" >&2; } ;;
    *) failed=$((failed + 1)); echo "FAIL: a planted upward include was not found: '$planted'" >&2 ;;
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
