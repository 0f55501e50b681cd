"""Host side of the CUDA kernels' node tables (`histboost.kernels.cuda._common.node_table`)
and partition chunking, without a GPU: the blocks of a launch map onto the nodes' chunks."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")

from histboost.kernels.cuda import _common as common  # noqa: E402
from histboost.kernels.cuda.partition import (  # noqa: E402
    MAX_NODE_CHUNKS,
    partition_chunk_rows,
)


def _block_spans(table: np.ndarray, n_chunks: int) -> list[tuple[int, int, int]]:
    """(node, start, end) of every block, by the kernels' search (`chunk_node`) run on the
    host."""
    spans = []
    for c in range(n_chunks):
        j = int(np.searchsorted(table[:, common.T_FIRST], c, side="right")) - 1
        s = table[j, common.T_START] + (c - table[j, common.T_FIRST]) * table[j, common.T_CHUNK]
        spans.append((j, int(s), int(min(s + table[j, common.T_CHUNK], table[j, common.T_END]))))
    return spans


def test_blocks_cover_every_row_of_every_node_once():
    bounds = [(0, 5), (5, 5), (5, 5 + 3 * 7 + 1), (30, 30), (40, 47)]
    table, n_chunks = common.node_table(bounds, [0, 1, 1, 0, 1], 7, [(9, 8, 7)] * 5)
    assert table.shape == (5, common.TABLE_WIDTH) and table.dtype == np.int64
    assert n_chunks == 1 + 0 + 4 + 0 + 1
    assert table[:, common.T_SIDE].tolist() == [0, 1, 1, 0, 1]
    assert table[:, 5:].tolist() == [[9, 8, 7]] * 5
    covered = {j: [] for j in range(5)}
    for j, s, e in _block_spans(table, n_chunks):
        assert s < e, "no block without rows"
        covered[j] += range(s, e)
    for j, (s, e) in enumerate(bounds):
        assert covered[j] == list(range(s, e)), j


def test_chunk_rows_from_node_size():
    table, n_chunks = common.node_table([(0, 10), (10, 40)], [0, 0], lambda n: n // 2)
    assert table[:, common.T_CHUNK].tolist() == [5, 15] and n_chunks == 4
    assert common.node_table([], [], 4)[1] == 0


def test_partition_chunks_bound_the_chunks_of_a_node():
    for n in (0, 1, common.CHUNK_ROWS, MAX_NODE_CHUNKS * common.CHUNK_ROWS + 1, 10_000_019):
        rows = partition_chunk_rows(n)
        assert rows >= common.CHUNK_ROWS and rows % common.THREADS == 0
        assert -(-n // rows) <= MAX_NODE_CHUNKS


@pytest.mark.parametrize("extra", [None, 1, 3])
def test_numpy_node_table_equals_python_one(monkeypatch, extra):
    """Many nodes (a tree's leaves) take the NumPy path: the same table as node by node."""
    rng = np.random.default_rng(1)
    k = common.VECTOR_NODES + 5
    rows = rng.integers(0, 50, k)
    rows[[0, 7]] = 0  # nodes without rows own no chunk
    starts = np.concatenate([[0], np.cumsum(rows)[:-1]])
    bounds = [(int(s), int(s + r)) for s, r in zip(starts, rows, strict=True)]
    sides = rng.integers(0, 2, k).tolist()
    cols = None if extra is None else [tuple(range(j, j + extra)) for j in range(k)]
    table, n_chunks = common.node_table(bounds, sides, 16, cols)
    monkeypatch.setattr(common, "VECTOR_NODES", k + 1)
    want, want_chunks = common.node_table(bounds, sides, 16, cols)
    assert n_chunks == want_chunks == int((-(-rows // 16)).sum())
    np.testing.assert_array_equal(table, want)


def test_binned_rows_padded_to_whole_sectors():
    """Rows of the binned matrix do not straddle 32-byte sectors where padding adds at most
    a third: every padded row starting at a multiple of its length lies in one sector or
    covers whole sectors, checked by brute force over the first rows."""
    from histboost.kernels.cuda.backend import sector_row_bytes

    for row_bytes in range(4, 257, 4):
        padded = sector_row_bytes(row_bytes)
        assert padded >= row_bytes and padded % 4 == 0
        straddles = any((r * padded) // 32 != (r * padded + min(padded, 32) - 1) // 32
                        for r in range(64))
        if 3 * padded <= 4 * row_bytes and padded != row_bytes:
            assert not straddles, row_bytes
        if padded == row_bytes and straddles:  # left unpadded: padding would add over a third
            aligned = next(v for v in range(row_bytes, 4 * row_bytes + 32, 4)
                           if v % 32 == 0 or 32 % v == 0)
            assert 3 * aligned > 4 * row_bytes, row_bytes
    assert [sector_row_bytes(b) for b in (4, 12, 28, 40, 60, 100)] == [4, 16, 32, 40, 64, 128]
