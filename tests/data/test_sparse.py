"""Sparse input end to end (`histboost.data.sparse`, `histboost.kernels.cpu.sparse_backend`):
the model of a sparse matrix is the model of its dense equivalent, storage follows the stored
values, and the sparse layout's histograms match a brute-force count over the dense bins."""

from __future__ import annotations

import itertools
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
from histboost.kernels.cpu import sparse_backend
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
    # the parallel-loop kernels, and the pool's range kernels (by run_ranges' kernel); not
    # the kernels those call (they would compile with the spies)
    spied = ["partition_items", "root_parts_parallel", "emit_touched_parallel",
             "subtract_parallel"]
    pooled = ["search_stretch_range", "partition_scatter", "partition_place", "items"]
    params = {"grow_policy": "depthwise", "max_depth": 5}
    emit = ksparse.emit_touched
    run_ranges = sparse_backend.run_ranges

    search_nodes = ksparse.search_nodes
    accumulate = ksparse.accumulate_items_parallel

    def emit_chunks(accs, bitmaps, a, b, *rest):
        calls["emit_chunks"] += b - a > 1
        return emit(accs, bitmaps, a, b, *rest)

    def search_steps(workers, first, *rest):
        # several nodes in one parallel loop, several stretches of one node
        calls["search_nodes_several"] += first.shape[0] > 2
        calls["search_nodes_stretches"] += bool((np.diff(first) > 1).any())
        return search_nodes(workers, first, *rest)

    def accumulate_ranges(workers, indptr, slots, gh, rows, starts, *rest):
        calls["accumulate_items_parallel"] += 1
        calls["accumulate_slot_ranges"] += starts.shape[0] < workers  # items cut by slots
        return accumulate(workers, indptr, slots, gh, rows, starts, *rest)

    def ranges(kernel, n, *args, **kwargs):
        calls[kernel.__name__] += 1
        return run_ranges(kernel, n, *args, **kwargs)
    # Numba's parallel loops (from _LOOP_MIN_THREADS threads) and the thread pool
    for chunked, loop_min in ((True, 2), (False, 1 << 30)):
        with pytest.MonkeyPatch.context() as mp, forced_paths(chunked, min_rows=64):
            mp.setattr(sparse_backend, "_LOOP_MIN_THREADS", loop_min)
            # chunked float sums follow the (lowered) chunk thresholds, not the threads
            for name in spied:
                mp.setattr(ksparse, name, _spy(calls, name, getattr(ksparse, name)))
            mp.setattr(ksparse, "emit_touched", emit_chunks)
            mp.setattr(ksparse, "search_nodes", _spy(calls, "search_nodes", search_steps))
            mp.setattr(ksparse, "accumulate_items_parallel", accumulate_ranges)
            mp.setattr(sparse_backend, "run_ranges", ranges)
            mp.setattr(sparse_backend, "_VALUES_PER_CHUNK_SLOT", 0)
            mp.setattr(sparse_backend, "_SEARCH_STRETCH_MIN_SLOTS", 1)
            mp.setattr(sparse_backend, "_POOL_SEARCH_STRETCH_MIN_SLOTS", 1)
            mp.setattr(sparse_backend, "_EMIT_THREAD_MIN_SLOTS", 1)
            mp.setattr(sparse_backend, "_BUILD_MIN_VALUES", 1)
            mp.setattr(sparse_backend, "_SUBTRACT_THREAD_MIN_SLOTS", 1)
            ref = _train({**params, "nthread": 1}, X_S, Y)
            for threads in (2, 3, 16):
                got = _train({**params, "nthread": threads}, X_S, Y)
                assert _trees(got) == _trees(ref), threads
            assert _train(params, X_D, Y).save_raw() == ref.save_raw()
            # best-first steps (a step's four children searched together), packed
            # quantised sums
            steps = {"grow_policy": "lossguide", "max_leaves": 12, "quantized_grad": True}
            ref = _train({**steps, "nthread": 1}, X_S, Y)
            assert _trees(_train({**steps, "nthread": 16}, X_S, Y)) == _trees(ref)
    assert all(calls[n] for n in [*spied, *pooled, "emit_chunks", "search_nodes",
                                  "search_nodes_several", "search_nodes_stretches",
                                  "accumulate_items_parallel", "accumulate_slot_ranges"]), calls


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


@pytest.mark.parametrize("layout", ["float", "packed", "wide", "counted", "cancelling"])
def test_sparse_histograms_equal_brute_force_histograms(layout, monkeypatch):
    """Histograms of the sparse layout (stored slots + fixed default bins, then subtraction)
    against the dense layout's after a root and two levels of splits, every slot compared.
    "cancelling": gradients +-1 with mostly zero hessians, so that slots of a parent sum to
    zero (left out of its list) while a child's do not (inserted into the larger child)."""
    d = histboost.Dataset(X_S).construct(max_bin=32)
    dd = histboost.Dataset(X_D).construct(max_bin=32)
    rng = np.random.default_rng(1)
    n = X_D.shape[0]
    inserted = []
    subtract = ksparse.subtract_in_place

    def counted_subtract(*args):
        inserted.append(subtract(*args))
        return inserted[-1]
    monkeypatch.setattr(ksparse, "subtract_in_place", counted_subtract)
    if layout == "float":
        gh = np.column_stack([rng.normal(size=n), rng.uniform(0.1, 1, n)]).astype(np.float32)
        q = None
    elif layout == "cancelling":
        gh = np.column_stack([rng.choice([-1, 1], n), rng.random(n) < 0.3]).astype(np.float32)
        q = Quantisation(1.0, 1.0, 0)
    else:
        gh = np.column_stack([rng.integers(-50, 50, n), rng.integers(0, 30, n)]).astype(
            np.float32)
        q = Quantisation(1.0, 1.0, 0)
    dense, sparse = _backends(dd.bins, d.bins, gh, count_rows=layout == "counted")
    if layout == "wide":
        for be in (dense, sparse):
            be.pack = False
    reg = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    for be in (dense, sparse):
        be.begin_tree(0, None, q)
        be.build_histograms([0])
    np.testing.assert_array_equal(sparse.read_histograms([0]), dense.read_histograms([0]))
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
            for node in (a, b):
                np.testing.assert_array_equal(sparse.read_histograms([node]),
                                              dense.read_histograms([node]))
        frontier = lefts + rights
    if layout == "cancelling":
        assert sum(inserted) > 0


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


def test_distributed_sparse_on_cuda_is_a_clear_error():
    from histboost.collective.testing import run_threads

    def train(comm):
        with pytest.raises(ValueError, match="sparse Dataset runs on the CPU"):
            histboost.train({"device": "cuda", "base_score": 0.5},
                            histboost.Dataset(X_S[comm.rank::2], label=Y[comm.rank::2]), 1,
                            comm=comm)
    run_threads(2, train)


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


def _full_histogram(bins, offsets, columns, dtype=np.float64):
    """Brute-force histogram (total bins, len(columns)) of the rows' values `columns` (each
    (n_rows,)) by their bins (n_rows, F), every feature's bins at its offset."""
    full = np.zeros((int(offsets[-1]), len(columns)), dtype)
    for f in range(bins.shape[1]):
        for c, values in enumerate(columns):
            np.add.at(full[:, c], offsets[f] + bins[:, f], values)
    return full


def _listed_slots(full, offsets, defaults, nonzero=None):
    """The slots a sparse node's list holds: feature 0's all, the others' off their default
    bin where their sums are not all zero (or `nonzero`: bool (total bins,))."""
    stored = np.ones(full.shape[0], bool)
    stored[(offsets[:-1] + defaults)[1:]] = False  # default bins of f >= 1 not stored
    if nonzero is None:
        nonzero = (full != 0).any(axis=1)
    return np.flatnonzero(stored & (nonzero | (np.arange(full.shape[0]) < offsets[1])))


@pytest.mark.parametrize("counted", [False, True])
def test_search_of_a_sparse_histogram_equals_search_on_all_bins(counted):
    """`searched_node` keeps a node's non-empty bins, each feature's default bin fixed from
    the node total and its first and last bins: the split search on what it keeps, bins
    and features mapped back, finds the record of the search on the full histogram, with
    empty first / last bins, missing values alone on one side, min_child_weight 0 and 1
    (features pruned, marked dead at the root and left out of its list), masked features
    and all-zero entries (left out of the list)."""
    from histboost.kernels.cpu import split

    rng = np.random.default_rng(5)
    C = 3 if counted else 2
    for trial in range(30):
        F = 30
        widths = rng.integers(2, 9, F)
        offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
        defaults = np.array([rng.integers(0, w) for w in widths], np.int32)
        n_rows = 400
        # rows' bins: most at the default, whole numbers as gradients (exact sums)
        bins = np.where(rng.random((n_rows, F)) < 0.8, defaults,
                        rng.integers(0, widths, (n_rows, F)))
        idle = np.flatnonzero(rng.random(F) < 0.2)  # every row in the default bin
        bins[:, idle] = defaults[idle]
        rare = rng.choice(np.arange(1, F), 3, replace=False)  # one row off the default
        bins[:, rare] = defaults[rare]
        bins[0, rare] = (defaults[rare] + 1) % widths[rare]
        g = rng.integers(-5, 6, n_rows).astype(np.float64)
        h = rng.integers(0, 3, n_rows).astype(np.float64)
        g[0], h[0] = 1.0, 0.0
        full = _full_histogram(bins, offsets, (g, h, np.ones(n_rows))[:C])
        nonzero = (full != 0).any(axis=1) | (rng.random(full.shape[0]) < 0.1)
        keep = _listed_slots(full, offsets, defaults, nonzero)
        slots, vals = keep.astype(np.int32), full[keep].copy()
        totals = np.array([[g.sum(), h.sum(), n_rows]])
        mcw = float(trial % 2)
        reg = np.array([1.0, 0.0, 0.0, mcw, 0.0])
        mask = rng.random(F) < 0.9
        want = split.search(full[None], totals, offsets, mask[None], reg, False)[0]
        size = slots.size + 4 * F
        out = np.empty((size, C))
        out_bins = np.empty(size, np.int32)
        ptr = np.empty(F + 1, np.int64)
        feats = np.empty(F, np.int32)
        dead = np.zeros(F, np.uint8)
        slot_feature = np.repeat(np.arange(F, dtype=np.int32), widths)
        kept, nf, n_new = ksparse.searched_node(
            slots, vals, offsets, slot_feature, defaults, mask, dead, trial % 4 < 2, True,
            totals[0, 1], float(n_rows), 1.0, mcw, 0.0, 1e-9, np.zeros(C), np.zeros((1, C)),
            out, ptr, feats, out_bins)
        assert not (vals[:n_new] == 0).all(axis=1).any()
        # marked (at the root) when pruned
        assert dead[rare].all() if mcw > 0 and trial % 4 < 2 else not dead.any()
        np.testing.assert_array_equal(full[slots[:n_new]], vals[:n_new])
        assert not dead[slot_feature[slots[:n_new]]].any()
        assert kept < full.shape[0] or nf < F
        got = split.search(out[None, :kept], totals, ptr[:nf + 1], np.ones((1, nf), bool),
                           reg, False)[0]
        if got[split.REC_FEATURE] >= 0:
            f = int(got[split.REC_FEATURE])
            got[split.REC_BIN] = out_bins[ptr[f] + int(got[split.REC_BIN])]
            got[split.REC_FEATURE] = feats[f]
        np.testing.assert_array_equal(got, want, err_msg=f"trial {trial}")


@pytest.mark.parametrize("mcw", [0.0, 1.0])
def test_split_gain_bound_holds_for_every_split(mcw):
    """`split_gain_bound` over a feature's `child_box` is at least the gain of every valid
    split of the feature (every threshold, its last bin as the missing one on either side,
    the default bin anywhere, the missing slot too), by brute force on random rows mostly in
    the default bin; -inf only when no split is valid. And it is tighter than the box of
    |g| <= the sum of the bins' |g| and h >= min_child_weight (the earlier bound)."""
    from histboost.kernels.cpu import sparse as ksparse

    rng = np.random.default_rng(8)
    lam = 1.0
    tighter = 0
    for _ in range(400):
        w = int(rng.integers(2, 9))
        d = int(rng.integers(0, w))
        bins = np.where(rng.random(60) < 0.85, d, rng.integers(0, w, 60))
        g = rng.normal(size=60) * rng.choice([0.1, 1.0, 10.0]) + rng.choice([0.0, 1.0])
        h = rng.random(60) * rng.choice([0.05, 1.0])
        G, H = g.sum(), h.sum()
        gs, hs = np.bincount(bins, g, w), np.bincount(bins, h, w)
        stored = np.flatnonzero((np.arange(w) != d) & ((gs != 0) | (hs != 0)))
        slots = stored.astype(np.int32)
        vals = np.stack([gs[stored], hs[stored]], axis=1)
        terms = ksparse.gain_bound_terms(G, H, lam, mcw)
        g_lo, g_hi, h_min = ksparse.child_box(slots, vals, 0, slots.size, 0, d, w - 1)
        # the rounding margin of the search (`tol`): the sums are taken in other orders
        tol = 1e-9 * (H + 1.0)
        h_off = h[bins != d].sum() + tol
        bound = ksparse.split_gain_bound(terms, H, g_lo, g_hi, h_min - tol, h_off, lam, mcw)
        A = np.abs(gs[np.arange(w) != d]).sum()
        loose = ksparse.split_gain_bound(terms, H, -A, A, 0.0, h_off, lam, mcw)
        best = -np.inf
        for b in range(w - 1):
            for miss_left in (False, True):
                left = ((bins <= b) & (bins < w - 1)) | (miss_left & (bins == w - 1))
                gl, hl = g[left].sum(), h[left].sum()
                gr, hr = G - gl, H - hl
                if min(hl, hr) >= mcw and min(hl, hr) > 0:
                    best = max(best, gl**2 / (hl + lam) + gr**2 / (hr + lam) - G**2 / (H + lam))
        if bound == -np.inf:
            assert best == -np.inf
        else:
            assert best <= bound + 1e-12 * (abs(bound) + 1)
            assert bound <= loose + 1e-12 * (abs(loose) + 1)
            tighter += bound < loose - 1e-9 * (abs(loose) + 1)
    assert tighter > 100


@pytest.mark.parametrize("quantised", [False, True])
def test_one_pass_search_equals_search_on_all_bins(quantised):
    """`search_node` (each feature scanned as its bins are written, features that cannot
    beat the best so far by `split_gain_bound` skipped) finds the record of the dense
    search on the full histogram, float and quantised (packed) sums, and skips some; in 1-4
    stretches cut at feature boundaries (`feature_chunks`, the backend's parallel search),
    the same record, compacted list and dead flags."""
    from histboost.kernels.cpu import sparse as ksparse
    from histboost.kernels.cpu import split

    rng = np.random.default_rng(9)
    skipped = 0
    for trial in range(20):
        F = 60
        widths = rng.integers(2, 7, F)
        offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
        defaults = np.array([rng.integers(0, w) for w in widths], np.int32)
        n_rows = 500
        bins = np.where(rng.random((n_rows, F)) < rng.uniform(0.7, 0.99, F), defaults,
                        rng.integers(0, widths, (n_rows, F)))
        g = rng.integers(-8, 9, n_rows)
        h = rng.integers(1, 4, n_rows)
        g[bins[:, 5] != defaults[5]] += 6  # one strong feature early on
        full = _full_histogram(bins, offsets, (g, h), np.int64)
        keep = _listed_slots(full, offsets, defaults)
        scale = 0.25 if quantised else 1.0
        if quantised:  # packed pairs: gradient in the high 32 bits
            vals = ((full[keep, 0] << 32) + full[keep, 1])[:, None]
        else:
            vals = full[keep].astype(np.float64)
        totals = np.array([[g.sum() * scale, h.sum() * scale, n_rows]], np.float64)
        reg = np.array([1.0, 0.0, 0.0, float(trial % 2) * 3.0, 0.0])
        mask = np.ones(F, bool)
        want = split.search(full[None] * scale, totals, offsets, mask[None], reg, False)[0]
        C = vals.shape[1]
        widest = int(widths.max()) + 4
        slot_feature = np.repeat(np.arange(F, dtype=np.int32), widths)
        head = (offsets, slot_feature, defaults, mask)
        sums = (totals[0, 0], totals[0, 1], float(n_rows), scale, scale, reg[split.P_MCW],
                0.0, 1e-9)
        zero = np.zeros((1, C), vals.dtype)
        vals_k = vals.copy()  # the search compacts the list in place
        slots, dead, rec = keep.astype(np.int32), np.zeros(F, np.uint8), np.zeros(7)
        rec[split.REC_FEATURE] = -1.0
        _, nf, n_new = ksparse.search_node(
            slots, vals, *head, dead, True, True, *sums, np.zeros(C, vals.dtype), zero.copy(),
            np.empty((widest, C), vals.dtype), np.empty(F + 1, np.int64),
            np.empty(F, np.int32), np.empty(widest, np.int32), reg, split.gain_path(reg),
            np.zeros(2, np.int64), np.zeros(split.REC_WIDTH), rec, np.zeros(1),
            np.empty((widest, 2)))
        np.testing.assert_array_equal(rec, want, err_msg=f"trial {trial}")
        skipped += F - nf
        # in k stretches of whole features (the node total given to those after the
        # first), compacted lists put together: the same records, list and dead flags
        k = 1 + trial % 4
        slots_k, dead_k = keep.astype(np.int32), np.zeros(F, np.uint8)
        bounds = np.empty(k + 1, np.int64)
        ksparse.feature_chunks(slots_k, slot_feature, bounds)
        assert (np.diff(bounds) >= 0).all() and bounds[-1] == slots_k.size
        cut = bounds[1:-1][(bounds[1:-1] > 0) & (bounds[1:-1] < slots_k.size)]
        assert (slot_feature[slots_k[cut]] != slot_feature[slots_k[cut - 1]]).all()
        total = np.zeros(C, vals.dtype)
        ksparse.node_total(slots_k, vals_k, offsets, total)
        # one best gain shared by the stretches, searched here one after another, forwards
        # or backwards (the pool's in any order): a stretch bounds its features by the best
        # gain of those before it, which may be higher features' (ties keep the lowest)
        shared = np.zeros(1)
        parts, recs = [None] * k, [None] * k
        order = range(k) if trial % 3 else range(k - 1, -1, -1)
        for c in order:
            a, b = bounds[c], bounds[c + 1]
            r = np.zeros(split.REC_WIDTH)
            r[split.REC_FEATURE] = -1.0
            m = ksparse.search_node(
                slots_k[a:b], vals_k[a:b], *head, dead_k, True, True, *sums, total.copy(),
                zero.copy(), np.empty((widest, C), vals.dtype),
                np.empty(F + 1, np.int64), np.empty(F, np.int32), np.empty(widest, np.int32),
                reg, split.gain_path(reg), np.zeros(2, np.int64), np.zeros(split.REC_WIDTH),
                r, shared, np.empty((widest, 2)))[2]
            parts[c] = (slots_k[a:a + m].copy(), vals_k[a:a + m].copy())
            recs[c] = r
        best = None
        for r in recs:
            if r[split.REC_FEATURE] >= 0 and (best is None or r[0] > best[0]):
                best = r
        np.testing.assert_array_equal(best if best is not None else rec, want)
        np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), slots[:n_new])
        np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), vals[:n_new])
        np.testing.assert_array_equal(dead_k, dead)
    assert skipped > 0


def test_search_of_several_nodes_in_one_loop_equals_one_pass_each():
    """`search_nodes` (a step's nodes in one parallel loop, each in 1-4 stretches, on 1-3
    workers, tuples padded) gives each node the record, compacted list and dead flags of
    `search_node`'s one pass over it alone (which equals the search over every bin:
    `test_one_pass_search_equals_search_on_all_bins`)."""
    from histboost.kernels.cpu import split

    rng = np.random.default_rng(12)
    F = 80
    widths = rng.integers(2, 7, F)
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    defaults = np.array([rng.integers(0, w) for w in widths], np.int32)
    slot_feature = np.repeat(np.arange(F, dtype=np.int32), widths)
    widest = int(widths.max()) + 4
    reg = np.array([1.0, 0.0, 0.0, 2.0, 0.0])
    general = split.gain_path(reg)

    def node(n_rows):
        # a node's sparse list (slots off their default bin, feature 0's all), its totals
        bins = np.where(rng.random((n_rows, F)) < rng.uniform(0.6, 0.99, F), defaults,
                        rng.integers(0, widths, (n_rows, F)))
        g = rng.normal(size=n_rows)
        g[bins[:, 1 + rng.integers(F - 1)] != 0] += 1.0
        h = rng.uniform(0.1, 1.0, n_rows)
        full = _full_histogram(bins, offsets, (g, h))
        keep = _listed_slots(full, offsets, defaults)
        return keep.astype(np.int32), full[keep], np.array([g.sum(), h.sum(), n_rows])

    found = marked = 0
    for trial in range(6):
        m = 1 + trial % 4
        nodes = [node(int(rng.integers(5, 300))) for _ in range(m)]
        masks = rng.random((m, F)) < 0.9
        totals = np.array([t for _, _, t in nodes])
        want = []
        for j, (slots, vals, t) in enumerate(nodes):
            slots, vals, dead = slots.copy(), vals.copy(), np.zeros(F, np.uint8)
            rec = np.zeros(split.REC_WIDTH)
            rec[split.REC_FEATURE] = -1.0
            n = ksparse.search_node(
                slots, vals, offsets, slot_feature, defaults, masks[j], dead, True, True, *t,
                1.0, 1.0, reg[split.P_MCW], 0.0, 1e-9, np.zeros(2), np.zeros((1, 2)),
                np.empty((widest, 2)), np.empty(F + 1, np.int64), np.empty(F, np.int32),
                np.empty(widest, np.int32), reg, general, np.zeros(2, np.int64),
                np.zeros(split.REC_WIDTH), rec, np.zeros(1), np.empty((widest, 2)))[2]
            want.append((rec, slots[:n], vals[:n], dead))
            found += rec[split.REC_FEATURE] >= 0
            marked += int(dead.sum())
        for workers in (1, 2, 3):
            counts = rng.integers(1, 5, m)
            first = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            k = int(first[-1])
            lists = [(s.copy(), v.copy(), np.zeros(F, np.uint8)) for s, v, _ in nodes]
            pad = 4 - m
            recs = np.zeros((k, 8))
            recs[:, split.REC_FEATURE] = -1.0
            out = np.zeros((m, split.REC_WIDTH))
            out[:, split.REC_FEATURE] = -1.0
            lengths = np.empty(m, np.int64)
            most = F + 1
            total = sum(s.size for s, _, _ in lists)
            ksparse.search_nodes(
                workers, first, np.empty(k + m, np.int64),
                tuple(s for s, _, _ in lists) + (np.empty(0, np.int32),) * pad,
                tuple(v for _, v, _ in lists) + (np.empty((0, 2)),) * pad,
                tuple(d for _, _, d in lists) + (lists[0][2],) * pad, masks, totals,
                offsets, slot_feature, defaults, True, True, 1.0, 1.0, reg[split.P_MCW], 0.0,
                1e-9, np.empty((k, 2)), np.zeros((k, 4, 2)), np.empty((k, widest, 2)),
                np.empty((k, most), np.int64), np.empty((k, most), np.int32),
                np.empty((k, widest), np.int32), reg, general, np.zeros((k, 8), np.int64),
                np.zeros((k, 8)), recs, np.zeros((m, 8)), np.empty((k, widest, 2)),
                np.empty(k, np.int64), np.empty(k, np.int64), np.empty(total, np.int32),
                np.empty((total, 2)), out, lengths)
            for j, (rec, slots, vals, dead) in enumerate(want):
                msg = f"trial {trial}, {workers} workers, node {j}"
                np.testing.assert_array_equal(out[j], rec, err_msg=msg)
                s, v, d = lists[j]
                np.testing.assert_array_equal(s[:lengths[j]], slots, err_msg=msg)
                np.testing.assert_array_equal(v[:lengths[j]], vals, err_msg=msg)
                np.testing.assert_array_equal(d, dead, err_msg=msg)
    assert found > 5 and marked > 10, (found, marked)


def test_subtraction_in_place_of_a_parent_without_some_slots():
    """The larger child in place of the parent: slots the parent left out (all-zero) but the
    built child holds are reported, for the backend to insert their negated sums."""
    p_slots = np.array([0, 3, 7, 9], np.int32)
    p_vals = np.array([[5.0, 2.0], [1.0, 1.0], [4.0, 3.0], [2.0, 2.0]])
    s_slots = np.array([3, 5, 9], np.int32)
    s_vals = np.array([[1.0, 1.0], [-1.0, 0.0], [0.5, 1.0]])
    missing = np.empty(3, np.int64)
    k = ksparse.subtract_in_place(p_slots, p_vals, s_slots, s_vals, missing)
    assert k == 1 and missing[0] == 1
    np.testing.assert_array_equal(p_vals, [[5.0, 2.0], [0.0, 0.0], [4.0, 3.0], [1.5, 1.0]])


def test_parallel_subtraction_and_emit_equal_serial_ones():
    """`subtract_parallel` (ranges of the child's entries, missing ones in order) and
    `emit_touched_parallel` (ranges of bitmap words, counted then written) give the serial
    kernels' sums, lists and missing indices for any number of ranges, against NumPy."""
    rng = np.random.default_rng(12)
    for trial in range(30):
        total = int(rng.integers(50, 3000))
        p_slots = np.sort(rng.choice(total, int(rng.integers(1, total)), replace=False))
        s_slots = np.sort(rng.choice(total, int(rng.integers(1, total // 2 + 2)),
                                     replace=False)).astype(np.int32)
        p_vals = rng.normal(size=(p_slots.size, 2))
        s_vals = rng.normal(size=(s_slots.size, 2))
        where = np.searchsorted(p_slots, s_slots)
        inside = (where < p_slots.size) & (p_slots[np.minimum(where, p_slots.size - 1)]
                                           == s_slots)
        want = p_vals.copy()
        want[where[inside]] -= s_vals[inside]
        got = p_vals.copy()
        missing = np.empty(s_slots.size, np.int64)
        workers = 1 + trial % 5
        k = ksparse.subtract_parallel(workers, p_slots.astype(np.int32), got, s_slots, s_vals,
                                      missing, np.empty(workers, np.int64))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(missing[:k], np.flatnonzero(~inside))
        # emit: items marking random slots, some features dead
        F = total // 3
        slot_feature = np.minimum(np.arange(total) // 3, F - 1).astype(np.int32)
        dead = (rng.random(F) < 0.2).astype(np.uint8)
        items = 1 + trial % 3
        accs = rng.normal(size=(items, total, 2))
        bitmaps = np.zeros((items, (total + 63) >> 6), np.uint64)
        marked = rng.random((items, total)) < 0.1
        for i in range(items):
            for s in np.flatnonzero(marked[i]):
                bitmaps[i, s >> 6] |= np.uint64(1) << np.uint64(s & 63)
        keep = np.flatnonzero(marked.any(axis=0) & (dead[slot_feature] == 0))
        sums = np.zeros((keep.size, 2))
        for i in range(items):  # in item order, as the kernels add them
            sums += np.where(marked[i, keep, None], accs[i, keep], 0.0)
        out = (np.empty(keep.size + 5, np.int32), np.empty((keep.size + 5, 2)))
        blocks = 1 + trial % 6
        m = ksparse.emit_touched_parallel(blocks, accs, bitmaps, 0, items, slot_feature, dead,
                                          *out, np.empty(blocks + 1, np.int64))
        assert m == keep.size and not bitmaps.any()
        np.testing.assert_array_equal(out[0][:m], keep)
        np.testing.assert_array_equal(out[1][:m], sums)


@pytest.mark.parametrize("layout", ["float", "packed", "counted"])
def test_root_built_from_columns_equals_row_chunk_build(layout, monkeypatch):
    """The root (all rows, in order) is built feature by feature from the column-major
    entries, on parts of the features (on the thread pool, and taken longest first on
    Numba's loops): the same slots and bit-identical sums as the row-chunk build of the
    same chunks (float sums that round: the order is the same), dead features left out."""
    d = histboost.Dataset(X_S).construct(max_bin=32)
    rng = np.random.default_rng(4)
    n = X_S.shape[0]
    if layout == "packed":
        gh = np.column_stack([rng.integers(-50, 50, n), rng.integers(0, 30, n)])
        q = Quantisation(1.0, 1.0, 0)
    else:
        gh = np.column_stack([rng.normal(size=n), rng.uniform(0.1, 1, n)])
        q = None
    be = SparseCPUBackend(d.bins, 1, count_rows=layout == "counted")
    be.set_gradients(gh.astype(np.float32)[None])
    be.begin_tree(0, None, q)
    be._dead[0][[2, 5]] = 1
    for chunks, threads, loop_min in itertools.product((1, 3), (1, 4), (1, 1 << 30)):
        monkeypatch.setattr(sparse_backend, "_LOOP_MIN_THREADS", loop_min)
        be._build_root(0, chunks, threads)
        got = be._hist.pop(0)
        be._build_group([0], [(0, n)], [chunks], [0])
        want = be._hist.pop(0)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        assert not np.isin(be._slot_feature[got[0]], [2, 5]).any()
