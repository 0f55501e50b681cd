"""`histboost.train(..., comm=...)`: rows split into blocks across 1-3 thread workers give
the model of one process on all rows (quantised training, with shared reference cuts or the
global cuts of all ranks' rows), and the settings the first version does not support raise
ValueError naming them."""

from __future__ import annotations

import numpy as np
import pytest

import histboost as hb
from histboost.collective import SingleCommunicator
from histboost.collective.testing import run_threads

N = 700


def _data(objective: str):
    rng = np.random.default_rng(11)
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
    ("binary:logistic", {"max_depth": 3}),
    ("binary:logistic", {"grow_policy": "lossguide", "max_leaves": 8, "min_data_in_leaf": 25}),
    ("reg:squarederror", {"grow_policy": "oblivious", "max_depth": 3}),
    ("multi:softmax", {"num_class": 3, "max_depth": 3, "colsample_bytree": 0.8}),
]


@pytest.mark.parametrize("objective,extra", CASES, ids=lambda c: str(c))
@pytest.mark.parametrize("world", [2, 3])
def test_model_equals_one_process(world, objective, extra):
    X, y = _data(objective)
    params = {"objective": objective, "quantized_grad": True, "learning_rate": 0.3,
              "seed": 4, "nthread": 1, **extra}
    full, models = _train_ranks(params, X, y, world)
    want = hb.train(params, full, 4, verbose_eval=False).to_dict()
    assert len(want["trees"]) == 4 * (3 if objective == "multi:softmax" else 1)
    assert any(len(t.get("value", t.get("leaf_value", []))) > 2 for t in want["trees"])
    for rank, got in enumerate(models):
        got.pop("histboost_version"), want.pop("histboost_version", None)
        assert got == want, f"rank {rank}: model differs from one process's"


def test_single_communicator_is_one_process():
    X, y = _data("binary:logistic")
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 3}
    d = hb.Dataset(X, label=y)
    got = hb.train(params, d, 3, comm=SingleCommunicator()).to_dict()
    assert got == hb.train(params, d, 3).to_dict()


@pytest.mark.parametrize("extra,kw,match", [
    ({"quantized_grad": False}, {}, "float histograms"),
    ({"subsample": 0.5}, {}, "subsampling"),
    ({}, {"early_stopping_rounds": 2}, "early stopping"),
])
def test_unsupported_settings_raise(extra, kw, match):
    X, y = _data("binary:logistic")
    params = {"objective": "binary:logistic", "quantized_grad": True, **extra}
    with pytest.raises(ValueError, match=match):
        _train_ranks(params, X, y, 2, **kw)


def test_evals_raise():
    X, y = _data("binary:logistic")
    d = hb.Dataset(X, label=y)
    with pytest.raises(ValueError, match="evaluation sets"):
        hb.train({"quantized_grad": True}, d, 2, evals=[(d, "train")],
                 comm=SingleCommunicator())


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


def test_reference_on_some_ranks_only_raises_on_every_rank():
    def dataset_of(rank, X, y, b):
        ref = hb.Dataset(X) if rank == 1 else None
        return hb.Dataset(X[b], label=y[b], reference=ref)

    errors = _train_errors(3, dataset_of)
    assert all(e is not None and "some ranks only" in e for e in errors), errors
