"""SHAP values (`Booster.predict(pred_contribs=True)` and friends) against independent
references: the margin (efficiency), brute-force Shapley values over every feature subset with
path-dependent expectations computed from the dumped trees, XGBoost's ``pred_contribs`` /
``pred_interactions`` on a model with the very same trees (every feature value in a bin of its
own, as in the quality tests), and the SHAP library's TreeExplainer on the trees as a custom
model."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

import histboost
from histboost.testing.data import make_classification, make_regression

KINDS = [
    {"grow_policy": "depthwise", "max_depth": 3},
    {"grow_policy": "lossguide", "max_leaves": 7, "max_depth": 0},
    {"grow_policy": "oblivious", "max_depth": 3},
]


def _train(params, X, y, rounds=6, **kw):
    p = {"nthread": 1, "max_bin": 32, "eta": 0.3, "seed": 0, **params}
    return histboost.train(p, histboost.Dataset(X, label=y, **kw), rounds, verbose_eval=False)


def _dumps(b):
    return [json.loads(s) for s in b.get_dump(dump_format="json")]


# -- brute force: path-dependent expectations of every feature subset -------------------------

def _frac(cl, cr):
    return (cl / (cl + cr), cr / (cl + cr)) if cl + cr > 0 else (0.5, 0.5)


def _expect(tree, x, S):
    """E[tree(x) | x_S] with the path-dependent rule: follow x at splits on features in S,
    else average the children by training cover."""
    def goes_left(v, thr, dl):
        return bool(dl) if np.isnan(v) else v <= thr

    if tree["kind"] == "oblivious":
        D = len(tree["level_feature"])
        cover = np.asarray(tree["leaf_cover"])

        def rec(d, prefix):
            if d == D:
                return tree["leaf_value"][prefix]
            l, r = 2 * prefix, 2 * prefix + 1
            f = tree["level_feature"][d]
            if f in S:
                left = goes_left(x[f], tree["level_threshold"][d], tree["level_default_left"][d])
                return rec(d + 1, l if left else r)
            span = 1 << (D - d - 1)
            fl, fr = _frac(cover[l * span:(l + 1) * span].sum(),
                           cover[r * span:(r + 1) * span].sum())
            return fl * rec(d + 1, l) + fr * rec(d + 1, r)
        return rec(0, 0)

    L, R = tree["left_child"], tree["right_child"]

    def rec(node):
        if L[node] == -1:
            return tree["value"][node]
        f = tree["split_feature"][node]
        if f in S:
            left = goes_left(x[f], tree["threshold"][node], tree["default_left"][node])
            return rec(L[node] if left else R[node])
        fl, fr = _frac(tree["cover"][L[node]], tree["cover"][R[node]])
        return fl * rec(L[node]) + fr * rec(R[node])
    return rec(0)


def _brute(trees, base_margin, x, M, k=0):
    """Exact Shapley values (M + 1,) and interaction values (M + 1, M + 1) of output k."""
    trees = [t for t in trees if t["class_index"] == k]
    v = {}
    for r in range(M + 1):
        for S in itertools.combinations(range(M), r):
            v[frozenset(S)] = sum(_expect(t, x, set(S)) for t in trees)
    phi = np.zeros(M + 1)
    inter = np.zeros((M + 1, M + 1))
    for i in range(M):
        others = [j for j in range(M) if j != i]
        for r in range(M):
            for S in itertools.combinations(others, r):
                S = frozenset(S)
                w = math.factorial(r) * math.factorial(M - r - 1) / math.factorial(M)
                phi[i] += w * (v[S | {i}] - v[S])
        for j in others:
            rest = [q for q in range(M) if q not in (i, j)]
            for r in range(M - 1):
                for S in itertools.combinations(rest, r):
                    S = frozenset(S)
                    w = (math.factorial(r) * math.factorial(M - r - 2)
                         / (2 * math.factorial(M - 1)))
                    inter[i, j] += w * (v[S | {i, j}] - v[S | {i}] - v[S | {j}] + v[S])
    for i in range(M):
        inter[i, i] = phi[i] - inter[i].sum()
    phi[M] = v[frozenset()] + base_margin[k]
    inter[M, M] = phi[M]
    return phi, inter


@pytest.mark.parametrize("kind", KINDS, ids=lambda p: p["grow_policy"])
def test_brute_force_shapley_four_features(kind):
    X, y = make_regression(300, 4, seed=3, missing=0.15)
    b = _train({"objective": "reg:squarederror", **kind}, X, y)
    trees = _dumps(b)
    rows = X[:12]
    contribs = b.predict(rows, pred_contribs=True)
    inter = b.predict(rows, pred_interactions=True)
    assert contribs.dtype == np.float32 and contribs.shape == (12, 5)
    assert inter.dtype == np.float32 and inter.shape == (12, 5, 5)
    for i, x in enumerate(rows):
        phi, ref_inter = _brute(trees, b.base_margin, x, 4)
        np.testing.assert_allclose(contribs[i], phi, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(inter[i], ref_inter, rtol=1e-5, atol=1e-5)


def test_brute_force_multiclass_oblivious_with_repeated_features():
    X, y = make_classification(300, 4, n_classes=3, seed=5)
    X[::7, 1] = np.nan
    b = _train({"objective": "multi:softprob", "num_class": 3, "grow_policy": "oblivious",
                "max_depth": 5}, X, y, rounds=3)
    trees = _dumps(b)
    assert any(len(set(t["level_feature"])) < len(t["level_feature"]) for t in trees)
    contribs = b.predict(X[:6], pred_contribs=True)
    assert contribs.shape == (6, 3, 5)
    for i in range(6):
        for k in range(3):
            phi, _ = _brute(trees, b.base_margin, X[i], 4, k)
            np.testing.assert_allclose(contribs[i, k], phi, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS, ids=lambda p: p["grow_policy"])
@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob"])
def test_contributions_sum_to_margin(kind, objective):
    n_classes = 3 if objective.startswith("multi") else 2
    X, y = make_classification(500, 7, n_classes=n_classes, seed=7)
    X[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    extra = {"num_class": 3} if n_classes == 3 else {}
    b = _train({"objective": objective, **extra, **kind}, X, y, rounds=8)
    for rng in (None, (2, 5)):
        margin = b.predict(X, output_margin=True, iteration_range=rng)
        c = b.predict(X, pred_contribs=True, iteration_range=rng)
        np.testing.assert_allclose(c.sum(-1), margin, rtol=1e-5, atol=2e-6)
        inter = b.predict(X[:50], pred_interactions=True, iteration_range=rng)
        np.testing.assert_allclose(inter.sum(-1), c[:50], rtol=1e-5, atol=2e-6)
        np.testing.assert_allclose(inter, np.swapaxes(inter, -1, -2), rtol=1e-5, atol=2e-6)
        saabas = b.predict(X, pred_contribs=True, approx_contribs=True, iteration_range=rng)
        np.testing.assert_allclose(saabas.sum(-1), margin, rtol=1e-5, atol=2e-6)


def test_iteration_range_is_a_difference_of_prefixes_and_dataset_base_margin():
    X, y = make_regression(300, 5, seed=4, missing=0.1)
    b = _train({"objective": "reg:squarederror", "max_depth": 4}, X, y, rounds=10)
    full = b.predict(X, pred_contribs=True).astype(np.float64)
    head = b.predict(X, pred_contribs=True, iteration_range=(0, 4)).astype(np.float64)
    tail = b.predict(X, pred_contribs=True, iteration_range=(4, 10)).astype(np.float64)
    tail[:, -1] -= b.base_margin[0]
    np.testing.assert_allclose(head + tail, full, atol=1e-5)
    bm = np.linspace(-1, 1, X.shape[0])
    c = b.predict(histboost.Dataset(X, base_margin=bm), pred_contribs=True)
    np.testing.assert_allclose(c[:, :-1], full[:, :-1], atol=1e-6)
    np.testing.assert_allclose(c[:, -1] - full[:, -1], bm - b.base_margin[0], atol=1e-5)


def test_saabas_matches_a_path_walk():
    X, y = make_regression(200, 4, seed=8, missing=0.2)
    b = _train({"objective": "reg:squarederror", "max_depth": 3}, X, y, rounds=3)
    got = b.predict(X[:20], pred_contribs=True, approx_contribs=True)
    for i, x in enumerate(X[:20]):
        ref = np.zeros(5)
        ref[4] = b.base_margin[0]
        for t in _dumps(b):
            node = 0
            cur = _expect(t, x, set())
            ref[4] += cur
            while t["left_child"][node] != -1:
                f = t["split_feature"][node]
                v = x[f]
                left = t["default_left"][node] if np.isnan(v) else v <= t["threshold"][node]
                node = t["left_child"][node] if left else t["right_child"][node]
                nxt = _subtree_mean(t, node)
                ref[f] += nxt - cur
                cur = nxt
        np.testing.assert_allclose(got[i], ref, rtol=1e-5, atol=1e-6)


def _subtree_mean(t, node):
    L, R = t["left_child"], t["right_child"]
    if L[node] == -1:
        return t["value"][node]
    fl, fr = _frac(t["cover"][L[node]], t["cover"][R[node]])
    return fl * _subtree_mean(t, L[node]) + fr * _subtree_mean(t, R[node])


# -- XGBoost on identical trees ------------------------------------------------------------------

def _coarse(X, levels=40):
    out = np.empty_like(X)
    for f in range(X.shape[1]):
        edges = np.unique(np.nanquantile(X[:, f], np.linspace(0, 1, levels)[1:-1]))
        out[:, f] = np.where(np.isnan(X[:, f]), np.nan, np.searchsorted(edges, X[:, f]))
    return out


@pytest.mark.parametrize("params", [
    {"objective": "binary:logistic", "max_depth": 5, "eta": 0.3},
    {"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 12,
     "max_depth": 0, "eta": 0.3},
    {"objective": "multi:softprob", "num_class": 3, "max_depth": 4, "eta": 0.3,
     "base_score": 0.5},
])
def test_same_trees_same_contributions_as_xgboost(higgs, params):
    xgb = pytest.importorskip("xgboost")
    X, y, Xt, _ = higgs
    # few distinct values, each seen in (almost) every node: where a node lacks a value, the
    # libraries may place an equally good threshold on either side of it, which changes no
    # prediction on the training rows but does change what SHAP's other paths see
    X, y = _coarse(X[:3000, :8], levels=6), y[:3000]
    if params["objective"].startswith("multi"):
        y = (X[:, 0] > 2).astype(int) + (X[:, 1] > 1)
    X[::9, 2] = np.nan  # missing values: both libraries learn the same default sides
    Xt = X[::7]  # rows whose values both libraries saw
    ours = histboost.train({"nthread": 1, **params}, histboost.Dataset(X, label=y), 15,
                           verbose_eval=False)
    theirs = xgb.train({"nthread": 1, "tree_method": "hist", **params},
                       xgb.DMatrix(X, label=y), 15)
    d = xgb.DMatrix(Xt)
    np.testing.assert_allclose(ours.predict(Xt, output_margin=True),
                               theirs.predict(d, output_margin=True), atol=2e-5)
    for kw in ({"pred_contribs": True}, {"pred_contribs": True, "approx_contribs": True},
               {"pred_interactions": True}):
        a = ours.predict(Xt[:100], **kw)
        b = theirs.predict(xgb.DMatrix(Xt[:100]), **kw)
        assert a.shape == b.shape and a.dtype == b.dtype == np.float32
        np.testing.assert_allclose(a, b, atol=5e-5)


def test_shap_library_tree_explainer_on_the_same_trees():
    shap = pytest.importorskip("shap")
    from histboost.explain import node_tree
    X, y = make_regression(400, 6, seed=9, missing=0.1)
    for kind in KINDS:
        b = _train({"objective": "reg:squarederror", **kind}, X, y, rounds=5)
        trees = []
        for t in map(node_tree, b.trees):
            # shap refuses empty nodes (oblivious trees have some): a tiny cover per leaf
            # keeps the cover fractions to 1e-12, and halves an empty node's as histboost does
            leaves = (t.left_child == -1).astype(np.float64)
            for i in range(leaves.size - 1, -1, -1):
                if t.left_child[i] != -1:
                    leaves[i] = leaves[t.left_child[i]] + leaves[t.right_child[i]]
            trees.append({
                "children_left": t.left_child.astype(np.int64),
                "children_right": t.right_child.astype(np.int64),
                "children_default": np.where(t.default_left == 1, t.left_child,
                                             t.right_child).astype(np.int64),
                "features": t.split_feature.astype(np.int64),
                "thresholds": t.threshold.astype(np.float64),
                "values": t.value.reshape(-1, 1).astype(np.float64),
                "node_sample_weight": t.cover + 1e-12 * leaves})
        ex = shap.TreeExplainer({"trees": trees, "base_offset": float(b.base_margin[0])})
        ref = ex.shap_values(X[:50], check_additivity=False)
        got = b.predict(X[:50], pred_contribs=True)
        np.testing.assert_allclose(got[:, :-1], ref, atol=1e-5)
        np.testing.assert_allclose(got[:, -1], np.ravel(ex.expected_value)[0], atol=1e-5)


@pytest.mark.parametrize("kind", KINDS, ids=lambda p: p["grow_policy"])
def test_leaf_tables_and_path_algorithm_agree(kind, monkeypatch):
    from histboost.explain import shap as hshap
    X, y = make_regression(600, 9, seed=10, missing=0.1)
    b = _train({"objective": "reg:squarederror", **{**kind, "max_depth": 6}}, X, y, rounds=6)
    fast = b.predict(X, pred_contribs=True)
    assert b.__dict__["_explain_forest"][1].tables() is not None
    monkeypatch.setattr(hshap, "TABLE_BUDGET", -1)
    slow = histboost.Booster(model_file=None)
    slow.load_model(b.save_raw())
    assert slow.__dict__.get("_explain_forest") is None
    ref = slow.predict(X, pred_contribs=True)
    assert slow.__dict__["_explain_forest"][1].tables() is None
    np.testing.assert_allclose(fast, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("unstored", ["zero", "nan"])
def test_sparse_input_explained_as_its_dense_equivalent(unstored):
    import scipy.sparse as sps
    X, y = make_regression(300, 6, seed=3)
    X[np.random.default_rng(3).random(X.shape) < 0.6] = 0.0
    S = sps.csr_matrix(X)
    dense = X if unstored == "zero" else np.where(X == 0.0, np.nan, X)
    b = _train({"objective": "reg:squarederror", "max_depth": 3}, S, y, unstored=unstored)
    data = histboost.Dataset(S, unstored=unstored) if unstored == "nan" else S
    for kw in ({"pred_contribs": True}, {"pred_contribs": True, "approx_contribs": True},
               {"pred_interactions": True}):
        np.testing.assert_array_equal(b.predict(data, **kw), b.predict(dense, **kw))
