"""The tree grower through `histboost.train`: grow policies, regularisation, row / column
sampling and quantised gradients, against the brute-force references (`histboost.testing`)
and across thread counts."""

from __future__ import annotations

import sys
from pathlib import Path

import numba as nb
import numpy as np
import pytest
from scipy.special import expit
from sklearn import metrics as skm

import histboost
from histboost.kernels.cpu import sampling
from histboost.kernels.cpu.sampling import sample_rows
from histboost.testing import model_reference as mref
from histboost.testing import reference as ref
from histboost.testing.data import make_classification, make_regression
from histboost.testing.threads import forced_paths
from histboost.tree import grower
from histboost.tree.quantize import sample_key

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _training_helpers import X_BIN, X_MC, X_REG, Y_BIN, Y_MC, Y_REG, F, _json, _train  # noqa: E402

# -- grow policies ---------------------------------------------------------------------------

REG = ref.Reg(reg_lambda=1.0, reg_alpha=0.2, min_child_weight=0.5, min_data_in_leaf=3)


def _exact_problem(seed=5, n=200, missing=0.15, max_bin=8):
    """Squared error at margin 0 with labels on a 1/64 grid: float32 gradients are exact, so
    the engine and the float64 brute-force reference see the same numbers."""
    X, y = make_regression(n, 3, seed=seed, missing=missing)
    y = np.round(y * 64) / 64
    d = histboost.Dataset(X, label=y, max_bin=max_bin).construct()
    return X, y, d


def _ref_params(reg=REG, **kw):
    return {"learning_rate": 0.5, "base_score": 0.0, "max_bin": 8, "nthread": 1,
            "reg_lambda": reg.reg_lambda, "reg_alpha": reg.reg_alpha,
            "min_child_weight": reg.min_child_weight, "min_data_in_leaf": reg.min_data_in_leaf,
            "max_delta_step": reg.max_delta_step, **kw}


@pytest.mark.parametrize("max_leaves", [2, 3, 5, 9])
def test_lossguide_matches_best_first_reference(max_leaves):
    X, y, d = _exact_problem()
    b = histboost.train(_ref_params(grow_policy="lossguide", max_leaves=max_leaves,
                                    max_depth=0), d, 1, verbose_eval=False)
    want = mref.grow_lossguide(d.bins, -y, np.ones_like(y), d.bin_mapper.n_bins, REG,
                               max_leaves, 0.5)
    np.testing.assert_allclose(b.predict(X), want, rtol=1e-9, atol=1e-12)
    assert b.trees[0].n_leaves == max_leaves


@pytest.mark.parametrize("seed,missing", [(5, 0.15), (6, 0.0), (7, 0.4)])
def test_oblivious_matches_level_reference(seed, missing):
    """Each level's shared split maximises the gain summed over the level's nodes."""
    X, y, d = _exact_problem(seed=seed, missing=missing)
    b = histboost.train(_ref_params(grow_policy="oblivious", max_depth=3), d, 1,
                        verbose_eval=False)
    levels, values, path = mref.grow_oblivious(d.bins, -y, np.ones_like(y),
                                               d.bin_mapper.n_bins, REG, 3, 0.5)
    t = _json(b)[0]
    assert t["kind"] == "oblivious"
    got = list(zip(t["level_feature"], t["level_bin"], t["level_default_left"], strict=True))
    assert got == [lv[:3] for lv in levels]
    np.testing.assert_allclose(t["level_gain"], [lv[3] for lv in levels], rtol=1e-9)
    np.testing.assert_allclose(b.predict(X), values, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(b.predict(X, pred_leaf=True)[:, 0], path)


def test_oblivious_trees_have_one_split_per_level():
    b = _train({"objective": "binary:logistic", "grow_policy": "oblivious", "max_depth": 4},
               X_BIN, Y_BIN, 6)
    X = X_BIN
    for t, tree in zip(_json(b), b.trees, strict=True):
        D = len(t["level_feature"])
        assert 1 <= D <= 4 and tree.is_oblivious and tree.n_leaves == 2 ** D
        for key in ("level_bin", "level_threshold", "level_default_left", "level_gain"):
            assert len(t[key]) == D
        # every row at level d is tested on the same (feature, threshold): its bit path is
        # the concatenation of the D independent tests
        leaves = mref.tree_leaves(t, X)
        for lv in range(D):
            v = X[:, t["level_feature"][lv]]
            right = np.where(np.isnan(v), not t["level_default_left"][lv],
                             v > t["level_threshold"][lv])
            np.testing.assert_array_equal((leaves >> (D - 1 - lv)) & 1, right)
        # leaf counts recorded in the tree are the training rows in each bit path
        np.testing.assert_array_equal(np.bincount(leaves, minlength=2 ** D), t["leaf_count"])


def test_lossguide_respects_max_leaves_and_depth():
    X, y = make_regression(1500, F, seed=3)
    for ml, md in [(7, 0), (12, 3), (31, 0)]:
        b = _train({"grow_policy": "lossguide", "max_leaves": ml, "max_depth": md}, X, y, 4)
        leaves = [t.n_leaves for t in b.trees]
        assert max(leaves) <= ml
        if md == 0:
            assert max(leaves) == ml
        else:
            assert max(t.depth for t in b.trees) <= md
            assert max(leaves) <= min(ml, 2 ** md)


def _held_counting(monkeypatch):
    """Count the backend nodes beyond one a leaf that grown trees' leaves hold (splits
    undone: made ahead of best-first order and not kept, or pruned)."""
    extra = []
    grow = grower.TreeGrower.grow

    def counted(self, *args, **kw):
        grown = grow(self, *args, **kw)
        extra.append(sum(len(held) - 1 for held in grown.leaves))
        return grown
    monkeypatch.setattr(grower.TreeGrower, "grow", counted)
    return extra


@pytest.mark.parametrize("params,data,ahead", [
    ({"objective": "binary:logistic", "max_leaves": 24}, "bin", True),
    ({"objective": "binary:logistic", "max_leaves": 11, "max_depth": 4, "nthread": 3,
      "subsample": 0.7, "colsample_bytree": 0.8}, "bin", True),
    ({"objective": "multi:softprob", "num_class": 3, "max_leaves": 12, "quantized_grad": True,
      "min_data_in_leaf": 5}, "mc", True),
    ({"objective": "reg:squarederror", "max_leaves": 20, "gamma": 3.0, "reg_alpha": 0.5,
      "min_child_weight": 3}, "reg", True),
    ({"objective": "reg:squarederror", "max_leaves": 16, "monotone_constraints": (1, -1),
      "interaction_constraints": [[0, 1, 2], [2, 3, 4]]}, "reg", True),
    # children's column masks drawn in split order: one leaf a step
    ({"objective": "binary:logistic", "max_leaves": 16, "colsample_bynode": 0.6}, "bin",
     False),
])
def test_lossguide_batches_equal_one_leaf_a_step(monkeypatch, params, data, ahead):
    """Best-first growth splitting up to BEST_FIRST_BATCH leaves a step (splits made ahead,
    some undone) trains the model of one leaf a step, byte for byte."""
    X, y = {"bin": (X_BIN, Y_BIN), "mc": (X_MC, Y_MC), "reg": (X_REG, Y_REG)}[data]
    params = {"grow_policy": "lossguide", "max_depth": 0, "learning_rate": 0.3, **params}
    extra = _held_counting(monkeypatch)
    many = _train(params, X, y, 4).save_raw()
    extra_many = sum(extra)
    monkeypatch.setattr(grower, "BEST_FIRST_BATCH", 1)
    extra.clear()
    one = _train(params, X, y, 4).save_raw()
    # more backend nodes below the leaves: splits were made ahead and undone
    assert (extra_many > sum(extra)) == ahead
    # one leaf a step undoes splits only by pruning (which the gamma case does)
    assert (sum(extra) > 0) == ("gamma" in params)
    assert many == one


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_depthwise_respects_max_depth(depth):
    X, y = make_regression(1500, F, seed=4)
    b = _train({"max_depth": depth}, X, y, 3)
    assert max(t.depth for t in b.trees) == depth
    # with max_leaves as well, depth-wise growth stops at the leaf budget
    b = _train({"max_depth": 6, "max_leaves": 5}, X, y, 3)
    assert max(t.n_leaves for t in b.trees) == 5
    assert all(t.depth <= 6 for t in b.trees)


# -- regularisation --------------------------------------------------------------------------

@pytest.mark.parametrize("gamma", [0.0, 2.0, 12.0, 1e6])
def test_gamma_prunes_like_reference(gamma):
    X, y, d = _exact_problem()
    b = histboost.train(_ref_params(max_depth=3, gamma=gamma), d, 1, verbose_eval=False)
    want = mref.grow_depthwise_pruned(d.bins, -y, np.ones_like(y), d.bin_mapper.n_bins, REG,
                                      3, 0.5, gamma)
    np.testing.assert_allclose(b.predict(X), want, rtol=1e-9, atol=1e-12)
    t = b.trees[0]
    inner = np.flatnonzero(t.left_child != -1)
    for i in inner:  # no remaining split with two leaf children has a gain below gamma
        if t.left_child[t.left_child[i]] == -1 and t.left_child[t.right_child[i]] == -1:
            assert t.gain[i] >= gamma
    if gamma == 1e6:
        assert t.n_leaves == 1


def test_gamma_reduces_leaves_on_larger_data():
    X, y = make_regression(1000, F, seed=8)
    n0 = sum(t.n_leaves for t in _train({"max_depth": 5}, X, y, 5).trees)
    n1 = sum(t.n_leaves for t in _train({"max_depth": 5, "gamma": 5.0}, X, y, 5).trees)
    assert n1 < n0


@pytest.mark.parametrize("alpha,mds", [(0.0, 0.3), (2.0, 0.0), (1.0, 0.05)])
def test_reg_alpha_and_max_delta_step_match_reference(alpha, mds):
    reg = ref.Reg(reg_lambda=1.0, reg_alpha=alpha, min_child_weight=0.5, min_data_in_leaf=3,
                  max_delta_step=mds)
    X, y, d = _exact_problem(seed=9)
    b = histboost.train(_ref_params(reg, max_depth=3), d, 1, verbose_eval=False)
    want = ref.grow_depthwise(d.bins, -y, np.ones_like(y), d.bin_mapper.n_bins, reg, 3, 0.5)
    np.testing.assert_allclose(b.predict(X), want, rtol=1e-9, atol=1e-12)
    if mds:
        assert np.abs(b.predict(X)).max() <= 0.5 * mds * (1 + 1e-12)


def test_max_delta_step_and_alpha_shrink_leaves():
    base = {"objective": "binary:logistic", "max_depth": 4, "eta": 1.0}
    free = _train(base, X_BIN, Y_BIN, 1)
    clipped = _train({**base, "max_delta_step": 0.1}, X_BIN, Y_BIN, 1)
    l1 = _train({**base, "reg_alpha": 5.0}, X_BIN, Y_BIN, 1)

    def leaf_abs(b):
        t = b.trees[0]
        return np.abs(t.value[t.left_child == -1])

    assert leaf_abs(free).max() > 0.1
    assert leaf_abs(clipped).max() <= 0.1 + 1e-12
    assert leaf_abs(l1).sum() < leaf_abs(free).sum()


def _leaf_hessians(b, X, y):
    """Per tree, per leaf: (rows, sum of hessians at the margins before that round)."""
    out = []
    for r in range(b.num_boosted_rounds()):
        # (0, 0) would mean all rounds: the first round starts from the intercept
        m = (b.predict(X, output_margin=True, iteration_range=(0, r)) if r
             else np.full(len(y), b.base_margin[0]))
        p = expit(m)
        leaves = b.predict(X, pred_leaf=True)[:, r]
        out.append((np.bincount(leaves), np.bincount(leaves, weights=p * (1 - p))))
    return out


@pytest.mark.parametrize("mcw", [1.0, 6.0])
def test_min_child_weight_respected(mcw):
    b = _train({"objective": "binary:logistic", "max_depth": 6, "eta": 0.5,
                "min_child_weight": mcw}, X_BIN, Y_BIN, 8)
    worst = min(h[c > 0].min() for c, h in _leaf_hessians(b, X_BIN, Y_BIN))
    assert worst >= mcw * (1 - 1e-6)
    assert worst < mcw + 1.0  # the constraint is active


@pytest.mark.parametrize("mdl", [15, 40])
def test_min_data_in_leaf_respected_squared_error(mdl):
    X, y = make_regression(1000, F, seed=10)
    b = _train({"max_depth": 8, "min_data_in_leaf": mdl, "min_child_weight": 0}, X, y, 5)
    leaves = b.predict(X, pred_leaf=True)
    for t, tree in enumerate(b.trees):
        counts = np.bincount(leaves[:, t])
        counts = counts[counts > 0]
        assert counts.min() >= mdl
        np.testing.assert_array_equal(np.sort(counts),
                                      np.sort(tree.count[tree.left_child == -1]))
    assert min(tree.count[tree.left_child == -1].min() for tree in b.trees) < 2 * mdl


@pytest.mark.parametrize("policy", [{}, {"grow_policy": "lossguide", "max_leaves": 40,
                                         "max_depth": 0}])
@pytest.mark.parametrize("quantized", [False, True])
def test_min_data_in_leaf_respected_logistic(policy, quantized):
    b = _train({"objective": "binary:logistic", "max_depth": 6, "eta": 0.5,
                "min_data_in_leaf": 20, "min_child_weight": 0, "quantized_grad": quantized,
                **policy}, X_BIN, Y_BIN, 10)
    worst = min(c[c > 0].min() for c, _ in _leaf_hessians(b, X_BIN, Y_BIN))
    assert worst >= 20


# -- sampling --------------------------------------------------------------------------------

@pytest.mark.parametrize("sampling", [{"subsample": 0.6}, {"colsample_bytree": 0.5},
                                      {"colsample_bylevel": 0.5}, {"colsample_bynode": 0.5},
                                      {"subsample": 0.8, "colsample_bynode": 0.7,
                                       "grow_policy": "lossguide", "max_leaves": 8}])
def test_sampling_is_seeded(sampling):
    params = {"max_depth": 4, **sampling}
    a = _train({**params, "seed": 3}, X_REG, Y_REG, 4)
    b = _train({**params, "seed": 3}, X_REG, Y_REG, 4)
    c = _train({**params, "seed": 4}, X_REG, Y_REG, 4)
    assert a.save_raw() == b.save_raw()
    assert _json(a) != _json(c)


@pytest.mark.parametrize("policy", [{"grow_policy": "lossguide", "max_leaves": 8,
                                     "max_depth": 0}, {"max_depth": 4}])
def test_each_tree_splits_on_its_own_colsample_bytree_draw(policy):
    """colsample_bytree draws a tree's features first from its round's generator
    (default_rng([seed, round])): every tree splits on its own draw only (the grower keeps a
    tree's mask rows between its steps, `_node_masks`, never across trees)."""
    seed = 3
    b = _train({**policy, "colsample_bytree": 0.5, "seed": seed}, X_REG, Y_REG, 8)
    keep = int(0.5 * F)
    for t, tree in enumerate(_json(b)):
        drawn = np.random.default_rng([seed, t]).choice(np.arange(F), size=keep, replace=False)
        used = {f for f in tree["split_feature"] if f >= 0}
        assert used and used <= set(drawn.tolist()), (t, used, drawn)


def _sampled_rows_reference(n: int, seed: int, round_: int, fraction: float) -> np.ndarray:
    """Row r is sampled iff u(key, r) < fraction, u from the top 53 bits of
    splitmix64(key ^ splitmix64(r)): written with Python integers."""
    mask = (1 << 64) - 1

    def mix(x: int) -> int:
        z = (x + 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    key = sample_key(seed, round_)
    return np.array([r for r in range(n)
                     if (mix(key ^ mix(r)) >> 11) * (1.0 / 9007199254740992.0) < fraction])


def test_subsample_and_colsample_bytree_limits():
    X, y = make_regression(500, 8, seed=2)
    b = _train({"max_depth": 4, "subsample": 0.3, "colsample_bytree": 0.25, "seed": 5},
               X, y, 6)
    for r, t in enumerate(b.trees):
        # the root holds exactly the rows of the hash rule (a Binomial(500, 0.3) count)
        assert t.count[0] == _sampled_rows_reference(500, 5, r, 0.3).size
        assert 100 < t.count[0] < 200
        assert len(set(t.split_feature[t.left_child != -1])) <= 2


@pytest.mark.parametrize("kernel_min_rows", [0, 10**9])  # the Numba kernel, NumPy
def test_sampled_rows_follow_the_hash_rule(monkeypatch, kernel_min_rows):
    monkeypatch.setattr(sampling, "_KERNEL_MIN_ROWS", kernel_min_rows)
    got = sample_rows(2000, None, sample_key(7, 3), 0.4)
    np.testing.assert_array_equal(got, _sampled_rows_reference(2000, 7, 3, 0.4))
    # a worker holding rows 1500.. of the data keeps what one process keeps of them
    part = sample_rows(500, np.arange(1500, 2000), sample_key(7, 3), 0.4)
    np.testing.assert_array_equal(part + 1500, got[got >= 1500])


def test_subsampled_training_margins_equal_prediction():
    """With subsampling, training margins come from binned traversal; the train-set metric
    must equal the metric of a raw-value prediction."""
    d = histboost.Dataset(X_REG, label=Y_REG)
    res = {}
    b = histboost.train({"max_depth": 4, "subsample": 0.5, "nthread": 1}, d, 6,
                        evals=[(d, "train")], evals_result=res, verbose_eval=False)
    for r in range(6):
        pred = b.predict(X_REG, iteration_range=(0, r + 1))
        assert res["train"]["rmse"][r] == pytest.approx(
            np.sqrt(skm.mean_squared_error(Y_REG, pred)), rel=1e-12)


# -- quantised gradients ---------------------------------------------------------------------

def _train_threads(params, X, y, n_threads, chunked, rounds=6):
    """Train with `n_threads`; with `chunked`, nodes of 16+ rows take the chunked kernels."""
    if n_threads > 1 and nb.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs at least 2 Numba threads")
    with forced_paths(chunked, min_rows=16) as calls:
        b = _train({**params, "nthread": n_threads}, X, y, rounds)
    assert bool(calls["histogram_chunked"]) == chunked
    assert bool(calls["partition_chunked"]) == chunked
    return b


@pytest.mark.parametrize("params", [
    {"objective": "binary:logistic", "max_depth": 5},
    {"objective": "multi:softprob", "num_class": 3, "grow_policy": "lossguide",
     "max_leaves": 12, "max_depth": 0, "subsample": 0.8},
    {"objective": "reg:squarederror", "grow_policy": "oblivious", "max_depth": 4,
     "colsample_bynode": 0.8},
    {"objective": "binary:logistic", "max_depth": 5, "min_data_in_leaf": 10},  # counted rows
])
def test_quantized_models_identical_for_any_thread_count(params):
    X, y = {"binary:logistic": (X_BIN, Y_BIN), "multi:softprob": (X_MC, Y_MC),
            "reg:squarederror": (X_REG, Y_REG)}[params["objective"]]
    params = {**params, "quantized_grad": True}
    one = _train_threads(params, X, y, 1, False)
    two = _train_threads(params, X, y, 2, False)
    chunked = _train_threads(params, X, y, 2, True)
    assert _json(one) == _json(two) == _json(chunked)
    assert np.array_equal(one.predict(X), chunked.predict(X))


@pytest.mark.parametrize("params", [
    {"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 16,
     "max_depth": 0},
    {"objective": "multi:softprob", "num_class": 3, "max_depth": 5, "subsample": 0.8},
    {"objective": "reg:squarederror", "grow_policy": "oblivious", "max_depth": 4},
    {"objective": "binary:logistic", "max_depth": 5, "min_data_in_leaf": 10},  # counted rows
])
def test_float_models_identical_for_any_thread_count(params):
    """Float histograms sum a node's rows in chunks set by its size alone, so the thread
    count changes no sum. Chunking from 16 rows here, so that nodes hold up to a dozen chunks.
    Weights over 12 decades make the float sums depend on their order (float32 gradients of
    one scale add up exactly in float64)."""
    X, y = {"binary:logistic": (X_BIN, Y_BIN), "multi:softprob": (X_MC, Y_MC),
            "reg:squarederror": (X_REG, Y_REG)}[params["objective"]]
    if nb.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs at least 2 Numba threads")
    w = 10.0 ** np.random.default_rng(3).uniform(-6, 6, len(y))
    models = []
    for n_threads in (1, 2, 3):
        with forced_paths(True, min_rows=16) as calls:
            models.append(_train({**params, "nthread": n_threads}, X, y, 6, weight=w))
        assert bool(calls["histogram_chunked"]) == (n_threads > 1)
    assert _json(models[0]) == _json(models[1]) == _json(models[2])
    assert np.array_equal(models[0].predict(X), models[2].predict(X))
    # the test can fail: the forced chunks sum in another order than one chunk per node does
    assert _json(_train({**params, "nthread": 1}, X, y, 6, weight=w)) != _json(models[0])


def test_float_models_identical_for_any_thread_count_at_default_sizes():
    """The same on a dataset whose top nodes take several chunks at the default sizes."""
    X, y = make_classification(40_000, 6, n_classes=2, seed=5)
    if nb.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs at least 2 Numba threads")
    w = 10.0 ** np.random.default_rng(3).uniform(-6, 6, len(y))
    params = {"objective": "binary:logistic", "max_depth": 4}
    one, two = (_train({**params, "nthread": n}, X, y, 3, weight=w) for n in (1, 2))
    assert _json(one) == _json(two)


def test_quantized_quality_close_to_float(higgs):
    X, y, Xt, yt = higgs
    X, y = X[:3000], y[:3000]
    out = {}
    for q in (False, True):
        b = _train({"objective": "binary:logistic", "max_depth": 5, "eta": 0.1,
                    "quantized_grad": q, "max_bin": 256}, X, y, 60)
        p = b.predict(Xt)
        out[q] = (skm.log_loss(yt, p), skm.roc_auc_score(yt, p))
    assert abs(out[True][0] - out[False][0]) < 0.01, out
    assert abs(out[True][1] - out[False][1]) < 0.01, out


def test_quantized_differs_from_float_but_is_seeded():
    p = {"objective": "binary:logistic", "max_depth": 4, "quantized_grad": True}
    a, b = _train(p, X_BIN, Y_BIN, 4), _train(p, X_BIN, Y_BIN, 4)
    c = _train({**p, "seed": 1}, X_BIN, Y_BIN, 4)
    f = _train({**p, "quantized_grad": False}, X_BIN, Y_BIN, 4)
    assert _json(a) == _json(b)
    assert _json(a) != _json(c)  # the rounding noise follows the seed
    assert _json(a) != _json(f)


def test_leaf_values_equal_leaf_weight_bit_for_bit():
    """The grower's compiled leaf values of a step's children (`leaf_values`) are the
    interpreter's `leaf_weight(G, H, reg) * learning_rate` bit for bit: regularisation on
    and off, H under min_child_weight or zero, G inside alpha, signed zeros."""
    from histboost.kernels.cpu.split import leaf_values, leaf_weight

    rng = np.random.default_rng(3)
    sums = np.concatenate([rng.normal(size=(200, 2)) * [[1.0, 5.0]],
                           [[0.0, 1.0], [-0.0, 1.0], [0.3, 0.0], [0.2, -1.0], [1e-300, 2.0]]])
    for lam, alpha, mds, mcw in ((1.0, 0.0, 0.0, 1.0), (0.0, 0.5, 0.7, 0.0),
                                 (0.3, 0.2, 0.0, 2.5)):
        reg = np.array([lam, alpha, mds, mcw, 0.0])
        for lr in (0.1, 0.3, 1.0):
            got = leaf_values(sums, reg, lr)
            want = np.array([leaf_weight.py_func(g, h, reg.tolist()) * lr
                             for g, h in sums.tolist()])
            assert np.array_equal(got.view(np.int64), want.view(np.int64))
