"""The margins of rows left out of a tree's sample (`subsample`): the CPU backend traverses the
raw values on small data and the bins on large data; both give every row the same leaf, so the
model is the same whichever it takes."""

from __future__ import annotations

import numpy as np
import pytest

import histboost
from histboost.kernels.cpu import backend as cpu_backend
from histboost.tree.predictor import PackedForest


def _data(dtype):
    rng = np.random.default_rng(3)
    n = 1500
    # few distinct values: many rows equal a cut value exactly; NaNs go to the default side
    X = rng.integers(0, 12, size=(n, 5)).astype(dtype)
    X[:, 4] = rng.normal(size=n).astype(dtype)
    X[rng.random((n, 5)) < 0.1] = np.nan
    y = ((np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * 0.5 + rng.normal(size=n)) > 6)
    return X, y.astype(np.float64)


def _model(X, y, policy):
    params = {"objective": "binary:logistic", "grow_policy": policy, "max_depth": 4,
              "max_leaves": 15, "subsample": 0.6, "max_bin": 8, "nthread": 1, "seed": 5}
    return histboost.train(params, histboost.Dataset(X, label=y), 8,
                           verbose_eval=False).save_raw()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("policy", ["depthwise", "lossguide"])
def test_raw_and_binned_sample_margins_give_the_same_model(monkeypatch, dtype, policy):
    X, y = _data(dtype)
    calls = {"raw": 0, "binned": 0}
    add_raw, add_binned = PackedForest.add_margin, PackedForest.add_margin_binned

    def counted(name, fn):
        def wrapper(self, data, *args, **kwargs):
            if data.shape[0] == X.shape[0]:  # the training rows (not the intercept's call)
                calls[name] += 1
            return fn(self, data, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(PackedForest, "add_margin", counted("raw", add_raw))
    monkeypatch.setattr(PackedForest, "add_margin_binned", counted("binned", add_binned))
    on_raw = _model(X, y, policy)
    assert calls == {"raw": 8, "binned": 0}
    # the same data taken as large: the bins are traversed
    monkeypatch.setattr(cpu_backend, "_PARALLEL_MIN_ROWS", 1)
    on_bins = _model(X, y, policy)
    assert calls == {"raw": 8, "binned": 8}
    assert on_raw == on_bins
