# history.gp - the nightly runs against the baseline: each benchmark's
# median / baseline median (grey), their geometric mean (black), the
# minimum-effect band, and the verdicts: regressed (red), regressed once but
# not repeated by the night's confirmation pass (hollow red), improved
# (green), the latest run's regressions labelled.
# lines: a block per benchmark "date ratio"; marks: "date ratio verdict label";
# geo: "date geomean regressed".
load plotdir."/style.gp"
set title ttl
set xdata time
set timefmt "%Y-%m-%dT%H:%M:%SZ"
set key above box opaque maxrows 2 width 1
set xlabel "nightly run (UTC)"
set ylabel "median latency / baseline median"
# a day either side of a single run; otherwise room on the right for labels
t0 = strptime("%Y-%m-%dT%H:%M:%SZ", first)
t1 = strptime("%Y-%m-%dT%H:%M:%SZ", last)
if (t1 - t0 < 60) {
    set xrange [t0 - 43200 : t1 + 86400]
} else {
    set xrange [t0 - 0.05 * (t1 - t0) : t1 + 0.6 * (t1 - t0)]
}
# hours within a day, dates beyond
if (t1 - t0 < 86400 && t1 - t0 >= 60) { set format x "%H:%M" } else { set format x "%m-%d" }
set offsets 0, 0, graph 0.05, graph 0.05
plot for [i=1:nbench] lines index (i-1) using 1:2 with linespoints lw 1 pt 7 ps 0.4 lc rgb "#c0c0c0" notitle, \
     1 + min_effect with lines dt 2 lc rgb "#808080" title sprintf("+/-%.0f%% minimum effect", 100 * min_effect), \
     1 - min_effect with lines dt 2 lc rgb "#808080" notitle, \
     geo using 1:2 with linespoints lw 3 pt 7 ps 0.8 lc rgb "#000000" title "geometric mean", \
     marks using 1:($3 == 1 ? $2 : NaN) with points pt 9 ps 1.6 lc rgb "#d62728" title "regressed", \
     marks using 1:($3 == 3 ? $2 : NaN) with points pt 8 ps 1.4 lc rgb "#d62728" title "regressed once, not repeated", \
     marks using 1:($3 == 2 ? $2 : NaN) with points pt 11 ps 1.6 lc rgb "#2ca02c" title "improved", \
     marks using 1:2:4 with labels left offset char 1,0 font ",8" tc rgb "#d62728" notitle
