"""Categorical features in data-parallel training: the ordered target statistics, final
tables, frequencies and cuts one process computes on all rows, from rows split across ranks.

Each rank holds some rows; ``row_ids`` gives each local row's index in the whole data set.
The permutations are defined on those global indices (`permutation_order`: rows sorted by a
hash of (permutation seed, global row index), ties by the index), so they do not depend on
how rows are split. A row's ordered statistic needs the earlier rows of its category under
each permutation, wherever they are. `key_statistics` sends every row of a categorical
column (or combination) to the rank owning its category (``hash mod world_size``) with one
`Communicator.alltoall`; the owner holds every row of its categories and runs the
one-process computation on them (`histboost.kernels.cpu.target_stats`: sort by category and
permutation position, exclusive segmented scans), then sends each row's results back with a
second alltoall. Counts and sums of 0/1 targets are exact integers in float64, and float
target sums are added in the one-process order (the owner takes its rows in global row order
or permutation order), so the statistics are those of one process bit for bit.

Once per training run every rank gets what does not depend on the column (`GlobalRows`): the
labels of all rows by global index (so a row's targets need not travel with each column), and
every permutation's order of all rows (the sorts one process makes). An owner then finds its
received rows' order under each permutation by restricting the global order (a pass over
the rows of all ranks, no sort per column).

What crosses the network, per categorical column or combination (n: this rank's rows, m:
target channels, P: permutations, d: the owner's categories):

- to the owners: n x 12 bytes (hash, 32-bit global row index; 16 bytes beyond 2**32 rows);
- back: n x 4 (1 + P (1 + m)) bytes for 0/1 target channels (binary, multiclass, label
  borders: integer counts and sums, int32), n x 8 (1 + P (1 + m)) for the label mean (the
  category's total count; per permutation the count and channel sums of the earlier rows);
- the number of categories (one int64 allreduce), then every owner's part of the final table,
  allgathered: d x 8 (2 + m) bytes per owner (the model stores the table on every rank);
  a column with at most ``one_hot_max_size`` categories sends only its hashes instead;
- the quantile cuts (`global_padded_cuts`: the frequency, and the statistics of the label
  mean; statistics of 0/1 channels have fixed cuts): the values of the rows in the cut sample
  (about 50,000 rows in all, whatever the rank count) go to the rank computing that column's
  cuts (8 bytes per value, each value to one rank), and the cuts come back in one allgather
  (k x 16 x 8 bytes for k columns).

Once per run: every rank's labels and global row indices, allgathered (16 bytes per row of all
ranks to every rank, `global_labels_of_settings`).

Every call goes through the communicator with its timeout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..data.binning import row_hash
from ..kernels.cpu.target_stats import category_totals, ordered_statistics

if TYPE_CHECKING:
    from ..collective.base import Communicator


def permutation_seed(seed: int, j: int) -> int:
    """The hash seed of permutation j of a training run with `seed`."""
    return int(row_hash(int(seed) & 0xFFFFFFFF, np.array([0xC47 + j], np.int64))[0])


def permutation_order(seed: int, row_ids: np.ndarray) -> np.ndarray:
    """int64 (n,): the rows (local indices) in the order of the permutation of hash seed
    `seed` (`permutation_seed`): by ``row_hash(seed, global index)``, ties by the global
    index. row_ids: int64 (n,) global indices of the rows."""
    keys = row_hash(seed, row_ids)
    order = np.argsort(keys)  # unstable, 5x a two-key lexsort: fine while keys are distinct
    ordered = keys[order]
    if np.any(ordered[1:] == ordered[:-1]):  # a 64-bit hash collision: ties by the index
        return np.lexsort((row_ids, keys)).astype(np.int64)
    return order.astype(np.int64)


class GlobalRows:
    """What every rank knows of all ranks' rows, computed once per training run: the rows of
    every permutation in order, and every row's targets, both by global row index.

    n_total: rows of all ranks; targets: float64 (n_total, m) target channels by global row
    index (`CtrSettings.targets` of the labels of all ranks, allgathered once:
    `global_labels_of_settings`); seeds: the permutations' hash seeds; integer: whether the
    channels are 0/1 (binary, multiclass, label borders), so counts and sums are integers
    below n_total. `orders[j]`: int64 (n_total,), the global rows in permutation j's order
    (`permutation_order` of all rows: the one-process sorts, once)."""

    def __init__(self, n_total: int, targets: np.ndarray, seeds: list[int],
                 integer: bool) -> None:
        self.n_total = int(n_total)
        self.targets = np.ascontiguousarray(targets, np.float64)
        self.seeds = list(seeds)
        self.integer = bool(integer) and self.n_total < 2**31
        all_rows = np.arange(self.n_total, dtype=np.int64)
        self.orders = [permutation_order(s, all_rows) for s in self.seeds]

    def local_orders(self, rid: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """For rows with global indices rid (int64 (k,), distinct): (their local indices in
        global row order, and in each permutation's order), by restricting the global orders
        (O(n_total) each, no sort): the orders `permutation_order` gives on the subset."""
        inv = np.full(self.n_total, -1, np.int32 if rid.shape[0] < 2**31 else np.int64)
        inv[rid] = np.arange(rid.shape[0], dtype=inv.dtype)
        by_row = inv[inv >= 0].astype(np.int64)
        orders = []
        for order in self.orders:
            o = inv[order]
            orders.append(o[o >= 0].astype(np.int64))
        return by_row, orders


@dataclass
class KeyStatistics:
    """One categorical column's (or combination's) statistics over all ranks' rows.

    n_categories: distinct categories over all ranks. categories: uint64 sorted, all of
    them, when n_categories <= the one-hot limit (then nothing else is computed); totals:
    float64 (n,) rows of each local row's category over all ranks; ordered: per permutation,
    (count float64 (n,), sums float64 (n, m)) of the earlier rows of each local row's
    category; table: (hashes uint64 (c,) sorted, counts float64 (c,), sums float64 (c, m)),
    every category of all ranks."""

    n_categories: int
    categories: np.ndarray | None = None
    totals: np.ndarray | None = None
    ordered: list[tuple[np.ndarray, np.ndarray]] | None = None
    table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


def key_statistics(comm: Communicator, keys: np.ndarray, row_ids: np.ndarray,
                   rows: GlobalRows, one_hot_max_size: int = -1) -> KeyStatistics:
    """Collective: the statistics of categorical keys (uint64 (n,), this rank's rows) with
    global row indices row_ids (int64 (n,)) under the permutations of `rows` (module
    docstring)."""
    return key_statistics_columns(comm, keys[:, None], row_ids, rows, one_hot_max_size)[0]


def key_statistics_columns(comm: Communicator, keys: np.ndarray, row_ids: np.ndarray,
                           rows: GlobalRows, one_hot_max_size: int = -1
                           ) -> list[KeyStatistics]:
    """Collective: `key_statistics` of each column of keys (uint64 (n, C)) with the
    messages of all columns together: one alltoall out, one back, one allreduce of the
    category counts and two allgathers of the tables, whatever C (each column's rows go to
    its own owners; the results are those of one column at a time)."""
    from ..categorical.training import dense_ids

    world = comm.world_size
    keys = np.ascontiguousarray(keys, np.uint64)
    n, n_cols = keys.shape
    m = rows.targets.shape[1]
    rid_local = np.asarray(row_ids, np.int64)
    # small integers: NumPy's stable sort is then a radix sort
    dest = (keys % np.uint64(world)).astype(np.uint16 if world <= 1 << 16 else np.int64)
    by_dest = [np.argsort(dest[:, c], kind="stable") for c in range(n_cols)]
    # sent[c, d]: rows of column c to rank d; the payload is destination-major, then column
    sent = np.stack([np.bincount(dest[:, c], minlength=world) for c in range(n_cols)])
    small = rows.n_total < 2**32  # global row indices in 32 bits: a row is 12 bytes
    payload = np.empty((n * n_cols, 3 if small else 2), np.uint32 if small else np.uint64)
    blocks = []  # (column, first source row in by_dest order, size, position in payload)
    at = 0
    for d in range(world):
        for c in range(n_cols):
            lo = int(sent[c, :d].sum())
            size = int(sent[c, d])
            blocks.append((c, lo, size, at))
            at += size
    for c, lo, size, at in blocks:
        if not size:
            continue
        rows_c = by_dest[c][lo:lo + size]
        if small:
            payload[at:at + size, :2] = keys[rows_c, c].view(np.uint32).reshape(size, 2)
            payload[at:at + size, 2] = rid_local[rows_c]
        else:
            payload[at:at + size, 0] = keys[rows_c, c]
            payload[at:at + size, 1] = rid_local[rows_c].view(np.uint64)
    # every sender's rows per column for this rank: how the received rows split by column
    counts_all = np.asarray(comm.allgather(sent.T.reshape(1, world, n_cols).astype(np.int64)),
                            np.int64).reshape(world, world, n_cols)
    got, received = comm.alltoall(payload, sent.sum(axis=0))
    got = np.asarray(got)
    mine = counts_all[:, comm.rank, :]  # (senders, columns): rows received
    # received row positions of column c: sender-major, as one column's alltoall delivers
    recv_at = np.cumsum(np.concatenate([[0], mine.ravel()]))[:-1].reshape(world, n_cols)
    per_col = [np.concatenate([np.arange(recv_at[s, c], recv_at[s, c] + mine[s, c])
                               for s in range(world)]).astype(np.int64)
               for c in range(n_cols)]
    if small:
        all_hashes = np.ascontiguousarray(got[:, :2]).view(np.uint64).reshape(-1)
        all_rid = got[:, 2].astype(np.int64)
    else:
        all_hashes = np.ascontiguousarray(got[:, 0])
        all_rid = np.ascontiguousarray(got[:, 1]).view(np.int64)
    dense = [dense_ids(all_hashes[per_col[c]]) for c in range(n_cols)]
    n_cat = np.array([u.size for _, u in dense], np.int64)
    comm.allreduce(n_cat, op="sum", inplace=True)
    onehot = n_cat <= one_hot_max_size
    n_perm = len(rows.orders)
    width = 1 + n_perm * (1 + m)
    # 0/1 channels: counts and sums are integers below 2**31, sent as int32
    reply = np.zeros((got.shape[0], width), np.int32 if rows.integer else np.float64)
    parts = []  # this rank's categories of each column: (hash, count, channel sums)
    for c in range(n_cols):
        ids, uniq = dense[c]
        part = np.zeros((uniq.size, 2 + m), np.uint64)
        part[:, 0] = uniq
        if not onehot[c]:
            rid = all_rid[per_col[c]]
            tg = rows.targets[rid]
            by_row, orders = rows.local_orders(rid)
            # the final table: each category's rows added in global row order (one process)
            counts, sums = category_totals(ids[by_row], int(uniq.size), tg[by_row])
            out = np.empty((rid.shape[0], width), reply.dtype)
            out[:, 0] = counts[ids]
            for j, order in enumerate(orders):
                count, before = ordered_statistics(ids, int(uniq.size), order, tg)
                out[:, 1 + j * (1 + m)] = count
                out[:, 2 + j * (1 + m):2 + j * (1 + m) + m] = before
            reply[per_col[c]] = out
            part[:, 1] = counts.view(np.uint64)
            part[:, 2:] = sums.view(np.uint64)
        parts.append(part)
    sizes = np.asarray(comm.allgather(np.array([[p.shape[0] for p in parts]], np.int64)),
                       np.int64).reshape(world, n_cols)
    tables = np.asarray(comm.allgather(np.concatenate(parts) if parts
                                       else np.zeros((0, 2 + m), np.uint64)), np.uint64)
    table_at = np.cumsum(np.concatenate([[0], sizes.ravel()]))[:-1].reshape(world, n_cols)
    if (~onehot).any():
        back, _ = comm.alltoall(reply, received)
        back = np.asarray(back)
    results = []
    for c in range(n_cols):
        table = np.concatenate([tables[table_at[q, c]:table_at[q, c] + sizes[q, c]]
                                for q in range(world)])
        table = table[np.argsort(table[:, 0], kind="stable")]
        if onehot[c]:
            results.append(KeyStatistics(int(n_cat[c]), categories=table[:, 0].copy()))
            continue
        out = np.empty((n, width), np.float64)
        # column c's rows back from each owner d, in by_dest order
        out[by_dest[c]] = np.concatenate(
            [back[at:at + size] for cc, _, size, at in blocks if cc == c])
        ordered = [(np.ascontiguousarray(out[:, 1 + j * (1 + m)]),
                    np.ascontiguousarray(out[:, 2 + j * (1 + m):2 + j * (1 + m) + m]))
                   for j in range(n_perm)]
        results.append(KeyStatistics(
            int(n_cat[c]), totals=np.ascontiguousarray(out[:, 0]), ordered=ordered,
            table=(np.ascontiguousarray(table[:, 0]),
                   np.ascontiguousarray(table[:, 1]).view(np.float64),
                   np.ascontiguousarray(table[:, 2:]).view(np.float64))))
    return results


def global_padded_cuts(comm: Communicator, values: np.ndarray, n_value_bins: int
                       ) -> np.ndarray:
    """Collective: float64 (k, n_value_bins) `padded_cuts` of each column of the values of
    the cut sample's rows, split across ranks (values float64 (s, k), this rank's sampled
    rows; k equal on every rank). Column block q goes to rank q (contiguous blocks,
    ``np.array_split``), which computes its cuts from the values of all ranks (quantile cuts
    depend on the values, not their order); the cuts are allgathered."""
    from ..categorical.training import padded_cuts

    world, rank = comm.world_size, comm.rank
    values = np.asarray(values, np.float64).reshape(values.shape[0], -1)
    k = values.shape[1]
    blocks = np.array_split(np.arange(k), world)
    send = np.concatenate([values[:, b].ravel() for b in blocks])
    got, received = comm.alltoall(send, [values.shape[0] * b.size for b in blocks])
    mine = blocks[rank]
    cuts = np.zeros((mine.size, n_value_bins))
    if mine.size:
        sample = np.asarray(got, np.float64).reshape(-1, mine.size)
        for j in range(mine.size):
            cuts[j] = padded_cuts(sample[:, j], n_value_bins)
    del received
    return np.asarray(comm.allgather(cuts), np.float64).reshape(k, n_value_bins)


def global_labels(comm: Communicator, hashes: np.ndarray, row_ids: np.ndarray,
                  labels: dict[int, str], wanted: list[int]) -> dict[int, str]:
    """Collective: for each hash in `wanted`, the text of its raw value at its first row in
    global order (the one-process label of a one-hot feature). hashes: uint64 (n,) this
    rank's column; labels: this rank's hash -> text of its first local row."""
    mine = []
    for h in wanted:
        rows = np.flatnonzero(hashes == np.uint64(h))
        if rows.size:
            mine.append([str(h), int(np.min(np.asarray(row_ids)[rows])), labels.get(h, "")])
    blob = np.frombuffer(json.dumps(mine).encode(), np.uint8).copy()
    sizes = np.asarray(comm.allgather(np.array([blob.size], np.int64)), np.int64)
    texts = bytes(np.asarray(comm.allgather(blob), np.uint8))
    best: dict[int, tuple[int, str]] = {}
    at = 0
    for size in sizes.tolist():
        for h, first, text in json.loads(texts[at:at + size]):
            if int(h) not in best or first < best[int(h)][0]:
                best[int(h)] = (first, text)
        at += size
    return {h: text for h, (_, text) in best.items()}


def global_labels_of_settings(comm: Communicator, y: np.ndarray, row_ids: np.ndarray
                              ) -> np.ndarray:
    """Collective: all ranks' labels in global row order (float64 (N,)): the statistics'
    settings (the label borders' quantiles and the label mean) as one process computes them,
    and every row's targets (`GlobalRows`). 16 bytes per row (label, global index) to every
    rank, once per training run."""
    ys = np.asarray(comm.allgather(np.ascontiguousarray(y, np.float64)), np.float64)
    ids = np.asarray(comm.allgather(np.asarray(row_ids, np.int64)), np.int64)
    out = np.empty_like(ys)
    out[ids] = ys
    return out
