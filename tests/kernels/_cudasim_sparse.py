"""The sparse CUDA backend (`histboost.kernels.cuda.sparse`) under NUMBA_ENABLE_CUDASIM=1:
its kernels against NumPy over the dense bins, the conformance suite, and sparse training
with device='cuda' against the CPU engine. Run by test_cuda_sparse_sim.py in a subprocess
(the simulator is chosen when numba.cuda is first imported); tiny inputs."""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import scipy.sparse as sp

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"
warnings.filterwarnings("ignore", category=RuntimeWarning)  # uint64 hash products wrap
sys.setswitchinterval(5e-4)  # see _cudasim_backend.py

import torch  # noqa: E402

import histboost  # noqa: E402
from histboost.kernels.backend import make_backend  # noqa: E402
from histboost.kernels.cuda import _common  # noqa: E402
from histboost.kernels.cuda import sparse as cuda_sparse  # noqa: E402
from histboost.kernels.cuda.backend import CUDABackend  # noqa: E402
from histboost.testing import conformance  # noqa: E402
from histboost.testing.conformance import CHECKS  # noqa: E402
from histboost.testing.data import sparse_bins_of  # noqa: E402
from histboost.testing.simulator import run_checks  # noqa: E402
from histboost.tree.predictor import PackedForest  # noqa: E402

conformance.PROBLEM_ROWS = 48  # every simulated GPU thread is a Python thread


def sparse_cuda_backend(unstored: str):
    def make(bins, offsets, **kw):
        return make_backend("cuda", sparse_bins_of(bins, offsets, unstored), offsets,
                            n_threads=1, **kw)
    return make


def _random_bins(rng, n: int, widths: list[int], density: float) -> np.ndarray:
    """(n, F) bins, mostly 0, feature 1 mostly in its missing slot."""
    bins = (rng.random((n, len(widths))) * widths).astype(np.int64)
    bins[rng.random(bins.shape) > density] = 0
    bins[rng.random(n) < 0.6, 1] = widths[1] - 1
    return bins


def check_build_and_fix_against_numpy() -> None:
    """`BUILD` + `FIX_DEFAULT_BINS` give every node the histogram of its dense bins (a NumPy
    sum) and mark the features some row stores (which narrow the split search): nodes over
    identity rows and through both row buffers in several chunks, 2 and 3 channels, feature
    0 summed in shared memory and in global memory (wide values), both unstored rules
    (default bin 0, and the missing slot)."""
    rng = np.random.default_rng(3)
    n, widths = 70, [3, 5, 2, 9, 4]
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    bins = _random_bins(rng, n, widths, 0.3)
    gh = rng.integers(-3000, 3000, (n, 2)).astype(np.int32)
    gh[:, 1] = np.abs(gh[:, 1])
    rows2 = np.stack([rng.permutation(n), np.arange(n)]).astype(np.int32)
    bounds, sides = [(0, n), (0, 30), (30, 70), (5, 61), (9, 9)], [2, 0, 0, 1, 0]
    table, n_chunks = _common.node_table(bounds, sides, 24, [(j,) for j in range(5)])
    for unstored in ("zero", "nan"):
        sb = sparse_bins_of(bins, offsets, unstored)
        for channels in (2, 3):
            for width0 in (widths[0], 0):
                pool = torch.full((5, int(offsets[-1]), channels), 0, dtype=torch.int64)
                present = torch.zeros((5, len(widths)), dtype=torch.uint8)
                table_t = torch.from_numpy(table)
                args = [torch.from_numpy(a) for a in (
                    sb.indptr, sb.slots.astype(np.int32), gh.view(np.int64).reshape(n), rows2)]
                slot_feature = torch.from_numpy(np.repeat(np.arange(len(widths), dtype=np.int32),
                                                          widths))
                cuda_sparse.BUILD[channels].launch(
                    n_chunks, _common.THREADS, torch.device("cpu"), *args, table_t, width0,
                    slot_feature, pool, present, shared_bytes=4 * width0 * channels)
                cuda_sparse.FIX_DEFAULT_BINS.launch(
                    (_common.grid(len(widths) - 1), 5), _common.THREADS, torch.device("cpu"),
                    table_t, torch.from_numpy(offsets),
                    torch.from_numpy(sb.default_bins), pool)
                for j, ((a, b), side) in enumerate(zip(bounds, sides, strict=True)):
                    rows = np.arange(a, b) if side == 2 else rows2[side, a:b]
                    want = np.zeros((int(offsets[-1]), channels), np.int64)
                    for f in range(len(widths)):
                        slots = offsets[f] + bins[rows, f]
                        np.add.at(want[:, 0], slots, gh[rows, 0])
                        np.add.at(want[:, 1], slots, gh[rows, 1])
                        if channels == 3:
                            np.add.at(want[:, 2], slots, 1)
                    np.testing.assert_array_equal(pool[j].numpy(), want,
                                                  err_msg=f"{unstored} {channels} {width0} {j}")
                    # a feature is present where some row is off its default bin (feature 0:
                    # every row)
                    off = bins[rows] != sb.default_bins
                    off[:, 0] = True
                    np.testing.assert_array_equal(present[j].numpy(), off.any(axis=0),
                                                  err_msg=f"{unstored} present {j}")


def _rows_of(be, node: int) -> np.ndarray:
    """The rows of `node` in the backend's row buffers, in order."""
    (a, b), = be._state.ranges.bounds([node])
    return be._rows2[be._state.side[node], a:b].numpy()


def check_partition_and_margins_against_numpy() -> None:
    """`apply_splits` (`SPLIT_FLAGS`, then the dense partition kernels) moves each parent's
    rows stably by its split as NumPy does over the dense bins (missing left and right, a
    split on feature 0, a parent without rows); `_add_margin` (`ADD_MARGIN`) adds the leaf
    values `PackedForest.add_margin_binned` gives the dense bins, normal and oblivious
    trees."""
    rng = np.random.default_rng(5)
    n, widths = 60, [4, 6, 3, 7]
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    bins = _random_bins(rng, n, widths, 0.4)
    missing = np.array(widths) - 1
    def goes_left(rows, f, b, d):
        v = bins[rows, f]
        return np.where(v == missing[f], d == 1, v <= b)

    for unstored in ("zero", "nan"):
        be = make_backend("cuda", sparse_bins_of(bins, offsets, unstored), offsets,
                          n_threads=1, label=(rng.random(n) < 0.5) * 1.0, weight=None,
                          n_outputs=1, count_rows=False)
        be.compute_gradients("logistic")
        be.begin_tree(0, None, None)
        # feature 1 (mostly missing) with missing left; node 5 gets no rows; splits on
        # feature 0 and of a parent without rows
        for parents, lefts, rights, splits in (
                ([0], [1], [2], [(1, 2, 1)]), ([2], [5], [6], [(0, -1, 0)]),
                ([1, 5, 6], [3, 7, 9], [4, 8, 10], [(3, 0, 0), (0, 1, 0), (2, 0, 1)])):
            want = []
            for p, (f, b, d) in zip(parents, splits, strict=True):
                rows = _rows_of(be, p)
                left = goes_left(rows, f, b, d)
                want.append((rows[left], rows[~left]))
            recs = np.zeros((len(parents), conformance.REC_WIDTH))
            recs[:, [conformance.REC_FEATURE, conformance.REC_BIN,
                     conformance.REC_DEFAULT_LEFT]] = splits
            counts = be.apply_splits(parents, lefts, rights, recs)
            for (lw, rw), lc, rc, c in zip(want, lefts, rights, counts, strict=True):
                np.testing.assert_array_equal(_rows_of(be, lc), lw, err_msg=unstored)
                np.testing.assert_array_equal(_rows_of(be, rc), rw, err_msg=unstored)
                assert tuple(c) == (lw.size, rw.size)
        assert be._state.ranges.bounds([5])[0][0] == be._state.ranges.bounds([5])[0][1]
    X = bins.astype(np.float64)
    X[bins == missing] = np.nan
    y = bins[:, 2] + (bins[:, 3] > 2) + rng.random(n)
    d = histboost.Dataset(X, label=y)
    d.construct(8)
    dense, model_offsets = d.bins, d.bin_mapper.bin_offsets
    be = make_backend("cuda", sparse_bins_of(dense, model_offsets), model_offsets,
                      n_threads=1, label=y, weight=None, n_outputs=1, count_rows=False)
    for policy in ("depthwise", "oblivious"):
        model = histboost.train({"grow_policy": policy, "max_depth": 3, "max_bin": 8},
                                histboost.Dataset(X, label=y), 2, verbose_eval=False)
        for tree in model.trees:
            want = np.zeros((n, 1))
            PackedForest([tree]).add_margin_binned(
                dense, np.diff(model_offsets).astype(np.int32) - 1, want)
            be.set_margin(np.zeros((n, 1)))
            be._add_margin(tree, 0)
            np.testing.assert_array_equal(be.margin(), want, err_msg=policy)


def _train(device, X, y, params, rounds=1, **kw):
    base = {"quantized_grad": True, "max_bin": 8, "nthread": 1, "seed": 1, "max_depth": 3,
            "max_leaves": 5, **params, "device": device}
    return histboost.train(base, histboost.Dataset(X, label=y, **kw), rounds,
                           verbose_eval=False).save_raw().replace(
                               f'"device":"{device}"'.encode(), b"")


def check_training_matches_cpu() -> None:
    """Quantised sparse training on the simulated GPU grows the CPU engine's trees, bit for
    bit: every grow policy, binary and multiclass, stored NaNs, both unstored rules, a row
    sample (margins by the tree walk), min_data_in_leaf (3 channels), and a CSR with
    duplicates, unsorted indices and explicit zeros."""
    rng = np.random.default_rng(2)
    n, F = 56, 5
    X = np.round(rng.normal(size=(n, F)), 1)
    X[rng.random((n, F)) < 0.6] = 0.0
    X[rng.random((n, F)) < 0.06] = np.nan
    y2 = (np.nan_to_num(X[:, 1]) + np.nan_to_num(X[:, 2]) > 0) * 1.0
    y3 = np.digitize(np.nan_to_num(X[:, 3]) + np.nan_to_num(X[:, 0]), [-0.4, 0.4]) * 1.0
    csr = sp.csr_matrix(X)
    # the same matrix with duplicates (halves adding up), indices unsorted within rows and
    # explicit zeros, built as a raw CSR (scipy's constructors from COO would sum them)
    coo = csr.tocoo()
    half = np.where(np.isnan(coo.data), coo.data, coo.data / 2)
    rows = np.concatenate([coo.row, coo.row, [0, 5]])
    cols = np.concatenate([coo.col, coo.col, [3, 4]])
    vals = np.concatenate([half, np.where(np.isnan(half), 0.0, half), [0.0, 0.0]])
    order = np.lexsort((rng.random(rows.size), rows))
    messy = sp.csr_matrix((vals[order], cols[order],
                           np.searchsorted(rows[order], np.arange(n + 1))), shape=X.shape)
    assert not messy.has_canonical_format and messy.nnz > csr.nnz
    binary = {"objective": "binary:logistic"}
    multi = {"objective": "multi:softprob", "num_class": 3}
    cases = [
        ("depthwise", binary, y2, csr, {}),
        ("lossguide", {**binary, "subsample": 0.8}, y2, messy, {}),
        ("oblivious", {**multi, "min_data_in_leaf": 4}, y3, csr, {}),
        ("lossguide", multi, y3, csr, {"unstored": "nan"}),
        ("depthwise", {**binary, "min_data_in_leaf": 3}, y2, messy, {"unstored": "nan"}),
    ]
    for policy, params, y, data, kw in cases:
        p = {"grow_policy": policy, **params}
        cpu, gpu = (_train(d, data, y, p, **kw) for d in ("cpu", "cuda"))
        assert cpu == gpu, f"{p} {kw}: CPU and simulated-GPU sparse models differ"
    dense = _train("cpu", np.nan_to_num(X, nan=np.nan), y2, {"grow_policy": "depthwise",
                                                              **binary})
    assert dense == _train("cuda", csr, y2, {"grow_policy": "depthwise", **binary}), \
        "the sparse GPU model is not the dense CPU model"


def check_float_training_close_to_cpu() -> None:
    """Float (not quantised) sparse training on the simulated GPU: the CPU engine's tree
    structure, leaf values to fixed-point rounding (as the dense GPU engine)."""
    rng = np.random.default_rng(4)
    X = np.round(rng.normal(size=(48, 4)), 1)
    X[rng.random(X.shape) < 0.5] = 0.0
    y = X[:, 0] + 2 * (X[:, 2] > 0.3) + rng.normal(0, 0.05, 48)
    S = sp.csr_matrix(X)
    models = [histboost.train({"max_depth": 2, "max_bin": 8, "nthread": 1, "device": d},
                              histboost.Dataset(S, label=y), 1, verbose_eval=False)
              for d in ("cpu", "cuda")]
    cpu, gpu = (m.get_dump(with_stats=False) for m in models)
    strip = [[line.split("leaf=")[0] for line in tree.splitlines()] for tree in cpu]
    assert strip == [[line.split("leaf=")[0] for line in tree.splitlines()] for tree in gpu]
    np.testing.assert_allclose(models[1].predict(S), models[0].predict(S), rtol=1e-4,
                               atol=1e-5)


def check_search_skips_absent_features() -> None:
    """A step's built child marks only the features its rows store, the child taking its
    parent's slot keeps the parent's (a superset), and the split search lists only those: a
    child whose rows all sit in the default bins of features 1 and 2 searches feature 0 only,
    the other child three features with fewer blocks (a block takes several), both with the
    records of a search over every feature; a node with no feature listed has no split."""
    rng = np.random.default_rng(8)
    n, widths = 40, [5, 3, 4]
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    bins = np.zeros((n, 3), np.int64)
    bins[:, 0] = rng.integers(0, 4, n)
    bins[:20, 1] = 1
    bins[:20, 2] = rng.integers(1, 3, 20)
    be = make_backend("cuda", sparse_bins_of(bins, offsets), offsets, n_threads=1,
                      label=(bins[:, 0] > 1) * 1.0, weight=None, n_outputs=1,
                      count_rows=False)
    be.compute_gradients("logistic")
    be.begin_tree(0, None, None)
    be.build_histograms([0])
    G, H = be.histogram_totals([0])[0]
    rec = np.zeros((1, conformance.REC_WIDTH))
    rec[0, [conformance.REC_FEATURE, conformance.REC_BIN]] = (1, 0)  # rows 20.. go left
    sums = be.read_histograms([0])[0, offsets[1]:offsets[1] + 2, :2]
    child_sums = np.array([sums[0], [G - sums[0, 0], H - sums[0, 1]]])
    reg = conformance._reg()
    masks = np.ones((2, 3), bool)
    counts, recs = be.split_and_search([0], [1], [2], rec, child_sums, masks, reg)
    assert tuple(counts[0]) == (20, 20)
    present = be._present.numpy()
    np.testing.assert_array_equal(present[be._state.slot[1]], [1, 0, 0])  # built: rows 20..39
    np.testing.assert_array_equal(present[be._state.slot[2]], [1, 1, 1])  # the parent's
    listed = be._searched_features
    be._searched_features = lambda masks, nodes: CUDABackend._searched_features(
        be, masks, nodes)  # every feature searched, a block each

    def every(node, mask):
        return be.find_best_splits([node], np.array([[*be.histogram_totals([node])[0], 20.0]]),
                                   np.array([mask], bool), reg)[0]

    np.testing.assert_array_equal(recs, np.array([every(node, [1, 1, 1]) for node in (1, 2)]))
    assert recs[1, conformance.REC_FEATURE] >= 0, recs  # a split found in a listed search
    # no feature listed (all masked): no split, as a search over every feature finds
    be._searched_features = listed
    none = be.find_best_splits([2], np.array([[*be.histogram_totals([2])[0], 20.0]]),
                               np.zeros((1, 3), bool), reg)[0]
    np.testing.assert_array_equal(none, every(2, [0, 0, 0]))
    assert none[conformance.REC_FEATURE] == -1 and not none[conformance.REC_GAIN], none


def check_pool_memory_is_checked() -> None:
    """A histogram pool that would not fit the device raises MemoryError naming the sizes
    (before any allocation), and exactly what a tree needs is taken where the usual growth
    (a quarter more than needed) would not fit."""
    from histboost.kernels.cuda.sparse import SparseCUDABackend

    rng = np.random.default_rng(1)
    widths = [3, 4, 5]
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    be = make_backend("cuda", sparse_bins_of(_random_bins(rng, 40, widths, 0.5), offsets),
                      offsets, n_threads=1, label=np.arange(40.0) % 2, weight=None,
                      n_outputs=1, count_rows=False)
    per_slot = 12 * 2 * 8 + 3  # and a byte a feature
    be.compute_gradients("logistic")
    be.begin_tree(0, None, None)
    be._alloc_slots(8)
    assert be._pool.shape[0] == 10, be._pool.shape  # a quarter more than needed
    be._free_bytes = lambda: 11 * per_slot  # 11 + 2 slots do not fit, 11 do
    be._alloc_slots(3)
    assert be._pool.shape[0] == 11, be._pool.shape
    try:
        be._alloc_slots(1)
    except MemoryError as e:
        assert "12 slots x 2 channels" in str(e) and "device='cpu'" in str(e), e
    else:
        raise AssertionError("a pool over the free memory was allocated")
    assert isinstance(be, SparseCUDABackend) and be._pool.shape[0] == 11


def main() -> int:
    checks = [(c.__name__, lambda c=c: c(sparse_cuda_backend("zero"), 0)) for c in CHECKS]
    checks += [(c.__name__, c) for c in (
        check_build_and_fix_against_numpy, check_partition_and_margins_against_numpy,
        check_search_skips_absent_features, check_training_matches_cpu,
        check_float_training_close_to_cpu, check_pool_memory_is_checked)]
    return run_checks(checks)


if __name__ == "__main__":
    sys.exit(main())
