"""Where a CPU training's wall time goes, per kernel launch and per grower step, on all cores.

    python bench/cpu_profile.py [--rows 1000000] [--rounds 100] [--configs lossguide,...]
    python bench/cpu_profile.py --variants 'base;_PARTITION_CHUNKED_MIN_ROWS=65536' [--repeats 3]

Trains `higgs_like` (the bench/cpu.py setting: depth 8 / 255 leaves, 256 bins) once per
configuration in this process, after a warm-up that compiles the kernels and touches the
memory, and prints for each:

- the phase timers (`Booster.timings`) and the train time outside them;
- every Numba kernel the CPU backend launched: calls per tree, ms per tree, us per call;
- histogram and partition calls by the rows of the call (powers of four), to tell the cost
  of small calls (launch-bound) from large ones (memory-bound);
- the grower's host time: wall time in `TreeGrower.grow` outside the backend's calls;
- the cost of launching an empty parallel loop on the pool (us per launch).

Wall-clock times: run it on an otherwise idle machine (the device host).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numba as nb  # noqa: E402
import numpy as np  # noqa: E402
from _common import synth  # noqa: E402

import histboost  # noqa: E402
from histboost.kernels.cpu import (  # noqa: E402
    backend as cpu_backend,
)
from histboost.kernels.cpu import (
    gradients,
    histogram,
    partition,
    predict,
    quantize,
    split,
)
from histboost.kernels.cpu.backend import CPUBackend  # noqa: E402
from histboost.tree.grower import TreeGrower  # noqa: E402

CONFIGS = {
    "lossguide": {"grow_policy": "lossguide"},
    "depthwise": {"grow_policy": "depthwise"},
    "quantised": {"grow_policy": "depthwise", "quantized_grad": True},
}
BACKEND_CALLS = ("begin_tree", "build_histograms", "histogram_totals", "subtract_histograms",
                 "find_best_splits", "apply_splits", "split_and_search", "update_margin",
                 "compute_gradients", "gradient_bounds")


class Recorder:
    """Wall seconds and calls per kernel, per sized call, and in the grower's own code."""

    def __init__(self) -> None:
        self.kernels: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        self.sized: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0, 0, 0.0])
        self.grow = 0.0
        self.backend = 0.0
        self._depth = 0

    def kernel(self, name: str, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                rec = self.kernels[name]
                rec[0] += 1
                rec[1] += time.perf_counter() - t0
        return timed

    def sized_call(self, name: str, fn, rows_of):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                rows = rows_of(*args)
                rec = self.sized[(name, max(0, rows.bit_length() - 1) // 2)]
                rec[0] += 1
                rec[1] += rows
                rec[2] += time.perf_counter() - t0
        return timed

    def region(self, fn, backend: bool):
        """fn timed as the grower's (backend False) or as a backend call made from it (only
        the outermost: a composed step counts once)."""
        def timed(*args, **kwargs):
            if backend and (self._depth != 1):
                return fn(*args, **kwargs)
            self._depth += 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - t0
                self._depth -= 1
                if backend:
                    self.backend += spent
                else:
                    self.grow += spent
        return timed

    def reset(self) -> None:
        self.kernels.clear()
        self.sized.clear()
        self.grow = self.backend = 0.0


def install(rec: Recorder) -> None:
    # the backend module's view of the kernel modules, with every kernel and Python entry
    # point timed (the modules themselves stay as they are: kernels calling kernels are
    # compiled against them)
    for module in (histogram, partition, split, predict, gradients, quantize):
        view = SimpleNamespace(**vars(module))
        for name, obj in vars(module).items():
            if isinstance(obj, nb.core.registry.CPUDispatcher) or (
                    callable(obj) and getattr(obj, "__module__", None) == module.__name__
                    and not isinstance(obj, type)):
                setattr(view, name, rec.kernel(name, obj))
        if module is gradients:
            view.PAIR_KERNELS = {loss: tuple(rec.kernel(k.__name__, k) for k in kernels)
                                 for loss, kernels in gradients.PAIR_KERNELS.items()}
        setattr(cpu_backend, module.__name__.rsplit(".", 1)[1], view)
    CPUBackend._build_group = rec.sized_call(
        "histogram", CPUBackend._build_group, lambda self, starts, sizes, *a: sum(sizes))
    CPUBackend._partition = rec.sized_call(
        "partition", CPUBackend._partition,
        lambda self, bounds, *a: sum(e - s for s, e in bounds))
    TreeGrower.grow = rec.region(TreeGrower.grow, backend=False)
    for cls in (CPUBackend, cpu_backend.ComposedSteps):
        for name in BACKEND_CALLS:
            if name in vars(cls):
                setattr(cls, name, rec.region(vars(cls)[name], backend=True))


@nb.njit(parallel=True)
def _touch(out):
    for i in nb.prange(out.shape[0]):
        out[i] += 1.0


def launch_us(threads: int, calls: int = 2000) -> float:
    """Median-of-5 microseconds per launch of a parallel loop of `threads` iterations."""
    nb.set_num_threads(threads)
    out = np.zeros(threads)
    _touch(out)
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            _touch(out)
        samples.append(1e6 * (time.perf_counter() - t0) / calls)
    return float(np.median(samples))


def lightgbm_seconds(X: np.ndarray, y: np.ndarray, threads: int, rounds: int) -> float:
    """Seconds of LightGBM's Dataset and training with bench/cpu.py's parameters (one
    LightGBM configuration for all of histboost's, as there)."""
    import lightgbm as lgb
    params = {"objective": "binary", "learning_rate": 0.1, "num_leaves": 255, "max_depth": 8,
              "max_bin": 255, "num_threads": threads, "verbose": -1,
              "min_sum_hessian_in_leaf": 1.0}
    t0 = time.perf_counter()
    lgb.train(params, lgb.Dataset(X, y), rounds)
    return time.perf_counter() - t0


def _parse_variant(text: str) -> dict[str, int]:
    """'NAME=VALUE,...' ('base': none) as {module constant: int}."""
    if text.strip() == "base":
        return {}
    out = {}
    for part in text.split(","):
        name, value = part.split("=")
        out[name.strip()] = int(value)
    return out


def _set_constants(values: dict[str, int]) -> None:
    """Module constants of the CPU backend or the grower (BEST_FIRST_BATCH) set to values."""
    from histboost.tree import grower
    for name, value in values.items():
        module = grower if hasattr(grower, name) else cpu_backend
        if not hasattr(module, name):
            raise ValueError(f"no constant {name} in the CPU backend or the grower")
        setattr(module, name, value)


def time_variants(X: np.ndarray, y: np.ndarray, base: dict, a: argparse.Namespace) -> None:
    """Train every configuration under every variant of the backend's module constants
    (thresholds that pick serial or parallel paths and cut work items, the grower's
    BEST_FIRST_BATCH), in turns (variant A's configurations, B's, ..., then in reverse), in this
    process after a warm-up: an A/B in one process, without the process start, compilation
    and first touch of memory that bench/cpu.py's times include. These constants change no
    model. Prints each one's median and samples, in seconds."""
    variants = [v.strip() for v in a.variants.split(";") if v.strip()]
    defaults = {}
    from histboost.tree import grower
    for v in variants:
        for name in _parse_variant(v):
            module = grower if hasattr(grower, name) else cpu_backend
            defaults[name] = getattr(module, name)
    samples: dict[tuple[str, str], list[float]] = {}
    configs = {}
    for name in a.configs.split(","):
        params = {**base, **CONFIGS[name]}
        histboost.train(params, histboost.Dataset(X[:300_000], label=y[:300_000]), 2,
                        verbose_eval=False)
        configs[name] = params
    for rep in range(a.repeats):
        # alternating order (A B C, C B A, ...): within one process on the 16-core host the
        # runs also got faster over the first minutes (base 2.19 s first, 1.80 s in turn 2)
        for v in (variants if rep % 2 == 0 else variants[::-1]):
            _set_constants({**defaults, **_parse_variant(v)})
            for name, params in configs.items():
                t0 = time.perf_counter()
                histboost.train(params, histboost.Dataset(X, label=y), a.rounds,
                                verbose_eval=False)
                t = time.perf_counter() - t0
                samples.setdefault((v, name), []).append(t)
                print(f"[{rep + 1}/{a.repeats}] {v} {name}: {t:.3f} s", flush=True)
    _set_constants(defaults)
    print(f"\n{a.rows:,} rows, {a.rounds} rounds, {base['nthread']} threads, median of "
          f"{a.repeats} turns (s)\n")
    print("| variant | " + " | ".join(configs) + " |\n|---|" + "---|" * len(configs))
    for v in variants:
        cells = []
        for name in configs:
            ts = samples[(v, name)]
            cells.append(f"{np.median(ts):.3f} ({' / '.join(f'{t:.2f}' for t in ts)})")
        print(f"| {v} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--plain", action="store_true", help="phase timers only, no wrappers")
    ap.add_argument("--lightgbm", action="store_true",
                    help="LightGBM on the same data and rounds after each configuration")
    ap.add_argument("--variants", help="time backend settings against each other instead "
                    "of profiling: 'base;NAME=VALUE,NAME=VALUE;...' (see `time_variants`)")
    ap.add_argument("--repeats", type=int, default=3, help="turns of --variants")
    a = ap.parse_args()
    threads = a.threads or os.cpu_count()
    X, y = synth().higgs_like(a.rows, seed=0)[:2]
    base = {"objective": "binary:logistic", "learning_rate": 0.1, "max_depth": 8,
            "max_leaves": 255, "max_bin": 256, "nthread": threads, "min_child_weight": 1.0}
    if a.variants:
        time_variants(X, y, base, a)
        return
    rec = Recorder()
    if not a.plain:
        install(rec)
    launch = launch_us(threads)
    print(f"threading layer {nb.threading_layer()}, {threads} threads; OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', '-')}; empty parallel loop {launch:.1f} "
          "us/launch", flush=True)
    for name in a.configs.split(","):
        params = {**base, **CONFIGS[name]}
        warm = histboost.Dataset(X[:50_000], label=y[:50_000])
        histboost.train(params, warm, 2, verbose_eval=False)
        histboost.train(params, histboost.Dataset(X, label=y), 5, verbose_eval=False)
        rec.reset()
        t0 = time.perf_counter()
        b = histboost.train(params, histboost.Dataset(X, label=y), a.rounds, verbose_eval=False)
        total = time.perf_counter() - t0
        phases = {k: round(v, 3) for k, v in b.timings.items()}
        print(f"\n## {name}: {total:.2f} s, {1000 * total / a.rounds:.1f} ms/tree; phases "
              f"{phases}; outside them {total - sum(b.timings.values()):.3f} s", flush=True)
        if a.lightgbm:
            lgb_s = lightgbm_seconds(X, y, threads, a.rounds)
            print(f"LightGBM, same process, same rounds: {lgb_s:.2f} s, "
                  f"{1000 * lgb_s / a.rounds:.1f} ms/tree", flush=True)
        if a.plain:
            continue
        per = 1000 / a.rounds
        kernels = sum(s for _, s in rec.kernels.values())
        print(f"grower host {per * (rec.grow - rec.backend):.2f} ms/tree "
              f"(grow {per * rec.grow:.2f}, backend calls {per * rec.backend:.2f}); all "
              f"kernels {per * kernels:.2f} ms/tree, train time outside them "
              f"{per * (total - kernels):.2f} ms/tree")
        print("| kernel | calls/tree | ms/tree | us/call |\n|---|---|---|---|")
        for k, (n, s) in sorted(rec.kernels.items(), key=lambda kv: -kv[1][1]):
            print(f"| {k} | {n / a.rounds:.1f} | {per * s:.2f} | {1e6 * s / n:.0f} |")
        print("| call | rows from | calls/tree | ms/tree | us/call | ns/row |\n"
              "|---|---|---|---|---|---|")
        for (k, bucket), (n, rows, s) in sorted(rec.sized.items()):
            print(f"| {k} | {4 ** bucket} | {n / a.rounds:.1f} | {per * s:.2f} | "
                  f"{1e6 * s / n:.0f} | {1e9 * s / max(rows, 1):.2f} |")


if __name__ == "__main__":
    main()
