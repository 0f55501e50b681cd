"""Importance types (`Booster.get_score`, estimators' ``feature_importances_``) on a small
model written by hand, against values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

import histboost
from histboost.tree.tree import Tree


def _node_tree(left, right, feat, gain, cover):
    n = len(left)
    return Tree.from_nodes({
        "left_child": left, "right_child": right, "split_feature": feat, "split_bin": [0] * n,
        "threshold": [0.5 if f >= 0 else 0.0 for f in feat], "default_left": [1] * n,
        "value": [0.1 * i for i in range(n)], "gain": gain, "cover": cover, "count": cover})


@pytest.fixture
def model():
    b = histboost.Booster(objective="reg:squarederror", n_features=4,
                          feature_names=["a", "b", "c", "d"])
    # tree A: a (gain 10, cover 100) -> [b (gain 4, cover 60) -> 30 | 30] | 40
    b.append_round([_node_tree([1, 3, -1, -1, -1], [2, 4, -1, -1, -1], [0, 1, -1, -1, -1],
                               [10.0, 4.0, 0, 0, 0], [100.0, 60.0, 40.0, 30.0, 30.0])])
    # tree B: b (gain 6, cover 50) -> 25 | 25
    b.append_round([_node_tree([1, -1, -1], [2, -1, -1], [1, -1, -1], [6.0, 0, 0],
                               [50.0, 25.0, 25.0])])
    # tree C, oblivious: a (gain 2), c (gain 3); leaves cover 10 + 20 + 30 + 40 = 100
    b.append_round([Tree.oblivious({
        "level_feature": [0, 2], "level_bin": [0, 0], "level_threshold": [0.5, 0.5],
        "level_default_left": [1, 1], "level_gain": [2.0, 3.0],
        "leaf_value": [0.1, 0.2, 0.3, 0.4], "leaf_cover": [10.0, 20.0, 30.0, 40.0],
        "leaf_count": [10, 20, 30, 40]})])
    return b


def test_get_score_types_by_hand(model):
    assert model.get_score("weight") == {"a": 2.0, "b": 2.0, "c": 1.0}
    assert model.get_score("split") == model.get_score("weight")
    assert model.get_score("total_gain") == {"a": 12.0, "b": 10.0, "c": 3.0}
    assert model.get_score("gain") == {"a": 6.0, "b": 5.0, "c": 3.0}
    assert model.get_score() == model.get_score("gain")
    assert model.get_score("total_cover") == {"a": 200.0, "b": 110.0, "c": 100.0}
    assert model.get_score("cover") == {"a": 100.0, "b": 55.0, "c": 100.0}
    # feature_importance keeps LightGBM's meanings (gain is the total)
    np.testing.assert_array_equal(model.feature_importance("gain"), [12.0, 10.0, 3.0, 0.0])
    with pytest.raises(ValueError, match="importance_type"):
        model.get_score("average_gain")


def test_estimator_feature_importances_follow_importance_type(model):
    pytest.importorskip("sklearn")
    from histboost.sklearn import HistBoostRegressor
    reg = HistBoostRegressor()
    reg._Booster = model
    reg.n_features_in_ = 4
    expected = {None: [6, 5, 3, 0], "gain": [6, 5, 3, 0], "weight": [2, 2, 1, 0],
                "cover": [100, 55, 100, 0], "total_gain": [12, 10, 3, 0],
                "total_cover": [200, 110, 100, 0]}
    for kind, values in expected.items():
        reg.set_params(importance_type=kind)
        v = np.array(values, float)
        np.testing.assert_allclose(reg.feature_importances_, v / v.sum())


def test_xgboost_agrees_on_a_trained_model():
    xgb = pytest.importorskip("xgboost")
    from histboost.testing.data import make_regression
    X, y = make_regression(500, 5, seed=2, missing=0.0)
    X = np.round(X * 4)  # few values: both libraries grow the same trees
    params = {"objective": "reg:squarederror", "max_depth": 3, "eta": 0.3, "max_bin": 256}
    ours = histboost.train({"nthread": 1, **params}, histboost.Dataset(X, label=y), 5,
                           verbose_eval=False)
    theirs = xgb.train({"nthread": 1, "tree_method": "hist", **params},
                       xgb.DMatrix(X, label=y), 5)
    np.testing.assert_allclose(ours.predict(X), theirs.predict(xgb.DMatrix(X)), rtol=1e-5)
    for kind in ("weight", "gain", "cover", "total_gain", "total_cover"):
        a, b = ours.get_score(kind), theirs.get_score(importance_type=kind)
        assert a.keys() == b.keys()
        np.testing.assert_allclose([a[k] for k in a], [b[k] for k in a], rtol=1e-4)
