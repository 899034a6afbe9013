#!/bin/sh
# nightly.sh - the nightly regression run. The verdict comes from an A/B: the
# accepted revision (A, built from git in a worktree) and this tree (B) are
# measured tonight, in alternating fresh processes (rounds A B, B A, A B, ...:
# ABBA), on bench's cold-weight protocol, and judged by a paired test on the
# rounds' ratios (compare --ab). The stored-history comparison stays for the
# long-term trend and the plots.
#   scripts/nightly.sh            A/B night -> $NIGHTLY_DIR/ab/STAMP/{a,b}.R.csv, the
#                                 verdict STAMP-ab.md and a row of ab-history.csv; B's
#                                 rounds' median is tonight's stored run STAMP.csv, compared
#                                 with baseline.csv (STAMP-report.md, history.csv); plots
#   scripts/nightly.sh --accept   this tree's commit becomes A (accepted-rev), and the
#                                 median of the latest stored runs the stored baseline
#   scripts/nightly.sh --stored   the stored-history night alone (no A/B): compare with
#                                 baseline.csv, confirmation pass of what regressed
#   scripts/nightly.sh bisect GOOD BAD [--bench TEXT]
#                                 git bisect run with the same A/B at each step (A = GOOD),
#                                 after one of BAD (what it hunts); a step that neither
#                                 regressed nor ruled out half of that gets more rounds,
#                                 then is skipped -> $NIGHTLY_DIR/bisect-STAMP.md, the
#                                 first bad commit and every step's ratios
# STAMP is DATE (DATE.rHHMMSS for another run that day). Exit status: 1 a
# regression (or a kernel computed a wrong result), 0 none, 2 the run failed.
# Environment: NIGHTLY_DIR (default results/nightly), NIGHTLY_CHIP (default
# host), NIGHTLY_BENCH_ARGS (default: the Llama-3-8B layers at M 1 and 16,
# fp4 and u4, seed space), NIGHTLY_ROUNDS (A/B rounds, 2 to 64, default 4),
# NIGHTLY_AB_ARGS (each A/B process's budget, default --budget 0.05
# --max-reps 30 --no-probes), NIGHTLY_ALPHA / NIGHTLY_MIN_EFFECT (compare --ab's, default
# 0.01 / 0.03), NIGHTLY_A_REV (A: another revision than accepted-rev),
# NIGHTLY_A_BENCH (A: this bench binary instead of a build),
# NIGHTLY_BISECT_MAX_ROUNDS (a bisect step's rounds at most, NIGHTLY_ROUNDS to 64, default 3 x
# NIGHTLY_ROUNDS, at most 64), NIGHTLY_ACCEPT_RUNS (--accept: the runs the stored
# baseline is the median of, default 3), NIGHTLY_CONFIRM
# (--stored: 0 no confirmation pass, default 1). For testing the detector only:
# NIGHTLY_PLANT=VARIANT:FRACTION builds B with make PLANT=1 (BUILD=build-plant)
# and slows that variant's runs by FRACTION (backends/cpu.c); a tree whose
# file .nightly-plant holds VARIANT:FRACTION plants it the same way, so a
# synthetic history can carry a slowdown in one commit.
# Bad input (an unknown argument, a setting out of its range, a revision that
# is no commit, a run outside the repository's top directory) is refused
# before anything is made or built: one line "nightly: ..." on stderr, exit 2.
# NIGHTLY_CHIP, NIGHTLY_BENCH_ARGS and NIGHTLY_AB_ARGS are checked by this
# tree's bench (bench --explain) once it is built (make all), before the
# results directory is made or another revision built: bench's own line.
set -eu
root=$(pwd)
. "$(dirname "$0")/portable.sh"
say() { echo "nightly: $*"; }
fail() { echo "nightly: $*" >&2; exit 2; }
# oneline TEXT: TEXT with its line breaks as spaces (a refusal is one line)
oneline() { printf '%s' "$1" | tr '\n\r' '  '; }
# whole TEXT: TEXT is a whole number (of up to 9 digits, leading zeros
# dropped): its value on stdout
whole() {
    case $1 in '' | *[!0-9]*) return 1 ;; esac
    wh=$(printf '%s\n' "$1" | sed 's/^0*//')
    [ ${#wh} -le 9 ] || return 1
    echo "${wh:-0}"
}
# number TEXT COND: TEXT is a decimal number (an exponent allowed) x for
# which the awk condition COND holds
number() {
    case $1 in '' | *[!0-9.eE+-]*) return 1 ;; esac
    printf '%s\n' "$1" | grep -Eq '^([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$' || return 1
    awk -v x="$1" "BEGIN { x += 0; exit !($2) }"
}
# plant_ok SPEC: SPEC is VARIANT:FRACTION, as the PLANT build reads it
# (backends/cpu.c: a slowdown above 0 and under 10)
plant_ok() {
    case $1 in ?*:?*) ;; *) return 1 ;; esac
    case ${1%%:*} in *[!A-Za-z0-9_]*) return 1 ;; esac
    number "${1#*:}" 'x > 0 && x < 10'
}
# in_the_way PATH: the first existing path up from PATH when it is not a
# directory (a file where a directory would be made), else nothing
in_the_way() {
    iw=$1
    while [ ! -e "$iw" ] && [ ! -L "$iw" ]; do iw=$(dirname "$iw"); done
    [ -d "$iw" ] || echo "$iw"
}

# ---- the command line
usage="usage: nightly.sh [--accept | --stored | bisect GOOD BAD [--bench TEXT]]"
mode=ab bench_filter=
if [ $# -gt 0 ]; then
    case $1 in
    --accept | --stored)
        mode=${1#--}
        [ $# -eq 1 ] || fail "unexpected argument '$(oneline "$2")' after $1 ($usage)"
        ;;
    bisect)
        mode=bisect
        [ $# -ge 2 ] || fail "bisect needs GOOD and BAD ($usage)"
        [ $# -ge 3 ] || fail "bisect needs BAD after GOOD '$(oneline "$2")' ($usage)"
        good_arg=$2 bad_arg=$3
        shift 3
        if [ $# -gt 0 ]; then
            [ "$1" = --bench ] || fail "unknown argument '$(oneline "$1")' after bisect GOOD BAD ($usage)"
            [ $# -ge 2 ] && [ -n "$2" ] || fail "--bench needs a value (a benchmark's name, or part of one)"
            bench_filter=$2
            [ $# -eq 2 ] || fail "unexpected argument '$(oneline "$3")' after --bench $(oneline "$2") ($usage)"
        fi
        ;;
    --ab-step) # internal: A/B rounds of a bisect step, in the commit's tree
        mode=ab-step
        { [ $# -eq 4 ] || { [ $# -eq 5 ] && whole "$5" > /dev/null && [ "$5" -ge 1 ]; }; } ||
            fail "--ab-step (internal) takes OUTDIR A_BENCH B_BENCH [FROM]"
        ;;
    *) fail "unknown argument '$(oneline "$1")' ($usage)" ;;
    esac
fi

# ---- the settings
dir=${NIGHTLY_DIR:-results/nightly}
case $dir in /*) ;; *) dir=$root/$dir ;; esac
chip=${NIGHTLY_CHIP:-host}
args="--chip $chip ${NIGHTLY_BENCH_ARGS:---suite llama3-8b --m 1,16 --formats fp4,u4}"
ab_args=${NIGHTLY_AB_ARGS:---budget 0.05 --max-reps 30 --no-probes}
rounds=${NIGHTLY_ROUNDS:-4}
alpha=${NIGHTLY_ALPHA:-0.01}
min_effect=${NIGHTLY_MIN_EFFECT:-0.03}
# a paired test needs two rounds; compare --ab reads at most 64 (MQ_AB_MAX_ROUNDS)
rounds=$(whole "$rounds") && [ "$rounds" -ge 2 ] && [ "$rounds" -le 64 ] ||
    fail "bad NIGHTLY_ROUNDS '$(oneline "${NIGHTLY_ROUNDS:-}")' (expected a whole number of A/B rounds, 2 to 64)"
max_rounds=${NIGHTLY_BISECT_MAX_ROUNDS:-}
if [ -z "$max_rounds" ]; then
    max_rounds=$((3 * rounds)) && [ "$max_rounds" -le 64 ] || max_rounds=64
fi
max_rounds=$(whole "$max_rounds") && [ "$max_rounds" -ge "$rounds" ] && [ "$max_rounds" -le 64 ] ||
    fail "bad NIGHTLY_BISECT_MAX_ROUNDS '$(oneline "${NIGHTLY_BISECT_MAX_ROUNDS:-}")' (expected $rounds to 64: NIGHTLY_ROUNDS to compare --ab's limit)"
accept_runs=$(whole "${NIGHTLY_ACCEPT_RUNS:-3}") && [ "$accept_runs" -ge 1 ] ||
    fail "bad NIGHTLY_ACCEPT_RUNS '$(oneline "${NIGHTLY_ACCEPT_RUNS:-}")' (expected a whole number of runs, 1 or more)"
case ${NIGHTLY_CONFIRM:-1} in 0 | 1) ;; *)
    fail "bad NIGHTLY_CONFIRM '$(oneline "$NIGHTLY_CONFIRM")' (expected 0 or 1: the confirmation pass of --stored off or on)" ;;
esac
number "$alpha" 'x >= 1e-12 && x <= 0.5' ||
    fail "bad NIGHTLY_ALPHA '$(oneline "$alpha")' (expected a number from 1e-12 to 0.5: compare --ab's significance level)"
number "$min_effect" 'x > 0 && x < 1' ||
    fail "bad NIGHTLY_MIN_EFFECT '$(oneline "$min_effect")' (expected a number between 0 and 1: 0.03 is a 3% slowdown)"
[ -z "${NIGHTLY_PLANT:-}" ] || plant_ok "$NIGHTLY_PLANT" ||
    fail "bad NIGHTLY_PLANT '$(oneline "$NIGHTLY_PLANT")' (expected VARIANT:FRACTION, FRACTION above 0 and under 10, e.g. marlin_gemv_decode:2.0)"
# A's bench (the internal --ab-step is given it), as an absolute path: the
# bisect's steps run in a worktree
a_bench=${NIGHTLY_A_BENCH:-}
case $a_bench in '' | /*) ;; *) a_bench=$root/$a_bench ;; esac
[ -z "$a_bench" ] || [ "$mode" = ab-step ] || { [ -f "$a_bench" ] && [ -x "$a_bench" ]; } ||
    fail "NIGHTLY_A_BENCH '$(oneline "$NIGHTLY_A_BENCH")' is not an executable file"
way=$(in_the_way "$dir")
[ -z "$way" ] || fail "NIGHTLY_DIR '$(oneline "$dir")': '$(oneline "$way")' is in the way (not a directory)"

# ---- the repository: its top directory (the A/B and the bisect build
# revisions of it; --stored needs only the project's Makefile)
if [ "$mode" != ab-step ]; then
    if top=$(git rev-parse --show-toplevel 2> /dev/null) && [ -n "$top" ]; then
        [ "$(cd "$top" && pwd -P)" = "$(pwd -P)" ] ||
            fail "run it from the repository's top directory '$(oneline "$top")' (make nightly), not '$(oneline "$root")'"
    elif [ "$mode" != stored ]; then
        fail "'$(oneline "$root")' is not in a git work tree (the A/B builds its revisions from git; only --stored runs without one)"
    fi
    [ -f "$root/Makefile" ] ||
        fail "no Makefile in '$(oneline "$root")': run it from the project's top directory (make nightly)"
    if [ "$mode" != stored ]; then
        git rev-parse --verify -q "HEAD^{commit}" > /dev/null 2>&1 || fail "the repository has no commit (HEAD) yet"
    fi
fi
# commit WHAT REV: REV's commit hash, or a refusal naming WHAT
commit() {
    git rev-parse --verify -q "$2^{commit}" 2> /dev/null ||
        fail "$1 '$(oneline "$2")' is not a commit of this repository"
}
if [ "$mode" = ab ]; then
    [ -z "${NIGHTLY_A_REV:-}" ] || commit NIGHTLY_A_REV "$NIGHTLY_A_REV" > /dev/null
    if [ -z "${NIGHTLY_A_REV:-}" ] && [ -s "$dir/accepted-rev" ]; then
        accepted=$(cat "$dir/accepted-rev")
        git rev-parse --verify -q "$accepted^{commit}" > /dev/null 2>&1 ||
            fail "$dir/accepted-rev: '$(oneline "$accepted")' is not a commit of this repository (make nightly-accept records this tree's)"
    fi
    if [ -z "${NIGHTLY_PLANT:-}" ] && [ -f "$root/.nightly-plant" ]; then
        tree_plant=$(tr -d ' \n' < "$root/.nightly-plant")
        plant_ok "$tree_plant" ||
            fail "$root/.nightly-plant: bad '$(oneline "$tree_plant")' (expected VARIANT:FRACTION, FRACTION above 0 and under 10)"
    fi
fi
if [ "$mode" = bisect ]; then
    good=$(commit GOOD "$good_arg")
    bad=$(commit BAD "$bad_arg")
    [ "$good" != "$bad" ] || fail "GOOD and BAD are the same commit ($good): nothing to bisect"
    git merge-base --is-ancestor "$good" "$bad" 2> /dev/null || fail "GOOD $good is not an ancestor of BAD $bad"
fi
# B's bench (this tree's build), and the bench arguments checked with it
# before the results directory is made or another revision built: bench
# --explain reads and checks every input (the chip, the suite, the
# formats, the budgets) and creates nothing; its own last line is the refusal
if [ "$mode" = ab ] || [ "$mode" = stored ]; then
    make all > /dev/null
    check_args=$args
    [ "$mode" = stored ] || check_args="$args $ab_args"
    # shellcheck disable=SC2086 # the arguments are meant to split
    msg=$("$root/build/bench" $check_args --explain 2>&1 > /dev/null) || {
        last=$(printf '%s\n' "$msg" | grep . | tail -n 1 || true)
        [ -n "$last" ] || last="bench refuses the arguments '$check_args'"
        fail "$(oneline "$last")"
    }
fi
[ "$mode" = ab-step ] || mkdir -p "$dir"

# rev_bench REV [MAKE_ARG]: the bench binary of REV, built once in the
# worktree build/nightly-rev/REV (kept for the next night; with PLANT=1, the
# test-only build, REV-plant); its path on stdout
rev_bench() {
    rb_rev=$(git rev-parse --verify -q "$1^{commit}") || fail "'$1' is not a commit of this repository"
    rb_wt=$root/build/nightly-rev/$rb_rev${2:+-plant}
    if [ ! -x "$rb_wt/build/bench" ]; then
        rm -rf "$rb_wt"
        git worktree prune
        git worktree add --detach -f "$rb_wt" "$rb_rev" > /dev/null 2>&1 ||
            fail "cannot check out $rb_rev in a worktree ($rb_wt)"
        # shellcheck disable=SC2086 # no argument or one
        make -C "$rb_wt" -j"$(ncpu)" ${2:-} build/bench > "$rb_wt.log" 2>&1 ||
            fail "the build of $rb_rev failed (log: $rb_wt.log)"
    fi
    echo "$rb_wt/build/bench"
}

# plant_of TREE: the test-only slowdown a tree carries (.nightly-plant), or ""
plant_of() { [ -f "$1/.nightly-plant" ] && tr -d ' \n' < "$1/.nightly-plant" || true; }

# ab_rounds OUTDIR A_BENCH B_BENCH B_PLANT [FROM]: NIGHTLY_ROUNDS rounds, A then B
# in odd rounds and B then A in even ones, each a fresh bench process; from
# round FROM (default 1: a new OUTDIR) on, so that a bisect step can add rounds
ab_rounds() {
    ab_dir=$1 ab_a=$2 ab_b=$3 ab_plant=$4 r=${5:-1}
    [ "$r" -gt 1 ] || { rm -rf "$ab_dir" && mkdir -p "$ab_dir"; }
    ab_last=$((r + rounds - 1))
    while [ "$r" -le "$ab_last" ]; do
        order="a b"; [ $((r % 2)) -eq 0 ] && order="b a"
        for side in $order; do
            bin=$ab_a plant=
            [ "$side" = b ] && bin=$ab_b plant=$ab_plant
            brc=0
            # each side quantizes its weights once a night (MQ_WEIGHT_CACHE)
            mkdir -p "$ab_dir/weights-$side"
            # shellcheck disable=SC2086 # the arguments are meant to split
            MQ_WEIGHT_CACHE=$ab_dir/weights-$side MQ_PLANT_SLOWDOWN=$plant "$bin" $args $ab_args \
                --quiet --out "$ab_dir/$side.$r.csv" > "$ab_dir/$side.$r.log" 2>&1 || brc=$?
            [ "$brc" -le 1 ] || fail "bench ($side, round $r) failed: $(tail -3 "$ab_dir/$side.$r.log")"
            [ "$brc" -eq 0 ] || wrong="$wrong $side.$r"
        done
        r=$((r + 1))
    done
    rm -rf "$ab_dir/weights-a" "$ab_dir/weights-b"
}

if [ "$mode" = accept ]; then
    make all > /dev/null
    git rev-parse --verify HEAD > "$dir/accepted-rev.tmp" && mv "$dir/accepted-rev.tmp" "$dir/accepted-rev"
    say "A is now $(cat "$dir/accepted-rev")"
    # the stored baseline: per benchmark, the median of the last NIGHTLY_ACCEPT_RUNS
    # runs (default 3), so that one fast or slow run does not set the bar
    runs=$(ls "$dir" | grep -E '^[0-9]{4}-[0-9]{2}-[0-9]{2}(\.r[0-9]{6})?\.csv$' | sort |
           tail -n "$accept_runs")
    [ -n "$runs" ] || { say "no stored run in $dir yet: the stored baseline waits for one"; exit 0; }
    # shellcheck disable=SC2046 # one argument per run file
    build/compare --median-of "$dir/baseline.csv" $(printf "$dir/%s " $runs) || exit 2
    say "the stored baseline is the median of" $runs
    exit 0
fi

if [ "$mode" = bisect ]; then
    make build/compare > /dev/null 2>&1 || [ -x build/compare ] || fail "cannot build build/compare"
    stamp=$(date -u +%Y-%m-%dT%H%M%S)
    ev=$dir/bisect-$stamp
    mkdir -p "$ev"
    abin=${a_bench:-$(rev_bench "$good")}
    wt=$root/build/nightly-bisect
    git worktree prune
    if [ ! -d "$wt/.git" ] && [ ! -f "$wt/.git" ]; then
        rm -rf "$wt"
        git worktree add --detach -f "$wt" "$bad" > /dev/null 2>&1 || fail "cannot make the worktree $wt"
    fi
    # The step, in the worktree's commit: build it (125: untestable), A/B it
    # against GOOD's bench, judge the benchmarks asked for. Bad: a regression.
    # Good: none, and every benchmark's interval rules out the slowdown hunted
    # ($ev/rule-out: compare --rule-out). Neither: NIGHTLY_ROUNDS more rounds,
    # up to $max_rounds, then 125 (git bisect skips it) rather than a guess:
    # one disturbed round of three can hide a 4x slowdown behind a wide
    # interval. With the argument "calibrate": BAD itself, more rounds while
    # it neither regressed nor ruled out the minimum effect.
    cat > "$ev/step.sh" <<EOF
#!/bin/sh
cal=\${1:-}
if [ -n "\$cal" ]; then
    out="$ev/calibrate" rule="--rule-out $min_effect"
else
    n=\$(ls "$ev" | grep -c '^step-[0-9]*\$' || true); n=\$((n + 1))
    out="$ev/step-\$n" rule="--rule-out \$(cat "$ev/rule-out")"
fi
${NIGHTLY_BISECT_BUILD:-make -j$(ncpu) build/bench} > "\$out.build.log" 2>&1 || exit 125
total=0
while :; do
    NIGHTLY_DIR="$dir" sh "$root/scripts/nightly.sh" --ab-step "\$out" "$abin" \\
        "\$(pwd)/build/bench" \$((total + 1)) || exit 125
    total=\$((total + $rounds))
    rc=0
    "$root/build/compare" --ab "\$out" --alpha $alpha --min-effect $min_effect \$rule \\
        ${bench_filter:+--bench "$bench_filter"} --report "\$out.md" > "\$out.txt" 2>&1 || rc=\$?
    [ \$rc -eq 3 ] && [ \$total -lt $max_rounds ] || break
done
[ -n "\$cal" ] && [ \$rc -eq 3 ] && exit 0 # BAD not shown slower in \$total rounds
case \$rc in 0) v=good ;; 1) v=bad ;; 3) v="inconclusive after \$total rounds (skipped)"; rc=125 ;; *) exit 125 ;; esac
[ -z "\$cal" ] &&
    echo "| \$n | \$(git log -1 --format='%h %s' HEAD) | \$v | \$(grep '^A/B,' "\$out.txt") |" >> "$ev/steps.md"
exit \$rc
EOF
    chmod +x "$ev/step.sh"
    # Calibration: BAD against GOOD, so that the bisect knows what it hunts
    # (and does not hunt what this A/B cannot see): B/A, the geometric mean
    # over the benchmarks that regressed there (one marginal regression does
    # not set the bar). A step must rule out half of it on the log scale,
    # sqrt(B/A) - 1, and never less than the minimum effect.
    crc=0
    (
        cd "$wt"
        git bisect reset > /dev/null 2>&1 || true
        git checkout -q --detach "$bad" 2>/dev/null
        "$ev/step.sh" calibrate
    ) || crc=$?
    [ "$crc" -le 1 ] || fail "the A/B of BAD $bad against GOOD failed (see $ev/calibrate.txt, $ev/calibrate.build.log)"
    if [ "$crc" -eq 0 ]; then
        {
            echo "# Bisect $good..$bad"
            echo
            echo "**Nothing to bisect:** BAD is not slower than GOOD in $(ls "$ev/calibrate" | grep -c '^a\..*csv$') A/B rounds (alpha $alpha,"
            echo "minimum effect $min_effect${bench_filter:+, benchmarks matching '$bench_filter'}):"
            echo
            echo "    $(grep '^A/B,' "$ev/calibrate.txt")"
        } > "$ev.md.tmp" && mv "$ev.md.tmp" "$ev.md"
        say "BAD $bad is not slower than GOOD $good: nothing to bisect ($ev.md)"
        exit 0
    fi
    hunted=$(awk '$1 == "regressed" { s += log(1 + $2 / 100); n++ } END { print exp(s / n) }' "$ev/calibrate.txt")
    awk -v h="$hunted" -v e="$min_effect" 'BEGIN { f = sqrt(h) - 1; printf "%.4f\n", (f > e ? f : e) }' > "$ev/rule-out"
    (
        cd "$wt"
        git bisect start "$bad" "$good" > /dev/null
        git bisect run "$ev/step.sh" > "$ev/bisect.log" 2>&1 || true
        git bisect log > "$ev/bisect-log.txt" 2>&1 || true
        git bisect reset > /dev/null 2>&1 || true
    )
    first=$(sed -n 's/^\([0-9a-f]\{40\}\) is the first bad commit$/\1/p' "$ev/bisect.log" | head -1)
    # steps skipped as inconclusive can leave several candidates
    anyof=$(sed -n '/first bad commit could be any of/,/cannot bisect more/p' "$ev/bisect.log" |
            grep -oE '^[0-9a-f]{40}' | tr '\n' ' ' | sed 's/ $//' || true)
    steps=$(grep -c '^| [0-9]' "$ev/steps.md" 2>/dev/null || echo 0)
    {
        echo "# Bisect $good..$bad"
        echo
        if [ -n "$first" ]; then
            echo "**First bad commit: \`$first\`** ($(git log -1 --format='%s' "$first")), in $steps A/B steps."
        elif [ -n "$anyof" ]; then
            echo "**The first bad commit is one of:** \`$(echo "$anyof" | sed 's/ /`, `/g')\`" \
                "(inconclusive steps were skipped), after $steps A/B steps."
        else
            echo "**No first bad commit found** ($steps steps; see bisect.log)."
        fi
        echo
        echo "BAD against GOOD: $(grep '^A/B,' "$ev/calibrate.txt")"
        echo "The bisect hunts the geometric mean slowdown of the benchmarks that regressed there: a"
        echo "step is good only when every benchmark's interval stays under +$(awk '{ printf "%.1f", 100 * $1 }' "$ev/rule-out")%, half of it on the"
        echo "log scale (compare --rule-out)."
        echo
        echo "Each step: the commit built, $rounds A/B rounds against GOOD's bench in alternating fresh"
        echo "processes (up to $max_rounds while inconclusive), compare --ab (alpha $alpha, minimum effect"
        echo "$min_effect${bench_filter:+, benchmarks matching '$bench_filter'})."
        echo
        echo "| step | commit | verdict | compare --ab summary |"
        echo "| --- | --- | --- | --- |"
        cat "$ev/steps.md" 2>/dev/null || true
    } > "$ev.md.tmp" && mv "$ev.md.tmp" "$ev.md"
    if [ -n "$first" ]; then
        say "first bad commit $first in $steps steps ($ev.md)"
        exit 1
    fi
    if [ -n "$anyof" ]; then
        say "the first bad commit is one of $anyof (inconclusive steps skipped; $ev.md)"
        exit 1
    fi
    say "no first bad commit found ($ev.md)"
    exit 0
fi

if [ "$mode" = ab-step ]; then # internal: A/B rounds of the bisect (OUTDIR A B [FROM]), in the commit's tree
    wrong=
    ab_rounds "$2" "$3" "$4" "$(plant_of "$(pwd)")" "${5:-1}"
    exit 0
fi

day=$(date -u +%Y-%m-%d)
# DATE.csv; a second run on the same day is DATE.rHHMMSS.csv (sorts after it)
stamp=$day
[ ! -e "$dir/$day.csv" ] || stamp="$day.r$(date -u +%H%M%S)"
out="$dir/$stamp.csv"

if [ "$mode" = stored ]; then
    bench_rc=0
    # shellcheck disable=SC2086 # the arguments are meant to split
    build/bench $args --quiet --out "$out" || bench_rc=$?
    # bench: 1 is a finding (a kernel computed a wrong result), 2 a failed run
    [ "$bench_rc" -le 1 ] || exit 2
    rc=0
    if [ ! -f "$dir/baseline.csv" ]; then
        cp "$out" "$dir/baseline.csv"
        say "no baseline yet: $out is the baseline"
    else
        mkdir -p "$dir/confirm"
        build/compare "$dir/baseline.csv" "$out" --report "$dir/$stamp-report.md" \
            --history "$dir/history.csv" --rerun-list "$dir/confirm/$stamp.rerun" || rc=$?
        # Confirmation pass: re-measure only what regressed, in fresh processes;
        # only regressions that repeat fail the night. NIGHTLY_CONFIRM=0 turns it off.
        if [ "$rc" -eq 1 ] && [ "${NIGHTLY_CONFIRM:-1}" != 0 ]; then
            conf="$dir/confirm/$stamp.csv"
            rm -f "$conf"
            while IFS= read -r line; do
                eval "build/bench $line --quiet --out \"\$conf\"" >/dev/null || [ $? -eq 1 ] || exit 2
            done < "$dir/confirm/$stamp.rerun"
            rc=0
            build/compare "$dir/baseline.csv" "$conf" --report "$dir/$stamp-confirm.md" \
                >/dev/null || rc=$?
            say "confirmation pass: $(grep -c '^| regressed' "$dir/$stamp-confirm.md" || true) of" \
                "$(nlines < "$dir/confirm/$stamp.rerun") regressions repeated ($dir/$stamp-confirm.md)"
        fi
    fi
    [ "$rc" -le 1 ] || exit "$rc"
    if [ "$bench_rc" -eq 1 ]; then
        echo "nightly: a kernel computed wrong results in $out (status wrong): the night fails" >&2
        rc=1
    fi
else
    # A: the accepted revision (the first night accepts this tree's commit: an A/A night)
    arev=${NIGHTLY_A_REV:-}
    if [ -z "$arev" ]; then
        if [ ! -s "$dir/accepted-rev" ]; then
            git rev-parse --verify HEAD > "$dir/accepted-rev"
            say "no accepted revision yet: $(cat "$dir/accepted-rev") (this tree's commit) is A"
        fi
        arev=$(cat "$dir/accepted-rev")
    fi
    bbin=$root/build/bench bplant=${NIGHTLY_PLANT:-$(plant_of "$root")}
    # test only: B with the planted slowdown, and A the same kind of build
    # (the PLANT build's own code would otherwise be a difference of its own)
    abin=${a_bench:-$(rev_bench "$arev" ${bplant:+PLANT=1})}
    if [ -n "$bplant" ]; then
        make BUILD=build-plant PLANT=1 build-plant/bench > /dev/null || exit 2
        bbin=$root/build-plant/bench
    fi
    wrong=
    ab_rounds "$dir/ab/$stamp" "$abin" "$bbin" "$bplant"
    rc=0
    build/compare --ab "$dir/ab/$stamp" --alpha "$alpha" --min-effect "$min_effect" \
        --report "$dir/$stamp-ab.md" --history "$dir/ab-history.csv" > "$dir/ab/$stamp/verdict.txt" || rc=$?
    [ "$rc" -le 1 ] || exit 2
    say "A/B ($rounds rounds, A $arev): $(tail -1 "$dir/ab/$stamp/verdict.txt") ($dir/$stamp-ab.md)"
    # tonight's stored run, for the long-term trend: B's rounds' median
    # shellcheck disable=SC2046 # one argument per round file
    build/compare --median-of "$out" $(ls "$dir/ab/$stamp"/b.*.csv) > /dev/null || exit 2
    if [ ! -f "$dir/baseline.csv" ]; then
        cp "$out" "$dir/baseline.csv"
        say "no stored baseline yet: $out is the baseline"
    else
        trend=0
        build/compare "$dir/baseline.csv" "$out" --report "$dir/$stamp-report.md" \
            --history "$dir/history.csv" > /dev/null || trend=$?
        [ "$trend" -le 1 ] || exit 2
    fi
    if [ -n "$wrong" ]; then
        echo "nightly: a kernel computed wrong results (rounds$wrong, status wrong): the night fails" >&2
        rc=1
    fi
fi
# the pictures: every run against the baseline (A/B verdicts where a night
# had one), and this run's roofline
build/plot history --nightly-dir "$dir" --out "$dir/plots" > /dev/null || exit 2
build/plot roofline --chip "$chip" --results "$out" --out "$dir/plots" > /dev/null || exit 2
exit "$rc"
