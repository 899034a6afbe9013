# model.gp - the cost model's predicted latency against the measured one,
# one colour per format, with y = x (a perfect model) and a factor-2 band.
# data: one block of "predicted_ms measured_ms" per format; lo, hi: their range.
load plotdir."/style.gp"
set title ttl
set xlabel "predicted latency (ms)"
set ylabel "measured latency (ms)"
set logscale xy 10
set format x "%g"
set format y "%g"
set size square
set xrange [lo / 1.3 : hi * 1.3]
set yrange [lo / 1.3 : hi * 1.3]
set samples 200
plot for [i=1:nseries] data index (i-1) using 1:2 with points pt 7 ps 0.5 lc rgb color(i) title word(labels, i), \
     x with lines lw 2 lc rgb "#000000" title "y = x", \
     2*x with lines dt 2 lc rgb "#808080" title "factor 2", \
     x/2 with lines dt 2 lc rgb "#808080" notitle
