"""The partition kernels against a NumPy stable partition, for any number of chunks (the
backend cuts a call's rows into about one chunk per thread; chunk counts here go past the
node size, so chunks can be empty or hold only left or only right rows)."""

from __future__ import annotations

import numpy as np
import pytest

from histboost.kernels.cpu import partition


def _reference(rows, column, start, end, threshold_bin, missing_bin, default_left):
    seg = rows[start:end]
    b = column[seg]
    left = np.where(b == missing_bin, default_left == 1, b <= threshold_bin)
    out = rows.copy()
    out[start:end] = np.concatenate([seg[left], seg[~left]])
    return out, int(left.sum())


def _items(bounds, n_chunks):
    """Work items of `partition.partition_nodes`: each node's range in n_chunks chunks."""
    return np.array([(k, s + (e - s) * j // n_chunks, s + (e - s) * (j + 1) // n_chunks)
                     for k, (s, e) in enumerate(bounds) for j in range(n_chunks)],
                    np.int64).reshape(-1, partition.PART_WIDTH)


@pytest.mark.parametrize("n_chunks", [1, 2, 3, 8, 64])
@pytest.mark.parametrize(("start", "end"), [(0, 500), (17, 480), (100, 131), (40, 40)])
@pytest.mark.parametrize("threshold_bin", [-1, 3, 9])
@pytest.mark.parametrize("parallel", [False, True])
def test_chunked_partition_is_a_stable_partition(n_chunks, start, end, threshold_bin,
                                                 parallel):
    rng = np.random.default_rng(n_chunks * 1000 + start)
    column = rng.integers(0, 11, 700).astype(np.uint8)  # bin 10: missing
    columns = np.stack([rng.integers(0, 11, 700).astype(np.uint8), column])
    rows = np.sort(rng.choice(700, 500, replace=False)).astype(np.int32)
    kernel = partition.partition_nodes if parallel else partition.partition_nodes_serial
    for default_left in (0, 1):
        want, want_left = _reference(rows, column, start, end, threshold_bin, 10, default_left)
        got = rows.copy()
        n_left = np.full(1, -1, np.int64)
        kernel(columns, got, np.array([start], np.int64), np.array([1], np.int32),
               np.array([threshold_bin], np.int32), np.array([10, 10], np.int32),
               np.array([default_left], np.uint8), _items([(start, end)], n_chunks), 3,
               np.empty_like(got), n_left)
        assert n_left[0] == want_left
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n_chunks", [1, 3])
@pytest.mark.parametrize("parallel", [False, True])
def test_several_nodes_in_one_call(n_chunks, parallel):
    """Nodes of one call, each on its own feature, threshold and missing side, partition as
    each would alone (adjacent ranges and an empty one included)."""
    rng = np.random.default_rng(n_chunks)
    F = 3
    columns = rng.integers(0, 11, (F, 900)).astype(np.uint8)
    rows = np.sort(rng.choice(900, 600, replace=False)).astype(np.int32)
    bounds = [(0, 250), (250, 251), (251, 251), (300, 600)]
    features = np.array([2, 0, 1, 1], np.int32)
    thresholds = np.array([4, 9, 0, -1], np.int32)
    default_left = np.array([1, 0, 1, 0], np.uint8)
    want = rows.copy()
    want_left = []
    for (s, e), f, t, d in zip(bounds, features, thresholds, default_left, strict=True):
        ref, nl = _reference(want, columns[f], s, e, t, 10, d)
        want[s:e] = ref[s:e]
        want_left.append(nl)
    got = rows.copy()
    n_left = np.full(len(bounds), -1, np.int64)
    kernel = partition.partition_nodes if parallel else partition.partition_nodes_serial
    kernel(columns, got, np.array([b[0] for b in bounds], np.int64), features, thresholds,
           np.full(F, 10, np.int32), default_left, _items(bounds, n_chunks), 2,
           np.empty_like(got), n_left)
    np.testing.assert_array_equal(n_left, want_left)
    np.testing.assert_array_equal(got, want)
