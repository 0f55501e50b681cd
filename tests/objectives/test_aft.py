"""survival:aft: gradients and hessians against finite differences of a loss written with
scipy.stats (and closed forms), XGBoost's limits where the likelihood underflows, models and
metrics against XGBoost's, interval labels on the Dataset, and the errors."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import xgboost as xgb
from scipy import stats

import histboost
from histboost.metrics import get_metric
from histboost.objectives import get_objective
from histboost.objectives.survival import aft_grad_hess
from histboost.params import parse_params

LAWS = {"normal": stats.norm, "logistic": stats.logistic, "extreme": stats.gumbel_l}
RNG = np.random.default_rng(3)
N = 200
X = RNG.normal(size=(N, 4))
# float32 times: XGBoost stores labels as float32, so both libraries see the same values
T = np.exp(0.5 * X[:, 0] - 0.3 * X[:, 1] + 0.4 * RNG.normal(size=N)).astype(np.float32)
T = T.astype(np.float64)
KIND = RNG.integers(0, 4, N)  # 0 observed, 1 right-, 2 left-, 3 interval-censored
LOWER = np.where(KIND == 2, 0.0, T).astype(np.float64)
UPPER = np.where(KIND == 1, np.inf, np.where(KIND == 3, (T * 1.7).astype(np.float32), T))
W = RNG.uniform(0.5, 2.0, N)
SIGMA = 1.2


def _loss(law, lower, upper, m, sigma):
    """Independent negative log-likelihood (scipy.stats) of intervals at margins m."""
    dist = LAWS[law]
    exact = lower == upper
    with np.errstate(divide="ignore", invalid="ignore"):  # both branches, every row
        z_lo = (np.log(lower) - m) / sigma
        z_hi = (np.log(upper) - m) / sigma
        density = dist.logpdf(z_lo) - np.log(sigma * lower)
        mass = np.log(dist.cdf(z_hi) - dist.cdf(z_lo))
    return -np.where(exact, density, mass)


@pytest.mark.parametrize("law", sorted(LAWS))
def test_gradients_match_finite_differences(law):
    """Margins within two scales of the labels (no clipping): gradient and hessian of every
    censoring kind equal central differences of the scipy loss."""
    m = np.log(T) + SIGMA * RNG.uniform(-2, 2, N)
    g, h = aft_grad_hess(LOWER, UPPER, m, law, SIGMA)
    eps = 1e-5
    fd_g = (_loss(law, LOWER, UPPER, m + eps, SIGMA)
            - _loss(law, LOWER, UPPER, m - eps, SIGMA)) / (2 * eps)
    np.testing.assert_allclose(g, fd_g, rtol=1e-5, atol=1e-7)
    e2 = 1e-4
    fd_h = (_loss(law, LOWER, UPPER, m + e2, SIGMA) - 2 * _loss(law, LOWER, UPPER, m, SIGMA)
            + _loss(law, LOWER, UPPER, m - e2, SIGMA)) / e2 ** 2
    np.testing.assert_allclose(h, fd_h, rtol=1e-3, atol=1e-5)
    for kind in range(4):  # every censoring kind was exercised
        assert np.sum(KIND == kind) > 20
    # weighted float32 pairs of the backend
    obj = get_objective("survival:aft", 1, parse_params({
        "objective": "survival:aft", "aft_loss_distribution": law,
        "aft_loss_distribution_scale": SIGMA}))
    y = np.stack([LOWER, UPPER], axis=1)
    obj.bind(y, W)
    pairs = obj.gradient_pairs(m[:, None])
    np.testing.assert_allclose(pairs[0, :, 0], g * W, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(pairs[0, :, 1], h * W, rtol=1e-6, atol=1e-7)


def test_normal_observed_times_closed_form():
    """Normal noise, observed times: the loss is (log t - m)^2 / (2 sigma^2) + const, so the
    gradient is (m - log t) / sigma^2 and the hessian 1 / sigma^2."""
    m = RNG.normal(size=N)
    g, h = aft_grad_hess(T, T, m, "normal", SIGMA)
    np.testing.assert_allclose(g, (m - np.log(T)) / SIGMA ** 2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h, np.full(N, 1 / SIGMA ** 2), rtol=1e-12)


@pytest.mark.parametrize("law,lower,upper,z,grad,hess", [
    # label 60 scales above the margin: the likelihood underflows; the limits are the
    # derivatives' asymptotes (normal: -z / sigma and 1 / sigma^2), clipped to [-15, 15]
    ("normal", 1.0, 1.0, 60.0, -15.0, 1 / SIGMA ** 2),
    ("normal", 1.0, np.inf, 60.0, -15.0, 1 / SIGMA ** 2),
    ("normal", 0.0, 1.0, -60.0, 15.0, 1 / SIGMA ** 2),
    ("normal", 1.0, 2.0, -60.0, 15.0, 1 / SIGMA ** 2),
    # logistic: slopes +-1/sigma, curvature vanishing (floored at 1e-16)
    ("logistic", 1.0, np.inf, 800.0, -1 / SIGMA, 1e-16),
    ("logistic", 1.0, 1.0, -800.0, 1 / SIGMA, 1e-16),
    # extreme value: exp(z) blows up above, so the slope is clipped and the curvature capped
    ("extreme", 1.0, 1.0, 60.0, -15.0, 15.0),
    ("extreme", 1.0, np.inf, 60.0, -15.0, 15.0),
    ("extreme", 0.0, 1.0, -800.0, 1 / SIGMA, 1e-16),
])
def test_underflowed_likelihoods_take_the_limits(law, lower, upper, z, grad, hess):
    log_anchor = np.log(lower if lower > 0 else upper)
    m = np.array([log_anchor - SIGMA * z])
    g, h = aft_grad_hess(np.array([lower]), np.array([upper]), m, law, SIGMA)
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(h))
    np.testing.assert_allclose(g, [grad], rtol=1e-12)
    np.testing.assert_allclose(h, [hess], rtol=1e-12)


def _xgb_dmatrix(weight=None):
    d = xgb.DMatrix(X, weight=weight)
    d.set_float_info("label_lower_bound", LOWER)
    d.set_float_info("label_upper_bound", UPPER)
    return d


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("law", sorted(LAWS))
def test_same_model_and_metrics_as_xgboost(law, weighted):
    """One bin per distinct value (200 rows, 256 bins): XGBoost's intercept (log 0.5), its
    first trees, and its aft-nloglik and interval-regression-accuracy every round."""
    w = W if weighted else None
    metrics = ["interval-regression-accuracy", "aft-nloglik"]
    prm = {"objective": "survival:aft", "aft_loss_distribution": law,
           "aft_loss_distribution_scale": SIGMA, "max_depth": 3, "eta": 0.3, "max_bin": 256,
           "eval_metric": metrics, "nthread": 1}
    res_x, res_h = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = _xgb_dmatrix(w)
        bx = xgb.train({**prm, "tree_method": "hist"}, d, 3, evals=[(d, "train")],
                       evals_result=res_x, verbose_eval=False)
    dh = histboost.Dataset(X, weight=w, label_lower_bound=LOWER, label_upper_bound=UPPER)
    bh = histboost.train(prm, dh, 3, evals=[(dh, "train")], evals_result=res_h,
                         verbose_eval=False)
    base = float(json.loads(bx.save_config())["learner"]["learner_model_param"]["base_score"]
                 .strip("[]"))
    np.testing.assert_allclose(bh.base_margin[0], np.log(base), rtol=1e-7)
    np.testing.assert_allclose(bh.predict(X, output_margin=True),
                               bx.predict(xgb.DMatrix(X), output_margin=True),
                               rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(bh.predict(X), bx.predict(xgb.DMatrix(X)), rtol=1e-5)
    for m in metrics:
        np.testing.assert_allclose(res_h["train"][m], res_x["train"][m], rtol=1e-6, atol=1e-7)


def test_metrics_against_references():
    m = np.log(T) + RNG.normal(size=N)
    y = np.stack([LOWER, UPPER], axis=1)
    for law in LAWS:
        want = np.average(np.minimum(_loss(law, LOWER, UPPER, m, SIGMA), -np.log(1e-12)),
                          weights=W)
        got = get_metric(f"aft-nloglik@{law}:{SIGMA}")(y, m, W)
        np.testing.assert_allclose(got, want, rtol=1e-9)
    inside = (np.exp(m) >= LOWER) & (np.exp(m) <= UPPER)
    assert get_metric("interval-regression-accuracy")(y, m, None) == inside.mean()
    with pytest.raises(ValueError, match="distribution"):
        get_metric("aft-nloglik@weibull:1")


def test_aft_metric_takes_the_training_scale():
    """aft-nloglik logged by train() is the metric at the model's distribution and scale."""
    d = histboost.Dataset(X, label_lower_bound=LOWER, label_upper_bound=UPPER)
    res = {}
    b = histboost.train({"objective": "survival:aft", "aft_loss_distribution": "logistic",
                         "aft_loss_distribution_scale": 2.0, "nthread": 1, "max_depth": 2},
                        d, 2, evals=[(d, "train")], evals_result=res, verbose_eval=False)
    m = b.predict(X, output_margin=True)
    want = np.mean(_loss("logistic", LOWER, UPPER, m, 2.0))
    np.testing.assert_allclose(res["train"]["aft-nloglik"][-1], want, rtol=1e-9)
    np.testing.assert_allclose(b.predict(X), np.exp(m), rtol=1e-12)
    loaded = histboost.Booster(model_file=bytearray(b.save_raw()))
    assert loaded.params["aft_loss_distribution"] == "logistic"
    np.testing.assert_array_equal(loaded.predict(X), b.predict(X))


def test_bounds_set_one_at_a_time_as_with_set_float_info():
    d = histboost.Dataset(X)
    d.set_float_info("label_lower_bound", LOWER)
    with pytest.raises(ValueError, match="no label: survival:aft needs interval labels"):
        histboost.train({"objective": "survival:aft"}, d, 1)
    d.set_float_info("label_upper_bound", UPPER)
    np.testing.assert_array_equal(d.get_float_info("label_upper_bound"), UPPER)
    full = histboost.Dataset(X, label_lower_bound=LOWER, label_upper_bound=UPPER)
    p = {"objective": "survival:aft", "nthread": 1, "max_depth": 2}
    assert histboost.train(p, d, 2).save_raw() == histboost.train(p, full, 2).save_raw()


@pytest.mark.parametrize("lower,upper,match", [
    (LOWER, None, "both bounds"),
    (-LOWER - 1, UPPER, "label_lower_bound must be >= 0"),
    (LOWER, np.where(KIND == 1, np.nan, UPPER), "NaN"),
    (LOWER + 1, LOWER + 0.5, "must be >= label_lower_bound"),
    (np.where(KIND == 1, np.inf, LOWER), UPPER, "label_lower_bound contains NaN or infinite"),
    (LOWER, np.zeros(N), "label_upper_bound must be > 0"),
])
def test_bad_interval_labels_raise(lower, upper, match):
    with pytest.raises(ValueError, match=match):
        histboost.Dataset(X, label_lower_bound=lower, label_upper_bound=upper)


def test_objective_and_metric_mismatches_raise():
    d = histboost.Dataset(X, label=T, label_lower_bound=LOWER, label_upper_bound=UPPER)
    with pytest.raises(ValueError, match="'rmse'.*labels are intervals"):
        histboost.train({"objective": "survival:aft", "eval_metric": "rmse"}, d, 1,
                        evals=[(d, "train")])
    with pytest.raises(ValueError, match="'aft-nloglik'.*survival:aft"):
        histboost.train({"eval_metric": "aft-nloglik"}, d, 1, evals=[(d, "train")])
    with pytest.raises(ValueError, match="aft_loss_distribution"):
        parse_params({"objective": "survival:aft", "aft_loss_distribution": "weibull"})
    with pytest.raises(ValueError, match="aft_loss_distribution_scale"):
        parse_params({"objective": "survival:aft", "aft_loss_distribution_scale": 0})


def test_distributed_training_takes_aft():
    # the models against one process: tests/dist_training/test_survival.py
    from histboost.distributed.training import check_supported

    check_supported(parse_params({"objective": "survival:aft"}))
    check_supported(parse_params({"objective": "survival:aft", "base_score": 1.0}))
