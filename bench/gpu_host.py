"""Host-side work of the CUDA backend per tree, measured without a GPU: training under Numba's
CUDA simulator (kernels run on the CPU, on CPU tensors) with every kernel launch, torch
operator, host-to-device upload and device-to-host read counted, and the host seconds spent
outside the simulated kernels.

    NUMBA_ENABLE_CUDASIM=1 python bench/gpu_host.py [--rows 600] [--leaves 15] [--depth 4]

On a GPU each launch costs a few tens of microseconds of host time, a torch operator a few,
and each read a synchronisation (the device drains while the host decides the next step), so
these counts are what a best-first tree's time per split is made of on a fast device. The
host seconds are measured on CPU tensors (cheaper operators than CUDA ones): compare them
between versions, not with a GPU's. Prints one line per grow policy: per tree and per split.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
warnings.filterwarnings("ignore", category=RuntimeWarning)  # simulator uint64 wraparound
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import synth  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes  # noqa: E402

import histboost  # noqa: E402
from histboost.kernels import launch  # noqa: E402
from histboost.kernels.cuda import backend as cuda_backend  # noqa: E402
from histboost.tree.grower import TreeGrower  # noqa: E402


class _Ops(TorchDispatchMode):
    """Counts the torch operators dispatched while the probe is on (views included: each
    costs a dispatch)."""

    def __init__(self, probe: _Probe) -> None:
        super().__init__()
        self.probe = probe
        self.names: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.probe.on:
            self.names[str(func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))


class _Probe:
    """Counts launches, uploads and reads in the trees' calls (growing a tree and adding it
    to the margins) after the first tree of a training (a warm backend), and the host seconds
    spent there outside the simulated kernels."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.on = False
        self.trees = 0
        self.host_seconds = 0.0
        self.kernel_seconds = 0.0
        probe = self
        plain_launch = launch.CudaKernel.launch

        def timed_launch(kernel, grid, block, device, *args, shared_bytes=0):
            probe.counts["launches"] += probe.on
            kernel.packed(args, device)  # host work, as on a GPU
            t0 = time.perf_counter()
            with _disable_current_modes():  # the simulator's own tensor handling
                plain_launch(kernel, grid, block, device, *args, shared_bytes=shared_bytes)
            probe.kernel_seconds += time.perf_counter() - t0
        launch.CudaKernel.launch = timed_launch
        for cls, name, key in ((cuda_backend.CUDABackend, "_upload", "uploads"),
                               (cuda_backend.CUDABackend, "_read", "reads"),
                               (torch.Tensor, "cpu", "reads"), (torch.Tensor, "item", "reads"),
                               (torch.Tensor, "tolist", "reads")):
            if hasattr(cls, name):
                self._count(cls, name, key)
        self._measure(TreeGrower, "grow", new_tree=True)
        self._measure(cuda_backend.CUDABackend, "update_margin")

    def reset(self) -> None:
        self.counts.clear()
        self.trees = 0
        self.host_seconds = 0.0

    def _count(self, cls, name: str, key: str) -> None:
        plain = getattr(cls, name)
        probe = self

        def counted(*args, **kwargs):
            probe.counts[key] += probe.on
            return plain(*args, **kwargs)
        setattr(cls, name, counted)

    def _measure(self, cls, name: str, new_tree: bool = False) -> None:
        plain = getattr(cls, name)
        probe = self

        def measured(*args, **kwargs):
            probe.trees += new_tree
            if probe.trees < 2:
                return plain(*args, **kwargs)
            probe.on = True
            t0, k0 = time.perf_counter(), probe.kernel_seconds
            try:
                return plain(*args, **kwargs)
            finally:
                probe.host_seconds += time.perf_counter() - t0 - (probe.kernel_seconds - k0)
                probe.on = False
        setattr(cls, name, measured)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=600)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--leaves", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ops", action="store_true", help="list the operators dispatched")
    a = ap.parse_args()
    sys.setswitchinterval(5e-4)  # the simulator's threads hand the GIL over sooner
    X, y = synth().higgs_like(a.rows, seed=0)
    X = np.ascontiguousarray(X[:, :a.features])
    probe = _Probe()
    policies = {"depthwise": {"grow_policy": "depthwise", "max_depth": a.depth},
                "lossguide": {"grow_policy": "lossguide", "max_leaves": a.leaves,
                              "max_depth": 0}}
    for name, policy in policies.items():
        params = {"objective": "binary:logistic", "device": "cuda", "quantized_grad": True,
                  "max_bin": a.bins, "min_child_weight": 0.0, **policy}
        d = histboost.Dataset(X, label=y, max_bin=a.bins).construct()
        histboost.train(params, d, 1, verbose_eval=False)  # compile
        probe.reset()
        histboost.train(params, d, a.rounds, verbose_eval=False)
        host = probe.host_seconds
        probe.reset()
        ops = _Ops(probe)
        with ops:
            b = histboost.train(params, d, a.rounds, verbose_eval=False)
        counts = dict(probe.counts, ops=sum(ops.names.values()))
        trees = a.rounds - 1
        splits = sum(int(np.sum(t.left_child >= 0)) for t in b.trees[1:])
        per = {k: round(v / trees, 1) for k, v in sorted(counts.items())}
        per_split = {k: round(v / max(splits, 1), 2) for k, v in sorted(counts.items())}
        print(f"{name}: {splits / trees:.0f} splits/tree; per tree {per}, host "
              f"{1e3 * host / trees:.1f} ms; per split {per_split}, host "
              f"{1e6 * host / max(splits, 1):.0f} us", flush=True)
        if a.ops:
            print("  operators per tree:", {k: v / trees for k, v in ops.names.most_common()})


if __name__ == "__main__":
    main()
