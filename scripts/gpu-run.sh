#!/bin/sh
# gpu-run.sh - the GPU sequence on a fresh NVIDIA machine (the cuda backend),
# in one call: build, the GPU tests, then the stages asked for. Nothing is
# installed: libgsl/libcsv are unpacked from .debs/*.deb (dpkg -x) or from
# .debs/deps.tar.xz (their usr/ trees, smaller to carry; see
# README "Backends"), the CUDA driver and NVRTC are the machine's own.
#   scripts/gpu-run.sh check     build, device facts, make test-gpu, bench --suite smoke
#   scripts/gpu-run.sh test-gpu  build, make test-gpu only
#   scripts/gpu-run.sh tune      tune --chip CHIP, guided, measured on the GPU: the shapes of
#                                results/gpu-shapes.csv, fp4 and u4, M 1,16,128,512 (TUNE_SUITE,
#                                TUNE_M, TUNE_FORMATS, TUNE_DIR: another suite file, M list,
#                                format list, output directory)
#   scripts/gpu-run.sh exhaustive  tune --search exhaustive, N=4096 K=14336 fp4, M 1,16
#   scripts/gpu-run.sh grid      tune --suite grid (the cost model's fit grid), fp4 and u4,
#                                M 1,16,128, 24 candidates per problem -> results/CHIP/grid
#   scripts/gpu-run.sh unseen    bench --space full on the unseen suite (shapes of no other
#                                suite), fp4, M 1,16: every candidate -> results/CHIP/unseen.csv
#   scripts/gpu-run.sh unseen-u4 the same for u4 -> results/CHIP/unseen-u4.csv
#   scripts/gpu-run.sh refit     the rows of a refit on today's kernels, resumable across calls
#                                (build/ stays on a warm machine): every candidate of the unseen
#                                suite (fp4, M 1,16), then the grid tune (fp4 and u4, M 1,16,128,
#                                24 evaluations) in the time left -> build/refit (tarred to
#                                $OUT/refit.tar.gz); model fit / lookup run on the VM
#   scripts/gpu-run.sh exh-check bench --space full on N=4096 K=14336 and N=14336 K=4096
#                                fp4 M 1,16 -> results/CHIP/exh-check.csv
#   scripts/gpu-run.sh check-unseen  tune --check unseen on the grid stage's table, fp4,
#                                M 1,16 (pick, baselines and every candidate timed), then
#                                the guided search replayed on those rows (--resume, 24
#                                and 40 evaluations per shape) -> results/CHIP/grid
#   scripts/gpu-run.sh decode    the decode path (issue 15): bench --backend cuda on
#                                DECODE_SHAPES (default M 1 and 16 of N=4096 K=14336 and
#                                N=14336 K=4096) x DECODE_FORMATS (default fp4 u4 trellis3),
#                                cold weights: every legal candidate of the GEMV and lane
#                                variants (DECODE_VARIANTS: a regex of variant names, default
#                                gemv|lane) and the earlier bests, one bench (with its probes)
#                                per shape
#                                -> results/CHIP/decode/decode.csv (DECODE_DIR: another directory)
#   scripts/gpu-run.sh mma       the MMA kernels (issue 15): M 512 and 16 of the decode shapes,
#                                MMA_FORMATS (default fp4 u4), a fixed set of tiles per MMA
#                                variant (tg=0; split_k 1, and 4 and 8 at M=16), under four
#                                configurations in one run: "before" (the tree in .debs/before.tar.gz,
#                                made by git archive REV minus results/, carried with .debs:
#                                the kernels and the FP32-emulated MMA before the rework), the
#                                reworked kernels on the FP32 units (MQ_CUDA_MMA=fp32) and on
#                                the tensor cores, and on the tensor cores with tile rows padded
#                                by 8 halves (a build with -DMQ_TILE_PAD_HALVES=8; BEFORE_MMA=tensor
#                                runs "before" on the tensor cores too); MMA_CONFIGS
#                                picks some, and "prev" runs this build with the prelude in
#                                the directory PREV_PRELUDE (MQ_CUDA_INCLUDE: an earlier
#                                backends/cuda/metal_stdlib) -> results/CHIP/mma/CONFIG.csv,
#                                and each configuration's SASS instruction mix
#                                (scripts/sass-stats.sh) -> results/CHIP/mma/sass-stats.txt
#                                (MMA_TILES / MMA_TILES_SMALL: "tm tn tk|..." for M >= 128 / below,
#                                MMA_SKS / MMA_SKS_SMALL: split_k values, MMA_TGS: threadgroup
#                                counts (default 0), MMA_VARIANTS: a regex of variant names,
#                                MMA_MAX: at most this many candidates per shape, default 60;
#                                MMA_DIR=NAME: results/CHIP/NAME instead; MMA_EXTRA: more
#                                "variant tm tn tk tg sk" lines timed with them, e.g. the
#                                decode path's best)
#   scripts/gpu-run.sh ab        the same candidates (AB_SPECS) under the tree in .debs/before.tar.gz
#                                and this one, alternating for AB_ROUNDS rounds -> results/CHIP/ab/
#                                (AB_DIR), ab.txt: the after/before speed-up per candidate
#   scripts/gpu-run.sh ncu       Nsight Compute sections (NCU_SECTIONS) and metrics (NCU_METRICS)
#                                of given candidates (NCU_SPECS; default the best M=1 decode one), when ncu is there
#                                and counters are readable, with each one's SASS (ncu-decode:
#                                the same stage's earlier name)
#   scripts/gpu-run.sh variants  kernel-source variants (VARIANTS="NAME=DIR[:CHIPS[:VAR=VALUE]] ...",
#                                each DIR a copy of metal/ read through MQ_METAL_DIR, CHIPS a chips
#                                file for bench --chips, e.g. one without async_copy_stages, VAR=VALUE
#                                its environment, e.g. MQ_CUDA_MIN_BLOCKS=2) of this build,
#                                interleaved rounds over AB_SPECS -> results/CHIP/AB_DIR/var.txt
#   scripts/gpu-run.sh cpu-decode  the CPU model's decode path (chip host, the CPU backend):
#                                M=1 of the two decode shapes, fp4 u4 trellis3, a few GEMV
#                                candidates, 1 2 4 8 and all threads, cold and warm weights
#                                -> results/devcpu/decode/cpu-decode-THREADS[-warm].csv
#                                (CPU_DECODE_DIR: another directory; cold rows: each best
#                                against a cold read of its own size on the same workers)
#   scripts/gpu-run.sh moe       the MoE block (moe-bench --backend cuda) on the GPU: the MSL
#                                kernel's space against the unfused baseline (dense kernels per
#                                expert), each case with the read probe of its touched bytes:
#                                MOE_SUITE, MOE_TOKENS (default 1,2,4,8,16), MOE_BUDGET, MOE_ARGS,
#                                MOE_NAME -> results/CHIP/moe/MOE_NAME.csv (default gpu-decode)
#   scripts/gpu-run.sh moe-trace where the MoE block's time goes: Nsight Systems' CUDA trace (else
#                                Nsight Compute's kernel durations) of moe-bench --backend cuda (MOE_SUITE, MOE_TOKENS, MOE_ARGS, default
#                                the first 4 candidates), each block run's kernels and the gaps
#                                between them (scripts/moe-trace.py)
#                                -> results/CHIP/moe/MOE_NAME (default trace)/trace.txt
#   scripts/gpu-run.sh moe-ab    the MoE block under two trees in one run (.debs/before.tar.gz and
#                                this one), moe-bench in ABBA rounds (AB_ROUNDS, default 2;
#                                MOE_SUITE, MOE_TOKENS, MOE_BUDGET, MOE_ARGS; MOE_CANDIDATES: a
#                                file of candidates, one a line as a results file writes them,
#                                each passed as --candidate: both trees time the same ones, the
#                                before tree's moe-bench must know --candidate) -> results/CHIP/moe/
#                                MOE_NAME (default ab)/{before,after}.csv, ab.txt (scripts/moe-ab.py)
#   scripts/gpu-run.sh cpu-moe   the MoE block (moe-bench) on the machine's cores: MOE_SUITE,
#                                MOE_TOKENS, MOE_BUDGET, MOE_ARGS, MOE_NAME
#                                -> results/devcpu/MOE_NAME.csv (default moe-decode)
#   scripts/gpu-run.sh timing    the cuda backend's idle and queued timings (MQ_CUDA_TIMING)
#                                of AB_SPECS in alternating rounds -> results/CHIP/AB_DIR
#                                (default timing)/{idle,queued}.csv, var.txt
#   scripts/gpu-run.sh lane      the lane-layout kernel (issue 40): every legal lane_*
#                                candidate (LANE_MAX, default 250; LANE_FILTER: an awk regex
#                                on "variant tm tn tk tg sk", LANE_EXTRA: more such lines,
#                                "|"-separated, timed with them) of LANE_SHAPES (default
#                                M 16, 64, 512 of the decode shapes and N=K=4096) x
#                                LANE_FORMATS (default fp4), cold weights, LANE_BUDGET s each
#                                -> results/CHIP/LANE_DIR/lane.csv (default lane)
#   scripts/gpu-run.sh cpu-host  the machine's CPU as chip host: tune (default suite),
#                                tune --check heldout (fp4), model fit -> results/devcpu
#   scripts/gpu-run.sh cpu-grid  the machine's CPU as chip host: tune --suite grid (fp4,
#                                M 1,16, 24 evaluations), tune --check heldout on its table
#                                (every candidate), the guided search replayed on those rows
#                                -> results/devcpu/grid
#   scripts/gpu-run.sh cpu-check the machine's CPU as chip host: tune --check heldout (fp4,
#                                M 1,16) on the committed results/devcpu/grid/table.csv
#                                -> results/devcpu/grid-check (CHECK_DIR=DIR: another)
# Each measuring stage stops after STAGE_S seconds (default 540): rows measured
# by then are kept (each is appended as it is measured); the grid stage
# starts its results file afresh, or with RESUME=1 goes on from it (tune
# --resume: same build, same host).
# Several stages may be named. Results go to results/CHIP/ and, with the
# logs, into $OUT/gpu-results.tar.gz; the summary to $OUT/summary.txt.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT" /tmp/deps
S="$OUT/summary.txt"
: > "$S"
say() { echo "$*" | tee -a "$S"; }
for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/deps; done
# or the same files packed smaller (usr/ of the .debs, no static libraries)
[ -f .debs/deps.tar.xz ] && tar xJf .debs/deps.tar.xz -C /tmp/deps
L=/tmp/deps/usr/lib/x86_64-linux-gnu
export CPPFLAGS="-I/tmp/deps/usr/include" LDFLAGS="-L$L" LD_LIBRARY_PATH="$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MQ_CUDA_CACHE=/tmp/mq-cuda-cache
say "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1)"
say "== host: $(lscpu | grep 'Model name' | sed 's/ *Model name: *//'), $(nproc) cores; $(nvcc --version 2>/dev/null | tail -1)"
STAGE_S=${STAGE_S:-540}
# the toolkit's cubin reader, where the machine has one (the check and ncu stages)
CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
if ! make -j"$(nproc)" build/tune build/bench build/model build/tests/gpu_cuda > "$OUT/build.log" 2>&1; then
    say "build failed:"; tail -20 "$OUT/build.log" | tee -a "$S"; exit 1
fi
CHIP=$(build/tests/gpu_cuda --chip-only 2>/dev/null || true)
[ -n "$CHIP" ] || CHIP=h100
say "== chip $CHIP"
# measure TITLE LOG ROWS CMD...: run CMD for at most STAGE_S seconds into
# $OUT/LOG.log, then say how it ended and how many rows ROWS holds
measure() {
    title=$1 log=$2 rows=$3; shift 3
    say "== $title"
    timeout "$STAGE_S" "$@" > "$OUT/$log.log" 2>&1; r=$?
    tail -30 "$OUT/$log.log" | tee -a "$S"
    say "$log exit $r; $(($(wc -l < "$rows") - 2)) rows"
}
# build_before: the tree in .debs/before.tar.gz (git archive REV minus
# results/) built in /tmp/before, once per call
build_before() {
    [ -x /tmp/before/build/bench ] && return 0
    [ -f .debs/before.tar.gz ] || { say "before: no .debs/before.tar.gz"; return 1; }
    rm -rf /tmp/before && mkdir -p /tmp/before && tar xzf .debs/before.tar.gz -C /tmp/before
    (cd /tmp/before && make -j"$(nproc)" build/bench > "$OUT/build-before.log" 2>&1) ||
        { say "before: the build failed (build-before.log)"; return 1; }
}
# ab_summary DIR FIRST NAME...: DIR/var.txt, per candidate each NAME's medians
# (DIR/NAME.csv) and its speed-up over FIRST's, into the summary
ab_summary() {
    D=$1 first=$2; shift 2
    for name in "$@"; do
        tr -d '"' < "$D/$name.csv" | awk -F, -v cfg="$name" '$19 == "ok" {
            print cfg, $8 " " $9 "x" $10 "x" $11 " " $13 " " $14 "x" $15 "x" $16 " tg=" $17 " sk=" $18, $21 }'
    done | awk -v first="$first" '{ key = $2 " " $3 " " $4 " " $5 " " $6 " " $7; t[key, $1, ++n[key, $1]] = $8
            keys[key] = 1; if (!($1 in seen)) { seen[$1] = 1; order[++nv] = $1 } }
        function med(k, c,   i, m, v, j, x) { m = n[k, c]; for (i = 1; i <= m; i++) v[i] = t[k, c, i]
            for (i = 2; i <= m; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
            return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2 }
        function list(k, c,   i, s) { s = ""; for (i = 1; i <= n[k, c]; i++) s = s sprintf(" %.4f", t[k, c, i] * 1e3); return s }
        END { for (k in keys) { line = k
                for (i = 1; i <= nv; i++) if (n[k, order[i]])
                    line = line sprintf(" | %s ms%s (%.3fx)", order[i], list(k, order[i]),
                                        n[k, first] ? med(k, first) / med(k, order[i]) : 0)
                print line } }' | sort > "$D/var.txt"
    say "== $(wc -l < "$D/var.txt") candidates, ${AB_ROUNDS:-3} rounds (var.txt; (x): speed-up over $first):"
    tee -a "$S" < "$D/var.txt"
}
rc=0
for stage in "$@"; do
case "$stage" in
test-gpu|check)
    say "== make test-gpu"
    t0=$(date +%s)
    make test-gpu > "$OUT/test-gpu.log" 2>&1; r=$?
    grep -E "^gpu_cuda|FAIL|passed" "$OUT/test-gpu.log" | head -40 | tee -a "$S"
    say "test-gpu exit $r in $(( $(date +%s) - t0 )) s"; [ $r -eq 0 ] || rc=1
    [ "$stage" = check ] || continue
    say "== resource usage of the compiled kernels (cuobjdump -res-usage; LDL/STL: local memory)"
    for c in $(ls -S "$MQ_CUDA_CACHE"/*.cubin | head -400); do
        "${CUOBJDUMP:-cuobjdump}" -res-usage "$c" 2>/dev/null | grep -A1 "Function mq_cuda_entry" | paste - - |
            sed 's/Resource usage://' | awk -v n="$("${CUOBJDUMP:-cuobjdump}" -sass "$c" | grep -cE 'LDL|STL')" '{print $0, "LDL/STL", n}'
    done | sort | uniq | tee "$OUT/res-usage.txt" | head -12 | tee -a "$S"
    say "== bench --backend cuda --suite smoke"
    build/bench --backend cuda --suite smoke --quiet --out "results/$CHIP/smoke.csv" \
        > "$OUT/smoke.log" 2>&1; r=$?
    tail -25 "$OUT/smoke.log" | tee -a "$S"; say "bench smoke exit $r"; [ $r -eq 0 ] || rc=1
    ;;
tune)
    # TUNE_SUITE / TUNE_M: another suite file or M list (e.g. results/peer-shapes.csv
    # and 1,16,64,128,512 for the peers' shapes and sizes); TUNE_FORMATS another
    # format list (default fp4,u4), TUNE_DIR another output directory
    say "== tune --chip $CHIP (guided) on ${TUNE_SUITE:-results/gpu-shapes.csv}, ${TUNE_FORMATS:-fp4,u4}, M ${TUNE_M:-1,16,128,512}"
    build/tune --chip "$CHIP" --suite "${TUNE_SUITE:-results/gpu-shapes.csv}" --m "${TUNE_M:-1,16,128,512}" \
        --formats "${TUNE_FORMATS:-fp4,u4}" ${TUNE_DIR:+--out-dir "$TUNE_DIR"} \
        --budget 0.05 --quiet > "$OUT/tune.log" 2>&1; r=$?
    tail -40 "$OUT/tune.log" | tee -a "$S"; say "tune exit $r"
    ;;
exhaustive)
    say "== tune --chip $CHIP --search exhaustive (N=4096 K=14336, fp4, M 1,16)"
    head -2 results/gpu-shapes.csv > /tmp/one-shape.csv
    build/tune --chip "$CHIP" --suite /tmp/one-shape.csv --m 1,16 --formats fp4 \
        --search exhaustive --budget 0.02 --quiet --out-dir "results/$CHIP/exhaustive" \
        > "$OUT/tune-exh.log" 2>&1; r=$?
    tail -25 "$OUT/tune-exh.log" | tee -a "$S"; say "tune exhaustive exit $r"
    ;;
grid)
    # a fresh run starts a fresh file: one build's rows
    [ -n "${RESUME:-}" ] || rm -f "results/$CHIP/grid/tune-results.csv"
    measure "tune --chip $CHIP --suite grid, fp4 and u4, M 1,16,128, --evals 24" tune-grid \
        "results/$CHIP/grid/tune-results.csv" build/tune --chip "$CHIP" --suite grid \
        --m 1,16,128 --formats fp4,u4 --evals 24 --budget 0.05 --quiet ${RESUME:+--resume} \
        --out-dir "results/$CHIP/grid"
    ;;
unseen)
    measure "bench --space full --suite unseen, fp4, M 1,16" bench-unseen \
        "results/$CHIP/unseen.csv" build/bench --backend cuda --suite unseen --m 1,16 \
        --formats fp4 --space full --budget 0.02 --quiet --out "results/$CHIP/unseen.csv"
    ;;
refit)
    # both stages within REFIT_S seconds (default 560), so the call ends with its tar
    D=build/refit t0=$(date +%s)
    mkdir -p "$D/grid"
    STAGE_S=${REFIT_S:-560}
    measure "bench --space full --suite unseen, fp4, M 1,16 (resumed)" refit-unseen \
        "$D/unseen.csv" build/bench --backend cuda --suite unseen --m 1,16 --formats fp4 \
        --space full --budget 0.02 --quiet --resume --out "$D/unseen.csv"
    STAGE_S=$((${REFIT_S:-560} - $(date +%s) + t0))
    [ "$STAGE_S" -gt 20 ] && measure "tune --suite grid, fp4 and u4, M 1,16,128, --evals 24 (resumed)" refit-grid \
        "$D/grid/tune-results.csv" build/tune --chip "$CHIP" --suite grid --m 1,16,128 \
        --formats fp4,u4 --evals 24 --budget 0.05 --quiet --resume --out-dir "$D/grid"
    tar czf "$OUT/refit.tar.gz" "$D"
    ;;
unseen-u4)
    measure "bench --space full --suite unseen, u4, M 1,16" bench-unseen-u4 \
        "results/$CHIP/unseen-u4.csv" build/bench --backend cuda --suite unseen --m 1,16 \
        --formats u4 --space full --budget 0.02 --quiet --out "results/$CHIP/unseen-u4.csv"
    ;;
exh-check)
    measure "bench --space full, N=4096 K=14336 and N=14336 K=4096, fp4, M 1,16" bench-exh \
        "results/$CHIP/exh-check.csv" build/bench --backend cuda \
        --suite results/gpu-shapes.csv --m 1,16 --formats fp4 --space full --budget 0.02 \
        --quiet --out "results/$CHIP/exh-check.csv"
    ;;
check-unseen)
    measure "tune --chip $CHIP --check unseen on results/$CHIP/grid/table.csv, fp4, M 1,16" \
        check-unseen "results/$CHIP/grid/check-results.csv" build/tune --chip "$CHIP" \
        --check unseen --formats fp4 --m 1,16 --budget 0.02 --out-dir "results/$CHIP/grid"
    for ev in 24 40; do
        rm -rf /tmp/replay && mkdir -p /tmp/replay
        cp "results/$CHIP/grid/check-results.csv" /tmp/replay/tune-results.csv
        measure "guided search replayed on those rows, --evals $ev" "replay-$ev" \
            /tmp/replay/tune-results.csv build/tune --chip "$CHIP" --suite unseen --m 1,16 \
            --formats fp4 --evals "$ev" --budget 0.02 --resume --out-dir /tmp/replay
    done
    ;;
decode)
    D=results/$CHIP/${DECODE_DIR:-decode}
    mkdir -p "$D"
    [ -n "${RESUME:-}" ] || rm -f "$D/decode.csv" "$D"/decode-*.log
    for f in ${DECODE_FORMATS:-fp4 u4 trellis3}; do
        for sh in ${DECODE_SHAPES:-1x4096x14336 1x14336x4096 16x4096x14336 16x14336x4096}; do
            say "== decode path: $f $sh"
            build/bench --chip "$CHIP" --shape "$sh" --formats "$f" --space full --explain \
                > /tmp/explain.txt 2>&1
            awk -v vars="${DECODE_VARIANTS:-gemv|lane}" \
                '$1 == "legal" && $2 ~ vars { gsub(/[a-z]+=/, ""); print $2, $3, $4, $5, $6, $7 }' \
                /tmp/explain.txt > /tmp/specs.txt
            # the earlier bests on the H100 (BENCHMARKS.md, issue 13), where they serve the format
            for spec in "marlin_gemm_fp4_striped 8 32 32 0 8" "marlin_gemm_fp4_striped 16 256 32 0 8" \
                "mlx_qmm_splitk 8 256 16 0 8" "mlx_qmm_splitk 16 128 16 0 8" \
                "gemm_trellis_packed_decode 32 128 32 0 1" "gemm_trellis_packed_decode 16 64 32 0 1"; do
                grep -q "^  legal *$(echo "$spec" | awk '{print $1 " tm=" $2 " tn=" $3 " tk=" $4 " tg=" $5 " sk=" $6}') " \
                    /tmp/explain.txt && echo "$spec" >> /tmp/specs.txt
            done
            say "$(wc -l < /tmp/specs.txt) candidates"
            # bench takes 64 --candidate at most: chunks of 60, one results file
            split -l 60 /tmp/specs.txt /tmp/specs-part.
            for part in /tmp/specs-part.*; do
                set --
                while read -r spec; do set -- "$@" --candidate "$spec"; done < "$part"
                timeout "$STAGE_S" build/bench --backend cuda --shape "$sh" --formats "$f" \
                    --budget 0.05 --quiet ${RESUME:+--resume} --out "$D/decode.csv" "$@" \
                    >> "$D/decode-$f-$sh.log" 2>&1
                say "exit $?"
            done
            rm -f /tmp/specs-part.*
            grep -E "device probes|^best|a cold read|wrong|error" "$D/decode-$f-$sh.log" | head -12 |
                tee -a "$S"
        done
    done
    ;;
mma)
    configs=${MMA_CONFIGS:-before fp32 tensor pad8}
    wants() { case " $configs " in *" $1 "*) return 0 ;; esac; return 1; }
    D=results/$CHIP/${MMA_DIR:-mma}
    mkdir -p "$D" && rm -f "$D"/*.csv "$D"/*.log
    wants before && build_before
    if wants pad8; then
        make -j"$(nproc)" BUILD=build-pad OPT="-O3 -DMQ_TILE_PAD_HALVES=8" build-pad/bench \
            > "$OUT/build-pad.log" 2>&1 || say "pad8: the build failed (build-pad.log)"
    fi
    for sh in ${MMA_SHAPES:-512x4096x14336 512x14336x4096 16x4096x14336 16x14336x4096}; do
        for f in ${MMA_FORMATS:-fp4 u4}; do
            m=${sh%%x*}
            if [ "$m" -ge 128 ]; then
                tiles=${MMA_TILES:-"64 64 32|128 128 32|128 64 32|64 128 32|128 128 64"}; sks=${MMA_SKS:-1}
            else
                tiles=${MMA_TILES_SMALL:-"16 64 32|16 128 32|32 128 32|16 256 32|32 64 64"}; sks=${MMA_SKS_SMALL:-"1 4 8"}
            fi
            build/bench --chip "$CHIP" --shape "$sh" --formats "$f" --space full --explain \
                > /tmp/explain.txt 2>&1
            awk -v tiles="$tiles" -v sks="$sks" -v tgs="${MMA_TGS:-0}" -v vars="${MMA_VARIANTS:-.}" \
                'BEGIN { n = split(tiles, t, "|"); for (i = 1; i <= n; i++) ok[t[i]] = 1
                    n = split(sks, k, " "); for (i = 1; i <= n; i++) sk[k[i]] = 1
                    n = split(tgs, g, " "); for (i = 1; i <= n; i++) tg[g[i]] = 1 }
                $1 == "legal" && $2 !~ /gemv/ && $2 ~ vars { gsub(/[a-z]+=/, "")
                    if (($3 " " $4 " " $5) in ok && $6 in tg && $7 in sk) print $2, $3, $4, $5, $6, $7 }' \
                /tmp/explain.txt | head -"${MMA_MAX:-60}" > /tmp/mma-specs.txt
            [ -n "${MMA_EXTRA:-}" ] && printf '%s\n' "$MMA_EXTRA" >> /tmp/mma-specs.txt
            say "== MMA kernels: $f $sh, $(wc -l < /tmp/mma-specs.txt) candidates"
            # bench takes at most 64 candidates a call: 60 per chunk
            rm -f /tmp/mma-chunk.*; split -l 60 /tmp/mma-specs.txt /tmp/mma-chunk.
            for chunk in /tmp/mma-chunk.*; do
            set --
            while read -r spec; do set -- "$@" --candidate "$spec"; done < "$chunk"
            for cfg in $configs; do
                inc=
                case $cfg in
                before) bin=/tmp/before/build/bench; mm=${BEFORE_MMA:-fp32} ;;
                pad8) bin=build-pad/bench; mm=tensor ;;
                prev) bin=build/bench; mm=tensor; inc=${PREV_PRELUDE:-} ;;
                *) bin=build/bench; mm=$cfg ;;
                esac
                [ -x "$bin" ] || continue
                if [ "$cfg" = prev ] && [ ! -f "$inc/metal_stdlib" ]; then
                    say "prev: no metal_stdlib in PREV_PRELUDE ('$inc'), skipped"; continue
                fi
                MQ_CUDA_CACHE=/tmp/mq-cache/$cfg MQ_CUDA_INCLUDE=$inc MQ_CUDA_MMA=$mm \
                    timeout "$STAGE_S" "$bin" --backend cuda --shape "$sh" --formats "$f" \
                    --budget 0.05 --quiet --out "$D/$cfg.csv" "$@" > "$D/$cfg-$f-$sh.log" 2>&1
                r=$?
                cat "$D/$cfg-$f-$sh.log" >> "$D/$cfg-$f-$sh.all.log"
                say "$cfg exit $r: $(grep -E "^best" "$D/$cfg-$f-$sh.log")"
                grep -E "device probes before|wrong|error|too many" "$D/$cfg-$f-$sh.log" | head -4 | tee -a "$S"
            done
            done
        done
    done
    # each configuration's compiled kernels: their SASS instruction mix
    # (MMA_SASS=DIR: every cubin's SASS text too)
    [ -n "${MMA_SASS:-}" ] && mkdir -p "$MMA_SASS"
    SASS_DIR=${MMA_SASS:-} scripts/sass-stats.sh /tmp/mq-cache/* > "$D/sass-stats.txt" 2>&1
    say "sass-stats: $(wc -l < "$D/sass-stats.txt") kernels (mma/sass-stats.txt)"
    ;;
ncu-decode|ncu)
    # Nsight Compute on given candidates (default: the best M=1 decode one),
    # when the machine has it and lets us read the counters. NCU_SPECS: "shape
    # format variant tm tn tk tg sk" lines; NCU_SECTIONS: the sections (default
    # below), NCU_METRICS: metrics besides them; each candidate's cubin SASS
    # goes to $OUT/ncu-N.sass when cuobjdump is there.
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    if [ -z "$NCU" ]; then say "ncu: not on this machine"; else
        i=0
        printf '%s\n' "${NCU_SPECS:-1x4096x14336 fp4 marlin_gemv_decode 1 32 1024 0 1}" |
        while read -r sh f spec; do
            i=$((i + 1))
            say "== ncu $i: $sh $f $spec"
            set --
            for sec in ${NCU_SECTIONS:-SpeedOfLight MemoryWorkloadAnalysis Occupancy LaunchStats WarpStateStats}; do
                set -- "$@" --section "$sec"
            done
            # NCU_METRICS: metrics too (e.g. regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,
            # the stall reasons per issued instruction)
            [ -n "${NCU_METRICS:-}" ] && set -- "$@" --metrics "$NCU_METRICS"
            rm -rf "/tmp/ncu-cache-$i"
            # the candidate's own kernel (bench's probes are mq_cuda_entry_* kernels too)
            MQ_CUDA_CACHE=/tmp/ncu-cache-$i timeout 240 "$NCU" \
                --kernel-name "regex:mq_cuda_entry_${spec%% *}" --launch-skip 2 --launch-count 1 "$@" \
                build/bench --backend cuda --shape "$sh" --formats "$f" --candidate "$spec" \
                --budget 0.01 --max-reps 5 --out /tmp/ncu.csv > "$OUT/ncu-$i.log" 2>&1
            say "ncu exit $?"
            grep -E "Duration|Throughput|Achieved Occupancy|Registers|Stall|stalled|Warp Cycles|Issue|Executed Ipc|ERR" \
                "$OUT/ncu-$i.log" | head -40 | tee -a "$S"
            [ -n "$CUOBJDUMP" ] && for c in /tmp/ncu-cache-$i/*.cubin; do "$CUOBJDUMP" -sass "$c"; done \
                > "$OUT/ncu-$i.sass" 2>&1
        done
    fi
    ;;
ab)
    # the same candidates under two trees in one run, alternating (before,
    # after, before, after, ...: AB_ROUNDS rounds, default 3), so a change is
    # read against this run's own noise: "before" is .debs/before.tar.gz,
    # "after" this tree. AB_SPECS: "shape format variant tm tn tk tg sk" lines
    # (default: the decode path's M=1 bests of issue 15). Each round of a
    # tree is one bench call per shape and format (its rows verified, then
    # timed; its probes, and for the best row a cold read of the same size)
    # -> results/CHIP/AB_DIR (default ab)/{before,after}.csv and their logs;
    # ab.txt: per candidate the median of each round and after/before as
    # the ratio of the rounds' medians of medians (> 1: after is faster);
    # cold.txt: each call's best row against a cold read of its size;
    # AB_FLAGS: more bench options (--no-probes: no probes and no cold reads,
    # a call in seconds instead of half a minute)
    D=results/$CHIP/${AB_DIR:-ab}
    mkdir -p "$D" && rm -f "$D"/*.csv "$D"/*.log "$D/ab.txt" "$D/cold.txt"
    build_before || { rc=2; continue; }
    printf '%s\n' "${AB_SPECS:-1x4096x14336 fp4 marlin_gemv_decode 1 32 1024 0 1
1x14336x4096 fp4 marlin_gemv_decode 1 16 1024 0 1
1x4096x14336 u4 marlin_gemv_decode 1 32 1024 0 1
1x14336x4096 u4 marlin_gemv_decode 1 16 1024 0 1
1x4096x14336 trellis3 gemv_trellis_decode 1 32 1024 0 1
1x14336x4096 trellis3 gemv_trellis_decode 1 64 256 0 1}" > /tmp/ab-specs.txt
    r=1
    while [ "$r" -le "${AB_ROUNDS:-3}" ]; do
        for cfg in before after; do
            bin=build/bench; [ "$cfg" = before ] && bin=/tmp/before/build/bench
            awk '{print $1, $2}' /tmp/ab-specs.txt | sort -u | while read -r sh f; do
                set --
                while read -r s2 f2 spec; do
                    [ "$s2 $f2" = "$sh $f" ] && set -- "$@" --candidate "$spec"
                done < /tmp/ab-specs.txt
                # shellcheck disable=SC2086 # AB_FLAGS: words for bench
                MQ_CUDA_CACHE=/tmp/mq-cache/ab-$cfg timeout "$STAGE_S" "$bin" --backend cuda \
                    --shape "$sh" --formats "$f" --budget 0.05 --quiet --out "$D/$cfg.csv" \
                    ${AB_FLAGS:-} "$@" < /dev/null > /tmp/ab.log 2>&1
                e=$?
                { echo "== round $r $cfg $f $sh exit $e"; cat /tmp/ab.log; } >> "$D/$cfg.log"
                grep -E "wrong|error" /tmp/ab.log | head -3 | tee -a "$S"
                grep -E "a cold read" /tmp/ab.log | sed "s/^ */$f $sh $cfg round $r: /" >> "$D/cold.txt"
            done
        done
        r=$((r + 1))
    done
    # rows in file order: the k-th row of a candidate is its k-th round
    for cfg in before after; do
        tr -d '"' < "$D/$cfg.csv" | awk -F, -v cfg="$cfg" '$19 == "ok" {
            print cfg, $8 " " $9 "x" $10 "x" $11 " " $13 " " $14 "x" $15 "x" $16 " tg=" $17 " sk=" $18, $21 }'
    done | awk '{ key = $2 " " $3 " " $4 " " $5 " " $6 " " $7; t[key, $1, ++n[key, $1]] = $8; keys[key] = 1 }
        function med(k, c,   i, m, v, j, x) { m = n[k, c]; for (i = 1; i <= m; i++) v[i] = t[k, c, i]
            for (i = 2; i <= m; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
            return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2 }
        function list(k, c,   i, s) { s = ""; for (i = 1; i <= n[k, c]; i++) s = s sprintf(" %.4f", t[k, c, i] * 1e3); return s }
        END { for (k in keys) if (n[k, "before"] && n[k, "after"])
            printf "%s | before ms%s | after ms%s | after/before speed-up %.3fx\n", k,
                list(k, "before"), list(k, "after"), med(k, "before") / med(k, "after") }' |
        sort > "$D/ab.txt"
    say "== A/B, $(wc -l < "$D/ab.txt") candidates, ${AB_ROUNDS:-3} rounds (ab.txt):"
    tee -a "$S" < "$D/ab.txt"
    sort "$D/cold.txt" | tee -a "$S"
    ;;
variants)
    # kernel-source variants for this one build, interleaved: VARIANTS is
    # "NAME=DIR[:CHIPS[:VAR=VALUE]] ..." (DIR: a copy of metal/ with a change,
    # read through MQ_METAL_DIR; each its own compile cache; CHIPS: bench
    # --chips, the planner's figures, e.g. async_copy_stages, or empty;
    # VAR=VALUE: the environment, e.g. MQ_CUDA_MIN_BLOCKS=2), AB_SPECS and AB_FLAGS as in ab; round r
    # runs every variant in VARIANTS' order, AB_ROUNDS rounds
    # -> results/CHIP/AB_DIR (default variants)/NAME.csv and .log; var.txt:
    # per candidate each variant's medians and its speed-up over the first
    D=results/$CHIP/${AB_DIR:-variants}
    mkdir -p "$D" && rm -f "$D"/*.csv "$D"/*.log "$D/var.txt"
    printf '%s\n' "$AB_SPECS" > /tmp/var-specs.txt
    r=1
    while [ "$r" -le "${AB_ROUNDS:-3}" ]; do
        for v in $VARIANTS; do
            name=${v%%=*} dir=${v#*=} chips= envs=
            case $dir in *:*) rest=${dir#*:} dir=${dir%%:*} chips=${rest%%:*}
                case $rest in *:*) envs=${rest#*:} ;; esac ;; esac
            awk '{print $1, $2}' /tmp/var-specs.txt | sort -u | while read -r sh f; do
                set --
                while read -r s2 f2 spec; do
                    [ "$s2 $f2" = "$sh $f" ] && set -- "$@" --candidate "$spec"
                done < /tmp/var-specs.txt
                # shellcheck disable=SC2086 # ENV=VAL words
                MQ_METAL_DIR=$dir MQ_CUDA_CACHE=/tmp/mq-cache/var-$name env $envs timeout "$STAGE_S" build/bench \
                    --backend cuda --shape "$sh" --formats "$f" --budget 0.05 --quiet \
                    --out "$D/$name.csv" ${chips:+--chips "$chips"} ${AB_FLAGS:-} "$@" < /dev/null > /tmp/var.log 2>&1
                e=$?
                { echo "== round $r $name $f $sh exit $e"; cat /tmp/var.log; } >> "$D/$name.log"
                grep -E "wrong|error" /tmp/var.log | sed "s/^/$name: /" | head -3 | tee -a "$S"
            done
        done
        r=$((r + 1))
    done
    names=
    for v in $VARIANTS; do names="$names ${v%%=*}"; done
    # shellcheck disable=SC2086 # the names are words
    ab_summary "$D" "${VARIANTS%%=*}" $names
    ;;
moe)
    # the MoE block (issue 16) on the GPU: moe-bench --backend cuda
    D=results/$CHIP/moe
    mkdir -p "$D"
    name=${MOE_NAME:-gpu-decode}
    make -j"$(nproc)" build/moe-bench > /dev/null 2>&1
    say "== moe-bench --backend cuda --suite ${MOE_SUITE:-all} --tokens ${MOE_TOKENS:-1,2,4,8,16} ${MOE_ARGS:-}"
    timeout "$STAGE_S" build/moe-bench --backend cuda --suite "${MOE_SUITE:-all}" \
        --tokens "${MOE_TOKENS:-1,2,4,8,16}" --budget "${MOE_BUDGET:-0.03}" --chip "$CHIP" ${MOE_ARGS:-} \
        --out "$D/$name.csv" > "$D/$name.log" 2>&1
    say "moe-bench exit $?"
    tee -a "$S" < "$D/$name.log"
    ;;
moe-trace)
    # Nsight Systems' kernel trace of a short moe-bench run: per candidate and
    # token count, each dispatch's device time and the gap before it
    D=results/$CHIP/moe/${MOE_NAME:-trace}
    mkdir -p "$D"
    NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/*/bin/nsys \
        /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    make -j"$(nproc)" build/moe-bench > /dev/null 2>&1
    set -- --backend cuda --suite "${MOE_SUITE:-qwen3-30b-a3b}" --tokens "${MOE_TOKENS:-1,16}" \
        --budget "${MOE_BUDGET:-0.03}" --chip "$CHIP"
    # shellcheck disable=SC2086 # MOE_ARGS are words
    set -- "$@" ${MOE_ARGS:---max-candidates 4} --out "$D/moe.csv"
    say "== moe-bench $* under ${NSYS:-${NCU:-nothing}}"
    rm -f /tmp/moe-trace* # (no earlier call's trace read as this one's)
    if [ -n "$NSYS" ]; then
        timeout "$STAGE_S" "$NSYS" profile -t cuda -o /tmp/moe-trace -f true build/moe-bench "$@" \
            > "$D/moe.log" 2>&1
        say "nsys exit $?"
        "$NSYS" stats -q -r cuda_gpu_trace -f csv -o /tmp/moe-trace /tmp/moe-trace.nsys-rep \
            > "$OUT/nsys-stats.log" 2>&1
        T=/tmp/moe-trace_cuda_gpu_trace.csv
    elif [ -n "$NCU" ]; then
        # each MoE kernel alone, caches flushed (ncu's default): durations, no gaps
        T=/tmp/moe-trace-ncu.csv
        timeout "$STAGE_S" "$NCU" --csv --print-units base --metrics gpu__time_duration.sum \
            --kernel-name "regex:mq_cuda_entry_(moe_|lane_trellis_moe|gemm_trellis_moe)" \
            --log-file "$T" build/moe-bench "$@" > "$D/moe.log" 2>&1
        say "ncu exit $?"
    fi
    if [ -n "${T:-}" ]; then
        python3 scripts/moe-trace.py "$T" > "$D/trace.txt" 2>&1
        say "moe-trace exit $?"
        tee -a "$S" < "$D/trace.txt"
    else
        say "moe-trace: neither nsys nor ncu on this machine"
    fi
    ;;
moe-ab)
    # moe-bench under the tree in .debs/before.tar.gz and this one, in turn
    D=results/$CHIP/moe/${MOE_NAME:-ab}
    mkdir -p "$D" && rm -f "$D"/*.csv "$D"/*.log "$D/ab.txt"
    build_before && (cd /tmp/before && make -j"$(nproc)" build/moe-bench >> "$OUT/build-before.log" 2>&1) &&
        make -j"$(nproc)" build/moe-bench > /dev/null 2>&1 || { say "moe-ab: a build failed"; rc=2; continue; }
    # the named candidates (MOE_CANDIDATES), each line one --candidate
    set --
    if [ -n "${MOE_CANDIDATES:-}" ]; then
        while IFS= read -r cand || [ -n "$cand" ]; do
            [ -n "$cand" ] && set -- "$@" --candidate "$cand"
        done \
            < "$MOE_CANDIDATES"
    fi
    r=1
    while [ "$r" -le "${AB_ROUNDS:-2}" ]; do
        # ABBA: before first in odd rounds, after first in even ones, so a
        # drift in the GPU's clocks favours neither
        order="before after"; [ $((r % 2)) -eq 0 ] && order="after before"
        for cfg in $order; do
            bin=build/moe-bench; [ "$cfg" = before ] && bin=/tmp/before/build/moe-bench
            # shellcheck disable=SC2086 # MOE_ARGS are words
            MQ_CUDA_CACHE=/tmp/mq-cache/moe-$cfg timeout "$STAGE_S" "$bin" --backend cuda \
                --suite "${MOE_SUITE:-qwen3-30b-a3b}" --tokens "${MOE_TOKENS:-1,16}" \
                --budget "${MOE_BUDGET:-0.03}" --chip "$CHIP" \
                ${MOE_ARGS:-$([ $# -gt 0 ] || echo --max-candidates 6)} "$@" \
                --out "$D/$cfg.csv" > /tmp/moe-ab.log 2>&1
            e=$?
            { echo "== round $r $cfg exit $e"; cat /tmp/moe-ab.log; } >> "$D/$cfg.log"
            say "round $r $cfg: moe-bench exit $e"
        done
        r=$((r + 1))
    done
    python3 scripts/moe-ab.py "$D/before.csv" "$D/after.csv" > "$D/ab.txt" 2>&1
    tee -a "$S" < "$D/ab.txt"
    ;;
cpu-moe)
    # the MoE block (issue 16) on this machine's cores: moe-bench, the fused
    # space against the unfused baseline, MOE_SUITE (default all) x MOE_TOKENS
    # (default the decode counts 1,2,4,8,16), MOE_ARGS added (e.g. --routing zipf
    # or --max-candidates 12) -> results/devcpu/MOE_NAME.csv and .log
    D=results/devcpu
    mkdir -p "$D"
    name=${MOE_NAME:-moe-decode}
    make -j"$(nproc)" build/moe-bench build/tests/test_moe > /dev/null 2>&1 &&
        build/tests/test_moe 2>&1 | tail -1 | tee -a "$S"
    say "== moe-bench --suite ${MOE_SUITE:-all} --tokens ${MOE_TOKENS:-1,2,4,8,16} ${MOE_ARGS:-}"
    timeout "$STAGE_S" build/moe-bench --suite "${MOE_SUITE:-all}" --tokens "${MOE_TOKENS:-1,2,4,8,16}" \
        --budget "${MOE_BUDGET:-0.1}" ${MOE_ARGS:-} --out "$D/$name.csv" > "$D/$name.log" 2>&1
    say "moe-bench exit $?"
    tee -a "$S" < "$D/$name.log"
    ;;
cpu-decode)
    # the CPU model's decode path on this machine's cores: M=1, thread counts
    # 1..all, cold and warm weights, a few GEMV candidates each
    D=${CPU_DECODE_DIR:-results/devcpu/decode}
    mkdir -p "$D" && rm -f "$D"/cpu-decode-*
    say "== CPU: $(grep -o 'avx512[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    say "== $(lscpu | grep -E '^Thread|^Core|^Socket|^Model name' | tr -s ' ' | tr '\n' ';')"
    make -j"$(nproc)" build/tests/test_variants > /dev/null 2>&1 && build/tests/test_variants | tail -2 | tee -a "$S"
    n=$(nproc)
    specs=${CPU_DECODE_SPECS:-"marlin_gemv_decode 1 32 128 0 1
marlin_gemv_decode 1 64 128 0 1
marlin_gemv_decode 1 128 128 0 1
gemv_trellis_decode 1 32 128 0 1
gemv_trellis_decode 1 64 128 0 1
gemv_trellis_decode 1 128 128 0 1"}
    for t in ${CPU_DECODE_THREADS:-1 2 4 8 $n}; do
        [ "$t" -le "$n" ] || continue
        for warm in "" --warm; do
            say "== cpu decode: $t threads ${warm:-cold}"
            set --
            for sh in ${CPU_DECODE_SHAPES:-1x4096x14336 1x14336x4096}; do set -- "$@" --shape "$sh"; done
            printf '%s\n' "$specs" > /tmp/cpu-specs.txt
            while read -r spec; do set -- "$@" --candidate "$spec"; done < /tmp/cpu-specs.txt
            log="$D/cpu-decode-$t${warm:+-warm}"
            timeout "$STAGE_S" build/bench --backend cpu --threads "$t" $warm \
                --formats "${CPU_DECODE_FORMATS:-fp4,u4,trellis3}" "$@" --budget 0.2 --quiet \
                --out "$log.csv" > "$log.log" 2>&1
            say "exit $?"
            grep -E "probes|^best|a cold read" "$log.log" | tee -a "$S"
        done
    done
    tar czf "$OUT/cpu-decode.tar.gz" "$D"
    ;;
cpu-host)
    D=results/devcpu
    measure "tune --chip host (the default suite) on $(nproc) cores" cpu-tune \
        "$D/tune-results.csv" build/tune --chip host --quiet --out-dir "$D"
    measure "tune --chip host --check heldout --formats fp4" cpu-check "$D/check-results.csv" \
        build/tune --chip host --check heldout --formats fp4 --quiet --out-dir "$D"
    build/model fit --chip-file "$D/chip.csv" --out "$D/model-fit.csv" "$D/tune-results.csv" \
        > "$OUT/cpu-model-fit.log" 2>&1
    grep -E "MAPE|picks at" "$OUT/cpu-model-fit.log" | grep -v format | tee -a "$S"
    build/model eval --chip-file "$D/chip.csv" --model "$D/model-fit.csv" \
        "$D/check-results.csv" > "$OUT/cpu-model-eval.log" 2>&1
    grep -E "MAPE|picks at" "$OUT/cpu-model-eval.log" | grep -v format | tee -a "$S"
    tar czf "$OUT/devcpu.tar.gz" "$D"
    ;;
cpu-grid)
    D=results/devcpu/grid
    measure "tune --chip host --suite grid, fp4, M 1,16, on $(nproc) cores" cpu-grid-tune \
        "$D/tune-results.csv" build/tune --chip host --suite grid --m 1,16 --formats fp4 \
        --evals 24 --quiet --out-dir "$D"
    measure "tune --chip host --check heldout on its table, fp4, M 1,16" cpu-grid-check \
        "$D/check-results.csv" build/tune --chip host --check heldout --formats fp4 --m 1,16 \
        --out-dir "$D"
    for ev in 24 40; do
        rm -rf /tmp/replay && mkdir -p /tmp/replay
        cp "$D/check-results.csv" /tmp/replay/tune-results.csv
        cp "$D/chip.csv" /tmp/replay/tune-chip.csv 2>/dev/null
        measure "guided search replayed on those rows, --evals $ev" "cpu-replay-$ev" \
            /tmp/replay/tune-results.csv build/tune --chip host --suite heldout --m 1,16 \
            --formats fp4 --evals "$ev" --resume --out-dir /tmp/replay
    done
    for f in chip model table; do cp -L "$D/$f.csv" "$D/$f.csv.real" && mv "$D/$f.csv.real" "$D/$f.csv"; done
    tar czf "$OUT/devcpu-grid.tar.gz" "$D"
    ;;
timing)
    # the cuda backend's two timings of the same candidates (AB_SPECS), in
    # alternating rounds: idle (each run launched on an idle GPU) and queued
    # (behind a spin kernel: the device time alone, MQ_CUDA_TIMING=queued)
    # -> results/CHIP/AB_DIR (default timing)/{idle,queued}.csv, var.txt
    D=results/$CHIP/${AB_DIR:-timing}
    mkdir -p "$D" && rm -f "$D"/*.csv "$D"/*.log "$D/var.txt"
    printf '%s\n' "$AB_SPECS" > /tmp/var-specs.txt
    r=1
    while [ "$r" -le "${AB_ROUNDS:-3}" ]; do
        for mode in idle queued; do
            awk '{print $1, $2}' /tmp/var-specs.txt | sort -u | while read -r sh f; do
                set --
                while read -r s2 f2 spec; do
                    [ "$s2 $f2" = "$sh $f" ] && set -- "$@" --candidate "$spec"
                done < /tmp/var-specs.txt
                MQ_CUDA_TIMING=$mode timeout "$STAGE_S" build/bench --backend cuda --shape "$sh" \
                    --formats "$f" --budget 0.05 --quiet --out "$D/$mode.csv" "$@" < /dev/null \
                    >> "$D/$mode.log" 2>&1
            done
        done
        r=$((r + 1))
    done
    ab_summary "$D" idle idle queued
    ;;
lane)
    # the lane-layout kernel (issue 40): every legal lane_gemm candidate of
    # each shape (at most LANE_MAX, the space's order) with cold weights,
    # one bench per shape and format -> results/CHIP/LANE_DIR/lane.csv
    D=results/$CHIP/${LANE_DIR:-lane}
    mkdir -p "$D"
    [ -n "${RESUME:-}" ] || rm -f "$D/lane.csv" "$D"/lane-*.log
    for f in ${LANE_FORMATS:-fp4}; do
        for sh in ${LANE_SHAPES:-16x4096x14336 64x4096x14336 512x4096x14336 16x14336x4096 512x14336x4096 16x4096x4096 512x4096x4096}; do
            build/bench --chip "$CHIP" --shape "$sh" --formats "$f" --space full --explain \
                > /tmp/explain.txt 2>&1
            awk -v re="${LANE_FILTER:-^lane}" '$1 == "legal" && $2 ~ /^lane/ {
                    gsub(/[a-z]+=/, ""); s = $2 " " $3 " " $4 " " $5 " " $6 " " $7
                    if (s ~ re) print s }' \
                /tmp/explain.txt | head -n "${LANE_MAX:-250}" > /tmp/specs.txt
            # the same bench's references (LANE_EXTRA: "variant tm tn tk tg sk|...")
            [ -z "${LANE_EXTRA:-}" ] || echo "$LANE_EXTRA" | tr '|' '\n' >> /tmp/specs.txt
            say "== lane: $f $sh, $(wc -l < /tmp/specs.txt) candidates"
            split -l 60 /tmp/specs.txt /tmp/specs-part.
            for part in /tmp/specs-part.*; do
                set --
                while read -r spec; do set -- "$@" --candidate "$spec"; done < "$part"
                timeout "$STAGE_S" build/bench --backend cuda --shape "$sh" --formats "$f" \
                    --budget "${LANE_BUDGET:-0.05}" --quiet --no-probes ${RESUME:+--resume} \
                    --out "$D/lane.csv" "$@" >> "$D/lane-$f-$sh.log" 2>&1
                say "exit $?"
            done
            rm -f /tmp/specs-part.*
            grep -E "^best|wrong|error" "$D/lane-$f-$sh.log" | head -6 | tee -a "$S"
        done
    done
    ;;
cpu-check)
    D=${CHECK_DIR:-results/devcpu/grid-check}   # a fresh sweep each run
    mkdir -p "$D" && cp -L results/devcpu/grid/table.csv "$D/table.csv" && rm -f "$D/check-results.csv"
    measure "tune --chip host --check heldout on results/devcpu/grid/table.csv, fp4, M 1,16" \
        cpu-check-retimed "$D/check-results.csv" build/tune --chip host --check heldout \
        --formats fp4 --m 1,16 --out-dir "$D"
    tar czf "$OUT/devcpu-check.tar.gz" "$D"
    ;;
*)
    say "unknown stage $stage"; rc=2 ;;
esac
done
tar czf "$OUT/gpu-results.tar.gz" --exclude="results/$CHIP/plots" results/"$CHIP" "$OUT"/*.log 2>/dev/null
exit $rc
