# occupancy.gp - latency against threadgroups per core for one shape, one
# colour per split_k: solid, the best measured candidate at each occupancy;
# dashed, the cost model's best prediction at each occupancy.
# data: blocks 2i (measured) and 2i+1 (model) of "x latency_ms" per series.
load plotdir."/style.gp"
set title ttl
set xlabel sprintf("threadgroups per core (threadgroups launched / %g cores)", cores)
set ylabel "latency (ms)"
set logscale x 2
set logscale y 10
set format y "%g"
set ytics @ticks125
meas(i) = sprintf("split_k=%s measured", word(labels, i))
modl(i) = sprintf("split_k=%s model", word(labels, i))
if (has_meas && has_model) {
    plot for [i=1:nseries] data index (2*i-2) using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb color(i) title meas(i), \
         for [i=1:nseries] data index (2*i-1) using 1:2 with lines dt 2 lw 1.5 lc rgb color(i) title modl(i)
} else {
    if (has_meas) {
        plot for [i=1:nseries] data index (2*i-2) using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb color(i) title meas(i)
    } else {
        plot for [i=1:nseries] data index (2*i-1) using 1:2 with lines dt 2 lw 1.5 lc rgb color(i) title modl(i)
    }
}
