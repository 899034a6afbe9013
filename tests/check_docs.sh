#!/bin/sh
# check_docs.sh - the documentation says what the tree is:
#  1. usage: every tool's usage block in docs/ is exactly what the tool
#     prints for --help (the 8 tools of BUILD, compare --ab's own help, and
#     the sweep scripts'). A block is the fenced block after a line
#     "<!-- help: NAME -->"; a block that differs fails with the tool's name
#     and the first differing line, a tool with no block fails too;
#  2. files: the file table of docs/architecture.md (the rows between
#     "<!-- file-table: begin -->" and "<!-- file-table: end -->", the path in
#     the first cell's backquotes) lists every source file of the tree (*.c
#     *.h *.metal *.sh *.py *.S *.gp under the floors, tests/ and scripts/,
#     as git lists them, tracked or not ignored; tests/fuzz/seeds/ and
#     tests/data/ hold data) and no file that is not there;
#  3. links: every relative link of README.md and docs/*.md (inline links,
#     images and reference definitions, outside code) names a file or
#     directory that exists.
# It first proves itself on copies with a planted difference of each kind
# (a changed usage line, a file missing from the table and one listed that
# is not there, a broken link), which must fail.
# usage: tests/check_docs.sh BUILD_DIR   (from the repository root)
B=${1:-build}
LC_ALL=C; export LC_ALL # one collation for sort and comm
# the usage blocks checked: NAME (how the docs mark it) and what prints it
helps='bench
tune
compare
compare --ab
plot
model
kernel-bench
moe-bench
merge
scripts/sweep-parallel.sh
scripts/sweep-slurm.sh
scripts/sweep-scaling.sh'
src_re='^(kernels|metal|backends|harness|tuner|plots|tests|scripts)/.*\.(c|h|metal|sh|py|S|gp)$'
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

help_of() { # NAME: what it prints for --help
    case $1 in
    scripts/*) "./$1" --help 2>&1 ;;
    *) "$B/"$1 --help 2>&1 ;;
    esac
}

# every block marked "<!-- help: NAME -->" in the files $2..., as
# "FILE:LINE" lines (the block's first line) in $1.where and the blocks'
# text, each ended by a line "@@end", in $1.text
blocks_of() {
    out=$1; name=$2; shift 2
    : > "$out.where"; : > "$out.text"
    for f in "$@"; do
        awk -v want="<!-- help: $name -->" -v where="$out.where" -v text="$out.text" -v file="$f" '
            state == 0 && $0 == want { state = 1; next }
            state == 1 { if ($0 ~ /^```/) { state = 2; print file ":" NR + 1 >> where; next }
                         state = 0; next }
            state == 2 { if ($0 ~ /^```[[:space:]]*$/) { print "@@end" >> text; state = 0; next }
                         print >> text }
        ' "$f"
    done
}

usage_findings() { # DOCS...: one line per usage block that is not its tool's --help
    printf '%s\n' "$helps" | while IFS= read -r name; do
        blocks_of "$t/b" "$name" "$@"
        if [ ! -s "$t/b.where" ]; then
            echo "$name: no usage block (a fenced block after '<!-- help: $name -->' in docs/)"
            continue
        fi
        help_of "$name" > "$t/h" || { echo "$name: '$name --help' failed"; continue; }
        n=0
        while IFS= read -r where; do
            n=$((n + 1))
            awk -v k=$n '$0 == "@@end" { i++; next } i == k - 1' "$t/b.text" > "$t/d"
            cmp -s "$t/d" "$t/h" && continue
            awk -v name="$name" -v where="$where" '
                NR == FNR { d[FNR] = $0; nd = FNR; next }
                { h[FNR] = $0; nh = FNR }
                END {
                    for (i = 1; i <= nd || i <= nh; i++) {
                        dl = i <= nd ? "\047" d[i] "\047" : "(the block ends)"
                        hl = i <= nh ? "\047" h[i] "\047" : "(--help ends)"
                        if (i > nd || i > nh || d[i] != h[i]) {
                            split(where, w, ":")
                            printf "%s: %s:%d differs from %s --help at its line %d: the docs have %s, --help prints %s\n",
                                name, w[1], w[2] + i - 1, name, i, dl, hl
                            exit
                        }
                    }
                }' "$t/d" "$t/h"
        done < "$t/b.where"
    done
}

sources_of() { # ROOT: the source files the table must list, one per line
    if git -C "$1" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git -C "$1" ls-files --cached --others --exclude-standard
    else
        (cd "$1" && find kernels metal backends harness tuner plots tests scripts -type f -print)
    fi | grep -E "$src_re" | grep -Ev '^tests/(fuzz/seeds|data)/' | sort -u |
        while IFS= read -r f; do [ -f "$1/$f" ] && echo "$f"; done
}

table_of() { # DOC: the paths of its file table, one per line
    awk '/<!-- file-table: begin -->/ { on = 1; next } /<!-- file-table: end -->/ { on = 0 }
        on && /^\| `/ { s = $0; sub(/^\| `/, "", s); sub(/`.*/, "", s); print s }' "$1"
}

table_findings() { # ROOT DOC SOURCES: the table against the tree
    table_of "$2" | sort > "$t/listed"
    if [ ! -s "$t/listed" ]; then
        echo "$2: no file table (rows between '<!-- file-table: begin -->' and '<!-- file-table: end -->')"
        return
    fi
    table_of "$2" | sort | uniq -d | sed "s|^|$2: listed twice: |"
    comm -23 "$3" "$t/listed" | sed "s|^|$2: missing from the file table: |"
    while IFS= read -r f; do
        [ -e "$1/$f" ] || echo "$2: listed in the file table but not there: $f"
    done < "$t/listed"
}

link_findings() { # MARKDOWN...: relative links that name nothing
    for f in "$@"; do
        dir=$(dirname "$f")
        awk '
            /^[[:space:]]*(```|~~~)/ { fence = !fence; next }
            fence { next }
            {
                s = $0
                gsub(/`[^`]*`/, "", s)
                t = s; sub(/^[[:space:]]+/, "", t)
                p = index(t, "]:")
                if (substr(t, 1, 1) == "[" && p > 0 && index(substr(t, 1, p), "](") == 0) {
                    r = substr(t, p + 2); sub(/^[[:space:]]+/, "", r); sub(/[[:space:]].*/, "", r)
                    print NR " " r
                }
                while (match(s, /\]\([^)]*\)/)) {
                    r = substr(s, RSTART + 2, RLENGTH - 3); s = substr(s, RSTART + RLENGTH)
                    sub(/^[[:space:]]*</, "", r); sub(/>[[:space:]]*$/, "", r)
                    sub(/[[:space:]].*/, "", r)
                    print NR " " r
                }
            }' "$f" |
        while read -r n target; do
            case $target in
            '' | '#'* | *://* | mailto:*) continue ;;
            esac
            path=${target%%#*}
            path=${path%%\?*}
            [ -e "$dir/$path" ] || echo "$f:$n: the link '$target' names nothing ($dir/$path)"
        done
    done
}

passed=0; failed=0
expect() { # WHAT FINDINGS NEEDLE: the planted difference must be found
    case $2 in
    *"$3"*) passed=$((passed + 1)) ;;
    *) failed=$((failed + 1)); echo "FAIL: $1 was not found: expected '$3' in '$2'" >&2 ;;
    esac
}

# the checks prove themselves on copies, each with one planted difference
mkdir -p "$t/p/docs"
cp docs/*.md "$t/p/docs/"
awk 'on == 1 && /^  --budget/ { $0 = $0 " (planted)"; on = 2 }
    $0 == "<!-- help: bench -->" && !on { on = 1 } { print }' docs/tools.md > "$t/p/docs/tools.md"
expect "a planted usage line" "$(usage_findings "$t"/p/docs/*.md)" \
    "bench: $t/p/docs/tools.md:"
expect "a planted usage line" "$(usage_findings "$t"/p/docs/*.md)" \
    "(planted)', --help prints '  --budget"
sources_of . > "$t/sources"
grep -v '^| `kernels/grow.c`' docs/architecture.md |
    sed 's/^<!-- file-table: end -->$/| `kernels\/planted_gone.c` | a file that is not there |\
&/' > "$t/p/docs/architecture.md"
found=$(table_findings . "$t/p/docs/architecture.md" "$t/sources")
expect "a file missing from the table" "$found" "missing from the file table: kernels/grow.c"
expect "a file in the table that is not there" "$found" "listed in the file table but not there: kernels/planted_gone.c"
grep -q '^scripts/portable.sh$' "$t/sources" &&
    sed 's|^scripts/portable.sh$|scripts/planted_new.sh|' "$t/sources" | sort > "$t/sources2"
expect "a new source file missing from the table" \
    "$(table_findings . docs/architecture.md "$t/sources2")" "missing from the file table: scripts/planted_new.sh"
printf 'see [the guide](guide.md), [the tools](tools.md#bench) and ![a picture](../planted/none.png)\n\n[ref]: ../planted/ref.md\n' > "$t/p/docs/links.md"
found=$(link_findings "$t/p/docs/links.md")
expect "a broken reference link" "$found" "links.md:3: the link '../planted/ref.md' names nothing"
expect "a broken link" "$found" "links.md:1: the link 'guide.md' names nothing"
expect "a broken image link" "$found" "the link '../planted/none.png' names nothing"
case $found in
*tools.md*) failed=$((failed + 1)); echo "FAIL: a good link was reported: $found" >&2 ;;
*) passed=$((passed + 1)) ;;
esac

# the real tree
for check in usage files links; do
    case $check in
    usage) found=$(usage_findings docs/*.md) ;;
    files) found=$(table_findings . docs/architecture.md "$t/sources") ;;
    links) found=$(link_findings README.md docs/*.md) ;;
    esac
    if [ -n "$found" ]; then
        printf '%s\n' "$found" | sed 's/^/FAIL: /' >&2
        failed=$((failed + $(printf '%s\n' "$found" | grep -c .)))
    else
        passed=$((passed + 1))
    fi
done
echo "check_docs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
