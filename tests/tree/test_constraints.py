"""Monotone and interaction constraints (issue 16): guaranteed on every prediction, XGBoost's
semantics (same model as XGBoost on identical bins)."""

from __future__ import annotations

import numpy as np
import pytest

import histboost
from histboost.tree.constraints import parse_interaction, parse_monotone


def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 30, size=(n, 4)).astype(np.float64)
    # non-monotone signal in the constrained features, so the constraints bind
    y = (np.sin(X[:, 0] / 3) + 0.05 * X[:, 0] - np.cos(X[:, 1] / 4) + X[:, 2] * X[:, 3] / 200
         + rng.normal(scale=0.5, size=n))
    return X, y


def _train(params, X, y, rounds=20):
    return histboost.train({"nthread": 1, **params}, histboost.Dataset(X, label=y), rounds,
                           verbose_eval=False)


def _assert_monotone(booster, cons, n_grid=6, seed=1):
    """For a grid of the other features, predictions along each constrained feature (every
    value 0..29 and a bit outside) go the constrained way (brute force)."""
    rng = np.random.default_rng(seed)
    values = np.arange(-1, 31, 0.5)
    for f, c in enumerate(cons):
        if c == 0:
            continue
        base = rng.integers(0, 30, size=(n_grid ** 2, 4)).astype(np.float64)
        X = np.repeat(base, values.size, axis=0)
        X[:, f] = np.tile(values, base.shape[0])
        pred = booster.predict(X).reshape(base.shape[0], values.size)
        steps = np.diff(pred, axis=1) * c
        assert steps.min() >= 0, f"feature {f} (constraint {c}): step {steps.min()}"


POLICIES = [{"grow_policy": "depthwise", "max_depth": 6},
            {"grow_policy": "lossguide", "max_leaves": 31, "max_depth": 0}]
OBLIVIOUS = {"grow_policy": "oblivious", "max_depth": 5}


@pytest.mark.parametrize("policy", [*POLICIES, OBLIVIOUS])
@pytest.mark.parametrize("cons", [(1, -1, 0, 0), (-1, 1, 1, -1)])
def test_monotone_on_every_prediction(policy, cons):
    X, y = _data()
    b = _train({**policy, "monotone_constraints": cons, "learning_rate": 0.5}, X, y, 30)
    _assert_monotone(b, cons)
    # the unconstrained model is not monotone on this data (the test has teeth)
    free = _train({**policy, "learning_rate": 0.5}, X, y, 30)
    with pytest.raises(AssertionError):
        _assert_monotone(free, cons)


@pytest.mark.parametrize("policy", [*POLICIES, OBLIVIOUS])
def test_monotone_with_regularisation_and_missing(policy):
    X, y = _data(seed=3)
    X[::7, 0] = np.nan
    params = {**policy, "monotone_constraints": "(1,-1)", "reg_alpha": 0.5,
              "max_delta_step": 0.3, "gamma": 0.2, "min_child_weight": 3,
              "objective": "reg:squarederror"}
    b = _train(params, X, y, 15)
    _assert_monotone(b, (1, -1, 0, 0))


def test_monotone_binary_and_dict_by_name():
    X, y = _data(seed=4)
    yb = (y > np.median(y)).astype(float)
    names = ["a", "b", "c", "d"]
    d = histboost.Dataset(X, label=yb, feature_names=names)
    b = histboost.train({"objective": "binary:logistic", "nthread": 1,
                         "monotone_constraints": {"a": 1, "b": -1}}, d, 20)
    _assert_monotone(b, (1, -1, 0, 0))
    b2 = _train({"objective": "binary:logistic", "monotone_constraints": [1, -1]}, X, yb, 20)
    np.testing.assert_array_equal(b.predict(X), b2.predict(X))


def test_monotone_all_zero_is_unconstrained():
    X, y = _data(n=500)
    a = _train({"monotone_constraints": (0, 0, 0, 0)}, X, y, 5)
    b = _train({}, X, y, 5)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


@pytest.mark.parametrize("policy", [
    {"max_depth": 4},
    {"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0},
])
def test_monotone_same_model_as_xgboost(policy):
    xgb = pytest.importorskip("xgboost")
    X, y = _data(n=2000, seed=5)  # 30 distinct values a feature: one bin per value
    params = {"objective": "reg:squarederror", "eta": 0.3, "base_score": 0.0,
              "monotone_constraints": "(1,-1,0,1)", **policy}
    ours = _train(params, X, y, 20).predict(X)
    theirs = xgb.train({"nthread": 1, "tree_method": "hist", **params},
                       xgb.DMatrix(X, label=y), 20).predict(xgb.DMatrix(X))
    np.testing.assert_allclose(ours, theirs, atol=2e-5)


def test_monotone_errors():
    with pytest.raises(ValueError, match="-1, 0 or 1"):
        parse_monotone("(2,0)")
    with pytest.raises(ValueError, match="unknown feature name"):
        histboost.train({"monotone_constraints": {"zz": 1}},
                        histboost.Dataset(np.zeros((4, 1)), label=np.zeros(4)), 1)
    with pytest.raises(ValueError, match="entries"):
        histboost.train({"monotone_constraints": (1, 1)},
                        histboost.Dataset(np.zeros((4, 1)), label=np.zeros(4)), 1)
    assert parse_monotone("(1,0,-1)") == (1, 0, -1)
    assert parse_monotone([1, 0]) == (1, 0)


# -- interaction constraints --------------------------------------------------------------

def _paths(tree_dict):
    """Feature sets of every root-to-leaf path of a tree (Tree.to_dict layout)."""
    left, right = tree_dict["left_child"], tree_dict["right_child"]
    feat = tree_dict["split_feature"]
    out = []

    def walk(i, used):
        if left[i] == -1:
            out.append(used)
            return
        walk(left[i], used | {feat[i]})
        walk(right[i], used | {feat[i]})

    walk(0, frozenset())
    return out


def _inter_data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = X[:, 0] * X[:, 3] + X[:, 1] * X[:, 4] + np.sin(X[:, 2] * X[:, 5]) + X[:, 0] * X[:, 1]
    return X, y


@pytest.mark.parametrize("policy", [*POLICIES, OBLIVIOUS])
@pytest.mark.parametrize("sets", [[[0, 1, 2], [3, 4, 5]], [[0, 1], [1, 2], [3]]])
def test_interaction_constraints_no_path_crosses_sets(policy, sets):
    X, y = _inter_data()
    b = _train({**policy, "interaction_constraints": sets}, X, y, 15)
    n_paths = 0
    free_features = set(range(6)) - set().union(*map(set, sets))
    for t in b.trees:
        d = t.to_dict()
        if "left_child" not in d:  # oblivious trees: one feature per level, all paths alike
            used = frozenset(int(f) for f in d["level_feature"])
            paths = [used]
        else:
            paths = _paths(d)
        for used in paths:
            n_paths += 1
            if len(used) <= 1:
                continue
            assert not used & free_features, used
            assert any(used <= set(s) for s in sets), f"path uses {sorted(used)}"
    assert n_paths >= 15
    # unconstrained trees do cross the sets here
    free = _train(policy, X, y, 15)
    crossed = False
    for t in free.trees:
        d = t.to_dict()
        paths = ([frozenset(int(f) for f in d["level_feature"])] if "left_child" not in d
                 else _paths(d))
        crossed |= any(not any(u <= set(s) for s in sets) for u in paths if len(u) > 1)
    assert crossed


def test_interaction_constraints_by_name_and_string():
    X, y = _inter_data(n=1000)
    names = [f"x{i}" for i in range(6)]
    d = histboost.Dataset(X, label=y, feature_names=names)
    a = histboost.train({"nthread": 1, "interaction_constraints": [["x0", "x1"], ["x3", "x4"]]},
                        d, 5)
    b = _train({"interaction_constraints": "[[0, 1], [3, 4]]"}, X, y, 5)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert parse_interaction("[[0,1],[2]]") == ((0, 1), (2,))
    with pytest.raises(ValueError, match="list of lists"):
        parse_interaction("[0, 1]")


def test_interaction_constraints_same_model_as_xgboost():
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(7)
    X = rng.integers(0, 25, size=(2000, 5)).astype(np.float64)
    y = X[:, 0] * X[:, 3] / 50 + np.sin(X[:, 1] * X[:, 2] / 40) + X[:, 4] * X[:, 0] / 80
    params = {"objective": "reg:squarederror", "eta": 0.3, "base_score": 0.0, "max_depth": 4,
              "interaction_constraints": "[[0, 1], [1, 2, 3]]"}
    ours = _train(params, X, y, 15).predict(X)
    theirs = xgb.train({"nthread": 1, "tree_method": "hist", **params},
                       xgb.DMatrix(X, label=y), 15).predict(xgb.DMatrix(X))
    np.testing.assert_allclose(ours, theirs, atol=2e-5)


def test_monotone_sparse_dataset():
    sp = pytest.importorskip("scipy.sparse")
    X, y = _data(n=2000, seed=6)
    X[X < 5] = 0.0  # stored zeros dropped: unstored entries are zeros
    b = histboost.train({"nthread": 1, "monotone_constraints": (1, -1)},
                        histboost.Dataset(sp.csr_matrix(X), label=y), 15)
    _assert_monotone(b, (1, -1, 0, 0))
    dense = _train({"monotone_constraints": (1, -1)}, X, y, 15)
    np.testing.assert_allclose(b.predict(X), dense.predict(X), atol=1e-6)


def test_oblivious_tree_without_split_predicts():
    # a root that does not split (here: gamma) gives a one-leaf tree, which predicts
    X, y = _data(n=200)
    b = _train({"grow_policy": "oblivious", "max_depth": 3, "gamma": 1e9}, X, y, 2)
    np.testing.assert_allclose(b.predict(X), b.predict(X[:1])[0])
