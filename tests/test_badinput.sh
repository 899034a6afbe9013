#!/bin/sh
# test_badinput.sh - every tool and sweep script, fed bad input the way a
# user (or a broken file) would: each invocation must exit 2, print nothing
# on stdout and exactly one line on stderr, name the value, field or file at
# fault, and leave every file in its working directory byte for byte as it
# was (nothing created, nothing half written, no directory made).
# The cases are data: tests/badinput/*.cases, one per line,
#   TOOL|NEEDLE|ARGUMENTS
# where TOOL is a program of the build directory or a script of the tree
# (scripts/...), and ARGUMENTS are split by the shell. The files they name
# are made in the scratch directory by tests/badinput/*.fixtures.sh.
# usage: test_badinput.sh BUILD_DIR
B=$(cd "${1:-build}" && pwd)
root=$(pwd)
. "$root/scripts/portable.sh"
passed=0; failed=0
check() {
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
d=$(mktemp -d)
cd "$d" || exit 1
mkdir work
for fx in "$root"/tests/badinput/*.fixtures.sh; do
    # shellcheck disable=SC1090 # the fixtures are data of this test
    (cd work && . "$fx") || { echo "FAIL: fixtures $fx" >&2; failed=$((failed + 1)); }
done
cat "$root"/tests/badinput/*.cases | grep -v '^#' > cases.txt
cd work || exit 1

# shellcheck disable=SC2086 # the checksum command is meant to split
snapshot() { find . \( -type f -o -type l \) -print | sort | xargs $MQ_SHA256 2>/dev/null; find . | sort; }
n=0
while IFS='|' read -r tool needle args; do
    [ -n "$tool" ] || continue
    n=$((n + 1))
    # TOOL may follow NAME=VALUE settings of its environment (split by the shell)
    prog=${tool##* }; envs=${tool%"$prog"}
    case "$prog" in scripts/*) prog="$root/$prog" ;; *) prog="$B/$prog" ;; esac
    before=$(snapshot)
    eval "$envs\"$prog\" $args" > ../stdout 2> ../stderr; rc=$?
    out=$(cat ../stderr); stdout=$(cat ../stdout)
    lines=$(printf '%s\n' "$out" | grep -c .)
    check "$tool $args: exits 2 (got $rc: $out)" [ "$rc" -eq 2 ]
    check "$tool $args: prints one line on stderr (got $lines: $out)" [ "$lines" -eq 1 ]
    check "$tool $args: prints nothing on stdout (got: $stdout)" [ -z "$stdout" ]
    case "$out" in *"$needle"*) ok=1 ;; *) ok=0 ;; esac
    check "$tool $args: names the problem: expected '$needle' in '$out'" [ "$ok" -eq 1 ]
    after=$(snapshot)
    check "$tool $args: leaves every file as it was, creates nothing" [ "$before" = "$after" ]
    if [ "$before" != "$after" ]; then
        printf '%s\n' "$before" > ../before; printf '%s\n' "$after" > ../after
        diff ../before ../after | head -5 >&2
    fi
done < ../cases.txt
check "the table has every tool's cases ($n)" [ "$n" -ge 70 ]
cd "$root" || exit 1
rm -rf "$d"
echo "badinput: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
