"""Host (Python) cost of the tree grower per tree, measured on the CPU backend: the process CPU
time of `TreeGrower.grow` minus that of the backend calls it makes (kernels and the backend's
own Python). The same grower drives the CUDA backend, where this cost is host time the device
waits for (bench/gpu_host.py counts the CUDA backend's host work).

    python bench/grower_host.py [--rows 20000] [--rounds 20] [--samples 5]

Prints, per grow policy (depthwise depth 8, lossguide 255 leaves; one thread), the minimum and
median over samples of the grower's host milliseconds per tree and of the training's CPU
seconds. Process CPU time, so other processes on the machine disturb it little; compare
versions on the same machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from _common import synth  # noqa: E402

import histboost  # noqa: E402
from histboost.kernels.backend import ComposedSteps  # noqa: E402
from histboost.kernels.cpu.backend import CPUBackend  # noqa: E402
from histboost.tree.grower import TreeGrower  # noqa: E402

# the backend calls a grower makes; their time is the backend's, not the grower's
BACKEND_CALLS = ("begin_tree", "build_histograms", "histogram_totals", "subtract_histograms",
                 "find_best_splits", "apply_splits", "split_and_search", "oblivious_gains",
                 "evaluate_split")

POLICIES = {
    "depthwise": {"grow_policy": "depthwise", "max_depth": 8},
    "lossguide": {"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 255},
}


class _Clock:
    """Process CPU seconds in `TreeGrower.grow` and in the backend calls made from it (the
    outermost call only: a composed call such as `split_and_search` counts once)."""

    def __init__(self) -> None:
        self.grow = 0.0
        self.backend = 0.0
        self._depth = 0

    def wrap(self, fn, backend: bool):
        def timed(*args, **kwargs):
            if self._depth and backend:
                return fn(*args, **kwargs)
            self._depth += backend
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.process_time() - start
                self._depth -= backend
                if backend:
                    self.backend += spent
                else:
                    self.grow += spent
        return timed


def _install(clock: _Clock) -> None:
    TreeGrower.grow = clock.wrap(TreeGrower.grow, backend=False)
    for cls in (CPUBackend, ComposedSteps):
        for name in BACKEND_CALLS:
            if name in vars(cls):
                setattr(cls, name, clock.wrap(vars(cls)[name], backend=True))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--samples", type=int, default=5)
    args = ap.parse_args()
    X, y = synth().higgs_like(args.rows)[:2]
    data = histboost.Dataset(X, label=y)
    clock = _Clock()
    _install(clock)
    for name, policy in POLICIES.items():
        params = {"objective": "binary:logistic", "nthread": 1, "max_bin": 64, "seed": 0,
                  **policy}
        histboost.train(params, data, 2)  # compiled kernels loaded, caches warm
        host, total = [], []
        for _ in range(args.samples):
            clock.grow = clock.backend = 0.0
            start = time.process_time()
            histboost.train(params, data, args.rounds)
            total.append(time.process_time() - start)
            host.append(1000 * (clock.grow - clock.backend) / args.rounds)
        print(f"{name}: grower host ms/tree min {min(host):.2f} median {np.median(host):.2f}; "
              f"train CPU s ({args.rounds} rounds) min {min(total):.3f} "
              f"median {np.median(total):.3f}")


if __name__ == "__main__":
    main()
