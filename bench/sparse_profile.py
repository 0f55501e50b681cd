"""Where sparse GPU training's time goes (`SparseCUDABackend`): `sparse_like` CSR, best-first
trees, the phases of `Booster.timings` (verbosity 2: device-synchronised) and the device
kernels of a few rounds under torch.profiler, with the peak device memory.

    python bench/sparse_profile.py [--rows 200000] [--cols 100000] [--rounds 20]
        [--leaves 63] [--profile-rounds 3] [--quantized]

Kernels are compiled (two rounds on 20k rows) before anything is timed. The histboost
imported is the first on PYTHONPATH: run it with another checkout first there to time that
one with the same script (A/B in one call).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import synth


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--cols", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--leaves", type=int, default=63)
    ap.add_argument("--profile-rounds", type=int, default=3)
    ap.add_argument("--quantized", action="store_true")
    a = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    import histboost
    X, y = synth().sparse_like(a.rows, seed=0, n_features=a.cols)
    X = X.tocsr()
    params = {"objective": "binary:logistic", "learning_rate": 0.1, "max_depth": 0,
              "max_leaves": a.leaves, "grow_policy": "lossguide", "max_bin": 256,
              "quantized_grad": a.quantized, "device": "cuda"}
    t0 = time.perf_counter()
    histboost.train(params, histboost.Dataset(X[:20_000], label=y[:20_000]), 2,
                    verbose_eval=False)
    print(f"{histboost.__file__}\ncompile + warm-up {time.perf_counter() - t0:.1f} s",
          flush=True)
    d = histboost.Dataset(X, label=y)
    d.construct()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    b = histboost.train(params, d, a.rounds, verbose_eval=False)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    peak = (torch.cuda.max_memory_allocated() - before) / 2**20
    print(f"{a.rows:,} x {a.cols:,}, {a.rounds} rounds, {a.leaves} leaves, quantised "
          f"{a.quantized}: {wall:.2f} s ({1e3 * wall / a.rounds:.1f} ms/round), peak device "
          f"{peak:.0f} MB", flush=True)
    t0 = time.perf_counter()
    b = histboost.train({**params, "verbosity": 2}, d, a.rounds, verbose_eval=False)
    wall2 = time.perf_counter() - t0
    print(f"verbosity 2: {wall2:.2f} s; phases ms/round: "
          f"{ {k: round(1e3 * v / a.rounds, 1) for k, v in b.timings.items()} }", flush=True)
    r = a.profile_rounds
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        histboost.train(params, d, r, verbose_eval=False)
        torch.cuda.synchronize()
    ka = prof.key_averages()
    kernels = sorted((e for e in ka if e.self_device_time_total > 0),
                     key=lambda e: -e.self_device_time_total)
    busy = sum(e.self_device_time_total for e in kernels) / 1e3 / r
    print(f"profiled {r} rounds: device busy {busy:.1f} ms/round")
    print("| kernel / device op | calls/round | ms/round |\n|---|---|---|")
    for e in kernels[:14]:
        print(f"| {e.key[:60]} | {e.count / r:.1f} | {e.self_device_time_total / 1e3 / r:.2f} |")
    print(ka.table(sort_by="self_cpu_time_total", row_limit=10, max_name_column_width=40))
    np.asarray(0)


if __name__ == "__main__":
    main()
