"""Quantile binning: per-feature cut points from (weighted) data.

A feature with k value bins has k upper bounds ``cuts[0] < ... < cuts[k-1] = +inf`` and one more
slot, index k, for missing values (NaN). A value x goes to the first bin b with x <= cuts[b], so a
split "bin <= b goes left" is the same as the raw rule "x <= cuts[b] goes left": prediction needs
no binning and the tree stores raw thresholds.

Cuts come from a sample of the rows picked by a hash of (seed, global row index)
(`sample_row_ids`): one rule in one process (`compute_bin_mapper`) and across workers that hold
blocks of the rows (`histboost.distributed.cuts.global_bin_mapper`), so both give the same cuts.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..kernels.cpu.binning import bin_dense

# Rows sampled to find cut points (as LightGBM's bin_construct_sample_cnt), in expectation; the
# sample is a hash of (seed, row index) with a fixed seed, so the same data always gives the same
# cuts, on any number of workers (`sample_row_ids`).
DEFAULT_SAMPLE_ROWS = 200_000

# splitmix64's constants (Steele, Lea and Flood, "Fast splittable pseudorandom number
# generators", 2014)
_GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1
_HASH_CHUNK = 1 << 16


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
        return np.dtype(np.uint8) if int(self.n_bins.max(initial=0)) <= 256 \
            else np.dtype(np.uint16)

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
    if weights is None:  # ~10x faster than return_inverse (a sort, no argsort)
        distinct, counts = np.unique(values.astype(np.float64), return_counts=True)
    else:
        distinct, inverse = np.unique(values.astype(np.float64), return_inverse=True)
    if distinct.size == 1:
        return np.array([np.inf])
    if distinct.size <= max_value_bins:
        return np.append(np.unique(_midpoints(distinct[:-1], distinct[1:])), np.inf)
    w = (counts.astype(np.float64) if weights is None else
         np.bincount(inverse, weights=weights, minlength=distinct.size).astype(np.float64))
    cum = np.cumsum(w)
    total = cum[-1]
    targets = total * np.arange(1, max_value_bins, dtype=np.float64) / max_value_bins
    # index of the distinct value at which each quantile is reached; a bound after it
    idx = np.unique(np.searchsorted(cum, targets, side="left"))
    idx = idx[idx < distinct.size - 1]
    cuts = np.append(np.unique(_midpoints(distinct[idx], distinct[idx + 1])), np.inf)
    return cuts[:max_value_bins]


def check_sampling(max_bin: int, sample_rows: int) -> None:
    """Raise ValueError unless max_bin >= 2 and sample_rows >= 1."""
    if max_bin < 2:
        raise ValueError(f"max_bin must be >= 2, got {max_bin}")
    if sample_rows < 1:
        raise ValueError(f"sample_rows must be >= 1, got {sample_rows}")


def _mix64(z: np.ndarray, tmp: np.ndarray) -> None:
    """splitmix64's output function on uint64 values, in place (arithmetic modulo 2**64);
    tmp: scratch of z's size."""
    for shift, mul in ((30, _MIX1), (27, _MIX2), (31, 0)):
        np.right_shift(z, np.uint64(shift), out=tmp)
        np.bitwise_xor(z, tmp, out=z)
        if mul:
            np.multiply(z, np.uint64(mul), out=z)


def _mix64_int(z: int) -> int:
    """`_mix64` of one Python integer."""
    z &= _MASK64
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return z ^ (z >> 31)


def _hash_rows(seed: int, first: int, z: np.ndarray, tmp: np.ndarray) -> None:
    """z[j] = `row_hash` of global row first + j, in place (z, tmp: uint64 buffers)."""
    np.add(np.arange(z.size, dtype=np.uint64), np.uint64((first + 1) & _MASK64), out=z)
    np.multiply(z, np.uint64(_GAMMA), out=z)
    np.add(z, np.uint64(_mix64_int(int(seed))), out=z)
    _mix64(z, tmp)


def row_hash(seed: int, row_ids: np.ndarray) -> np.ndarray:
    """uint64 hash of (seed, global row index) for each of `row_ids`: output i + 1 of a
    splitmix64 stream started at ``key = mix(seed mod 2**64)``, i.e.
    ``mix(key + (i + 1) * 0x9E3779B97F4A7C15 mod 2**64)`` with ``mix`` splitmix64's output
    function."""
    z = np.asarray(row_ids, dtype=np.int64).astype(np.uint64)
    z += np.uint64(1)
    z *= np.uint64(_GAMMA)
    z += np.uint64(_mix64_int(int(seed)))
    _mix64(z, np.empty_like(z))
    return z


def sample_row_ids(first_row: int, n_rows: int, n_total: int,
                   sample_rows: int = DEFAULT_SAMPLE_ROWS, seed: int = 0) -> np.ndarray:
    """int64, ascending: the local indices of the rows of one block that are in the cut sample.

    The block holds global rows ``first_row .. first_row + n_rows - 1`` of `n_total`. With
    ``n_total <= sample_rows`` every row is in the sample; otherwise global row i is iff
    ``row_hash(seed, i) < floor(sample_rows * 2**64 / n_total)``, about `sample_rows` rows in
    expectation (binomial: a few hundred more or fewer for 200k). Whether a row is sampled depends
    on the seed, its global index and the total row count only, so the blocks of any split of
    the rows find, each alone, their parts of the same sample.
    """
    if n_total <= sample_rows:
        return np.arange(n_rows, dtype=np.int64)
    threshold = np.uint64((int(sample_rows) << 64) // int(n_total))
    z = np.empty(min(n_rows, _HASH_CHUNK), np.uint64)
    tmp = np.empty_like(z)
    parts = [np.zeros(0, np.int64)]
    # in chunks that stay in cache: ~5x faster than whole-array passes on 1M rows
    for start in range(0, n_rows, _HASH_CHUNK):
        m = min(n_rows - start, _HASH_CHUNK)
        _hash_rows(seed, first_row + start, z[:m], tmp[:m])
        parts.append(np.flatnonzero(z[:m] < threshold).astype(np.int64) + start)
    return np.concatenate(parts)


def cut_sample(X: np.ndarray, weight: np.ndarray | None,
               rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The sampled rows of X (and their weights) without the rows of weight 0, which must not
    move the cuts (weight 0 means "not in the data"). No copy when every row is kept."""
    if rows.size != X.shape[0]:
        X = X[rows]
        weight = None if weight is None else weight[rows]
    if weight is not None:
        keep = weight > 0
        if not keep.all():
            X, weight = X[keep], weight[keep]
    return X, weight


def columns_cuts(Xs: np.ndarray, ws: np.ndarray | None, max_bin: int,
                 n_threads: int = 0) -> list[np.ndarray]:
    """`feature_cuts` of every column of the sample Xs (m, k) with weights ws (m,) or None,
    missing values left out; columns on up to `n_threads` threads (0: all cores)."""
    k = Xs.shape[1]

    def one(f: int) -> np.ndarray:
        col = np.asarray(Xs[:, f])
        ok = ~np.isnan(col)
        return feature_cuts(col[ok], None if ws is None else ws[ok], max_bin - 1)

    # features in parallel: NumPy's sorts release the GIL; each feature's cuts depend on its
    # column only, so the result is the same on any thread count
    workers = min(k, n_threads if n_threads > 0 else (os.cpu_count() or 1))
    if workers > 1 and Xs.shape[0] * k >= 200_000:
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(one, range(k)))
    return [one(f) for f in range(k)]


def mapper_from_cuts(all_cuts: list[np.ndarray], max_bin: int) -> BinMapper:
    """The `BinMapper` of per-feature cut arrays in feature order."""
    cut_ptr = np.zeros(len(all_cuts) + 1, dtype=np.int64)
    cut_ptr[1:] = np.cumsum([c.size for c in all_cuts])
    cut_values = np.concatenate(all_cuts) if all_cuts else np.zeros(0)
    return BinMapper(cut_values.astype(np.float64), cut_ptr, int(max_bin))


def compute_bin_mapper(X: np.ndarray, weight: np.ndarray | None, max_bin: int,
                       sample_rows: int = DEFAULT_SAMPLE_ROWS, seed: int = 0,
                       n_threads: int = 0) -> BinMapper:
    """Cut points for every column of X (n, F) float, at most `max_bin` slots per feature
    (`max_bin - 1` value bins and the missing slot); features on up to `n_threads` threads
    (0: all cores).

    The rule, shared with data-parallel training (`histboost.distributed.cuts`, of which this
    is the one-rank case: rows 0..n-1 in one block):

    1. the cut sample is `sample_row_ids(0, n, n, sample_rows, seed)`: every row when
       ``n <= sample_rows``, else the rows whose `row_hash` of (seed, row index) falls below
       a threshold, about `sample_rows` of them, in row order;
    2. sampled rows of weight 0 are dropped;
    3. feature f's cuts are ``feature_cuts(values, weights, max_bin - 1)`` of the sample's
       non-missing values of f and their weights (None without weights), in row order.

    The sample depends on the global row indices only, so the cuts of the same rows split into
    blocks across any number of workers are these, bit for bit.
    """
    check_sampling(max_bin, sample_rows)
    n = X.shape[0]
    Xs, ws = cut_sample(X, weight, sample_row_ids(0, n, n, sample_rows, seed))
    return mapper_from_cuts(columns_cuts(Xs, ws, max_bin, n_threads), max_bin)
