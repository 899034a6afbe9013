#!/bin/sh
# run-tests.sh - run every test binary, print each one's result and a final
# "N passed, N failed" line; exit non-zero if any test failed. A test whose
# last line is "NAME: N passed, N failed, N skipped" left parts out on this
# machine (macOS: a tmpfs, a real Slurm): its lines "skipped on ...: WHY"
# are shown, and the final line then ends ", N skipped".
# Each test's line shows its wall time in whole seconds ("12 s", from
# date +%s: portable to dash and macOS), after its name.
# On a Mac the Metal backend is there, and "auto" would take it: every test
# but the Metal ones (test_metal, test_metal_standin, test_objc_standin)
# runs with Metal made unavailable ($MQ_OBJC_RUNTIME naming no library), so
# they time the CPU model exactly as on Linux; the Metal tests run the GPU.
no_gpu=""
[ "$(uname -s)" = Darwin ] && no_gpu="${TMPDIR:-/tmp}/mq-tests-run-the-cpu-model.dylib"
passed=0; failed=0; skipped=0
for t in "$@"; do
    t0=$(date +%s)
    case "$(basename "${t%% *}")" in
    *metal* | *objc*) out=$($t 2>&1); rc=$? ;;
    *) if [ -n "$no_gpu" ]; then
           out=$(MQ_OBJC_RUNTIME="$no_gpu" $t 2>&1); rc=$?
       else
           out=$($t 2>&1); rc=$?
       fi ;;
    esac
    secs=$(($(date +%s) - t0))
    line=$(printf '%s\n' "$out" | tail -n 1)
    p=$(printf '%s' "$line" | sed -n 's/^.*: \([0-9]*\) passed, \([0-9]*\) failed\(, [0-9]* skipped\)\{0,1\}$/\1/p')
    f=$(printf '%s' "$line" | sed -n 's/^.*: \([0-9]*\) passed, \([0-9]*\) failed\(, [0-9]* skipped\)\{0,1\}$/\2/p')
    s=$(printf '%s' "$line" | sed -n 's/^.*: [0-9]* passed, [0-9]* failed, \([0-9]*\) skipped$/\1/p')
    if [ -z "$p" ]; then p=0; f=1; fi
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    [ "$f" -ne 0 ] && printf '%s\n' "$out"
    printf "%-32s %4d s  %s\n" "$(basename "${t%% *}")" "$secs" "$line"
    [ -n "$s" ] && printf '%s\n' "$out" | grep '^skipped on ' | sed 's/^/    /'
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
done
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
