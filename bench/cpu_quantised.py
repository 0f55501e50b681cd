"""The quantised steps of a CPU tree timed alone: rounding, gradient bound, and the subtraction
of a level's packed histograms with their unpacking for the split search.

    python bench/cpu_quantised.py [--rows 1000000] [--pairs 64] [--threads 0] [--repeats 50]

Times the CPU backend of this checkout's histboost, or of another checkout's when that is
first on PYTHONPATH (an A/B of the kernels on one host, without a training's drift), on
`higgs_like`-sized inputs: float32 pairs of --rows rows, and --pairs packed
histogram pairs of 28 x 256 slots (a depth-wise tree's deepest searched level: 64 pairs).
Prints the median and quartiles of --repeats calls of each step, in microseconds, after a
first call that compiles it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# this checkout's histboost, after any on PYTHONPATH (which come first: the A/B)
sys.path.insert(1 + len([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
                str(Path(__file__).resolve().parent.parent))

import numba as nb  # noqa: E402
import numpy as np  # noqa: E402

import histboost  # noqa: E402
from histboost.kernels.cpu.backend import CPUBackend  # noqa: E402
from histboost.tree.quantize import make_quantisation  # noqa: E402

FEATURES, BINS = 28, 256


def timed(fn, repeats: int) -> tuple[float, float, float]:
    """(median, first quartile, third quartile) microseconds of fn() over `repeats` calls
    after one untimed call."""
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(1e6 * (time.perf_counter() - t0))
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return float(med), float(q1), float(q3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--pairs", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--repeats", type=int, default=50)
    a = ap.parse_args()
    threads = a.threads or os.cpu_count()
    rng = np.random.default_rng(0)
    offsets = np.arange(FEATURES + 1, dtype=np.int64) * BINS
    be = CPUBackend(rng.integers(0, BINS - 1, (a.rows, FEATURES)).astype(np.uint8), offsets,
                    threads, label=rng.integers(0, 2, a.rows).astype(np.float64))
    be._claim_pool()
    be.compute_gradients("logistic")
    q = make_quantisation(*be.gradient_bounds(0), 8, key=12345)
    gh = be._pairs[0]
    steps = {
        "gradient bound": lambda: be.gradient_bounds(0),
        "rounding (packed)": lambda: be._quantise(gh, q),
    }
    # a level of packed histograms: parents in one buffer, the built children in another;
    # the split search then reads both children of every pair as float64
    be._begin(gh, be._all_rows, q)
    m = be.total_bins
    parents = rng.integers(0, 2**20, (a.pairs, m)) << 32
    built = parents // 2
    nodes = list(range(1, 2 * a.pairs + 1))

    def subtract_then_unpack() -> None:
        """The level's subtraction and the search's float histograms, through the backend's
        entry points (one pass or two, as the package does it)."""
        be._hists.clear()
        be._float_memo = None
        be._hists.store([1000 + j for j in range(a.pairs)], parents)
        be._hists.store(nodes[::2], built)
        be.subtract_histograms([1000 + j for j in range(a.pairs)], nodes[::2], nodes[1::2])
        be._float_histograms(nodes)

    steps[f"subtraction + unpacking, {a.pairs} pairs"] = subtract_then_unpack
    print(f"histboost {Path(histboost.__file__).parent.parent}, numba {nb.__version__}, "
          f"{threads} threads, {a.rows:,} rows, {a.repeats} calls; microseconds: median "
          "(quartiles)", flush=True)
    for name, fn in steps.items():
        med, q1, q3 = timed(fn, a.repeats)
        print(f"| {name} | {med:.0f} ({q1:.0f}-{q3:.0f}) |")


if __name__ == "__main__":
    main()
