"""`histboost.train`: objectives, metrics, grow policies, regularisation, sampling, quantised
gradients, continued training, early stopping, eval logs, callbacks, base margins, weights and
input types, against NumPy / brute-force references (`histboost.testing`) and scikit-learn."""

from __future__ import annotations

import json
import re

import numba as nb
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit, softmax
from sklearn import metrics as skm

import histboost
from histboost.callback import EarlyStopping, TrainingCallback
from histboost.metrics import METRICS
from histboost.testing import model_reference as mref
from histboost.testing import reference as ref
from histboost.testing.data import make_classification, make_regression
from histboost.testing.threads import forced_paths

F = 5
X_REG, Y_REG = make_regression(400, F, seed=11, missing=0.1)
X_BIN, Y_BIN = make_classification(600, F, n_classes=2, seed=12)
X_MC, Y_MC = make_classification(450, F, n_classes=3, seed=13)


def _train(params, X, y, rounds=5, weight=None, base_margin=None, **kw):
    p = {"nthread": 1, "max_bin": 64, "seed": 0, **params}
    kw.setdefault("verbose_eval", False)
    d = histboost.Dataset(X, label=y, weight=weight, base_margin=base_margin)
    return histboost.train(p, d, rounds, **kw)


def _json(b):
    return [json.loads(s) for s in b.get_dump(dump_format="json")]


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


# -- grow policies ---------------------------------------------------------------------------

REG = ref.Reg(reg_lambda=1.0, reg_alpha=0.2, min_child_weight=0.5, min_data_in_leaf=3)


def _exact_problem(seed=5, n=200, missing=0.15, max_bin=8):
    """Squared error at margin 0 with labels on a 1/64 grid: float32 gradients are exact, so
    the engine and the float64 brute-force reference see the same numbers."""
    X, y = make_regression(n, 3, seed=seed, missing=missing)
    y = np.round(y * 64) / 64
    d = histboost.Dataset(X, label=y, max_bin=max_bin).construct()
    return X, y, d


def _ref_params(reg=REG, **kw):
    return {"learning_rate": 0.5, "base_score": 0.0, "max_bin": 8, "nthread": 1,
            "reg_lambda": reg.reg_lambda, "reg_alpha": reg.reg_alpha,
            "min_child_weight": reg.min_child_weight, "min_data_in_leaf": reg.min_data_in_leaf,
            "max_delta_step": reg.max_delta_step, **kw}


@pytest.mark.parametrize("max_leaves", [2, 3, 5, 9])
def test_lossguide_matches_best_first_reference(max_leaves):
    X, y, d = _exact_problem()
    b = histboost.train(_ref_params(grow_policy="lossguide", max_leaves=max_leaves,
                                    max_depth=0), d, 1, verbose_eval=False)
    want = mref.grow_lossguide(d.bins, -y, np.ones_like(y), d.bin_mapper.n_bins, REG,
                               max_leaves, 0.5)
    np.testing.assert_allclose(b.predict(X), want, rtol=1e-9, atol=1e-12)
    assert b.trees[0].n_leaves == max_leaves


@pytest.mark.parametrize("seed,missing", [(5, 0.15), (6, 0.0), (7, 0.4)])
def test_oblivious_matches_level_reference(seed, missing):
    """Each level's shared split maximises the gain summed over the level's nodes."""
    X, y, d = _exact_problem(seed=seed, missing=missing)
    b = histboost.train(_ref_params(grow_policy="oblivious", max_depth=3), d, 1,
                        verbose_eval=False)
    levels, values, path = mref.grow_oblivious(d.bins, -y, np.ones_like(y),
                                               d.bin_mapper.n_bins, REG, 3, 0.5)
    t = _json(b)[0]
    assert t["kind"] == "oblivious"
    got = list(zip(t["level_feature"], t["level_bin"], t["level_default_left"], strict=True))
    assert got == [lv[:3] for lv in levels]
    np.testing.assert_allclose(t["level_gain"], [lv[3] for lv in levels], rtol=1e-9)
    np.testing.assert_allclose(b.predict(X), values, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(b.predict(X, pred_leaf=True)[:, 0], path)


def test_oblivious_trees_have_one_split_per_level():
    b = _train({"objective": "binary:logistic", "grow_policy": "oblivious", "max_depth": 4},
               X_BIN, Y_BIN, 6)
    X = X_BIN
    for t, tree in zip(_json(b), b.trees, strict=True):
        D = len(t["level_feature"])
        assert 1 <= D <= 4 and tree.is_oblivious and tree.n_leaves == 2 ** D
        for key in ("level_bin", "level_threshold", "level_default_left", "level_gain"):
            assert len(t[key]) == D
        # every row at level d is tested on the same (feature, threshold): its bit path is
        # the concatenation of the D independent tests
        leaves = mref.tree_leaves(t, X)
        for lv in range(D):
            v = X[:, t["level_feature"][lv]]
            right = np.where(np.isnan(v), not t["level_default_left"][lv],
                             v > t["level_threshold"][lv])
            np.testing.assert_array_equal((leaves >> (D - 1 - lv)) & 1, right)
        # leaf counts recorded in the tree are the training rows in each bit path
        np.testing.assert_array_equal(np.bincount(leaves, minlength=2 ** D), t["leaf_count"])


def test_lossguide_respects_max_leaves_and_depth():
    X, y = make_regression(1500, F, seed=3)
    for ml, md in [(7, 0), (12, 3), (31, 0)]:
        b = _train({"grow_policy": "lossguide", "max_leaves": ml, "max_depth": md}, X, y, 4)
        leaves = [t.n_leaves for t in b.trees]
        assert max(leaves) <= ml
        if md == 0:
            assert max(leaves) == ml
        else:
            assert max(t.depth for t in b.trees) <= md
            assert max(leaves) <= min(ml, 2 ** md)


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_depthwise_respects_max_depth(depth):
    X, y = make_regression(1500, F, seed=4)
    b = _train({"max_depth": depth}, X, y, 3)
    assert max(t.depth for t in b.trees) == depth
    # with max_leaves as well, depth-wise growth stops at the leaf budget
    b = _train({"max_depth": 6, "max_leaves": 5}, X, y, 3)
    assert max(t.n_leaves for t in b.trees) == 5
    assert all(t.depth <= 6 for t in b.trees)


# -- regularisation --------------------------------------------------------------------------

@pytest.mark.parametrize("gamma", [0.0, 2.0, 12.0, 1e6])
def test_gamma_prunes_like_reference(gamma):
    X, y, d = _exact_problem()
    b = histboost.train(_ref_params(max_depth=3, gamma=gamma), d, 1, verbose_eval=False)
    want = mref.grow_depthwise_pruned(d.bins, -y, np.ones_like(y), d.bin_mapper.n_bins, REG,
                                      3, 0.5, gamma)
    np.testing.assert_allclose(b.predict(X), want, rtol=1e-9, atol=1e-12)
    t = b.trees[0]
    inner = np.flatnonzero(t.left_child != -1)
    for i in inner:  # no remaining split with two leaf children has a gain below gamma
        if t.left_child[t.left_child[i]] == -1 and t.left_child[t.right_child[i]] == -1:
            assert t.gain[i] >= gamma
    if gamma == 1e6:
        assert t.n_leaves == 1


def test_gamma_reduces_leaves_on_larger_data():
    X, y = make_regression(1000, F, seed=8)
    n0 = sum(t.n_leaves for t in _train({"max_depth": 5}, X, y, 5).trees)
    n1 = sum(t.n_leaves for t in _train({"max_depth": 5, "gamma": 5.0}, X, y, 5).trees)
    assert n1 < n0


@pytest.mark.parametrize("alpha,mds", [(0.0, 0.3), (2.0, 0.0), (1.0, 0.05)])
def test_reg_alpha_and_max_delta_step_match_reference(alpha, mds):
    reg = ref.Reg(reg_lambda=1.0, reg_alpha=alpha, min_child_weight=0.5, min_data_in_leaf=3,
                  max_delta_step=mds)
    X, y, d = _exact_problem(seed=9)
    b = histboost.train(_ref_params(reg, max_depth=3), d, 1, verbose_eval=False)
    want = ref.grow_depthwise(d.bins, -y, np.ones_like(y), d.bin_mapper.n_bins, reg, 3, 0.5)
    np.testing.assert_allclose(b.predict(X), want, rtol=1e-9, atol=1e-12)
    if mds:
        assert np.abs(b.predict(X)).max() <= 0.5 * mds * (1 + 1e-12)


def test_max_delta_step_and_alpha_shrink_leaves():
    base = {"objective": "binary:logistic", "max_depth": 4, "eta": 1.0}
    free = _train(base, X_BIN, Y_BIN, 1)
    clipped = _train({**base, "max_delta_step": 0.1}, X_BIN, Y_BIN, 1)
    l1 = _train({**base, "reg_alpha": 5.0}, X_BIN, Y_BIN, 1)

    def leaf_abs(b):
        t = b.trees[0]
        return np.abs(t.value[t.left_child == -1])

    assert leaf_abs(free).max() > 0.1
    assert leaf_abs(clipped).max() <= 0.1 + 1e-12
    assert leaf_abs(l1).sum() < leaf_abs(free).sum()


def _leaf_hessians(b, X, y):
    """Per tree, per leaf: (rows, sum of hessians at the margins before that round)."""
    out = []
    for r in range(b.num_boosted_rounds()):
        # (0, 0) would mean all rounds: the first round starts from the intercept
        m = (b.predict(X, output_margin=True, iteration_range=(0, r)) if r
             else np.full(len(y), b.base_margin[0]))
        p = expit(m)
        leaves = b.predict(X, pred_leaf=True)[:, r]
        out.append((np.bincount(leaves), np.bincount(leaves, weights=p * (1 - p))))
    return out


@pytest.mark.parametrize("mcw", [1.0, 6.0])
def test_min_child_weight_respected(mcw):
    b = _train({"objective": "binary:logistic", "max_depth": 6, "eta": 0.5,
                "min_child_weight": mcw}, X_BIN, Y_BIN, 8)
    worst = min(h[c > 0].min() for c, h in _leaf_hessians(b, X_BIN, Y_BIN))
    assert worst >= mcw * (1 - 1e-6)
    assert worst < mcw + 1.0  # the constraint is active


@pytest.mark.parametrize("mdl", [15, 40])
def test_min_data_in_leaf_respected_squared_error(mdl):
    X, y = make_regression(1000, F, seed=10)
    b = _train({"max_depth": 8, "min_data_in_leaf": mdl, "min_child_weight": 0}, X, y, 5)
    leaves = b.predict(X, pred_leaf=True)
    for t, tree in enumerate(b.trees):
        counts = np.bincount(leaves[:, t])
        counts = counts[counts > 0]
        assert counts.min() >= mdl
        np.testing.assert_array_equal(np.sort(counts),
                                      np.sort(tree.count[tree.left_child == -1]))
    assert min(tree.count[tree.left_child == -1].min() for tree in b.trees) < 2 * mdl


@pytest.mark.parametrize("policy", [{}, {"grow_policy": "lossguide", "max_leaves": 40,
                                         "max_depth": 0}])
@pytest.mark.parametrize("quantized", [False, True])
def test_min_data_in_leaf_respected_logistic(policy, quantized):
    b = _train({"objective": "binary:logistic", "max_depth": 6, "eta": 0.5,
                "min_data_in_leaf": 20, "min_child_weight": 0, "quantized_grad": quantized,
                **policy}, X_BIN, Y_BIN, 10)
    worst = min(c[c > 0].min() for c, _ in _leaf_hessians(b, X_BIN, Y_BIN))
    assert worst >= 20


# -- sampling --------------------------------------------------------------------------------

@pytest.mark.parametrize("sampling", [{"subsample": 0.6}, {"colsample_bytree": 0.5},
                                      {"colsample_bylevel": 0.5}, {"colsample_bynode": 0.5},
                                      {"subsample": 0.8, "colsample_bynode": 0.7,
                                       "grow_policy": "lossguide", "max_leaves": 8}])
def test_sampling_is_seeded(sampling):
    params = {"max_depth": 4, **sampling}
    a = _train({**params, "seed": 3}, X_REG, Y_REG, 4)
    b = _train({**params, "seed": 3}, X_REG, Y_REG, 4)
    c = _train({**params, "seed": 4}, X_REG, Y_REG, 4)
    assert a.save_raw() == b.save_raw()
    assert _json(a) != _json(c)


def test_subsample_and_colsample_bytree_limits():
    X, y = make_regression(500, 8, seed=2)
    b = _train({"max_depth": 4, "subsample": 0.3, "colsample_bytree": 0.25}, X, y, 6)
    for t in b.trees:
        assert t.count[0] == round(0.3 * 500)
        assert len(set(t.split_feature[t.left_child != -1])) <= 2


def test_subsampled_training_margins_equal_prediction():
    """With subsampling, training margins come from binned traversal; the train-set metric
    must equal the metric of a raw-value prediction."""
    d = histboost.Dataset(X_REG, label=Y_REG)
    res = {}
    b = histboost.train({"max_depth": 4, "subsample": 0.5, "nthread": 1}, d, 6,
                        evals=[(d, "train")], evals_result=res, verbose_eval=False)
    for r in range(6):
        pred = b.predict(X_REG, iteration_range=(0, r + 1))
        assert res["train"]["rmse"][r] == pytest.approx(
            np.sqrt(skm.mean_squared_error(Y_REG, pred)), rel=1e-12)


# -- quantised gradients ---------------------------------------------------------------------

def _train_threads(params, X, y, n_threads, chunked, rounds=6):
    """Train with `n_threads`; with `chunked`, nodes of 16+ rows take the chunked kernels."""
    if n_threads > 1 and nb.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs at least 2 Numba threads")
    with forced_paths(chunked, min_rows=16) as calls:
        b = _train({**params, "nthread": n_threads}, X, y, rounds)
    assert bool(calls["build_histogram_chunked"]) == chunked
    assert bool(calls["partition_node_chunked"]) == chunked
    return b


@pytest.mark.parametrize("params", [
    {"objective": "binary:logistic", "max_depth": 5},
    {"objective": "multi:softprob", "num_class": 3, "grow_policy": "lossguide",
     "max_leaves": 12, "max_depth": 0, "subsample": 0.8},
    {"objective": "reg:squarederror", "grow_policy": "oblivious", "max_depth": 4,
     "colsample_bynode": 0.8},
    {"objective": "binary:logistic", "max_depth": 5, "min_data_in_leaf": 10},  # counted rows
])
def test_quantized_models_identical_for_any_thread_count(params):
    X, y = {"binary:logistic": (X_BIN, Y_BIN), "multi:softprob": (X_MC, Y_MC),
            "reg:squarederror": (X_REG, Y_REG)}[params["objective"]]
    params = {**params, "quantized_grad": True}
    one = _train_threads(params, X, y, 1, False)
    two = _train_threads(params, X, y, 2, False)
    chunked = _train_threads(params, X, y, 2, True)
    assert _json(one) == _json(two) == _json(chunked)
    assert np.array_equal(one.predict(X), chunked.predict(X))


@pytest.mark.parametrize("params", [
    {"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 16,
     "max_depth": 0},
    {"objective": "multi:softprob", "num_class": 3, "max_depth": 5, "subsample": 0.8},
    {"objective": "reg:squarederror", "grow_policy": "oblivious", "max_depth": 4},
    {"objective": "binary:logistic", "max_depth": 5, "min_data_in_leaf": 10},  # counted rows
])
def test_float_models_identical_for_any_thread_count(params):
    """Float histograms sum a node's rows in chunks set by its size alone, so the thread
    count changes no sum. Chunking from 16 rows here, so that nodes hold up to a dozen chunks.
    Weights over 12 decades make the float sums depend on their order (float32 gradients of
    one scale add up exactly in float64)."""
    X, y = {"binary:logistic": (X_BIN, Y_BIN), "multi:softprob": (X_MC, Y_MC),
            "reg:squarederror": (X_REG, Y_REG)}[params["objective"]]
    if nb.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs at least 2 Numba threads")
    w = 10.0 ** np.random.default_rng(3).uniform(-6, 6, len(y))
    models = []
    for n_threads in (1, 2, 3):
        with forced_paths(True, min_rows=16) as calls:
            models.append(_train({**params, "nthread": n_threads}, X, y, 6, weight=w))
        assert bool(calls["build_histogram_chunked"]) == (n_threads > 1)
    assert _json(models[0]) == _json(models[1]) == _json(models[2])
    assert np.array_equal(models[0].predict(X), models[2].predict(X))
    # the test can fail: the forced chunks sum in another order than one chunk per node does
    assert _json(_train({**params, "nthread": 1}, X, y, 6, weight=w)) != _json(models[0])


def test_float_models_identical_for_any_thread_count_at_default_sizes():
    """The same on a dataset whose top nodes take several chunks at the default sizes."""
    X, y = make_classification(40_000, 6, n_classes=2, seed=5)
    if nb.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs at least 2 Numba threads")
    w = 10.0 ** np.random.default_rng(3).uniform(-6, 6, len(y))
    params = {"objective": "binary:logistic", "max_depth": 4}
    one, two = (_train({**params, "nthread": n}, X, y, 3, weight=w) for n in (1, 2))
    assert _json(one) == _json(two)


def test_quantized_quality_close_to_float(higgs):
    X, y, Xt, yt = higgs
    X, y = X[:3000], y[:3000]
    out = {}
    for q in (False, True):
        b = _train({"objective": "binary:logistic", "max_depth": 5, "eta": 0.1,
                    "quantized_grad": q, "max_bin": 256}, X, y, 60)
        p = b.predict(Xt)
        out[q] = (skm.log_loss(yt, p), skm.roc_auc_score(yt, p))
    assert abs(out[True][0] - out[False][0]) < 0.01, out
    assert abs(out[True][1] - out[False][1]) < 0.01, out


def test_quantized_differs_from_float_but_is_seeded():
    p = {"objective": "binary:logistic", "max_depth": 4, "quantized_grad": True}
    a, b = _train(p, X_BIN, Y_BIN, 4), _train(p, X_BIN, Y_BIN, 4)
    c = _train({**p, "seed": 1}, X_BIN, Y_BIN, 4)
    f = _train({**p, "quantized_grad": False}, X_BIN, Y_BIN, 4)
    assert _json(a) == _json(b)
    assert _json(a) != _json(c)  # the rounding noise follows the seed
    assert _json(a) != _json(f)


# -- continued training ----------------------------------------------------------------------

@pytest.mark.parametrize("extra", [{}, {"subsample": 0.7, "colsample_bynode": 0.6},
                                   {"quantized_grad": True, "objective": "binary:logistic"},
                                   {"objective": "multi:softprob", "num_class": 3}])
def test_continued_training_equals_one_run(tmp_path, extra):
    obj = extra.get("objective", "reg:squarederror")
    X, y = {"reg:squarederror": (X_REG, Y_REG), "binary:logistic": (X_BIN, Y_BIN),
            "multi:softprob": (X_MC, Y_MC)}[obj]
    p = {"max_depth": 4, "eta": 0.3, **extra}
    full = _train(p, X, y, 7)
    first = _train(p, X, y, 3)
    cont = _train(p, X, y, 4, xgb_model=first)
    assert first.num_boosted_rounds() == 3  # the model continued from is not modified
    assert cont.num_boosted_rounds() == 7
    assert _json(cont) == _json(full)
    assert np.array_equal(cont.predict(X), full.predict(X))
    first.save_model(tmp_path / "first.json")
    from_file = _train(p, X, y, 4, xgb_model=str(tmp_path / "first.json"))
    assert _json(from_file) == _json(full)


def test_continued_training_round_numbers_and_checks(capsys):
    d = histboost.Dataset(X_REG, label=Y_REG)
    first = histboost.train({"nthread": 1, "max_depth": 2}, d, 2, verbose_eval=False)
    histboost.train({"nthread": 1, "max_depth": 2}, d, 2, evals=[(d, "t")], xgb_model=first)
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == ["[2]",
                                                                                      "[3]"]
    with pytest.raises(ValueError, match="features"):
        histboost.train({"nthread": 1}, histboost.Dataset(X_REG[:, :3], label=Y_REG), 1,
                        xgb_model=first, verbose_eval=False)
    with pytest.raises(ValueError, match="objective"):
        histboost.train({"nthread": 1, "objective": "binary:logistic"},
                        histboost.Dataset(X_BIN, label=Y_BIN), 1, xgb_model=first,
                        verbose_eval=False)


# -- early stopping --------------------------------------------------------------------------

def _overfit_sets():
    X, y = make_classification(600, F, seed=4)
    return (histboost.Dataset(X[:400], label=y[:400]),
            histboost.Dataset(X[400:], label=y[400:]))


def _expected_stop(values, k, maximize):
    """(best round, rounds trained) under XGBoost's rule: stop once the best is k rounds old."""
    best, best_r = None, 0
    for r, v in enumerate(values):
        if best is None or (v > best if maximize else v < best):
            best, best_r = v, r
        if r - best_r >= k:
            return best_r, r + 1
    return best_r, len(values)


@pytest.mark.parametrize("metrics,maximize", [(["auc", "logloss"], False),
                                              (["logloss", "auc"], True),
                                              (["error"], False)])
@pytest.mark.parametrize("k", [2, 5])
def test_early_stopping(metrics, maximize, k):
    dtr, dva = _overfit_sets()
    res = {}
    b = histboost.train({"objective": "binary:logistic", "eta": 1.0, "max_depth": 6,
                         "nthread": 1, "eval_metric": metrics}, dtr, 60,
                        evals=[(dtr, "train"), (dva, "val")], early_stopping_rounds=k,
                        evals_result=res, verbose_eval=False)
    watched = res["val"][metrics[-1]]  # the last metric of the last eval set
    # replay the full 60 rounds to know where the rule must stop
    full = {}
    histboost.train({"objective": "binary:logistic", "eta": 1.0, "max_depth": 6,
                     "nthread": 1, "eval_metric": metrics}, dtr, 60,
                    evals=[(dtr, "train"), (dva, "val")], evals_result=full, verbose_eval=False)
    best, n_rounds = _expected_stop(full["val"][metrics[-1]], k, maximize)
    assert n_rounds < 60  # it did stop early
    assert b.num_boosted_rounds() == len(watched) == n_rounds
    assert b.best_iteration == best
    assert b.best_score == pytest.approx(watched[best])
    np.testing.assert_array_equal(watched, full["val"][metrics[-1]][:n_rounds])


def test_early_stopping_callback_options():
    dtr, dva = _overfit_sets()
    p = {"objective": "binary:logistic", "eta": 1.0, "max_depth": 6, "nthread": 1,
         "eval_metric": ["logloss", "auc"]}
    res = {}
    b = histboost.train(p, dtr, 60, evals=[(dtr, "train"), (dva, "val")], evals_result=res,
                        verbose_eval=False,
                        callbacks=[EarlyStopping(3, metric_name="logloss", data_name="val",
                                                 save_best=True)])
    best, n_rounds = _expected_stop(res["val"]["logloss"], 3, False)
    assert len(res["val"]["logloss"]) == n_rounds
    assert b.num_boosted_rounds() == best + 1  # save_best truncates
    assert b.best_iteration == best
    # min_delta: improvements smaller than it do not count
    res2 = {}
    histboost.train(p, dtr, 60, evals=[(dva, "val")], evals_result=res2, verbose_eval=False,
                    callbacks=[EarlyStopping(3, metric_name="auc", min_delta=0.5)])
    assert len(res2["val"]["auc"]) == 4  # round 0 is the best, never beaten by 0.5


def test_early_stopping_needs_evals():
    dtr, _ = _overfit_sets()
    with pytest.raises(ValueError, match="evals"):
        histboost.train({"nthread": 1}, dtr, 5, early_stopping_rounds=2)


# -- verbose output and callbacks ------------------------------------------------------------

_LINE = re.compile(r"^\[(\d+)\]((?:\t[a-z]+-[a-z]+:-?\d+\.\d{5})+)$")


@pytest.mark.parametrize("verbose,printed", [(True, [0, 1, 2, 3, 4, 5, 6]),
                                             (3, [0, 3, 6]), (4, [0, 4, 6]),
                                             (False, [])])
def test_verbose_eval_output(capsys, verbose, printed):
    dtr, dva = _overfit_sets()
    res = {}
    histboost.train({"objective": "binary:logistic", "nthread": 1, "max_depth": 2,
                     "eval_metric": ["logloss", "error"]}, dtr, 7,
                    evals=[(dtr, "train"), (dva, "val")], evals_result=res,
                    verbose_eval=verbose)
    lines = capsys.readouterr().out.splitlines()
    assert [int(_LINE.match(line)[1]) for line in lines] == printed
    for line in lines:
        r = int(_LINE.match(line)[1])
        fields = line.split("\t")[1:]
        assert fields == [f"{d}-{m}:{res[d][m][r]:.5f}" for d in ("train", "val")
                          for m in ("logloss", "error")]


def test_no_output_without_evals(capsys):
    _train({"max_depth": 2}, X_REG, Y_REG, 3, verbose_eval=True)
    assert capsys.readouterr().out == ""


class _Recorder(TrainingCallback):
    def __init__(self, stop_at=None, replace=False):
        self.calls = []
        self.stop_at = stop_at
        self.replace = replace

    def before_training(self, model):
        self.calls.append(("before", model.num_boosted_rounds()))
        return model

    def after_iteration(self, model, epoch, evals_log):
        self.calls.append(("after", epoch, model.num_boosted_rounds(),
                           {k: {m: len(v) for m, v in ms.items()} for k, ms in evals_log.items()}))
        return epoch == self.stop_at

    def after_training(self, model):
        self.calls.append(("end", model.num_boosted_rounds()))
        return model[:1] if self.replace else model


def test_callback_hooks():
    d = histboost.Dataset(X_REG, label=Y_REG)
    rec = _Recorder()
    b = histboost.train({"nthread": 1, "max_depth": 2}, d, 3, evals=[(d, "t")],
                        callbacks=[rec], verbose_eval=False)
    assert rec.calls == [("before", 0),
                         ("after", 0, 1, {"t": {"rmse": 1}}),
                         ("after", 1, 2, {"t": {"rmse": 2}}),
                         ("after", 2, 3, {"t": {"rmse": 3}}),
                         ("end", 3)]
    assert b.num_boosted_rounds() == 3
    stop = _Recorder(stop_at=1, replace=True)
    b = histboost.train({"nthread": 1, "max_depth": 2}, d, 10, callbacks=[stop],
                        verbose_eval=False)
    assert [c[0] for c in stop.calls] == ["before", "after", "after", "end"]
    assert stop.calls[-1] == ("end", 2)
    assert b.num_boosted_rounds() == 1  # after_training's return value is the result


# -- base margin and weights -----------------------------------------------------------------

def test_constant_base_margin_equals_base_score():
    c = 0.75
    a = _train({"max_depth": 3, "base_score": c}, X_REG, Y_REG, 4)
    b = _train({"max_depth": 3}, X_REG, Y_REG, 4, base_margin=np.full(len(Y_REG), c))
    assert _json(a) == _json(b)


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic",
                                       "multi:softprob"])
def test_base_margin_from_previous_model_equals_continuation(objective):
    X, y = {"reg:squarederror": (X_REG, Y_REG), "binary:logistic": (X_BIN, Y_BIN),
            "multi:softprob": (X_MC, Y_MC)}[objective]
    p = {"objective": objective, "max_depth": 3, "num_class": 3 if "multi" in objective else 1}
    full = _train(p, X, y, 5)
    first = full[:2]
    bm = first.predict(X, output_margin=True)
    rest = _train(p, X, y, 3, base_margin=bm)
    assert _json(rest) == _json(full)[2 * first.trees_per_round:]
    # prediction with a Dataset carrying the base margin adds the trees to it
    dm = histboost.Dataset(X, base_margin=bm)
    np.testing.assert_allclose(rest.predict(dm, output_margin=True),
                               full.predict(X, output_margin=True), rtol=1e-12, atol=1e-12)


def test_weight_two_equals_duplicated_row():
    rng = np.random.default_rng(0)
    dup = rng.random(len(Y_REG)) < 0.3
    w = np.where(dup, 2.0, 1.0)
    Xd, yd = np.vstack([X_REG, X_REG[dup]]), np.r_[Y_REG, Y_REG[dup]]
    p = {"max_depth": 4, "eta": 0.3}
    bw = _train(p, X_REG, Y_REG, 10, weight=w)
    bd = _train(p, Xd, yd, 10)
    for a, b in zip(bw.trees, bd.trees, strict=True):
        np.testing.assert_array_equal(a.split_feature, b.split_feature)
        np.testing.assert_allclose(a.cover, b.cover, rtol=1e-9)
    np.testing.assert_allclose(bw.predict(X_REG), bd.predict(X_REG), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic"])
@pytest.mark.parametrize("policy", ["depthwise", "lossguide", "oblivious"])
def test_zero_weight_rows_are_as_good_as_absent(objective, policy):
    """Rows of weight 0 (extreme values and NaN included) change neither the cuts nor any
    gradient sum: the model has the same trees as one trained without them (predictions
    differ at most by the rounding of the weighted mean behind the intercept)."""
    X, y = X_BIN.copy(), Y_BIN
    rng = np.random.default_rng(0)
    w = rng.uniform(0.5, 2.0, len(y))
    w[rng.random(len(y)) < 0.3] = 0.0
    zero = np.flatnonzero(w == 0)
    X[zero[:5], 0] = 1e6
    X[zero[5:10], 1] = np.nan
    p = {"objective": objective, "max_depth": 4, "grow_policy": policy,
         "max_leaves": 10 if policy == "lossguide" else 0}
    a = _train(p, X, y, 8, weight=w)
    b = _train(p, X[w > 0], y[w > 0], 8, weight=w[w > 0])
    for ta, tb in zip(a.trees, b.trees, strict=True):
        for key in ("split_feature", "threshold", "default_left", "level_feature",
                    "level_threshold", "level_default_left"):
            if key in ta.arrays:
                np.testing.assert_array_equal(ta.arrays[key], tb.arrays[key])
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-12, atol=1e-12)


def test_weights_change_the_model():
    w = np.where(Y_BIN > 0.5, 5.0, 1.0)
    a = _train({"objective": "binary:logistic", "max_depth": 3}, X_BIN, Y_BIN, 5)
    b = _train({"objective": "binary:logistic", "max_depth": 3}, X_BIN, Y_BIN, 5, weight=w)
    assert b.predict(X_BIN).mean() > a.predict(X_BIN).mean() + 0.1


# -- input types and odd columns -------------------------------------------------------------

def test_pandas_input_gives_same_model():
    pd = pytest.importorskip("pandas")
    cols = [f"f{i}" for i in range(F)]
    dense = _train({"max_depth": 4}, X_REG, Y_REG, 5)
    frame = _train({"max_depth": 4}, pd.DataFrame(X_REG, columns=cols), pd.Series(Y_REG), 5)
    assert _json(frame) == _json(dense)
    f32 = pd.DataFrame(X_REG.astype(np.float32), columns=cols)
    a = _train({"max_depth": 4}, f32, Y_REG, 5)
    b = _train({"max_depth": 4}, X_REG.astype(np.float32), Y_REG, 5)
    assert _json(a) == _json(b)
    np.testing.assert_array_equal(a.predict(f32), b.predict(X_REG.astype(np.float32)))


def test_integer_columns_in_pandas():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    Xi = rng.integers(0, 20, (300, 3))
    y = Xi[:, 0] * 0.5 + rng.normal(size=300)
    df = pd.DataFrame({"a": Xi[:, 0], "b": Xi[:, 1].astype(np.int8), "c": Xi[:, 2] * 1.0})
    assert _json(_train({"max_depth": 3}, df, y, 3)) == _json(
        _train({"max_depth": 3}, Xi.astype(float), y, 3))


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_input_unstored_entries_are_missing(fmt):
    rng = np.random.default_rng(1)
    Xz = np.nan_to_num(X_REG.copy(), nan=0.0)
    Xz[rng.random(Xz.shape) < 0.3] = 0.0
    S = sp.csr_matrix(Xz) if fmt == "csr" else sp.csc_matrix(Xz)
    Xn = Xz.copy()
    Xn[Xn == 0] = np.nan
    a = _train({"max_depth": 4}, S, Y_REG, 5)
    b = _train({"max_depth": 4}, Xn, Y_REG, 5)
    assert _json(a) == _json(b)
    np.testing.assert_array_equal(a.predict(S), b.predict(Xn))


def test_max_bin_above_256_uses_uint16():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(3000, 2))
    y = np.sin(4 * X[:, 0]) + rng.normal(0, 0.05, 3000)
    d = histboost.Dataset(X, label=y)
    b = histboost.train({"max_bin": 1024, "max_depth": 8, "nthread": 1}, d, 20,
                        verbose_eval=False)
    assert d.bins.dtype == np.uint16 and d.bins.max() > 255
    used = np.concatenate([t.split_bin[t.left_child != -1] for t in b.trees])
    assert used.max() > 255
    cuts = d.bin_mapper
    for t in b.trees:
        for i in np.flatnonzero(t.left_child != -1):
            f = t.split_feature[i]
            assert t.threshold[i] == cuts.feature_cuts(f)[t.split_bin[i]]
    small = histboost.train({"max_bin": 16, "max_depth": 8, "nthread": 1},
                            histboost.Dataset(X, label=y), 20, verbose_eval=False)
    assert histboost.Dataset(X, label=y, max_bin=16).construct().bins.dtype == np.uint8
    mse_big = skm.mean_squared_error(y, b.predict(X))
    assert mse_big < skm.mean_squared_error(y, small.predict(X))


def test_constant_and_all_nan_columns_are_never_split():
    X = X_REG.copy()
    X[:, 1] = 3.0
    X[:, 3] = np.nan
    b = _train({"max_depth": 4}, X, Y_REG, 6)
    imp = b.feature_importance("split")
    assert imp[1] == 0 and imp[3] == 0 and imp.sum() > 0
    Xt = X[:20].copy()
    Xt[:, 3] = 100.0  # unseen values in an all-NaN column change nothing
    Xt[:, 1] = -5.0
    np.testing.assert_array_equal(b.predict(Xt), b.predict(X[:20]))


def test_all_constant_data_predicts_the_mean():
    X = np.ones((50, 3))
    y = np.arange(50.0)
    b = _train({"max_depth": 3}, X, y, 3)
    assert all(t.n_leaves == 1 for t in b.trees)
    np.testing.assert_allclose(b.predict(X), y.mean(), rtol=1e-12)
