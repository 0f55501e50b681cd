"""Sparse input end to end (`histboost.data.sparse`, `histboost.kernels.cpu.sparse_backend`):
the model of a sparse matrix is the model of its dense equivalent, storage follows the stored
values, and the sparse layout's histograms match a brute-force count over the dense bins."""

from __future__ import annotations

import json
from collections import Counter

import numba as nb
import numpy as np
import pytest
import scipy.sparse as sp

import histboost
from histboost.data.binning import compute_bin_mapper
from histboost.data.sparse import SparseBins, SparseMatrix, sparse_bin_mapper
from histboost.kernels.cpu import sparse as ksparse
from histboost.kernels.cpu.backend import CPUBackend
from histboost.kernels.cpu.sparse_backend import SparseCPUBackend
from histboost.testing.threads import forced_paths
from histboost.tree.quantize import Quantisation


def _sparse_problem(n: int = 3000, seed: int = 0):
    """Dense X with mostly zeros (negative and positive values, so zero's bin is inside the
    range), stored NaNs, an all-zero column, a dense column, a mostly-zero feature 0; its CSR
    (zeros not stored, NaN stored) and a target."""
    rng = np.random.default_rng(seed)
    F = 9
    X = np.round(rng.normal(size=(n, F)), 2)
    X[rng.random((n, F)) < 0.75] = 0.0
    X[:, 0][rng.random(n) < 0.5] = 0.0
    X[:, 3] = 0.0  # never stored
    X[:, 4] = np.round(rng.normal(size=n), 1)  # dense
    X[:, 5] = (rng.random(n) < 0.1) * 1.0  # one-hot like
    X[rng.random((n, F)) < 0.02] = np.nan
    y = ((np.nan_to_num(X[:, 1]) > 0) + np.nan_to_num(X[:, 2]) + 0.5 * np.nan_to_num(X[:, 5])
         + 0.2 * np.nan_to_num(X[:, 0]) + rng.normal(0, 0.1, n))
    return X, sp.csr_matrix(X), y


X_D, X_S, Y = _sparse_problem()
Y_BIN = (Y > np.median(Y)).astype(np.float64)


def _train(params, X, y, rounds=4, **kw):
    p = {"nthread": 1, "max_bin": 32, "max_depth": 4, **params}
    return histboost.train(p, histboost.Dataset(X, label=y, **kw), rounds, verbose_eval=False)


def _check_same(params, y=Y, rounds=4, **kw):
    dense = _train(params, X_D, y, rounds, weight=kw.get("weight"))
    sparse = _train(params, X_S, y, rounds, **kw)
    assert sparse.save_raw() == dense.save_raw()
    np.testing.assert_array_equal(sparse.predict(X_S), dense.predict(X_D))
    return dense


@pytest.mark.parametrize("policy", ["depthwise", "lossguide", "oblivious"])
@pytest.mark.parametrize("quantised", [False, True])
def test_sparse_model_equals_dense_model(policy, quantised):
    params = {"grow_policy": policy, "quantized_grad": quantised, "max_leaves": 12}
    _check_same(params)
    _check_same({**params, "objective": "binary:logistic"}, y=Y_BIN)


@pytest.mark.parametrize("extra", [
    {"min_data_in_leaf": 30},  # row-count channel
    {"subsample": 0.7},  # margins of unsampled rows from the binned sparse rows
    {"colsample_bynode": 0.6, "min_child_weight": 0},  # nothing pruned
    {"reg_alpha": 0.5, "max_delta_step": 0.7, "min_child_weight": 20},
    {"objective": "multi:softprob", "num_class": 3},
])
def test_sparse_equals_dense_with_options(extra):
    y = Y if "num_class" not in extra else np.digitize(Y, np.quantile(Y, [0.33, 0.66]))
    _check_same({"grow_policy": "lossguide", "max_leaves": 10, **extra}, y=y * 1.0)


@pytest.mark.parametrize("quantised", [False, True])
def test_sparse_lossguide_batches_equal_one_leaf_a_step(monkeypatch, quantised):
    """Best-first splits made ahead on the sparse layout (some undone, their nodes' live
    features refined) give the model of one leaf a step."""
    from histboost.tree import grower

    undone = []
    grow = grower.TreeGrower.grow

    def counted(self, *args, **kw):
        grown = grow(self, *args, **kw)
        undone.append(sum(len(held) > 1 for held in grown.leaves))
        return grown
    monkeypatch.setattr(grower.TreeGrower, "grow", counted)
    params = {"grow_policy": "lossguide", "max_leaves": 20, "max_depth": 0,
              "quantized_grad": quantised, "min_child_weight": 5}
    many = _train(params, X_S, Y)
    assert sum(undone) > 0
    monkeypatch.setattr(grower, "BEST_FIRST_BATCH", 1)
    assert _train(params, X_S, Y).save_raw() == many.save_raw()


def test_sparse_equals_dense_with_weights_and_nan_rule():
    w = np.random.default_rng(3).uniform(0.2, 2.0, X_D.shape[0])
    _check_same({"grow_policy": "depthwise"}, weight=w)
    # unstored = missing: the dense matrix with NaN for every unstored entry
    Xn = X_S.toarray()
    Xn[(X_S != 0).toarray() == 0] = np.nan
    Xn[np.isnan(X_D)] = np.nan
    dense = _train({}, Xn, Y)
    sparse = _train({}, X_S, Y, unstored="nan")
    assert sparse.save_raw() == dense.save_raw()
    np.testing.assert_array_equal(sparse.predict(histboost.Dataset(X_S, unstored="nan")),
                                  dense.predict(Xn))


def _trees(b):
    return json.loads(b.save_raw())["trees"]


def _spy(calls: Counter, name: str, fn):
    def spy(*args, **kwargs):
        calls[name] += 1
        return fn(*args, **kwargs)
    return spy


def test_thread_count_and_parallel_paths_do_not_change_the_sparse_model():
    if nb.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 Numba threads")
    calls: Counter = Counter()
    spied = ["build_histogram_chunked", "build_histogram_chunked_serial",
             "partition_node_chunked", "build_histograms"]
    params = {"grow_policy": "depthwise", "max_depth": 5}
    for chunked in (True, False):
        with pytest.MonkeyPatch.context() as mp, forced_paths(chunked, min_rows=64):
            # chunked float sums follow the (lowered) chunk thresholds, not the threads
            for name in spied:
                mp.setattr(ksparse, name, _spy(calls, name, getattr(ksparse, name)))
            mp.setattr("histboost.kernels.cpu.sparse_backend._VALUES_PER_CHUNK_SLOT", 0)
            mp.setattr("histboost.kernels.cpu.sparse_backend._PARALLEL_MIN_VALUES", 1)
            mp.setattr("histboost.kernels.cpu.sparse_backend._PARTITION_CHUNKED_MIN_ROWS", 1)
            ref = _train(params, X_S, Y)
            for threads in (2, 3):
                got = _train({**params, "nthread": threads}, X_S, Y)
                assert _trees(got) == _trees(ref), threads
            assert _train(params, X_D, Y).save_raw() == ref.save_raw()
    assert all(calls[n] for n in spied), calls


def test_csc_coo_unsorted_duplicates_and_explicit_zeros_give_the_same_model():
    ref = _train({}, X_S, Y)
    assert _train({}, X_S.tocsc(), Y).save_raw() == ref.save_raw()
    assert _train({}, sp.coo_array(X_S), Y).save_raw() == ref.save_raw()
    # every row's entries reversed (unsorted), each value split in two (duplicates), and an
    # explicit zero stored in every row
    S = X_S.tocsr()
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    order = np.lexsort((-S.indices, rows))
    idx, val = S.indices[order], S.data[order]
    idx2, val2 = np.repeat(idx, 2), np.repeat(val / 2, 2)
    counts = 2 * np.diff(S.indptr)
    zero_col = 3
    extra_idx = np.full(S.shape[0], zero_col)
    ptr = np.concatenate(([0], np.cumsum(counts + 1)))
    full_idx = np.empty(ptr[-1], np.int64)
    full_val = np.empty(ptr[-1])
    starts = ptr[:-1]
    body = np.repeat(starts + 1, counts) + (np.arange(counts.sum())
                                            - np.repeat(np.cumsum(counts) - counts, counts))
    full_idx[starts], full_val[starts] = extra_idx, 0.0
    full_idx[body], full_val[body] = idx2, val2
    messy = sp.csr_matrix((full_val, full_idx, ptr), shape=S.shape)
    assert not messy.has_canonical_format
    before = messy.data.copy()
    np.testing.assert_array_equal(np.nan_to_num(messy.toarray()), np.nan_to_num(X_D))
    assert _train({}, messy, Y).save_raw() == ref.save_raw()
    np.testing.assert_array_equal(messy.data, before)  # the caller's matrix is untouched


def test_sparse_cuts_equal_dense_cuts_with_row_sampling_and_weights():
    w = np.random.default_rng(5).integers(0, 4, X_D.shape[0]).astype(np.float64)
    for unstored in ("zero", "nan"):
        dense_X = X_D if unstored == "zero" else np.where(X_S.toarray() == 0, np.nan, X_D)
        S = SparseMatrix.from_any(X_S, unstored)
        for weight in (None, w):
            for rows in (10_000, 1000):  # all rows, and a sample of 1000
                a = compute_bin_mapper(dense_X, weight, 17, sample_rows=rows)
                b = sparse_bin_mapper(S, weight, 17, sample_rows=rows)
                np.testing.assert_array_equal(a.cut_ptr, b.cut_ptr)
                np.testing.assert_array_equal(a.cut_values, b.cut_values)


def test_sparse_bins_equal_dense_bins_and_storage_follows_stored_values():
    d = histboost.Dataset(X_S).construct(max_bin=32)
    dense = histboost.Dataset(X_D).construct(max_bin=32)
    sb = d.bins
    assert isinstance(sb, SparseBins)
    np.testing.assert_array_equal(sb.to_dense(), dense.bins)
    n, F = X_D.shape
    off_default = int((dense.bins != sb.default_bins).sum())
    # row-major: the off-default entries and feature 0 of every row; column-major: the
    # off-default entries
    assert sb.slots.size == off_default + int((dense.bins[:, 0] == sb.default_bins[0]).sum())
    assert sb.col_rows.size == off_default


def _backends(bins_dense, sbins, gh, count_rows=False):
    dense = CPUBackend(bins_dense, sbins.offsets, 1, count_rows=count_rows)
    sparse = SparseCPUBackend(sbins, 1, count_rows=count_rows)
    for be in (dense, sparse):
        be.set_gradients(gh[None])
    return dense, sparse


@pytest.mark.parametrize("layout", ["float", "packed", "wide", "counted"])
def test_sparse_histograms_equal_brute_force_histograms(layout):
    """Histograms of the sparse layout (stored slots + fixed default bins, then subtraction)
    against the dense layout's after a root and two levels of splits, every slot compared
    (min_child_weight 0: every varying feature stays live)."""
    d = histboost.Dataset(X_S).construct(max_bin=32)
    dd = histboost.Dataset(X_D).construct(max_bin=32)
    rng = np.random.default_rng(1)
    n = X_D.shape[0]
    if layout == "float":
        gh = np.column_stack([rng.normal(size=n), rng.uniform(0.1, 1, n)]).astype(np.float32)
        q = None
    else:
        gh = np.column_stack([rng.integers(-50, 50, n), rng.integers(0, 30, n)]).astype(
            np.float32)
        q = Quantisation(1.0, 1.0, 0)
    dense, sparse = _backends(dd.bins, d.bins, gh, count_rows=layout == "counted")
    if layout == "wide":
        for be in (dense, sparse):
            be.pack = False
    reg = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    live = sparse._root_live.features
    for be in (dense, sparse):
        be.begin_tree(0, None, q)
        be.build_histograms([0])
    np.testing.assert_array_equal(sparse.read_histograms([0])[:, _slots(d, live)],
                                  dense.read_histograms([0])[:, _slots(d, live)])
    frontier, nxt = [0], 1
    for _ in range(2):
        totals = np.column_stack([dense.histogram_totals(frontier),
                                  [sparse._ranges.bounds([i])[0][1]
                                   - sparse._ranges.bounds([i])[0][0] for i in frontier]])
        masks = np.ones((len(frontier), X_D.shape[1]), bool)
        recs = dense.find_best_splits(frontier, totals, masks, reg)
        np.testing.assert_array_equal(sparse.find_best_splits(frontier, totals, masks, reg),
                                      recs)
        lefts = list(range(nxt, nxt + 2 * len(frontier), 2))
        rights = [i + 1 for i in lefts]
        nxt += 2 * len(frontier)
        for be in (dense, sparse):
            be.apply_splits(frontier, lefts, rights, recs)
            be.build_histograms(lefts)
            be.subtract_histograms(frontier, lefts, rights)
        for a, b in zip(lefts, rights, strict=True):
            for node in (a, b):  # the same rows, in the same order
                np.testing.assert_array_equal(
                    sparse.rows[slice(*sparse._ranges.bounds([node])[0])],
                    dense.rows[slice(*dense._ranges.bounds([node])[0])])
            cols = _slots(d, sparse._live[a].features)
            for node in (a, b):
                np.testing.assert_array_equal(sparse.read_histograms([node])[:, cols],
                                              dense.read_histograms([node])[:, cols])
        frontier = lefts + rights


def _slots(d, features):
    off = d.bin_mapper.bin_offsets
    return np.concatenate([np.arange(off[f], off[f + 1]) for f in features])


def test_dead_features_are_pruned_without_changing_splits():
    """With min_child_weight, features whose rows off the default bin weigh too little stop
    being live in a subtree; the split records still equal the dense layout's."""
    params = {"grow_policy": "lossguide", "max_leaves": 16, "min_child_weight": 40,
              "max_depth": 0}
    dense = _train(params, X_D, Y, rounds=3)
    sparse_model = _train(params, X_S, Y, rounds=3)
    assert sparse_model.save_raw() == dense.save_raw()


def test_wide_matrix_storage_and_training_follow_the_stored_values():
    """10^4 rows x 10^6 columns, 5 stored values a row: the dense matrix would take 80 GB;
    the Dataset's arrays stay proportional to the stored values (plus small per-column
    pointers), and training and prediction run on them."""
    rng = np.random.default_rng(0)
    n, F, k = 10_000, 1_000_000, 5
    cols = rng.integers(0, F, n * k)
    cols[::k] = rng.integers(0, 20, n)  # a few popular columns
    vals = rng.integers(1, 4, n * k).astype(np.float64)
    S = sp.csr_matrix((vals, (np.repeat(np.arange(n), k), cols)), shape=(n, F))
    y = (np.asarray(S[:, :20].sum(axis=1)).ravel() > 2).astype(np.float64)
    d = histboost.Dataset(S, label=y).construct()
    sb = d.bins
    nnz = S.nnz
    row_col = sb.indptr.nbytes + sb.slots.nbytes + sb.col_rows.nbytes + sb.col_bins.nbytes
    assert row_col <= 12 * nnz + 12 * n
    per_column = sb.nbytes - row_col + d.bin_mapper.cut_values.nbytes \
        + d.bin_mapper.cut_ptr.nbytes
    assert per_column <= 60 * F
    assert d.data.nbytes <= 16 * nnz + 8 * n
    b = histboost.train({"objective": "binary:logistic", "max_depth": 3, "nthread": 1}, d, 2,
                        verbose_eval=False)
    p = b.predict(S)
    assert p.shape == (n,) and b.num_boosted_rounds() == 2
    used = {int(f) for t in b.trees for f in t.split_feature[t.left_child != -1]}
    assert used and max(used) < F
    np.testing.assert_array_equal(p, b.predict(S[:, :].tocsc()))


def test_prediction_without_densifying_equals_dense_prediction():
    b = _train({"grow_policy": "lossguide", "max_leaves": 12}, X_D, Y, rounds=3)
    np.testing.assert_array_equal(b.predict(X_S), b.predict(X_D))
    np.testing.assert_array_equal(b.predict(X_S, pred_leaf=True), b.predict(X_D, pred_leaf=True))
    np.testing.assert_array_equal(b.predict(X_S.astype(np.float32)),
                                  b.predict(X_D.astype(np.float32)))
    o = _train({"grow_policy": "oblivious"}, X_D, Y, rounds=3)
    np.testing.assert_array_equal(o.predict(X_S, pred_leaf=True), o.predict(X_D, pred_leaf=True))
    # the nan rule at prediction: a Dataset
    Xn = np.where(X_S.toarray() == 0, np.nan, X_D)
    np.testing.assert_array_equal(b.predict(histboost.Dataset(X_S, unstored="nan")),
                                  b.predict(Xn))


def test_sparse_eval_set_and_continued_training():
    d = histboost.Dataset(X_S, label=Y)
    log: dict = {}
    b = histboost.train({"nthread": 1, "max_bin": 32, "max_depth": 3}, d, 3,
                        evals=[(histboost.Dataset(X_S[:500], label=Y[:500], reference=d),
                                "valid")], evals_result=log, verbose_eval=False)
    ref = histboost.train({"nthread": 1, "max_bin": 32, "max_depth": 3},
                          histboost.Dataset(X_D, label=Y), 3, verbose_eval=False)
    assert b.save_raw() == ref.save_raw() and len(log["valid"]["rmse"]) == 3
    more = histboost.train({"nthread": 1, "max_bin": 32, "max_depth": 3}, d, 2, xgb_model=b,
                           verbose_eval=False)
    assert more.num_boosted_rounds() == 5


def test_too_many_columns_is_a_clear_error():
    # a libsvm index of 3e9: refused before any per-column array is made
    S = sp.csr_matrix((np.ones(2), np.array([3_000_000_000, 1]), np.array([0, 1, 2])),
                      shape=(2, 3_000_000_001))
    with pytest.raises(ValueError, match="at most 2,147,483,647"):
        histboost.Dataset(S, label=[0.0, 1.0])


def test_sparse_on_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match="sparse Dataset trains on the CPU"):
        histboost.train({"device": "cuda"}, histboost.Dataset(X_S, label=Y), 1)


def test_sklearn_estimator_takes_sparse_input():
    pytest.importorskip("sklearn")
    from histboost.sklearn import HistBoostRegressor

    est = HistBoostRegressor(n_estimators=3, max_depth=3, n_jobs=1, max_bin=32)
    ref = _train({"max_depth": 3}, X_D, Y, rounds=3)
    np.testing.assert_array_equal(est.fit(X_S, Y).predict(X_S), ref.predict(X_D))


def test_libsvm_file_trains_sparse_as_its_dense_equivalent(tmp_path):
    path = tmp_path / "d.svm"
    S = X_S.tocsr()
    lines = []
    for i in range(S.shape[0]):
        a, b = S.indptr[i], S.indptr[i + 1]
        pairs = " ".join(f"{j}:{float(v)!r}" for j, v in zip(S.indices[a:b], S.data[a:b],
                                                       strict=True))
        lines.append(f"{float(Y[i])!r} {pairs}")
    path.write_text("\n".join(lines) + "\n")
    data = histboost.data.read_libsvm(path, zero_based=True, n_features=S.shape[1])
    got = histboost.train({"nthread": 1, "max_bin": 32}, data.to_dataset(), 3,
                          verbose_eval=False)
    ref = histboost.train({"nthread": 1, "max_bin": 32}, histboost.Dataset(X_D, label=Y), 3,
                          verbose_eval=False)
    assert json.loads(got.save_raw())["trees"] == json.loads(ref.save_raw())["trees"]


@pytest.mark.parametrize("counted", [False, True])
def test_split_search_on_searched_bins_equals_search_on_all_bins(counted):
    """`searched_bins` leaves out empty value bins (keeping each feature's first and last):
    the split search on what it keeps, bins mapped back, finds the record of the search on
    every bin, with empty first / last bins, missing values alone on one side, and
    min_child_weight 0 (a split leaving only empty bins on one side)."""
    from histboost.kernels.cpu import split

    rng = np.random.default_rng(5)
    widths = rng.integers(2, 9, 40)
    ptr = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    C = 3 if counted else 2
    for trial in range(30):
        hist = np.zeros((int(ptr[-1]), C))
        full = rng.random(hist.shape[0]) < 0.35
        hist[full, 0] = rng.normal(size=int(full.sum()))
        hist[full, 1] = rng.uniform(0.1, 1.0, int(full.sum()))
        if counted:
            hist[full, 2] = rng.integers(1, 5, int(full.sum()))
        totals = hist[:ptr[1]].sum(axis=0)[None]  # feature 0 holds every row
        if not counted:
            totals = np.column_stack([totals, [200.0]])
        reg = np.array([1.0, 0.0, 0.0, trial % 2 * 0.3, 0.0])
        mask = np.ones((1, widths.size), bool)
        want = split.search(hist[None], totals, ptr, mask, reg, False)[0]
        kept_hist = np.empty_like(hist)
        kept_ptr = np.empty_like(ptr)
        bins = np.empty(hist.shape[0], np.int32)
        kept = ksparse.searched_bins(hist, ptr, kept_hist, kept_ptr, bins)
        assert kept < hist.shape[0]
        got = split.search(kept_hist[None, :kept], totals, kept_ptr, mask, reg, False)[0]
        if got[split.REC_FEATURE] >= 0:
            f = int(got[split.REC_FEATURE])
            got[split.REC_BIN] = bins[kept_ptr[f] + int(got[split.REC_BIN])]
        np.testing.assert_array_equal(got, want, err_msg=f"trial {trial}")
