# style.gp - what every plot shares: the terminal (PNG through cairo or SVG,
# chosen by the caller's fmt, size width x height, written to out), fonts,
# grid, key and the colour cycle. The plot command sets plotdir, fmt, out,
# width, height and the plot's own variables before loading a script.
if (fmt eq "png") {
    set terminal pngcairo size width,height noenhanced font "DejaVu Sans,11" linewidth 1
} else {
    set terminal svg size width,height fixed noenhanced font "DejaVu Sans,11" background "white"
}
set output out
set grid xtics ytics mxtics mytics lc rgb "#e0e0e0" lw 1 dt 1
set key outside right top box opaque samplen 3 spacing 1.1 width 2
set border lw 1
set tics nomirror
set mxtics 2
colors = "#1f77b4 #ff7f0e #2ca02c #d62728 #9467bd #8c564b #e377c2 #17becf #bcbd22 #7f7f7f"
color(i) = word(colors, (i - 1) % 10 + 1)
# 1-2-5 tics on logarithmic latency axes (set ytics @ticks125; those in range are drawn)
ticks125 = "(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)"
