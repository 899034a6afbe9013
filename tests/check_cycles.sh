#!/bin/sh
# check_cycles.sh - no circle of calls between the files of a floor: within
# kernels/, metal/, backends/, harness/, tuner/ and plots/, if a.c calls a
# function defined in b.c, nothing b.c calls (directly or through others of
# the floor) leads back to a.c. Such a circle makes two files one in all but
# name (gemm.c -> table.c -> moe_run.c -> gemm.c was one; the MoE planning
# now sits in moe_plan.c below the table lookup). The calls are read from
# the built objects (nm: each object's undefined symbols against the
# floor's defined ones), and tsort(1) finds a circle. It first proves
# itself: a planted two-file circle must be found, and a call known to be
# there (gemm.c -> table.c) must be read.
# usage: check_cycles.sh BUILD_DIR
B=${1:-build}
floors="kernels metal backends harness tuner plots"
passed=0; failed=0
check() {
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}

# edges FLOOR: "CALLER CALLEE" per line (object names), calls within the
# floor, its subfolders (backends/cuda, ...) included
edges() {
    # objects whose source is still there (a build directory keeps the
    # objects of files since moved or removed)
    objs=$(find "$B/$1" -name '*.o' 2>/dev/null | sort | while IFS= read -r o; do
        src=${o#"$B/"}; [ -f "${src%.o}.c" ] && echo "$o"; done)
    [ -n "$objs" ] || return 0
    # shellcheck disable=SC2086 # object paths have no spaces
    nm -A -g $objs 2>/dev/null | awk '
        { f = $1; sub(/:.*/, "", f); n = split(f, p, "/"); o = p[n]
          s = $NF; t = $(NF - 1)
          if (t == "U") und[o, s] = 1; else if (t ~ /^[TDBRCS]$/) def[s] = o }
        END { for (k in und) { split(k, x, SUBSEP)
                if ((x[2] in def) && def[x[2]] != x[1]) print x[1], def[x[2]] } }' | sort -u
}

# circle: the files of a circle among the edges on stdin ("" when none)
circle() { tsort 2>&1 >/dev/null | grep -v 'input contains a loop' | sed 's/^tsort: //' | tr '\n' ' '; }

# the check proves itself
check "a planted circle a.o -> b.o -> a.o is found" \
    [ -n "$(printf 'a.o b.o\nb.o a.o\nc.o a.o\n' | circle)" ]
check "a chain without a circle passes" [ -z "$(printf 'a.o b.o\nb.o c.o\n' | circle)" ]
case "$(edges kernels)" in
*"gemm.o table.o"*) ok=1 ;;
*) ok=0 ;;
esac
check "the calls are read from the objects (gemm.o calls table.o's lookup)" [ "$ok" -eq 1 ]

for floor in $floors; do
    c=$(edges "$floor" | circle)
    check "$floor/: no circle of calls between its files (found: $c)" [ -z "$c" ]
done
echo "check_cycles: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
