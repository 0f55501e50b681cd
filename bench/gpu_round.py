"""Where a depth-wise GPU round's time goes, float against quantised trees in one process.

    python bench/gpu_round.py [--rows 10000000] [--rounds 30] [--reps 2] [--timing-only]
                              [--trace-dir DIR] [--modes float,quantised,float-serial,...]

A mode ending in "-serial" trains with the backend's `next_round` hint ignored: no tree is
launched ahead of its round (`CUDABackend._launch_next_tree`), the path before it, in the
same process as the modes that launch them.

1. Wall time per round, the two modes alternating (--reps times each, same process and
   data): the steady rate (median interval between the ends of rounds 3.., from a
   callback), `bench/gpu.py`'s figure ((train - ingest) / rounds, set-up and release
   included) and the set-up alone (ingest left out; the first round included).
2. Per mode (unless --timing-only), a torch.profiler trace of five rounds with host ranges
   (`record_function` around the boosting loop's, the grower's and the backend's calls):
   the device's busy time a round and every stretch the device idles, charged to the host
   range running when it began and to the one that launched the work ending it, over
   rounds 1-3 (round 0 allocates the run's buffers). Traces go to --trace-dir.
3. Per mode, the host's Python by own time (cProfile, 8 rounds).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gzip
import io
import json
import pstats
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "shared" / "bench"), str(HERE.parent.parent / "shared" / "bench")]

# (module, class, method) wrapped in host ranges while tracing
_RANGES = (
    ("histboost.training", "_Training", ("boost_round", "evaluate")),
    ("histboost.tree.grower", "TreeGrower", ("grow", "_grow_depthwise", "_finish", "_split_nodes")),
    ("histboost.kernels.cuda.backend", "CUDABackend", (
        "compute_gradients", "gradient_bounds", "begin_tree", "build_histograms", "plan_levels",
        "histogram_totals", "find_best_splits", "split_and_search", "apply_splits",
        "update_margin", "_launch_next_tree")),
    ("histboost.kernels.cuda.ahead", "LevelPlan", ("launch", "launch_leaves", "leaves_match",
                                                   "step")),
    ("histboost.kernels.cuda.ahead", "PinnedBlocks", ("block",)),
    ("histboost.booster", "Booster", ("append_round",)),
)


def _annotate() -> None:
    import importlib

    import torch

    def wrap(name, fn):
        @functools.wraps(fn)
        def inner(*a, **k):
            with torch.profiler.record_function(name):
                return fn(*a, **k)
        return inner

    for mod, cls, methods in _RANGES:
        c = getattr(importlib.import_module(mod), cls)
        for m in methods:
            setattr(c, m, wrap(f"{cls}.{m}", getattr(c, m)))


def _idle(trace: dict) -> dict:
    """Device busy time and idle stretches of a Chrome trace, charged to host ranges."""
    ev = trace["traceEvents"]
    gpu = sorted((e["ts"], e["ts"] + e["dur"], e.get("args", {}).get("correlation"), e["name"])
                 for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy",
                                                                         "gpu_memset"))
    ranges = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in ev
              if e.get("ph") == "X" and e.get("cat") == "user_annotation"]
    launch = {e.get("args", {}).get("correlation"): e["ts"] for e in ev
              if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")}
    rounds = sorted((a, b) for a, b, n in ranges if n == "_Training.boost_round")

    def inner(t):
        best = None
        for a, b, n in ranges:
            if a <= t <= b and (best is None or a >= best[0]):
                best = (a, b, n)
        return best[2] if best else "-"

    out = {"rounds": []}
    charged = defaultdict(float)
    for i, (r0, _) in enumerate(rounds):
        r1 = rounds[i + 1][0] if i + 1 < len(rounds) else None
        if r1 is None:
            break
        if i == 0:  # the run's first round allocates its buffers
            continue
        ks = [g for g in gpu if r0 <= g[0] < r1]
        busy = 0.0
        end = r0
        gaps = []
        for a, b, corr, name in ks:
            if a > end + 5:
                gaps.append((end, a, corr, name))
            busy += max(0.0, b - max(a, end))
            end = max(end, b)
        kernels = defaultdict(float)
        for a, b, _, name in ks:
            kernels[name[:50]] += b - a
        out["rounds"].append({"wall_ms": (r1 - r0) / 1e3, "busy_ms": busy / 1e3,
                              "kernels_ms": {k: round(v / 1e3, 3) for k, v in sorted(
                                  kernels.items(), key=lambda kv: -kv[1])[:14]}})
        for a, b, corr, name in gaps:
            key = f"{inner(a)} -> {inner(launch.get(corr, b))} ({name[:28]})"
            charged[key] += (b - a) / 1e3
    n = max(1, len(out["rounds"]))
    out["idle_ms_a_round"] = {k: round(v / n, 3) for k, v in sorted(
        charged.items(), key=lambda kv: -kv[1])[:30]}
    return out


def _sync(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--modes", default="float,quantised")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--timing-only", action="store_true", help="the wall times alone")
    a = ap.parse_args()
    import torch
    from _common import round_stamps
    from synth import higgs_like
    from torch.profiler import ProfilerActivity, profile

    import histboost

    X, y = higgs_like(a.rows, seed=0)
    d = histboost.Dataset(X, label=y, max_bin=256)
    base = {"objective": "binary:logistic", "device": "cuda", "max_depth": 8,
            "learning_rate": 0.1, "max_bin": 256}
    modes = {m: {**base, "quantized_grad": m.split("-")[0] == "quantised"}
             for m in a.modes.split(",")}
    from histboost.kernels.cuda.backend import CUDABackend
    plain_hint = CUDABackend.next_round

    def serial(mode: str) -> None:
        """The backend's next-round hint ignored in "-serial" modes, taken in the others."""
        CUDABackend.next_round = ((lambda self, quantise: None) if mode.endswith("-serial")
                                  else plain_hint)

    small = histboost.Dataset(X[:20_000], label=y[:20_000], max_bin=256)
    for p in modes.values():
        histboost.train(p, small, 2, verbose_eval=False)
    print("== wall time a round (ms), modes alternating")
    for rep in range(a.reps):
        for m, p in modes.items():
            serial(m)
            s = round_stamps()
            t0 = time.perf_counter()
            b = histboost.train(p, d, a.rounds, verbose_eval=False, callbacks=[s])
            _sync(torch)
            t1 = time.perf_counter()
            ingest = b.timings.get("binning", 0.0)
            per = 1e3 * np.diff(s.t)[2:]
            print(f"{m} rep {rep}: steady median {np.median(per):.2f} mean {per.mean():.2f} "
                  f"(min {per.min():.2f} max {per.max():.2f}); bench figure "
                  f"{1e3 * (t1 - t0 - ingest) / a.rounds:.2f}; set-up + round 0 "
                  f"{1e3 * (s.t[0] - t0 - ingest):.1f}; after the last round "
                  f"{1e3 * (t1 - s.t[-1]):.1f}; ingest {1e3 * ingest:.0f}", flush=True)
    if a.timing_only:
        return
    _annotate()
    for m, p in modes.items():
        serial(m)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            histboost.train(p, d, 5, verbose_eval=False)
            _sync(torch)
        raw = Path(f"/tmp/trace-{m}.json")
        prof.export_chrome_trace(str(raw))
        trace = json.loads(raw.read_text())
        if a.trace_dir:
            with gzip.open(Path(a.trace_dir) / f"trace-{m}.json.gz", "wt") as f:
                json.dump(trace, f)
        res = _idle(trace)
        print(f"\n== {m}: trace, rounds 1-3")
        for r in res["rounds"]:
            print(f"round: wall {r['wall_ms']:.2f} ms, device busy {r['busy_ms']:.2f} ms")
        print("kernels of the last round (ms):", json.dumps(res["rounds"][-1]["kernels_ms"]))
        print("device idle a round, by (host range when it began -> launching range):")
        for k, v in res["idle_ms_a_round"].items():
            print(f"  {v:.3f}  {k}")
        pr = cProfile.Profile()
        pr.enable()
        histboost.train(p, d, 8, verbose_eval=False)
        _sync(torch)
        pr.disable()
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(28)
        print(f"\n== {m}: host Python, 8 rounds (ingest included), by own time\n"
              + out.getvalue()[-7000:], flush=True)


if __name__ == "__main__":
    main()
