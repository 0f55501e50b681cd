"""Quantile binning: per-feature cut points from (weighted) data.

A feature with k value bins has k upper bounds ``cuts[0] < ... < cuts[k-1] = +inf`` and one more
slot, index k, for missing values (NaN). A value x goes to the first bin b with x <= cuts[b], so a
split "bin <= b goes left" is the same as the raw rule "x <= cuts[b] goes left": prediction needs
no binning and the tree stores raw thresholds.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..kernels.cpu.binning import bin_dense

# Rows sampled to find cut points (as LightGBM's bin_construct_sample_cnt); the sample is drawn
# with a fixed seed so the same data always gives the same cuts.
DEFAULT_SAMPLE_ROWS = 200_000


@dataclass
class BinMapper:
    """Cut points of every feature.

    cut_values: float64 (sum of value bins,), the concatenated upper bounds per feature.
    cut_ptr: int64 (F+1,), feature f owns ``cut_values[cut_ptr[f]:cut_ptr[f+1]]``.
    max_bin: the limit the cuts were computed for (slots per feature including missing).
    """

    cut_values: np.ndarray
    cut_ptr: np.ndarray
    max_bin: int

    @property
    def n_features(self) -> int:
        return len(self.cut_ptr) - 1

    @property
    def n_value_bins(self) -> np.ndarray:
        """int32 (F,): value bins per feature (missing slot excluded)."""
        return np.diff(self.cut_ptr).astype(np.int32)

    @property
    def n_bins(self) -> np.ndarray:
        """int32 (F,): histogram slots per feature, the missing slot included."""
        return self.n_value_bins + 1

    @property
    def bin_offsets(self) -> np.ndarray:
        """int64 (F+1,): start of each feature's slots in a flat histogram."""
        return np.concatenate([[0], np.cumsum(self.n_bins)]).astype(np.int64)

    @property
    def bin_dtype(self) -> np.dtype:
        return np.dtype(np.uint8) if int(self.n_bins.max()) <= 256 else np.dtype(np.uint16)

    def feature_cuts(self, f: int) -> np.ndarray:
        return self.cut_values[self.cut_ptr[f]:self.cut_ptr[f + 1]]

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Bin a dense float matrix (n, F) -> (n, F) uint8/uint16, C order."""
        if X.shape[1] != self.n_features:
            raise ValueError(f"data has {X.shape[1]} features, the bin cuts have "
                             f"{self.n_features}")
        out = np.empty(X.shape, dtype=self.bin_dtype)
        bin_dense(X, self.cut_values, self.cut_ptr, out)
        return out


def _midpoints(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A bound between each pair a < b: a value c with a <= c < b, so a falls at or below it
    and b above. a/2 + b/2 cannot overflow; where it rounds onto b (adjacent floats) or the
    pair holds an infinity, a itself is the bound."""
    with np.errstate(invalid="ignore", over="ignore"):
        mids = a / 2.0 + b / 2.0
    bad = ~(mids >= a) | ~(mids < b)
    return np.where(bad, a, mids)


def feature_cuts(values: np.ndarray, weights: np.ndarray | None, max_value_bins: int) -> np.ndarray:
    """Upper bounds of the value bins of one feature.

    values: float (m,) without NaN; weights: float (m,) or None. Returns float64 (k,) with
    k <= max_value_bins, strictly increasing, last = +inf. With at most `max_value_bins` distinct
    values every value gets its own bin (bounds at midpoints); otherwise the bounds sit at weighted
    quantiles of the distinct values, and a heavy value keeps a bin of its own.
    """
    if values.size == 0:
        return np.array([np.inf])
    distinct, inverse = np.unique(values.astype(np.float64), return_inverse=True)
    if distinct.size == 1:
        return np.array([np.inf])
    if distinct.size <= max_value_bins:
        return np.append(np.unique(_midpoints(distinct[:-1], distinct[1:])), np.inf)
    w = np.bincount(inverse, weights=weights, minlength=distinct.size).astype(np.float64)
    cum = np.cumsum(w)
    total = cum[-1]
    targets = total * np.arange(1, max_value_bins, dtype=np.float64) / max_value_bins
    # index of the distinct value at which each quantile is reached; a bound after it
    idx = np.unique(np.searchsorted(cum, targets, side="left"))
    idx = idx[idx < distinct.size - 1]
    cuts = np.append(np.unique(_midpoints(distinct[idx], distinct[idx + 1])), np.inf)
    return cuts[:max_value_bins]


def compute_bin_mapper(X: np.ndarray, weight: np.ndarray | None, max_bin: int,
                       sample_rows: int = DEFAULT_SAMPLE_ROWS, seed: int = 0,
                       n_threads: int = 0) -> BinMapper:
    """Cut points for every column of X (n, F) float, at most `max_bin` slots per feature
    (`max_bin - 1` value bins and the missing slot); features on up to `n_threads` threads
    (0: all cores)."""
    if max_bin < 2:
        raise ValueError(f"max_bin must be >= 2, got {max_bin}")
    n, F = X.shape
    if n > sample_rows:
        rng = np.random.default_rng(seed)
        rows = np.sort(rng.choice(n, size=sample_rows, replace=False))
        Xs = X[rows]
        ws = None if weight is None else weight[rows]
    else:
        Xs, ws = X, weight
    def one(f: int) -> np.ndarray:
        col = np.asarray(Xs[:, f])
        # rows of weight 0 must not move the cuts: weight 0 means "not in the data"
        ok = ~np.isnan(col) if ws is None else ~np.isnan(col) & (ws > 0)
        return feature_cuts(col[ok], None if ws is None else ws[ok], max_bin - 1)

    # features in parallel: NumPy's sorts release the GIL; each feature's cuts depend on its
    # column only, so the result is the same on any thread count
    workers = min(F, n_threads if n_threads > 0 else (os.cpu_count() or 1))
    if workers > 1 and Xs.shape[0] * F >= 200_000:
        with ThreadPoolExecutor(workers) as pool:
            all_cuts = list(pool.map(one, range(F)))
    else:
        all_cuts = [one(f) for f in range(F)]
    cut_ptr = np.zeros(F + 1, dtype=np.int64)
    cut_ptr[1:] = np.cumsum([c.size for c in all_cuts])
    cut_values = np.concatenate(all_cuts) if all_cuts else np.zeros(0)
    return BinMapper(cut_values.astype(np.float64), cut_ptr, int(max_bin))
