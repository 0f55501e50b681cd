"""Small synthetic data sets for tests."""

from __future__ import annotations

import numpy as np


def make_regression(n: int = 400, F: int = 5, seed: int = 0, missing: float = 0.1):
    """float64 X (n, F) with continuous values (few ties) and a `missing` share of NaN, and a
    nonlinear target y (n,)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, F))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * (X[:, 2] > 0) + 0.1 * rng.standard_normal(n)
    X[rng.random((n, F)) < missing] = np.nan
    return X, y


def make_classification(n: int = 400, F: int = 5, n_classes: int = 2, seed: int = 0,
                        missing: float = 0.05):
    """float64 X (n, F) and integer labels y (n,) in 0..n_classes-1 as float64."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, F))
    score = X[:, 0] + np.sin(3 * X[:, 1]) + 0.5 * rng.standard_normal(n)
    edges = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    y = np.searchsorted(edges, score).astype(np.float64)
    X[rng.random((n, F)) < missing] = np.nan
    return X, y


def sparse_bins_of(bins: np.ndarray, offsets: np.ndarray, unstored: str = "zero"):
    """The `histboost.data.sparse.SparseBins` holding dense bins (n, F) with slot offsets
    int64 (F+1,) (each feature's last slot its missing one), for running the backend checks
    on the sparse layout: a CSR whose values are the bins (the missing slot NaN), cut at the
    midpoints, stored where not 0 (`unstored="zero"`) or where not missing ("nan")."""
    import scipy.sparse as sp

    from ..data.binning import BinMapper
    from ..data.sparse import SparseBins, SparseMatrix

    widths = np.diff(offsets)
    X = bins.astype(np.float64)
    X[bins == widths - 1] = np.nan
    stored = ~np.isnan(X) if unstored == "nan" else X != 0
    rows, cols = np.nonzero(stored)
    S = SparseMatrix.from_any(sp.csr_matrix((X[rows, cols], (rows, cols)), shape=X.shape),
                              unstored)
    cuts = [np.append(np.arange(w - 2) + 0.5, np.inf) for w in widths]
    mapper = BinMapper(np.concatenate(cuts), np.concatenate([[0], np.cumsum(widths - 1)]),
                       int(widths.max()))
    sb = SparseBins(S, mapper)
    if not np.array_equal(sb.to_dense(), bins):
        raise AssertionError("sparse_bins_of: the sparse layout does not hold the dense bins")
    return sb
