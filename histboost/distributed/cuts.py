"""Global cut points for data-parallel training: every rank ends with the `BinMapper` that
`compute_bin_mapper` computes in one process on all rows, bit for bit, whatever the number of
ranks and however the rows are split into blocks.

The rule (`histboost.data.binning.compute_bin_mapper`, the one-rank case): the cut sample is
the rows whose hash of (seed, global row index) falls below a threshold, about `sample_rows`
rows (all rows when there are at most that many); sampled rows of weight 0 are dropped; each
feature's cuts are `feature_cuts` of its sampled non-missing values and weights in global row
order. A row's membership depends on its global index and the total row count only, so each
rank finds its part of the sample alone, from its first global row.

Communication, all through `Communicator.allgather` (the metadata check on, since lengths
differ between ranks):

1. one int64 row per rank: row count, feature count, weights or not, value dtype, max_bin,
   sample_rows, seed (ValueError on every rank where the settings differ);
2. with weights on any rank, the sampled rows' weights (float64, 8 bytes a sampled row; a rank
   without weights sends ones, which give the same cuts as no weights);
3. features are split into ``world_size`` contiguous blocks (`np.array_split`), block r owned by
   rank r. For each block in turn, one allgather of every rank's sampled values of the block's
   features: the rank order is the global row order, so the owner receives exactly the
   one-process sample of its features, computes their cuts and the other ranks drop the block.
   Memory per rank: its own sampled rows of one block plus one block of the whole sample
   (sample x F / world values), never sample x F. The price is traffic: the communicator has
   no all-to-all or point-to-point call, so every rank receives every block (sample x F values
   in all, as one allgather of the whole sample would) where an all-to-all would move
   sample x F / world;
4. the owners' cuts: one allgather of the cut counts per feature, one of the cut values.

Sparse input (a `SparseMatrix`, `histboost.data.sparse`): the same sample rule; every rank
allgathers the sampled rows' stored entries (their counts, column indices and values, 4 + 8
bytes per stored value, or 4 + 4 for float32) and their weights, orders them by global row,
and computes every column's cuts with `histboost.data.sparse.sample_bin_mapper`, the step one
process runs on its sample: the cuts of one process, from the stored values and the implicit
zeros (or missing values) of the whole sample. Every rank receives the whole sample's stored
values (a 200,000-row sample of 25 values a row: 60 MB) and computes all cuts; the sample of
wide sparse data is small against its dense equivalent, which is never formed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..data.binning import (
    DEFAULT_SAMPLE_ROWS,
    BinMapper,
    check_sampling,
    columns_cuts,
    row_hash,
    sample_row_ids,
)
from ..data.sparse import SparseMatrix, sample_bin_mapper

if TYPE_CHECKING:
    from ..collective.base import Communicator

# the settings row of step 1
_ROWS, _FEATURES, _WEIGHTED, _ITEMSIZE, _MAX_BIN, _SAMPLE_ROWS, _SEED, _KIND = range(8)
# _KIND: what the rows are (a rank's block must be of the kind of the others')
_KINDS = ("dense", "sparse with unstored='zero'", "sparse with unstored='nan'")


def _settings_row(X: np.ndarray | SparseMatrix, weight: np.ndarray | None, max_bin: int,
                  sample_rows: int, seed: int) -> np.ndarray:
    seed64 = (int(seed) & ((1 << 64) - 1)) - (1 << 63)  # seed mod 2**64, as an int64
    kind = 0 if not isinstance(X, SparseMatrix) else 1 + int(X.unstored == "nan")
    return np.array([[X.shape[0], X.shape[1], weight is not None, X.dtype.itemsize, max_bin,
                      sample_rows, seed64, kind]], np.int64)


def _check_agreement(table: np.ndarray) -> None:
    """Raise ValueError (on every rank: they all hold the same table) where the ranks' feature
    counts or binning settings differ."""
    if np.any(table[:, _KIND] != table[0, _KIND]):
        kinds = [_KINDS[int(k)] for k in table[:, _KIND]]
        raise ValueError(f"global cuts: the ranks' data differ in kind ({kinds} in rank "
                         "order): every rank's Dataset must be dense, or sparse with the same "
                         "unstored rule")
    for col, what in ((_FEATURES, "feature counts"), (_MAX_BIN, "max_bin"),
                      (_SAMPLE_ROWS, "sample_rows"), (_SEED, "seeds")):
        if np.any(table[:, col] != table[0, col]):
            values = [int(v) + ((1 << 63) if col == _SEED else 0) for v in table[:, col]]
            raise ValueError(f"global cuts: the ranks' {what} differ ({values} in rank order)")


def global_bin_mapper(comm: Communicator, X: np.ndarray, weight: np.ndarray | None,
                      max_bin: int, *, sample_rows: int = DEFAULT_SAMPLE_ROWS, seed: int = 0,
                      n_threads: int = 0, row_ids: np.ndarray | None = None) -> BinMapper:
    """The cuts of all ranks' rows: `compute_bin_mapper` of the ranks' blocks concatenated in
    rank order, the same `BinMapper` on every rank (a collective call: every rank makes it).

    X: this rank's rows (n, F) float (float32 or float64), or a `SparseMatrix` (the cuts of
    `sparse_bin_mapper` of all rows, below); weight: (n,) non-negative or None;
    max_bin, sample_rows, seed: as `compute_bin_mapper`, equal on every rank; n_threads: threads
    for the features this rank owns (0: all cores). See the module docstring for the exchange.
    row_ids: int64 (n,) global index of each row when the ranks' rows are not blocks in rank
    order (`Dataset(row_ids=...)`, given on every rank): rows are sampled by the hash of
    these indices and each owner orders the sample by them, so the cuts are again those of
    one process on all rows in global order.
    """
    rank, world = comm.rank, comm.world_size
    table = np.asarray(comm.allgather(_settings_row(X, weight, max_bin, sample_rows, seed),
                                      check_metadata=True), np.int64).reshape(world, -1)
    _check_agreement(table)
    check_sampling(max_bin, sample_rows)  # after the exchange: every rank raises alike
    sizes = table[:, _ROWS]
    n, F = X.shape
    first, n_total = int(sizes[:rank].sum()), int(sizes.sum())
    weighted = bool(table[:, _WEIGHTED].any())
    dtype = np.float64 if int(table[:, _ITEMSIZE].max()) > 4 else np.float32

    # 1: this rank's part of the sample, without the rows of weight 0
    if row_ids is None:
        rows = sample_row_ids(first, n, n_total, sample_rows, seed)
    elif n_total <= sample_rows:
        rows = np.arange(n, dtype=np.int64)
    else:
        threshold = np.uint64((int(sample_rows) << 64) // int(n_total))
        rows = np.flatnonzero(row_hash(seed, row_ids) < threshold).astype(np.int64)
    local_ws = None
    if weighted:
        local_ws = (np.ones(rows.size) if weight is None
                    else np.asarray(weight, np.float64)[rows])
    if isinstance(X, SparseMatrix):
        return _sparse_cuts(comm, X, rows, local_ws, row_ids, dtype, max_bin)
    if weighted:
        keep = local_ws > 0
        if not keep.all():
            rows, local_ws = rows[keep], local_ws[keep]
    order = None  # the sample's order among the gathered rows: global row order
    if row_ids is not None:
        ids = np.asarray(comm.allgather(np.asarray(row_ids, np.int64)[rows],
                                        check_metadata=True), np.int64)
        order = np.argsort(ids, kind="stable")
    ws = None
    if weighted:
        ws = np.asarray(comm.allgather(local_ws, check_metadata=True), np.float64)
        if order is not None:
            ws = ws[order]

    # 2: each block of features to its owner, in global row order
    blocks = np.array_split(np.arange(F), world)
    mine = np.zeros((0, 0), dtype)
    for owner, cols in enumerate(blocks):
        if cols.size == 0:  # more ranks than features: every rank skips the same blocks
            continue
        part = X[:, cols] if rows.size == n else X[np.ix_(rows, cols)]
        got = comm.allgather(np.ascontiguousarray(part, dtype), check_metadata=True)
        if owner == rank:
            mine = np.asarray(got) if order is None else np.asarray(got)[order]
        del got, part

    # 3: the owner's cuts, gathered in feature order
    cuts = columns_cuts(mine, ws, max_bin, n_threads) if blocks[rank].size else []
    counts = np.array([c.size for c in cuts], np.int64)
    values = np.concatenate(cuts) if cuts else np.zeros(0)
    counts = np.asarray(comm.allgather(counts, check_metadata=True), np.int64)
    values = np.asarray(comm.allgather(values.astype(np.float64), check_metadata=True),
                        np.float64)
    cut_ptr = np.zeros(F + 1, np.int64)
    cut_ptr[1:] = np.cumsum(counts)
    return BinMapper(values, cut_ptr, int(max_bin))


def _sparse_cuts(comm: Communicator, S: SparseMatrix, rows: np.ndarray,
                 local_ws: np.ndarray | None, row_ids: np.ndarray | None, dtype: type,
                 max_bin: int) -> BinMapper:
    """`global_bin_mapper` of sparse rows S: this rank's sampled `rows` (local indices,
    ascending) and their weights (None: no rank has weights) gathered from every rank, in
    global row order, and `sample_bin_mapper` of that sample on every rank (rows of weight 0
    stay in the sample: `sample_bin_mapper` leaves them out as one process does)."""
    part = S.take_rows(rows)

    def gathered(a: np.ndarray, dt: type) -> np.ndarray:
        return np.asarray(comm.allgather(np.ascontiguousarray(a, dt), check_metadata=True), dt)

    counts = gathered(np.diff(part.indptr), np.int64)
    indices = gathered(part.indices, np.int32)
    values = gathered(part.data, dtype)
    ws = None if local_ws is None else gathered(local_ws, np.float64)
    indptr = np.zeros(counts.size + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    sample = SparseMatrix(indptr, indices, values, (counts.size, S.shape[1]), S.unstored)
    if row_ids is not None:  # rank order is not global row order: sort the sample
        ids = gathered(np.asarray(row_ids, np.int64)[rows], np.int64)
        order = np.argsort(ids, kind="stable")
        sample = sample.take_rows(order)
        ws = None if ws is None else ws[order]
    return sample_bin_mapper(sample, ws, max_bin)
