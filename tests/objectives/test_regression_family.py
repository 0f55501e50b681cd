"""Regression-family objectives (absolute, pseudo-Huber, quantile, Poisson, Gamma, Tweedie,
squared log error, Cox): gradients against finite differences of independently written
losses, models against XGBoost's with one bin per distinct value, leaf refresh, deviances."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import xgboost as xgb

import histboost
from histboost.objectives import get_objective
from histboost.objectives.regression import weighted_quantile
from histboost.params import parse_params

RNG = np.random.default_rng(1)
N = 200
X = RNG.normal(size=(N, 4))
MU = np.exp(0.5 * X[:, 0] - 0.3 * X[:, 1])
W = RNG.uniform(0.5, 2, N)
LABELS = {
    "reg:absoluteerror": X[:, 0] * 2 + RNG.laplace(size=N),
    "reg:pseudohubererror": X[:, 0] * 2 + RNG.standard_t(2, size=N),
    "reg:quantileerror": X[:, 0] + RNG.normal(size=N),
    "count:poisson": RNG.poisson(MU).astype(float),
    "reg:gamma": RNG.gamma(2.0, MU / 2.0),
    "reg:tweedie": RNG.poisson(MU) * RNG.gamma(2, 1, size=N),
    "reg:squaredlogerror": MU * 3,
    "survival:cox": np.where(RNG.random(N) < 0.7, 1, -1) * RNG.exponential(1 / MU),
}
PARAMS = {"quantile_alpha": 0.3, "tweedie_variance_power": 1.4, "huber_slope": 1.5}


def _loss(name, m, y):
    """Independent float64 losses (per row, or the total for Cox)."""
    if name == "reg:absoluteerror":
        return np.abs(m - y)
    if name == "reg:quantileerror":
        d = y - m
        return np.where(d >= 0, 0.3 * d, -0.7 * d)
    if name == "reg:pseudohubererror":
        return 1.5 ** 2 * (np.sqrt(1 + ((m - y) / 1.5) ** 2) - 1)
    if name == "count:poisson":
        return np.exp(m) - y * m
    if name == "reg:gamma":
        return y * np.exp(-m) + m
    if name == "reg:tweedie":
        rho = 1.4
        return -y * np.exp((1 - rho) * m) / (1 - rho) + np.exp((2 - rho) * m) / (2 - rho)
    if name == "reg:squaredlogerror":
        return 0.5 * (np.log1p(m) - np.log1p(y)) ** 2
    if name == "survival:cox":  # continuous times: no ties
        t, e = np.abs(y), y > 0
        risk = np.array([np.exp(m[t >= ti]).sum() for ti in t])
        return -np.sum((m - np.log(risk))[e])
    raise KeyError(name)


@pytest.mark.parametrize("name", sorted(LABELS))
def test_gradients_match_finite_differences(name):
    y = LABELS[name]
    obj = get_objective(name, 1, parse_params({"objective": name, "max_delta_step": 0.0,
                                               **PARAMS}))
    m = obj.base_margin(y, None)[0] + 0.3 * RNG.normal(size=N)
    if name == "reg:squaredlogerror":
        m = np.log1p(y) * 0.8 + 0.1  # near the labels: the hessian is not clamped
        m = np.expm1(m)
    g, h = obj.weighted_grad_hess(m, y, None)
    eps = 1e-5
    if name == "survival:cox":
        fd_g = np.array([(_loss(name, m + eps * e, y) - _loss(name, m - eps * e, y)) / (2 * eps)
                         for e in np.eye(N)])
        e2 = 1e-3  # the total loss is large: a wider step against cancellation
        fd_h = np.array([(_loss(name, m + e2 * e, y) - 2 * _loss(name, m, y)
                          + _loss(name, m - e2 * e, y)) / e2 ** 2 for e in np.eye(N)[:20]])
        np.testing.assert_allclose(g, fd_g, atol=1e-6)
        np.testing.assert_allclose(h[:20], fd_h, rtol=1e-3, atol=1e-4)
    else:
        fd_g = (_loss(name, m + eps, y) - _loss(name, m - eps, y)) / (2 * eps)
        np.testing.assert_allclose(g, fd_g, rtol=1e-5, atol=1e-6)
        if name not in ("reg:absoluteerror", "reg:quantileerror"):  # piecewise linear: h = 1
            e2 = 1e-4
            fd_h = (_loss(name, m + e2, y) - 2 * _loss(name, m, y) + _loss(name, m - e2, y)) / e2**2
            np.testing.assert_allclose(h, fd_h, rtol=1e-3, atol=1e-5)
    # float32 pairs of the backend: weights multiply both
    obj.bind(y, W)
    pairs = obj.gradient_pairs(m[:, None])
    np.testing.assert_allclose(pairs[0, :, 0], g * W, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(pairs[0, :, 1], h * W, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name", sorted(LABELS))
def test_same_model_as_xgboost(name, weighted):
    """One bin per distinct value (200 rows, 256 bins): the intercept and the first trees
    equal XGBoost's, leaf refresh (absolute / quantile error) included."""
    y, w = LABELS[name], (W if weighted else None)
    prm = {"objective": name, "max_depth": 3, "eta": 0.3, "max_bin": 256, **PARAMS}
    xp = {k: v for k, v in prm.items() if k != "quantile_alpha" or name == "reg:quantileerror"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bx = xgb.train({**xp, "tree_method": "hist", "nthread": 1},
                       xgb.DMatrix(X, y, weight=w), 3)
    bh = histboost.train({**prm, "nthread": 1}, histboost.Dataset(X, label=y, weight=w), 3,
                         verbose_eval=False)
    base = float(json.loads(bx.save_config())["learner"]["learner_model_param"]["base_score"]
                 .strip("[]"))
    np.testing.assert_allclose(bh.base_margin[0], bh.objective.score_to_margin(base)[0],
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bh.predict(X, output_margin=True),
                               bx.predict(xgb.DMatrix(X), output_margin=True),
                               rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(bh.predict(X), bx.predict(xgb.DMatrix(X)), rtol=1e-5,
                               atol=2e-6)


@pytest.mark.parametrize("policy", ["lossguide", "oblivious"])
def test_leaf_refresh_is_weighted_quantile_of_residuals(policy):
    y = LABELS["reg:quantileerror"]
    b = histboost.train({"objective": "reg:quantileerror", "quantile_alpha": 0.3,
                         "grow_policy": policy, "max_depth": 2, "max_leaves": 4, "eta": 1.0,
                         "nthread": 1}, histboost.Dataset(X, label=y, weight=W), 1,
                        verbose_eval=False)
    leaf = b.predict(X, pred_leaf=True)[:, 0]
    m = b.predict(X)
    for j in np.unique(leaf):
        rows = leaf == j
        q = weighted_quantile(y[rows] - b.base_margin[0], 0.3, W[rows])
        np.testing.assert_allclose(m[rows], b.base_margin[0] + q)


def test_quantile_model_covers_its_quantile():
    rng = np.random.default_rng(5)
    Xq = rng.normal(size=(3000, 2))
    yq = Xq[:, 0] + rng.normal(size=3000)
    for a in (0.1, 0.9):
        b = histboost.train({"objective": "reg:quantileerror", "quantile_alpha": a,
                             "nthread": 1, "max_depth": 3}, histboost.Dataset(Xq, label=yq),
                            30, verbose_eval=False)
        assert abs(np.mean(yq <= b.predict(Xq)) - a) < 0.03


@pytest.mark.parametrize("name,metric", [("count:poisson", "poisson-nloglik"),
                                         ("reg:gamma", "gamma-deviance"),
                                         ("reg:tweedie", "tweedie-nloglik@1.5")])
def test_deviance_within_one_percent_of_xgboost(name, metric):
    """Data drawn from the objective's law (log-linear mean): held-out deviance of 40 rounds
    within 1% of XGBoost's at the same parameters."""
    rng = np.random.default_rng(7)
    n = 6000
    Xd = rng.normal(size=(n, 5))
    mu = np.exp(0.4 * Xd[:, 0] - 0.3 * Xd[:, 1] + 0.2 * Xd[:, 2] * Xd[:, 3])
    if name == "count:poisson":
        yd = rng.poisson(mu).astype(float)
    elif name == "reg:gamma":
        yd = rng.gamma(2.0, mu / 2.0)
    else:
        yd = rng.poisson(mu) * rng.gamma(3.0, 1 / 3.0, size=n)
    tr, te = slice(0, 4000), slice(4000, n)
    prm = {"objective": name, "max_depth": 4, "eta": 0.1, "eval_metric": metric, "nthread": 1}
    res_h, res_x = {}, {}
    histboost.train(prm, histboost.Dataset(Xd[tr], label=yd[tr]), 40,
                    evals=[(histboost.Dataset(Xd[te], label=yd[te]), "test")],
                    evals_result=res_h, verbose_eval=False)
    xgb.train({**prm, "tree_method": "hist"}, xgb.DMatrix(Xd[tr], yd[tr]), 40,
              evals=[(xgb.DMatrix(Xd[te], yd[te]), "test")], evals_result=res_x,
              verbose_eval=False)
    h, x = res_h["test"][metric][-1], res_x["test"][metric][-1]
    assert abs(h - x) <= 0.01 * abs(x), (h, x)


@pytest.mark.parametrize("name,bad", [("count:poisson", -1.0), ("reg:gamma", 0.0),
                                      ("reg:tweedie", -0.5), ("reg:squaredlogerror", -1.0)])
def test_labels_out_of_domain_raise(name, bad):
    y = np.abs(LABELS["reg:gamma"]).copy()
    y[3] = bad
    with pytest.raises(ValueError, match="labels must be"):
        histboost.train({"objective": name}, histboost.Dataset(X, label=y), 1)


@pytest.mark.parametrize("params,match", [
    ({"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.9]}, "one quantile"),
    ({"objective": "reg:tweedie", "tweedie_variance_power": 2.0}, "tweedie_variance_power"),
    ({"objective": "reg:pseudohubererror", "huber_slope": 0.0}, "huber_slope"),
])
def test_objective_parameter_errors(params, match):
    with pytest.raises(ValueError, match=match):
        parse_params(params)


def test_poisson_max_delta_step_default_and_aliases():
    assert parse_params({"objective": "poisson"}).max_delta_step == 0.7
    assert parse_params({"objective": "count:poisson", "max_delta_step": 0}).max_delta_step == 0
    assert parse_params({"objective": "l1"}).objective == "reg:absoluteerror"
    assert parse_params({"objective": "quantile"}).objective == "reg:quantileerror"
