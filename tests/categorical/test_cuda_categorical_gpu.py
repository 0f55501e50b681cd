"""Categorical features on a real GPU: the device's ordered statistics and combination ids
against the CPU kernels on data large enough for many blocks and skewed categories, and
quantised training equal to the CPU engine for every grow policy, binary and multiclass, with
combinations. Skipped without a CUDA device (run through `bench/gpu_tree_check.sh tests` on a
GPU machine)."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("needs a real GPU", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("numba.cuda")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import pandas as pd  # noqa: E402

import histboost  # noqa: E402
from histboost.categorical.combinations import pack_ids  # noqa: E402
from histboost.kernels.cpu.target_stats import category_totals, ordered_statistics  # noqa: E402
from histboost.kernels.cuda.target_stats import DeviceTargetStats  # noqa: E402

DEV = torch.device("cuda", 0)


def _zipf_ids(rng: np.random.Generator, n: int, m: int) -> np.ndarray:
    """Dense ids in [0, m) with a few huge categories and many small ones."""
    ids = np.minimum(rng.zipf(1.3, n) - 1, m - 1)
    ids[:m] = np.arange(m)
    _, dense = np.unique(ids, return_inverse=True)
    return dense.astype(np.int32).reshape(-1)


@pytest.mark.parametrize("channels", [1, 4])
def test_device_ordered_statistics_equal_cpu(channels):
    rng = np.random.default_rng(channels)
    n, m = 300_000, 5000
    ids = _zipf_ids(rng, n, m)
    order = rng.permutation(n)
    targets = (rng.integers(0, 2, (n, 1)) if channels == 1
               else np.eye(channels)[rng.integers(0, channels, n)]).astype(np.float64)
    stats = DeviceTargetStats(DEV, targets.astype(np.int64))
    ids_d = torch.from_numpy(ids).to(DEV)
    count, sums = stats.ordered(ids_d, m, torch.from_numpy(order).to(DEV))
    want_count, want_sums = ordered_statistics(ids, m, order, targets)
    np.testing.assert_array_equal(count.cpu().numpy(), want_count)
    np.testing.assert_array_equal(sums.cpu().numpy(), want_sums)
    counts, tot, _ = stats.totals(ids_d, m)
    want_counts, want_tot = category_totals(ids, m, targets)
    np.testing.assert_array_equal(counts.cpu().numpy(), want_counts)
    np.testing.assert_array_equal(tot.cpu().numpy(), want_tot)


def test_device_combination_ids_equal_host():
    rng = np.random.default_rng(0)
    n = 300_000
    cols = [_zipf_ids(rng, n, m) for m in (3000, 700, 40)]
    stats = DeviceTargetStats(DEV, np.zeros((n, 1), np.int64))
    got, m = stats.combination_ids([torch.from_numpy(c).to(DEV) for c in cols],
                                   [3000, 700, 40])
    want, m_host = pack_ids(cols, [3000, 700, 40])
    assert m == m_host
    np.testing.assert_array_equal(got.cpu().numpy(), want)


def _frame(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=[f"x{i}" for i in range(4)])
    X["small"] = rng.integers(0, 3, n)
    X["mid"] = rng.choice(np.array([f"m{i}" for i in range(40)], object), n)
    X["big"] = _zipf_ids(rng, n, 3000)
    X["pair"] = rng.integers(0, 25, n)
    X.loc[rng.random(n) < 0.05, "mid"] = None
    mid = X["mid"].fillna("m0").str[1:].astype(int).to_numpy()
    score = (X["x0"].to_numpy() + 0.8 * np.sin(mid) + 0.6 * ((mid + X["pair"].to_numpy()) % 3 == 0)
             + 0.3 * (X["small"].to_numpy() == 1) + 0.3 * rng.normal(size=n))
    return X, score


CATS = ["small", "mid", "big", "pair"]


@pytest.mark.parametrize("params", [
    {"grow_policy": "depthwise", "max_depth": 6, "max_ctr_complexity": 2},
    {"grow_policy": "lossguide", "max_leaves": 31, "max_depth": 0, "max_ctr_complexity": 3,
     "subsample": 0.8},
    {"grow_policy": "oblivious", "max_depth": 6, "max_ctr_complexity": 2},
    {"grow_policy": "depthwise", "max_depth": 5, "objective": "multi:softprob", "num_class": 3,
     "max_ctr_complexity": 2},
    {"grow_policy": "oblivious", "max_depth": 4, "objective": "multi:softprob", "num_class": 3},
    {"grow_policy": "depthwise", "max_depth": 5, "objective": "reg:squarederror",
     "ctr_target_borders": 2, "max_ctr_complexity": 2},
    {"grow_policy": "depthwise", "max_depth": 4, "objective": "reg:squarederror",
     "ctr_target_borders": 0},  # fractional labels: statistics on the host
])
def test_quantised_gpu_categorical_model_equals_cpu(params):
    X, score = _frame(30_000, 1)
    objective = params.get("objective", "binary:logistic")
    if objective.startswith("binary"):
        y = (score > 0.3).astype(np.float64)
    elif objective.startswith("multi"):
        y = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])).astype(np.float64)
    else:
        y = score
    base = {"objective": objective, "quantized_grad": True, "seed": 3, "learning_rate": 0.2,
            **params}
    raw = {}
    for dev in ("cpu", "cuda"):
        d = histboost.Dataset(X, label=y, categorical_features=CATS)
        raw[dev] = histboost.train({**base, "device": dev}, d, 10,
                                   verbose_eval=False).save_raw()
    cpu = raw["cpu"].replace(b'"device":"cpu"', b"")
    assert cpu == raw["cuda"].replace(b'"device":"cuda"', b"")
    if params.get("max_ctr_complexity", 1) > 1:
        assert b'"columns":[1,3]' in cpu or b'"columns":[1,2]' in cpu, "no combination used"


def test_gpu_categorical_training_releases_device_memory():
    X, score = _frame(20_000, 2)
    d = histboost.Dataset(X, label=(score > 0).astype(np.float64), categorical_features=CATS)
    params = {"objective": "binary:logistic", "device": "cuda", "max_ctr_complexity": 2}
    histboost.train(params, d, 3, verbose_eval=False)
    gc.collect()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    histboost.train(params, d, 3, verbose_eval=False)
    torch.cuda.synchronize()
    # no collection: objects the run leaves in reference cycles hold no device memory
    assert torch.cuda.memory_allocated() <= before


def test_gpu_prediction_from_raw_values_equals_cpu():
    """A categorical model (combinations, unseen and missing categories at predict) predicts on
    the GPU from raw values: host frames (strings hashed on the host) and a CUDA tensor of
    integer ids (hashed on the device) give the CPU's extended matrix and margins."""
    from histboost.categorical.predict_cuda import DeviceCategorical

    X, score = _frame(40_000, 4)
    params = {"objective": "binary:logistic", "device": "cuda", "max_ctr_complexity": 3,
              "max_depth": 6, "seed": 1}
    booster = histboost.train(params, histboost.Dataset(X, label=(score > 0.3).astype(float),
                                                        categorical_features=CATS),
                              20, verbose_eval=False)
    assert any(len(t.columns) > 1 for t in booster.categorical.tables)
    test, _ = _frame(100_000, 5)
    test.loc[:99, "big"] = np.arange(10**6, 10**6 + 100, dtype=np.int32)  # unseen ids
    test.loc[100:199, "mid"] = "unseen"
    cpu = booster[:]
    cpu.params["device"] = "cpu"
    want = cpu.predict(test, output_margin=True)
    np.testing.assert_array_equal(booster.predict(test, output_margin=True), want)
    dc = DeviceCategorical(booster.categorical, DEV)
    XT = dc.columns(*dc.split_input(test))
    np.testing.assert_array_equal(XT.t().cpu().numpy(), booster.categorical.matrix(test))
    # device input: every categorical column of integer ids
    ints = X.assign(mid=X["mid"].fillna("m0").str[1:].astype(int))
    booster = histboost.train(params, histboost.Dataset(ints, label=(score > 0.3).astype(float),
                                                        categorical_features=CATS),
                              20, verbose_eval=False)
    raw = test.assign(mid=test["mid"].str[1:].replace("nseen", "-1").fillna("-2").astype(int))
    values = torch.from_numpy(raw.to_numpy(np.float64)).to(DEV)
    values[:50, 6] = float("nan")  # missing ids
    cpu = booster[:]
    cpu.params["device"] = "cpu"
    want = cpu.predict(values.cpu().numpy(), output_margin=True)
    np.testing.assert_array_equal(booster.predict(values, output_margin=True), want)


def test_gpu_workers_with_categorical_features_give_the_one_process_model(tmp_path):
    """Two processes training on the GPU with `comm` (sharing it over Gloo): the distributed
    statistics (owner ranks, `histboost.distributed.categorical`) feed the CUDA backend, with
    combinations added mid-tree (`replace_columns(combine=)`); the quantised model equals the
    one-process CPU model. (Under the simulator the same run takes minutes: GPU only.)"""
    import json
    import subprocess
    import sys
    import time

    from dist_training.test_processes import _finish, _launch, _log

    X, score = _frame(6000, 6)
    frame = X.assign(label=(score > 0.3).astype(int))[["label", *X.columns]]
    frame.to_csv(tmp_path / "train.csv", index=False)
    params = ["objective=binary:logistic", "quantized_grad=true", "max_depth=4", "nthread=1",
              "max_ctr_complexity=2", "seed=3", "n_permutations=2"]
    out = tmp_path / "model.json"
    cmd = [sys.executable, "-m", "histboost", "train", str(tmp_path / "train.csv"),
           "--model-out", str(out), "--num-round", "4", "--timeout", "120", "--categorical",
           ",".join(CATS), "--param", *params, "device=cuda"]
    procs = _launch(2, cmd, tmp_path, gpu=True)
    one = tmp_path / "one.json"
    single = subprocess.run(
        [*cmd[:6], str(one), *cmd[7:-1], "device=cpu"], capture_output=True, text=True,
        timeout=300, env={k: v for k, v in os.environ.items()
                          if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")})
    assert single.returncode == 0, single.stderr[-3000:]
    codes = _finish(procs, time.monotonic() + 300)
    assert codes == [0, 0], [_log(tmp_path, r)[-3000:] for r in range(2)]
    got, want = json.loads(out.read_text()), json.loads(one.read_text())
    assert got["trees"] == want["trees"]
    assert got["learner"]["categorical"] == want["learner"]["categorical"]
    assert any(len(t["columns"]) == 2 for t in want["learner"]["categorical"]["tables"])
