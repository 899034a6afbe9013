#!/usr/bin/env python3
"""moe-trace.py - where an MoE block's device time goes, from a CUDA kernel
trace of moe-bench --backend cuda: Nsight Systems' (`nsys stats -r
cuda_gpu_trace -f csv`; its columns "Start (ns)", "Duration (ns)", "GrdX",
"GrdY", "GrdZ", "Name"), or where the machine has no nsys, Nsight Compute's
(`ncu --csv --print-units base --metrics gpu__time_duration.sum`: each
kernel run alone, so durations only, no gaps).

A block run is the kernels from one moe_route up to its moe_combine (the
fused blocks) or moe_weighted_sum (the unfused baseline). Consecutive runs
with the same kernels, grids and threadgroup sizes are one kind (moe-bench
runs a candidate's runs one after another, so a kind is a candidate at one
token count; two candidates that differ only in what neither shows, as the
seed block's fuse_gate_up, and come one after the other would be pooled).
For each kind it prints how many runs the trace holds, the median time
from the route's start to the last kernel's end, and per kernel its median
duration and the median gap before it (the previous kernel's end to its
start: the launch and drain between dispatches, since moe-bench queues a
block's dispatches back to back). Under ncu only the kernels its filter
names are traced: the unfused baseline's dense kernels are not, so its
"in kernels" is its glue's alone.

usage: moe-trace.py TRACE.csv [MIN_RUNS]   (MIN_RUNS: kinds with fewer runs
are left out, default 5). Exit 0, 2 on a file it cannot read."""
import csv
import statistics
import sys

ENDS = ("moe_combine", "moe_weighted_sum")


def short(name):
    """The MSL function of a backend entry point (mq_cuda_entry_F)."""
    name = name.split("(")[0]
    return name[len("mq_cuda_entry_"):] if name.startswith("mq_cuda_entry_") else name


def runs_of(rows):
    """The block runs of a time-ordered kernel list: lists of
    (name, grid, start, end)."""
    runs, cur = [], None
    for r in rows:
        if r[0] == "moe_route":
            cur = [r]
        elif cur is not None:
            cur.append(r)
            if r[0] in ENDS:
                runs.append(cur)
                cur = None
    return runs


def read_nsys(d, rows):
    if not d.get("Name") or not d.get("GrdX"):
        return  # memory copies and sets
    start = int(float(d["Start (ns)"]))
    grid = "%sx%sx%s/%sx%sx%s" % (d["GrdX"], d["GrdY"], d["GrdZ"], d["BlkX"], d["BlkY"], d["BlkZ"])
    rows.append((short(d["Name"]), grid, start, start + int(float(d["Duration (ns)"]))))


def read_ncu(d, rows):
    """ncu's rows in launch order, laid end to end (start = the previous
    end: its kernels ran one at a time, so there is no gap to report)."""
    if d.get("Metric Name") != "gpu__time_duration.sum":
        return
    grid = "/".join("x".join(v.strip() for v in d[f].strip("()").split(","))
                    for f in ("Grid Size", "Block Size"))
    start = rows[-1][3] if rows else 0
    rows.append((short(d["Kernel Name"]), grid, start,
                 start + int(float(d["Metric Value"].replace(",", "")))))


def main(argv):
    if len(argv) < 2:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    try:
        min_runs = int(argv[2]) if len(argv) > 2 else 5
        with open(argv[1], newline="") as f:
            lines = f.readlines()
        quoted = [x for x in lines if x.startswith('"')]
        lines = quoted or lines  # (ncu prints its log lines among the quoted rows)
        rows, ncu = [], False
        for d in csv.DictReader(lines):
            ncu = "Kernel Name" in d
            (read_ncu if ncu else read_nsys)(d, rows)
    except (OSError, KeyError, ValueError) as e:
        print("moe-trace.py: %s: %s" % (" ".join(argv[1:]), e), file=sys.stderr)
        return 2
    if not ncu:
        rows.sort(key=lambda r: r[2])
    kinds = []  # (key, runs) of consecutive runs with one key
    for run in runs_of(rows):
        key = tuple((k[0], k[1]) for k in run)
        if kinds and kinds[-1][0] == key:
            kinds[-1][1].append(run)
        else:
            kinds.append((key, [run]))
    for key, runs in kinds:
        if len(runs) < min_runs:
            continue
        span = statistics.median((r[-1][3] - r[0][2]) / 1e3 for r in runs)
        busy = statistics.median(sum(k[3] - k[2] for k in r) / 1e3 for r in runs)
        if ncu:
            print("%d runs: %.2f us in kernels, each run alone (ncu)" % (len(runs), busy))
        else:
            print("%d runs: %.2f us route start to last end, %.2f us in kernels (%.0f%%)"
                  % (len(runs), span, busy, 100.0 * busy / span if span else 0.0))
        for i, (name, grid) in enumerate(key):
            dur = statistics.median((r[i][3] - r[i][2]) / 1e3 for r in runs)
            gap = statistics.median((r[i][2] - r[i - 1][3]) / 1e3 for r in runs) if i else 0.0
            print("  %-28s grid/block %-22s %8.2f us" % (name, grid, dur)
                  + ("" if ncu else "  gap before %6.2f us" % gap))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
