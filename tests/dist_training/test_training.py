"""`histboost.train(..., comm=...)`: rows split into blocks across 1-3 thread workers give
the model of one process on all rows (quantised training, with shared reference cuts or the
global cuts of all ranks' rows), and the settings the first version does not support raise
ValueError naming them."""

from __future__ import annotations

import numpy as np
import pytest

import histboost as hb
from histboost.collective import CollectiveError, SingleCommunicator
from histboost.collective.testing import run_threads

N = 700


def _data(objective: str, seed: int = 11):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(N, 5)) * 4) / 2
    X[rng.random(X.shape) < 0.1] = np.nan
    signal = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) * 0.5 + rng.normal(size=N)
    if objective == "binary:logistic":
        y = (signal > 0.3).astype(np.float64)
    elif objective == "multi:softmax":
        y = np.digitize(signal, [-1.0, 1.0]).astype(np.float64)
    else:  # integer labels: their sums are exact, so the intercept is one process's
        y = np.round(signal * 2)
    return X, y


def _blocks(world: int) -> list[slice]:
    """Uneven contiguous blocks in rank order."""
    cuts = np.round(np.cumsum([0] + [k + 1 for k in range(world)])
                    / (world * (world + 1) / 2) * N).astype(int)
    return [slice(cuts[r], cuts[r + 1]) for r in range(world)]


def _train_ranks(params, X, y, world, rounds=4, **kw):
    full = hb.Dataset(X, label=y)
    full.construct()  # the cuts every rank bins with (before the threads share them)
    blocks = _blocks(world)

    def body(comm):
        b = blocks[comm.rank]
        d = hb.Dataset(X[b], label=y[b], reference=full)
        return hb.train(params, d, rounds, verbose_eval=False, comm=comm, **kw).to_dict()

    return full, run_threads(world, body)


CASES = [
    ("binary:logistic", {"max_depth": 3, "subsample": 0.7}),
    ("binary:logistic", {"grow_policy": "lossguide", "max_leaves": 8, "min_data_in_leaf": 25}),
    ("reg:squarederror", {"grow_policy": "oblivious", "max_depth": 3, "subsample": 0.8}),
    ("multi:softmax", {"num_class": 3, "max_depth": 3, "colsample_bytree": 0.8}),
]


def _strip(model: dict) -> dict:
    model.pop("histboost_version", None)
    model.get("params", {}).pop("tree_learner", None)
    return model


@pytest.mark.parametrize("learner", ["data", "reduce_scatter"])
@pytest.mark.parametrize("objective,extra", CASES, ids=lambda c: str(c))
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_model_equals_one_process(world, objective, extra, learner):
    X, y = _data(objective)
    params = {"objective": objective, "quantized_grad": True, "learning_rate": 0.3,
              "seed": 4, "nthread": 1, "tree_learner": learner, **extra}
    full, models = _train_ranks(params, X, y, world)
    want = _strip(hb.train(params, full, 4, verbose_eval=False).to_dict())
    assert len(want["trees"]) == 4 * (3 if objective == "multi:softmax" else 1)
    assert any(len(t.get("value", t.get("leaf_value", []))) > 2 for t in want["trees"])
    for rank, got in enumerate(models):
        assert _strip(got) == want, f"rank {rank}: model differs from one process's"


def test_single_communicator_is_one_process():
    X, y = _data("binary:logistic")
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 3}
    d = hb.Dataset(X, label=y)
    got = hb.train(params, d, 3, comm=SingleCommunicator()).to_dict()
    assert got == hb.train(params, d, 3).to_dict()


def _split_eval(world, objective, params, rounds, **kw):
    """Train on `world` thread ranks with an evaluation set split across them too; returns
    (one-process booster and history, per-rank (booster, history))."""
    X, y = _data(objective)
    Xt, yt = (a[:300] for a in _data(objective, seed=12))
    full = hb.Dataset(X, label=y)
    full.construct()
    want_log: dict = {}
    want = hb.train(params, full, rounds, evals=[(hb.Dataset(Xt, label=yt, reference=full),
                                                  "test")], evals_result=want_log,
                    verbose_eval=False, **kw)
    blocks, test_blocks = _blocks(world), np.array_split(np.arange(300), world)

    def body(comm):
        b, tb = blocks[comm.rank], test_blocks[comm.rank]
        d = hb.Dataset(X[b], label=y[b], reference=full)
        dt = hb.Dataset(Xt[tb], label=yt[tb], reference=full)
        log: dict = {}
        bst = hb.train(params, d, rounds, evals=[(dt, "test")], evals_result=log,
                       verbose_eval=False, comm=comm, **kw)
        return bst, log

    return (want, want_log), run_threads(world, body)


@pytest.mark.parametrize("learner", ["data", "reduce_scatter"])
def test_metrics_and_early_stopping_are_global(learner):
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 5,
              "learning_rate": 1.0, "eval_metric": ["logloss", "auc"], "nthread": 1,
              "tree_learner": learner}
    (want, want_log), ranks = _split_eval(3, "binary:logistic", params, 30,
                                          early_stopping_rounds=3)
    assert want.best_iteration < 29  # early stopping happened
    for rank, (bst, log) in enumerate(ranks):
        assert bst.best_iteration == want.best_iteration, f"rank {rank}"
        # AUC over the gathered rows: exactly one process's; logloss from summed parts
        assert log["test"]["auc"] == want_log["test"]["auc"], f"rank {rank}"
        np.testing.assert_allclose(log["test"]["logloss"], want_log["test"]["logloss"],
                                   rtol=1e-12, err_msg=f"rank {rank}")


@pytest.mark.parametrize("learner", ["data", "reduce_scatter"])
def test_float_histograms_reproducible_and_close(learner):
    params = {"objective": "binary:logistic", "max_depth": 3, "learning_rate": 0.3,
              "eval_metric": "logloss", "nthread": 1, "tree_learner": learner}
    (_, want_log), first = _split_eval(3, "binary:logistic", params, 10)
    _, again = _split_eval(3, "binary:logistic", params, 10)
    models = [bst.to_dict() for bst, _ in first]
    assert all(m == models[0] for m in models), "ranks disagree"
    assert [bst.to_dict() for bst, _ in again] == models, "a rerun differs"
    got = first[0][1]["test"]["logloss"][-1]
    assert abs(got - want_log["test"]["logloss"][-1]) < 1e-3


def test_differing_parameters_name_the_rank_and_setting():
    X, y = _data("binary:logistic")
    blocks = _blocks(3)
    full = hb.Dataset(X, label=y)
    full.construct()

    def body(comm):
        b = blocks[comm.rank]
        params = {"quantized_grad": True, "max_depth": 4 if comm.rank == 2 else 3,
                  "nthread": comm.rank + 1}  # nthread may differ: it does not change models
        try:
            hb.train(params, hb.Dataset(X[b], label=y[b], reference=full), 2, comm=comm)
        except ValueError as e:
            return str(e)
        return None

    for e in run_threads(3, body):
        assert e is not None and "rank 2" in e and "max_depth" in e, e


def test_an_error_on_one_rank_stops_every_rank():
    X, y = _data("binary:logistic")
    blocks = _blocks(2)
    full = hb.Dataset(X, label=y)
    full.construct()

    def body(comm):
        b = blocks[comm.rank]
        yy = y[b].copy()
        if comm.rank == 1:
            yy[0] = 3.0  # not a binary label
        try:
            hb.train({"objective": "binary:logistic", "quantized_grad": True},
                     hb.Dataset(X[b], label=yy, reference=full), 2, comm=comm)
        except (ValueError, CollectiveError) as e:
            return f"{type(e).__name__}: {e}"
        return None

    errors = run_threads(2, body, timeout=20)
    assert errors[1] is not None and errors[1].startswith("ValueError"), errors
    assert errors[0] is not None and "rank 1" in errors[0] and "label" in errors[0], errors


def test_unknown_tree_learner_raises():
    X, y = _data("binary:logistic")
    with pytest.raises(ValueError, match="voting"):
        hb.train({"tree_learner": "voting"}, hb.Dataset(X, label=y), 1)


@pytest.mark.parametrize("world", [2, 3])
def test_global_cuts_model_equals_one_process(world):
    """Each rank's Dataset from its own rows, no reference: the global cuts make the model of
    one process on all rows (max_bin 16: quantile cuts, which a rank's rows alone would move)."""
    X, y = _data("binary:logistic")
    X[:, 2] = np.random.default_rng(5).normal(size=N)  # many distinct values
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 3,
              "max_bin": 16, "seed": 4, "nthread": 1}
    blocks = _blocks(world)
    local = hb.Dataset(X[blocks[0]], max_bin=16).bin_mapper
    full = hb.Dataset(X, label=y, max_bin=16)
    assert not np.array_equal(local.cut_values, full.bin_mapper.cut_values)

    def body(comm):
        b = blocks[comm.rank]
        return hb.train(params, hb.Dataset(X[b], label=y[b]), 4, comm=comm).to_dict()

    want = hb.train(params, full, 4).to_dict()
    assert any(len(t.get("value", t.get("leaf_value", []))) > 2 for t in want["trees"])
    for rank, got in enumerate(run_threads(world, body)):
        assert got == want, f"rank {rank}: model differs from one process's"


def _train_errors(world, dataset_of):
    X, y = _data("binary:logistic")
    blocks = _blocks(world)
    params = {"objective": "binary:logistic", "quantized_grad": True}

    def body(comm):
        try:
            hb.train(params, dataset_of(comm.rank, X, y, blocks[comm.rank]), 2, comm=comm)
        except ValueError as e:
            return str(e)
        return None

    return run_threads(world, body)


def test_references_with_different_cuts_raise_on_every_rank():
    def dataset_of(rank, X, y, b):  # each rank's reference binned from its own rows
        return hb.Dataset(X[b], label=y[b], reference=hb.Dataset(X[b]))

    errors = _train_errors(2, dataset_of)
    assert all(e is not None and "same cuts" in e for e in errors), errors


def test_row_ids_make_the_model_independent_of_placement():
    """Rows dealt to workers in any order, with their global indices as Dataset row_ids,
    give the one-process model (subsampling and rounding draw at the global index)."""
    X, y = _data("binary:logistic")
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 3,
              "subsample": 0.7, "nthread": 1}
    full = hb.Dataset(X, label=y)
    full.construct()
    want = _strip(hb.train(params, full, 3).to_dict())
    shares = np.array_split(np.random.default_rng(3).permutation(N), 3)

    def body(comm):
        rows = np.sort(shares[comm.rank])[::-1]  # any order within a worker too
        d = hb.Dataset(X[rows], label=y[rows], reference=full, row_ids=rows)
        return _strip(hb.train(params, d, 3, comm=comm).to_dict())

    assert all(m == want for m in run_threads(3, body))


@pytest.mark.parametrize("bad", ["duplicate", "out_of_range", "some_ranks"])
def test_bad_row_ids_raise_on_every_rank(bad):
    X, y = _data("binary:logistic")
    full = hb.Dataset(X, label=y)
    full.construct()
    blocks = _blocks(2)

    def body(comm):
        b = blocks[comm.rank]
        ids = np.arange(N)[b]
        if bad == "duplicate" and comm.rank == 1:
            ids = ids.copy()
            ids[0] = 0
        if bad == "out_of_range" and comm.rank == 1:
            ids = ids + 1
        if bad == "some_ranks" and comm.rank == 1:
            ids = None
        try:
            hb.train({"quantized_grad": True},
                     hb.Dataset(X[b], label=y[b], reference=full, row_ids=ids), 1, comm=comm)
        except ValueError as e:
            return str(e)
        return None

    assert all(e is not None and "row_ids" in e for e in run_threads(2, body)), bad


def test_reference_on_some_ranks_only_raises_on_every_rank():
    def dataset_of(rank, X, y, b):
        ref = hb.Dataset(X) if rank == 1 else None
        return hb.Dataset(X[b], label=y[b], reference=ref)

    errors = _train_errors(3, dataset_of)
    assert all(e is not None and "some ranks only" in e for e in errors), errors


@pytest.mark.parametrize("objective,policy", [("binary:logistic", "depthwise"),
                                              ("multi:softmax", "depthwise"),
                                              ("binary:logistic", "oblivious")])
@pytest.mark.parametrize("learner", ["data", "reduce_scatter"])
def test_a_level_is_one_collective(learner, objective, policy):
    """A level's histograms and children's row counts travel in one collective: per round
    the quantisation bounds of every output, per tree the root's histograms, one per level
    below and the last level's counts; "reduce_scatter" adds the records of each searched
    level (depthwise), or an oblivious level's gain table and the chosen split's sums
    (thread ranks share no memory: "data" searches all features on every rank)."""
    X, y = _data(objective)
    k = 3 if objective == "multi:softmax" else 1
    depth, rounds = 3 if k == 1 else 2, 3
    params = {"objective": objective, "num_class": k if k > 1 else 0, "quantized_grad": True,
              "max_depth": depth, "nthread": 1, "tree_learner": learner,
              "min_child_weight": 0, "learning_rate": 0.1, "grow_policy": policy}
    full = hb.Dataset(X, label=y)
    full.construct()
    blocks = _blocks(2)

    def body(comm):
        b = blocks[comm.rank]
        bst = hb.train(params, hb.Dataset(X[b], label=y[b], reference=full), rounds, comm=comm)
        return bst.collective_calls, bst.to_dict()

    for calls, model in run_threads(2, body):
        assert all(len(t.get("value", t.get("leaf_value", []))) == (
            2 ** depth if policy == "oblivious" else 2 ** (depth + 1) - 1)
            for t in model["trees"])
        per_tree = depth + 1 + ((2 * depth if policy == "oblivious" else depth)
                                if learner == "reduce_scatter" else 0)
        assert calls == rounds * (1 + k * per_tree)
