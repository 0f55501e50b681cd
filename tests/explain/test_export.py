"""`save_model(format="xgboost")`: XGBoost loads the file and predicts what histboost predicts
on held-out rows with missing values; `trees_to_dataframe` against XGBoost's own table of the
exported model."""

from __future__ import annotations

import numpy as np
import pytest

import histboost
from histboost.testing.data import make_classification, make_regression

xgb = pytest.importorskip("xgboost")

CASES = {
    "binary": ({"objective": "binary:logistic"}, 2),
    "binary-logitraw": ({"objective": "binary:logitraw"}, 2),
    "multiclass": ({"objective": "multi:softprob", "num_class": 3}, 3),
    "multiclass-softmax": ({"objective": "multi:softmax", "num_class": 3}, 3),
    "regression": ({"objective": "reg:squarederror"}, 0),
}
KINDS = {
    "depthwise": {"max_depth": 5},
    "lossguide": {"grow_policy": "lossguide", "max_leaves": 16, "max_depth": 0},
    "oblivious": {"grow_policy": "oblivious", "max_depth": 4},
}


def _data(n_classes, dtype, seed=0):
    if n_classes:
        X, y = make_classification(1500, 6, n_classes=n_classes, seed=seed, missing=0.1)
    else:
        X, y = make_regression(1500, 6, seed=seed, missing=0.1)
    return X.astype(dtype), y


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_xgboost_loads_and_predicts_the_same(tmp_path, case, kind, dtype):
    params, n_classes = CASES[case]
    X, y = _data(n_classes, dtype)
    X[np.random.default_rng(1).random(X.shape) < 0.05] = np.nan
    Xtr, ytr, Xte = X[:1000], y[:1000], X[1000:]
    b = histboost.train({"nthread": 1, "eta": 0.3, **params, **KINDS[kind]},
                        histboost.Dataset(Xtr, label=ytr), 20, verbose_eval=False)
    path = tmp_path / "model.json"
    b.save_model(path, format="xgboost")
    xb = xgb.Booster(model_file=str(path))
    ours = b.predict(Xte)
    theirs = xb.predict(xgb.DMatrix(Xte))
    assert theirs.shape == ours.shape
    if case in ("regression", "binary-logitraw"):  # margins: float32 sums, relative error
        np.testing.assert_allclose(theirs, ours, rtol=1e-6, atol=1e-6 * np.abs(ours).max())
    else:
        np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-6)
    margin = b.predict(Xte, output_margin=True)
    np.testing.assert_allclose(xb.predict(xgb.DMatrix(Xte), output_margin=True), margin,
                               rtol=1e-6, atol=1e-6 * np.abs(margin).max())


def test_feature_names_and_best_iteration_travel(tmp_path):
    X, y = _data(2, np.float64)
    d = histboost.Dataset(X[:1000], label=y[:1000], feature_names=list("abcdef"))
    dv = histboost.Dataset(X[1000:], label=y[1000:], feature_names=list("abcdef"))
    b = histboost.train({"objective": "binary:logistic", "nthread": 1}, d, 200,
                        evals=[(dv, "valid")], early_stopping_rounds=3, verbose_eval=False)
    path = tmp_path / "m.json"
    b.save_model(path, format="xgboost")
    xb = xgb.Booster(model_file=str(path))
    assert xb.feature_names == list("abcdef")
    assert int(xb.attr("best_iteration")) == b.best_iteration
    dm = xgb.DMatrix(X[1000:], feature_names=list("abcdef"))
    np.testing.assert_allclose(xb.predict(dm), b.predict(X[1000:]), atol=1e-6)


def test_unknown_format_and_objective_raise(tmp_path):
    X, y = _data(0, np.float64)
    b = histboost.train({"nthread": 1}, histboost.Dataset(X, label=y), 2, verbose_eval=False)
    with pytest.raises(ValueError, match="format"):
        b.save_model(tmp_path / "m", format="onnx")


@pytest.mark.parametrize("kind", KINDS)
def test_trees_to_dataframe_matches_xgboost_table_of_the_export(tmp_path, kind):
    X, y = _data(2, np.float32)
    b = histboost.train({"objective": "binary:logistic", "nthread": 1, **KINDS[kind]},
                        histboost.Dataset(X, label=y), 4, verbose_eval=False)
    ours = b.trees_to_dataframe()
    assert list(ours.columns) == ["Tree", "Node", "ID", "Feature", "Split", "Yes", "No",
                                  "Missing", "Gain", "Cover", "Category"]
    path = tmp_path / "m.json"
    b.save_model(path, format="xgboost")
    theirs = xgb.Booster(model_file=str(path)).trees_to_dataframe()
    assert len(ours) == len(theirs)
    def values(col):
        return [None if isinstance(v, float) and np.isnan(v) else v for v in col.tolist()]

    for c in ("Tree", "Node", "ID", "Feature", "Yes", "No", "Missing"):
        assert values(ours[c]) == values(theirs[c]), c
    np.testing.assert_allclose(ours["Gain"], theirs["Gain"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ours["Cover"], theirs["Cover"], rtol=1e-6)
    inner = ours["Feature"] != "Leaf"
    # XGBoost's x < Split against histboost's x <= Split, one float32 step apart
    split32 = ours.loc[inner, "Split"].to_numpy().astype(np.float32)
    np.testing.assert_array_equal(np.nextafter(split32, np.float32(np.inf)),
                                  theirs.loc[inner, "Split"].to_numpy().astype(np.float32))
    n_nodes = sum(len(t.left_child) if not t.is_oblivious else 2 * len(t.leaf_value) - 1
                  for t in b.trees)
    assert len(ours) == n_nodes


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", ["binary", "multiclass", "regression"])
def test_shap_values_match_xgboost_on_the_exported_model(tmp_path, case, kind):
    params, n_classes = CASES[case]
    X, y = _data(n_classes, np.float32, seed=3)
    b = histboost.train({"nthread": 1, "eta": 0.3, **params, **KINDS[kind],
                         "max_depth": 2 if kind == "oblivious" else KINDS[kind]["max_depth"]},
                        histboost.Dataset(X[:1000], label=y[:1000]), 8, verbose_eval=False)
    from histboost.explain import node_tree
    # XGBoost divides by a node's cover: it needs trees without empty nodes, which oblivious
    # trees have where a level repeats a feature; keep the rounds without them
    k = b.trees_per_round
    full = [r for r in range(b.num_boosted_rounds())
            if all(np.all(node_tree(t).cover > 0) for t in b.trees[r * k:(r + 1) * k])]
    assert len(full) >= 2
    kept = b[:0]
    for r in full:
        kept.append_round(b.trees[r * k:(r + 1) * k])
    b = kept
    path = tmp_path / "m.json"
    b.save_model(path, format="xgboost")
    xb = xgb.Booster(model_file=str(path))
    Xte = X[1000:1200]
    scale = np.abs(b.predict(Xte, output_margin=True)).max()
    for kw in ({"pred_contribs": True}, {"pred_contribs": True, "approx_contribs": True},
               {"pred_interactions": True}):
        ours = b.predict(Xte, **kw)
        theirs = xb.predict(xgb.DMatrix(Xte), **kw)
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=2e-6 * scale)
