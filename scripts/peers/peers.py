#!/usr/bin/env python3
"""peers.py - the peers of issue 40 timed on an NVIDIA GPU in one process with
one protocol, this project's tuned picks (bench's results) merged in: Marlin's
CUDA kernel (symmetric int4, FP16 scales, group 128, packed by its own
marlin.Layer.pack, built from a copy of MARLIN_SRC with its sm_90 fix),
tinygemm (aten._weight_int4pack_mm, asymmetric int4, group 128) and cuBLAS
FP16 (F.linear), on N x K 4096x14336, 14336x4096, 4096x4096, M 1, 16, 64, 512.
scripts/gpu-peers.sh run calls it after bench; its header gives the protocol
and how bench's differs. By hand:
  python3 scripts/peers/peers.py --marlin-src DIR --out DIR [--samples N]
      [--build-dir DIR] [--mq-csv BENCH.csv --mq-picks PICKS.txt]
Writes OUT/peers.csv and OUT/peers.md (also on stdout). Exit 0 every row ok,
1 a row wrong or in error, 2 bad input or a missing environment (one line).
"""
import argparse
import csv
import itertools
import os
import re
import shutil
import subprocess
import sys

SHAPES = [(4096, 14336), (14336, 4096), (4096, 4096)]  # N x K
MS = [1, 16, 64, 512]
GROUP = 128
QUEUED = 20
WARMUPS = 5
# FP16 output rounds at 2^-11, BF16 at 2^-8 (relative to the largest output):
# a wrong nibble order or scale layout is off by O(1), far above either
TOL = {"fp16": 1e-2, "bf16": 3e-2}
PEERS = ["cublas-fp16", "tinygemm", "marlin"]  # Marlin last: a trap poisons the context
FIELDS = ["gpu", "torch", "cuda", "peer", "M", "N", "K", "median_us_one_launch",
          "median_us_queued", "p10_us", "p90_us", "samples", "max_rel_err", "status",
          "mq_over_marlin", "mq_over_marlin_one", "detail"]
KEY = ("format", "M", "N", "K", "variant", "tile_m", "tile_n", "tile_k", "num_threadgroups",
       "split_k")  # a bench results row's problem and candidate


def fail(msg):
    """Bad input or a missing environment: one line on stderr, exit 2 (the tools' rule)."""
    print("peers: " + msg, file=sys.stderr)
    sys.exit(2)


def summary(samples):
    """Median, p10 and p90 by GSL's quantile of sorted data (harness/stats.c),
    so that the peers' figures are computed exactly as bench computes mq's."""
    s = sorted(samples)

    def q(f):
        d = (len(s) - 1) * f
        i = int(d)
        return s[i] if i + 1 >= len(s) else (1 - (d - i)) * s[i] + (d - i) * s[i + 1]
    return q(0.5), q(0.1), q(0.9)


def ncopies(torch, nbytes):
    """bench's count (mq_cold_copies): enough that the set is twice the L2."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 50 << 20
    return 2 * l2 // nbytes + 2


def time_one_launch(torch, run, rot, n, check):
    """Events around ONE launch on an idle GPU: what bench's cuda backend does.
    rot cycles the weight copies, so every launch reads its weights from DRAM;
    every sample's output is checked after its events (check), since a race
    can spoil some launches and not others."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(n):
        w = next(rot)
        torch.cuda.synchronize()
        e0.record()
        c = run(w)
        e1.record()
        e1.synchronize()
        out.append(e0.elapsed_time(e1) * 1e3)
        check(c)
    return out


def time_queued(torch, run, rot, n, spin, check):
    """Device time of back-to-back launches, as a runtime runs kernels: a spin
    kernel holds the GPU while the host queues QUEUED calls, so no launch
    waits on the host; a sample whose spin ended before the queue was full
    (e0 already passed) is dropped and the spin doubled. spin[0]: cycles,
    kept from call to call; each sample's last output is checked. Returns the
    samples and a note."""
    sleep = getattr(torch.cuda, "_sleep", None)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out, dropped = [], 0
    while len(out) < n:
        torch.cuda.synchronize()
        if sleep:
            sleep(spin[0])
        e0.record()
        for _ in range(QUEUED):
            c = run(next(rot))
        e1.record()
        if sleep and e0.query() and spin[0] < 1 << 34:
            spin[0] *= 2
            dropped += 1
            continue
        e1.synchronize()
        out.append(e0.elapsed_time(e1) * 1e3 / QUEUED)
        check(c)
    return out, ("no spin kernel (torch.cuda._sleep missing): the host may starve the queue"
                 if not sleep else f"{dropped} samples dropped while the spin grew")


def fix_marlin(copy_dir, torch):
    """Marlin's known fix for sm_90 with CUDA 13 (IST-DASLab/marlin issue 40):
    cp_async4_stream's createpolicy L2::evict_first + cp.async ...L2::cache_hint
    traps (ptxas drops the policy, issue 44), so the copy loses the hint and
    keeps the plain cp.async.cg. Applied to the build copy only. And where this
    torch no longer defines AT_ERROR, marlin_cuda.cpp's AT_ERROR(...) becomes
    the equivalent TORCH_CHECK(false, ...). Returns the edits made."""
    cu = os.path.join(copy_dir, "marlin_cuda_kernel.cu")
    text = open(cu).read()
    pat = re.compile(r'"\s*\.reg \.b64 p;\\n"\s*"\s*createpolicy\.fractional\.L2::evict_first'
                     r'\.b64 p, 1\.0;"\s*"\s*cp\.async\.cg\.shared\.global\.L2::cache_hint'
                     r' \[%0\], \[%1\], %2, p;\\n"')
    text, n = pat.subn(r'"   cp.async.cg.shared.global [%0], [%1], %2;\\n"', text)
    if n != 1:
        raise RuntimeError(f"the sm_90 fix matched {n} times, not once: is MARLIN_SRC at 2f6d7c1?")
    open(cu, "w").write(text)
    edits = ["cp_async4_stream without the L2 evict_first policy (IST-DASLab/marlin#40)"]
    exc = os.path.join(os.path.dirname(torch.__file__), "include", "c10", "util", "Exception.h")
    if os.path.exists(exc) and "define AT_ERROR" not in open(exc).read():
        cpp = os.path.join(copy_dir, "marlin_cuda.cpp")
        text = open(cpp).read().replace("AT_ERROR(", "TORCH_CHECK(false, ")
        open(cpp, "w").write(text)
        edits.append("AT_ERROR -> TORCH_CHECK(false, ...) (this torch lacks AT_ERROR)")
    return edits


def build_marlin(torch, src, build_dir, out_dir):
    """Marlin as setup.py builds it (marlin_cuda.cpp + marlin_cuda_kernel.cu, a
    torch extension named marlin_cuda), from a copy outside the checkout, for
    the device's own architecture. Returns (the marlin module, a note)."""
    from torch.utils import cpp_extension
    copy = os.path.join(build_dir, "src", "marlin")
    os.makedirs(copy, exist_ok=True)
    for f in ("__init__.py", "marlin_cuda.cpp", "marlin_cuda_kernel.cu"):
        shutil.copyfile(os.path.join(src, "marlin", f), os.path.join(copy, f))
    edits = fix_marlin(copy, torch)
    major, minor = torch.cuda.get_device_capability()
    os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
    ext = os.path.join(build_dir, "ext")
    os.makedirs(ext, exist_ok=True)
    try:
        mod = cpp_extension.load(name="marlin_cuda", build_directory=ext, verbose=False,
                                 sources=[os.path.join(copy, "marlin_cuda.cpp"),
                                          os.path.join(copy, "marlin_cuda_kernel.cu")])
    except Exception as e:  # the compiler's whole output goes to a log
        open(os.path.join(out_dir, "marlin-build.log"), "w").write(str(e))
        raise RuntimeError("the build failed (marlin-build.log)") from None
    sys.modules["marlin_cuda"] = mod  # marlin/__init__.py imports it by name
    sys.path.insert(0, os.path.dirname(copy))
    import marlin
    nvcc = os.path.join(cpp_extension.CUDA_HOME or "", "bin", "nvcc")
    try:
        ver = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
        ver = "nvcc " + re.search(r"release [^\n]*", ver).group(0)
    except (OSError, AttributeError):
        ver = "nvcc ?"
    return marlin, f"built by {ver} for sm_{major}{minor}; " + "; ".join(edits)


def setup_cublas(torch, N, K):
    """FP16 weights as an unquantized runtime holds them: [N, K], F.linear."""
    w = (torch.randn(N, K, device="cuda") * 0.02).half()
    copies = [w] + [w.clone() for _ in range(ncopies(torch, w.numel() * 2) - 1)]

    def bind(a):
        return (lambda c: torch.nn.functional.linear(a, c)), a.float()
    return copies, w.float(), bind, "fp16", "torch.nn.functional.linear, FP16"


def tinygemm_packs(torch, q):
    """The weight forms _convert_weight_to_int4pack has taken (innerKTiles 8):
    torch >= 2.5 takes uint8 [N, K/2], the even k in the high nibble; earlier
    ones int32 [N, K]. Tried in this order; the first whose output passes the
    reference check is used (a wrong form fails it, it does not crash)."""
    pack = torch.ops.aten._convert_weight_to_int4pack
    yield "uint8 [N, K/2] (torch >= 2.5)", lambda: pack(((q[:, ::2] << 4) | q[:, 1::2])
                                                        .to(torch.uint8).contiguous(), 8)
    yield "int32 [N, K] (torch < 2.5)", lambda: pack(q.contiguous(), 8)


def setup_tinygemm(torch, N, K):
    """Asymmetric int4 as tinygemm reads it: w = (q - 8) * scale + zero per group
    of 128 along K, scale and zero BF16 in one [K/128, N, 2] tensor, activations
    BF16. The packing form is found by the check against the reference."""
    w = torch.randn(N, K, device="cuda").reshape(N, K // GROUP, GROUP)
    lo, hi = w.amin(-1), w.amax(-1)
    scale = ((hi - lo).clamp(min=1e-6) / 15).bfloat16()
    zero = (lo + scale.float() * 8).bfloat16()
    q = ((w - lo[..., None]) / scale.float()[..., None]).round().clamp(0, 15).int()
    ref = ((q.float() - 8) * scale.float()[..., None] + zero.float()[..., None]).reshape(N, K)
    q = q.reshape(N, K)
    sz = torch.stack([scale, zero], -1).transpose(0, 1).contiguous()
    mm = torch.ops.aten._weight_int4pack_mm
    a16 = torch.randn(16, K, device="cuda").bfloat16()
    want = a16.float() @ ref.t()
    tried = []
    for form, make in tinygemm_packs(torch, q):
        try:
            packed = make()
            got = mm(a16, packed, GROUP, sz).float()
            err = ((got - want).abs().max() / want.abs().max()).item()
            if err <= TOL["bf16"]:
                break
            tried.append(f"{form}: max rel err {err:.3g}")
        except Exception as e:  # a form this torch refuses
            tried.append(f"{form}: {str(e).splitlines()[0][:120]}")
    else:
        raise RuntimeError("no packing form passed: " + "; ".join(tried))
    nbytes = packed.numel() * 4 + sz.numel() * 2
    copies = [(packed, sz)] + [(packed.clone(), sz.clone())
                               for _ in range(ncopies(torch, nbytes) - 1)]

    def bind(a):
        ab = a.bfloat16()
        return (lambda c: mm(ab, c[0], GROUP, c[1])), ab.float()
    return copies, ref, bind, "bf16", (f"_weight_int4pack_mm(A bf16, B, 128, scales_and_zeros),"
                                       f" _convert_weight_to_int4pack({form}, innerKTiles=8)")


def setup_marlin(torch, marlin, N, K):
    """Symmetric int4 with FP16 scales, group 128, in Marlin's layout made by its
    own marlin.Layer.pack from a fake-quantized FP16 weight, w = (q - 8) * s
    rounded to FP16 as Marlin's dequantization rounds it."""
    q = torch.randint(0, 16, (N, K), device="cuda")
    s = (torch.rand(K // GROUP, N, device="cuda") * 0.01 + 0.005).half()
    w = (q - 8).half() * s.repeat_interleave(GROUP, 0).t()
    layer = marlin.Layer(K, N, groupsize=GROUP).to("cuda")
    lin = torch.nn.Linear(K, N, bias=False, device="cuda", dtype=torch.half)
    lin.weight.data = w
    layer.pack(lin, s.t())
    b, sc, ws = layer.B, layer.s, layer.workspace
    nbytes = b.numel() * 4 + sc.numel() * 2
    copies = [(b, sc)] + [(b.clone(), sc.clone()) for _ in range(ncopies(torch, nbytes) - 1)]

    def bind(a):
        c = torch.empty(a.shape[0], N, dtype=torch.half, device="cuda")

        def run(cp):
            marlin.mul(a, cp[0], c, cp[1], ws)
            return c
        return run, a.float()
    return copies, w.float(), bind, "fp16", "marlin.mul(A, B, C, s, workspace), Layer.pack"


def measure_peer(torch, peer, setup, n, base, rows):
    """One peer on every shape: per M, the check, then the warm-ups and both
    timings; any error becomes that row's status (a kernel that traps leaves
    the context unusable, which the later rows then say)."""
    spin = [1 << 20]
    for N, K in SHAPES:
        try:
            copies, ref, bind, dt, detail = setup(N, K)
        except Exception as e:
            for M in MS:
                rows.append(dict(base, peer=peer, M=M, N=N, K=K, status="error",
                                 detail=f"setup: {str(e).splitlines()[0][:300]}"))
            continue
        rot = itertools.cycle(copies)  # rotated launch to launch, as bench's next_weights
        for M in MS:
            row = dict(base, peer=peer, M=M, N=N, K=K, detail=detail)
            rows.append(row)
            try:
                run, a_used = bind(torch.randn(M, K, device="cuda").half())
                want = a_used @ ref.t()
                wmax, errs = want.abs().max(), []

                def check(c):  # max |out - ref| / max |ref|, NaN counted as infinite
                    e = ((c.float() - want).abs().max() / wmax).item()
                    errs.append(e if e == e else float("inf"))
                check(run(copies[0]))
                row["max_rel_err"] = f"{errs[0]:.3g}"
                if not errs[0] < 0.5:  # wrong throughout (a layout, not a race): no timing
                    row["status"] = "wrong"
                    continue
                for _ in range(WARMUPS):
                    run(next(rot))
                one = time_one_launch(torch, run, rot, n, check)
                que, note = time_queued(torch, run, rot, n, spin, check)
                med, p10, p90 = summary(one)
                qmed = summary(que)[0]
                bad = sum(e > TOL[dt] for e in errs)
                how = "every one" if bad == len(errs) else "intermittent: a race"
                row.update(max_rel_err=f"{max(errs):.3g}", detail=f"{detail}; {len(copies)}"
                           f" copies; {len(errs)} outputs checked; {note}")
                if bad:  # the rule: a wrong peer gets no time (the run's are in the detail)
                    row.update(status="wrong", detail=f"{row['detail']}; {bad} of {len(errs)}"
                               f" outputs wrong ({how}); times of this run, not valid: one"
                               f" launch {med:.2f} us, queued {qmed:.2f} us")
                    continue
                row.update(median_us_one_launch=f"{med:.2f}", p10_us=f"{p10:.2f}",
                           p90_us=f"{p90:.2f}", median_us_queued=f"{qmed:.2f}", samples=n,
                           status="ok")
            except Exception as e:
                row.update(status="error", detail=f"{detail}; {str(e).splitlines()[0][:300]}")
        del copies, ref, rot
        try:
            torch.cuda.empty_cache()
        except Exception:  # a context a trap left unusable: the next rows say so
            pass


def merge_mq(picks_path, csv_path, base, rows):
    """mq's rows from bench's results: per pick (format M N K variant tm tn tk
    tg sk level, from the table's lookup) the matching row; its median, p10
    and p90 recomputed from its samples as the peers' are. bench measured
    either its launches queued behind a spin kernel (the cuda backend's
    default, MQ_CUDA_TIMING=queued: the device time) or, with
    MQ_CUDA_TIMING=idle, one launch on an idle GPU: the median goes in that
    column. A queued row's idle_s (schema 2: the median of a few launches on
    an idle GPU after the samples) fills the one-launch column."""
    queued = os.environ.get("MQ_CUDA_TIMING", "queued") != "idle"
    how = ("queued behind a spin kernel; one launch: bench's idle_s (median of 5 on an idle GPU)"
           if queued else "one launch on an idle GPU (MQ_CUDA_TIMING=idle); queued: not measured")
    with open(csv_path) as f:
        bench = list(csv.DictReader(line for line in f if not line.startswith("#")))
    for line in open(picks_path):
        fmt, M, N, K, var, tm, tn, tk, tg, sk, level = line.split()
        pick = f"{var} {tm} {tn} {tk} {tg} {sk}"
        row = dict(base, peer=f"mq-{fmt}", M=int(M), N=int(N), K=int(K), status="missing",
                   detail=f"{pick} (table lookup: {level}); bench --backend cuda, verified"
                          f" against float64 per element; {how}")
        rows.append(row)
        for b in bench:
            if tuple(b[c] for c in KEY) == (fmt, M, N, K, var, tm, tn, tk, tg, sk):
                row["status"] = b["status"]
                if b["status"] != "ok":
                    row["detail"] += "; " + b["error"]
                    continue
                us = [float(x) * 1e6 for x in b["samples_s"].split(";") if x]
                med, p10, p90 = summary(us)
                row.update({"median_us_queued" if queued else "median_us_one_launch": f"{med:.2f}",
                            "p10_us": f"{p10:.2f}", "p90_us": f"{p90:.2f}", "samples": len(us)})
                if queued and b.get("idle_s"):
                    row["median_us_one_launch"] = f"{float(b['idle_s']) * 1e6:.2f}"


def ratios(rows):
    """mq's median over Marlin's at the same shape and with the same timing
    (issue 40's targets): one launch, or queued when mq was timed queued."""
    marlin = {(r["M"], r["N"], r["K"]): r for r in rows if r["peer"] == "marlin"}
    for r in rows:
        m = marlin.get((r["M"], r["N"], r["K"]))
        if r["peer"].startswith("mq-") and m and r.get("status") == m.get("status") == "ok":
            key = "median_us_queued" if r.get("median_us_queued") else "median_us_one_launch"
            r["mq_over_marlin"] = "%.2f" % (float(r[key]) / float(m[key]))
            one = "median_us_one_launch"
            if r.get(one) and m.get(one):  # the one-launch table's ratio
                r["mq_over_marlin_one"] = "%.2f" % (float(r[one]) / float(m[one]))


def markdown(rows, head, notes):
    """The issue's table (one launch, us) and the queued one, peers side by side."""
    at = {(r["peer"], r["M"], r["N"], r["K"]): r for r in rows}

    def cell(peer, M, N, K, key):
        r = at.get((peer, M, N, K), {})
        return r.get(key) or ("n/a" if r.get("status") == "ok" else r.get("status", "-"))
    one, q, ratio = "median_us_one_launch", "median_us_queued", "mq_over_marlin"
    # mq's columns go with the timing bench used (merge_mq): one table has them
    mq_queued = any(r.get(q) for r in rows if r["peer"].startswith("mq-"))
    mq_one = any(r.get(one) for r in rows if r["peer"].startswith("mq-"))
    names = ["Marlin", "tinygemm", "cuBLAS FP16"]
    with_mq = ["mq fp4", "Marlin", "mq fp4 / Marlin", "mq u4", "mq u4 / Marlin", "tinygemm",
               "cuBLAS FP16"]

    def cols(k, mq, rk=ratio):
        peers = [("marlin", k), ("tinygemm", k), ("cublas-fp16", k)]
        return [("mq-fp4", k), peers[0], ("mq-fp4", rk), ("mq-u4", k), ("mq-u4", rk),
                peers[1], peers[2]] if mq else peers
    tables = [("One launch on an idle GPU (median us; mq: bench's idle_s, a median of 5):"
               if mq_queued and mq_one else "One launch on an idle GPU (median us):",
               with_mq if mq_one else names,
               cols(one, mq_one, "mq_over_marlin_one" if mq_queued else ratio)),
              (f"Queued back to back ({QUEUED} launches between two events for the peers; "
               "mq: bench with MQ_CUDA_TIMING=queued) (median us per launch):"
               if mq_queued else f"Queued back to back, {QUEUED} launches between two events"
               " (median us per launch; bench timed mq as one launch):",
               with_mq if mq_queued else names, cols(q, mq_queued))]
    out = [head]
    for title, names, cols in tables:
        out += ["", title, "", "| N x K | M | " + " | ".join(names) + " |",
                "|" + " --- |" * (len(names) + 2)]
        out += [f"| {N} x {K} | {M} | " + " | ".join(cell(p, M, N, K, k) for p, k in cols) + " |"
                for N, K in SHAPES for M in MS]
    return "\n".join(out + [""] + [f"- {n}" for n in notes]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--marlin-src", required=True, help="a Marlin checkout (at 2f6d7c1)")
    ap.add_argument("--out", required=True, help="directory for peers.csv and peers.md")
    ap.add_argument("--samples", type=int, default=50, help="samples per figure (default 50)")
    ap.add_argument("--build-dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                        "mq-peers"), help="Marlin's build copy")
    ap.add_argument("--mq-csv", help="bench's results of mq's picks")
    ap.add_argument("--mq-picks", help="the picks: format M N K variant tm tn tk tg sk level")
    ap.error = fail  # one line, exit 2, as every bad input here
    a = ap.parse_args()
    if not 1 <= a.samples <= 4096:
        fail(f"--samples: '{a.samples}' is out of range (1 to 4096)")
    if bool(a.mq_csv) != bool(a.mq_picks):
        fail("--mq-csv and --mq-picks go together")
    for f in ("__init__.py", "marlin_cuda.cpp", "marlin_cuda_kernel.cu"):
        if not os.path.isfile(os.path.join(a.marlin_src, "marlin", f)):
            fail(f"no Marlin checkout at '{a.marlin_src}' (marlin/{f} missing)")
    for f in (a.mq_csv, a.mq_picks):
        if f and not os.path.isfile(f):
            fail(f"'{f}': no such file")
    try:
        import torch
    except ImportError:
        fail("no PyTorch for " + sys.executable)
    if not torch.cuda.is_available():
        fail(f"torch {torch.__version__} sees no CUDA device")
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # the FP32 references stay FP32
    base = dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__,
                cuda=torch.version.cuda)
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) >> 20
    rows, marlin = [], None
    try:
        marlin, note = build_marlin(torch, a.marlin_src, a.build_dir, a.out)
        note = "Marlin (IST-DASLab/marlin 2f6d7c1) " + note
    except Exception as e:
        note = f"Marlin: {e}"
    notes = [note]
    for peer in PEERS:
        if peer == "marlin" and not marlin:
            rows += [dict(base, peer=peer, M=M, N=N, K=K, status="error", detail=note)
                     for N, K in SHAPES for M in MS]
            continue
        setup = {"cublas-fp16": lambda N, K: setup_cublas(torch, N, K),
                 "tinygemm": lambda N, K: setup_tinygemm(torch, N, K),
                 "marlin": lambda N, K: setup_marlin(torch, marlin, N, K)}[peer]
        measure_peer(torch, peer, setup, a.samples, base, rows)
    tg = [r["detail"].split(";")[0] for r in rows if r["peer"] == "tinygemm" and
          r.get("status") == "ok"]
    notes.append("tinygemm: " + (tg[0] if tg else "no row ran"))
    if a.mq_csv:
        merge_mq(a.mq_picks, a.mq_csv, base, rows)
    ratios(rows)
    with open(os.path.join(a.out, "peers.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS, restval="", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    md = markdown(rows, f"{base['gpu']}, torch {base['torch']} (CUDA {base['cuda']}), "
                  f"{a.samples} samples per figure, weights rotated past the {l2} MiB L2",
                  notes)
    open(os.path.join(a.out, "peers.md"), "w").write(md)
    sys.stdout.write(md)
    bad = [r for r in rows if r.get("status") != "ok"]
    for r in bad:
        print(f"peers: {r['peer']} M={r['M']} N={r['N']} K={r['K']}: {r.get('status')}: "
              f"{r.get('detail', '')}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
