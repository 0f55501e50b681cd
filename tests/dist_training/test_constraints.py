"""Monotone and interaction constraints in distributed training: the one-process model."""

from __future__ import annotations

import pytest

import histboost as hb

from .test_training import _data, _strip, _train_ranks


@pytest.mark.parametrize("learner", ["data", "reduce_scatter"])
@pytest.mark.parametrize("extra", [
    {"monotone_constraints": (1, -1, 0, 1), "max_depth": 4},
    {"monotone_constraints": (1, -1), "grow_policy": "lossguide", "max_leaves": 10},
    {"monotone_constraints": (0, -1, 1), "grow_policy": "oblivious", "max_depth": 3},
    {"interaction_constraints": [[0, 1], [2, 3, 4]], "max_depth": 4},
], ids=str)
def test_constrained_model_equals_one_process(extra, learner):
    X, y = _data("reg:squarederror")
    params = {"objective": "reg:squarederror", "quantized_grad": True, "seed": 4,
              "nthread": 1, "tree_learner": learner, **extra}
    full, models = _train_ranks(params, X, y, 2)
    want = _strip(hb.train(params, full, 4, verbose_eval=False).to_dict())
    for rank, got in enumerate(models):
        assert _strip(got) == want, f"rank {rank}: model differs from one process's"
