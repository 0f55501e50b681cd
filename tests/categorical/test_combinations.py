"""Feature combinations: perfect hash, the interaction test of the issue, save/load."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

import histboost as hb
from histboost.categorical.combinations import pack_ids


def test_pack_ids_is_a_perfect_hash():
    rng = np.random.default_rng(0)
    a, b, c = rng.integers(0, 7, 500), rng.integers(0, 5, 500), rng.integers(0, 3, 500)
    ids, m = pack_ids([a, b, c], [7, 5, 3])
    triples = list(zip(a.tolist(), b.tolist(), c.tolist(), strict=True))
    assert m == len(set(triples))
    assert ids.min() == 0 and ids.max() == m - 1
    seen: dict[tuple, int] = {}
    for t, i in zip(triples, ids.tolist(), strict=True):
        assert seen.setdefault(t, i) == i  # one id per combination
    assert len(set(seen.values())) == m  # and one combination per id
    huge, m2 = pack_ids([a, b], [2**40, 2**40])  # beyond int64 packs: hashed
    assert m2 == len(set(zip(a.tolist(), b.tolist(), strict=True)))


def _interaction(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Labels a random function of two 40-value columns (each alone uninformative), 10%
    label noise."""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 40, n), rng.integers(0, 40, n)
    y = np.random.default_rng(42).integers(0, 2, (40, 40))[a, b].astype(np.float64)
    flip = rng.random(n) < 0.1
    y[flip] = 1 - y[flip]
    return pd.DataFrame({"a": a, "b": b}), y


@pytest.mark.parametrize("policy", ["depthwise", "lossguide", "oblivious"])
def test_combinations_learn_an_interaction(policy):
    X, y = _interaction(8000, 0)
    Xt, yt = _interaction(4000, 1)
    params = {"objective": "binary:logistic", "max_depth": 6, "learning_rate": 0.2,
              "grow_policy": policy, "max_leaves": 31}
    aucs = {}
    for complexity in (1, 2):
        bst = hb.train({**params, "max_ctr_complexity": complexity},
                       hb.Dataset(X, label=y, categorical_features=["a", "b"]), 40,
                       verbose_eval=False)
        aucs[complexity] = roc_auc_score(yt, bst.predict(Xt))
    assert aucs[2] > 0.85, aucs
    assert aucs[1] < 0.7, aucs  # measured 0.63; CatBoost without combinations: 0.60


def test_combinations_save_load_identical(tmp_path):
    X, y = _interaction(3000, 0)
    X["c"] = np.random.default_rng(1).choice(np.array(["u", "v", "w"], object), 3000)
    params = {"objective": "binary:logistic", "max_depth": 4, "max_ctr_complexity": 3}
    bst = hb.train(params, hb.Dataset(X, label=y, categorical_features=["a", "b"]), 10,
                   verbose_eval=False)
    assert any("*" in name for name in bst.feature_names)  # combinations in the model
    assert bst.categorical.n_features == bst.num_features()
    path = tmp_path / "m.json"
    bst.save_model(path)
    Xt, _ = _interaction(1000, 2)
    Xt["c"] = "w"
    Xt.loc[:10, "c"] = "never seen"
    loaded = hb.Booster(model_file=path)
    np.testing.assert_array_equal(loaded.predict(Xt), bst.predict(Xt))


def test_combinations_eval_set_matches_predict():
    X, y = _interaction(4000, 0)
    Xv, yv = _interaction(1000, 3)
    dtrain = hb.Dataset(X, label=y, categorical_features=["a", "b"])
    dvalid = hb.Dataset(Xv, label=yv, categorical_features=["a", "b"], reference=dtrain)
    log: dict = {}
    bst = hb.train({"objective": "binary:logistic", "max_ctr_complexity": 2}, dtrain, 15,
                   evals=[(dvalid, "v")], evals_result=log, verbose_eval=False)
    p = bst.predict(Xv)
    ll = -np.mean(yv * np.log(p) + (1 - yv) * np.log(1 - p))
    assert log["v"]["logloss"][-1] == pytest.approx(ll, rel=1e-9)
