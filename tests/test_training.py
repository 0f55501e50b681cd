"""`histboost.train` itself: continued training, early stopping, eval logs, callbacks, base
margins, weights and input types. Objectives, metrics and the grower are tested under
`tests/objectives`, `tests/metrics` and `tests/tree`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import metrics as skm

import histboost
from histboost.callback import EarlyStopping, TrainingCallback
from histboost.testing.data import make_classification

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _training_helpers import X_BIN, X_MC, X_REG, Y_BIN, Y_MC, Y_REG, F, _json, _train  # noqa: E402

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
def test_sparse_input_unstored_entries_are_missing_with_the_nan_rule(fmt):
    rng = np.random.default_rng(1)
    Xz = np.nan_to_num(X_REG.copy(), nan=0.0)
    Xz[rng.random(Xz.shape) < 0.3] = 0.0
    S = sp.csr_matrix(Xz) if fmt == "csr" else sp.csc_matrix(Xz)
    Xn = Xz.copy()
    Xn[Xn == 0] = np.nan
    a = histboost.train({"max_depth": 4, "nthread": 1, "max_bin": 64},
                        histboost.Dataset(S, label=Y_REG, unstored="nan"), 5, verbose_eval=False)
    b = _train({"max_depth": 4}, Xn, Y_REG, 5)
    assert _json(a) == _json(b)
    np.testing.assert_array_equal(a.predict(histboost.Dataset(S, unstored="nan")),
                                  b.predict(Xn))
    # the default rule: unstored entries are zeros, as in scipy
    c = _train({"max_depth": 4}, S, Y_REG, 5)
    d = _train({"max_depth": 4}, Xz, Y_REG, 5)
    assert _json(c) == _json(d)
    np.testing.assert_array_equal(c.predict(S), d.predict(Xz))


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
