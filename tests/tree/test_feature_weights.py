"""feature_weights (issue 16): weighted column sampling."""

from __future__ import annotations

import numpy as np
import pytest

import histboost


def _data(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, X @ np.array([1.0, 1.0, 1.0, 1.0]) + rng.normal(scale=0.1, size=n)


def _used(booster):
    feats = []
    for t in booster.trees:
        d = t.to_dict()
        feats += [int(f) for f, lc in zip(d["split_feature"], d["left_child"], strict=True)
                  if lc != -1]
    return np.bincount(feats, minlength=4)


def test_zero_weight_features_never_sampled():
    X, y = _data()
    b = histboost.train({"nthread": 1, "colsample_bytree": 0.5, "feature_weights": [1, 0, 2, 0],
                         "max_depth": 3}, histboost.Dataset(X, label=y), 20)
    used = _used(b)
    assert used[1] == used[3] == 0 and used[0] > 0 and used[2] > 0


def test_weights_shift_the_sampling():
    X, y = _data()
    b = histboost.train({"nthread": 1, "colsample_bynode": 0.25, "max_depth": 2,
                         "feature_weights": np.array([20.0, 1.0, 1.0, 1.0])},
                        histboost.Dataset(X, label=y), 40)
    used = _used(b)
    assert used[0] > 3 * used[1:].max(), used


def test_uniform_without_sampling_and_errors():
    X, y = _data(n=300)
    d = histboost.Dataset(X, label=y)
    a = histboost.train({"nthread": 1, "feature_weights": [1, 2, 3, 4]}, d, 5)
    b = histboost.train({"nthread": 1}, d, 5)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))  # no sampling: no effect
    c = histboost.train({"nthread": 1, "colsample_bynode": 0.5, "feature_weights": "[1, 2, 3, 4]"},
                        d, 5)
    e = histboost.train({"nthread": 1, "colsample_bynode": 0.5, "feature_weights": (1, 2, 3, 4)},
                        d, 5)
    np.testing.assert_array_equal(c.predict(X), e.predict(X))
    with pytest.raises(ValueError, match="entries"):
        histboost.train({"feature_weights": [1, 2]}, d, 1)
    with pytest.raises(ValueError, match=">= 0"):
        histboost.train({"feature_weights": [1, -2, 0, 0]}, d, 1)
