# moe.fixtures.sh - the files moe.cases feeds moe-bench and plot moe (issue
# 38): moe-bench results files with a row short of the header's fields,
# columns shifted past the 28th, numbers that are not numbers; routing files
# with every problem the reader names by line; results files moe-bench must
# not append to (a link, schema 1, a bad row). Sourced by test_badinput.sh
# in the scratch directory ($root the source tree).
# shellcheck disable=SC2154 # $root is test_badinput.sh's
h1=$(sed -n 2p "$root/results/devcpu/moe-decode.csv")   # schema 1: 28 columns
r1=$(sed -n 3p "$root/results/devcpu/moe-decode.csv")   # threads 16, median 0.00063904
h2=$(sed -n 2p "$root/tests/data/moe-gpu-decode-h100.csv") # schema 2: 31 columns
r2=$(sed -n 3p "$root/tests/data/moe-gpu-decode-h100.csv")
moe1() { printf '# mq MoE results, schema 1\n%s\n%s\n' "$h1" "$1"; }
printf '# mq MoE results, schema 2\n%s\n%s\n' "$h2" "$r1" > moe-short.csv # 28 fields under 31
printf 'a,b,c,d,e,f,g,h,i,j,%s\n%s\n' "$h1" "$r1" > moe-shifted.csv     # columns past the 28th
moe1 "$(printf '%s' "$r1" | sed 's/,16,fused,/,nan,fused,/')" > moe-nanthreads.csv
moe1 "$(printf '%s' "$r1" | sed 's/,16,fused,/,inf,fused,/')" > moe-infthreads.csv
moe1 "$(printf '%s' "$r1" | sed 's/,0\.00063904,/,inf,/')" > moe-infmedian.csv
moe1 "$(printf '%s' "$r1" | sed 's/trellis3,1,128,/trellis3,1.5,128,/')" > moe-halftoken.csv
{ moe1 "$r1"; printf 'x\n'; } > moe-onefield.csv                      # a 1-field row
printf '# mq MoE results, schema 2\n%s\n%s\n' "$h2" "$r2" > moe-good2.csv
cp "$root/results/devcpu/moe-decode.csv" moe-schema1.csv
ln -s moe-good2.csv moe-link.csv
mkdir moe-dir
route() { printf 'token,slot,expert,prob\n%b' "$1"; } # the header, then rows ("\n" between)
route '0,0,3,0.6\n0,1,3,0.4\n' > moe-twice.csv       # token 0 on expert 3 twice
route '0,0,3,0.6\n0,0,4,0.4\n' > moe-dupslot.csv     # slot 0 of token 0 twice
route '0,0,3,1\n2,0,4,1\n' > moe-gap.csv             # no token 1
route '0,0,3,.5\n0,1,4,.5\n1,0,4,1\n' > moe-lastslot.csv
route '0,0,3,nan\n0,1,4,0.5\n' > moe-nanprob.csv
route '0,0,3,0.6\n0,1,4,-0.4\n' > moe-negprob.csv
route '0,0,3,0.6\n0,1,8,0.4\n' > moe-bigexpert.csv  # Mixtral has experts 0..7
route '0,0,3,0.6\n0,1,4\n' > moe-shortrow.csv
route '0,1.5,3,0.6\n' > moe-halfslot.csv
route '0,0,1,0.7\n0,1,2,0.3\n' > moe-k2.csv          # 2 a token; Qwen3 routes 8
: > moe-empty.csv
printf '0,0,3,0.6\n0,1,4,0.4\n' > moe-nohead.csv
printf 'token,slot,expert,prob\n' > moe-headonly.csv
