"""scikit-learn estimators: scikit-learn's own estimator checks, quality against xgboost's
estimators on real data, agreement with the Python API, early stopping, persistence."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from sklearn.base import clone
from sklearn.datasets import load_diabetes
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.utils.estimator_checks import parametrize_with_checks

import histboost as hb
from histboost.datasets import load_multiclass_sample
from histboost.sklearn import HistBoostClassifier, HistBoostRegressor

# n_jobs=1 everywhere: CI machines have 2 cores and tests may run beside other work
COMMON = dict(n_estimators=60, max_depth=6, learning_rate=0.1, n_jobs=1)


@parametrize_with_checks([HistBoostRegressor(n_estimators=10, n_jobs=1),
                          HistBoostClassifier(n_estimators=10, n_jobs=1)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_binary_quality_matches_xgboost_on_higgs(higgs):
    X, y, Xt, yt = higgs
    ours = HistBoostClassifier(**COMMON).fit(X, y)
    ref = xgb.XGBClassifier(tree_method="hist", max_bin=256, **COMMON).fit(X, y)
    p, q = ours.predict_proba(Xt)[:, 1], ref.predict_proba(Xt)[:, 1]
    assert abs(roc_auc_score(yt, p) - roc_auc_score(yt, q)) < 0.01
    assert abs(log_loss(yt, p) - log_loss(yt, q)) < 0.01
    assert roc_auc_score(yt, p) > 0.8
    # the estimator adds nothing to the engine: same parameters, same numbers
    booster = hb.train({"objective": "binary:logistic", "max_depth": 6, "learning_rate": 0.1,
                        "nthread": 1}, hb.Dataset(X, label=y), num_boost_round=60)
    np.testing.assert_array_equal(p, booster.predict(Xt))
    np.testing.assert_array_equal(ours.predict(Xt), (p > 0.5).astype(float))


def test_multiclass_with_string_labels_matches_xgboost():
    X, y = load_multiclass_sample("train")
    Xt, yt = load_multiclass_sample("test")
    names = np.array(["zero", "one", "two", "three", "four"])
    ours = HistBoostClassifier(**{**COMMON, "n_estimators": 30}).fit(X, names[y.astype(int)])
    assert list(ours.classes_) == sorted(names) and ours.n_classes_ == 5
    ref = xgb.XGBClassifier(tree_method="hist", **{**COMMON, "n_estimators": 30}).fit(X, y)
    proba = ours.predict_proba(Xt)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # columns follow classes_ (sorted names); reorder to 0..4 for the reference
    order = [list(ours.classes_).index(n) for n in names]
    assert abs(log_loss(yt, proba[:, order]) - log_loss(yt, ref.predict_proba(Xt))) < 0.02
    pred = ours.predict(Xt)
    assert pred.dtype == names.dtype and set(pred) <= set(names)
    assert abs(accuracy_score(names[yt.astype(int)], pred)
               - accuracy_score(yt, ref.predict(Xt))) < 0.04


def test_regressor_quality_matches_xgboost():
    X, y = load_diabetes(return_X_y=True)
    X, Xt, y, yt = train_test_split(X, y, random_state=0)
    params = dict(n_estimators=100, max_depth=3, learning_rate=0.05, n_jobs=1)
    ours = HistBoostRegressor(**params).fit(X, y)
    ref = xgb.XGBRegressor(tree_method="hist", **params).fit(X, y)
    rmse = np.sqrt(np.mean((ours.predict(Xt) - yt) ** 2))
    rmse_ref = np.sqrt(np.mean((ref.predict(Xt) - yt) ** 2))
    assert abs(rmse - rmse_ref) < 0.03 * rmse_ref


def test_early_stopping_and_evals_result(higgs):
    X, y, Xt, yt = higgs
    clf = HistBoostClassifier(n_estimators=300, learning_rate=0.3, early_stopping_rounds=5,
                              eval_metric=["auc", "logloss"], n_jobs=1)
    clf.fit(X, y, eval_set=[(X[:500], y[:500]), (Xt, yt)])
    history = clf.evals_result()
    assert list(history) == ["validation_0", "validation_1"]
    losses = history["validation_1"]["logloss"]
    assert clf.best_iteration_ == int(np.argmin(losses)) and len(losses) < 300
    assert len(losses) == clf.best_iteration_ + 6  # stopped 5 rounds after the best
    booster = clf.get_booster()
    assert booster.num_boosted_rounds() == len(losses)
    # prediction uses the best iteration; its log loss is the one recorded for that round
    proba = clf.predict_proba(Xt)[:, 1]
    best = booster.predict(Xt, iteration_range=(0, clf.best_iteration_ + 1))
    np.testing.assert_array_equal(proba, best)
    assert log_loss(yt, proba) == pytest.approx(losses[clf.best_iteration_], rel=1e-6)
    assert roc_auc_score(yt, proba) == pytest.approx(
        history["validation_1"]["auc"][clf.best_iteration_], rel=1e-9)


def test_eval_set_weights_and_errors(higgs):
    X, y, Xt, yt = higgs
    w = np.linspace(0.5, 2.0, len(yt))
    reg = HistBoostRegressor(n_estimators=5, n_jobs=1)
    reg.fit(X, y, eval_set=[(Xt, yt)], sample_weight_eval_set=[w])
    rmse = np.sqrt(np.average((reg.predict(Xt) - yt) ** 2, weights=w))
    assert reg.evals_result()["validation_0"]["rmse"][-1] == pytest.approx(rmse, rel=1e-9)
    assert reg.best_iteration_ is None
    with pytest.raises(ValueError, match="early_stopping_rounds needs"):
        HistBoostRegressor(n_estimators=5, early_stopping_rounds=2).fit(X, y)
    with pytest.raises(ValueError, match="not among the training classes"):
        HistBoostClassifier(n_estimators=2).fit(X, y, eval_set=[(Xt, yt + 1)])
    with pytest.raises(ValueError, match="only one class"):
        HistBoostClassifier(n_estimators=2).fit(X, np.ones_like(y))
    with pytest.raises(ValueError, match="does not fit 2 classes"):
        HistBoostClassifier(n_estimators=2, objective="multi:softprob").fit(X, y)
    with pytest.raises(ValueError, match="n_estimators must be a positive integer"):
        HistBoostRegressor(n_estimators=0).fit(X, y)
    with pytest.raises(ValueError, match="X has 27 features"):
        reg.predict(Xt[:, 1:])


def test_dataframe_names_importances_and_kwargs():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(400, 4)), columns=["signal", "a", "b", "c"])
    y = 3.0 * df["signal"].to_numpy() + 0.1 * rng.normal(size=400)
    reg = HistBoostRegressor(n_estimators=20, max_depth=3, colsample_bynode=0.5, n_jobs=1)
    assert reg.get_params()["colsample_bynode"] == 0.5
    assert clone(reg).get_params() == reg.get_params()
    reg.fit(df, y)
    assert list(reg.feature_names_in_) == ["signal", "a", "b", "c"]
    assert reg.n_features_in_ == 4
    assert reg.get_booster().feature_names == ["signal", "a", "b", "c"]
    imp = reg.feature_importances_
    score = reg.get_booster().get_score("gain")  # average gain per split, as XGBoost
    gain = np.array([score.get(c, 0.0) for c in df.columns])
    np.testing.assert_allclose(imp, gain / gain.sum())
    total = reg.get_booster().feature_importance("gain")
    np.testing.assert_allclose(reg.set_params(importance_type="total_gain").feature_importances_,
                               total / total.sum())
    assert np.argmax(imp) == 0 and imp[0] > 0.9
    np.testing.assert_array_equal(reg.predict(df), reg.get_booster().predict(df))
    with pytest.warns(UserWarning, match="did you mean 'max_depth'"):
        HistBoostRegressor(n_estimators=2).set_params(max_dept=3).fit(df, y)


def test_save_load_round_trip(tmp_path, higgs):
    X, y, Xt, _ = higgs
    labels = np.where(y > 0, "signal", "background")
    clf = HistBoostClassifier(n_estimators=10, n_jobs=1).fit(X[:2000], labels[:2000])
    path = tmp_path / "clf.json"
    clf.save_model(path)
    loaded = HistBoostClassifier().load_model(path)
    np.testing.assert_array_equal(loaded.classes_, clf.classes_)
    np.testing.assert_array_equal(loaded.predict_proba(Xt), clf.predict_proba(Xt))
    np.testing.assert_array_equal(loaded.predict(Xt), clf.predict(Xt))
    assert loaded.n_features_in_ == 28
    # the file is an ordinary histboost model too
    np.testing.assert_array_equal(hb.Booster(model_file=path).predict(Xt),
                                  clf.predict_proba(Xt)[:, 1])
    with pytest.raises(ValueError, match="load it with HistBoostClassifier"):
        HistBoostRegressor().load_model(path)
    # a plain Booster file (e.g. from the CLI) loads with classes 0..K-1
    booster_file = tmp_path / "booster.json"
    clf.get_booster().save_model(booster_file)
    plain = HistBoostClassifier().load_model(booster_file)
    np.testing.assert_array_equal(plain.classes_, [0, 1])
    assert "sklearn" in json.loads(path.read_text()) and plain.evals_result() == {}


def test_continued_training_equals_longer_training(higgs):
    X, y, Xt, _ = higgs
    X, y = X[:3000], y[:3000]
    first = HistBoostRegressor(n_estimators=8, max_depth=4, n_jobs=1).fit(X, y)
    more = HistBoostRegressor(n_estimators=4, max_depth=4, n_jobs=1).fit(X, y, xgb_model=first)
    whole = HistBoostRegressor(n_estimators=12, max_depth=4, n_jobs=1).fit(X, y)
    assert more.get_booster().num_boosted_rounds() == 12
    assert first.get_booster().num_boosted_rounds() == 8  # the base model is not modified
    np.testing.assert_allclose(more.predict(Xt), whole.predict(Xt), rtol=1e-6, atol=1e-9)


def test_zero_weights_mean_removed_rows(higgs):
    X, y, Xt, _ = higgs
    X, y = X[:1000], y[:1000]
    w = np.ones(len(y))
    w[::3] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weighted = HistBoostClassifier(n_estimators=10, n_jobs=1).fit(X, y, sample_weight=w)
    removed = HistBoostClassifier(n_estimators=10, n_jobs=1).fit(X[w > 0], y[w > 0])
    np.testing.assert_allclose(weighted.predict_proba(Xt), removed.predict_proba(Xt),
                               rtol=1e-6)


@pytest.mark.parametrize("key,value", [
    ("classes", 5), ("classes", {"a": 1}), ("classes", [[0], [1]]), ("classes", [1, 1]),
    ("feature_names_in", "abc"), ("feature_names_in", ["a"]), ("feature_names_in", ["a", "a", "b"]),
    ("feature_names_in", [["a"], "b", "c"]), (None, [1]),
])
def test_malformed_estimator_state_raises_value_error(tmp_path, key, value):
    """The estimator's part of a model file is checked like the model (issue 18, sibling of 7)."""
    import json

    from histboost.sklearn import HistBoostClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    path = tmp_path / "m.json"
    HistBoostClassifier(n_estimators=2, n_jobs=1).fit(X, y).save_model(path)
    d = json.loads(path.read_text())
    if key is None:
        d["sklearn"] = value
    else:
        d["sklearn"][key] = value
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="m.json is a corrupt histboost model"):
        HistBoostClassifier().load_model(path)


def test_callable_eval_metric_is_logged_by_its_name():
    from sklearn.metrics import mean_absolute_error

    from histboost.sklearn import HistBoostRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=300)
    m = HistBoostRegressor(n_estimators=5, eval_metric=mean_absolute_error, n_jobs=1)
    m.fit(X, y, eval_set=[(X, y)])
    log = m.evals_result()["validation_0"]
    assert list(log) == ["mean_absolute_error"]
    np.testing.assert_allclose(log["mean_absolute_error"][-1],
                               mean_absolute_error(y, m.predict(X)), rtol=1e-6)
