"""Ranking objectives under `comm`: each rank holds whole queries; the model and the NDCG/MAP
history equal one process's on all queries (quantised training), and what is not supported
yet (drawn pairs, query weights) raises on every rank."""

from __future__ import annotations

import numpy as np
import pytest

import histboost as hb
from histboost.collective.testing import run_threads


def _queries(binary: bool, seed: int = 3, n_queries: int = 40):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 16, n_queries)
    n = int(sizes.sum())
    X = np.round(rng.normal(size=(n, 5)) * 4) / 2
    score = X[:, 0] - 0.5 * X[:, 1] + rng.normal(size=n)
    y = (score > 0.5).astype(np.float64) if binary else np.clip(np.round(score), 0, 3)
    return X, y, sizes


def _train(params, world, rounds=4, weights=False):
    X, y, sizes = _queries(params["objective"] == "rank:map")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    full = hb.Dataset(X, label=y, group=sizes)
    full.construct()  # the cuts every rank bins with
    want_log: dict = {}
    want = hb.train(params, full, rounds, evals=[(full, "train")], evals_result=want_log,
                    verbose_eval=False).to_dict()
    # whole queries per rank, uneven
    q_cuts = np.round(np.linspace(0, len(sizes), world + 1) ** 1.1
                      / len(sizes) ** 0.1).astype(int)

    def body(comm):
        qa, qb = q_cuts[comm.rank], q_cuts[comm.rank + 1]
        rows = slice(bounds[qa], bounds[qb])
        w = np.ones(bounds[qb] - bounds[qa]) if weights else None
        d = hb.Dataset(X[rows], label=y[rows], group=sizes[qa:qb], weight=w, reference=full)
        log: dict = {}
        try:
            model = hb.train(params, d, rounds, evals=[(d, "train")], evals_result=log,
                             verbose_eval=False, comm=comm).to_dict()
        except ValueError as e:
            return str(e)
        return model, log

    return (want, want_log), run_threads(world, body)


def _strip(model: dict) -> dict:
    model.pop("histboost_version", None)
    model.get("params", {}).pop("tree_learner", None)
    return model


@pytest.mark.parametrize("objective,learner,world", [
    ("rank:ndcg", "data", 2), ("rank:ndcg", "reduce_scatter", 3),
    ("rank:pairwise", "data", 3), ("rank:map", "data", 2)])
def test_ranking_model_and_metric_equal_one_process(objective, learner, world):
    params = {"objective": objective, "quantized_grad": True, "learning_rate": 0.3,
              "max_depth": 3, "seed": 2, "nthread": 1, "tree_learner": learner,
              "eval_metric": ["ndcg@5", "map@3"]}
    (want, want_log), got = _train(params, world)
    assert len(want["trees"]) == 4 and want_log["train"]["ndcg@5"][0] < 1.0
    for rank, (model, log) in enumerate(got):
        assert _strip(model) == _strip(want), f"rank {rank}: model differs from one process's"
        assert log == want_log, f"rank {rank}: metrics differ"


@pytest.mark.parametrize("extra,weights,needle", [
    ({"lambdarank_pair_method": "mean"}, False, "lambdarank_pair_method='mean'"),
    ({}, True, "weighted ranking")])
def test_unsupported_ranking_raises_on_every_rank(extra, weights, needle):
    params = {"objective": "rank:ndcg", "quantized_grad": True, "nthread": 1, **extra}
    _, got = _train(params, 2, rounds=1, weights=weights)
    assert all(isinstance(e, str) and needle in e for e in got), got
