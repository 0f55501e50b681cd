"""scale_pos_weight (issue 16): XGBoost's model on identical bins, intercept included."""

from __future__ import annotations

import numpy as np
import pytest

import histboost


def _data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 30, size=(n, 4)).astype(np.float64)
    y = (X[:, 0] / 30 + np.sin(X[:, 1] / 5) + rng.normal(scale=0.5, size=n) > 1.0)
    return X, y.astype(np.float64)


@pytest.mark.parametrize("extra", [{}, {"base_score": 0.4}, {"objective": "binary:logitraw"}])
def test_scale_pos_weight_same_model_as_xgboost(extra):
    xgb = pytest.importorskip("xgboost")
    X, y = _data()
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=y.size)
    params = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3,
              "scale_pos_weight": 3.5, **extra}
    ours = histboost.train({"nthread": 1, **params}, histboost.Dataset(X, label=y, weight=w),
                           15).predict(X)
    theirs = xgb.train({"nthread": 1, "tree_method": "hist", **params},
                       xgb.DMatrix(X, label=y, weight=w), 15).predict(xgb.DMatrix(X))
    np.testing.assert_allclose(ours, theirs, atol=2e-5)


def test_scale_pos_weight_equals_row_weights_given_base_score():
    X, y = _data(seed=2)
    params = {"objective": "binary:logistic", "nthread": 1, "base_score": 0.5}
    a = histboost.train({**params, "scale_pos_weight": 2.0}, histboost.Dataset(X, label=y), 10)
    b = histboost.train(params, histboost.Dataset(X, label=y, weight=np.where(y == 1, 2.0, 1.0)),
                        10)
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-12)


def test_scale_pos_weight_errors():
    d = histboost.Dataset(np.zeros((4, 1)), label=np.zeros(4))
    with pytest.raises(ValueError, match="binary:logistic"):
        histboost.train({"scale_pos_weight": 2.0}, d, 1)
    with pytest.raises(ValueError, match="> 0"):
        histboost.train({"objective": "binary:logistic", "scale_pos_weight": -1}, d, 1)
    histboost.train({"objective": "reg:squarederror", "scale_pos_weight": 1}, d, 1)
