#!/usr/bin/env python3
"""moe-ab.py - two trees' moe-bench results side by side (scripts/gpu-run.sh
moe-ab): BEFORE.csv and AFTER.csv hold the rounds' rows of the same suite,
token counts and candidates, appended in turn. For each (model, tokens,
path, candidate) timed ok under both: every round's median in ms, and
after/before as the ratio of the medians of those medians (> 1: after is
faster); then those one tree alone timed (its space holds them: a new
knob); then per (model, tokens) each tree's best fused time over every
candidate it timed, that candidate, its share of the sized read probe and
the ratio of the two bests.

usage: moe-ab.py BEFORE.csv AFTER.csv. Exit 0, 2 on a file it cannot read."""
import csv
import statistics
import sys


def rows_of(path):
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(x for x in f if not x.startswith("#"))
                if r.get("status") == "ok"]


def main(argv):
    if len(argv) != 3:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    times, probe = {}, {}
    try:
        for tree, path in (("before", argv[1]), ("after", argv[2])):
            for r in rows_of(path):
                key = (r["model"], int(r["tokens"]), r["path"], r["candidate"])
                times.setdefault(key, {}).setdefault(tree, []).append(float(r["median_s"]) * 1e3)
                probe[(r["model"], int(r["tokens"]), tree)] = float(r["read_probe_gbs"] or 0)
                times[key].setdefault("gb", float(r["touched_gbs"]) * float(r["median_s"]))
    except (OSError, KeyError, ValueError) as e:
        print("moe-ab.py: %s" % e, file=sys.stderr)
        return 2
    best, alone = {}, []
    for key in sorted(times):
        t = times[key]
        for tree in ("before", "after"):
            if tree in t and key[2] == "fused":
                m = statistics.median(t[tree])
                b = best.get((key[0], key[1], tree))
                if b is None or m < b[0]:
                    best[(key[0], key[1], tree)] = (m, t["gb"], key[3])
        if "before" not in t or "after" not in t:
            alone.append(key)
            continue
        mb, ma = statistics.median(t["before"]), statistics.median(t["after"])
        print("%s %d tok %s %s | before ms %s | after ms %s | %.3fx" % (
            key[0], key[1], key[2], key[3], " ".join("%.4f" % v for v in t["before"]),
            " ".join("%.4f" % v for v in t["after"]), mb / ma))
    if alone:
        print()
    for key in alone:
        tree = "before" if "before" in times[key] else "after"
        print("%s %d tok %s %s | %s only, ms %s" % (
            key[0], key[1], key[2], key[3], tree,
            " ".join("%.4f" % v for v in times[key][tree])))
    print()
    for (model, tokens) in sorted({(k[0], k[1]) for k in best}):
        if (model, tokens, "before") not in best or (model, tokens, "after") not in best:
            continue
        line = "%s %d tokens:" % (model, tokens)
        for tree in ("before", "after"):
            m, gb, cand = best[(model, tokens, tree)]
            p = probe.get((model, tokens, tree), 0)
            line += " %s best %.4f ms (%.1f%% of the %s probe; %s)" % (
                tree, m, 100.0 * gb / (m * 1e-3) / p if p else 0, tree, cand)
        line += ", %.3fx" % (best[(model, tokens, "before")][0] / best[(model, tokens, "after")][0])
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
