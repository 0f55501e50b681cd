"""`Dataset`: input conversion, metadata, binning with shared cuts for validation sets, and
thresholds stored as raw cut values (the bin rule equals the raw rule)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import histboost
from histboost.data.binning import compute_bin_mapper
from histboost.testing.data import make_regression


def test_float32_kept_others_become_float64_c_order():
    X = np.asfortranarray(np.random.default_rng(0).normal(size=(20, 3)))
    d = histboost.Dataset(X)
    assert d.data.dtype == np.float64 and d.data.flags.c_contiguous
    np.testing.assert_array_equal(d.data, X)
    d32 = histboost.Dataset(X.astype(np.float32))
    assert d32.data.dtype == np.float32
    di = histboost.Dataset(np.arange(12).reshape(4, 3))
    assert di.data.dtype == np.float64
    dl = histboost.Dataset([[1, 2], [3, 4]])
    assert dl.shape == (2, 2) and dl.num_row() == 2 and dl.num_col() == 2


def test_sparse_unstored_is_zero_or_missing_stored_values_as_they_are():
    data = np.array([1.0, 0.0, 2.0])
    S = sp.csr_matrix((data, [0, 1, 2], [0, 2, 2, 3]), shape=(3, 3))  # explicit zero stored
    d = histboost.Dataset(S)  # default: scipy's meaning, unstored entries are zeros
    assert d.is_sparse and d.unstored == "zero" and d.shape == (3, 3)
    np.testing.assert_array_equal(d.data.toarray(), S.toarray())
    want = np.array([[1.0, 0.0, np.nan], [np.nan, np.nan, np.nan], [np.nan, np.nan, 2.0]])
    np.testing.assert_array_equal(histboost.Dataset(S, unstored="nan").data.toarray(), want)
    assert histboost.Dataset(S.astype(np.float32)).data.dtype == np.float32
    with pytest.raises(ValueError, match="unstored must be 'zero'"):
        histboost.Dataset(S, unstored="missing")


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "csr_array"])
def test_sparse_duplicate_entries_add_up_as_in_scipy(fmt):
    # (0, 0) is stored twice (1 + 2) and (1, 2) three times; scipy's toarray() sums them
    rows, cols = [0, 0, 1, 1, 1, 2], [0, 0, 2, 2, 2, 1]
    vals = np.array([1.0, 2.0, 0.5, 0.25, -4.0, 7.0])
    S = {"csr": sp.csr_matrix((vals, [0, 0, 2, 2, 2, 1], [0, 2, 5, 6]), shape=(3, 3)),
         "csc": sp.csc_matrix((vals[[0, 1, 5, 2, 3, 4]], [0, 0, 2, 1, 1, 1], [0, 2, 3, 6]),
                              shape=(3, 3)),
         "coo": sp.coo_matrix((vals, (rows, cols)), shape=(3, 3)),
         "csr_array": sp.csr_array((vals, [0, 0, 2, 2, 2, 1], [0, 2, 5, 6]), shape=(3, 3)),
         }[fmt]
    before = S.data.copy()
    want = np.array([[3.0, np.nan, np.nan], [np.nan, np.nan, -3.25], [np.nan, 7.0, np.nan]])
    np.testing.assert_array_equal(histboost.Dataset(S, unstored="nan").data.toarray(), want)
    np.testing.assert_array_equal(np.nan_to_num(want), S.toarray())  # the same as scipy
    np.testing.assert_array_equal(histboost.Dataset(S).data.toarray(), S.toarray())
    np.testing.assert_array_equal(S.data, before)  # the caller's matrix is untouched


def test_sparse_duplicates_train_and_predict_as_the_summed_matrix():
    rng = np.random.default_rng(4)
    dense = np.round(rng.normal(size=(120, 2)), 1)
    y = dense[:, 0] + (dense[:, 1] > 0)
    # each value stored as two halves: every position holds a duplicate entry
    n = dense.size
    cols = np.repeat(np.tile([0, 1], 120), 2)  # row i: columns 0, 0, 1, 1
    dup = sp.csr_matrix((np.repeat(dense.ravel() / 2, 2), cols, np.arange(0, 2 * n + 1, 4)),
                        shape=dense.shape)
    assert dup.nnz == 2 * n and not dup.has_canonical_format
    np.testing.assert_array_equal(dup.toarray(), dense)
    params = {"max_depth": 3, "nthread": 1, "max_bin": 32}
    ref = histboost.train(params, histboost.Dataset(dense, label=y), 3, verbose_eval=False)
    got = histboost.train(params, histboost.Dataset(dup, label=y), 3, verbose_eval=False)
    assert got.save_raw() == ref.save_raw()
    np.testing.assert_array_equal(ref.predict(dup), ref.predict(dense))
    pytest.importorskip("sklearn")
    from histboost.sklearn import HistBoostRegressor

    est = HistBoostRegressor(n_estimators=3, max_depth=3, n_jobs=1, max_bin=32)
    np.testing.assert_array_equal(est.fit(dup, y).predict(dup), ref.predict(dense))


def test_feature_names():
    pd = pytest.importorskip("pandas")
    X = np.zeros((4, 3))
    assert histboost.Dataset(X).feature_names == ["f0", "f1", "f2"]
    df = pd.DataFrame(X, columns=["a", "b", 7])
    assert histboost.Dataset(df).feature_names == ["a", "b", "7"]
    assert histboost.Dataset(df, feature_names=["x", "y", "z"]).feature_names == ["x", "y", "z"]


def test_pandas_missing_values_and_label_series():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": [1.0, None, 3.0], "b": pd.array([1, None, 2], dtype="Int64")})
    d = histboost.Dataset(df, label=pd.Series([0.0, 1.0, 0.0]))
    assert np.isnan(d.data[1, 0]) and np.isnan(d.data[1, 1])
    np.testing.assert_array_equal(d.get_label(), [0, 1, 0])


def test_metadata_setters():
    d = histboost.Dataset(np.zeros((3, 2)), label=[1, 2, 3])
    np.testing.assert_array_equal(d.get_label(), [1, 2, 3])
    d.set_label(np.array([[4.0], [5.0], [6.0]]))  # a column vector is accepted
    np.testing.assert_array_equal(d.get_label(), [4, 5, 6])
    d.set_weight([1, 0, 2])
    np.testing.assert_array_equal(d.get_weight(), [1, 0, 2])
    d.set_base_margin([0.5, 0.5, 0.5])
    np.testing.assert_array_equal(d.base_margin, [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="rows"):
        d.set_base_margin([1.0])
    g = histboost.Dataset(np.zeros((5, 1)), group=[2, 3])
    np.testing.assert_array_equal(g.group, [2, 3])


def test_construct_uses_weighted_quantiles_and_is_lazy_and_idempotent():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 2))
    w = rng.exponential(size=2000)
    d = histboost.Dataset(X, weight=w, max_bin=32)
    assert d._bins is None  # nothing binned until needed
    want = compute_bin_mapper(X, w, 32)
    np.testing.assert_array_equal(d.bin_mapper.cut_values, want.cut_values)
    b1 = d.bins
    assert d.construct().bins is b1
    assert d.construct(16).bin_mapper.max_bin == 16
    assert np.all(d.bin_mapper.n_bins <= 16) and d.bins.max() <= 15
    unweighted = histboost.Dataset(X, max_bin=32).bin_mapper
    assert not np.array_equal(unweighted.cut_values, want.cut_values)


def test_validation_set_shares_training_cuts():
    rng = np.random.default_rng(2)
    Xtr = rng.normal(size=(500, 3))
    Xva = rng.normal(0, 3, size=(200, 3))  # wider range than the training data
    Xva[::5, 1] = np.nan
    dtr = histboost.Dataset(Xtr, max_bin=16)
    dva = histboost.Dataset(Xva, reference=dtr, max_bin=200)  # own max_bin is ignored
    m = dtr.bin_mapper
    assert dva.bin_mapper is m
    for f in range(3):
        ok = ~np.isnan(Xva[:, f])
        np.testing.assert_array_equal(dva.bins[ok, f],
                                      np.searchsorted(m.feature_cuts(f), Xva[ok, f]))
        assert np.all(dva.bins[~ok, f] == m.n_value_bins[f])
    # re-binning the training set with another max_bin carries over to the validation set
    dtr.construct(8)
    dva2 = histboost.Dataset(Xva, reference=dtr)
    assert dva2.construct(8).bin_mapper is dtr.bin_mapper
    assert dva2.bins.max() <= 7


def test_validation_set_uses_the_cuts_training_used():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(400, 3)), rng.normal(size=400)
    dtr = histboost.Dataset(X[:300], label=y[:300])
    dva = histboost.Dataset(X[300:], label=y[300:], reference=dtr)
    histboost.train({"max_bin": 8, "nthread": 1}, dtr, 2, evals=[(dva, "va")],
                    verbose_eval=False)
    trained_cuts = dtr.bin_mapper
    assert trained_cuts.max_bin == 8
    dva.construct()
    assert dva.bin_mapper is trained_cuts
    assert dtr.bin_mapper is trained_cuts


def test_training_rebins_for_params_max_bin():
    X, y = make_regression(300, 3, seed=1)
    d = histboost.Dataset(X, label=y)  # default max_bin 256
    histboost.train({"max_bin": 12, "nthread": 1}, d, 1, verbose_eval=False)
    assert d.bin_mapper.max_bin == 12 and np.all(d.bin_mapper.n_bins <= 12)
    d2 = histboost.Dataset(X, label=y, max_bin=20)
    histboost.train({"nthread": 1}, d2, 1, verbose_eval=False)  # no max_bin in params
    assert d2.bin_mapper.max_bin == 20


def _binned_leaves(tree, bins, missing_bins):
    """Leaf of every row by the binned rule (bin <= split_bin), in NumPy."""
    out = np.zeros(bins.shape[0], np.int64)
    for i in range(bins.shape[0]):
        node = 0
        while tree.left_child[node] != -1:
            f = tree.split_feature[node]
            b = bins[i, f]
            if b == missing_bins[f]:
                left = bool(tree.default_left[node])
            else:
                left = b <= tree.split_bin[node]
            node = tree.left_child[node] if left else tree.right_child[node]
        out[i] = node
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("max_bin", [8, 256])
def test_thresholds_are_raw_cut_values(dtype, max_bin):
    X, y = make_regression(600, 4, seed=3, missing=0.1)
    X = X.astype(dtype)
    X[:50, 0] = np.round(X[:50, 0], 1)  # ties and values sitting on cut points
    d = histboost.Dataset(X, label=y, max_bin=max_bin)
    b = histboost.train({"max_depth": 5, "nthread": 1}, d, 4, verbose_eval=False)
    m = d.bin_mapper
    missing = m.n_value_bins
    for t, tree in enumerate(b.trees):
        inner = np.flatnonzero(tree.left_child != -1)
        assert inner.size
        for i in inner:
            f, sb = tree.split_feature[i], tree.split_bin[i]
            assert tree.threshold[i] == m.cut_values[m.cut_ptr[f] + sb]
        # raw traversal (the predictor) == binned traversal for every training row, including
        # rows whose value equals a threshold
        raw = b.predict(X, pred_leaf=True)[:, t]
        np.testing.assert_array_equal(raw, _binned_leaves(tree, d.bins, missing))
