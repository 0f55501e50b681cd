"""`histboost.train(..., comm=...)`: rows split into blocks across 1-3 thread workers give
the model of one process on all rows (quantised training, shared cuts), and the settings
the first version does not support raise ValueError naming them."""

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


def test_differing_cuts_raise_on_every_rank():
    X, y = _data("binary:logistic")
    blocks = _blocks(2)
    params = {"objective": "binary:logistic", "quantized_grad": True}

    def body(comm):
        b = blocks[comm.rank]
        try:  # each rank's own cuts, from its own rows
            hb.train(params, hb.Dataset(X[b], label=y[b]), 2, comm=comm)
        except ValueError as e:
            return str(e)
        return None

    errors = run_threads(2, body)
    assert all(e is not None and "same cuts" in e for e in errors), errors
