"""Data-parallel histogram reduction with histboost.collective.

Each worker builds a gradient/hessian histogram of its shard of the rows; an allreduce makes
the global histogram, every worker finds its best split over a block of the features, and an
allreduce with a record reducer picks the global best split (as LightGBM's data-parallel
learner does). Run on 4 CPU processes:

    torchrun --nproc_per_node=4 examples/allreduce_torchrun.py

or as one process (no torch needed): python examples/allreduce_torchrun.py
"""

from __future__ import annotations

import numpy as np

import histboost.collective as hc


def best_record(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[gain, feature, bin] rows: higher gain, ties to the lower feature, then lower bin."""
    return a if (-a[0], a[1], a[2]) <= (-b[0], b[1], b[2]) else b


def main() -> None:
    comm = hc.init(timeout=30.0)
    n_features, n_bins, rows = 8, 16, 10_000
    rng = np.random.default_rng(comm.rank)  # this worker's shard
    bins = rng.integers(0, n_bins, size=(rows, n_features))
    grad = rng.standard_normal(rows)
    hist = np.zeros((n_features, n_bins, 2))  # (feature, bin, [sum grad, count])
    for f in range(n_features):
        hist[f, :, 0] = np.bincount(bins[:, f], weights=grad, minlength=n_bins)
        hist[f, :, 1] = np.bincount(bins[:, f], minlength=n_bins)

    # Each worker owns a block of features: reduce-scatter gives it their global histogram.
    mine = comm.reduce_scatter(hist)
    first = sum(len(b) for b in np.array_split(np.arange(n_features), comm.world_size)[
        : comm.rank])
    best = np.array([-np.inf, -1.0, -1.0])
    for j, fh in enumerate(mine):
        left_g, left_n = np.cumsum(fh[:, 0])[:-1], np.cumsum(fh[:, 1])[:-1]
        tot_g, tot_n = fh[:, 0].sum(), fh[:, 1].sum()
        gain = left_g**2 / np.maximum(left_n, 1) + (tot_g - left_g) ** 2 / np.maximum(
            tot_n - left_n, 1)
        b = int(np.argmax(gain))
        best = best_record(best, np.array([gain[b], first + j, b]))

    # One record per worker; the reducer picks the same winner on every rank.
    winner = comm.allreduce(best, op=best_record)
    full = comm.allreduce(hist)  # or the whole histogram everywhere
    if comm.rank == 0:
        print(f"{comm.world_size} workers, {int(full[0, :, 1].sum())} rows: best split "
              f"feature {int(winner[1])} bin {int(winner[2])} gain {winner[0]:.3f}")
    comm.close()


if __name__ == "__main__":
    main()
