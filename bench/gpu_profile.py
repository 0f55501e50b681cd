"""Where the GPU engine's time goes: a few rounds of each grow policy on `higgs_like` under
torch.profiler (device kernels by self CUDA time, host operators by self CPU time).

    python bench/gpu_profile.py [--rows 10000000] [--rounds 10] [--policies lossguide]
        [--float]

--float: fixed-point gradients as bench/gpu.py's unquantised configurations (default
quantised). Each policy also prints the grower's own host time per tree (Python outside the
backend's calls: the device idles through it unless levels planned ahead keep it busy).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "shared" / "bench"), str(HERE.parent.parent / "shared" / "bench")]


def _trace(histboost, params: dict, d, path: str, name: str) -> None:
    """A Chrome trace of two rounds (host gaps between kernels, per level), and the host's
    Python time per function over five rounds (cProfile, by own time)."""
    import cProfile
    import gzip
    import io
    import pstats

    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        histboost.train(params, d, 2, verbose_eval=False)
        torch.cuda.synchronize()
    raw = f"{path}.tmp.json"
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
        dst.write(src.read())
    Path(raw).unlink()
    pr = cProfile.Profile()
    pr.enable()
    histboost.train(params, d, 5, verbose_eval=False)
    torch.cuda.synchronize()
    pr.disable()
    out = io.StringIO()
    pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(35)
    print(f"\n== host Python, {name}, 5 rounds (ingest included), by own time\n"
          + out.getvalue()[-9000:])


class _GrowerClock:
    """Wall seconds in `TreeGrower.grow`, split into the backend's calls made from it and
    the grower's own Python."""

    CALLS = ("begin_tree", "build_histograms", "histogram_totals", "plan_levels",
             "find_best_splits", "apply_splits", "split_and_search")

    def __init__(self) -> None:
        from histboost.kernels.cuda.backend import CUDABackend
        from histboost.tree.grower import TreeGrower
        self.own = self.calls = 0.0
        self._growing = False
        grow = TreeGrower.grow

        def timed_grow(*args, **kwargs):
            self._growing = True
            t0, c0 = time.perf_counter(), self.calls
            try:
                return grow(*args, **kwargs)
            finally:
                self._growing = False
                self.own += time.perf_counter() - t0 - (self.calls - c0)
        TreeGrower.grow = timed_grow
        for name in self.CALLS:
            setattr(CUDABackend, name, self._timed_call(getattr(CUDABackend, name)))

    def reset(self) -> None:
        self.own = self.calls = 0.0

    def _timed_call(self, fn):
        def timed(*args, **kwargs):
            if not self._growing:
                return fn(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.calls += time.perf_counter() - t0
        return timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--policies", default="depthwise,lossguide",
                    help="grow policies profiled, comma-separated")
    ap.add_argument("--float", action="store_true",
                    help="fixed-point gradients (quantized_grad off)")
    ap.add_argument("--trace", help="write a gzipped Chrome trace of two rounds of the first "
                    "policy "
                    "here, and a Python profile of the host side beside the tables")
    a = ap.parse_args()
    import torch
    from synth import higgs_like
    from torch.profiler import ProfilerActivity, profile

    import histboost
    X, y = higgs_like(a.rows, seed=0)
    policies = {"depthwise": {"grow_policy": "depthwise", "max_depth": 8},
                "lossguide": {"grow_policy": "lossguide", "max_leaves": 255, "max_depth": 0}}
    clock = _GrowerClock()
    for name in a.policies.split(","):
        policy = policies[name]
        p = {"objective": "binary:logistic", "device": "cuda", "quantized_grad": not a.float,
             **policy}
        d = histboost.Dataset(X, label=y)
        histboost.train(p, histboost.Dataset(X[:20_000], label=y[:20_000]), 2,
                        verbose_eval=False)
        rounds = a.rounds if policy["grow_policy"] == "depthwise" else max(1, a.rounds // 4)
        t0 = time.perf_counter()
        clock.reset()
        plain = histboost.train(p, d, rounds, verbose_eval=False)
        torch.cuda.synchronize()
        wall = 1e3 * (time.perf_counter() - t0 - plain.timings.get("binning", 0.0)) / rounds
        print(f"\n== {name}: grower host time outside backend calls "
              f"{1e3 * clock.own / rounds:.2f} ms/tree, in backend calls "
              f"{1e3 * clock.calls / rounds:.2f} ms/tree (wall, unsynchronised)")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            histboost.train(p, d, rounds, verbose_eval=False)
            torch.cuda.synchronize()
        b = histboost.train({**p, "verbosity": 2}, d, rounds, verbose_eval=False)
        ka = prof.key_averages()
        # ingest (the raw matrix's upload from pageable memory, binning) is left out
        kernels = sorted((e for e in ka if e.self_device_time_total > 0
                          and "Pageable" not in e.key and "bin_matrix" not in e.key),
                         key=lambda e: -e.self_device_time_total)
        busy = sum(e.self_device_time_total for e in kernels) / 1e3 / rounds
        print(f"\n== {policy['grow_policy']}, {rounds} rounds: {wall:.2f} ms/round (wall, "
              f"unprofiled), device busy {busy:.2f} ms/round, idle (host) "
              f"{wall - busy:.2f} ms/round")
        print("phases at verbosity 2 (device-synchronised; ms/round): "
              f"{ {k: round(1e3 * v / rounds, 2) for k, v in b.timings.items()} }")
        print("| kernel / device op | calls/round | ms/round |\n|---|---|---|")
        for e in kernels[:16]:
            print(f"| {e.key[:60]} | {e.count / rounds:.1f} | "
                  f"{e.self_device_time_total / 1e3 / rounds:.3f} |")
        print(ka.table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=50))
        if a.trace and name == a.policies.split(",")[0]:
            _trace(histboost, p, d, a.trace, name)
        del d
    np.asarray(0)


if __name__ == "__main__":
    main()
