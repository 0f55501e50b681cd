"""Row partition: split a node's slice of the row-index array into left and right children,
keeping the row order (stable), so every child's rows stay sorted.

The kernels read the split feature from the column-major copy of the bins, ``columns``
(F, n): one feature's bins are a contiguous n-byte array that stays in cache, where the
row-major matrix would cost a cache line per row."""

from __future__ import annotations

import numba as nb
import numpy as np

from ._intrinsics import prefetch
from ._threads import run_ranges

# rows a block of `column_major`'s transposition: its source (16k rows of a few dozen bytes)
# and its destination stay in cache
_TRANSPOSE_BLOCK_ROWS = 1 << 14


def column_major(bins: np.ndarray, threads: int = 1) -> np.ndarray:
    """bins (n, F) copied column-major, (F, n) C-ordered: blocks of rows on `threads`
    threads (NumPy copies release the GIL). Once per training; NumPy's transposed copy of
    the whole matrix runs 2-3 times slower on one thread, its source rows out of cache."""
    out = np.empty((bins.shape[1], bins.shape[0]), bins.dtype)

    def copy(lo: int, hi: int) -> None:
        for start in range(lo, hi, _TRANSPOSE_BLOCK_ROWS):
            end = min(hi, start + _TRANSPOSE_BLOCK_ROWS)
            out[:, start:end] = bins[start:end].T

    run_ranges(copy, bins.shape[0], threads=threads, min_rows=4 * _TRANSPOSE_BLOCK_ROWS)
    return out


# rows ahead whose bin is prefetched: a deep node's rows are sparse in the column, so each
# read would otherwise wait on memory
_PREFETCH_DISTANCE = 32


@nb.njit(cache=True, inline="always")
def _goes_left(b, threshold_bin, missing_bin, default_left):
    """1 if a row with bin b goes left, else 0, without branches (the direction of successive
    rows is unpredictable, so a branch would mispredict about half the time)."""
    is_missing = np.int64(b == missing_bin)
    return is_missing * np.int64(default_left) + (1 - is_missing) * np.int64(b <= threshold_bin)


@nb.njit(cache=True, inline="always")
def _scatter(column, rows, start, end, threshold_bin, missing_bin, default_left, scratch,
             left_at, right_at):
    """One pass over rows[start:end]: the rows going left move, in order, to rows[left_at:...]
    (left_at <= start), the others to scratch[right_at:...] in order; returns the number going
    left.

    Indices are unsigned: Numba then drops the negative-index wraparound of every access,
    which halves the time per row of this loop."""
    hi = np.uintp(end)
    ahead = np.uintp(_PREFETCH_DISTANCE)
    n_left = np.uintp(left_at)
    n_right = np.uintp(right_at)
    for k in range(np.uintp(start), hi):
        if k + ahead < hi:
            prefetch(column, np.uintp(rows[k + ahead]))
        r = rows[k]
        left = np.uintp(_goes_left(column[np.uintp(r)], threshold_bin, missing_bin,
                                   default_left))
        # write both candidates, advance one cursor: n_left <= k, so no unread entry of rows
        # is overwritten, and a slot written for a right-going row is rewritten later
        rows[n_left] = r
        scratch[n_right] = r
        n_left += left
        n_right += np.uintp(1) - left
    return np.int64(n_left) - left_at


@nb.njit(cache=True, inline="always")
def copy_range(src, src_start, dst, dst_start, n):
    """dst[dst_start:dst_start + n] = src[src_start:src_start + n], as a loop: a slice
    assignment checks the shapes, and compiling its error message (string formatting) costs
    more than the rest of the kernel. Unsigned indices, as in `_scatter`."""
    d = np.uintp(dst_start)
    s = np.uintp(src_start)
    for i in range(np.uintp(n)):
        dst[d + i] = src[s + i]


# columns of a partition work item: node index, row range (a chunk of the node's range)
PART_NODE, PART_LO, PART_HI = range(3)
PART_WIDTH = 3


@nb.njit(cache=True, nogil=True)
def chunk_positions(items, starts, counts, positions, n_left):
    """Where each chunk's lefts go in a chunked partition: positions int64 (m,) out, and
    each node's lefts, n_left int64 (k,) out, from counts int64 (m,) the lefts of each chunk
    of items int64 (m, PART_WIDTH) (a node's chunks are consecutive items, in row order);
    starts: int64 (k,) each node's first row."""
    for k in range(n_left.shape[0]):
        n_left[k] = 0
    for j in range(items.shape[0]):
        k = items[j, PART_NODE]
        positions[j] = starts[k] + n_left[k]
        n_left[k] += counts[j]


@nb.njit(inline="always")
def place_chunk(j, items, rows, starts, scratch, counts, positions, n_left):
    """The second pass of a chunked partition for chunk j: its lefts (parked in scratch
    behind its rights, or already in place for a node's first chunk) and its rights (in
    scratch at the chunk's place) to their final places in rows, the node's lefts in chunk
    order, then its rights: the stable partition whatever the chunks. Reads scratch only and
    writes places of rows no other chunk writes, so chunks run on several threads."""
    k = items[j, PART_NODE]
    lo = items[j, PART_LO]
    hi = items[j, PART_HI]
    c = counts[j]
    lpos = positions[j]
    n_right = hi - lo - c
    if lo > starts[k]:
        copy_range(scratch, lo + n_right, rows, lpos, c)
    # rights of the node's earlier chunks: lo - lpos
    copy_range(scratch, lo, rows, starts[k] + n_left[k] + (lo - lpos), n_right)


@nb.njit(inline="always")
def _partition_items(columns, rows, starts, features, threshold_bins, missing_bins,
                     default_left, items, workers, scratch, n_left):
    """The body of `partition_nodes` and `partition_nodes_serial` (a prange is a range in the
    serial one). Worker w of `workers` (the thread count) takes items w, w + workers, ...: a
    large node's consecutive chunks go to different threads."""
    m = items.shape[0]
    workers = max(1, min(workers, m))
    counts = np.empty(m, np.int64)
    # each chunk partitioned on its own (`_scatter`: lefts in place, rights to scratch); a
    # node's later chunks park their lefts behind their rights in scratch
    for w in nb.prange(workers):
        for j in range(w, m, workers):
            k = items[j, PART_NODE]
            lo = items[j, PART_LO]
            hi = items[j, PART_HI]
            f = features[k]
            c = _scatter(columns[f], rows, lo, hi, np.int64(threshold_bins[k]),
                         np.int64(missing_bins[f]), default_left[k] != 0, scratch, lo, lo)
            counts[j] = c
            if lo > starts[k]:
                copy_range(rows, lo, scratch, hi - c, c)
    positions = np.empty(m, np.int64)
    chunk_positions(items, starts, counts, positions, n_left)
    for w in nb.prange(workers):
        for j in range(w, m, workers):
            place_chunk(j, items, rows, starts, scratch, counts, positions, n_left)


@nb.njit(parallel=True, cache=True, nogil=True)
def partition_nodes(columns, rows, starts, features, threshold_bins, missing_bins,
                    default_left, items, workers, scratch, n_left):
    """Partition several nodes, work items in parallel, in one pass over their rows.

    Item j (int64 (m, PART_WIDTH) `items`) is the chunk ``rows[PART_LO:PART_HI]`` of node
    PART_NODE; a node's chunks are consecutive items in row order and cover its range. Each
    chunk is partitioned on its own (`_scatter`), then every chunk copies its
    lefts and rights to their final places: a stable partition of each node whatever the
    chunks. workers: threads of the loop (items are dealt to them in turns). columns: (F, n)
    uint8/uint16 bins, column-major; rows: int32 (n,); starts: int64
    (k,) first row of each node; features, threshold_bins: int32 (k,); missing_bins: int32
    (F,) missing slot of each feature; default_left: uint8 (k,); scratch: int32 (n,);
    n_left: int64 (k,) out, rows going left per node.
    """
    _partition_items(columns, rows, starts, features, threshold_bins, missing_bins,
                     default_left, items, workers, scratch, n_left)


@nb.njit(cache=True, nogil=True)
def partition_nodes_serial(columns, rows, starts, features, threshold_bins, missing_bins,
                           default_left, items, workers, scratch, n_left):
    """`partition_nodes` on the calling thread (workers is not read): the same items, the
    same partition, in one pass. A node's chunks are taken in row order, each scattering its
    lefts behind the node's earlier lefts in rows and its rights behind the earlier rights in
    scratch; after the node's last chunk its rights follow its lefts. A body of its own, not
    `_partition_items` run on one thread: without the per-chunk counts, positions and second
    pass it compiles in a quarter of the time (the serial kernel is the one a first training
    on small data compiles)."""
    m = items.shape[0]
    n_right = 0
    for j in range(m):
        k = items[j, PART_NODE]
        lo = items[j, PART_LO]
        start = starts[k]
        if lo == start:
            n_left[k] = 0
            n_right = 0
        f = features[k]
        c = _scatter(columns[f], rows, lo, items[j, PART_HI], np.int64(threshold_bins[k]),
                     np.int64(missing_bins[f]), default_left[k] != 0, scratch,
                     start + n_left[k], start + n_right)
        n_left[k] += c
        n_right += items[j, PART_HI] - lo - c
        if j == m - 1 or items[j + 1, PART_NODE] != k:
            copy_range(scratch, start, rows, start + n_left[k], n_right)
