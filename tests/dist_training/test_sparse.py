"""Sparse Datasets under `histboost.train(..., comm=...)`: rows of a scipy CSR matrix split
across 2-3 thread workers give the quantised model of one process on all rows, which is the
model of the dense equivalent; the global cuts of sparse rows are one process's."""

from __future__ import annotations

import numpy as np
import pytest

import histboost as hb
from histboost.collective.testing import run_threads
from histboost.data.sparse import SparseMatrix, sparse_bin_mapper
from histboost.distributed.cuts import global_bin_mapper

sp = pytest.importorskip("scipy.sparse")

N, F = 600, 40


def _data(objective: str = "binary:logistic", seed: int = 3):
    """CSR (N, F): 10% stored values of a few distinct levels, column 1 of many distinct
    values (quantile cuts), columns 30.. stored in the first 150 rows only (the later
    ranks' rows store nothing there), and a label driven by columns 0-2."""
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((N, F)) < 0.1, np.round(rng.normal(size=(N, F)) * 2) / 2, 0.0)
    dense[:, 1] = np.where(rng.random(N) < 0.6, rng.normal(size=N), 0.0)
    dense[150:, 30:] = 0.0
    dense[:150, 30:] = np.where(rng.random((150, F - 30)) < 0.3, 1.0 + rng.random((150, 10)),
                                0.0)
    signal = dense[:, 0] - dense[:, 1] + dense[:, 2] * dense[:, 30] + rng.normal(size=N) * 0.5
    if objective == "multi:softprob":
        y = np.digitize(signal, [-0.5, 0.5]).astype(np.float64)
    elif objective == "binary:logistic":
        y = (signal > 0.1).astype(np.float64)
    else:  # integer labels: exact sums, so the intercept is one process's
        y = np.round(signal * 2)
    return sp.csr_matrix(dense), y


def _blocks(world: int) -> list[slice]:
    cuts = np.linspace(0, N, world + 1).round().astype(int)
    return [slice(cuts[r], cuts[r + 1]) for r in range(world)]


def _strip(model: dict) -> dict:
    model.pop("histboost_version", None)
    model.get("params", {}).pop("tree_learner", None)
    return model


CASES = [
    ("binary:logistic", {"max_depth": 4, "subsample": 0.7}),
    ("binary:logistic", {"grow_policy": "lossguide", "max_leaves": 10, "min_data_in_leaf": 15,
                         "min_child_weight": 2.0}),
    ("reg:squarederror", {"grow_policy": "oblivious", "max_depth": 3, "base_score": 0.0}),
    ("multi:softprob", {"num_class": 3, "max_depth": 3, "colsample_bytree": 0.8}),
]


# every case on 2 and 3 ranks, the learners alternating
RUNS = [(world, case, learner) for i, case in enumerate(CASES)
        for world, learner in ((2, ("data", "reduce_scatter")[i % 2]),
                               (3, ("reduce_scatter", "data")[i % 2]))]


@pytest.mark.parametrize("world,case,learner", RUNS, ids=lambda c: str(c))
def test_sparse_model_equals_one_process_and_dense(world, case, learner):
    objective, extra = case
    X, y = _data(objective)
    params = {"objective": objective, "quantized_grad": True, "learning_rate": 0.3,
              "max_bin": 16, "seed": 4, "nthread": 1, "tree_learner": learner, **extra}
    blocks = _blocks(world)

    def body(comm):
        b = blocks[comm.rank]
        d = hb.Dataset(X[b], label=y[b])  # global cuts of the sparse rows of all ranks
        return _strip(hb.train(params, d, 4, comm=comm).to_dict())

    want = _strip(hb.train(params, hb.Dataset(X, label=y), 4).to_dict())
    dense = _strip(hb.train(params, hb.Dataset(X.toarray(), label=y), 4).to_dict())
    assert want == dense
    assert any(len(t.get("value", t.get("leaf_value", []))) > 4 for t in want["trees"])
    for rank, got in enumerate(run_threads(world, body)):
        assert got == want, f"rank {rank}: model differs from one process's"


def test_sparse_missing_rule_and_row_ids():
    """unstored='nan', integer row weights (some 0), rows dealt to 3 workers in any order with
    their global row_ids, evaluation metrics: the one-process model and metrics."""
    X, y = _data("binary:logistic", seed=5)
    w = np.random.default_rng(0).integers(0, 3, N).astype(np.float64)
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 4,
              "max_bin": 16, "subsample": 0.8, "nthread": 1, "eval_metric": ["logloss"]}
    full = hb.Dataset(X, label=y, weight=w, unstored="nan")
    log: dict = {}
    want = _strip(hb.train(params, full, 4, evals=[(full, "train")], evals_result=log)
                  .to_dict())
    shares = np.array_split(np.random.default_rng(1).permutation(N), 3)

    def body(comm):
        rows = np.sort(shares[comm.rank])[::-1]
        d = hb.Dataset(X[rows], label=y[rows], weight=w[rows], unstored="nan", row_ids=rows)
        got: dict = {}
        model = hb.train(params, d, 4, evals=[(d, "train")], evals_result=got, comm=comm)
        return _strip(model.to_dict()), got

    for model, got in run_threads(3, body):
        assert model == want
        np.testing.assert_allclose(got["train"]["logloss"], log["train"]["logloss"],
                                   rtol=1e-12)


@pytest.mark.parametrize("unstored", ["zero", "nan"])
def test_global_sparse_cuts_equal_one_process(unstored):
    """Weighted rows (some of weight 0), a cut sample smaller than the rows: the cuts of 3
    ranks' blocks equal `sparse_bin_mapper` on all rows."""
    X, _ = _data(seed=7)
    w = np.random.default_rng(2).integers(0, 4, N).astype(np.float64)
    S = SparseMatrix.from_any(X, unstored)
    want = sparse_bin_mapper(S, w, 16, sample_rows=400)
    blocks = _blocks(3)

    def body(comm):
        b = blocks[comm.rank]
        return global_bin_mapper(comm, SparseMatrix.from_any(X[b], unstored), w[b], 16,
                                 sample_rows=400)

    for got in run_threads(3, body):
        np.testing.assert_array_equal(got.cut_ptr, want.cut_ptr)
        np.testing.assert_array_equal(got.cut_values, want.cut_values)


def test_sparse_and_dense_ranks_raise_on_every_rank():
    X, y = _data()
    blocks = _blocks(2)

    def body(comm):
        b = blocks[comm.rank]
        data = X[b] if comm.rank == 0 else X[b].toarray()
        try:
            hb.train({"objective": "binary:logistic"}, hb.Dataset(data, label=y[b]), 1,
                     comm=comm)
        except ValueError as e:
            return str(e)
        return None

    errors = run_threads(2, body)
    assert all(e is not None and "differ in kind" in e for e in errors), errors



def test_live_layout_rules_agree_across_ranks():
    """Each rank's sparse backend under the wrapper starts a tree with the root features of
    all ranks (rank 1 stores nothing in columns 30..) and the pruning rule (its rounding
    margin) of all ranks' hessians, so their compact layouts agree."""
    from histboost.data.sparse import SparseBins
    from histboost.distributed.backend import DistributedBackend
    from histboost.kernels.cpu.sparse_compact import CompactSparseCPUBackend

    X, _ = _data(seed=9)
    mapper = sparse_bin_mapper(SparseMatrix.from_any(X), None, 16)
    blocks = _blocks(2)

    def body(comm):
        b = blocks[comm.rank]
        sbins = SparseBins(SparseMatrix.from_any(X[b]), mapper)
        local = CompactSparseCPUBackend(sbins, 1, pack_rows=N)
        own_root = local._root_live.features.copy()
        wrapped = DistributedBackend(local, comm)
        n = sbins.shape[0]
        pairs = np.ones((1, n, 2), np.float32)
        pairs[0, :, 1] = 0.25 * (comm.rank + 1)  # hessian sums 75 and 150: other margins
        wrapped.set_gradients(pairs)
        count = wrapped.begin_tree(0, None, None)
        return own_root, local._root_live.features, local._tol, local._prune, count

    (own0, root0, tol0, prune0, n0), (own1, root1, tol1, prune1, n1) = run_threads(2, body)
    assert own1.size < own0.size  # rank 1's rows alone would keep fewer features
    np.testing.assert_array_equal(root0, root1)
    np.testing.assert_array_equal(root0, np.union1d(own0, own1))
    assert tol0 == tol1 == 1e-9 * (0.25 * 300 + 0.5 * 300 + 1.0) and prune0 and prune1
    assert n0 == n1 == N


@pytest.mark.parametrize("learner", ["data", "reduce_scatter"])
def test_float_gradients_reproducible_and_close(learner):
    X, y = _data(seed=6)
    params = {"objective": "binary:logistic", "max_depth": 4, "max_bin": 16, "nthread": 1,
              "tree_learner": learner}
    blocks = _blocks(2)

    def body(comm):
        b = blocks[comm.rank]
        return hb.train(params, hb.Dataset(X[b], label=y[b]), 5, comm=comm)

    first = [m.to_dict() for m in run_threads(2, body)]
    second = run_threads(2, body)
    assert first[0] == first[1] == second[0].to_dict()
    one = hb.train(params, hb.Dataset(X, label=y), 5)
    p, q = one.predict(X), second[0].predict(X)
    loss = [float(-np.mean(y * np.log(r) + (1 - y) * np.log(1 - r))) for r in (p, q)]
    assert abs(loss[0] - loss[1]) < 1e-3


def _stored_error(pred, data):
    """A custom metric that reads the set's features as well as its labels: the error of
    rows that store a value in column 0 (the rows one process sees, in its order)."""
    rows = np.diff(data.data.indptr) > 0
    has0 = np.zeros(data.num_row(), bool)
    starts = data.data.indptr[:-1]
    has0[rows] = data.data.indices[starts[rows]] == 0
    return "err0", float(np.mean((pred[has0] > 0.5) != data.get_label()[has0]))


def test_custom_metric_on_a_sparse_evaluation_set():
    """A custom metric under comm sees the sparse evaluation set of all ranks (stored
    values gathered): the metric log and early stopping of one process."""
    X, y = _data()
    Xt, yt = _data(seed=9)
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 3,
              "max_bin": 16, "learning_rate": 1.0, "nthread": 1,
              "disable_default_eval_metric": True}
    want_log: dict = {}
    full = hb.Dataset(X, label=y)
    want = hb.train(params, full, 12, evals=[(hb.Dataset(Xt, label=yt, reference=full), "t")],
                    evals_result=want_log, custom_metric=_stored_error, verbose_eval=False,
                    early_stopping_rounds=2)
    blocks = _blocks(2)

    def body(comm):
        b = blocks[comm.rank]
        d = hb.Dataset(X[b], label=y[b])
        log: dict = {}
        bst = hb.train(params, d, 12, evals=[(hb.Dataset(Xt[b], label=yt[b], reference=d),
                                              "t")], evals_result=log, comm=comm,
                       custom_metric=_stored_error, verbose_eval=False,
                       early_stopping_rounds=2)
        return bst.best_iteration, log

    assert len(want_log["t"]["err0"]) > 2
    for best, log in run_threads(2, body):
        assert (best, log) == (want.best_iteration, want_log)
