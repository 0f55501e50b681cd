"""Categorical features in data-parallel training (`histboost.distributed.categorical`):
rows split across 2-4 thread ranks give the one-process model bit for bit (quantised), with
ordered statistics, frequencies, one-hot columns and combinations, for the three growers and
both tree learners."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import histboost as hb
from histboost.collective.testing import run_threads

N = 500
CATS = ["a", "b", "o"]


def _frame(objective: str, seed: int = 5) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 12, N)
    b = rng.integers(0, 7, N)
    frame = pd.DataFrame({"x0": rng.normal(size=N), "a": a,
                          "b": [f"s{v}" for v in b],  # strings
                          "o": rng.integers(0, 2, N),  # two categories: one-hot
                          "x1": np.round(rng.normal(size=N), 1)})
    frame.loc[rng.random(N) < 0.05, "b"] = None  # missing: a category of its own
    signal = (a % 3 == b % 3).astype(float) + 0.3 * frame["x0"].to_numpy()
    noisy = signal + rng.normal(scale=0.3, size=N)
    if objective == "binary:logistic":
        y = (noisy > 0.5).astype(np.float64)
    elif objective == "multi:softprob":
        y = np.digitize(noisy, [0.2, 0.9]).astype(np.float64)
    else:
        y = np.round(noisy * 4)  # integer labels: exact sums, so one process's intercept
    return frame, y


def _strip(model: dict) -> dict:
    model.pop("histboost_version", None)
    model.get("params", {}).pop("tree_learner", None)
    return model


def _ranks(params: dict, frame: pd.DataFrame, y: np.ndarray, world: int, rounds: int,
           shuffle: bool = False) -> list[dict]:
    rows = np.arange(N)
    if shuffle:  # rows in any order on any rank, named by Dataset(row_ids=)
        rows = np.random.default_rng(world).permutation(N)
    blocks = np.array_split(rows, [N // 5, N // 2, N // 2 + 40][:world - 1])

    def body(comm):
        b = blocks[comm.rank]
        d = hb.Dataset(frame.iloc[b].reset_index(drop=True), label=y[b],
                       categorical_features=CATS, row_ids=b if shuffle else None)
        return _strip(hb.train(params, d, rounds, verbose_eval=False, comm=comm).to_dict())

    return run_threads(world, body)


CASES = [
    ("binary:logistic", "depthwise", "data", 2),
    ("binary:logistic", "lossguide", "reduce_scatter", 3),
    ("binary:logistic", "oblivious", "data", 3),
    ("multi:softprob", "depthwise", "reduce_scatter", 2),
    ("multi:softprob", "oblivious", "data", 3),
    ("multi:softprob", "lossguide", "data", 4),
    ("reg:squarederror", "depthwise", "data", 2),
]


@pytest.mark.parametrize("objective,policy,learner,world", CASES, ids=str)
def test_categorical_model_equals_one_process(objective, policy, learner, world):
    frame, y = _frame(objective)
    params = {"objective": objective, "quantized_grad": True, "max_depth": 3,
              "grow_policy": policy, "max_leaves": 6, "learning_rate": 0.3, "seed": 7,
              "nthread": 1, "tree_learner": learner, "max_ctr_complexity": 2,
              "n_permutations": 2, "min_data_in_leaf": 5}
    if objective == "multi:softprob":
        params["num_class"] = 3
    if objective == "reg:squarederror":
        params["ctr_target_borders"] = 2  # the labels' quantiles, from every rank's labels
    rounds = 3
    want = _strip(hb.train(params, hb.Dataset(frame, label=y, categorical_features=CATS),
                           rounds, verbose_eval=False).to_dict())
    cat = want["learner"]["categorical"]
    assert any(len(t["columns"]) == 2 for t in cat["tables"]), "no combination was used"
    assert any(d["kind"] == "onehot" for d in cat["derived"])
    for rank, got in enumerate(_ranks(params, frame, y, world, rounds)):
        assert got == want, f"rank {rank}: model differs from one process's"


def test_shuffled_rows_and_mean_statistics_equal_one_process():
    """Rows spread over the ranks in random order (Dataset(row_ids=)), regression by the
    label mean (float label sums, added in one process's order)."""
    frame, y = _frame("reg:squarederror")
    y = y / 3.0  # not integers: float sums
    params = {"objective": "reg:squarederror", "quantized_grad": True, "max_depth": 3,
              "seed": 2, "nthread": 1, "max_ctr_complexity": 2, "base_score": 0.5,
              "ctr_target_borders": 0}
    want = _strip(hb.train(params, hb.Dataset(frame, label=y, categorical_features=CATS), 3,
                           verbose_eval=False).to_dict())
    for got in _ranks(params, frame, y, 3, 3, shuffle=True):
        assert got == want


def test_cli_processes_with_categorical_columns(tmp_path):
    """`histboost train --categorical` on two real processes (torch.distributed, shared
    memory): the model rank 0 writes equals the one-process model."""
    pytest.importorskip("torch.distributed")
    import json
    import time

    from .test_processes import REPO, _finish, _launch, _log

    frame, y = _frame("binary:logistic")
    frame.insert(0, "label", y.astype(int))
    path = tmp_path / "train.csv"
    frame.to_csv(path, index=False)
    out = tmp_path / "model.json"
    params = ["objective=binary:logistic", "quantized_grad=true", "max_depth=3", "nthread=1",
              "max_ctr_complexity=2", "seed=3"]
    cmd = [sys.executable, "-m", "histboost", "train", str(path), "--model-out", str(out),
           "--num-round", "3", "--timeout", "60", "--categorical", "a,b,o", "--param", *params]
    procs = _launch(2, cmd, tmp_path)
    one = tmp_path / "one.json"
    single = subprocess.run(cmd[:6] + [str(one)] + cmd[7:], capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items() if k not in (
                                "RANK", "WORLD_SIZE", "LOCAL_RANK")}, timeout=300,
                            cwd=str(REPO))
    assert single.returncode == 0, single.stderr
    codes = _finish(procs, time.monotonic() + 240)
    assert codes == [0, 0], [_log(tmp_path, r) for r in range(2)]
    got, want = json.loads(out.read_text()), json.loads(one.read_text())
    assert got["trees"] == want["trees"] and got["learner"] == want["learner"]
    assert any(len(t["columns"]) == 2 for t in want["learner"]["categorical"]["tables"])


def test_evaluation_sets_split_across_ranks_give_one_process_metrics():
    frame, y = _frame("binary:logistic")
    test, yt = _frame("binary:logistic", seed=6)
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 3,
              "seed": 1, "nthread": 1, "eval_metric": ["logloss", "auc"]}
    want: dict = {}
    hb.train(params, hb.Dataset(frame, label=y, categorical_features=CATS), 3,
             evals=[(hb.Dataset(test, label=yt, categorical_features=CATS), "test")],
             evals_result=want, verbose_eval=False)
    blocks, test_blocks = np.array_split(np.arange(N), 2), np.array_split(np.arange(N), 2)

    def body(comm):
        b, tb = blocks[comm.rank], test_blocks[comm.rank]
        log: dict = {}
        hb.train(params, hb.Dataset(frame.iloc[b], label=y[b], categorical_features=CATS), 3,
                 evals=[(hb.Dataset(test.iloc[tb], label=yt[tb], categorical_features=CATS),
                         "test")], evals_result=log, verbose_eval=False, comm=comm)
        return log

    for log in run_threads(2, body):
        assert log["test"]["auc"] == want["test"]["auc"]
        np.testing.assert_allclose(log["test"]["logloss"], want["test"]["logloss"], rtol=1e-12)


def test_emptied_combination_cache_recomputes_alike_on_every_rank(monkeypatch):
    """A combination cache that fills up is emptied on every rank at the same call (its size
    counts the rows of all ranks), and the combinations come back through the collectives."""
    import histboost.categorical.combinations as combinations

    monkeypatch.setattr(combinations, "_CACHE_BYTES", 20_000)
    frame, y = _frame("binary:logistic")
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 4,
              "seed": 7, "nthread": 1, "max_ctr_complexity": 3, "n_permutations": 3}
    want = _strip(hb.train(params, hb.Dataset(frame, label=y, categorical_features=CATS), 6,
                           verbose_eval=False).to_dict())
    for got in _ranks(params, frame, y, 3, 6):
        assert got == want


def test_permutation_order_breaks_hash_ties_by_global_index(monkeypatch):
    """Permutations sort rows by a hash of their global index, ties (a 64-bit collision)
    by the index, whatever order the rows come in."""
    from histboost.distributed import categorical as dc

    ids = np.array([7, 3, 9, 1, 4], np.int64)
    monkeypatch.setattr(dc, "row_hash", lambda seed, r: np.asarray(r) % 3)  # ties
    np.testing.assert_array_equal(ids[dc.permutation_order(0, ids)], [3, 9, 1, 4, 7])
    monkeypatch.undo()
    keys = dc.row_hash(5, ids)
    np.testing.assert_array_equal(dc.permutation_order(5, ids), np.argsort(keys))
