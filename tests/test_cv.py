"""`histboost.cv` and `Dataset.subset`: the table equals a loop of `train` over the folds
(exactly), folds partition the rows (stratified: the classes in proportion; query groups:
whole queries), early stopping on the mean test metric, callbacks on all folds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.model_selection import KFold

import histboost
from histboost.cross_validation import kfold, query_kfold, stratified_kfold
from histboost.testing.data import make_classification, make_regression

X_REG, Y_REG = make_regression(300, 5, seed=21)
X_BIN, Y_BIN = make_classification(300, 5, seed=22)
P_REG = {"max_depth": 3, "nthread": 1, "max_bin": 32, "eval_metric": ["rmse", "mae"]}
P_BIN = {"objective": "binary:logistic", "max_depth": 3, "nthread": 1, "max_bin": 32,
         "eval_metric": ["auc", "logloss"]}


def _manual(params, X, y, folds, rounds):
    """The cv table from one `train` per fold on Datasets built with the whole set's cuts
    (reference=), not with `Dataset.subset`."""
    whole = histboost.Dataset(X, label=y, max_bin=params["max_bin"])
    logs = []
    for tr, te in folds:
        d_tr = histboost.Dataset(X[tr], label=y[tr], reference=whole)
        d_te = histboost.Dataset(X[te], label=y[te], reference=whole)
        log = {}
        histboost.train(params, d_tr, rounds, evals=[(d_tr, "train"), (d_te, "test")],
                        evals_result=log, verbose_eval=False)
        logs.append(log)
    table = {}
    for data in ("train", "test"):
        for m in params["eval_metric"]:
            values = np.array([log[data][m] for log in logs])
            table[f"{data}-{m}-mean"] = values.mean(axis=0)
            table[f"{data}-{m}-std"] = values.std(axis=0)
    return pd.DataFrame(table)


@pytest.mark.parametrize("params,X,y", [(P_REG, X_REG, Y_REG), (P_BIN, X_BIN, Y_BIN)])
def test_cv_equals_a_train_loop_over_the_folds(params, X, y):
    folds = list(KFold(4, shuffle=True, random_state=1).split(X))
    got = histboost.cv(params, histboost.Dataset(X, label=y), 5, folds=folds)
    pd.testing.assert_frame_equal(got, _manual(params, X, y, folds, 5), check_exact=True)
    assert list(got.columns)[:4] == [f"train-{params['eval_metric'][0]}-mean",
                                     f"train-{params['eval_metric'][0]}-std",
                                     f"train-{params['eval_metric'][1]}-mean",
                                     f"train-{params['eval_metric'][1]}-std"]
    # a scikit-learn splitter gives the same folds
    splitter = histboost.cv(params, histboost.Dataset(X, label=y), 5,
                            folds=KFold(4, shuffle=True, random_state=1))
    pd.testing.assert_frame_equal(splitter, got, check_exact=True)


def test_default_folds_partition_the_rows():
    n = 103
    for rng in (None, np.random.default_rng(0)):
        folds = kfold(n, 5, rng)
        tests = [te for _, te in folds]
        assert sorted(np.concatenate(tests).tolist()) == list(range(n))
        assert {len(te) for te in tests} == {20, 21}
        for tr, te in folds:
            assert np.intersect1d(tr, te).size == 0 and tr.size + te.size == n
    # unshuffled: scikit-learn's KFold
    for (tr, te), (s_tr, s_te) in zip(kfold(n, 5, None), KFold(5).split(np.zeros(n)),
                                      strict=True):
        np.testing.assert_array_equal(tr, s_tr)
        np.testing.assert_array_equal(te, s_te)
    # cv's default folds: shuffled with the seed
    d = histboost.Dataset(X_REG, label=Y_REG)
    default = histboost.cv(P_REG, d, 3, nfold=3, seed=7)
    explicit = histboost.cv(P_REG, d, 3, folds=kfold(300, 3, np.random.default_rng(7)))
    pd.testing.assert_frame_equal(default, explicit, check_exact=True)
    other_seed = histboost.cv(P_REG, d, 3, nfold=3, seed=8)
    assert not default.equals(other_seed)


def test_stratified_folds_keep_the_class_shares():
    rng = np.random.default_rng(4)
    y = rng.choice([0.0, 1.0, 2.0], size=250, p=[0.8, 0.15, 0.05])
    folds = stratified_kfold(y, 5, rng)
    counts = np.array([[np.sum(y[te] == c) for c in (0, 1, 2)] for _, te in folds])
    assert np.all(counts.max(axis=0) - counts.min(axis=0) <= 1)
    assert counts.sum() == 250
    sizes = [len(te) for _, te in folds]
    assert max(sizes) - min(sizes) <= 1
    # plain k-fold on the same labels does not keep them (so the check above can fail)
    plain = np.array([[np.sum(y[te] == c) for c in (0, 1, 2)]
                      for _, te in kfold(250, 5, np.random.default_rng(4))])
    assert np.any(plain.max(axis=0) - plain.min(axis=0) > 1)
    d = histboost.Dataset(X_BIN, label=Y_BIN)
    got = histboost.cv(P_BIN, d, 2, nfold=4, stratified=True, seed=3)
    want = histboost.cv(P_BIN, d, 2, folds=stratified_kfold(Y_BIN, 4,
                                                           np.random.default_rng(3)))
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    with pytest.raises(ValueError, match="class labels"):
        histboost.cv(P_REG, histboost.Dataset(X_REG, label=Y_REG), 2, stratified=True)


def test_early_stopping_on_the_mean_test_metric():
    params = {"max_depth": 6, "eta": 0.8, "nthread": 1, "max_bin": 32, "eval_metric": "rmse"}
    d = histboost.Dataset(X_REG[:120], label=Y_REG[:120])
    full = histboost.cv(params, d, 40, nfold=3)
    mean = full["test-rmse-mean"].to_numpy()
    best = 0
    for epoch in range(1, len(mean)):
        if mean[epoch] < mean[best]:
            best = epoch
        if epoch - best >= 3:
            break
    assert epoch < 39, "the run must overfit for the check to mean anything"
    stopped = histboost.cv(params, d, 40, nfold=3, early_stopping_rounds=3)
    pd.testing.assert_frame_equal(stopped, full.iloc[:best + 1], check_exact=True)


def test_scheduler_reaches_every_fold_and_output_options(capsys):
    d = histboost.Dataset(X_REG, label=Y_REG)
    fixed = histboost.cv({**P_REG, "eta": 0.1}, d, 3, nfold=3)
    scheduled = histboost.cv({**P_REG, "eta": 0.5}, d, 3, nfold=3,
                             callbacks=[histboost.LearningRateScheduler([0.1] * 3)])
    pd.testing.assert_frame_equal(scheduled, fixed, check_exact=True)
    table = histboost.cv(P_REG, d, 2, nfold=3, metrics="mae", as_pandas=False,
                         verbose_eval=True)
    assert list(table) == ["train-mae-mean", "train-mae-std", "test-mae-mean", "test-mae-std"]
    assert all(isinstance(v, list) and len(v) == 2 for v in table.values())
    with pytest.raises(ValueError, match="one model per fold"):
        histboost.cv(P_REG, d, 2, nfold=3, callbacks=[histboost.TrainingCheckPoint("x")])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].startswith("[1]\ttrain-mae:")
    mean, std = lines[1].split("\t")[-1].split(":")[1].split("+")
    assert float(mean) == pytest.approx(table["test-mae-mean"][1], abs=1e-5)
    assert float(std) == pytest.approx(table["test-mae-std"][1], abs=1e-5)


def test_cv_of_interval_labels():
    t = np.exp(Y_REG - Y_REG.min() + 0.1)
    upper = np.where(np.arange(300) % 4 == 0, np.inf, t)
    d = histboost.Dataset(X_REG, label_lower_bound=t, label_upper_bound=upper)
    table = histboost.cv({"objective": "survival:aft", "nthread": 1, "max_depth": 2}, d, 3,
                         nfold=3)
    assert list(table.columns) == ["train-aft-nloglik-mean", "train-aft-nloglik-std",
                                   "test-aft-nloglik-mean", "test-aft-nloglik-std"]
    assert table["train-aft-nloglik-mean"].is_monotonic_decreasing


def test_query_groups_give_folds_of_whole_queries():
    group = np.array([3, 5, 2, 4, 6, 1, 4])
    folds = query_kfold(group, 3, np.random.default_rng(0))
    query = np.repeat(np.arange(7), group)
    seen = []
    for tr, te in folds:
        for rows in (tr, te):  # each query wholly in or out
            for q in np.unique(query[rows]):
                assert np.sum(query[rows] == q) == group[q]
        seen += np.unique(query[te]).tolist()
    assert sorted(seen) == list(range(7))
    X = np.random.default_rng(0).normal(size=(25, 3))
    d = histboost.Dataset(X, label=np.arange(25) % 3, group=group)
    sub = d.subset(np.r_[3:8, 0:3])  # queries 1 then 0
    np.testing.assert_array_equal(sub.group, [5, 3])
    with pytest.raises(ValueError, match="whole queries"):
        d.subset(np.arange(4))
    with pytest.raises(ValueError, match="whole queries"):
        d.subset(np.r_[0, 3:8, 1, 2])


def test_subset_slices_the_bins_and_carries_the_metadata():
    rng = np.random.default_rng(2)
    w, bm = rng.uniform(0.5, 2, 300), rng.normal(size=300)
    d = histboost.Dataset(X_REG, label=Y_REG, weight=w, base_margin=bm, max_bin=16)
    d.construct()
    rows = np.array([5, 1, 1, 299, 42])
    sub = d.subset(rows)
    assert sub._bins is not None  # sliced from d's bins, before any construct()
    assert sub.reference is d and sub.bin_mapper is d.bin_mapper
    np.testing.assert_array_equal(sub.bins, d.bins[rows])
    np.testing.assert_array_equal(sub.bins, d.bin_mapper.transform(X_REG[rows]))
    for name, v in (("label", Y_REG), ("weight", w), ("base_margin", bm)):
        np.testing.assert_array_equal(getattr(sub, name), v[rows])
    sparse = histboost.Dataset(sp.csr_matrix(np.nan_to_num(X_REG)), label=Y_REG)
    np.testing.assert_array_equal(sparse.subset(rows).data.toarray(),
                                  np.nan_to_num(X_REG)[rows])
    for bad in (np.array([], np.int64), np.array([0.5]), np.array([300]), np.array([-1])):
        with pytest.raises(ValueError, match="rows must be"):
            d.subset(bad)


@pytest.mark.parametrize("kwargs,match", [
    ({"nfold": 1}, "nfold"), ({"nfold": 301}, "nfold"), ({"folds": [([0, 1], [])]}, "test"),
    ({"folds": [([0, 1], [400])]}, "out of range"),
])
def test_bad_fold_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        histboost.cv(P_REG, histboost.Dataset(X_REG, label=Y_REG), 2, **kwargs)


def test_categorical_dataset_raises():
    X = pd.DataFrame({"a": np.arange(30.0), "c": pd.Categorical(list("xyz") * 10)})
    d = histboost.Dataset(X, label=np.arange(30) % 2)
    with pytest.raises(ValueError, match="cv\\(\\) with categorical features"):
        histboost.cv({"objective": "binary:logistic"}, d, 2, nfold=3)
