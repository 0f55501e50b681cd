"""Where the GPU engine's time goes: a few rounds of each grow policy on `higgs_like` under
torch.profiler (device kernels by self CUDA time, host operators by self CPU time).

    python bench/gpu_profile.py [--rows 10000000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "shared" / "bench"), str(HERE.parent.parent / "shared" / "bench")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    import torch
    from synth import higgs_like
    from torch.profiler import ProfilerActivity, profile

    import histboost
    X, y = higgs_like(a.rows, seed=0)
    for policy in ({"grow_policy": "depthwise", "max_depth": 8},
                   {"grow_policy": "lossguide", "max_leaves": 255, "max_depth": 0}):
        p = {"objective": "binary:logistic", "device": "cuda", "quantized_grad": True,
             **policy}
        d = histboost.Dataset(X, label=y)
        histboost.train(p, histboost.Dataset(X[:20_000], label=y[:20_000]), 2,
                        verbose_eval=False)
        rounds = a.rounds if policy["grow_policy"] == "depthwise" else max(1, a.rounds // 4)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            b = histboost.train({**p, "verbosity": 2}, d, rounds, verbose_eval=False)
            torch.cuda.synchronize()
        print(f"\n== {policy['grow_policy']}, {rounds} rounds: phases (s) "
              f"{ {k: round(v, 3) for k, v in b.timings.items()} }")
        ka = prof.key_averages()
        print(ka.table(sort_by="self_cuda_time_total", row_limit=14, max_name_column_width=50))
        print(ka.table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=50))
        del d
    np.asarray(0)


if __name__ == "__main__":
    main()
