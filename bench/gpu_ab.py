"""A/B of the GPU engine between checkouts on one machine, the checkouts alternating.

    python bench/gpu_ab.py --trees branch:/path/a,main:/path/b [--repeats 2] [--rounds 60]
        [--cpus 0-7] [--site /tmp/np] [--launch-clock] [--policies lossguide,...]

Processes of one call have differed by 1-2 ms a depth-wise round with the same package
(`docs/gpu.md`, sessions 10-11), more than the changes being measured, so each checkout runs
in `--repeats` processes, in the order a, b, a, b, ... (each process compiles the kernels
once: about 25 s), every one pinned to the same cores (`--cpus`, through taskset). A process
(`--worker`) times, on `bench/gpu.py`'s cached higgs_like data (written by it, or here when
missing): the root histogram kernel with builds queued back to back, the root read through
the row-index buffer and an eighth of the rows at random through it (quantised pairs, as
`bench/gpu.py`'s histboost-root), then float depth-8 depth-wise and 255-leaf lossguide
training (`bench/gpu.py`'s histboost-depthwise and histboost-lossguide) and quantised
depth-wise training twice each (or those `--policies` names), and each policy's peak
device memory: the steady ms/round (median interval between round ends from round 3 on)
and (train - ingest) / rounds (`Dataset(X)` inside the clock, as `bench/gpu.py` times it),
and per training the trees launched ahead of their round, those taken and the trees whose
margins the device added ahead. With --launch-clock, also the kernel launches a tree and
the host's milliseconds a tree inside
`CudaKernel.launch` over both trainings (`bench/gpu_launch.py`'s `LaunchClock`, about 0.2 us
a launch of its own). The histboost package is the one of the checkout put first on
PYTHONPATH (after `--site`, e.g. the numpy tree the device host needs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _data(a: argparse.Namespace) -> Path:
    """bench/gpu.py's data folder of these sizes, written when missing."""
    from _common import synth
    data = Path(a.data_dir) / f"{a.rows}-{a.test_rows}-0"
    if not (data / "yt.npy").exists():
        data.mkdir(parents=True, exist_ok=True)
        X, y = synth().higgs_like(a.rows + a.test_rows, seed=0)
        for name, arr in (("X", X[:a.rows]), ("y", y[:a.rows]), ("Xt", X[a.rows:]),
                          ("yt", y[a.rows:])):
            np.save(data / f"{name}.npy", arr)
    return data


def _train_ms(histboost, params: dict, X: np.ndarray, y: np.ndarray, rounds: int
              ) -> tuple[float, float]:
    """(steady ms/round, (train - ingest) / rounds in ms) of one training on X, y, timed as
    `bench/gpu.py` times it: `Dataset(X)` and `train` under one clock, less the "binning"
    phase."""
    from _common import round_stamps
    stamps = round_stamps()
    t0 = time.perf_counter()
    d = histboost.Dataset(X, label=y, max_bin=params["max_bin"])
    booster = histboost.train(params, d, rounds, verbose_eval=False, callbacks=[stamps])
    total = time.perf_counter() - t0
    steady = float(np.median(np.diff(stamps.t)[2:]))
    return 1e3 * steady, 1e3 * (total - booster.timings.get("binning", 0.0)) / rounds


def worker(a: argparse.Namespace) -> dict:
    from gpu import _queued_ms
    from gpu_launch import LaunchClock

    import histboost
    from histboost.kernels.backend import make_backend
    from histboost.tree.quantize import make_quantisation
    data = Path(a.worker)
    X = np.ascontiguousarray(np.load(data / "X.npy"))
    y = np.load(data / "y.npy")
    base = {"objective": "binary:logistic", "learning_rate": 0.1, "max_bin": 256,
            "device": "cuda"}
    policies = {"depthwise": {"grow_policy": "depthwise", "max_depth": 8},
                "depthwise_quantised": {"grow_policy": "depthwise", "max_depth": 8,
                                        "quantized_grad": True},
                "lossguide": {"grow_policy": "lossguide", "max_leaves": 255, "max_depth": 0}}
    if a.policies:
        policies = {name: policies[name] for name in a.policies.split(",")}
    warm = histboost.Dataset(X[:20_000], label=y[:20_000], max_bin=256)
    for policy in policies.values():
        histboost.train({**base, **policy}, warm, 2, verbose_eval=False)
    d = histboost.Dataset(X, label=y, max_bin=256).construct()
    out: dict = {}
    be = make_backend("cuda", d.bins, d.bin_mapper.bin_offsets, n_threads=1, label=d.label,
                      weight=None, n_outputs=1, count_rows=False)
    be.compute_gradients("logistic")
    quant = make_quantisation(*be.gradient_bounds(0), 8, 1)
    n = d.bins.shape[0]
    eighth = np.sort(np.random.default_rng(0).choice(n, n // 8, replace=False))
    for name, rows in (("root_ms", None), ("root_via_rows_ms", np.arange(n)),
                       ("eighth_ms", eighth)):
        be.begin_tree(0, rows, quant)
        out[name] = _queued_ms(lambda b=be: b.build_histograms([0]))
    be.release()
    import torch

    from histboost.kernels.cuda.backend import CUDABackend
    ahead = []  # per training: trees launched ahead, taken, margins added ahead and kept
    release = CUDABackend.release

    def counted(self):
        ahead.append([self.trees_ahead_launched, self.trees_ahead_kept,
                      self.margins_kept_ahead])
        return release(self)
    CUDABackend.release = counted
    clock = LaunchClock() if a.launch_clock else None
    for name, policy in policies.items():
        torch.cuda.reset_peak_memory_stats()
        if clock:
            clock.start()
        ahead.clear()
        runs = [_train_ms(histboost, {**base, **policy}, X, y, a.rounds) for _ in range(2)]
        out[f"{name}_ahead"] = list(ahead)
        out[f"{name}_steady"] = [round(r[0], 3) for r in runs]
        out[f"{name}_ms_round"] = [round(r[1], 3) for r in runs]
        out[f"{name}_peak_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        if clock:
            tree = clock.stop(2 * a.rounds)
            out[f"{name}_launches_a_tree"] = tree["launches_a_tree"]
            out[f"{name}_launch_ms_a_tree"] = tree["launch_ms_a_tree"]
            out[f"{name}_us_a_launch"] = tree["us_a_launch"]
            out[f"{name}_packs_a_tree"] = tree["packs_a_tree"]
            out[f"{name}_kernels_a_tree"] = tree["kernels_a_tree"]
            out[f"{name}_packs_by_kernel_a_tree"] = tree["packs_by_kernel_a_tree"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", help="name:path,... of the checkouts")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--test-rows", type=int, default=1_000_000)
    ap.add_argument("--data-dir", default="/tmp/histboost-gpu-bench")
    ap.add_argument("--cpus", default="0-7", help="cores every process is pinned to")
    ap.add_argument("--site", default="", help="prepended to PYTHONPATH before a checkout")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds a process may take")
    ap.add_argument("--launch-clock", action="store_true",
                    help="also the launches a tree and the host's time in them")
    ap.add_argument("--policies", default="",
                    help="depthwise,depthwise_quantised,lossguide: those trained (all)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print("RESULT " + json.dumps(worker(a)), flush=True)
        return
    data = _data(a)
    trees = [t.split(":", 1) for t in a.trees.split(",")]
    pin = ["taskset", "-c", a.cpus] if shutil.which("taskset") and a.cpus else []
    results: dict[str, list] = {name: [] for name, _ in trees}
    for rep in range(a.repeats):
        for name, path in (trees if rep % 2 == 0 else trees[::-1]):
            env = {**os.environ, "PYTHONPATH": ":".join(p for p in (a.site, path) if p)}
            cmd = [*pin, sys.executable, __file__, "--worker", str(data), "--rounds",
                   str(a.rounds), *(["--launch-clock"] if a.launch_clock else []),
                   *(["--policies", a.policies] if a.policies else [])]
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                     timeout=a.timeout)
            except subprocess.TimeoutExpired:
                print(f"{name} (repeat {rep}): over {a.timeout:.0f} s", flush=True)
                continue
            line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
            if res.returncode != 0 or not line:
                print(f"{name} (repeat {rep}): failed\n{res.stderr[-3000:]}", flush=True)
                continue
            r = json.loads(line[0][7:])
            results[name].append(r)
            print(f"{name} (repeat {rep}): {json.dumps(r)}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    keys = ("root_ms", "root_via_rows_ms", "eighth_ms", "depthwise_steady",
            "depthwise_ms_round", "depthwise_peak_mb", "depthwise_quantised_steady",
            "depthwise_quantised_ms_round", "lossguide_steady",
            "lossguide_ms_round", "lossguide_peak_mb")
    if a.launch_clock:
        keys += tuple(f"{p}_{k}" for p in ("depthwise", "lossguide")
                      for k in ("launches_a_tree", "launch_ms_a_tree", "us_a_launch"))
    print(f"\nmedians over processes and runs, {a.rounds} rounds, pinned to cores {a.cpus}")
    print("| checkout | " + " | ".join(keys) + " |\n|---|" + "---|" * len(keys))
    for name, runs in results.items():
        cells = [f"{np.median(np.ravel([r.get(k, np.nan) for r in runs])):.3f}" if runs
                 else "-" for k in keys]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
