"""Categorical features on the CUDA backend under NUMBA_ENABLE_CUDASIM=1 (run by
test_cuda_categorical_sim.py in a subprocess: the simulator is chosen when numba.cuda is first
imported). Tiny inputs: the simulator runs every GPU thread as a Python thread."""

from __future__ import annotations

import os
import re
import sys
import warnings

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"
warnings.filterwarnings("ignore", category=RuntimeWarning)
sys.setswitchinterval(5e-4)  # see tests/kernels/_cudasim_backend.py

import pandas as pd  # noqa: E402
import torch  # noqa: E402

import histboost  # noqa: E402
from histboost.categorical.combinations import pack_ids  # noqa: E402
from histboost.kernels.cuda.target_stats import DeviceTargetStats  # noqa: E402
from histboost.testing.simulator import run_checks  # noqa: E402

CPU = torch.device("cpu")


def _brute_force(ids: np.ndarray, order: np.ndarray, targets: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """For each row, the earlier rows of its category in `order` and their target sums."""
    position = np.empty(ids.size, np.int64)
    position[order] = np.arange(ids.size)
    count = np.zeros(ids.size)
    sums = np.zeros(targets.shape)
    for r in range(ids.size):
        before = (ids == ids[r]) & (position < position[r])
        count[r] = before.sum()
        sums[r] = targets[before].sum(axis=0)
    return count, sums


def check_ordered_statistics_match_brute_force() -> None:
    """The device's sort + segmented scans + scatter against a brute-force loop, for 0/1
    targets of one and of three channels; category totals, first rows and the binning of the
    statistics against NumPy."""
    rng = np.random.default_rng(3)
    n = 70
    ids = rng.integers(0, 9, n).astype(np.int32)
    ids[:9] = np.arange(9)  # dense: every id appears
    order = rng.permutation(n).astype(np.int64)
    for targets in (rng.integers(0, 2, (n, 1)), np.eye(3)[rng.integers(0, 3, n)]):
        stats = DeviceTargetStats(CPU, targets.astype(np.int64))
        ids_d = torch.from_numpy(ids)
        count, sums = stats.ordered(ids_d, 9, torch.from_numpy(order))
        want_count, want_sums = _brute_force(ids, order, targets.astype(np.float64))
        np.testing.assert_array_equal(count.numpy(), want_count)
        np.testing.assert_array_equal(sums.numpy(), want_sums)
        counts, tot, first = stats.totals(ids_d, 9)
        np.testing.assert_array_equal(counts.numpy(), np.bincount(ids, minlength=9))
        np.testing.assert_array_equal(tot.numpy(), [targets[ids == g].sum(axis=0)
                                                    for g in range(9)])
        np.testing.assert_array_equal(first.numpy(), [np.flatnonzero(ids == g)[0]
                                                      for g in range(9)])
        chan = np.arange(targets.shape[1], dtype=np.int64)
        add, den = np.full(chan.size, 0.5), np.full(chan.size, 1.0)
        cuts = np.tile(np.array([0.2, 0.4, 0.5, 0.7, np.inf]), (chan.size, 1))
        out = torch.zeros((n, chan.size + 1), dtype=torch.uint8)
        stats.bin_statistics(count, sums, (chan, add, den), cuts, out, 1)
        values = (want_sums + 0.5) / (want_count[:, None] + 1.0)
        want = np.stack([np.searchsorted(cuts[s], values[:, s]) for s in chan], axis=1)
        np.testing.assert_array_equal(out.numpy()[:, 1:], want)
        assert not out.numpy()[:, 0].any()  # other columns untouched


def check_combination_ids_match_host() -> None:
    """The device's packed combination ids are `pack_ids`'s on the host; frequencies binned as
    NumPy's lower bound."""
    rng = np.random.default_rng(4)
    n = 60
    a, b = rng.integers(0, 5, n).astype(np.int32), rng.integers(0, 4, n).astype(np.int32)
    stats = DeviceTargetStats(CPU, rng.integers(0, 2, (n, 1)))
    got, m = stats.combination_ids([torch.from_numpy(a), torch.from_numpy(b)], [5, 4])
    want, m_host = pack_ids([a, b], [5, 4])
    assert m == m_host
    np.testing.assert_array_equal(got.numpy(), want)
    assert stats.combination_ids([torch.from_numpy(a)] * 2, [2**31, 2**31]) is None
    counts = torch.from_numpy(np.bincount(want, minlength=m).astype(np.int64))
    cuts = np.array([0.02, 0.05, 0.08, np.inf])
    out = torch.zeros((n, 2), dtype=torch.uint8)
    stats.bin_frequency(got, counts, cuts, out, 1)
    np.testing.assert_array_equal(out.numpy()[:, 1],
                                  np.searchsorted(cuts, counts.numpy()[want] / n))


def check_replace_columns_mid_tree() -> None:
    """`CUDABackend.replace_columns` mid-tree (host and device bins): the held histograms are
    rebuilt, so histograms after later splits equal those of a backend that had the columns
    from the start."""
    from histboost.kernels.backend import make_backend
    from histboost.tree.split import REC_BIN, REC_FEATURE, REC_WIDTH

    def split(feature: int, bin_: int) -> np.ndarray:
        rec = np.zeros((1, REC_WIDTH))
        rec[0, REC_FEATURE], rec[0, REC_BIN] = feature, bin_
        return rec

    rng = np.random.default_rng(0)
    n = 80
    offsets = np.arange(0, 25, 5, dtype=np.int64)
    bins = rng.integers(0, 5, (n, 4)).astype(np.uint8)
    new = rng.integers(0, 5, (n, 2)).astype(np.uint8)
    pairs = rng.normal(size=(1, n, 2)).astype(np.float32)
    pairs[..., 1] = np.abs(pairs[..., 1])

    def grow(start: np.ndarray, replace) -> np.ndarray:
        be = make_backend("cuda", start.copy(), offsets, n_threads=1, label=None, weight=None,
                          n_outputs=1, count_rows=False)
        be.set_gradients(pairs)
        be.begin_tree(0, None, None, bounds=(4.0, 4.0))
        be.build_histograms([0])
        be.apply_splits([0], [1], [2], split(0, 2))
        be.build_histograms([1])
        be.subtract_histograms([0], [1], [2])
        if replace is not None:
            be.replace_columns(np.array([2, 3]), replace)
        be.apply_splits([2], [3], [4], split(3, 1))
        be.build_histograms([3])
        be.subtract_histograms([2], [3], [4])
        return be.read_histograms([1, 3, 4])

    fresh = bins.copy()
    fresh[:, 2:] = new
    want = grow(fresh, None)
    np.testing.assert_array_equal(grow(bins, new), want)
    np.testing.assert_array_equal(grow(bins, torch.from_numpy(new)), want)
    assert not np.array_equal(grow(bins, None)[:, 10:], want[:, 10:])

    # distributed training (`combine`): only the columns' slots of the held nodes are
    # rebuilt and passed to combine (here: as if a second worker held the same rows); its
    # result replaces them, the other slots are kept
    def held_after_replace(start: np.ndarray, combine) -> np.ndarray:
        be = make_backend("cuda", start.copy(), offsets, n_threads=1, label=None, weight=None,
                          n_outputs=1, count_rows=False)
        be.set_gradients(pairs)
        be.begin_tree(0, None, None, bounds=(4.0, 4.0))
        be.build_histograms([0])
        be.apply_splits([0], [1], [2], split(0, 2))
        be.build_histograms([1])
        be.subtract_histograms([0], [1], [2])
        be.replace_columns(np.array([2, 3]), new, combine=combine)
        return be.read_histograms([1, 2])

    seen = []

    def doubled(hists: np.ndarray) -> np.ndarray:
        seen.append(hists.shape)
        return hists * 2

    got = held_after_replace(bins, doubled)
    fresh_held = held_after_replace(fresh, None)
    assert seen == [(2, 10, 2)], seen  # 2 held nodes, the slots of columns 2 and 3
    np.testing.assert_array_equal(got[:, 10:], 2 * fresh_held[:, 10:])
    np.testing.assert_array_equal(got[:, :10], fresh_held[:, :10])


def _data(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"a": rng.integers(0, 6, n),
                      "b": rng.choice(np.array(list("pqrstu"), object), n),
                      "x": rng.normal(size=n), "c": rng.integers(0, 4, n)})
    y = ((X.a.to_numpy() % 3) + (X.b.to_numpy() == "p") + (X.c.to_numpy() == 1)) % 3
    return X, y.astype(np.float64)


def check_training_matches_cpu() -> None:
    """Quantised training with categorical features (ordered statistics rotating over two
    permutations, combinations) on the simulated GPU grows the CPU engine's model: every grow
    policy, binary and multiclass."""
    X, y3 = _data(64, 0)
    y2 = (y3 == 0).astype(np.float64)
    y2[:6] = 1 - y2[:6]
    # seed 2: every case's CPU model uses a combination (checked below)
    base = {"quantized_grad": True, "max_bin": 8, "nthread": 1, "seed": 2, "max_depth": 3,
            "ctr_priors": [(0.5, 0.5)], "ctr_border_count": 4, "n_permutations": 2,
            "max_ctr_complexity": 2}
    cases = [
        ({"objective": "binary:logistic"}, y2, 2),
        ({"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 5,
          "max_depth": 0}, y2, 1),
        ({"objective": "multi:softprob", "num_class": 3, "grow_policy": "oblivious",
          "max_depth": 2}, y3, 1),
    ]
    for params, y, rounds in cases:
        raw = {}
        for device in ("cpu", "cuda"):
            d = histboost.Dataset(X, label=y, categorical_features=["a", "b", "c"])
            raw[device] = histboost.train({**base, **params, "device": device}, d, rounds,
                                          verbose_eval=False).save_raw()
        cpu = raw["cpu"].replace(b'"device":"cpu"', b"")
        assert cpu == raw["cuda"].replace(b'"device":"cuda"', b""), \
            f"{params}: CPU and simulated-GPU models differ"
        assert re.search(rb'"columns":\[\d+,\d+\]', cpu), f"{params}: no combination used"


def check_prediction_from_raw_values_matches_cpu() -> None:
    """Prediction on the (simulated) device from raw values: the extended matrix built there
    (table lookups with unseen and missing categories, combinations, frequencies, one-hot
    indicators) equals the host's bit for bit, and so do the margins, for binary with
    combinations, multiclass, and regression on the label mean; integer ids given on the
    device are hashed there (NaN: missing), non-integers and string columns raise."""
    from histboost.categorical.predict_cuda import DeviceCategorical

    X, y3 = _data(48, 0)
    X["o"] = np.arange(48) % 2  # two categories: one-hot
    test, _ = _data(12, 1)
    test["o"] = np.arange(12) % 2
    test["a"] = test["a"].astype(float)
    test.loc[:3, "a"] = [99, -7, np.nan, 12]  # unseen and missing ids
    test.loc[4:5, "b"] = ["zz", None]  # unseen and missing strings
    cats = ["a", "b", "c", "o"]
    y2 = (y3 == 0).astype(np.float64)
    base = {"max_depth": 3, "nthread": 1, "learning_rate": 0.5, "n_permutations": 2,
            "max_ctr_complexity": 2, "seed": 2}
    cases = [({"objective": "binary:logistic"}, y2),
             ({"objective": "multi:softprob", "num_class": 3}, y3),
             ({"objective": "reg:squarederror", "ctr_target_borders": 0}, y3 * 0.7)]
    used_combination = False
    for params, y in cases:
        booster = histboost.train({**base, **params},
                                  histboost.Dataset(X, label=y, categorical_features=cats), 3,
                                  verbose_eval=False)
        cat = booster.categorical
        used_combination |= any(len(t.columns) == 2 for t in cat.tables)
        dc = DeviceCategorical(cat, CPU)
        XT = dc.columns(*dc.split_input(test))
        np.testing.assert_array_equal(XT.numpy().T, cat.matrix(test), err_msg=str(params))
        want = booster.predict(test, output_margin=True)
        got = booster._categorical_margin_cuda(test, 0, len(booster.trees), device=CPU)
        np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert used_combination, "no model used a combination"
    try:
        dc.split_input(torch.zeros((3, 5), dtype=torch.float64))
        raise AssertionError("device input for a column of strings did not raise")
    except TypeError as e:
        assert "'b'" in str(e), e
    # device input: integer ids, float (NaN: missing) or int64, hashed on the device
    ints = X.drop(columns=["b"])
    booster = histboost.train({**base, "objective": "binary:logistic"},
                              histboost.Dataset(ints, label=y2,
                                                categorical_features=["a", "c", "o"]),
                              3, verbose_eval=False)
    raw = test.drop(columns=["b"])
    for values in (raw, raw.fillna(5)):
        want = booster.predict(values, output_margin=True)
        tensor = torch.from_numpy(values.to_numpy(np.float64 if values is raw else np.int64))
        got = booster._categorical_margin_cuda(tensor, 0, len(booster.trees), device=CPU)
        np.testing.assert_array_equal(got[:, 0], want)
    bad = torch.from_numpy(raw.to_numpy(np.float64))
    bad[1, 0] = 2.5
    try:
        booster._categorical_margin_cuda(bad, 0, 1, device=CPU)
        raise AssertionError("a non-integer id did not raise")
    except ValueError as e:
        assert "'a'" in str(e), e


def main() -> int:
    checks = [check_ordered_statistics_match_brute_force, check_combination_ids_match_host,
              check_replace_columns_mid_tree, check_training_matches_cpu,
              check_prediction_from_raw_values_matches_cpu]
    return run_checks([(fn.__name__, fn) for fn in checks])


if __name__ == "__main__":
    sys.exit(main())
