# sweep-common.sh - what scripts/sweep-parallel.sh and scripts/sweep-slurm.sh
# share, sourced by both (each defines die first): the checks of their
# options and of the tool's arguments, all made before anything is created,
# and the one shard's command line they hand to their engine.

# sweep_need OPTION [VALUE]: the option has a value (not empty, not the next
# option), else die naming it. Called with the loop's "$@".
sweep_need() {
    [ $# -ge 2 ] && [ -n "$2" ] && [[ "$2" != --* ]] ||
        die "$1 needs a value${2:+ (got the option '$2')} (see --help)"
}

# sweep_int OPTION VALUE LO HI [WHY]: VALUE an integer in LO..HI, else die
sweep_int() {
    [[ "$2" =~ ^[1-9][0-9]{0,8}$ ]] && [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] ||
        die "bad $1 '$2' ($3 to $4${5:+$5})"
}

# sweep_word NAME VALUE: only letters, digits and . _ / + - , = : @ (a
# whitelist: the value goes unquoted into the shards' command line, or a job
# script, where any other character could split it or mean something to the
# shell); else die naming NAME and VALUE
sweep_word() {
    [[ "$2" =~ ^[A-Za-z0-9._/+,=:@-]*$ ]] ||
        die "bad $1 '${2//$'\n'/\\n}' (no spaces, quotes or shell characters: only letters, digits and . _ / + - , = : @, as it goes into the shards' command line)"
    return 0
}

# sweep_dir_ok OPTION DIR: every part of DIR that exists is a directory we
# can write in, so that making it cannot fail half way
sweep_dir_ok() {
    local p=$2
    while [ ! -e "$p" ] && [ ! -L "$p" ]; do p=$(dirname "$p"); done
    [ -d "$p" ] || die "$1 '$2': '$p' is in the way (not a directory)"
    [ -w "$p" ] || die "$1 '$2': '$p' is not writable"
}

# sweep_check TOOL BUILD TOOL-ARGS...: a known tool, built, and none of the
# options the sweep sets itself (or that would make a shard write nothing)
# among the tool's
sweep_check() {
    local tool=$1 build=$2 a
    shift 2
    case "$tool" in bench | tune) ;; *) die "bad --tool '$tool' (expected bench or tune)" ;; esac
    [ -x "$build/$tool" ] && [ -x "$build/merge" ] || die "$build/$tool or $build/merge is missing (run make)"
    for a in "$@"; do
        case "$a" in
        --shard | --shard=* | --out | --out-dir | --threads | --resume | --explain | --help | -h)
            die "'$a' is the sweep's to set (--out, --threads), or makes a shard measure nothing: not the tool's" ;;
        esac
    done
}

# sweep_tool_ok TOOL BUILD THREADS N TOOL-ARGS...: the tool takes the
# arguments of shard 1 of N, run once here with --explain (each tool reads
# and checks every input, lists the work, and measures and writes nothing);
# else die with the tool's own line.
sweep_tool_ok() {
    local tool=$1 build=$2 threads=$3 n=$4 msg
    shift 4
    msg=$("$build/$tool" "$@" --threads "$threads" --shard "1/$n" --explain 2>&1 >/dev/null) &&
        return 0
    msg=$(printf '%s\n' "$msg" | grep . | tail -n 1)
    die "${msg:-$tool refuses the arguments '$*'}"
}

# sweep_results TOOL DIR INDEX N: shard INDEX's results file (INDEX may be
# the engine's placeholder, '{}' or '${SLURM_ARRAY_TASK_ID}')
sweep_results() {
    case "$1" in
    bench) echo "$2/shard-$3-of-$4.csv" ;;
    tune) echo "$2/tune-shard-$3-of-$4.csv" ;;
    esac
}

# sweep_command TOOL BUILD THREADS DIR INDEX N TOOL-ARGS...: shard INDEX's
# command line, resuming its own rows
sweep_command() {
    local tool=$1 build=$2 threads=$3 dir=$4 index=$5 n=$6 args=""
    shift 6
    [ $# -gt 0 ] && args=$(printf '%q ' "$@")
    if [ "$tool" = bench ]; then
        echo "$build/bench $args--threads $threads --shard $index/$n --out $(sweep_results bench "$dir" "$index" "$n") --resume --quiet"
    else
        echo "$build/tune $args--threads $threads --shard $index/$n --out-dir $dir --resume --quiet"
    fi
}
