"""Built-in objectives of `histboost.train`: custom objectives written in NumPy give the same
models as the built-in ones, intercepts and fits of squared error, logistic / logitraw and
softprob / softmax."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit, softmax
from sklearn import metrics as skm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _training_helpers import X_BIN, X_MC, X_REG, Y_BIN, Y_MC, Y_REG, _json, _train  # noqa: E402

# -- objectives ------------------------------------------------------------------------------

def _np_pairs(name, m, y, w, K):
    """NumPy gradient / hessian (K, n) of each built-in objective (XGBoost's conventions)."""
    if name == "reg:squarederror":
        g, h = (m[:, 0] - y)[None], np.ones((1, y.size))
    elif name.startswith("binary:"):
        p = expit(m[:, 0])
        g, h = (p - y)[None], np.maximum(p * (1 - p), 1e-16)[None]
    else:
        p = softmax(m, axis=1)
        onehot = np.eye(K)[y.astype(int)]
        g, h = (p - onehot).T, np.maximum(2 * p * (1 - p), 1e-16).T
    return g * w, h * w


def _custom(name, K):
    def obj(preds, dtrain):
        y, w = dtrain.get_label(), np.ones(dtrain.num_row())
        m = preds.reshape(len(y), K)
        g, h = _np_pairs(name, m, y, w, K)
        return g.T.reshape(preds.shape), h.T.reshape(preds.shape)
    return obj


@pytest.mark.parametrize("name,K,X,y,base", [
    ("reg:squarederror", 1, X_REG, Y_REG, 0.0),
    ("binary:logistic", 1, X_BIN, Y_BIN, 0.5),
    ("multi:softprob", 3, X_MC, Y_MC, 0.0),
])
def test_custom_objective_equals_builtin(name, K, X, y, base):
    """A callable returning the built-in loss's gradients grows the same trees."""
    common = {"max_depth": 3, "eta": 0.3, "num_class": K}
    builtin = _train({**common, "objective": name, "base_score": base}, X, y, 6)
    custom = _train({**common, "base_score": 0.0, "disable_default_eval_metric": True}, X, y, 6,
                    obj=_custom(name, K))
    assert custom.num_boosted_rounds() == 6 and len(custom.trees) == 6 * K
    for a, b in zip(builtin.trees, custom.trees, strict=True):
        np.testing.assert_array_equal(a.split_feature, b.split_feature)
        np.testing.assert_array_equal(a.split_bin, b.split_bin)
    mb = builtin.predict(X, output_margin=True)
    mc = custom.predict(X, output_margin=True)
    np.testing.assert_allclose(mc, mb, rtol=1e-5, atol=1e-6)
    # a custom model predicts raw margins
    np.testing.assert_array_equal(custom.predict(X), mc)


def test_squared_error_intercept_and_fit():
    w = np.random.default_rng(1).random(Y_REG.size)
    b = _train({"max_depth": 4}, X_REG, Y_REG, 30, weight=w)
    assert b.base_margin[0] == pytest.approx(np.average(Y_REG, weights=w), rel=1e-12)
    assert skm.mean_squared_error(Y_REG, b.predict(X_REG)) < 0.3 * np.var(Y_REG)
    np.testing.assert_array_equal(b.predict(X_REG), b.predict(X_REG, output_margin=True))


def test_logistic_and_logitraw():
    params = {"max_depth": 3, "eta": 0.3}
    lg = _train({**params, "objective": "binary:logistic"}, X_BIN, Y_BIN, 8)
    raw = _train({**params, "objective": "binary:logitraw"}, X_BIN, Y_BIN, 8)
    p0 = Y_BIN.mean()
    assert lg.base_margin[0] == pytest.approx(np.log(p0 / (1 - p0)), rel=1e-12)
    margin = lg.predict(X_BIN, output_margin=True)
    np.testing.assert_allclose(lg.predict(X_BIN), expit(margin), rtol=1e-14)
    # same loss, same trees; logitraw predicts the margin
    assert _json(lg) == _json(raw)
    np.testing.assert_array_equal(raw.predict(X_BIN), margin)
    assert skm.roc_auc_score(Y_BIN, margin) > 0.8


def test_softprob_and_softmax():
    params = {"max_depth": 3, "eta": 0.3, "num_class": 3}
    prob = _train({**params, "objective": "multi:softprob"}, X_MC, Y_MC, 6)
    hard = _train({**params, "objective": "multi:softmax"}, X_MC, Y_MC, 6)
    assert _json(prob) == _json(hard)
    P = prob.predict(X_MC)
    assert P.shape == (len(Y_MC), 3)
    np.testing.assert_allclose(P, softmax(prob.predict(X_MC, output_margin=True), axis=1),
                               rtol=1e-12)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    labels = hard.predict(X_MC)
    assert labels.shape == (len(Y_MC),)
    np.testing.assert_array_equal(labels, np.argmax(P, axis=1))
    assert skm.accuracy_score(Y_MC, labels) > 0.6
