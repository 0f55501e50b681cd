"""`Booster`: serialisation round trips, dumps, importance, leaf indices, iteration ranges,
slicing and model-file errors, checked against NumPy traversals of the dumped trees
(`histboost.testing.model_reference`)."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import histboost
import histboost.booster as booster_module
from histboost import Booster
from histboost.testing import model_reference as mref
from histboost.testing.data import make_classification, make_regression

N, F = 240, 5
X_REG, Y_REG = make_regression(N, F, seed=1, missing=0.1)
X_BIN, Y_BIN = make_classification(N, F, n_classes=2, seed=2)
X_MC, Y_MC = make_classification(N, F, n_classes=3, seed=3)
DATA = {"reg:squarederror": (X_REG, Y_REG), "binary:logistic": (X_BIN, Y_BIN),
        "multi:softprob": (X_MC, Y_MC), "multi:softmax": (X_MC, Y_MC)}


def _test_matrix(seed=0):
    """Rows unlike the training data: NaN, +-inf, huge values, exact cut values."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((60, F)) * 2
    X[rng.random(X.shape) < 0.15] = np.nan
    X[0] = np.inf
    X[1] = -np.inf
    X[2] = 1e300
    X[3] = np.nan
    return X


def train(objective="reg:squarederror", rounds=4, **params):
    X, y = DATA[objective]
    p = {"objective": objective, "nthread": 1, "max_bin": 32, "max_depth": 3, "seed": 0,
         **params}
    if objective.startswith("multi:"):
        p["num_class"] = 3
    return histboost.train(p, histboost.Dataset(X, label=y), rounds, verbose_eval=False)


def _dumps(b):
    return [json.loads(s) for s in b.get_dump(dump_format="json")]


@pytest.fixture(scope="module")
def models():
    return {
        "depthwise": train("reg:squarederror", 5, max_depth=4),
        "lossguide": train("binary:logistic", 5, grow_policy="lossguide", max_leaves=6,
                           max_depth=0),
        "oblivious": train("binary:logistic", 5, grow_policy="oblivious", max_depth=3),
        "multiclass": train("multi:softprob", 4, max_depth=3),
        "multi_oblivious": train("multi:softmax", 3, grow_policy="oblivious", max_depth=2),
    }


MODEL_NAMES = ["depthwise", "lossguide", "oblivious", "multiclass", "multi_oblivious"]


# -- save / load -----------------------------------------------------------------------------

def _assert_same_predictions(a, b, X):
    for kw in ({}, {"output_margin": True}, {"pred_leaf": True}):
        pa, pb = a.predict(X, **kw), b.predict(X, **kw)
        assert pa.dtype == pb.dtype and pa.shape == pb.shape
        assert np.array_equal(pa, pb), kw  # bit-identical


@settings(max_examples=25, deadline=None, derandomize=True)
@given(objective=st.sampled_from(sorted(DATA)),
       policy=st.sampled_from(["depthwise", "lossguide", "oblivious"]),
       depth=st.integers(1, 4), leaves=st.sampled_from([0, 3, 7]),
       rounds=st.integers(1, 3), quantized=st.booleans(),
       alpha=st.sampled_from([0.0, 0.5]), subsample=st.sampled_from([1.0, 0.7]))
def test_save_load_predictions_bit_identical(tmp_path_factory, objective, policy, depth,
                                             leaves, rounds, quantized, alpha, subsample):
    b = train(objective, rounds, grow_policy=policy, max_depth=depth,
              max_leaves=leaves if policy != "oblivious" else 0, quantized_grad=quantized,
              reg_alpha=alpha, subsample=subsample)
    path = tmp_path_factory.mktemp("m") / "model.json"
    b.save_model(path)
    loaded = Booster(model_file=path)
    X = np.vstack([DATA[objective][0], _test_matrix()])
    _assert_same_predictions(b, loaded, X)
    # the file holds exactly save_raw(); loading and saving again changes nothing
    assert path.read_bytes() == b.save_raw()
    assert loaded.save_raw() == b.save_raw()
    from_bytes = Booster()
    from_bytes.load_model(b.save_raw())
    _assert_same_predictions(b, from_bytes, X)
    assert from_bytes.num_boosted_rounds() == rounds
    assert from_bytes.objective_name == objective
    assert from_bytes.feature_names == b.feature_names


def test_model_file_is_versioned_json(models, tmp_path):
    path = tmp_path / "m.json"
    models["multiclass"].save_model(str(path))
    d = json.loads(path.read_text())
    assert d["format"] == "histboost" and d["version"] == 1
    assert d["histboost_version"] == histboost.__version__
    assert d["learner"]["num_class"] == 3 and d["learner"]["trees_per_round"] == 3
    assert len(d["trees"]) == 12
    assert [t["class_index"] for t in d["trees"]] == [0, 1, 2] * 4


def test_best_iteration_survives_save_load(tmp_path):
    X, y = DATA["binary:logistic"]
    dtr = histboost.Dataset(X[:160], label=y[:160])
    dva = histboost.Dataset(X[160:], label=y[160:])
    b = histboost.train({"objective": "binary:logistic", "nthread": 1, "eta": 1.0,
                         "max_depth": 6}, dtr, 40, evals=[(dva, "va")],
                        early_stopping_rounds=3, verbose_eval=False)
    b.save_model(tmp_path / "m.json")
    loaded = Booster(model_file=tmp_path / "m.json")
    assert loaded.best_iteration == b.best_iteration is not None
    assert loaded.best_score == b.best_score


# -- atomic writes ---------------------------------------------------------------------------

def test_save_overwrites_completely(models, tmp_path):
    path = tmp_path / "m.json"
    models["multiclass"].save_model(path)
    small = models["depthwise"][:1]
    small.save_model(path)
    assert path.read_bytes() == small.save_raw()
    assert Booster(model_file=path).num_boosted_rounds() == 1


@pytest.mark.parametrize("where", ["write", "rename"])
def test_failed_save_leaves_old_file_and_no_temporaries(models, tmp_path, monkeypatch, where):
    path = tmp_path / "m.json"
    old = models["depthwise"]
    old.save_model(path)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError("disk full")

    if where == "write":
        monkeypatch.setattr(Booster, "save_raw", boom)
    else:
        monkeypatch.setattr(booster_module.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        models["multiclass"].save_model(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["m.json"]


def test_save_into_missing_folder_raises(models, tmp_path):
    with pytest.raises(FileNotFoundError):
        models["depthwise"].save_model(tmp_path / "nope" / "m.json")


# -- dumps -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODEL_NAMES)
def test_json_dump_traversal_matches_predict(models, name):
    """A NumPy traversal of the JSON dump gives the engine's margins and leaf indices
    bit for bit (normal trees: node ids; oblivious trees: bit paths)."""
    b = models[name]
    X = np.vstack([DATA[b.objective_name][0], _test_matrix(1)])
    dumps = _dumps(b)
    assert len(dumps) == len(b.trees) == b.num_boosted_rounds() * b.trees_per_round
    want = mref.forest_margin(dumps, b.base_margin, X)
    got = b.predict(X, output_margin=True)
    assert np.array_equal(got.reshape(want.shape), want)
    leaves = b.predict(X, pred_leaf=True)
    assert leaves.shape == (X.shape[0], len(dumps)) and leaves.dtype == np.int32
    for t, d in enumerate(dumps):
        np.testing.assert_array_equal(leaves[:, t], mref.tree_leaves(d, X))
        if d["kind"] == "tree":  # node ids of leaves
            assert np.all(np.asarray(d["left_child"])[leaves[:, t]] == -1)
        else:
            assert leaves[:, t].max() < 2 ** len(d["level_feature"])


def _oblivious_leaf_by_hand(d, x):
    """Bit path written out level by level (independent of model_reference)."""
    bits = []
    for f, thr, dl in zip(d["level_feature"], d["level_threshold"], d["level_default_left"],
                          strict=True):
        v = x[f]
        bits.append(("0" if dl else "1") if np.isnan(v) else ("0" if v <= thr else "1"))
    return int("".join(bits), 2) if bits else 0


def test_oblivious_pred_leaf_is_bit_path(models):
    b = models["oblivious"]
    X = _test_matrix(2)
    leaves = b.predict(X, pred_leaf=True)
    dumps = _dumps(b)
    assert all(d["kind"] == "oblivious" for d in dumps)
    assert any(len(d["level_feature"]) == 3 for d in dumps)
    for t, d in enumerate(dumps):
        for i in range(X.shape[0]):
            assert leaves[i, t] == _oblivious_leaf_by_hand(d, X[i])


_OBL_LEVEL = re.compile(r"^level (\d+): \[(.+)<=(.+)\] missing=(left|right)")
_OBL_LEAF = re.compile(r"^  leaf (\d+): leaf=([^,]+)")


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_text_dump_reproduces_trees(models, name):
    b = models[name]
    X = np.vstack([DATA[b.objective_name][0], _test_matrix(3)])
    texts = b.get_dump()
    dumps = _dumps(b)
    assert len(texts) == len(dumps)
    for text, d in zip(texts, dumps, strict=True):
        if d["kind"] == "tree":
            tree = mref.parse_text_dump(text, b.feature_names)
            assert tree["left_child"] == d["left_child"]
            assert tree["split_feature"] == d["split_feature"]
            np.testing.assert_array_equal(mref.tree_values(tree, X), mref.tree_values(d, X))
        else:
            lines = text.rstrip("\n").split("\n")
            D = len(d["level_feature"])
            for lv in range(D):
                m = _OBL_LEVEL.match(lines[lv])
                assert m, lines[lv]
                assert int(m[1]) == lv
                assert b.feature_names.index(m[2]) == d["level_feature"][lv]
                assert float(m[3]) == d["level_threshold"][lv]
                assert (m[4] == "left") == bool(d["level_default_left"][lv])
            vals = [float(_OBL_LEAF.match(line)[2]) for line in lines[D:]]
            assert vals == d["leaf_value"]


@pytest.mark.parametrize("name", ["depthwise", "oblivious"])
def test_text_dump_stats_and_format(models, name):
    b = models[name]
    plain, stats = b.get_dump(), b.get_dump(with_stats=True)
    assert len(plain) == len(stats) == len(b.trees)
    assert all("cover=" in s for s in stats) and not any("cover=" in s for s in plain)
    n_leaf_lines = sum(len(re.findall(r"leaf=", s)) for s in plain)
    assert n_leaf_lines == sum(t.n_leaves for t in b.trees)
    with pytest.raises(ValueError, match="dump_format"):
        b.get_dump(dump_format="xml")


def test_text_dump_uses_feature_names():
    X, y = DATA["reg:squarederror"]
    names = ["alpha", "beta", "gamma", "delta", "eps"]
    b = histboost.train({"nthread": 1, "max_depth": 2},
                        histboost.Dataset(X, label=y, feature_names=names), 2,
                        verbose_eval=False)
    text = "".join(b.get_dump())
    used = {m for m in re.findall(r"\[(\w+)<=", text)}
    assert used and used <= set(names)


# -- importance ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODEL_NAMES)
def test_feature_importance_matches_hand_count(models, name):
    b = models[name]
    split = np.zeros(F)
    gain = np.zeros(F)
    for d in _dumps(b):
        if d["kind"] == "tree":
            for i, lc in enumerate(d["left_child"]):
                if lc != -1:
                    split[d["split_feature"][i]] += 1
                    gain[d["split_feature"][i]] += d["gain"][i]
        else:
            for f, g in zip(d["level_feature"], d["level_gain"], strict=True):
                split[f] += 1
                gain[f] += g
    assert split.sum() > 0
    np.testing.assert_array_equal(b.feature_importance("split"), split)
    np.testing.assert_allclose(b.feature_importance("gain"), gain, rtol=1e-12)
    assert np.all(gain >= 0)
    score = b.get_score("split")
    assert score == {b.feature_names[f]: split[f] for f in range(F) if split[f] > 0}
    with pytest.raises(ValueError, match="importance_type"):
        b.feature_importance("cover_total")


# -- rounds, iteration ranges, slicing -------------------------------------------------------

@pytest.mark.parametrize("name,rounds,k", [("depthwise", 5, 1), ("multiclass", 4, 3),
                                           ("multi_oblivious", 3, 3)])
def test_num_boosted_rounds(models, name, rounds, k):
    b = models[name]
    assert b.num_boosted_rounds() == rounds
    assert len(b.get_dump()) == rounds * k
    assert b.num_features() == F


@pytest.mark.parametrize("name", ["depthwise", "multiclass", "oblivious"])
def test_iteration_range_and_slicing(models, name):
    b = models[name]
    X = _test_matrix(4)
    dumps = _dumps(b)
    K, R = b.trees_per_round, b.num_boosted_rounds()
    for a, e in [(0, 1), (1, 3), (2, R), (0, R)]:
        want = mref.forest_margin(dumps[a * K:e * K], b.base_margin, X)
        got = b.predict(X, output_margin=True, iteration_range=(a, e))
        assert np.array_equal(got.reshape(want.shape), want), (a, e)
        sl = b[a:e]
        assert sl.num_boosted_rounds() == e - a
        assert np.array_equal(sl.predict(X, output_margin=True), got)
        leaves = b.predict(X, pred_leaf=True, iteration_range=(a, e))
        np.testing.assert_array_equal(leaves, b.predict(X, pred_leaf=True)[:, a * K:e * K])
    full = b.predict(X)
    assert np.array_equal(b.predict(X, iteration_range=(0, 0)), full)
    assert np.array_equal(b.predict(X, iteration_range=(1, 0)),
                          b.predict(X, iteration_range=(1, R)))
    assert np.array_equal(b[:].predict(X), full)
    assert b[:2].save_raw() != b.save_raw()
    # slicing copies: appending to a slice leaves the original alone
    sl = b[:1]
    sl.append_round(b.trees[-K:])
    assert b.num_boosted_rounds() == R
    for bad in [(0, R + 1), (2, 1), (-1, 2)]:
        with pytest.raises(ValueError, match="iteration_range"):
            b.predict(X, iteration_range=bad)
    with pytest.raises(TypeError):
        b[::2]
    with pytest.raises(TypeError):
        b[1]


def test_empty_slice_predicts_base_margin(models):
    b = models["multiclass"]
    X = _test_matrix(5)
    empty = b[2:2]
    assert empty.num_boosted_rounds() == 0
    np.testing.assert_array_equal(empty.predict(X, output_margin=True),
                                  np.tile(b.base_margin, (X.shape[0], 1)))


# -- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["depthwise", "oblivious"])
def test_wrong_feature_count_at_predict(models, name):
    b = models[name]
    for bad in (np.zeros((3, F - 1)), np.zeros((3, F + 1))):
        with pytest.raises(ValueError, match=f"{bad.shape[1]} features.*{F}"):
            b.predict(bad)
        with pytest.raises(ValueError, match="features"):
            b.predict(bad, pred_leaf=True)


def test_wrong_feature_names_at_predict():
    pd = pytest.importorskip("pandas")
    X, y = DATA["reg:squarederror"]
    cols = [f"c{i}" for i in range(F)]
    b = histboost.train({"nthread": 1, "max_depth": 2}, histboost.Dataset(
        pd.DataFrame(X, columns=cols), label=y), 2, verbose_eval=False)
    np.testing.assert_array_equal(b.predict(pd.DataFrame(X, columns=cols)), b.predict(X))
    with pytest.raises(ValueError, match="feature names"):
        b.predict(pd.DataFrame(X, columns=cols[::-1]))


def test_missing_model_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        Booster(model_file=tmp_path / "nope.json")


def _corruptions():
    """(name, function mutating a model dict or returning raw bytes)."""
    def set_(path, value):
        def f(d):
            obj = d
            for k in path[:-1]:
                obj = obj[k]
            obj[path[-1]] = value
            return d
        return f

    def delete(path):
        def f(d):
            obj = d
            for k in path[:-1]:
                obj = obj[k]
            del obj[path[-1]]
            return d
        return f

    return [
        ("empty file", lambda d: b""),
        ("binary garbage", lambda d: b"\x89PNG\r\n\x1a\n\x00\xff\xfe"),
        ("truncated", lambda d: json.dumps(d).encode()[:-40]),
        ("json list", lambda d: [d]),
        ("json number", lambda d: 3),
        ("wrong format", set_(["format"], "xgboost")),
        ("future version", set_(["version"], 99)),
        ("string version", set_(["version"], "1")),
        ("no learner", delete(["learner"])),
        ("no trees", delete(["trees"])),
        ("trees not a list", set_(["trees"], 5)),
        ("learner a list", set_(["learner"], [])),
        ("objective missing", delete(["learner", "objective"])),
        ("unknown objective", set_(["learner", "objective"], "reg:pinball")),
        ("n_features mismatch", set_(["learner", "n_features"], 9)),
        ("base_margin length", set_(["learner", "base_margin"], [0.0, 1.0])),
        ("base_margin text", set_(["learner", "base_margin"], ["x"])),
        ("tree kind", set_(["trees", 0, "kind"], "forest")),
        ("tree field missing", delete(["trees", 0, "threshold"])),
        ("tree field short", lambda d: (d["trees"][0]["value"].pop(), d)[1]),
        ("feature out of range", set_(["trees", 0, "split_feature", 0], 77)),
        ("child points back", set_(["trees", 0, "left_child", 0], 0)),
        ("child out of range", set_(["trees", 0, "right_child", 0], 1000)),
        ("threshold text", set_(["trees", 0, "threshold", 0], "big")),
        ("class index", set_(["trees", 1, "class_index"], 0)),
        ("trees not a multiple of K", lambda d: (d["trees"].pop(), d)[1]),
    ]


@pytest.mark.parametrize("name,corrupt", _corruptions(), ids=[c[0] for c in _corruptions()])
def test_corrupt_model_file_raises_value_error(models, tmp_path, name, corrupt):
    d = json.loads(models["multiclass"].save_raw())
    out = corrupt(d)
    raw = out if isinstance(out, bytes) else json.dumps(out).encode()
    path = tmp_path / "bad.json"
    path.write_bytes(raw)
    with pytest.raises(ValueError):
        Booster(model_file=path)
    with pytest.raises(ValueError):
        Booster().load_model(raw)


@pytest.mark.parametrize("field,value", [("objective", "reg:pinball"),
                                         ("best_iteration", "x"),
                                         ("params", {"nthread": [2]})])
def test_corrupt_learner_fields_rejected_at_load(models, field, value):
    d = json.loads(models["depthwise"].save_raw())
    d["learner"][field] = value
    with pytest.raises(ValueError):
        Booster().load_model(json.dumps(d).encode())


def test_corrupt_oblivious_tree_raises_value_error(models):
    d = json.loads(models["oblivious"].save_raw())
    d["trees"][0]["leaf_value"] = d["trees"][0]["leaf_value"][:-1]
    with pytest.raises(ValueError, match="2\\*\\*depth|leaves"):
        Booster().load_model(json.dumps(d).encode())
    d = json.loads(models["oblivious"].save_raw())
    d["trees"][0]["level_feature"][0] = F
    with pytest.raises(ValueError, match="feature"):
        Booster().load_model(json.dumps(d).encode())


def _malformed():
    """(name, function mutating a model dict or returning raw bytes) that loaded without a
    ValueError before issue 18 (a later AttributeError / RecursionError, or silently)."""
    def at(path, value):
        def f(d):
            obj = d
            for k in path[:-1]:
                obj = obj[k]
            obj[path[-1]] = value
            return d
        return f

    def two_d(field):
        return lambda d: at(["trees", 0, field], [[v] for v in d["trees"][0][field]])(d)

    def duplicate_name(d):
        d["learner"]["feature_names"][1] = d["learner"]["feature_names"][0]
        return d

    deep = 100_000
    return [
        ("trees a dict", at(["trees"], {"0": {}})),
        ("trees hold an int", at(["trees", 0], 5)),
        ("trees hold a list", at(["trees", 0], [])),
        ("2-D value", two_d("value")),
        ("2-D threshold", two_d("threshold")),
        ("2-D children", lambda d: two_d("right_child")(two_d("left_child")(d))),
        ("JSON nested 100k deep", lambda d: b"[" * deep + b"]" * deep),
        ("deep inside a tree", lambda d: json.dumps(d).replace(
            '"kind"', '"x": ' + "[" * deep + "]" * deep + ', "kind"', 1).encode()),
        ("version 0", at(["version"], 0)),
        ("version -1", at(["version"], -1)),
        ("version true", at(["version"], True)),
        ("version 1.0", at(["version"], 1.0)),
        ("duplicate feature names", duplicate_name),
        ("feature names a string", at(["learner", "feature_names"], "abcde")),
        ("feature name a number", at(["learner", "feature_names", 0], 7)),
        ("NaN threshold", at(["trees", 0, "threshold", 0], float("nan"))),
        ("NaN leaf value", at(["trees", 3, "value", -1], float("nan"))),
        ("infinite leaf value", at(["trees", 3, "value", -1], float("inf"))),
        ("NaN cover", at(["trees", 0, "cover", 0], float("nan"))),
        ("best_iteration = rounds", at(["learner", "best_iteration"], 4)),
        ("best_iteration negative", at(["learner", "best_iteration"], -1)),
        ("best_score text", at(["learner", "best_score"], "0.5")),
        ("best_score NaN", at(["learner", "best_score"], float("nan"))),
        ("base_margin NaN", at(["learner", "base_margin", 0], float("nan"))),
        ("num_class true", at(["learner", "num_class"], True)),
        ("num_class text", at(["learner", "num_class"], "3")),
        ("n_features float", at(["learner", "n_features"], 5.0)),
        ("objective a list", at(["learner", "objective"], ["multi:softprob"])),
        ("params pairs", at(["learner", "params"], [["max_depth", 3]])),
        ("trees_per_round", at(["learner", "trees_per_round"], 1)),
        ("class_index text", at(["trees", 1, "class_index"], "1")),
        ("class_index float", at(["trees", 1, "class_index"], 1.0)),
    ]


@pytest.mark.parametrize("name,corrupt", _malformed(), ids=[c[0] for c in _malformed()])
def test_malformed_model_raises_value_error_at_load(models, tmp_path, name, corrupt):
    good = models["multiclass"]
    d = json.loads(good.save_raw())
    assert d["learner"]["best_iteration"] is None and good.num_boosted_rounds() == 4
    out = corrupt(d)
    raw = out if isinstance(out, bytes) else json.dumps(out).encode()
    path = tmp_path / "bad.json"
    path.write_bytes(raw)
    with pytest.raises(ValueError, match="bad.json"):
        Booster(model_file=path)
    b = good.copy()
    with pytest.raises(ValueError, match="model bytes"):
        b.load_model(raw)
    # a failed load leaves the Booster as it was
    X = _test_matrix()
    assert b.num_boosted_rounds() == 4 and b.feature_names == good.feature_names
    np.testing.assert_array_equal(b.predict(X), good.predict(X))


def test_model_with_best_iteration_and_infinite_threshold_loads(models):
    d = json.loads(models["depthwise"].save_raw())
    d["learner"]["best_iteration"], d["learner"]["best_score"] = 4, 0.5
    # x <= inf sends every value left and only missing values right: a legitimate split
    d["trees"][0]["threshold"][0] = float("inf")
    b = Booster()
    b.load_model(json.dumps(d).encode())
    assert b.best_iteration == 4 and b.best_score == 0.5
    X = _test_matrix()
    x = X[:, d["trees"][0]["split_feature"][0]]
    left = ~np.isnan(x) | bool(d["trees"][0]["default_left"][0])
    leaves = b.predict(X, pred_leaf=True)[:, 0]
    first = b.trees[0]
    in_left = np.array([_descends_from(first, int(leaf), int(first.left_child[0]))
                        for leaf in leaves])
    np.testing.assert_array_equal(in_left, left)


def _descends_from(tree, node, ancestor):
    parent = {int(c): i for i, c in enumerate(tree.left_child) if c >= 0}
    parent.update({int(c): i for i, c in enumerate(tree.right_child) if c >= 0})
    while node != ancestor and node in parent:
        node = parent[node]
    return node == ancestor


def test_params_survive_a_save_and_load_unchanged(tmp_path):
    """Tuple-valued parameters (constraints) are stored as JSON lists from the start, so a
    fresh model's dict equals the dict of the model read back."""
    import histboost as hb
    X = np.random.default_rng(0).normal(size=(200, 3))
    y = X[:, 0] + X[:, 1]
    b = hb.train({"max_depth": 2, "monotone_constraints": (1, 0, -1),
                  "interaction_constraints": [[0, 1], [2]]}, hb.Dataset(X, label=y), 2)
    path = tmp_path / "m.json"
    b.save_model(path)
    assert hb.Booster(model_file=path).to_dict() == b.to_dict()
