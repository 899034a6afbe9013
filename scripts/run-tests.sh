#!/bin/sh
# run-tests.sh - run every test binary, print each one's result and a final
# "N passed, N failed" line; exit non-zero if any test failed. A test whose
# last line is "NAME: N passed, N failed, N skipped" left parts out on this
# machine (macOS: a tmpfs, a real Slurm): its lines "skipped on ...: WHY"
# are shown, and the final line then ends ", N skipped".
passed=0; failed=0; skipped=0
for t in "$@"; do
    out=$($t 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | tail -n 1)
    p=$(printf '%s' "$line" | sed -n 's/^.*: \([0-9]*\) passed, \([0-9]*\) failed\(, [0-9]* skipped\)\{0,1\}$/\1/p')
    f=$(printf '%s' "$line" | sed -n 's/^.*: \([0-9]*\) passed, \([0-9]*\) failed\(, [0-9]* skipped\)\{0,1\}$/\2/p')
    s=$(printf '%s' "$line" | sed -n 's/^.*: [0-9]* passed, [0-9]* failed, \([0-9]*\) skipped$/\1/p')
    if [ -z "$p" ]; then p=0; f=1; fi
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    [ "$f" -ne 0 ] && printf '%s\n' "$out"
    printf "%-32s %s\n" "$(basename "${t%% *}")" "$line"
    [ -n "$s" ] && printf '%s\n' "$out" | grep '^skipped on ' | sed 's/^/    /'
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
done
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
