#!/bin/sh
# test_plot.sh - every plot drawn by the plot command from the committed
# example results (results/host, results/nightly): gnuplot exits cleanly,
# the PNG and SVG are non-empty and of the asked size; bad input gets a
# one-line error and a non-zero exit, and a failed drawing leaves the
# image already there untouched.
# usage: test_plot.sh BUILD_DIR
B=${1:-build}
. "$(dirname "$0")/../scripts/portable.sh"
plot="$B/plot"
passed=0; failed=0
check() { # check "description" condition...
    desc=$1; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $desc" >&2; fi
}
png_size() { # "W H" from the PNG header (IHDR: width and height, big-endian, at byte 16)
    od -An -tu1 -j16 -N8 "$1" | awk '{print $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8}'
}
svg_size() { # "W H" from the <svg width=".." height=".."> attributes
    tr '\n' ' ' < "$1" | sed -n 's/.*<svg[^>]*width="\([0-9]*\)" height="\([0-9]*\)".*/\1 \2/p'
}
expect_images() { # expect_images NAME W H: NAME.png and NAME.svg exist, non-empty, W x H
    for ext in png svg; do
        f="$out/$1.$ext"
        check "$f is written and non-empty" test -s "$f"
        got=$([ "$ext" = png ] && png_size "$f" || svg_size "$f")
        check "$f is $2x$3 (got '$got')" [ "$got" = "$2 $3" ]
    done
    check "no temporary image left in $out" [ -z "$(ls "$out" | grep '\.tmp\.')" ]
}
out=$(mktemp -d)
sweep=results/host/examples/sweep-fp4-4096x14336.csv
run() { # run DESCRIPTION ARGS...: expect exit 0
    desc=$1; shift
    msg=$("$plot" "$@" --out "$out" 2>&1); rc=$?
    check "$desc: exit 0 (got $rc: $msg)" [ "$rc" -eq 0 ]
}
run "occupancy on the host sweep" occupancy --chip host --shape 1x4096x14336 --results "$sweep"
expect_images occupancy-host-fp4-1x4096x14336 1000 650
run "split-K on the host sweep" splitk --chip host --shape 1x4096x14336 --results "$sweep" --size 800x500
expect_images splitk-host-fp4-4096x14336 800 500
run "roofline of the host sweep" roofline --chip host --results "$sweep"
expect_images roofline-host 1000 650
run "model vs measured on the host sweep" model --chip host --results "$sweep"
expect_images model-host 1000 650
run "history of the committed nightly runs" history --nightly-dir results/nightly
expect_images history 1000 650
run "occupancy predicted for m4max (model only)" occupancy --chip m4max --shape 16x4096x4096
expect_images occupancy-m4max-fp4-16x4096x4096 1000 650

expect_fail() { # expect_fail CODE "needle" args...: exit CODE, one line naming the problem
    code=$1; needle=$2; shift 2
    msg=$("$plot" "$@" 2>&1); rc=$?
    lines=$(printf '%s\n' "$msg" | nlines)
    check "'$*' exits $code (got $rc)" [ "$rc" -eq "$code" ]
    check "'$*' prints one line (got $lines: $msg)" [ "$lines" -eq 1 ]
    case "$msg" in *"$needle"*) ok=1 ;; *) ok=0 ;; esac
    check "'$*' names the problem: expected '$needle' in '$msg'" [ "$ok" -eq 1 ]
}
expect_fail 2 "unknown KIND" pie
expect_fail 2 "missing KIND"
expect_fail 2 "bad --shape" occupancy --shape 1x2
expect_fail 2 "not a multiple of the group size" occupancy --shape 1x4096x100
expect_fail 2 "unknown option" occupancy --colour red
expect_fail 2 "unknown chip 'm9'" occupancy --chip m9 --out "$out"
expect_fail 2 "no-such.csv" occupancy --results "$out/no-such.csv" --out "$out"
printf 'not,a,results,file\n' > "$out/bad.csv"
expect_fail 2 "bad.csv" occupancy --results "$out/bad.csv" --out "$out"
printf 'kind,th_launch\nroofline,1\n' > "$out/model.csv"
expect_fail 2 "model.csv:" occupancy --model "$out/model.csv" --out "$out"
expect_fail 2 "nothing to draw" occupancy --chip m1 --shape 3x4096x14336 --results "$sweep" --out "$out"
expect_fail 2 "baseline.csv" history --nightly-dir "$out"
cp results/nightly/baseline.csv "$out/"
expect_fail 2 "no nightly runs" history --nightly-dir "$out"
# the MoE plot: from a moe-bench results file, per model fused and unfused against tokens
"$plot" moe --results results/devcpu/moe-decode.csv --out "$out" >/dev/null 2>&1; rc=$?
check "plot moe draws the committed 16-core decode results (got $rc)" [ "$rc" -eq 0 ]
check "as PNG and SVG" [ -s "$out/moe-decode.png" -a -s "$out/moe-decode.svg" ]
check "with every model of the file in its key" [ "$(grep -c 'fused' "$out/moe-decode.svg")" -ge 8 ]
expect_fail 2 "not a moe-bench results file" moe --results "$out/bad.csv" --out "$out"
expect_fail 2 "takes --results FILE" moe --out "$out"
# a recorded routing whose path holds a quote, a comma and a newline: moe-bench's
# rows keep it whole (CSV-quoted, the newline escaped) and plot moe reads it back
rdir="$out/moe-odd"
mkdir -p "$rdir"
rpath="$rdir/$(printf 'rec "a",b\nc.csv')"
{ echo token,slot,expert,prob; for t in 0 1; do for k in 0 1 2 3 4 5 6 7; do
    echo "$t,$k,$((k * 3 + t)),0.125"; done; done; } > "$rpath"
msg=$("$B/moe-bench" --routing "$rpath" --max-candidates 1 --budget 0.005 --rotations 1 \
      --threads 2 --out "$rdir/r.csv" 2>&1); rc=$?
check "moe-bench takes a routing path with a quote, a comma and a newline (got $rc: $msg)" \
    [ "$rc" -eq 0 ]
check "its 2 rows, a line each, the path quoted and its newline escaped" \
    [ "$(grep -c ',"[^"]*rec ""a"",b\\nc.csv",' "$rdir/r.csv")" -eq 2 ]
msg=$("$plot" moe --results "$rdir/r.csv" --out "$rdir" 2>&1); rc=$?
check "plot moe reads those rows back (got $rc: $msg)" [ "$rc" -eq 0 ]
check "and titles the plot with the path, its newline a line break" \
    [ "$(grep -c -e '/rec "a",b</text>' -e '>c.csv routing)' "$rdir/moe-r.svg")" -eq 2 ]
# a drawing that fails leaves the image already there as it was
cp "$out/roofline-host.png" "$out/before.png"
MQ_GNUPLOT=false "$plot" roofline --chip host --results "$sweep" --out "$out" >/dev/null 2>&1; rc=$?
check "a failing gnuplot makes plot exit non-zero (got $rc)" [ "$rc" -ne 0 ]
check "and the existing image is untouched" cmp -s "$out/roofline-host.png" "$out/before.png"
msg=$(MQ_GNUPLOT=/nonexistent/gnuplot "$plot" roofline --chip host --results "$sweep" --out "$out" 2>&1)
case "$msg" in *"cannot run /nonexistent/gnuplot"*) ok=1 ;; *) ok=0 ;; esac
check "a missing gnuplot is named ($msg)" [ "$ok" -eq 1 ]
# a drawing that fails into a directory it made removes it again (only
# those it made, only when empty), in one line and nothing on stdout
msg=$(MQ_GNUPLOT=false "$plot" roofline --chip host --results "$sweep" --out "$out/new/plots" 2>&1 >"$out/stdout"); rc=$?
check "a failed drawing into a new directory exits 2, one line, nothing on stdout (got $rc: $msg)" \
    [ "$rc" -eq 2 -a "$(printf '%s\n' "$msg" | nlines)" -eq 1 -a ! -s "$out/stdout" ]
check "and leaves no directory it made" [ ! -e "$out/new" ]
mkdir -p "$out/kept/plots"
MQ_GNUPLOT=false "$plot" roofline --chip host --results "$sweep" --out "$out/kept/plots" >/dev/null 2>&1
check "and keeps the directories it did not make" [ -d "$out/kept/plots" ]
msg=$(MQ_GNUPLOT=false "$plot" all --chip host --results "$sweep" --out "$out/new" 2>&1 >"$out/stdout"); rc=$?
check "plot all that draws nothing exits 2 in one line (got $rc: $msg)" \
    [ "$rc" -eq 2 -a "$(printf '%s\n' "$msg" | nlines)" -eq 1 -a ! -s "$out/stdout" -a ! -e "$out/new" ]
# an output that cannot be replaced (BASE.svg a directory) is refused before
# anything is drawn: the old PNG stays byte for byte, nothing is left behind
mkdir -p "$out/half/roofline-host.svg"
printf 'the old png\n' > "$out/half/roofline-host.png"
msg=$("$plot" roofline --chip host --results "$sweep" --out "$out/half" 2>&1 >"$out/stdout"); rc=$?
check "BASE.svg a directory: exit 2, one line, nothing on stdout (got $rc: $msg)" \
    [ "$rc" -eq 2 -a "$(printf '%s\n' "$msg" | nlines)" -eq 1 -a ! -s "$out/stdout" ]
case "$msg" in *"roofline-host.svg: cannot write: it is a directory"*) ok=1 ;; *) ok=0 ;; esac
check "BASE.svg a directory: named ($msg)" [ "$ok" -eq 1 ]
check "BASE.svg a directory: the old PNG is byte-identical" \
    [ "$(cat "$out/half/roofline-host.png")" = "the old png" ]
check "BASE.svg a directory: no temporary file left" \
    [ "$(ls -A "$out/half" | tr '\n' ' ')" = "roofline-host.png roofline-host.svg " ]
# more directories to make than a fixed table holds (70 deep): a failed drawing
# removes every one it made
deep="$out/deep"
for i in $(seq 70); do deep="$deep/d$i"; done
msg=$(MQ_GNUPLOT=false "$plot" roofline --chip host --results "$sweep" --out "$deep" 2>&1 >"$out/stdout"); rc=$?
check "a failed drawing 70 new directories deep exits 2 (got $rc: $msg)" [ "$rc" -eq 2 ]
check "and removes all 70 directories it made" [ ! -e "$out/deep" ]
# links planted where a writer through names it did not make would write lead
# to a file outside the directory: at IMAGE.tmp.PID (the prefix of the
# temporary names, IMAGE.tmp.PID.XXXXXX, for the next 300 process ids, made by
# one process) and at the images' own names. plot writes only into files that
# it made (mkstemp) and renames them over the names, never through a link
printf 'outside, must stay\n' > "$out/outside.txt"
sum0=$(sha256 < "$out/outside.txt")
for names in tmp final; do
    mkdir "$out/$names"
    next=$(sh -c 'echo $$')
    perl -e 'my ($dir, $to, $kind, $n) = @ARGV;
        my @f = ("roofline-host.png", "roofline-host.svg");
        if ($kind eq "tmp") {
            @f = map { ("roofline-host.png.tmp.$_", "roofline-host.svg.tmp.$_") } $n .. $n + 300;
        }
        symlink($to, "$dir/$_") or die "$dir/$_: $!\n" for @f;' \
        "$out/$names" "$out/outside.txt" "$names" "$next"
    msg=$("$plot" roofline --chip host --results "$sweep" --out "$out/$names" 2>&1); rc=$?
    check "links planted at the $names names: plot draws (got $rc: $msg)" [ "$rc" -eq 0 ]
    check "links planted at the $names names: the file outside is unchanged" [ "$(sha256 < "$out/outside.txt")" = "$sum0" ]
    check "links planted at the $names names: the images are files of their own" \
        [ -f "$out/$names/roofline-host.png" -a ! -L "$out/$names/roofline-host.png" \
          -a -f "$out/$names/roofline-host.svg" -a ! -L "$out/$names/roofline-host.svg" \
          -a "$(png_size "$out/$names/roofline-host.png")" = "1000 650" ]
done
rm -rf "$out"
echo "plot: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
