#!/bin/sh
# test_faults.sh - the promises of README "What is promised", tried the way
# a machine breaks them, on the real tools:
#   1. a full disk (a 256 KiB tmpfs when this machine lets us mount one in a
#      private mount namespace, else write(2) failures injected by
#      libfault_inject: LD_PRELOAD on Linux, DYLD_INSERT_LIBRARIES on macOS,
#      which has no tmpfs): an append that does not fit leaves the results
#      or history file exactly as it was, the tool exits 2 with one line
#      naming the file and the OS error, and a later run goes on from there;
#      a table set that does not fit is not published (on the tmpfs only:
#      skipped on macOS); plot says the disk is full in one line and leaves
#      no directory it made;
#   2. a kill at each rename of a tune run (fresh directory, a published set,
#      a set of plain files from before the linked layout): the visible
#      table.csv, table.h, model.csv and chip.csv are always one run's, and
#      the next run removes what the killed one left;
#   3. a torn last row left by a crash: bench --resume and compare keep every
#      whole row, say what they dropped, and bench cuts it off before
#      appending;
#   4. non-finite chip figures are refused before anything is written.
# usage: test_faults.sh BUILD_DIR [tmpfs-part RESULTS_FILE]
#   (the library: MQ_FAULT_LIB, else BUILD_DIR/tests/libfault_inject.so or .dylib)
B=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/portable.sh"
passed=0; failed=0; skipped=0
check() { # check "description" command...
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
has() { case "$1" in *"$2"*) return 0 ;; *) return 1 ;; esac; }
lines() { printf '%s\n' "$1" | grep -c .; }
sums() { # checksums of the files a path names (links followed), sorted
    for f in "$@"; do [ -e "$f" ] && sha256 < "$f" || echo missing; done | tr '\n' ' '
}
# the fault library and the variable that loads it: macOS's dyld reads
# DYLD_INSERT_LIBRARIES, and SIP drops it from the environment of a system
# binary (/bin/sh, /usr/bin/env), so it goes on the tool's own command
if is_macos; then preload=DYLD_INSERT_LIBRARIES; exts=".dylib .so"; else preload=LD_PRELOAD; exts=".so .dylib"; fi # portable: by platform
lib=${MQ_FAULT_LIB:-}
if [ -z "$lib" ]; then
    for e in $exts; do
        [ -f "$B/tests/libfault_inject$e" ] && { lib=$B/tests/libfault_inject$e; break; }
    done
fi
if [ -z "$lib" ] || [ ! -f "$lib" ]; then
    failed=$((failed + 1))
    echo "FAIL: no fault library '${lib:-$B/tests/libfault_inject.so or .dylib}' (make builds it)" >&2
    lib=$B/tests/libfault_inject${exts%% *}
fi
lib="$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")"
with_faults() { # with_faults [VAR=VALUE...] TOOL ARGS...: TOOL with the library loaded
    (
        export "$preload=$lib"
        while [ $# -gt 0 ]; do
            # shellcheck disable=SC2163 # "$1" is NAME=VALUE
            case $1 in *=*) export "$1"; shift ;; *) break ;; esac
        done
        exec "$@"
    )
}
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
# every row carries 400 samples (over 4 KiB, more than any page slack), so a full
# disk always refuses the next row, however busy the machine is
small="--chip m4max --shape 3x64x256 --formats u4 --budget 60 --ci 0 --max-reps 400"
c1="marlin_gemm_fused_u4 8 64 64 0 1"
c2="marlin_gemm_fused_u4 16 64 64 0 1"
c3="mlx_qmm_splitk 32 32 32 0 2"

# ---- 1. a full disk -----------------------------------------------------
full_disk_appends() { # DIR FILL-COMMAND: bench and compare --history appends
    d=$1; fill=$2; unfill=$3
    "$B/bench" $small --candidate "$c1" --candidate "$c2" --out "$d/r.csv" >/dev/null 2>&1
    check "bench writes two rows before the disk fills" [ "$(grep -c '"ok"' "$d/r.csv")" -eq 2 ]
    # a history whose last block is full, so its next row needs a new one
    printf 'date,base,new,benchmarks,regressed,improved,same,unreliable,geomean_new_over_base\n' > "$d/history.csv"
    pad=$((4096 - 87 - 41))
    printf '2026-11-20T00:00:00Z,%s,b.csv,2,0,0,2,0,1.00000\n' "$(head -c $pad /dev/zero | tr '\0' a)" >> "$d/history.csv"
    check "the history file fills one 4 KiB block ($(wc -c < "$d/history.csv") bytes)" [ "$(wc -c < "$d/history.csv")" -eq 4096 ]
    before=$(sums "$d/r.csv" "$d/history.csv")
    eval "$fill"
    err=$("$B/bench" $small --candidate "$c3" --out "$d/r.csv" 2>&1 >/dev/null); rc=$?
    check "bench on a full disk exits 2 (got $rc: $err)" [ "$rc" -eq 2 ]
    check "and says so in one line naming the file and the OS error: '$err'" \
        [ "$(printf '%s\n' "$err" | grep -c 'r.csv: cannot append a row: No space left on device')" -eq 1 \
          -a "$(printf '%s\n' "$err" | grep -c 'cannot')" -eq 1 ]
    err=$("$B/compare" "$d/r.csv" "$d/r.csv" --history "$d/history.csv" 2>&1 >/dev/null); rc=$?
    check "compare --history on a full disk exits 2 (got $rc)" [ "$rc" -eq 2 ]
    check "naming history.csv and the OS error: '$err'" has "$err" "history.csv: cannot append a row: No space left"
    out=$("$B/compare" "$d/r.csv" "$d/r.csv" --history "$d/history.csv" 2>/dev/null)
    check "and printing nothing on stdout (its table is for a run that went in): '$out'" [ -z "$out" ]
    check "the results and history files are exactly as they were" [ "$(sums "$d/r.csv" "$d/history.csv")" = "$before" ]
    eval "$unfill"
    out=$("$B/bench" $small --candidate "$c1" --candidate "$c2" --candidate "$c3" --resume \
          --out "$d/r.csv" 2>&1); rc=$?
    check "with room again, bench --resume goes on (rc $rc)" [ "$rc" -eq 0 ]
    check "measuring only the row that did not fit: '$(printf '%s' "$out" | tail -n 3 | head -n 1)'" \
        has "$out" "1 ok, 0 wrong, 0 error, 0 illegal, 2 skipped"
    "$B/compare" "$d/r.csv" "$d/r.csv" --history "$d/history.csv" >/dev/null 2>&1
    check "and history.csv takes its next row on a line of its own" \
        [ "$(awk -F, 'NR > 1 && NF != 9' "$d/history.csv" | wc -l)" -eq 0 ]
}

if [ "${2:-}" = "tmpfs-part" ]; then
    # inside a private mount namespace: a real full disk
    mnt=$(mktemp -d)
    mount -t tmpfs -o size=256k tmpfs "$mnt" || exit 3 # portable: Linux only (macOS takes the injected route)
    full_disk_appends "$mnt" "head -c 1000000 /dev/zero > '$mnt/fill' 2>/dev/null" "rm -f '$mnt/fill'"
    # a table set that does not fit is not published
    "$B/tune" --chip m4max --suite smoke --m 1 --out-dir "$mnt/t" >/dev/null 2>&1
    set="$mnt/t/table.csv $mnt/t/table.h $mnt/t/model.csv $mnt/t/chip.csv"
    # shellcheck disable=SC2086
    before=$(sums $set)
    head -c 1000000 /dev/zero > "$mnt/fill" 2>/dev/null
    err=$("$B/tune" --chip m4max --suite smoke --m 1,16 --out-dir "$mnt/t" 2>&1 >/dev/null); rc=$?
    check "tune on a full disk exits 2 (got $rc)" [ "$rc" -eq 2 ]
    check "and says why and that the table stays: '$err'" \
        sh -c 'printf "%s" "$1" | grep -q "No space left on device.*stays as it was"' _ "$err"
    # shellcheck disable=SC2086
    check "the published table set is exactly as it was" [ "$(sums $set)" = "$before" ]
    err=$("$B/plot" occupancy --chip m4max --shape 1x4096x14336 --out "$mnt/p" 2>&1); rc=$?
    check "plot on a full disk exits 2 (got $rc)" [ "$rc" -eq 2 ]
    check "and says the disk is full: '$err'" has "$err" "the disk is full"
    check "in one line, leaving no plots directory behind" [ "$(lines "$err")" -eq 1 -a ! -e "$mnt/p" ]
    # a whole file larger than stdio's buffer: its first failed write sets
    # only the stream's error flag; the message still names the OS's error
    # (No space left on device, not EIO), and nothing is left behind
    err=$("$B/model" public "$root/harness/public-figures.csv" --out "$mnt/m.csv" 2>&1 >/dev/null); rc=$?
    check "model public --out on a full disk exits 2 (got $rc)" [ "$rc" -eq 2 ]
    check "and names the OS error in one line: '$err'" \
        sh -c '[ "$(printf "%s\n" "$1" | grep -c .)" -eq 1 ] && printf "%s" "$1" | grep -q "m.csv: cannot write: No space left on device"' _ "$err"
    check "and leaves no file, temporary or not: '$(ls "$mnt" | grep m.csv)'" [ -z "$(ls "$mnt" | grep m.csv)" ]
    rm -f "$mnt/fill"
    "$B/tune" --chip m4max --suite smoke --m 1,16 --out-dir "$mnt/t" >/dev/null 2>&1; rc=$?
    check "with room again tune publishes (rc $rc), leaving one generation" \
        [ "$rc" -eq 0 -a "$(ls "$mnt/t/tables" | grep -vc current)" -eq 1 ]
    umount "$mnt" # portable: Linux only (the tmpfs route)
    rmdir "$mnt"
    echo "$passed $failed" > "$3"
    exit 0
fi

part=$(mktemp)
# MQ_FAULTS_INJECT=1 takes the injected path even where a tmpfs could be mounted;
# macOS always does (no tmpfs, no mount namespace)
if [ -z "${MQ_FAULTS_INJECT:-}" ] && ! is_macos &&
    { unshare -rm sh "$0" "$B" tmpfs-part "$part" 2>&1 || sh "$0" "$B" tmpfs-part "$part" 2>/dev/null; }; then # portable: Linux only
    read -r p f < "$part"
    passed=$((passed + p)); failed=$((failed + f))
    echo "full disk: a 256 KiB tmpfs"
else
    echo "full disk: write(2) failures injected (no tmpfs mounted)"
    # the physical path: the library matches the path the system reports for
    # the open file (macOS's /var is a link to /private/var)
    d=$(cd "$(mktemp -d)" && pwd -P)
    # the library loaded through the shell's environment: the tools are the
    # commands it execs (SIP drops DYLD_* only from system binaries)
    full_disk_appends "$d" "export $preload='$lib' MQ_FAULT_WRITE_MATCH='$d/' MQ_FAULT_WRITE_LIMIT=100" \
        "unset $preload MQ_FAULT_WRITE_MATCH MQ_FAULT_WRITE_LIMIT"
    # plot: gnuplot draws in its scratch directory, the images are copied into --out
    err=$(with_faults MQ_FAULT_WRITE_MATCH="$d/" MQ_FAULT_WRITE_LIMIT=100 \
          "$B/plot" occupancy --chip m4max --shape 1x4096x14336 --out "$d/p" 2>&1); rc=$?
    check "plot on a full disk exits 2 in one line saying so (got $rc: $err)" \
        sh -c '[ "$1" -eq 2 ] && [ "$(printf "%s\n" "$2" | grep -c .)" -eq 1 ] && printf "%s" "$2" | grep -q "the disk is full"' _ "$rc" "$err"
    check "and leaves no plots directory behind" [ ! -e "$d/p" ]
    rm -rf "$d"
    if is_macos; then
        skip "a table set on a full disk (it needs a 256 KiB tmpfs; the appends and the plot above are tested through injected write(2) failures)"
    fi
fi
rm -f "$part"
# ---- 2. a kill at each rename ----------------------------------------------
visible_set_ok() { # DIR OLD-SUMS: the four files are the old set, or they resolve
    d=$1             # into one directory, all there, table.h with table.csv's rows
    [ "$(sums "$d/table.csv" "$d/table.h" "$d/model.csv" "$d/chip.csv")" = "$2" ] && return 0
    dirs=$(for f in table.csv table.h model.csv chip.csv; do
               [ -e "$d/$f" ] || { echo missing; continue; }
               dirname "$(resolve_path "$d/$f")"
           done | sort -u | nlines)
    [ "$dirs" -eq 1 ] || return 1
    [ -e "$d/table.csv" ] || return 1
    csv=$(grep -vc '^#' "$d/table.csv"); h=$(grep -c '^    {MQ_FMT' "$d/table.h")
    [ "$((csv - 1))" -eq "$h" ]
}
leftovers() { # DIR: stale generations and temporary files
    cur=$(readlink "$1/tables/current" 2>/dev/null)
    for e in "$1"/tables/* "$1"/*.tmp.* "$1"/tables/*.tmp.*; do
        [ -e "$e" ] || [ -L "$e" ] || continue
        case "$(basename "$e")" in current|"$cur") ;; *) echo "$e" ;; esac
    done
}
for layout in fresh linked plain; do
    k=1
    while [ "$k" -le 30 ]; do
        d=$(mktemp -d)
        if [ "$layout" != fresh ]; then
            "$B/tune" --chip m4max --suite smoke --m 1 --out-dir "$d/a" >/dev/null 2>&1
            if [ "$layout" = plain ]; then   # the layout before linked sets
                mkdir "$d/p"
                for f in table.csv table.h model.csv chip.csv; do cp -L "$d/a/$f" "$d/p/$f"; done
                rm -rf "$d/a"; mv "$d/p" "$d/a"
            fi
        fi
        old=$(sums "$d/a/table.csv" "$d/a/table.h" "$d/a/model.csv" "$d/a/chip.csv")
        with_faults MQ_FAULT_KILL_AT_RENAME=$k \
            "$B/tune" --chip m4max --suite smoke --m 1,16 --out-dir "$d/a" >/dev/null 2>&1; rc=$?
        now=$(sums "$d/a/table.csv" "$d/a/table.h" "$d/a/model.csv" "$d/a/chip.csv")
        if [ "$layout" = fresh ] && [ "$rc" -ne 0 ] && [ ! -e "$d/a/table.csv" ]; then
            check "$layout: killed at rename $k: no table yet, and no file of the set visible" \
                [ ! -e "$d/a/table.h" -a ! -e "$d/a/model.csv" -a ! -e "$d/a/chip.csv" ]
        else
            check "$layout: killed at rename $k (rc $rc): the visible files are one run's set" visible_set_ok "$d/a" "$old"
            [ "$rc" -ne 0 ] && [ "$now" != "$old" ] && [ "$layout" != fresh ] &&
                check "$layout: killed at rename $k: a changed set is the new run's (M=16 rows)" grep -q ',16,' "$d/a/table.csv"
        fi
        "$B/tune" --chip m4max --suite smoke --m 1,16 --out-dir "$d/a" >/dev/null 2>&1; rc2=$?
        check "$layout: after the kill at rename $k the next run publishes (rc $rc2)" [ "$rc2" -eq 0 ]
        left=$(leftovers "$d/a")
        check "$layout: and nothing the killed run left remains: '$left'" [ -z "$left" ]
        rm -rf "$d"
        [ "$rc" -eq 0 ] && break   # the run outlived its renames: every step was tried
        k=$((k + 1))
    done
    check "$layout: kills were tried at $((k - 1)) renames before a run completed" [ "$k" -gt 2 ]
done

# ---- 3. a torn last row from a crash ---------------------------------------
d=$(mktemp -d)
"$B/bench" $small --candidate "$c1" --candidate "$c2" --out "$d/r.csv" >/dev/null 2>&1
cp "$d/r.csv" "$d/base.csv"
printf '1,"0.4.0","abc","host","2026-11-2' >> "$d/r.csv"   # a crash mid-row
out=$("$B/compare" "$d/base.csv" "$d/r.csv" 2>&1); rc=$?
check "compare reads a file with a torn last row (rc $rc)" [ "$rc" -eq 0 ]
check "and says it kept 2 rows and dropped line 5: '$(printf '%s' "$out" | head -n 1)'" \
    has "$out" "r.csv: kept 2 rows; dropped its torn last line 5"
out=$("$B/bench" $small --candidate "$c1" --candidate "$c2" --candidate "$c3" --resume \
      --out "$d/r.csv" 2>&1); rc=$?
check "bench --resume goes on from a torn file (rc $rc)" [ "$rc" -eq 0 ]
check "cutting the torn line off first and saying so" has "$out" "cut off a torn last line"
check "and measuring only what was missing" has "$out" "1 ok, 0 wrong, 0 error, 0 illegal, 2 skipped"
check "the file is whole again: 3 rows, every line ends in a newline" \
    sh -c "[ \$(grep -c '\"ok\"' '$d/r.csv') -eq 3 ] && [ \"\$(tail -c 1 '$d/r.csv' | od -An -c | tr -d ' ')\" = '\\n' ]"
rm -rf "$d"

# ---- 4. non-finite chip figures -------------------------------------------
d=$(mktemp -d)
"$B/tune" --chip m4max --suite smoke --m 1 --out-dir "$d/t" >/dev/null 2>&1
before=$(sums "$d/t/table.csv" "$d/t/table.h")
for bad in nan inf 1e300 -3 2.5; do
    sed "s/^m4max,gpu_cores,40,/m4max,gpu_cores,$bad,/" harness/chips.csv > "$d/chips.csv"
    err=$("$B/tune" --chip m4max --chips "$d/chips.csv" --suite smoke --out-dir "$d/t" 2>&1); rc=$?
    check "gpu_cores=$bad: tune exits 2 (got $rc)" [ "$rc" -eq 2 ]
    check "gpu_cores=$bad: one line naming the file, line, field and value: '$err'" \
        sh -c "[ $(lines "$err") -eq 1 ] && printf '%s' \"\$1\" | grep -q 'chips.csv:[0-9]*: gpu_cores of m4max: .$bad'" _ "$err"
    err=$("$B/bench" --chip m4max --chips "$d/chips.csv" --shape 1x64x256 --explain 2>&1); rc=$?
    check "gpu_cores=$bad: bench --explain exits 2 (got $rc)" [ "$rc" -eq 2 ]
done
check "the table made before is untouched" [ "$(sums "$d/t/table.csv" "$d/t/table.h")" = "$before" ]
rm -rf "$d"

test_summary faults "$passed" "$failed" "$skipped"
[ "$failed" -eq 0 ]
