# moe.gp - the MoE block's latency against tokens, one colour per model:
# solid, the best fused candidate (gemm_trellis_moe) at each token count;
# dashed, the unfused baseline (per expert: gather, dense gate/up/down,
# SwiGLU and the weighted sum as passes).
# data: blocks 2i (fused) and 2i+1 (unfused) of "tokens latency_ms" per model.
load plotdir."/style.gp"
set title ttl
set xlabel "tokens"
set ylabel "latency (ms)"
set logscale x 2
set logscale y 10
set format y "%g"
set ytics @ticks125
fus(i) = sprintf("%s fused", word(labels, i))
unf(i) = sprintf("%s unfused", word(labels, i))
plot for [i=1:nseries] data index (2*i-2) using 1:2 with linespoints lw 2 pt 7 ps 1 lc rgb color(i) title fus(i), \
     for [i=1:nseries] data index (2*i-1) using 1:2 with linespoints dt 2 lw 1.5 pt 6 ps 0.8 lc rgb color(i) title unf(i)
