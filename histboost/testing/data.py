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
