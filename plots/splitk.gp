# splitk.gp - latency against split_k for the small-M shapes of one N x K,
# one colour per M: solid, the best measured candidate at each split_k;
# dashed, the cost model's best prediction.
# data: blocks 2i (measured) and 2i+1 (model) of "split_k latency_ms" per M.
load plotdir."/style.gp"
set title ttl
set xlabel "split_k (K slices reduced in a second pass; 1 = no split)"
set ylabel "latency (ms)"
set logscale x 2
set logscale y 10
set format y "%g"
set ytics @ticks125
set xtics (1, 2, 3, 4, 8, 16)
set xrange [0.8:10]
meas(i) = sprintf("%s measured", word(labels, i))
modl(i) = sprintf("%s model", word(labels, i))
if (has_meas && has_model) {
    plot for [i=1:nseries] data index (2*i-2) using 1:2 with linespoints lw 2 pt 7 ps 1 lc rgb color(i) title meas(i), \
         for [i=1:nseries] data index (2*i-1) using 1:2 with linespoints dt 2 lw 1.5 pt 6 ps 0.8 lc rgb color(i) title modl(i)
} else {
    if (has_meas) {
        plot for [i=1:nseries] data index (2*i-2) using 1:2 with linespoints lw 2 pt 7 ps 1 lc rgb color(i) title meas(i)
    } else {
        plot for [i=1:nseries] data index (2*i-1) using 1:2 with linespoints dt 2 lw 1.5 pt 6 ps 0.8 lc rgb color(i) title modl(i)
    }
}
