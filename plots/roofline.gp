# roofline.gp - two panels against arithmetic intensity (flop per byte of
# weights, activations and output moved once): achieved GFLOP/s under the
# roof min(peak, bw * I), and achieved GB/s under min(bw, peak / I).
# data: block 0 "I gflops gbs" of every row, block 1 the fastest per shape.
load plotdir."/style.gp"
set multiplot layout 1,2 title ttl
set logscale xy 10
set format x "%g"
set format y "%g"
set samples 400
set key inside left top box opaque
set xlabel "arithmetic intensity (flop / byte)"
set xrange [*:*]
roof(x) = (bw * x < peak) ? bw * x : peak
set ylabel "achieved GFLOP/s"
plot data index 0 using 1:2 with points pt 7 ps 0.4 lc rgb "#b0b0b0" title "every candidate", \
     data index 1 using 1:2 with points pt 7 ps 1.0 lc rgb "#1f77b4" title "fastest per shape", \
     roof(x) with lines lw 2 lc rgb "#000000" title sprintf("roof: %.0f GB/s, %.0f GFLOP/s", bw, peak)
bwroof(x) = (peak / x < bw) ? peak / x : bw
set ylabel "achieved GB/s"
plot data index 0 using 1:3 with points pt 7 ps 0.4 lc rgb "#b0b0b0" title "every candidate", \
     data index 1 using 1:3 with points pt 7 ps 1.0 lc rgb "#1f77b4" title "fastest per shape", \
     bwroof(x) with lines lw 2 lc rgb "#000000" title sprintf("ceiling: %.0f GB/s, peak / I", bw)
unset multiplot
