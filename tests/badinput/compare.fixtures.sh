# compare.fixtures.sh - the files compare.cases feeds compare (sourced by
# test_badinput.sh in the scratch directory, $B the build directory): a
# results file, an A/B directory of two rounds, a history of each kind, and
# the things a history must not be (a results file, a link, a directory).
"$B/bench" --chip m4max --shape 3x64x256 --formats u4 --budget 0.01 --max-reps 5 \
    --candidate "marlin_gemm_fused_u4 8 64 64 0 1" --out cmp-base.csv >/dev/null 2>&1
cp cmp-base.csv cmp-results.csv                      # a results file given as a history
mkdir -p cmp-ab cmp-dir
for f in a.1 b.1 a.2 b.2; do cp cmp-base.csv "cmp-ab/$f.csv"; done
"$B/compare" cmp-base.csv cmp-base.csv --history cmp-hist.csv >/dev/null 2>&1
"$B/compare" --ab cmp-ab --history cmp-abhist.csv >/dev/null 2>&1
tail -n 1 cmp-hist.csv > cmp-headless.csv           # a history row without its header
ln -s cmp-hist.csv cmp-link.csv                      # a history that is a link
ln -s cmp-abhist.csv cmp-ablink.csv
