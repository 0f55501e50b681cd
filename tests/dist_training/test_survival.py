"""survival:aft under `comm`: interval labels split across ranks give one process's model
(quantised) and its metrics (mean metrics summed across ranks: equal up to rounding);
survival:cox (risk sets need all rows) still raises."""

from __future__ import annotations

import numpy as np
import pytest

import histboost as hb
from histboost.collective import SingleCommunicator
from histboost.collective.testing import run_threads

N = 600


def _intervals(seed: int = 0):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(N, 4)) * 4) / 2
    t = np.exp(X[:, 0] * 0.3 + rng.normal(size=N) * 0.3)
    lo, hi = t.copy(), t.copy()
    hi[rng.random(N) < 0.3] = np.inf  # right-censored
    lo[rng.random(N) < 0.1] = 0.0  # left-censored
    return X, lo, hi


@pytest.mark.parametrize("world,learner", [(2, "data"), (3, "reduce_scatter")])
def test_aft_model_and_metrics_equal_one_process(world, learner):
    X, lo, hi = _intervals()
    params = {"objective": "survival:aft", "quantized_grad": True, "max_depth": 3,
              "learning_rate": 0.3, "nthread": 1, "tree_learner": learner,
              "aft_loss_distribution": "logistic",
              "eval_metric": ["aft-nloglik", "interval-regression-accuracy"]}
    full = hb.Dataset(X, label_lower_bound=lo, label_upper_bound=hi)
    full.construct()
    want_log: dict = {}
    want = hb.train(params, full, 4, evals=[(full, "t")], evals_result=want_log,
                    verbose_eval=False).to_dict()
    want.pop("histboost_version")
    want.get("params", {}).pop("tree_learner", None)
    assert len(want["trees"]) == 4

    def body(comm):
        b = np.array_split(np.arange(N), comm.world_size)[comm.rank]
        d = hb.Dataset(X[b], label_lower_bound=lo[b], label_upper_bound=hi[b], reference=full)
        log: dict = {}
        model = hb.train(params, d, 4, evals=[(d, "t")], evals_result=log, verbose_eval=False,
                         comm=comm).to_dict()
        return model, log

    for rank, (model, log) in enumerate(run_threads(world, body)):
        model.pop("histboost_version")
        model.get("params", {}).pop("tree_learner", None)
        assert model == want, f"rank {rank}: model differs from one process's"
        for name, values in want_log["t"].items():
            np.testing.assert_allclose(log["t"][name], values, rtol=1e-12, err_msg=name)


def test_cox_still_raises_under_comm():
    X, lo, _ = _intervals()
    d = hb.Dataset(X, label=lo + 0.1)
    with pytest.raises(ValueError, match="survival:cox"):
        hb.train({"objective": "survival:cox"}, d, 1, comm=SingleCommunicator())
