#!/bin/sh
# sass-stats.sh DIR... - the SASS instruction mix of every kernel in the
# cubins under each DIR (a cuda backend cache, MQ_CUDA_CACHE): one line per
# kernel with its static instruction count and the counts of the opcodes that
# say where an MMA kernel's time goes (tensor-core HMMA, shared-memory LDS/STS,
# global LDG/STG, local-memory spills LDL/STL, shuffles, barriers, FP32 FFMA).
# Needs cuobjdump (the CUDA toolkit); with SASS_DIR set, each cubin's SASS is
# also written there as DIRNAME-HASH.sass.
CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
if [ -z "$CUOBJDUMP" ]; then
    echo "sass-stats: no cuobjdump on this machine" >&2
    exit 2
fi
for d in "$@"; do
    tag=$(basename "$d")
    for f in "$d"/*.cubin; do
        [ -f "$f" ] || continue
        sass=$("$CUOBJDUMP" -sass "$f") || continue
        [ -n "${SASS_DIR:-}" ] && printf '%s\n' "$sass" > "$SASS_DIR/$tag-$(basename "$f" .cubin).sass"
        printf '%s\n' "$sass" | awk -v tag="$tag" -v cubin="$(basename "$f" .cubin | cut -c1-8)" '
            function report() {
                printf "%s %s %s n=%d HMMA=%d LDS=%d STS=%d LDG=%d STG=%d LDL=%d STL=%d SHFL=%d BAR=%d FFMA=%d\n",
                    tag, cubin, fn, n, c["HMMA"], c["LDS"], c["STS"], c["LDG"], c["STG"], c["LDL"],
                    c["STL"], c["SHFL"], c["BAR"], c["FFMA"]
            }
            /Function :/ { if (fn != "") report(); fn = $3; split("", c); n = 0; next }
            /^[ \t]+\/\*[0-9a-f]+\*\/[ \t]+[@A-Z]/ {
                op = $2
                if (op ~ /^@/) op = $3
                sub(/[.;].*/, "", op)
                c[op]++
                n++
            }
            END { if (fn != "") report() }'
    done
done
