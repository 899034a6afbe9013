# sweep-common.sh - what scripts/sweep-parallel.sh and scripts/sweep-slurm.sh
# share, sourced by both (each defines die first): the checks of their
# options and the one shard's command line they hand to their engine.

# sweep_positive WHAT VALUE...: every VALUE a positive integer, else die
sweep_positive() {
    local what=$1 v
    shift
    for v in "$@"; do
        [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "bad number '$v' ($what take positive integers)"
    done
}

# sweep_check TOOL BUILD TOOL-ARGS...: a known tool, built, and none of the
# options the sweep sets itself among the tool's
sweep_check() {
    local tool=$1 build=$2 a
    shift 2
    case "$tool" in bench | tune) ;; *) die "bad --tool '$tool' (expected bench or tune)" ;; esac
    [ -x "$build/$tool" ] && [ -x "$build/merge" ] || die "$build/$tool or $build/merge is missing (run make)"
    for a in "$@"; do
        case "$a" in
        --shard | --shard=* | --out | --out-dir | --threads | --resume)
            die "'$a' is the sweep's to set (--out, --threads), not the tool's" ;;
        esac
    done
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
