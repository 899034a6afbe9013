#!/usr/bin/env python3
"""search-vs-kerneltuner.py - the tuner's search against Kernel Tuner's strategies.

What: replays the tuner's guided and random searches on stored measurements
(build/tune --replay: nothing is timed) and runs Kernel Tuner's search
strategies in its simulation mode on the same spaces, then prints a markdown
summary. A space is one problem (chip, backend, format, M, N, K, group) of a
results file; its candidates are its distinct (variant, tile_m, tile_n,
tile_k, num_threadgroups, split_k), each timed by its fastest ok row. For
Kernel Tuner each space becomes a cache file holding every candidate, and a
strategy "evaluates" a configuration by looking it up: simulation mode,
https://kerneltuner.github.io/kernel_tuner/stable/cache_files.html. In that
file the candidates are the only legal configurations (a restriction), times
are in ms (Kernel Tuner's unit), and a candidate with no ok row is stored as
Kernel Tuner stores a failed one ("__error__": "RuntimeFailedConfig"): picking
it costs an evaluation and it is never the best. An evaluation is what Kernel
Tuner counts as one: the first time a configuration is served.
Both sides get a budget of 80 evaluations and seeds 1..S (Kernel Tuner's
strategies draw from Python's and numpy's global generators, seeded before
each run; see init_worker for the one generator 1.4.0 leaves unseeded) and are
scored alike: regret after b evaluations = best found / the space's best - 1;
evaluations until within 3% and 1% of the best.

Why: to know whether the guided search earns its keep against a general
purpose autotuner on our own kernels' spaces, with the same data and budget.

Setup (Kernel Tuner 1.4.0 in a venv, run the script with its python):
  python3 -m venv .venv-kt && .venv-kt/bin/pip install kernel-tuner==1.4.0
  .venv-kt/bin/python scripts/search-vs-kerneltuner.py --seeds 20 --jobs 2
After a change to the tuner's search, --kt-trace takes Kernel Tuner's side from
an earlier run's kt-trace.csv.gz (it has not changed) and replays only mq's.
Cost, default files and strategies: about 16 s of one core per seed, 40% of
it tune's replay (--jobs spreads only Kernel Tuner's share); --strategies all
makes Kernel Tuner's share about 5 times longer.
"""
import argparse
import csv
import datetime
import gzip
import importlib.metadata
import json
import math
import multiprocessing
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

CHECKS = (5, 10, 15, 20, 40, 80)  # the regret checkpoints, as tune --replay's
SHOWN = (10, 20, 40, 80)
BUDGET = 80
PARAMS = ("variant", "tile_m", "tile_n", "tile_k", "num_threadgroups", "split_k")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_REV = "64ff102"  # the raw results left the tree at this commit
# (chip, path, the commit to read it at, and for a host the directory whose
# chip.csv (at that commit) describes it: the 16-core CPU host "devcpu" or the
# 2-core VM "host")
DEFAULT_FILES = (("h100", "results/h100/exhaustive/tune-results.csv", DEFAULT_REV, None),
                 ("h100", "results/h100/grid/check-results.csv", DEFAULT_REV, None),
                 ("h100", "results/h100/unseen.csv", DEFAULT_REV, None),
                 ("h200", "results/h200/exh-check.csv", DEFAULT_REV, None),
                 ("h200", "results/h200/unseen.csv", DEFAULT_REV, None),
                 ("h200", "results/h200/unseen-u4.csv", DEFAULT_REV, None),
                 ("host", "results/devcpu/grid/check-results.csv", DEFAULT_REV, "results/devcpu"),
                 ("host", "results/host/check-results.csv", DEFAULT_REV, "results/host"),
                 ("host", "results/host/examples/sweep-fp4-4096x14336.csv", DEFAULT_REV,
                  "results/host"))
DEFAULT_KT = ("adaptive_tabu_greywolf", "bayes_opt", "random_sample")
# Kernel Tuner 1.4.0's single-objective strategies that take max_fevals and
# need nothing beyond its own dependencies (left out: brute_force, which
# refuses max_fevals; skopt and pyatf_strategies, which need scikit-optimize
# and pyATF; nsga2 and nsga3, multi-objective)
ALL_KT = ("adaptive_tabu_greywolf", "basinhopping", "bayes_opt", "diff_evo", "dual_annealing",
          "firefly_algorithm", "genetic_algorithm", "greedy_ils", "greedy_mls", "hybrid_vndx",
          "minimize", "mls", "ordered_greedy_mls", "pso", "random_sample", "simulated_annealing")
TRACE_COLS = (["strategy", "seed", "backend", "format", "M", "N", "K", "group", "candidates",
               "best_s"] + [f"regret_{c}" for c in CHECKS] + ["evals_3pct", "evals_1pct"])


def git_show(rev, path):
    """A file's text at a commit, following symbolic links in any component of
    its path (a published table set's chip.csv -> tables/current/chip.csv,
    and tables/current -> a generation)."""
    parts, done = path.split("/"), []
    while parts:
        done.append(parts.pop(0))
        here = "/".join(done)
        mode = subprocess.run(["git", "-C", REPO, "ls-tree", rev, here], capture_output=True,
                              text=True, check=True).stdout.split(" ")[0]
        if mode == "120000":  # a link: its text is the target, relative to its directory
            target = subprocess.run(["git", "-C", REPO, "show", f"{rev}:{here}"],
                                    capture_output=True, text=True, check=True).stdout.strip()
            parts = target.split("/") + parts
            done.pop()
    return subprocess.run(["git", "-C", REPO, "show", f"{rev}:{'/'.join(done)}"],
                          capture_output=True, text=True, check=True).stdout


def read_rows(path):
    """The rows of a results file (after its '# mq results, schema N' line)."""
    with open(path, newline="") as f:
        if not f.readline().startswith("# mq results"):
            sys.exit(f"search-vs-kerneltuner: {path}: not a results file")
        return list(csv.DictReader(f))


def load_spaces(chip, path, label, min_ok):
    """The spaces of one file and chip with at least min_ok ok candidates."""
    spaces = {}
    for r in read_rows(path):
        if r["chip"] != chip:
            continue
        key = (label, chip, r["backend"], r["format"], int(r["M"]), int(r["N"]), int(r["K"]),
               int(r["group"]))
        cand = (r["variant"],) + tuple(int(r[p]) for p in PARAMS[1:])
        cands = spaces.setdefault(key, {})
        t = float(r["median_s"]) if r["status"] == "ok" else None
        if t is not None and (cands.get(cand) is None or t < cands[cand]):
            cands[cand] = t
        else:
            cands.setdefault(cand, None)
    out = []
    for key, cands in spaces.items():
        ok = [t for t in cands.values() if t is not None]
        if len(ok) >= min_ok:
            out.append({"key": key, "cands": cands, "best": min(ok)})
    return out


def score(times, best):
    """One search scored as tune --replay scores it: regret at each checkpoint
    (the last best carried past the search's end) and evaluations to 3%/1%
    (0: not within the budget)."""
    found, regret, to3, to1 = math.inf, [], 0, 0
    for e, t in enumerate(times, 1):
        if t is not None and t < found:
            found = t
        to3 = to3 or (e if found <= 1.03 * best else 0)
        to1 = to1 or (e if found <= 1.01 * best else 0)
        if e in CHECKS:
            regret.append(found / best - 1)
    regret += [found / best - 1] * (len(CHECKS) - len(regret))
    return [float("%.6g" % r) for r in regret], to3, to1  # as tune's trace rounds them


def run_mq(files, spaces, args, tmp):
    """Replay tune's guided and random searches on each file and check that its
    spaces are ours (same problems, candidate counts and optimum). Returns
    {search: [(space key, seed, regret, to3, to1)]} and the trace rows."""
    runs, rows = {"mq guided": [], "mq random": []}, []
    for chip, path, label, host_dir in files:
        mine, got, present = {s["key"]: s for s in spaces if s["key"][0] == label}, {}, {}
        for r in read_rows(path):
            if r["chip"] == chip:
                present.setdefault(int(r["group"]), set()).add(r["format"])
        for g, fmts in sorted(present.items()):  # tune replays one group at a time
            trace = os.path.join(tmp, "mq-trace.csv")
            cmd = [args.tune, "--chip", chip, "--replay", path, "--seeds", str(args.seeds),
                   "--min-candidates", str(args.min_candidates), "--evals", str(BUDGET),
                   "--strategy", "guided,random", "--group", str(g),
                   "--formats", ",".join(sorted(fmts)), "--trace", trace]
            cmd += ["--out-dir", host_dir] if chip == "host" else []
            p = subprocess.run(cmd, capture_output=True, text=True)
            if (p.returncode == 2 and "nothing to replay" in p.stderr
                    and not any(k[7] == g for k in mine)):
                continue  # no space in this group on either side
            if p.returncode:
                sys.exit(f"search-vs-kerneltuner: {shlex.join(cmd)}: exit {p.returncode}\n"
                         + p.stderr)
            with open(trace, newline="") as f:
                for r in csv.DictReader(f):
                    key = (label, chip, r["backend"], r["format"]) + tuple(
                        int(r[c]) for c in ("M", "N", "K", "group"))
                    got[key] = (int(r["candidates"]), float(r["best_s"]))
                    runs["mq " + r["strategy"]].append(
                        (key, int(r["seed"]), [float(r[f"regret_{c}"]) for c in CHECKS],
                         int(r["evals_3pct"]), int(r["evals_1pct"])))
                    rows.append(dict(r, chip=chip, file=label))
        here = {k: (len(s["cands"]), s["best"]) for k, s in mine.items()}
        bad = sorted(k for k in set(got) | set(here) if k not in got or k not in here or
                     got[k][0] != here[k][0] or abs(got[k][1] / here[k][1] - 1) > 1e-7)
        if bad:
            sys.exit(f"search-vs-kerneltuner: tune's spaces of {label} are not these "
                     "(candidates, optimum):\n" + "\n".join(
                         f"  {k[2:]}: tune {got.get(k)}, here {here.get(k)}" for k in bad))
    return runs, rows


def write_cache(space, path):
    """Write a space as a Kernel Tuner cache file; returns tune_kernel's arguments for it."""
    chip, fmt, (M, N, K, g) = space["key"][1], space["key"][3], space["key"][4:]
    tune_params = {p: sorted({c[i] for c in space["cands"]}) for i, p in enumerate(PARAMS)}
    cache = {}
    for c in sorted(space["cands"]):
        t = space["cands"][c]
        entry = dict(zip(PARAMS, c))
        entry.update({"time": t * 1e3} if t is not None else {"__error__": "RuntimeFailedConfig"})
        cache[",".join(str(v) for v in c)] = entry
    name = f"mq_{fmt}_M{M}_N{N}_K{K}_g{g}"
    doc = {"device_name": chip, "kernel_name": name, "problem_size": [M, N, K],
           "tune_params_keys": list(PARAMS), "tune_params": tune_params, "objective": "time",
           "cache": cache}
    with open(path, "w") as f:
        f.write(json.dumps(doc))  # compact: ends in "}}}", which KT reads as a closed cache
    return {"kernel_name": name, "kernel_source": "", "problem_size": [M, N, K],
            "arguments": [], "tune_params": tune_params}


def init_worker():
    """A worker's setup: no warnings; and since Kernel Tuner 1.4.0 builds scipy's
    LatinHypercube without a seed (bayes_opt's first sample,
    Searchspace.get_LHS_sample), one that seeds it from numpy's seeded state."""
    import numpy as np
    from scipy.stats import qmc
    import kernel_tuner.strategies.bayes_opt as bayes_opt

    class SeededLatinHypercube(qmc.LatinHypercube):
        def __init__(self, d, **kw):
            kw.setdefault("rng", np.random.randint(2**31))
            super().__init__(d, **kw)

    warnings.simplefilter("ignore")  # Kernel Tuner's and scikit-learn's chatter
    qmc.LatinHypercube = bayes_opt.LatinHypercube = SeededLatinHypercube


def run_space(task):
    """Every chosen Kernel Tuner strategy and seed on one space (a worker)."""
    space, strategies, seeds, path = task
    import numpy as np
    from constraint import FunctionConstraint
    from kernel_tuner import tune_kernel
    kw = write_cache(space, path)
    legal = set(space["cands"])
    out = []
    for st in strategies:
        for seed in range(1, seeds + 1):
            random.seed(seed)
            np.random.seed(seed)
            results, _ = tune_kernel(**kw, restrictions=[FunctionConstraint(lambda *v: v in legal)],
                                     cache=path, simulation_mode=True, strategy=st,
                                     strategy_options={"max_fevals": BUDGET}, quiet=True,
                                     seed=seed)
            order = list(dict.fromkeys(tuple(r[p] for p in PARAMS) for r in results))
            if len(order) > BUDGET or not set(order) <= legal:
                raise RuntimeError(f"{st} seed {seed} on {space['key']}: {len(order)} "
                                   "evaluations or an illegal configuration")
            regret, to3, to1 = score([space["cands"][c] for c in order], space["best"])
            out.append((st, seed, regret, to3, to1, len(order)))
    return out


def run_kt(spaces, args, cache_dir):
    """Run the Kernel Tuner strategies on every space, in --jobs processes. Returns
    {search: [(space key, seed, regret, to3, to1)]} and the trace rows."""
    names = ["%03d-%s-%s-M%d-N%d-K%d-g%d.json" % ((i, s["key"][1], s["key"][3]) + s["key"][4:])
             for i, s in enumerate(spaces)]
    tasks = [(s, args.strategies, args.seeds, os.path.join(cache_dir, name))
             for s, name in zip(spaces, names)]
    runs, rows = {"KT " + st: [] for st in args.strategies}, []
    with multiprocessing.Pool(args.jobs, initializer=init_worker) as pool:
        for i, (s, res) in enumerate(zip(spaces, pool.imap(run_space, tasks)), 1):
            print(f"kernel tuner: space {i}/{len(spaces)} done", file=sys.stderr)
            for st, seed, regret, to3, to1, n in res:
                runs["KT " + st].append((s["key"], seed, regret, to3, to1))
                rows.append(dict(zip(TRACE_COLS, [st, seed, *s["key"][2:], len(s["cands"]),
                                                  "%.9g" % s["best"], *("%.6g" % r for r in regret),
                                                  to3, to1]), chip=s["key"][1], file=s["key"][0],
                            evals=n))
    return runs, rows


def read_kt_trace(path, spaces, args):
    """Kernel Tuner's side from an earlier run's kt-trace.csv(.gz) instead of running it
    (its strategies do not change when the tuner's search does). Every space must be
    there with the same candidate count and best, for seeds 1..--seeds of each
    strategy. Returns what run_kt returns."""
    opener = gzip.open if path.endswith(".gz") else open
    want = {s["key"]: s for s in spaces}
    runs, rows = {}, []
    with opener(path, "rt", newline="") as f:
        for r in csv.DictReader(f):
            key = (r["file"], r["chip"], r["backend"], r["format"], int(r["M"]), int(r["N"]),
                   int(r["K"]), int(r["group"]))
            s = want.get(key)
            if s is None or int(r["seed"]) > args.seeds:
                continue
            if int(r["candidates"]) != len(s["cands"]) or \
                    not math.isclose(float(r["best_s"]), s["best"], rel_tol=1e-6):
                sys.exit(f"search-vs-kerneltuner: {path}: space {key} has "
                         f"{r['candidates']} candidates, best {r['best_s']} s; the rows give "
                         f"{len(s['cands'])}, {s['best']:.9g}")
            regret = [float(r[f"regret_{c}"]) for c in CHECKS]
            runs.setdefault("KT " + r["strategy"], []).append(
                (key, int(r["seed"]), regret, int(r["evals_3pct"]), int(r["evals_1pct"])))
            rows.append(r | {"evals": int(r["evals"])})
    for st, rs in runs.items():
        if len(rs) != len(spaces) * args.seeds:
            sys.exit(f"search-vs-kerneltuner: {path}: {st} has {len(rs)} runs, expected "
                     f"{len(spaces)} spaces x {args.seeds} seeds")
    if not runs:
        sys.exit(f"search-vs-kerneltuner: {path}: no run of these spaces")
    args.strategies = [st[3:] for st in runs]
    return runs, rows


def early_stops(kt_rows):
    """The strategies that stopped before the budget in some run: median and least evaluations."""
    by = {}
    for r in kt_rows:
        by.setdefault(r["strategy"], []).append(r["evals"])
    return [f"{st} {median(v):g} (min {min(v)})" for st, v in by.items() if min(v) < BUDGET]


def median(v):
    """The median (the mean of the middle two for an even count, as GSL's); inf stays inf."""
    return statistics.median(sorted(v))


def table(runs, keep):
    """Table 1 for the spaces keep accepts: median regrets and evals to 3%/1%."""
    head = ["search"] + [f"regret @{c}" for c in SHOWN] + ["evals to 3%", "evals to 1%"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, rs in runs.items():
        rs = [r for r in rs if keep(r[0])]
        regret = [median([r[2][CHECKS.index(c)] for r in rs]) for c in SHOWN]
        evals = [median([r[w] or math.inf for r in rs]) for w in (3, 4)]  # 0: not reached
        cells = ["inf" if math.isinf(x) else f"{100 * x:.1f}%" for x in regret]
        cells += [f"> {BUDGET}" if math.isinf(x) else f"{x:.1f}" for x in evals]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def per_space(rs, k):
    """{space key: median over seeds of the regret at checkpoint index k} of one search."""
    by = {}
    for key, _, regret, _, _ in rs:
        by.setdefault(key, []).append(regret[k])
    return {key: median(v) for key, v in by.items()}


def versus(runs, keys):
    """Table 2: per space, mq guided's median regret against the best KT strategy
    overall (lowest median, then mean, regret over all runs) and against each
    space's own best KT strategy."""
    kt = [n for n in runs if n.startswith("KT ")]
    out = ["| evaluations | best KT strategy overall | mq lower | equal | mq higher | "
           "vs each space's best KT: mq lower | equal | mq higher |", "|" + "---|" * 8]
    for c in SHOWN:
        k = CHECKS.index(c)
        med = {n: per_space(rs, k) for n, rs in runs.items()}
        regrets = {n: [r[2][k] for r in runs[n]] for n in kt}
        best = min(kt, key=lambda n: (median(regrets[n]), statistics.fmean(regrets[n])))
        cells = [str(c), best[3:]]
        for rival in ({s: med[best][s] for s in keys},
                      {s: min(med[n][s] for n in kt) for s in keys}):
            mq = med["mq guided"]
            cells += [str(sum(cmp(mq[s], rival[s]) for s in keys)) for cmp in
                      (lambda a, b: a < b, lambda a, b: a == b, lambda a, b: a > b)]
        out.append("| " + " | ".join(cells) + " |")
    return out


def write_csv(path, rows, cols):
    """Write rows (dicts) with columns cols."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def main():
    """Parse the options, run both sides, print (and keep) the summary."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", action="append", metavar="CHIP:PATH[:DIR]",
                    help="a results file and its chip, and for chip host the directory of "
                         "its chip.csv (repeatable; replaces the default set, "
                         f"which is {len(DEFAULT_FILES)} files at commit {DEFAULT_REV})")
    ap.add_argument("--seeds", type=int, metavar="S", default=20,
                    help="seeds 1..S per space (default 20)")
    ap.add_argument("--min-candidates", type=int, metavar="N", default=100,
                    help="a space needs this many ok candidates (default 100)")
    ap.add_argument("--strategies", metavar="LIST", default=",".join(DEFAULT_KT),
                    help="Kernel Tuner strategies, comma-separated, or all (default %(default)s)")
    ap.add_argument("--jobs", type=int, metavar="N", default=1,
                    help="spaces searched in parallel (default 1)")
    ap.add_argument("--out", metavar="DIR", help="keep the caches, both traces and summary.md")
    ap.add_argument("--kt-trace", metavar="FILE",
                    help="take Kernel Tuner's side from an earlier run's kt-trace.csv(.gz) "
                         "instead of running it (--strategies is then the trace's)")
    ap.add_argument("--tune", metavar="PATH", default=os.path.join(REPO, "build", "tune"),
                    help="the tune binary (default %(default)s)")
    args = ap.parse_args()
    args.strategies = list(ALL_KT) if args.strategies == "all" else args.strategies.split(",")
    from kernel_tuner.interface import strategy_map
    unknown = [s for s in args.strategies if s not in strategy_map]
    if unknown or args.seeds < 1 or args.jobs < 1:
        ap.error(f"bad --strategies {unknown} (Kernel Tuner has {', '.join(strategy_map)})"
                 if unknown else "--seeds and --jobs must be at least 1")
    kt_version = importlib.metadata.version("kernel_tuner")
    if kt_version != "1.4.0":
        print(f"search-vs-kerneltuner: warning: Kernel Tuner {kt_version}, not 1.4.0",
              file=sys.stderr)
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="search-vs-kt-") as tmp:
        files = []
        for spec in args.file or []:
            chip, path, host_dir = (spec.split(":") + [None])[:3]
            if not chip or not path or (chip == "host" and not host_dir):
                ap.error(f"bad --file '{spec}' (expected CHIP:PATH, or host:PATH:DIR)")
            files.append((chip, path, path, host_dir))
        for i, (chip, path, rev, host_dir) in enumerate([] if args.file else DEFAULT_FILES):
            local = os.path.join(tmp, f"{i}-" + os.path.basename(path))
            with open(local, "w") as f:
                f.write(git_show(rev, path))
            if host_dir:  # the host as that run saw it: its chip.csv at the same commit
                chip_dir = os.path.join(tmp, f"{i}-chip", os.path.basename(host_dir))
                os.makedirs(chip_dir)  # named as the machine: the summary groups by it
                with open(os.path.join(chip_dir, "chip.csv"), "w") as f:
                    f.write(git_show(rev, host_dir + "/chip.csv"))
                files.append((chip, local, f"{rev}:{path}", chip_dir))
            else:
                files.append((chip, local, f"{rev}:{path}", None))
        machine = {label: (os.path.basename(d) if chip == "host" else chip)
                   for chip, _, label, d in files}
        spaces = [s for chip, path, label, _ in files
                  for s in load_spaces(chip, path, label, args.min_candidates)]
        if not spaces:
            sys.exit(f"search-vs-kerneltuner: no space with {args.min_candidates} ok candidates")
        mq_runs, mq_rows = run_mq(files, spaces, args, tmp)
        if args.kt_trace:
            kt_runs, kt_rows = read_kt_trace(args.kt_trace, spaces, args)
        else:
            cache_dir = os.path.join(args.out, "caches") if args.out else os.path.join(tmp, "caches")
            os.makedirs(cache_dir, exist_ok=True)
            kt_runs, kt_rows = run_kt(spaces, args, cache_dir)
    runs = {**mq_runs, **kt_runs}
    keys = [s["key"] for s in spaces]
    gpus = ", ".join(sorted({k[1] for k in keys} - {"host"}))
    hosts = sorted({machine[k[0]] for k in keys if k[1] == "host"})
    groups = [(f"GPU ({gpus})", lambda k: k[1] != "host")] + [
        (f"CPU ({h})", lambda k, h=h: k[1] == "host" and machine[k[0]] == h) for h in hosts] + [
              ("all", lambda k: True)]
    md = ["# The tuner's search against Kernel Tuner's strategies", "",
          f"Median over spaces x seeds of the regret (best found / best - 1) after 10 .. {BUDGET} "
          f"evaluations, and of the evaluations until within 3% / 1% of the best "
          f"(> {BUDGET}: beyond the budget). mq: build/tune --replay; KT: Kernel Tuner "
          f"{kt_version}, simulation mode. mq guided starts from the tuner's cost model (its "
          "prior from the chip's description); the KT strategies know nothing but the space.", ""]
    for title, keep in groups:
        n = sum(map(keep, keys))
        if n:
            md += [f"## {title}: {n} spaces", ""] + table(runs, keep) + [""]
    md += ["## Per space: mq guided against Kernel Tuner", "",
           "Spaces where mq guided's median regret over seeds is lower than, equal to or higher "
           "than the KT strategy's: the best one overall at that budget, and each space's own best "
           "(an oracle pick among the strategies run).", ""] + versus(runs, keys) + [""]
    md += ["## Run", "", f"- command: `{shlex.join(sys.argv)}`",
           f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}, "
           f"{time.time() - start:.0f} s",
           f"- {len(keys)} spaces (" + ", ".join(f"{t.split(' ')[0]} {sum(map(k, keys))}"
                                                for t, k in groups[:-1]) +
           f") with >= {args.min_candidates} ok candidates, seeds 1..{args.seeds}, "
           f"budget {BUDGET} evaluations",
           "- files: " + ", ".join(f"{label} ({machine[label]})" for _, _, label, _ in files),
           f"- Kernel Tuner strategies: {', '.join(args.strategies)}" +
           (f" (their runs read from {args.kt_trace})" if args.kt_trace else ""),
           "- evaluations made, median over runs, by the KT strategies that stopped before "
           f"{BUDGET} in some run (their own stopping rule or a space smaller than the budget; "
           "their last best stands at later checkpoints): " + (", ".join(early_stops(kt_rows))
                                                                or "none")]
    text = "\n".join(md) + "\n"
    sys.stdout.write(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        write_csv(os.path.join(args.out, "mq-trace.csv"), mq_rows, ["chip", "file"] + TRACE_COLS)
        write_csv(os.path.join(args.out, "kt-trace.csv"), kt_rows,
                  ["chip", "file"] + TRACE_COLS + ["evals"])
        with open(os.path.join(args.out, "summary.md"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
