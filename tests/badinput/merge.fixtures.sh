# merge.fixtures.sh - the files merge.cases feeds merge, made under mg/ in
# the scratch directory (sourced by test_badinput.sh with $B the build
# directory and $root the source tree): the two shards of a 6-unit sweep (the 6 fp4 seed variants) and
# the one shard of the same work in one piece, then manifests that no bench
# or tune writes (each keeps the rest of a real one, so merge has only the
# one fault to find).
mkdir -p mg mg/adir
sw="--shape 1x256x512 --formats fp4 --budget 0.002 --max-reps 2 --no-probes --quiet --threads 1"
# shellcheck disable=SC2086 # the options are meant to split
for i in 1 2; do "$B/bench" $sw --shard "$i/2" --out "mg/s$i.csv" >/dev/null 2>&1; done
# shellcheck disable=SC2086
"$B/bench" $sw --shard 1/1 --out mg/one.csv >/dev/null 2>&1
# copy RESULTS NAME: NAME.csv, the rows of RESULTS (the manifest is made after)
copy() { cp "mg/$1.csv" "mg/$2.csv"; }
# the 1/1 sweep's id with a shard count of 4096 (issue 38: seen[] overflowed)
copy one huge
sed 's/shard 1 of 1 owns/shard 4000 of 4096 owns/; s/^\([0-9a-f]*,[a-z]*\),1,1,/\1,4000,4096,/' \
    mg/one.manifest.csv > mg/huge.manifest.csv
# the comment lines out of range: shard past the count, count 0, count past 4096, overflow
for v in "over 5 4" "zero 0 0" "many 1 5000" "wrap 1 99999999999"; do
    # shellcheck disable=SC2086 # split into the name, the shard and the count
    set -- $v
    copy one "$1"
    sed "s/shard 1 of 1 owns/shard $2 of $3 owns/" mg/one.manifest.csv > "mg/$1.manifest.csv"
done
copy one schema2
sed 's/schema 1:/schema 2:/' mg/one.manifest.csv > mg/schema2.manifest.csv
copy one nocomment
grep -v '^#' mg/one.manifest.csv > mg/nocomment.manifest.csv
copy one header
sed 's/^sweep,kind,shard,shards,/sweep,kind,shard,count,/' mg/one.manifest.csv > mg/header.manifest.csv
copy one badfmt
sed '5s/,fp4,/,fp5,/' mg/one.manifest.csv > mg/badfmt.manifest.csv
copy one rowshard                       # a row of another shard than the comment lines'
sed '6s/^\([0-9a-f]*,bench\),1,1,/\1,1,2,/' mg/one.manifest.csv > mg/rowshard.manifest.csv
copy one star                           # a whole problem's '*' in a bench manifest
sed '5s/,marlin_gemm_fp4,64,64,32,0,1,/,*,*,*,*,*,*,/' mg/one.manifest.csv > mg/star.manifest.csv
copy one cut                            # a manifest that lost its last row
sed '$d' mg/one.manifest.csv > mg/cut.manifest.csv
copy one nul
{ cat mg/one.manifest.csv; printf 'x\000y\n'; } > mg/nul.manifest.csv
# manifests of the 2-shard sweep that disagree with shard 1's
copy s2 chip2
sed 's/chip host,/chip m4max,/; s/,host,cpu,/,m4max,cpu,/' mg/s2.manifest.csv > mg/chip2.manifest.csv
copy s2 units2
sed 's/: 6 units,/: 7 units,/' mg/s2.manifest.csv > mg/units2.manifest.csv
copy s1 twin1                           # shard 1 again, one unit's cost edited
sed '5s/,[0-9]*$/,7/' mg/s1.manifest.csv > mg/twin1.manifest.csv
# both shards say the sweep has 7 units: each agrees, but together they own 6
for i in 1 2; do
    copy "s$i" "six$i"
    sed 's/: 6 units,/: 7 units,/' "mg/s$i.manifest.csv" > "mg/six$i.manifest.csv"
done
# another build's rows; a results file that is no results file
sed 's/^\("[123]","[^"]*","\)[^"]*"/\1deadbeef0000"/' mg/s2.csv > mg/build2.csv
printf 'not,results\n1,2\n' > mg/junk.csv
