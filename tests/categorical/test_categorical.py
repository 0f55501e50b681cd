"""Categorical features end to end: input, hashing, prediction from raw values, save/load,
leakage, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

import histboost as hb
from histboost.data.categorical import MISSING_HASH, hash_column
from histboost.sklearn import HistBoostClassifier


def _frame(n: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    city = rng.integers(0, 30, n)
    colour = rng.choice(np.array(["red", "green", "blue", "grey"], object), n)
    colour[rng.random(n) < 0.05] = None
    num = rng.normal(size=n)
    effect = np.linspace(-2, 2, 30)[np.random.default_rng(123).permutation(30)]
    logit = effect[city] + 0.8 * num + np.where(colour == "red", 1.0, 0.0)
    y = (logit + rng.logistic(size=n) > 0).astype(np.float64)
    frame = pd.DataFrame({"num": num, "city": city, "colour": pd.Series(colour, dtype=object),
                          "sex": rng.choice(np.array(["f", "m"], object), n)})
    return frame, y


CAT = ["city"]


def _data(X: pd.DataFrame, y: np.ndarray) -> hb.Dataset:
    return hb.Dataset(X, label=y, categorical_features=CAT)


PARAMS = {"objective": "binary:logistic", "max_depth": 4, "learning_rate": 0.2, "nthread": 2}


def test_hashes_are_stable():
    """Fixed values: the same in every process, run and machine (no salted hash())."""
    h, kind = hash_column(np.array([5, -1, 0]), "c")
    assert kind == "int"
    assert h.tolist() == [7134611160154358618, 16490336266968443936, 16294208416658607535]
    h, kind = hash_column(np.array(["a", "Private", ""], object), "c")
    assert kind == "str"
    assert h.tolist() == [13950350942979735504, 16208944326588122102, 1760245841805064774]
    # one integer, whatever its type; missing values are a category of their own
    fives = (np.array([5], np.int8), np.array([5.0]), np.array([5], object),
             pd.Series([5], dtype="uint64"))
    five = [hash_column(v, "c")[0][0] for v in fives]
    assert len(set(five)) == 1
    assert hash_column(np.array([None, np.nan, "x"], object), "c")[0][:2].tolist() == \
        [MISSING_HASH, MISSING_HASH]
    assert hash_column(pd.Series(["x", None], dtype="category"), "c")[0][1] == MISSING_HASH
    big = hash_column(np.array([2**40 + 1, 2**40 + 2], np.int64), "c")[0]
    assert big[0] != big[1]


def test_dataset_detects_and_names_columns():
    X, y = _frame(200)
    d = hb.Dataset(X, label=y, categorical_features=["city"])
    assert d.categorical.names == ["city", "colour", "sex"]  # object columns without naming
    assert d.categorical.kinds == ["int", "str", "str"]
    assert d.data.shape == (200, 1) and d.num_col() == 4
    arr = X.to_numpy(object)
    d2 = hb.Dataset(arr, label=y, cat_features=[1, 2, 3], feature_names=list(X.columns))
    np.testing.assert_array_equal(d2.categorical.hashes, d.categorical.hashes)
    numeric = np.column_stack([X["num"], X["city"]])
    d3 = hb.Dataset(numeric, label=y, categorical_features=[1])
    np.testing.assert_array_equal(d3.categorical.hashes[:, 0], d.categorical.hashes[:, 0])


def test_category_and_string_dtypes_are_categorical_without_being_named():
    """pandas category and string columns are detected like object ones, with the same
    hashes for the same values."""
    X, y = _frame(200)
    colour = X["colour"]
    typed = X.assign(colour=colour.astype("category"), sex=X["sex"].astype("string"))
    d = hb.Dataset(typed, label=y)
    assert d.categorical.names == ["colour", "sex"] and d.categorical.kinds == ["str", "str"]
    ref = hb.Dataset(X, label=y)  # object columns
    np.testing.assert_array_equal(d.categorical.hashes, ref.categorical.hashes)
    assert np.sum(d.categorical.hashes[:, 0] == MISSING_HASH) == colour.isna().sum() > 0
    bst = hb.train(PARAMS, hb.Dataset(typed, label=y), 2, verbose_eval=False)
    np.testing.assert_array_equal(bst.predict(typed), bst.predict(X))


@pytest.mark.parametrize("policy", ["depthwise", "lossguide", "oblivious"])
def test_save_load_predicts_identically_from_raw_values(policy, tmp_path):
    X, y = _frame(3000)
    params = {**PARAMS, "grow_policy": policy, "max_leaves": 12}
    bst = hb.train(params, _data(X, y), 15, verbose_eval=False)
    Xt, _ = _frame(500, seed=1)
    p = bst.predict(Xt)
    path = tmp_path / "m.json"
    bst.save_model(path)
    loaded = hb.Booster(model_file=path)
    np.testing.assert_array_equal(loaded.predict(Xt), p)
    np.testing.assert_array_equal(loaded.predict(Xt.to_numpy(object)), p)
    np.testing.assert_array_equal(loaded.predict(hb.Dataset(Xt, categorical_features=CAT)), p)
    assert loaded.feature_names == bst.feature_names and bst.num_features() > 4


def test_unseen_and_missing_categories_get_the_prior():
    X, y = _frame(2000)
    X["colour"] = X["colour"].fillna("red")  # no missing colour in training
    bst = hb.train(PARAMS, _data(X, y), 5, verbose_eval=False)
    cat = bst.categorical
    Xt = X.iloc[:3].copy()
    Xt["city"] = [10_000, 10_001, 3]  # unseen, unseen, seen
    Xt["colour"] = pd.Series([None, "purple", "red"], dtype=object)
    E = cat.matrix(Xt)
    priors = cat.settings.priors
    prior_values = priors[:, 0] / priors.sum(axis=1)
    names = bst.feature_names
    for col, unseen_rows in (("city", [0, 1]), ("colour", [0, 1])):
        ctr = [i for i, nm in enumerate(names) if nm.startswith(f"{col}:ctr")]
        freq = names.index(f"{col}:freq")
        for r in unseen_rows:
            np.testing.assert_array_equal(E[r, ctr], prior_values)
            assert E[r, freq] == 0.0
        seen = E[2, ctr]
        assert not np.array_equal(seen, prior_values)
    # final tables: statistics of all training rows
    city3 = y[X["city"].to_numpy() == 3]
    ctr0 = names.index("city:ctr_p_a0_b1")
    assert E[2, ctr0] == city3.sum() / (city3.size + 1.0)
    assert E[2, names.index("city:freq")] == city3.size / len(X)  # the category's share


def test_eval_sets_and_predictions_agree():
    X, y = _frame(3000)
    Xv, yv = _frame(800, seed=5)
    dtrain = _data(X, y)
    dvalid = hb.Dataset(Xv, label=yv, reference=dtrain, categorical_features=CAT)
    log: dict = {}
    bst = hb.train(PARAMS, dtrain, 20, evals=[(dvalid, "valid")], evals_result=log,
                   verbose_eval=False)
    p = bst.predict(Xv)
    logloss = -np.mean(yv * np.log(p) + (1 - yv) * np.log(1 - p))
    assert log["valid"]["logloss"][-1] == pytest.approx(logloss, rel=1e-6)
    assert roc_auc_score(yv, p) > 0.8


def test_same_seed_same_model_any_thread_count():
    X, y = _frame(2000)
    a = hb.train({**PARAMS, "nthread": 1}, _data(X, y), 8, verbose_eval=False)
    b = hb.train({**PARAMS, "nthread": 2}, _data(X, y), 8, verbose_eval=False)
    assert [t.to_dict() for t in a.trees] == [t.to_dict() for t in b.trees]
    c = hb.train({**PARAMS, "seed": 7}, _data(X, y), 8, verbose_eval=False)
    assert [t.to_dict() for t in a.trees] != [t.to_dict() for t in c.trees]


def test_one_hot_below_one_hot_max_size():
    X, y = _frame(1000)
    bst = hb.train(PARAMS, _data(X, y), 3, verbose_eval=False)
    assert "sex==f" in bst.feature_names  # two values: one indicator
    assert not any(n.startswith("sex:") for n in bst.feature_names)
    bst = hb.train({**PARAMS, "one_hot_max_size": 5}, _data(X, y), 3,
                   verbose_eval=False)
    assert {"colour==red", "colour==NaN", "colour==blue"} <= set(bst.feature_names)


def test_multiclass_and_regression_train():
    X, y = _frame(1500)
    rng = np.random.default_rng(0)
    yk = (y + (X["colour"] == "blue").to_numpy()).astype(float)
    bst = hb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 3},
                   _data(X, yk), 5, verbose_eval=False)
    assert bst.predict(X).shape == (1500, 3)
    assert sum(n.startswith("city:ctr_c") for n in bst.feature_names) == 3 * 3
    yr = y * 3 + rng.normal(size=1500)
    Xv, yv = _frame(1500, seed=9)
    yvr = yv * 3 + rng.normal(size=1500)
    params = {"max_depth": 3, "learning_rate": 0.1}
    without = hb.train(params, hb.Dataset(X.drop(columns=["city"]), label=yr), 30,
                       verbose_eval=False)
    corr_without = np.corrcoef(without.predict(Xv.drop(columns=["city"])), yvr)[0, 1]
    for borders in (0, 2):
        bst = hb.train({**params, "ctr_target_borders": borders},
                       _data(X, yr), 30, verbose_eval=False)
        assert np.corrcoef(bst.predict(Xv), yvr)[0, 1] > corr_without + 0.05


def test_leakage_unique_id_column_changes_auc_little():
    """A unique id per row as a categorical feature: ordered statistics give it no signal
    (plain target encoding would memorise the training labels)."""
    from histboost.datasets import load_adult

    X, y = load_adult("train")
    Xt, yt = load_adult("test")
    X, y, Xt, yt = X.iloc[:10000], y[:10000], Xt.iloc[:5000], yt[:5000]
    params = {"objective": "binary:logistic", "max_depth": 5, "learning_rate": 0.15}
    base = hb.train(params, hb.Dataset(X, label=y), 40, verbose_eval=False)
    auc = roc_auc_score(yt, base.predict(Xt))
    Xi = X.assign(row_id=np.arange(len(X)))
    Xti = Xt.assign(row_id=np.arange(len(X), len(X) + len(Xt)))
    with_id = hb.train(params, hb.Dataset(Xi, label=y, categorical_features=["row_id"]), 40,
                       verbose_eval=False)
    auc_id = roc_auc_score(yt, with_id.predict(Xti))
    assert auc > 0.9
    assert abs(auc_id - auc) <= 0.005


def test_errors_name_the_problem():
    X, y = _frame(300)
    with pytest.raises(ValueError, match="'town' is not a column"):
        hb.Dataset(X, label=y, categorical_features=["town"])
    with pytest.raises(ValueError, match="'num' holds the non-integer value"):
        hb.Dataset(X, label=y, categorical_features=["num"])
    with pytest.raises(ValueError, match="out of range"):
        hb.Dataset(X.to_numpy(object), label=y, categorical_features=[7])
    with pytest.raises(ValueError, match="max_ctr_complexity"):
        hb.train({"max_ctr_complexity": 0}, _data(X, y), 1)
    with pytest.raises(ValueError, match="ctr_priors"):
        hb.train({"ctr_priors": [(-1, 1)]}, _data(X, y), 1)
    with pytest.raises(ValueError, match="ctr_priors pair"):
        hb.train({"ctr_priors": [(0, 0)]}, _data(X, y), 1)
    with pytest.raises(ValueError, match="'f0' holds the non-integer value"):
        hb.Dataset(X[["num", "city"]].to_numpy(), label=y, categorical_features=[0])
    bst = hb.train(PARAMS, _data(X, y), 2, verbose_eval=False)
    with pytest.raises(ValueError, match="categorical column 'colour' is missing"):
        bst.predict(X.drop(columns=["colour"]))
    with pytest.raises(TypeError, match="'colour' holds numbers"):
        bst.predict(X.assign(colour=np.arange(300)))
    with pytest.raises(TypeError, match="'city' holds strings"):
        bst.predict(X.assign(city=X["city"].astype(str)))
    with pytest.raises(ValueError, match="3 columns but the model was trained on 4"):
        bst.predict(X.drop(columns=["colour"]).to_numpy(object))
    with pytest.raises(ValueError, match="Dataset's categorical columns"):
        bst.predict(hb.Dataset(X))  # city numeric here
    with pytest.raises(ValueError, match="cannot be written as an XGBoost model"):
        bst.save_model("unused.json", format="xgboost")
    if not _cuda_visible():  # categorical features train on the GPU (test_cuda_categorical_*)
        with pytest.raises(RuntimeError, match="device='cuda'"):
            hb.train({**PARAMS, "device": "cuda"}, _data(X, y), 1)


def _cuda_visible() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def test_sklearn_estimator_takes_categorical_features(tmp_path):
    X, y = _frame(1500)
    clf = HistBoostClassifier(n_estimators=10, max_depth=3,
                              categorical_features=["city"]).fit(X, y)
    p = clf.predict_proba(X)[:, 1]
    assert roc_auc_score(y, p) > 0.8
    assert clf.feature_importances_.shape == (4,)
    clf.save_model(tmp_path / "c.json")
    again = HistBoostClassifier().load_model(tmp_path / "c.json")
    np.testing.assert_array_equal(again.predict_proba(X)[:, 1], p)


def test_cli_categorical_columns(tmp_path):
    from histboost.cli import main

    X, y = _frame(600)
    X.assign(label=y).to_csv(tmp_path / "d.csv", index=False)
    model, out = tmp_path / "m.json", tmp_path / "p.txt"
    assert main(["train", str(tmp_path / "d.csv"), "--label-column", "label", "--categorical",
                 "city,2,sex", "--num-round", "4", "--model-out", str(model), "--quiet",
                 "--param", "objective=binary:logistic"]) == 0
    assert main(["predict", str(model), str(tmp_path / "d.csv"), "--label-column", "label",
                 "--out", str(out)]) == 0
    bst = hb.Booster(model_file=model)
    assert bst.categorical.columns == ["city", "colour", "sex"]
    frame = X.astype({"city": str})
    np.testing.assert_allclose(np.loadtxt(out), bst.predict(frame), rtol=1e-15)


def test_trees_rotate_through_seeded_permutations(monkeypatch):
    """Tree t uses permutation t mod n_permutations; the permutations are distinct orders
    of the rows, fixed by the seed; each one's statistics are the ordered statistics of
    its order."""
    from histboost.categorical.training import CtrTrainer
    from histboost.kernels.cpu.target_stats import ordered_statistics

    used: list[int] = []
    trainers: list[CtrTrainer] = []
    begin = CtrTrainer.begin_tree

    def spy(self, tree_index, backend):
        begin(self, tree_index, backend)
        used.append(self._perm)
        trainers.append(self)

    monkeypatch.setattr(CtrTrainer, "begin_tree", spy)
    X, y = _frame(600)
    hb.train({**PARAMS, "n_permutations": 3, "ctr_border_count": 7}, _data(X, y), 7,
             verbose_eval=False)
    assert used == [0, 1, 2, 0, 1, 2, 0]
    tr = trainers[0]
    assert len(tr.perms) == 3 and len({p.tobytes() for p in tr.perms}) == 3
    for p in tr.perms:
        np.testing.assert_array_equal(np.sort(p), np.arange(600))
    ids = tr.ids[0]  # city
    count, sums = ordered_statistics(ids, tr.n_ids[0], tr.perms[2], tr.targets)
    pos = np.empty(600, np.int64)
    pos[tr.perms[2]] = np.arange(600)
    r = int(tr.perms[2][300])
    before = (ids == ids[r]) & (pos < pos[r])
    assert count[r] == before.sum() and sums[r, 0] == y[before].sum()
    bins, _ = tr.ordered_columns(2)
    np.testing.assert_array_equal(bins[:, :tr.settings.n_stats],
                                  tr.bin_statistics(count, sums, tr.uniform_cuts()))
    assert tr.value_bins == 8 and bins.max() == 7  # ctr_border_count borders
    hb.train({**PARAMS, "n_permutations": 3}, _data(X, y), 1, verbose_eval=False)
    for p, q in zip(trainers[-1].perms, tr.perms, strict=True):
        np.testing.assert_array_equal(p, q)  # the same seed, the same permutations
    hb.train({**PARAMS, "n_permutations": 3, "seed": 1}, _data(X, y), 1, verbose_eval=False)
    assert not np.array_equal(trainers[-1].perms[0], tr.perms[0])
