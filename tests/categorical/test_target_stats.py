"""Ordered target statistics against a brute-force NumPy loop over the permutation."""

from __future__ import annotations

import numpy as np
import pytest

from histboost.categorical.settings import CtrSettings
from histboost.kernels.cpu.target_stats import category_totals, ordered_statistics

PRIORS = ((0.0, 1.0), (0.5, 0.5), (1.0, 0.0), (2.0, 3.0))


def _brute(ids: np.ndarray, order: np.ndarray, y: np.ndarray, settings: CtrSettings
           ) -> np.ndarray:
    """For each row, the rows of its category earlier in `order`, summed by the definition
    of each statistic (float64, one row at a time)."""
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    out = np.empty((ids.size, settings.n_stats))
    for r in range(ids.size):
        before = (ids == ids[r]) & (pos < pos[r])
        cnt = float(before.sum())
        yb = y[before]
        if settings.target == "mean":
            for j, wt in enumerate(np.unique(settings.priors.sum(axis=1))):
                out[r, j] = (float(yb.sum()) + wt * settings.label_mean) / (cnt + wt)
            continue
        if settings.target == "binary":
            chans = [float(yb.sum())]
        elif settings.target == "multiclass":
            chans = [float((yb == k).sum()) for k in range(settings.n_classes)]
        else:
            chans = [float((yb > b).sum()) for b in settings.borders]
        m = len(chans)
        for p, (a, b) in enumerate(settings.priors):
            for j, c in enumerate(chans):
                out[r, p * m + j] = (c + a) / (cnt + a + b)
    return out


def _case(target: str, seed: int = 0, n: int = 400):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 23, n).astype(np.int32)
    ids[:5] = 22  # one category seen often, some seen once
    if target == "binary":
        y, obj, k, borders = rng.integers(0, 2, n).astype(float), "binary:logistic", 1, 0
    elif target == "multiclass":
        y, obj, k, borders = rng.integers(0, 4, n).astype(float), "multi:softprob", 4, 0
    elif target == "borders":
        y, obj, k, borders = rng.normal(size=n), "reg:squarederror", 1, 3
    else:
        y, obj, k, borders = rng.normal(size=n), "reg:squarederror", 1, 0
    settings = CtrSettings.from_labels(obj, k, y, PRIORS, borders)
    assert settings.target == target
    return ids, y, settings, rng.permutation(n)


@pytest.mark.parametrize("target", ["binary", "multiclass", "borders", "mean"])
def test_ordered_statistics_match_brute_force(target):
    ids, y, settings, order = _case(target)
    count, sums = ordered_statistics(ids, 23, order, settings.targets(y))
    got = settings.statistics(count, sums)
    want = _brute(ids, order, y, settings)
    if target == "mean":  # float label sums: the order of additions may differ
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    else:  # integer counts: exact
        np.testing.assert_array_equal(got, want)


def test_first_row_of_a_category_gets_the_prior():
    ids, y, settings, order = _case("binary")
    count, sums = ordered_statistics(ids, 23, order, settings.targets(y))
    stats = settings.statistics(count, sums)
    seen: set[int] = set()
    for r in order:
        if ids[r] not in seen:
            np.testing.assert_array_equal(stats[r], settings.priors[:, 0] / settings.priors.sum(1))
            seen.add(int(ids[r]))


@pytest.mark.parametrize("target", ["binary", "multiclass", "borders"])
def test_own_label_never_used(target):
    """Changing one row's label changes only later rows of its category."""
    ids, y, settings, order = _case(target, seed=3)
    before = settings.statistics(*ordered_statistics(ids, 23, order, settings.targets(y)))
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    r = int(order[order.size // 3])
    y2 = y.copy()
    if target == "binary":
        y2[r] = 1 - y[r]
    elif target == "multiclass":
        y2[r] = (y[r] + 1) % 4
    else:  # across every border
        y2[r] = y[r] + 10 if y[r] < settings.borders[-1] else y[r] - 10
    after = settings.statistics(*ordered_statistics(ids, 23, order, settings.targets(y2)))
    changed = np.flatnonzero(np.any(after != before, axis=1))
    assert r not in changed
    expected = np.flatnonzero((ids == ids[r]) & (pos > pos[r]))
    np.testing.assert_array_equal(changed, expected)


def test_final_tables_count_every_row():
    ids, y, settings, _ = _case("multiclass")
    count, sums = category_totals(ids, 23, settings.targets(y))
    np.testing.assert_array_equal(count, np.bincount(ids, minlength=23))
    for k in range(4):
        np.testing.assert_array_equal(sums[:, k], np.bincount(ids[y == k], minlength=23))
