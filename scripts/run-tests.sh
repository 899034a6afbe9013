#!/bin/sh
# run-tests.sh - run every test binary, print each one's result and a final
# "N passed, N failed" line; exit non-zero if any test failed.
passed=0; failed=0
for t in "$@"; do
    out=$($t 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | tail -n 1)
    p=$(printf '%s' "$line" | sed -n 's/^.*: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
    f=$(printf '%s' "$line" | sed -n 's/^.*: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
    if [ -z "$p" ]; then p=0; f=1; fi
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    [ "$f" -ne 0 ] && printf '%s\n' "$out"
    printf "%-32s %s\n" "$(basename "${t%% *}")" "$line"
    passed=$((passed + p)); failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
