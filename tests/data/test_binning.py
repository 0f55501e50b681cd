"""Quantile binning: cut points per feature (weighted), at most `max_bin` slots, NaN in the
missing slot, and a bin rule equal to the raw threshold rule for every value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from histboost.data.binning import (
    BinMapper,
    compute_bin_mapper,
    feature_cuts,
    row_hash,
    sample_row_ids,
)

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)


@st.composite
def columns(draw):
    """A column with ties, NaN, extreme values or runs of adjacent floats, optional weights."""
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(1, 300))
    kind = draw(st.sampled_from(["normal", "few", "ties", "adjacent", "extreme", "nan"]))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    rng = np.random.default_rng(seed)
    if kind == "normal":
        x = rng.normal(size=n)
    elif kind == "few":
        x = rng.integers(0, 5, n).astype(float)
    elif kind == "ties":
        x = np.round(rng.exponential(size=n), 1)
    elif kind == "adjacent":  # consecutive representable numbers: midpoints round onto them
        base = dtype(1.0)
        x = np.array([base], dtype)
        for _ in range(int(rng.integers(1, 40))):
            x = np.append(x, np.nextafter(x[-1], dtype(2.0)))
        x = rng.choice(x, n).astype(np.float64)
    elif kind == "extreme":
        # huge, tiny and signed-zero values (infinities: see the xfail test below)
        info = np.finfo(dtype)
        big, tiny = float(info.max) / 4, float(info.smallest_subnormal)
        x = rng.choice([-big, big, 1e-30, 0.0, -0.0, tiny, 1.0], n)
    else:
        x = rng.normal(size=n)
        x[rng.random(n) < 0.7] = np.nan
    x = x.astype(dtype)
    weighted = draw(st.booleans())
    w = rng.exponential(size=n) if weighted else None
    max_bin = draw(st.sampled_from([2, 3, 5, 16, 64]))
    return x, w, max_bin


@SETTINGS
@given(col=columns())
def test_bins_follow_cut_points(col):
    x, w, max_bin = col
    m = compute_bin_mapper(x[:, None], w, max_bin)
    cuts = m.feature_cuts(0)
    k = cuts.size
    # at most max_bin slots (value bins + the missing slot); increasing bounds ending at +inf
    assert 1 <= k <= max_bin - 1 and m.n_bins[0] == k + 1 <= max_bin
    assert cuts[-1] == np.inf and np.all(np.diff(cuts) > 0)
    bins = m.transform(x[:, None])[:, 0].astype(np.int64)
    nan = np.isnan(x)
    # NaN to the missing slot, nothing else there
    assert np.all(bins[nan] == k) and np.all(bins[~nan] < k)
    # a value's bin is the first bound >= the value (an independent searchsorted)
    xv = x[~nan].astype(np.float64)
    np.testing.assert_array_equal(bins[~nan], np.searchsorted(cuts, xv, side="left"))
    # the bin rule "bin <= b" equals the raw rule "x <= cuts[b]" for every value and bound
    for b in range(k):
        np.testing.assert_array_equal(bins[~nan] <= b, xv <= cuts[b])
    distinct = np.unique(xv)
    if distinct.size:
        # every value bin holds at least one training value; only the last (+inf) bin may be
        # empty, when the top midpoint rounds onto the largest value
        used = set(np.unique(bins[~nan]).tolist())
        assert used == set(range(k)) or (used == set(range(k - 1))
                                          and cuts[-2] == distinct[-1])
    if 0 < distinct.size <= max_bin - 1:
        # few distinct values: each has a bin of its own (or shares one only where their
        # midpoint rounds onto a value, i.e. they are adjacent floats)
        same = np.unique(bins[~nan]).size
        assert same == distinct.size or distinct.size - same <= np.sum(
            np.diff(distinct) <= np.spacing(distinct[:-1]) * 2)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(50, 2000),
       max_bin=st.sampled_from([4, 17, 64, 256]), weighted=st.booleans())
def test_quantile_bins_balance_weight(seed, n, max_bin, weighted):
    """With more distinct values than value bins, each bin holds at most one quantile step of
    the (weighted) mass plus the heaviest single value."""
    rng = np.random.default_rng(seed)
    x = np.round(rng.standard_t(3, size=n), 2)
    w = rng.exponential(size=n) if weighted else np.ones(n)
    m = compute_bin_mapper(x[:, None], w if weighted else None, max_bin)
    B = max_bin - 1
    bins = m.transform(x[:, None])[:, 0]
    per_bin = np.bincount(bins, weights=w)
    distinct, inv = np.unique(x, return_inverse=True)
    heaviest = np.bincount(inv, weights=w).max()
    assert per_bin.max() <= w.sum() / B + heaviest + 1e-9
    if distinct.size > B:
        assert m.n_value_bins[0] >= min(B, distinct.size) // 2


@pytest.mark.parametrize("values", [[1.0, np.inf], [-1e308, 1e308], [-np.inf, 0.0, 1.0]])
def test_infinite_and_huge_values_get_their_own_bins(values):
    x = np.array(values * 3)[:, None]
    m = compute_bin_mapper(x, None, 256)
    cuts = m.feature_cuts(0)
    assert not np.any(np.isnan(cuts)) and np.all(np.diff(cuts) > 0)
    bins = m.transform(x)[:, 0]
    assert np.unique(bins).size == len(values)


def test_weights_move_the_cuts():
    x = np.arange(1000.0)
    w = np.where(x >= 500, 10.0, 1.0)
    plain = compute_bin_mapper(x[:, None], None, 33).feature_cuts(0)
    heavy = compute_bin_mapper(x[:, None], w, 33).feature_cuts(0)
    assert np.sum(plain[:-1] > 500) == pytest.approx(16, abs=1)
    assert np.sum(heavy[:-1] > 500) >= 27  # ~10/11 of the 32 bins


def test_zero_weight_rows_do_not_move_cuts():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(500, 2))
    w = rng.exponential(size=500)
    w[:150] = 0.0
    x[:20, 0] = 1e9  # outliers of weight 0
    both = compute_bin_mapper(x, w, 16)
    kept = compute_bin_mapper(x[150:], w[150:], 16)
    np.testing.assert_array_equal(both.cut_values, kept.cut_values)
    np.testing.assert_array_equal(both.cut_ptr, kept.cut_ptr)


def test_few_distinct_values_cut_at_midpoints():
    x = np.array([4.0, 1.0, 2.0, 2.0, np.nan, 1.0])
    m = compute_bin_mapper(x[:, None], None, 256)
    np.testing.assert_array_equal(m.feature_cuts(0), [1.5, 3.0, np.inf])
    np.testing.assert_array_equal(m.transform(x[:, None])[:, 0], [2, 0, 1, 1, 3, 0])


@pytest.mark.parametrize("x", [np.full(10, 7.0), np.full(10, np.nan)])
def test_constant_and_all_nan_columns(x):
    m = compute_bin_mapper(x[:, None], None, 16)
    np.testing.assert_array_equal(m.feature_cuts(0), [np.inf])
    assert m.n_bins[0] == 2
    want = 1 if np.isnan(x[0]) else 0
    assert np.all(m.transform(x[:, None]) == want)


def test_unseen_values_at_predict_go_to_end_bins():
    m = compute_bin_mapper(np.arange(10.0)[:, None], None, 256)
    out = m.transform(np.array([[-1e9], [1e9], [np.inf], [-np.inf], [np.nan]]))[:, 0]
    np.testing.assert_array_equal(out, [0, 9, 9, 0, 10])


@pytest.mark.parametrize("max_bin,dtype", [(255, np.uint8), (256, np.uint8), (257, np.uint16),
                                           (1000, np.uint16)])
def test_bin_dtype(max_bin, dtype):
    x = np.random.default_rng(0).normal(size=(5000, 2))
    x[::7, 1] = np.nan
    m = compute_bin_mapper(x, None, max_bin)
    bins = m.transform(x)
    assert bins.dtype == dtype == m.bin_dtype
    assert int(m.n_bins.max()) == max_bin
    assert int(bins.max()) == max_bin - 1  # the missing slot of the NaN column
    for f in range(2):
        ok = ~np.isnan(x[:, f])
        np.testing.assert_array_equal(bins[ok, f], np.searchsorted(m.feature_cuts(f), x[ok, f]))


def test_few_distinct_values_stay_uint8_with_large_max_bin():
    x = np.random.default_rng(0).integers(0, 100, (500, 3)).astype(float)
    m = compute_bin_mapper(x, None, 4096)
    assert m.bin_dtype == np.uint8 and m.transform(x).dtype == np.uint8


def test_sampled_rows_for_cuts():
    x = np.random.default_rng(1).normal(size=(3000, 2))
    m = compute_bin_mapper(x, None, 32, sample_rows=500)
    m2 = compute_bin_mapper(x, None, 32, sample_rows=500)
    np.testing.assert_array_equal(m.cut_values, m2.cut_values)  # fixed seed
    assert np.all(m.n_bins <= 32)
    bins = m.transform(x)
    for f in range(2):
        np.testing.assert_array_equal(bins[:, f], np.searchsorted(m.feature_cuts(f), x[:, f]))


def test_row_hash_is_splitmix64():
    """Seed 0: the reference outputs of splitmix64 started at state 0, one per row."""
    want = np.array([0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F,
                     0xF88BB8A8724C81EC], np.uint64)
    np.testing.assert_array_equal(row_hash(0, np.arange(4)), want)
    np.testing.assert_array_equal(row_hash(2**64, np.arange(4)), want)  # seed mod 2**64
    assert not np.any(row_hash(1, np.arange(4)) == want)


def test_cut_sample_does_not_depend_on_blocks():
    """A row is sampled by its hash and global index only: any split into blocks finds the
    same rows; about sample_rows of them; every row when n <= sample_rows."""
    n, s = 50_000, 3000
    whole = sample_row_ids(0, n, n, s, seed=1)
    assert abs(whole.size - s) < 4 * np.sqrt(s) and np.all(np.diff(whole) > 0)
    np.testing.assert_array_equal(
        whole, np.flatnonzero(row_hash(1, np.arange(n)) < np.uint64((s << 64) // n)))
    for edges in ([0, 1, 17, 20_000, n], [0, 25_000, n], [0, n]):
        parts = [sample_row_ids(a, b - a, n, s, seed=1) + a
                 for a, b in zip(edges[:-1], edges[1:], strict=True)]
        np.testing.assert_array_equal(np.concatenate(parts), whole)
    assert not np.array_equal(sample_row_ids(0, n, n, s, seed=2), whole)
    np.testing.assert_array_equal(sample_row_ids(0, 100, 100, 100), np.arange(100))
    assert sample_row_ids(7, 0, 100_000, 10).size == 0


@pytest.mark.parametrize("weighted", [False, True])
def test_sampled_cuts_are_the_cuts_of_the_sample(weighted):
    """With n > sample_rows the cuts are those of the hashed rows, their weights with them and
    rows of weight 0 left out."""
    rng = np.random.default_rng(5)
    n = 4000
    x = rng.normal(size=(n, 3))
    x[rng.random(x.shape) < 0.1] = np.nan
    w = rng.exponential(size=n) if weighted else None
    if weighted:
        w[rng.random(n) < 0.2] = 0.0
    rows = sample_row_ids(0, n, n, 600, seed=5)
    got = compute_bin_mapper(x, w, 16, sample_rows=600, seed=5)
    want = compute_bin_mapper(x[rows], None if w is None else w[rows], 16, sample_rows=n)
    np.testing.assert_array_equal(got.cut_values, want.cut_values)
    np.testing.assert_array_equal(got.cut_ptr, want.cut_ptr)


def test_weights_move_the_sampled_cuts():
    x = np.arange(100_000.0)
    w = np.where(x >= 50_000, 10.0, 1.0)
    heavy = compute_bin_mapper(x[:, None], w, 33, sample_rows=5000).feature_cuts(0)
    assert np.sum(heavy[:-1] > 50_000) >= 27  # ~10/11 of the 32 bins


def test_mapper_from_its_arrays_and_errors():
    x = np.random.default_rng(2).normal(size=(100, 3))
    m = compute_bin_mapper(x, None, 8)
    m2 = BinMapper(m.cut_values.copy(), m.cut_ptr.copy(), m.max_bin)
    np.testing.assert_array_equal(m2.transform(x), m.transform(x))
    np.testing.assert_array_equal(m.bin_offsets, np.r_[0, np.cumsum(m.n_bins)])
    with pytest.raises(ValueError, match="features"):
        m.transform(x[:, :2])
    with pytest.raises(ValueError, match="max_bin"):
        compute_bin_mapper(x, None, 1)
    with pytest.raises(ValueError, match="sample_rows"):
        compute_bin_mapper(x, None, 8, sample_rows=0)


def test_feature_cuts_limits():
    vals = np.arange(100.0)
    assert feature_cuts(vals, None, 10).size <= 10
    assert feature_cuts(np.zeros(0), None, 10).tolist() == [np.inf]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("max_bin", [17, 1000])
def test_numpy_and_kernel_binning_agree(dtype, max_bin):
    """Small matrices are binned by NumPy, large ones by the `bin_matrix` kernel: the same
    bins for ordinary values, exact cut values, their neighbours, +-inf and NaN."""
    from histboost.kernels.cpu import binning as kb

    rng = np.random.default_rng(3)
    X = rng.standard_normal((3000, 4)).astype(dtype)
    X[:, 1] = np.round(X[:, 1], 1)
    m = compute_bin_mapper(X, None, max_bin)
    cuts = m.feature_cuts(0)[:-1]
    X[:cuts.size, 0] = cuts  # exact bounds and the floats right above them
    X[cuts.size:2 * cuts.size, 0] = np.nextafter(cuts.astype(dtype), dtype(np.inf))
    X[::7, 2] = np.nan
    X[1::11, 3] = np.inf
    X[2::13, 3] = -np.inf
    want = np.empty(X.shape, m.bin_dtype)
    kb.bin_matrix(X, m.cut_values, m.cut_ptr, want)
    got = np.empty(X.shape, m.bin_dtype)
    assert X.size <= kb._NUMPY_MAX_VALUES
    kb.bin_dense(X, m.cut_values, m.cut_ptr, got)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(m.transform(X), want)
