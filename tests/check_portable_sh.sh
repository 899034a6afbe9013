#!/bin/sh
# check_portable_sh.sh - the shell scripts stay runnable on macOS. make test
# runs on Macs, where the userland is BSD's, /bin/bash is bash 3.2 and
# /bin/sh is bash 3.2 in POSIX mode: a GNU-only option (sed -i without a
# suffix, readlink -f, date +%N), a command macOS lacks (timeout, nproc,
# md5sum), a bash 4 feature (declare -A, ${x,,}, mapfile) or LD_PRELOAD
# works on Linux and breaks there, unseen by a Linux CI. Every line of
# tests/*.sh and scripts/*.sh (heredocs too) is matched against the rules
# below; a match fails the check with FILE:LINE, the construct and its
# portable form (most are in scripts/portable.sh). A line that is guarded by
# a platform check of its own says so with the comment "# portable: WHY" at
# its end, a block with the lines "# portable-begin: WHY" ... "# portable-end".
# Comment lines are not read. It first proves itself: each rule must flag its
# planted example, and leave its good examples and a marked line alone.
# usage: tests/check_portable_sh.sh [ROOT]   (default: this repository)
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
# scripts that never run on a Mac (not read): FILE WHY
skip_files='
scripts/gpu-run.sh the NVIDIA GPU machines (Linux)
scripts/gpu-mma.sh the NVIDIA GPU machines (Linux)
scripts/gpu-tune-peers.sh the NVIDIA GPU machines (Linux)
scripts/sass-stats.sh the NVIDIA GPU machines (Linux, CUDA toolkit)
scripts/device-u4-check.sh the AVX-512 device machine (Linux)
scripts/macos-cross.sh Linux, cross-building for macOS
tests/check_portable_sh.sh this check: its rules are the constructs it looks for
'
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
# The rules: "name:", "re:" (an extended regular expression, as awk reads it;
# @CMD@ stands for "where a command starts"), optionally "unless:" (a line
# that also matches it is fine) and "unquoted: yes" (matched with the text in
# single quotes left out), "use:" (the portable form), "bad:" (a line
# the rule must flag) and any number of "good:" (lines it must not flag).
cat > "$t/rules" <<'EOF'
name: sed -i without a suffix argument
re: (^|[^A-Za-z0-9_-])sed([[:space:]]+[^|;&[:space:]]+)*[[:space:]]+(-[A-Za-z]*i|--in-place)([[:space:]]|=|$)
use: sed ... FILE > FILE.tmp && mv FILE.tmp FILE (macOS's sed -i takes a suffix argument, GNU's none)
bad: sed -i '$d' "$d/x.csv"
bad: sed -E -i '' 's/a/b/' f
good: sed -n 's/a/b/p' f | grep -i x
good: sed 's/x/y/' f > g

name: sed -r or -z
re: (^|[^A-Za-z0-9_-])sed([[:space:]]+-[A-Za-z]+)*[[:space:]]+(-[A-Za-z]*[rz]|--regexp-extended|--null-data)([[:space:]]|$)
use: sed -E (both have it); no -z
bad: sed -r 's/(a)+/b/' f
good: sed -E 's/(a)+/b/' f

name: GNU regular-expression escapes in sed or grep
re: (^|[^A-Za-z0-9_-])(sed|grep)[[:space:]][^|]*\\[+?|sSwW<>]
unless: (sed|grep)([[:space:]]+-[A-Za-z]+)*[[:space:]]+-[A-Za-z]*E[^|]*\\[+?|]
use: [[:space:]], [[:alnum:]_], \{1,\} or -E with + ? | (BSD sed and grep have no \+ \? \| \s \w \< \>)
bad: grep 'a\+b' f
bad: sed 's/\s*$//' f
good: grep -E 'a\+b' f
good: sed 's/^# \{0,1\}//' f

name: readlink -f / realpath
re: (^|[^A-Za-z0-9_-])(readlink([[:space:]]+-[A-Za-z]+)*[[:space:]]+-[A-Za-z]*[fem]|realpath)([[:space:]]|$)
use: resolve_path (scripts/portable.sh) or (cd DIR && pwd -P) (macOS before 13 has neither)
bad: dirname "$(readlink -f "$f")"
good: cur=$(readlink "$1/tables/current")

name: date +%N
re: (^|[^A-Za-z0-9_-])date[[:space:]][^|;]*%[0-9]*N
use: now_ns (scripts/portable.sh) (BSD date prints the N as it is)
bad: start=$(date +%s%N)
good: t0=$(date +%s)

name: date -d / --date / -I
re: (^|[^A-Za-z0-9_-])date([[:space:]]+-[A-Za-z]+)*[[:space:]]+(-[A-Za-z]*[dI]|--date|--iso)
use: date -u +FORMAT; for another time, arithmetic on date +%s or awk
bad: date -d yesterday +%F
good: day=$(date -u +%Y-%m-%d)

name: find -printf / -regextype / find with no starting point
re: (^|[^A-Za-z0-9_-])find([[:space:]][^|;]*[[:space:]]-(printf|fprintf|regextype)|[[:space:]]+-(name|iname|type|maxdepth|mindepth|path|newer|print)([[:space:]]|$))
use: find DIR ... -print (and stat, wc or ls for the fields); BSD find needs the path
bad: find . -type f -printf '%s\n'
bad: find -name '*.csv'
good: find . -path ./x -prune -o -type f -print

name: xargs -r / -d
re: (^|[^A-Za-z0-9_-])xargs([[:space:]]+-[A-Za-z0-9]+)*[[:space:]]+(-[A-Za-z]*[rd]|--no-run-if-empty|--delimiter)([[:space:]]|$)
use: a check for empty input before xargs; tr '\n' '\0' | xargs -0
bad: ls | xargs -r rm
good: find . -type f | sort | xargs cksum

name: nproc
re: @CMD@nproc@END@
use: ncpu (scripts/portable.sh): getconf _NPROCESSORS_ONLN or sysctl -n hw.ncpu on macOS
bad: make -j"$(nproc)" all
good: echo "n processors"

name: timeout
re: @CMD@g?timeout@END@
use: run_timeout SECONDS CMD... (scripts/portable.sh): macOS has no timeout
bad: out=$(timeout 300 scripts/x.sh 2>&1)
good: die "the node did not come up (timeout)"

name: md5sum / sha*sum
re: @CMD@(md5sum|sha1sum|sha224sum|sha256sum|sha384sum|sha512sum|b2sum)@END@
use: sha256 or $MQ_SHA256 (scripts/portable.sh): shasum -a 256 on macOS
bad: md5sum < "$f"
bad: find . -type f | xargs md5sum
good: sha256 < "$f"

name: Linux-only command
re: @CMD@(tac|setsid|flock|unshare|lscpu|getent|stdbuf|numfmt|shuf|truncate|pidof|ldd|ionice|taskset|chrt|nsenter|systemctl|sensible-editor|update-alternatives)@END@
use: tail -r for tac; sysctl for lscpu; the platform's own form behind a uname check, marked "# portable: WHY"
bad: tac f
bad: SHELL=$(getent passwd "$(id -un)" | cut -d: -f7)
good: x=$(tail -r f)

name: mount / ip netns (Linux only)
re: @CMD@(u?mount([[:space:]]|$)|ip[[:space:]]+netns)
use: a platform check, or fault injection (tests/fault_inject.c) for a full disk
bad: mount -t tmpfs -o size=1m tmpfs "$mnt"
good: echo amount

name: free -g / /proc (Linux only)
re: @CMD@free[[:space:]]+-|/proc/
use: mem_gib (scripts/portable.sh); sysctl, ps or fcntl(F_GETPATH) on macOS
bad: free -g | awk '/Mem:/ { print $2 }'
bad: cat /proc/cpuinfo
good: echo "the first free worker"

name: grep -P
re: (^|[^A-Za-z0-9_-])grep([[:space:]]+-[A-Za-z]+)*[[:space:]]+(-[A-Za-z]*P|--perl-regexp)
use: grep -E (BSD grep has no -P)
bad: grep -P '\d+' f
good: grep -E '[0-9]+' f

name: head with a negative count
re: (^|[^A-Za-z0-9_-])head([[:space:]]+-[A-Za-z]+)*[[:space:]]+-[cn][[:space:]]*-[0-9]
use: sed '$d' (the last line), or a count computed from wc -c
bad: head -n -1 f
good: head -n 2 f

name: GNU mktemp options or a template with a suffix
re: (^|[^A-Za-z0-9_-])mktemp([[:space:]]+-[A-Za-z]+)*[[:space:]]+(--[a-z]|-[A-Za-z]*p([[:space:]]|$))|(^|[^A-Za-z0-9_-])mktemp[[:space:]][^|;)]*XXX[^X[:space:]'")|;]
use: mktemp, mktemp -d, or "${TMPDIR:-/tmp}/nameXXXXXX" with the X's last
bad: f=$(mktemp --suffix .csv)
bad: f=$(mktemp /tmp/aXXXXXX.csv)
good: d=$(mktemp -d)
good: f=$(mktemp "${TMPDIR:-/tmp}/mq.XXXXXX")

name: cp/mv/ln -T, ln -r, install -D
re: (^|[^A-Za-z0-9_-])((cp|mv|ln)([[:space:]]+-[A-Za-z]+)*[[:space:]]+-[A-Za-z]*T|ln([[:space:]]+-[A-Za-z]+)*[[:space:]]+-[A-Za-z]*r|install([[:space:]]+-[^[:space:]]+)*[[:space:]]+-[A-Za-z]*D)([[:space:]]|$)
use: mkdir -p DIR before install -m; cp SRC DEST/ with DEST made first; ln -s with a computed relative path
bad: install -D -m 644 a b/c/a
bad: cp -rT a b
good: install -d "$dest/lib"
good: cp -L "$a" "$b"

name: GNU long option of a core tool
re: @CMD@(cp|mv|ln|ls|du|df|head|tail|wc|cut|tr|date|touch|chmod|chown|mkdir|rm|rmdir|cat|uniq|od|stat|split|comm|join|paste|basename|dirname|sleep|seq|mktemp|readlink|id|uname|install|xargs|find|sed|ps|env|nl|fold|expand|tee)([[:space:]]+[^|;&)[:space:]]+)*[[:space:]]+--[a-z]
unquoted: yes
use: the short option (BSD tools take few long ones)
bad: ls --time-style=+%s x
bad: df --output=avail .
good: rm -rf -- "$d"
good: sed -n 's/^#SBATCH --array=\([0-9]*\)/\1/p' "$s"
good: x=$(basename "$B")" --out "$o"

name: du -b / stat -c
re: (^|[^A-Za-z0-9_-])(du([[:space:]]+-[A-Za-z]+)*[[:space:]]+-[A-Za-z]*b|stat[[:space:]]+(-[A-Za-z]*c|--))
use: wc -c < FILE (a file's size)
bad: size=$(stat -c %s f)
bad: du -sb d
good: du -sk d

name: sort -V
re: (^|[^A-Za-z0-9_-])sort([[:space:]]+-[A-Za-z0-9,.]+)*[[:space:]]+(-[A-Za-z]*V|--version-sort)
use: sort -t. -k1,1n -k2,2n ... (macOS's sort before 14 is GNU sort 5.93, without -V)
bad: ls | sort -V
good: sort -t, -k2n f

name: sleep with a unit or infinity
re: (^|[^A-Za-z0-9_-])sleep[[:space:]]+([0-9.]+[smhd]([[:space:]]|$)|infinity)
use: sleep SECONDS
bad: sleep 1m
good: sleep 0.05

name: GNU ps fields or options
re: @CMD@ps[[:space:]][^|;]*(-o[^|;]*(cmd|etimes|nlwp|psr)([=,[:space:]]|$)|--[a-z])
use: ps -o pid=,command= (macOS names the fields command, etime)
bad: ps -o cmd= -p $$
good: ps -o pid=,command= -p $$

name: ulimit -v
re: (^|[^A-Za-z0-9_-])ulimit([[:space:]]+-[A-Za-z]+)*[[:space:]]+-[A-Za-z]*v
use: a memory limit inside the program (setrlimit RLIMIT_AS is not enforced on macOS)
bad: ulimit -v 1000000
good: ulimit -n 256

name: hostname -I / -A / -i
re: (^|[^A-Za-z0-9_-])hostname([[:space:]]+-[A-Za-z]+)*[[:space:]]+-[A-Za-z]*[IAi]([[:space:]]|$)
use: hostname, hostname -s
bad: hostname -I
good: host=$(hostname -s)

name: GNU time, base64 -w
re: /usr/bin/time([[:space:]]+-[A-Za-z]+)*[[:space:]]+-[A-Za-z]*[fv]|(^|[^A-Za-z0-9_-])base64([[:space:]]+-[A-Za-z]+)*[[:space:]]+-[A-Za-z]*w
use: /usr/bin/time -p; base64 | tr -d '\n'
bad: /usr/bin/time -v ./x
good: /usr/bin/time -p ./x

name: LD_PRELOAD / LD_LIBRARY_PATH
re: (^|[^A-Za-z0-9_])LD_(PRELOAD|LIBRARY_PATH)([^A-Za-z0-9_]|$)
use: the variable by platform: DYLD_INSERT_LIBRARIES / DYLD_LIBRARY_PATH on macOS, set on the command that execs the project's own binary
bad: LD_PRELOAD="$lib" ./tool
good: with_faults ./tool

name: DYLD_* through a system binary
re: (^|[^A-Za-z0-9_-])(env|sh|bash|/bin/sh|/bin/bash|/usr/bin/env)[[:space:]][^|;]*DYLD_[A-Z_]+=|DYLD_[A-Z_]+=[^[:space:]]*[[:space:]]+([A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*[[:space:]]+)*(env|sh|bash|/bin/sh|/bin/bash|/usr/bin/env|command|exec[[:space:]]+(sh|bash|env))([[:space:]]|$)
use: set DYLD_* on the command that execs the project's own binary: SIP drops it when /bin/sh or /usr/bin/env is exec'ed
bad: env DYLD_INSERT_LIBRARIES="$lib" ./tool
bad: DYLD_INSERT_LIBRARIES="$lib" sh -c ./tool
good: DYLD_INSERT_LIBRARIES="$lib" ./tool

name: echo with options or escapes
re: @CMD@echo[[:space:]]+(-[neE]+[[:space:]]|[^|;&]*\\[abcfnrtv0])
use: printf (macOS's /bin/sh echo takes no option and reads backslash escapes)
bad: echo -n "x"
bad: echo "a\tb"
good: echo "\$x is $x"

name: associative arrays, namerefs, case attributes (bash 4)
re: (^|[^A-Za-z0-9_-])(declare|typeset|local|readonly)([[:space:]]+-[A-Za-z]+)*[[:space:]]+-[A-Za-z]*[Anglu]
use: plain variables with computed names, or a file, or awk (macOS's bash is 3.2)
bad: declare -A seen
good: local what=$1 v

name: ${x,,} ${x^^} case modification (bash 4)
re: \$\{[#!]?[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?(,|\^)
use: tr '[:upper:]' '[:lower:]' (macOS's bash is 3.2)
bad: lower=${name,,}
good: x=${name%,*}

name: mapfile / readarray / coproc (bash 4)
re: @CMD@(mapfile|readarray|coproc)@END@
use: while IFS= read -r line; do arr+=("$line"); done < FILE
bad: mapfile -t lines < f
good: while IFS= read -r line; do n=$((n + 1)); done < f

name: &>> |& ;;& (bash 4)
re: &>>|\|&|;;&
use: >> FILE 2>&1, 2>&1 |, separate case branches
bad: cmd &>> log
bad: cmd |& tee log
good: cmd >> log 2>&1

name: bash 4+ variables and expansions
re: \$\{?(EPOCHREALTIME|EPOCHSECONDS|BASHPID|SRANDOM)|\$\{[A-Za-z_][A-Za-z0-9_]*(\[[@*]\])?@[QEPAKaUuLk]\}|\[\[[[:space:]]+-v[[:space:]]|(^|[^A-Za-z0-9_-])wait[[:space:]]+-n|\{[A-Za-z_][A-Za-z0-9_]*\}[<>]|%\([^)]*\)T|\$\{[A-Za-z_][A-Za-z0-9_]*\[-[0-9]
use: now_ns, $$, "${x+set}", printf %q, exec 3>FILE, date (macOS's bash is 3.2)
bad: t=$EPOCHREALTIME
bad: last=${a[-1]}
bad: [[ -v name ]]
good: last=${a[${#a[@]}-1]}

name: bash 4 shopt or brace sequence
re: shopt[[:space:]]+-s[[:space:]]+(globstar|lastpipe|autocd|checkjobs|direxpand|dirspell|inherit_errexit|localvar_inherit|assoc_expand_once)|\{[0-9]+\.\.[0-9]+\.\.|\{0[0-9]+\.\.[0-9]+\}
use: find; seq; seq -w (macOS's bash is 3.2)
bad: shopt -s globstar
bad: for i in {01..10}; do :; done
good: shopt -s nullglob
good: for i in {1..10}; do :; done

name: gawk-only function
re: (^|[^A-Za-z0-9_])(gensub|strftime|systime|asorti?)\(|PROCINFO\[|IGNORECASE[[:space:]]*=
use: sub/gsub and match; date outside awk (macOS's awk is the one true awk)
bad: awk '{ print strftime("%F", $1) }' f
good: awk '{ sub(/a/, "b"); print }' f

name: wc count used as a string
re: (^|[^A-Za-z0-9_-])wc[[:space:]]+-[lcmw]
unless: -eq|-ne|-gt|-ge|-lt|-le|\$\(\(|tr -d
use: nlines (scripts/portable.sh), $(( $(wc -l < F) )), or a numeric test: macOS's wc pads its count with spaces
bad: n=$(wc -l < f)
good: [ "$(wc -l < f)" -eq 3 ]
EOF

# scan RULES FILE...: one line per finding, "FILE:LINE: NAME: TEXT -> USE"
scan() {
    awk -v q="'" '
    BEGIN {
        cmd = "(^|[;&|`!{]|\\$\\(|(^|[[:space:]])(if|then|do|else|elif|while|until|exec|command|xargs|time|env|sh|bash|nice)[[:space:]])[[:space:]]*([A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*[[:space:]]+)*"
        end = "([[:space:]]|$|[;&|)`])"
    }
    function expand(re,   i) {
        while ((i = index(re, "@CMD@")) > 0) re = substr(re, 1, i - 1) cmd substr(re, i + 5)
        while ((i = index(re, "@END@")) > 0) re = substr(re, 1, i - 1) end substr(re, i + 5)
        return re
    }
    FNR == NR {
        if ($0 ~ /^name: /) { n++; name[n] = substr($0, 7) }
        else if ($0 ~ /^re: /) re[n] = expand(substr($0, 5))
        else if ($0 ~ /^unless: /) un[n] = substr($0, 9)
        else if ($0 ~ /^unquoted: yes/) unq[n] = 1
        else if ($0 ~ /^use: /) use[n] = substr($0, 6)
        next
    }
    FNR == 1 { block = 0 }
    /^[[:space:]]*#[[:space:]]*portable-begin/ { block = 1; next }
    /^[[:space:]]*#[[:space:]]*portable-end/ { block = 0; next }
    block { next }
    /^[[:space:]]*#/ { next }
    /#[[:space:]]*portable:/ { next }
    {
        bare = $0
        gsub(q "[^" q "]*" q, q q, bare)
        for (i = 1; i <= n; i++)
            if ((unq[i] ? bare : $0) ~ re[i] && !(un[i] != "" && $0 ~ un[i])) {
                text = $0
                sub(/^[[:space:]]+/, "", text)
                if (length(text) > 100) text = substr(text, 1, 97) "..."
                printf "%s:%d: %s: %s -> %s\n", FILENAME, FNR, name[i], text, use[i]
            }
    }' "$@"
}

passed=0; failed=0
# ---- the check of the check: every rule on its examples
awk '/^name: /   { name = substr($0, 7) }
     /^bad: /    { print substr($0, 6) > (dir "/planted.sh"); print name > (dir "/planted.want") }
     /^good: /   { print substr($0, 7) > (dir "/good.sh") }' dir="$t" "$t/rules"
printf 'x=$(nproc) # portable: a marked line\n# portable-begin: a marked block\ntac f\n# portable-end\n' >> "$t/good.sh"
(cd "$t" && scan rules planted.sh good.sh) > "$t/found"
self=0
k=0
while IFS= read -r want; do
    k=$((k + 1))
    grep -F "planted.sh:$k: $want:" "$t/found" >/dev/null 2>&1 || {
        self=$((self + 1))
        echo "FAIL: the rule '$want' did not flag its example: '$(sed -n "${k}p" "$t/planted.sh")'" >&2
    }
done < "$t/planted.want"
if grep '^good.sh:' "$t/found" > "$t/wrong"; then
    self=$((self + $(grep -c . "$t/wrong")))
    sed 's/^/FAIL: a good example was flagged: /' "$t/wrong" >&2
fi
if [ "$self" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + self)); fi

# ---- the tree
files=""
for f in "$root"/tests/*.sh "$root"/scripts/*.sh; do
    [ -f "$f" ] || continue
    rel=${f#"$root"/}
    case "$skip_files" in *"
$rel "*) continue ;; esac
    files="$files $rel"
done
if [ -z "$files" ]; then
    failed=$((failed + 1))
    echo "FAIL: no tests/*.sh or scripts/*.sh under '$root'" >&2
fi
# shellcheck disable=SC2086 # one argument per file (no spaces in these names)
found=$(cd "$root" && scan "$t/rules" $files)
for rel in $files; do
    n=$(printf '%s\n' "$found" | grep -c "^$rel:")
    if [ "$n" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + n)); fi
done
[ -z "$found" ] || printf '%s\n' "$found" | sed 's/^/FAIL: /' >&2
echo "portable_sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
