"""Evaluation metrics: the metric functions and the per-round `evals_result` of
`histboost.train` against scikit-learn, and the default metric of each objective."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit, softmax
from sklearn import metrics as skm

import histboost
from histboost.metrics import METRICS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _training_helpers import X_BIN, X_MC, X_REG, Y_BIN, Y_MC, Y_REG  # noqa: E402

# -- metrics ---------------------------------------------------------------------------------

def _sk_metric(name, y, p, w):
    if name == "rmse":
        return np.sqrt(skm.mean_squared_error(y, p, sample_weight=w))
    if name == "mae":
        return skm.mean_absolute_error(y, p, sample_weight=w)
    if name == "logloss":
        return skm.log_loss(y, p, sample_weight=w, labels=[0, 1])
    if name == "error":
        return 1 - skm.accuracy_score(y, (p > 0.5).astype(float), sample_weight=w)
    if name == "auc":
        return skm.roc_auc_score(y, p, sample_weight=w)
    if name == "mlogloss":
        return skm.log_loss(y, p, sample_weight=w, labels=list(range(p.shape[1])))
    if name == "merror":
        return 1 - skm.accuracy_score(y, np.argmax(p, axis=1), sample_weight=w)
    raise AssertionError(name)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), n=st.integers(2, 60), ties=st.sampled_from([0, 1, 2]),
       weighted=st.booleans())
def test_metric_functions_match_sklearn(seed, n, ties, weighted):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(float)
    y[:2] = [0, 1]
    p = rng.uniform(0.01, 0.99, n)
    if ties:  # few distinct scores: many tied groups straddling both classes
        p = np.round(p, ties - 1) * 0.98 + 0.01
    w = rng.uniform(0.1, 3, n) if weighted else None
    for name in ("logloss", "error", "auc"):
        assert METRICS[name](y, p, w) == pytest.approx(_sk_metric(name, y, p, w), rel=1e-9,
                                                       abs=1e-12), name
    yr, pr = rng.normal(size=n), rng.normal(size=n)
    for name in ("rmse", "mae"):
        assert METRICS[name](yr, pr, w) == pytest.approx(_sk_metric(name, yr, pr, w),
                                                         rel=1e-9), name
    K = 4
    yk = rng.integers(0, K, n).astype(float)
    pk = softmax(rng.normal(size=(n, K)) * (0 if ties == 2 else 1), axis=1)
    if ties == 2:  # all probabilities equal: argmax ties go to the first class
        pk[:, 0] += 1e-3
        pk /= pk.sum(axis=1, keepdims=True)
    for name in ("mlogloss", "merror"):
        assert METRICS[name](yk, pk, w) == pytest.approx(_sk_metric(name, yk, pk, w),
                                                         rel=1e-9), name


def test_auc_all_tied_is_half_and_single_class_is_nan():
    y = np.array([0, 1, 0, 1, 1.0])
    assert METRICS["auc"](y, np.full(5, 0.3)) == pytest.approx(0.5)
    assert np.isnan(METRICS["auc"](np.ones(4), np.arange(4.0)))


@pytest.mark.parametrize("objective,metrics,X,y", [
    ("reg:squarederror", ["rmse", "mae"], X_REG, Y_REG),
    ("binary:logistic", ["logloss", "error", "auc"], X_BIN, Y_BIN),
    ("binary:logitraw", ["auc", "logloss", "error"], X_BIN, Y_BIN),
    ("multi:softprob", ["mlogloss", "merror"], X_MC, Y_MC),
])
def test_evals_result_matches_sklearn_every_round(objective, metrics, X, y):
    """Each logged value equals scikit-learn's metric of the staged predictions, on the
    training set (margins from the partition) and a weighted validation set (margins added
    tree by tree)."""
    n = len(y)
    cut = 2 * n // 3
    rng = np.random.default_rng(5)
    wv = rng.uniform(0.2, 2.0, n - cut)
    dtr = histboost.Dataset(X[:cut], label=y[:cut])
    dva = histboost.Dataset(X[cut:], label=y[cut:], weight=wv)
    res = {"stale": {}}
    params = {"objective": objective, "eval_metric": metrics, "max_depth": 3, "nthread": 1,
              "num_class": 3 if objective.startswith("multi") else 1}
    b = histboost.train(params, dtr, 5, evals=[(dtr, "train"), (dva, "valid")],
                        evals_result=res, verbose_eval=False)
    assert list(res) == ["train", "valid"]
    for name, Xs, ys, ws in (("train", X[:cut], y[:cut], None), ("valid", X[cut:], y[cut:], wv)):
        assert list(res[name]) == metrics
        for m in metrics:
            assert len(res[name][m]) == 5
            for r in range(5):
                margin = b.predict(Xs, output_margin=True, iteration_range=(0, r + 1))
                if objective.startswith("binary:"):
                    pred = expit(margin)
                elif objective.startswith("multi:"):
                    pred = softmax(margin, axis=1)
                else:
                    pred = margin
                want = _sk_metric(m, ys, pred, ws)
                assert res[name][m][r] == pytest.approx(want, rel=1e-9, abs=1e-12), (name, m, r)


@pytest.mark.parametrize("objective,default", [("reg:squarederror", "rmse"),
                                               ("binary:logistic", "logloss"),
                                               ("binary:logitraw", "auc"),
                                               ("multi:softmax", "mlogloss")])
def test_default_metric(objective, default):
    X, y = (X_MC, Y_MC) if objective.startswith("multi") else (X_BIN, Y_BIN)
    res = {}
    d = histboost.Dataset(X, label=y)
    histboost.train({"objective": objective, "num_class": 3 if "multi" in objective else 1,
                     "nthread": 1, "max_depth": 2}, d, 2, evals=[(d, "t")], evals_result=res,
                    verbose_eval=False)
    assert list(res["t"]) == [default]
