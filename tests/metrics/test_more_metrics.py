"""Metrics beyond the first seven: against scikit-learn, NumPy references and the values
XGBoost reports for the same predictions; parametrised names, ranking metrics with query
groups, custom metrics, and metrics that do not fit the objective."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xgboost as xgb
from scipy.stats import poisson
from sklearn import metrics as skm

import histboost
from histboost.metrics import MAXIMIZE, MEAN_METRICS, finish_metric, get_metric, metric_sums

RNG = np.random.default_rng(3)
N = 300
Y_POS = RNG.gamma(2.0, 1.5, N)
P_POS = Y_POS * RNG.uniform(0.5, 1.5, N)
W = RNG.uniform(0.2, 3.0, N)
Y01 = (RNG.random(N) < 0.4).astype(float)
P01 = np.clip(0.3 * Y01 + 0.7 * RNG.random(N), 0, 1).round(2)  # ties


@pytest.mark.parametrize("w", [None, W])
def test_mean_metrics_match_sklearn_and_numpy(w):
    def avg(v):
        return float(np.average(v, weights=w))
    ref = {
        "rmsle": np.sqrt(skm.mean_squared_log_error(Y_POS, P_POS, sample_weight=w)),
        "mape": skm.mean_absolute_percentage_error(Y_POS, P_POS, sample_weight=w),
        "gamma-deviance": skm.mean_gamma_deviance(Y_POS, P_POS, sample_weight=w),
        "quantile@0.3": skm.mean_pinball_loss(Y_POS, P_POS, alpha=0.3, sample_weight=w),
        "poisson-nloglik": -avg(poisson.logpmf(np.round(Y_POS), P_POS)),
        "gamma-nloglik": avg(Y_POS / P_POS + np.log(P_POS)),
        "tweedie-nloglik@1.3": avg(-Y_POS * P_POS ** -0.3 / -0.3 + P_POS ** 0.7 / 0.7),
        "mphe@2": avg(4 * (np.sqrt(1 + ((Y_POS - P_POS) / 2) ** 2) - 1)),
        "error@0.3": avg((P01 > 0.3) != (Y01 > 0.5)),
    }
    for name, expected in ref.items():
        y = np.round(Y_POS) if name == "poisson-nloglik" else Y01 if "error" in name else Y_POS
        p = P01 if "error" in name else P_POS
        assert name in MEAN_METRICS
        np.testing.assert_allclose(get_metric(name)(y, p, w), expected, rtol=2e-5,
                                   err_msg=name)
        # distributed reduction: sums of two halves give the whole
        s = metric_sums(name, y[:100], p[:100], None if w is None else w[:100]) + metric_sums(
            name, y[100:], p[100:], None if w is None else w[100:])
        np.testing.assert_allclose(finish_metric(name, s), expected, rtol=2e-5)


@pytest.mark.parametrize("w", [None, W])
def test_aucpr_is_sklearn_average_precision(w):
    np.testing.assert_allclose(get_metric("aucpr")(Y01, P01, w),
                               skm.average_precision_score(Y01, P01, sample_weight=w))
    assert "aucpr" in MAXIMIZE


def _group_sizes(n, rng):
    sizes = []
    while sum(sizes) < n:
        sizes.append(int(rng.integers(3, 12)))
    sizes[-1] -= sum(sizes) - n
    return np.array([s for s in sizes if s > 0])


def test_ranking_metrics_match_sklearn_and_a_loop():
    rng = np.random.default_rng(4)
    group = _group_sizes(200, rng)
    rel = rng.integers(0, 4, 200).astype(float)
    score = rng.normal(size=200)
    bounds = np.r_[0, np.cumsum(group)]
    binary = (rel > 1).astype(float)
    binary[bounds[:-1]] = 1.0  # every query has a relevant row: sklearn's convention agrees
    for k in (1, 3, 5):
        sk = np.mean([skm.ndcg_score(binary[None, a:b], score[None, a:b], k=k)
                      for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
        np.testing.assert_allclose(get_metric(f"ndcg@{k}")(binary, score, None, group=group), sk)

    def loop(name, k, minus):
        out = []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            r = rel[a:b][np.argsort(-score[a:b])]
            if name == "ndcg":
                dcg = sum((2 ** r[i] - 1) / np.log2(i + 2) for i in range(min(k, r.size)))
                ideal = np.sort(r)[::-1]
                idcg = sum((2 ** ideal[i] - 1) / np.log2(i + 2) for i in range(min(k, r.size)))
                out.append(dcg / idcg if idcg else (0.0 if minus else 1.0))
            else:
                hits, ap = 0, 0.0
                for i in range(r.size):
                    if r[i] > 0:
                        hits += 1
                        ap += hits / (i + 1) if i < k else 0.0
                out.append(ap / min(hits, k, r.size) if hits else (0.0 if minus else 1.0))
        return np.mean(out)
    rel[bounds[1]:bounds[2]] = 0  # a query without relevant rows
    for name in ("ndcg", "map"):
        for k, minus in ((3, False), (5, True), (1000, False)):
            metric = f"{name}@{k}{'-' if minus else ''}"
            assert metric in MAXIMIZE
            np.testing.assert_allclose(get_metric(metric)(rel, score, None, group=group),
                                       loop(name, k, minus), err_msg=metric)


def _xgb_eval(params, X, y, metrics, w=None, group=None):
    d = xgb.DMatrix(X, y, weight=w)
    if group is not None:
        d.set_group(group)
    res = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = xgb.train({**params, "eval_metric": metrics, "nthread": 1}, d, 3,
                      evals=[(d, "t")], evals_result=res, verbose_eval=False)
    return b.predict(d), res["t"]


@pytest.mark.parametrize("objective,metrics,extra", [
    ("count:poisson", ["poisson-nloglik", "rmsle", "mape"], {}),
    ("reg:gamma", ["gamma-nloglik", "gamma-deviance", "tweedie-nloglik@1.2"], {}),
    ("reg:quantileerror", ["quantile"], {"quantile_alpha": 0.2}),
    ("reg:pseudohubererror", ["mphe"], {"huber_slope": 2.0}),
    ("binary:logistic", ["error@0.3", "error@0.7"], {}),
    ("survival:cox", ["cox-nloglik"], {}),
])
def test_values_equal_xgboost_on_its_predictions(objective, metrics, extra):
    """Our metric functions on XGBoost's predictions give the values XGBoost reports."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 3))
    y = Y01 if objective.startswith("binary") else Y_POS.copy()
    if objective == "survival:cox":
        y = np.where(rng.random(300) < 0.7, 1, -1) * Y_POS
    pred, res = _xgb_eval({"objective": objective, **extra}, X, y, metrics, w=W)
    for m in metrics:
        name = {"quantile": "quantile@0.2", "mphe": "mphe@2.0"}.get(m, m)
        mine = get_metric(name)(y, pred.astype(np.float64), W if m != "cox-nloglik" else None)
        np.testing.assert_allclose(mine, res[m][-1], rtol=2e-5, err_msg=m)


def test_ndcg_map_equal_xgboost_with_groups():
    rng = np.random.default_rng(9)
    group = _group_sizes(300, rng)
    X = rng.normal(size=(300, 3))
    rel = np.clip(np.round(X[:, 0] + rng.normal(size=300)), 0, 3)
    for labels, metrics in ((rel, ["ndcg@3", "ndcg@5-", "ndcg"]),
                            ((rel > 1).astype(float), ["map@3", "map", "map@2-"])):
        pred, res = _xgb_eval({"objective": "rank:pairwise"}, X, labels, metrics, group=group)
        for m in metrics:
            np.testing.assert_allclose(get_metric(m)(labels, pred.astype(np.float64), None,
                                                     group=group), res[m][-1], rtol=1e-5,
                                       err_msg=m)


def test_train_logs_new_metrics_and_custom_metric():
    X = RNG.normal(size=(N, 3))
    d = histboost.Dataset(X, label=Y_POS)
    res = {}

    def my_mse(pred, data):
        return "my-mse", float(np.mean((pred - data.get_label()) ** 2))
    b = histboost.train({"objective": "reg:gamma", "eval_metric": ["gamma-deviance", "rmsle"],
                         "nthread": 1}, d, 4, evals=[(d, "train")], evals_result=res,
                        custom_metric=my_mse, verbose_eval=False)
    pred = b.predict(X)
    np.testing.assert_allclose(res["train"]["gamma-deviance"][-1],
                               skm.mean_gamma_deviance(Y_POS, pred), rtol=1e-5)
    np.testing.assert_allclose(res["train"]["my-mse"][-1], np.mean((pred - Y_POS) ** 2))
    # early stopping on a maximised custom metric
    b = histboost.train({"nthread": 1}, d, 30, evals=[(d, "train")], verbose_eval=False,
                        custom_metric=lambda p, data: ("neg", -float(np.mean(np.abs(p)))),
                        maximize=True, early_stopping_rounds=2)
    assert b.best_iteration < 29


@pytest.mark.parametrize("objective,metric,match", [
    ("reg:squarederror", "cox-nloglik", "survival:cox"),
    ("reg:squarederror", "poisson-nloglik", "count:poisson"),
    ("binary:logistic", "mlogloss", "multi-class"),
    ("reg:squarederror", "ndcg@x", "integer"),
    ("reg:squarederror", "nope", "unknown eval_metric"),
])
def test_metric_not_fitting_the_objective_raises_at_start(objective, metric, match):
    d = histboost.Dataset(RNG.normal(size=(N, 2)), label=Y01)
    with pytest.raises(ValueError, match=match):
        histboost.train({"objective": objective, "eval_metric": metric}, d, 2,
                        evals=[(d, "train")])


def test_parametrised_metrics_take_the_training_parameters():
    """quantile and mphe read quantile_alpha / huber_slope from the parameters whatever the
    objective (XGBoost's rule): here huber_slope with a quantile objective."""
    X = RNG.normal(size=(N, 3))
    d = histboost.Dataset(X, label=Y_POS)
    res = {}
    b = histboost.train({"objective": "reg:quantileerror", "quantile_alpha": 0.2,
                         "huber_slope": 3.0, "eval_metric": ["quantile", "mphe"],
                         "nthread": 1}, d, 3, evals=[(d, "train")], evals_result=res,
                        verbose_eval=False)
    pred = b.predict(X)
    d_ = Y_POS - pred
    want_q = np.mean(np.where(d_ >= 0, 0.2 * d_, -0.8 * d_))
    want_h = np.mean(9.0 * (np.sqrt(1 + (d_ / 3.0) ** 2) - 1))
    np.testing.assert_allclose(res["train"]["quantile"][-1], want_q, rtol=1e-12)
    np.testing.assert_allclose(res["train"]["mphe"][-1], want_h, rtol=1e-12)
