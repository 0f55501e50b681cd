"""The partition kernels against a NumPy stable partition, for any number of chunks (the
backend uses one per 8k rows, up to nthread; chunk counts here go past the node size, so
chunks can be empty or hold only left or only right rows)."""

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


@pytest.mark.parametrize("n_chunks", [1, 2, 3, 8, 64])
@pytest.mark.parametrize(("start", "end"), [(0, 500), (17, 480), (100, 131), (40, 40)])
@pytest.mark.parametrize("threshold_bin", [-1, 3, 9])
def test_chunked_partition_is_a_stable_partition(n_chunks, start, end, threshold_bin):
    rng = np.random.default_rng(n_chunks * 1000 + start)
    column = rng.integers(0, 11, 700).astype(np.uint8)  # bin 10: missing
    rows = np.sort(rng.choice(700, 500, replace=False)).astype(np.int32)
    for default_left in (0, 1):
        want, want_left = _reference(rows, column, start, end, threshold_bin, 10, default_left)
        got = rows.copy()
        n_left = partition.partition_node_chunked(
            column, got, start, end, threshold_bin, 10, default_left, n_chunks,
            np.empty_like(got), np.zeros(n_chunks, np.int64))
        assert n_left == want_left
        np.testing.assert_array_equal(got, want)
        serial = rows.copy()
        assert partition.partition_range(column, serial, start, end, threshold_bin, 10,
                                         default_left != 0, np.empty_like(serial)) == want_left
        np.testing.assert_array_equal(serial, want)
