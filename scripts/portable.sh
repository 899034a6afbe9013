# portable.sh - the few commands whose spelling differs between Linux (GNU
# userland) and macOS (BSD userland; /bin/sh and /bin/bash are bash 3.2), as
# one name each, sourced by the tests and the scripts that need them:
#   . scripts/portable.sh            (from the repository's root)
#   . "$(dirname "$0")/portable.sh"  (from a script beside it)
# POSIX sh, so that dash, bash --posix and bash 3.2 all read it; each name
# uses the platform's own command where there is one (Linux keeps what it
# ran before) and a portable stand-in elsewhere. tests/check_portable_sh.sh
# sends here whoever writes one of the commands these replace.
#   is_macos              true on macOS (Darwin)
#   ncpu                  the number of CPUs to use (nproc; getconf or sysctl on macOS)
#   now_ns                the time in nanoseconds (date +%s%N; perl on macOS, whose
#                         date has no %N)
#   run_timeout S CMD...  CMD, sent SIGTERM after S seconds: exit 124 then, as GNU
#                         timeout (macOS has none; the stand-in signals CMD itself,
#                         not the processes CMD started)
#   sha256 [FILE...]      SHA-256 sums, "HASH  NAME" lines (sha256sum; shasum on macOS);
#                         $MQ_SHA256 is the command, for xargs
#   resolve_path PATH     PATH with every symbolic link resolved (readlink -f, which
#                         macOS before 13 lacks)
#   nlines                the lines on standard input, as a bare number (macOS's wc
#                         pads its count with spaces)
#   cpu_name, mem_gib     the CPU's model name and the memory in GiB (lscpu and free
#                         on Linux, sysctl on macOS)
#   dep_cflags, dep_ldflags
#                         the flags that find the libraries the build found (libcsv,
#                         libgsl) for a test's own compile: $CPPFLAGS / $LDFLAGS as
#                         the Makefile takes them, and on macOS Homebrew's include
#                         and lib (/opt/homebrew on Apple Silicon is on no default path)
#   skip WHY              a test's part left out here: prints "skipped on macOS: WHY"
#                         (or the system's name) and counts it in $skipped
#   test_summary NAME PASSED FAILED [SKIPPED]
#                         a test's last line, "NAME: N passed, N failed[, N skipped]",
#                         which scripts/run-tests.sh reads
# shellcheck shell=sh

is_macos() { [ "$(uname -s)" = Darwin ]; }

ncpu() {
    if command -v nproc >/dev/null 2>&1; then
        nproc # portable: GNU coreutils, where present (it honours CPU affinity)
    else
        getconf _NPROCESSORS_ONLN 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 1
    fi
}

now_ns() {
    nn=$(date +%s%N 2>/dev/null) # portable: checked below; BSD date prints the N as it is
    case $nn in
    '' | *[!0-9]*)
        nn=$(perl -MTime::HiRes=time -e 'printf "%.0f\n", time() * 1e9' 2>/dev/null) ||
            nn=$(($(date +%s) * 1000000000))
        ;;
    esac
    echo "$nn"
}

run_timeout() {
    rt_s=$1
    shift
    if command -v timeout >/dev/null 2>&1; then
        timeout "$rt_s" "$@" # portable: GNU coreutils, where present
        return
    fi
    "$@" &
    rt_pid=$!
    # the watcher: SIGTERM once the time is up; exits 0 only if it sent it
    (
        rt_n=$((rt_s * 5))
        while [ "$rt_n" -gt 0 ]; do
            kill -0 "$rt_pid" 2>/dev/null || exit 1
            sleep 0.2
            rt_n=$((rt_n - 1))
        done
        kill -TERM "$rt_pid" 2>/dev/null
    ) >/dev/null 2>&1 &
    rt_w=$!
    rt_rc=0
    wait "$rt_pid" 2>/dev/null || rt_rc=$? # (bash's "Terminated" notice)
    if wait "$rt_w"; then return 124; fi
    return "$rt_rc"
}

if command -v sha256sum >/dev/null 2>&1; then
    MQ_SHA256=sha256sum # portable: GNU coreutils, where present
else
    MQ_SHA256="shasum -a 256"
fi
# shellcheck disable=SC2086 # the command is meant to split
sha256() { $MQ_SHA256 "$@"; }

resolve_path() {
    rp=$1
    rp_n=0
    while [ -L "$rp" ] && [ "$rp_n" -lt 64 ]; do
        rp_t=$(readlink "$rp")
        case $rp_t in
        /*) rp=$rp_t ;;
        *) rp=$(dirname "$rp")/$rp_t ;;
        esac
        rp_n=$((rp_n + 1))
    done
    rp_d=$(cd "$(dirname "$rp")" 2>/dev/null && pwd -P) || return 1
    case $rp_d in
    /) echo "/$(basename "$rp")" ;;
    *) echo "$rp_d/$(basename "$rp")" ;;
    esac
}

nlines() { wc -l | tr -d ' \t'; }

cpu_name() {
    if is_macos; then
        sysctl -n machdep.cpu.brand_string 2>/dev/null
    else
        lscpu 2>/dev/null | sed -n 's/^Model name: *//p' # portable: the Linux branch
    fi
}

mem_gib() {
    if is_macos; then
        echo $(($(sysctl -n hw.memsize) / 1073741824))
    else
        free -g | awk '/Mem:/ { print $2 }' # portable: the Linux branch
    fi
}

brew_prefix() { # the Makefile's BREW_PREFIX when it passes one, else Homebrew's own
    is_macos || return 0
    if [ -n "${BREW_PREFIX:-${HOMEBREW_PREFIX:-}}" ]; then
        echo "${BREW_PREFIX:-$HOMEBREW_PREFIX}"
    elif command -v brew >/dev/null 2>&1; then
        brew --prefix 2>/dev/null
    elif [ -d /opt/homebrew/lib ]; then
        echo /opt/homebrew
    fi
}

dep_cflags() {
    df_b=$(brew_prefix)
    echo "${CPPFLAGS:-}${df_b:+ -I$df_b/include}"
}

dep_ldflags() {
    df_b=$(brew_prefix)
    echo "${LDFLAGS:-}${df_b:+ -L$df_b/lib}"
}

skip() {
    if is_macos; then sk_os=macOS; else sk_os=$(uname -s); fi
    echo "skipped on $sk_os: $*"
    skipped=$((${skipped:-0} + 1))
}

test_summary() {
    if [ "${4:-0}" -gt 0 ]; then
        echo "$1: $2 passed, $3 failed, $4 skipped"
    else
        echo "$1: $2 passed, $3 failed"
    fi
}
