"""Clear exceptions for bad input: labels, data shapes and types, parameter names and values,
training arguments and prediction inputs. (Model-file errors: tests/test_booster.py.)"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import histboost
from histboost.params import parse_params

RNG = np.random.default_rng(0)
X = RNG.normal(size=(60, 3))
Y = (X[:, 0] > 0).astype(float)


def _train(params, d=None, rounds=1, **kw):
    d = histboost.Dataset(X, label=Y) if d is None else d
    return histboost.train({"nthread": 1, **params}, d, rounds, verbose_eval=False, **kw)


# -- labels ----------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("field", ["label", "weight"])
def test_non_finite_label_or_weight(bad, field):
    v = Y.copy() + 1.0
    v[7] = bad
    with pytest.raises(ValueError, match=f"{field} contains NaN or infinite.*row 7"):
        histboost.Dataset(X, **{field: v})
    d = histboost.Dataset(X)
    with pytest.raises(ValueError, match=field):
        getattr(d, f"set_{field}")(v)


@pytest.mark.parametrize("objective", ["binary:logistic", "binary:logitraw"])
@pytest.mark.parametrize("bad", [2.0, -1.0, 1.5])
def test_logistic_label_outside_unit_interval(objective, bad):
    y = Y.copy()
    y[3] = bad
    with pytest.raises(ValueError, match=r"labels must be in \[0, 1\]"):
        _train({"objective": objective}, histboost.Dataset(X, label=y))


@pytest.mark.parametrize("bad", [3.0, -1.0, 0.5])
def test_multiclass_label_not_a_class(bad):
    y = np.arange(60) % 3.0
    y[5] = bad
    with pytest.raises(ValueError, match="integers in \\[0, 2\\]"):
        _train({"objective": "multi:softprob", "num_class": 3}, histboost.Dataset(X, label=y))


def test_label_length_and_missing_label():
    with pytest.raises(ValueError, match="one value per row"):
        histboost.Dataset(X, label=Y[:10])
    with pytest.raises(ValueError, match="dtrain has no label"):
        _train({}, histboost.Dataset(X))
    with pytest.raises(ValueError, match="has no label"):
        _train({}, evals=[(histboost.Dataset(X), "val")])


def test_weights():
    with pytest.raises(ValueError, match="non-negative"):
        histboost.Dataset(X, label=Y, weight=-np.ones(60))
    with pytest.raises(ValueError, match="all weights are zero"):
        _train({}, histboost.Dataset(X, label=Y, weight=np.zeros(60)))


# -- data ------------------------------------------------------------------------------------

@pytest.mark.parametrize("data,exc,match", [
    (np.zeros((0, 3)), ValueError, "empty"),
    (np.zeros((5, 0)), ValueError, "0 features"),
    ([], ValueError, "2-D"),
    (np.zeros(5), ValueError, "2-D"),
    (np.zeros((2, 2, 2)), ValueError, "2-D"),
    (np.array([["a", "b"]]), TypeError, "numeric"),
    ("abc", TypeError, "numpy array"),
    (None, TypeError, "numpy array"),
])
def test_bad_data(data, exc, match):
    with pytest.raises(exc, match=match):
        histboost.Dataset(data)


def test_non_numeric_dataframe_column():
    """String columns of a DataFrame are categorical (docs/categorical.md); a string column
    of an array must be named categorical."""
    pd = pytest.importorskip("pandas")
    d = histboost.Dataset(pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]}))
    assert d.categorical.names == ["b"]
    with pytest.raises(TypeError, match="numeric"):
        histboost.Dataset(np.array([[1.0, "x"], [2.0, "y"]], dtype=object))
    with pytest.raises(TypeError, match="column 'f1' is not numeric"):
        histboost.Dataset(np.array([[1.0, "x", 3], [2.0, "y", 4]], dtype=object),
                          categorical_features=[2])


@pytest.mark.parametrize("kwargs,match", [
    ({"base_margin": np.ones(3)}, "base_margin"),
    ({"base_margin": np.full(60, np.nan)}, "base_margin"),
    ({"group": [10, 10]}, "group"),
    ({"feature_names": ["a", "b"]}, "feature_names"),
    ({"feature_names": ["a", "a", "b"]}, "unique"),
    ({"max_bin": 1}, "max_bin"),
    ({"max_bin": 70000}, "max_bin"),
])
def test_bad_dataset_metadata(kwargs, match):
    with pytest.raises(ValueError, match=match):
        histboost.Dataset(X, label=Y, **kwargs)


def test_reference_must_match():
    with pytest.raises(TypeError, match="reference"):
        histboost.Dataset(X, reference=X)
    with pytest.raises(ValueError, match="reference"):
        histboost.Dataset(X[:, :2], reference=histboost.Dataset(X))


# -- parameters ------------------------------------------------------------------------------

@pytest.mark.parametrize("name,suggestion", [("max_dept", "max_depth"),
                                             ("learning_rat", "learning_rate"),
                                             ("colsample_bytre", "colsample_bytree"),
                                             ("subsampel", "subsample"),
                                             ("min_child_weigth", "min_child_weight")])
def test_unknown_parameter_warns_with_close_match(name, suggestion):
    with pytest.warns(UserWarning, match=f"{name}.*did you mean '{suggestion}'"):
        _train({name: 3})


def test_unknown_parameter_without_close_match_warns_plainly():
    with pytest.warns(UserWarning, match="unknown parameter 'zzzz'") as rec:
        _train({"zzzz": 1})
    assert "did you mean" not in str(rec[0].message)


def test_known_names_and_aliases_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _train({"eta": 0.1, "lambda": 2.0, "alpha": 0.1, "num_leaves": 8,
                "min_split_loss": 0.0, "feature_fraction": 1.0, "random_state": 3,
                "validate_parameters": True})


@pytest.mark.parametrize("params,name", [
    ({"reg_lambda": -1}, "reg_lambda"),
    ({"lambda": -0.5}, "reg_lambda"),
    ({"reg_alpha": -1}, "reg_alpha"),
    ({"reg_alpha": "x"}, "reg_alpha"),
    ({"subsample": 0}, "subsample"),
    ({"subsample": 1.5}, "subsample"),
    ({"colsample_bytree": 0}, "colsample_bytree"),
    ({"colsample_bylevel": 2}, "colsample_bylevel"),
    ({"colsample_bynode": -0.1}, "colsample_bynode"),
    ({"learning_rate": 0}, "learning_rate"),
    ({"eta": -1}, "learning_rate"),
    ({"max_depth": -1}, "max_depth"),
    ({"max_depth": 2.5}, "max_depth"),
    ({"max_leaves": 1}, "max_leaves"),
    ({"max_leaves": -2}, "max_leaves"),
    ({"gamma": -1}, "gamma"),
    ({"min_split_loss": -1}, "gamma"),
    ({"min_child_weight": -1}, "min_child_weight"),
    ({"min_data_in_leaf": -1}, "min_data_in_leaf"),
    ({"max_delta_step": -1}, "max_delta_step"),
    ({"max_bin": 1}, "max_bin"),
    ({"max_bin": 70000}, "max_bin"),
    ({"grad_quant_bits": 0}, "grad_quant_bits"),
    ({"quantized_grad": "maybe"}, "quantized_grad"),
    ({"objective": "multi:softmax", "num_class": 1}, "num_class"),
    ({"objective": "binary:logistic", "base_score": 1.5}, "base_score"),
    ({"objective": "reg:absolute"}, "objective"),
    ({"grow_policy": "wide"}, "grow_policy"),
    ({"grow_policy": "oblivious", "max_depth": 20}, "max_depth"),
    ({"grow_policy": "depthwise", "max_depth": 0}, "max_depth"),
    ({"tree_method": "exact"}, "tree_method"),
    ({"device": "tpu"}, "device"),
    ({"eval_metric": "rmsle2"}, "eval_metric"),
    ({"verbosity": "loud"}, "verbosity"),
])
def test_invalid_parameter_value_names_the_parameter(params, name):
    with pytest.raises(ValueError, match=name):
        _train(params)


def test_alias_given_twice():
    with pytest.raises(ValueError, match="learning_rate.*twice"):
        parse_params({"eta": 0.1, "learning_rate": 0.2})


def test_objective_typo_suggests():
    with pytest.raises(ValueError, match="did you mean 'binary:logistic'"):
        parse_params({"objective": "binary:logistc"})


def test_params_must_be_a_dict():
    with pytest.raises(TypeError, match="dict"):
        parse_params([("max_depth", 3)])


# -- train() arguments -----------------------------------------------------------------------

def test_train_argument_errors():
    d = histboost.Dataset(X, label=Y)
    with pytest.raises(TypeError, match="Dataset"):
        histboost.train({}, X)
    with pytest.raises(ValueError, match="num_boost_round"):
        histboost.train({}, d, -1)
    with pytest.raises(TypeError, match="callable"):
        _train({}, obj=5)
    with pytest.raises(TypeError, match="evals"):
        _train({}, evals=[(X, "x")])
    with pytest.raises(ValueError, match="evals"):
        _train({}, early_stopping_rounds=3)
    with pytest.raises(TypeError, match="obj="):
        _train({"objective": lambda p, d: (p, p)})


def test_custom_objective_bad_output():
    n = len(Y)
    with pytest.raises(ValueError, match="NaN or infinite"):
        _train({}, obj=lambda p, d: (np.full(n, np.nan), np.ones(n)))
    with pytest.raises(ValueError, match="negative hessians"):
        _train({}, obj=lambda p, d: (np.ones(n), -np.ones(n)))


# -- prediction ------------------------------------------------------------------------------

def test_predict_input_errors():
    b = _train({"max_depth": 2})
    with pytest.raises(ValueError, match="2 features but the model was trained on 3"):
        b.predict(X[:, :2])
    with pytest.raises(ValueError, match="4 features but the model was trained on 3"):
        b.predict(histboost.Dataset(np.zeros((5, 4))))
    with pytest.raises(ValueError, match="2-D"):
        b.predict(X[0])
    with pytest.raises(TypeError, match="numeric"):
        b.predict(np.array([["a", "b", "c"]]))


# -- issue 18: values that used to give NaN or constant models -------------------------------

@pytest.mark.parametrize("params,name", [
    ({"learning_rate": np.inf}, "learning_rate"),
    ({"eta": "inf"}, "learning_rate"),
    ({"base_score": np.nan}, "base_score"),
    ({"base_score": np.inf}, "base_score"),
    ({"base_score": -np.inf}, "base_score"),
    ({"reg_lambda": np.inf}, "reg_lambda"),
    ({"reg_alpha": np.inf}, "reg_alpha"),
    ({"gamma": np.inf}, "gamma"),
    ({"min_child_weight": np.inf}, "min_child_weight"),
    ({"max_delta_step": np.inf}, "max_delta_step"),
])
def test_non_finite_float_parameter_is_rejected(params, name):
    with pytest.raises(ValueError, match=f"{name} must be a finite number"):
        parse_params(params)


@pytest.mark.parametrize("base_score", [0.0, 1.0, 2.0, -0.5])
def test_logitraw_base_score_is_a_probability(base_score):
    # logitraw turns base_score into a margin with the logit, as binary:logistic does
    with pytest.raises(ValueError, match=r"base_score must be in \(0, 1\)"):
        _train({"objective": "binary:logitraw", "base_score": base_score})
    b = _train({"objective": "binary:logitraw", "base_score": 0.25}, rounds=0)
    np.testing.assert_allclose(b.base_margin, [np.log(0.25 / 0.75)])


def test_max_bin_two_is_rejected_everywhere():
    # max_bin counts the missing slot: 2 leaves one value bin and trees that never split
    with pytest.raises(ValueError, match=r"max_bin must be in \[3, 65536\].*missing"):
        parse_params({"max_bin": 2})
    with pytest.raises(ValueError, match=r"max_bin must be an integer in \[3, 65536\]"):
        histboost.Dataset(X, label=Y, max_bin=2)
    with pytest.raises(ValueError, match="max_bin"):
        histboost.Dataset(X, label=Y).construct(2)
    with pytest.raises(ValueError, match="max_bin"):
        histboost.Dataset(X, label=Y, max_bin=True)
    # the fewest slots that can split: two value bins split on the sign of feature 0
    b = _train({"max_bin": 3, "max_depth": 1}, histboost.Dataset(X, label=Y, max_bin=3))
    assert np.unique(b.predict(X)).size == 2


@pytest.mark.parametrize("label_scale,weight", [(1e38, None), (1.0, 1e39), (1e20, 1e20)])
def test_labels_or_weights_that_overflow_float32_gradients(label_scale, weight):
    y = RNG.normal(size=60) * label_scale
    w = None if weight is None else np.full(60, weight)
    with pytest.raises(ValueError, match="float32 gradients would overflow"):
        histboost.Dataset(X, label=y, weight=w)
    d = histboost.Dataset(X)
    with pytest.raises(ValueError, match="overflow"):
        d.set_label(y) if weight is None else (d.set_label(y), d.set_weight(w))
    # the setters check the pair: a valid label stays when the weight is refused
    d = histboost.Dataset(X, label=Y)
    with pytest.raises(ValueError, match="overflow"):
        d.set_weight(np.full(60, 1e37))
    assert d.get_weight() is None


def test_large_but_safe_labels_train_a_real_model():
    y = X[:, 0] * 1e30  # gradients up to ~1e31: far from float32's 3.4e38
    b = _train({"max_depth": 2}, histboost.Dataset(X, label=y), rounds=3)
    pred = b.predict(X)
    assert np.all(np.isfinite(pred)) and np.corrcoef(pred, y)[0, 1] > 0.8


def test_base_margin_that_overflows_float32_gradients():
    with pytest.raises(ValueError, match="overflow"):
        histboost.Dataset(X, label=Y, base_margin=np.full(60, 1e300))


# -- issue 18: crashes and unhelpful errors ---------------------------------------------------

def test_grad_quant_bits_one_is_out_of_range():
    with pytest.raises(ValueError, match=r"grad_quant_bits must be in \[2, 24\], got 1"):
        _train({"quantized_grad": True, "grad_quant_bits": 1})
    b = _train({"quantized_grad": True, "grad_quant_bits": 2, "max_depth": 1})
    assert b.num_boosted_rounds() == 1  # the smallest accepted width trains


@pytest.mark.parametrize("shape", [(60, 3), (60, 2), (60, 1, 1), (180,), ()])
def test_base_margin_of_the_wrong_shape(shape):
    bm = np.zeros(shape)
    if len(shape) != 2:  # the Dataset itself refuses anything but (n,) or (n, K)
        with pytest.raises(ValueError, match="base_margin must have 60 rows"):
            histboost.Dataset(X, label=Y, base_margin=bm)
        return
    d = histboost.Dataset(X, label=Y, base_margin=bm)  # K is the model's: checked there
    with pytest.raises(ValueError, match=rf"base_margin has shape \({shape[0]}, {shape[1]}\); "
                                         r"this model has 1 output.*\(60,\) or \(60, 1\)"):
        _train({}, d)
    b = _train({})
    with pytest.raises(ValueError, match="base_margin has shape"):
        b.predict(d)
    with pytest.raises(ValueError, match="base_margin has shape"):
        _train({}, evals=[(d, "bad")])


def test_multiclass_base_margin_width():
    y = np.arange(60) % 3.0
    p = {"objective": "multi:softprob", "num_class": 3}
    with pytest.raises(ValueError, match=r"3 outputs.*\(60,\) or \(60, 3\)"):
        _train(p, histboost.Dataset(X, label=y, base_margin=np.zeros((60, 2))))
    # one column (or a vector) adds the same margin to every class: accepted
    for bm in (np.zeros(60), np.zeros((60, 1)), np.zeros((60, 3))):
        _train(p, histboost.Dataset(X, label=y, base_margin=bm))


def test_set_base_margin_checks_like_the_constructor():
    d = histboost.Dataset(X, label=Y)
    with pytest.raises(ValueError, match="NaN or infinite"):
        d.set_base_margin(np.full(60, np.nan))
    with pytest.raises(ValueError, match="60 rows"):
        d.set_base_margin(0.5)
    d.set_base_margin(np.ones(60))
    d.set_base_margin(None)
    assert d.base_margin is None


@pytest.mark.parametrize("bad", [(1.5, 3), (0, 2.0), 3, "0:2", (0, 1, 2), (True, 2),
                                 np.array([[0, 2]])])
def test_iteration_range_must_be_a_pair_of_integers(bad):
    b = _train({"max_depth": 2}, rounds=3)
    with pytest.raises(TypeError, match=r"iteration_range must be a \(begin, end\) pair of "
                                        "integers"):
        b.predict(X, iteration_range=bad)


def test_iteration_range_accepts_integer_pairs():
    b = _train({"max_depth": 2}, rounds=3)
    want = b[1:3].predict(X, output_margin=True) - b.base_margin[0]
    for ok in [(1, 3), [1, 3], (np.int64(1), np.int32(3)), np.array([1, 3])]:
        got = b.predict(X, output_margin=True, iteration_range=ok) - b.base_margin[0]
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="outside the model's 3 rounds"):
        b.predict(X, iteration_range=(2, 5))


# -- issue 18: evaluation metrics undefined on an evaluation set -------------------------------

@pytest.mark.parametrize("params,eval_label,eval_weight,match", [
    ({"objective": "binary:logistic", "eval_metric": "auc"}, np.zeros(60), None,
     "'auc' is undefined on evaluation set 'val': every label is negative"),
    ({"objective": "binary:logistic", "eval_metric": ["logloss", "auc"]}, np.ones(60), None,
     "'auc' is undefined on evaluation set 'val': every label is positive"),
    # the rows that count are those of positive weight
    ({"objective": "binary:logistic", "eval_metric": "auc"}, Y, Y, "'auc'.*every label is"),
    ({"objective": "reg:squarederror"}, Y, np.zeros(60), "'rmse'.*every weight.*zero"),
    ({"objective": "binary:logistic", "eval_metric": "logloss"}, Y * 3, None,
     r"'logloss'.*labels in \[0, 1\], found 3.0"),
    ({"objective": "binary:logistic", "eval_metric": "mlogloss"}, Y, None,
     "'mlogloss'.*multi-class objective"),
    ({"objective": "multi:softprob", "num_class": 2}, Y + 1, None,
     r"'mlogloss'.*integer labels in \[0, 1\], found 2.0"),
    ({"objective": "multi:softprob", "num_class": 2, "eval_metric": "merror"}, Y - 0.5, None,
     "'merror'.*integer labels"),
    ({"objective": "multi:softprob", "num_class": 2, "eval_metric": "auc"}, Y, None,
     "'auc'.*one output per row and this model has 2"),
])
def test_metric_undefined_on_eval_set_raises_naming_both(params, eval_label, eval_weight,
                                                          match):
    ev = histboost.Dataset(X, label=eval_label, weight=eval_weight)
    for stop in (None, 2):
        with pytest.raises(ValueError, match=match):
            _train(params, rounds=5, evals=[(ev, "val")], early_stopping_rounds=stop)


def test_single_class_training_set_in_evals_names_it():
    d = histboost.Dataset(X, label=np.zeros(60))
    with pytest.raises(ValueError, match="'auc' is undefined on evaluation set 'train'"):
        _train({"objective": "binary:logistic", "eval_metric": "auc"}, d,
               evals=[(d, "train")])


def test_estimator_with_single_class_eval_set_raises():
    from histboost.sklearn import HistBoostClassifier

    est = HistBoostClassifier(n_estimators=20, eval_metric="auc", early_stopping_rounds=3,
                              n_jobs=1)
    with pytest.raises(ValueError, match="'auc' is undefined on evaluation set 'validation_0'"):
        est.fit(X, Y, eval_set=[(X[Y == 1], Y[Y == 1])])


def test_early_stopping_refuses_a_nan_score():
    from histboost.callback import EarlyStopping

    es = EarlyStopping(3)
    log = {"val": {"auc": [0.7]}}
    assert es.after_iteration(_train({}), 0, log) is False
    log["val"]["auc"].append(float("nan"))
    with pytest.raises(ValueError, match="'auc' on evaluation set 'val' is NaN at round 1"):
        es.after_iteration(_train({}), 1, log)


# -- issue 18: siblings of the silently truncated iteration_range ------------------------------

@pytest.mark.parametrize("rounds", [1.5, True, 0, "3"])
def test_early_stopping_rounds_must_be_an_integer(rounds):
    ev = histboost.Dataset(X, label=Y)
    with pytest.raises(ValueError, match="early stopping rounds must be an integer >= 1"):
        _train({}, rounds=5, evals=[(ev, "val")], early_stopping_rounds=rounds)
    _train({}, rounds=2, evals=[(ev, "val")], early_stopping_rounds=np.int64(2))


@pytest.mark.parametrize("delta", [np.nan, np.inf, -1.0, "x"])
def test_early_stopping_min_delta_must_be_finite(delta):
    from histboost.callback import EarlyStopping

    with pytest.raises(ValueError, match="min_delta must be a finite number >= 0"):
        EarlyStopping(3, min_delta=delta)


@pytest.mark.parametrize("name", ["max_depth", "learning_rate", "nthread", "max_bin", "seed"])
def test_bool_is_not_a_number_parameter(name):
    with pytest.raises(ValueError, match=f"parameter '{name}' must be a"):
        parse_params({name: True})
    assert parse_params({"verbose": True}).verbosity == 1  # LightGBM / sklearn spelling


def test_custom_objective_beyond_float32_raises():
    rng = np.random.default_rng(0)
    d = histboost.Dataset(rng.normal(size=(30, 2)), label=rng.normal(size=30))

    def obj(preds, dtrain):
        return np.full(preds.shape, 1e39), np.ones(preds.shape)

    with pytest.raises(ValueError, match="beyond float32's range"):
        histboost.train({}, d, 1, obj=obj, verbose_eval=False)


@pytest.mark.parametrize("params", [
    {"booster": "dart"}, {"num_parallel_tree": 4}, {"boosting": "goss"}, {"linear_tree": True},
    {"extra_trees": True}, {"path_smooth": 1.0}, {"top_rate": 0.2}, {"max_cat_to_onehot": 4},
])
def test_peer_parameter_not_implemented_raises_naming_it(params):
    """A parameter XGBoost / LightGBM implement and histboost does not is an error, not a
    warning: the ported script would train another model."""
    (name,) = params
    with pytest.raises(ValueError, match=f"'{name}' is not implemented"):
        _train(params)


def test_peer_parameter_at_its_default_is_accepted():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _train({"booster": "gbtree", "num_parallel_tree": 1, "boosting": "gbdt",
                "sampling_method": "uniform", "linear_tree": False})
