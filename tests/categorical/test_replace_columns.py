"""`Backend.replace_columns` mid-tree: the histograms of held nodes are rebuilt for the new
columns, so they and later subtractions equal a backend that had the columns from the start."""

from __future__ import annotations

import numpy as np

from histboost.kernels.cpu.backend import CPUBackend
from histboost.tree.split import REC_BIN, REC_DEFAULT_LEFT, REC_FEATURE, REC_WIDTH


def _split(feature: int, bin_: int) -> np.ndarray:
    rec = np.zeros((1, REC_WIDTH))
    rec[0, REC_FEATURE], rec[0, REC_BIN], rec[0, REC_DEFAULT_LEFT] = feature, bin_, 0
    return rec


def _grow(bins: np.ndarray, offsets: np.ndarray, pairs: np.ndarray,
          replace: np.ndarray | None) -> np.ndarray:
    be = CPUBackend(bins.copy(), offsets, n_threads=1, n_outputs=1)
    be.set_gradients(pairs)
    be.begin_tree(0, None, None)
    be.build_histograms([0])
    be.apply_splits([0], [1], [2], _split(0, 2))
    be.build_histograms([1])
    be.subtract_histograms([0], [1], [2])
    if replace is not None:  # a column that appears mid-tree (a combination)
        be.replace_columns(np.array([2, 3]), replace)
    be.apply_splits([2], [3], [4], _split(3, 1))
    be.build_histograms([3])
    be.subtract_histograms([2], [3], [4])
    return be.read_histograms([1, 3, 4])


def test_replaced_columns_equal_columns_from_the_start():
    rng = np.random.default_rng(0)
    n = 3000
    offsets = np.arange(0, 25, 5, dtype=np.int64)  # 4 features of 4 value bins + missing
    bins = rng.integers(0, 5, (n, 4)).astype(np.uint8)
    new = rng.integers(0, 5, (n, 2)).astype(np.uint8)
    pairs = rng.normal(size=(1, n, 2)).astype(np.float32)
    pairs[..., 1] = np.abs(pairs[..., 1])
    fresh = bins.copy()
    fresh[:, 2:] = new
    want = _grow(fresh, offsets, pairs, None)
    got = _grow(bins, offsets, pairs, new)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    stale = _grow(bins, offsets, pairs, None)
    assert not np.allclose(stale[:, 10:], want[:, 10:])  # the test sees the columns change
