"""Row partition: split a node's slice of the row-index array into left and right children,
keeping the row order (stable), so every child's rows stay sorted.

The kernels read the split feature from the column-major copy of the bins, ``columns``
(F, n): one feature's bins are a contiguous n-byte array that stays in cache, where the
row-major matrix would cost a cache line per row."""

from __future__ import annotations

import numba as nb
import numpy as np

from ._intrinsics import prefetch

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
def _scatter(column, rows, start, end, threshold_bin, missing_bin, default_left, scratch):
    """One pass over rows[start:end]: the rows going left move, in order, to the front of the
    range, the others to scratch[start:...] in order; returns the number going left.

    Indices are unsigned: Numba then drops the negative-index wraparound of every access,
    which halves the time per row of this loop."""
    hi = np.uintp(end)
    ahead = np.uintp(_PREFETCH_DISTANCE)
    n_left = np.uintp(start)
    n_right = np.uintp(start)
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
    return np.int64(n_left) - start


@nb.njit(cache=True, inline="always")
def _copy(src, src_start, dst, dst_start, n):
    """dst[dst_start:dst_start + n] = src[src_start:src_start + n], as a loop: a slice
    assignment checks the shapes, and compiling its error message (string formatting) costs
    more than the rest of the kernel. Unsigned indices, as in `_scatter`."""
    d = np.uintp(dst_start)
    s = np.uintp(src_start)
    for i in range(np.uintp(n)):
        dst[d + i] = src[s + i]


@nb.njit(cache=True, nogil=True)
def partition_range(column, rows, start, end, threshold_bin, missing_bin, default_left,
                    scratch):
    """Partition one node's range rows[start:end] on one thread; returns the rows going left.
    column: (n,) bins of the split feature; scratch: int32 (n,)."""
    n_left = _scatter(column, rows, start, end, threshold_bin, missing_bin, default_left,
                      scratch)
    _copy(scratch, start, rows, start + n_left, end - start - n_left)
    return n_left


@nb.njit(parallel=True, cache=True, nogil=True)
def partition_nodes(columns, rows, starts, ends, features, threshold_bins, missing_bins,
                    default_left, scratch, n_left):
    """Partition several nodes in parallel (one thread per node).

    columns: (F, n) uint8/uint16 bins, column-major; rows: int32 (n,), node k owns
    rows[starts[k]:ends[k]]; features, threshold_bins: int32 (k,);
    missing_bins: int32 (F,) missing slot of each feature; default_left: uint8 (k,);
    scratch: int32 (n,); n_left: int64 (k,) out, rows going left per node.
    """
    for k in nb.prange(starts.shape[0]):
        f = features[k]
        n_left[k] = partition_range(columns[f], rows, starts[k], ends[k],
                                    np.int64(threshold_bins[k]), np.int64(missing_bins[f]),
                                    default_left[k] != 0, scratch)


@nb.njit(cache=True, nogil=True)
def partition_nodes_serial(columns, rows, starts, ends, features, threshold_bins, missing_bins,
                           default_left, scratch, n_left):
    """`partition_nodes` on the calling thread, without a parallel launch."""
    for k in range(starts.shape[0]):
        f = features[k]
        n_left[k] = partition_range(columns[f], rows, starts[k], ends[k],
                                    np.int64(threshold_bins[k]), np.int64(missing_bins[f]),
                                    default_left[k] != 0, scratch)


@nb.njit(parallel=True, cache=True, nogil=True)
def partition_node_chunked(column, rows, start, end, threshold_bin, missing_bin,
                           default_left, n_chunks, scratch, counts):
    """Partition one large node in n_chunks chunks run in parallel, in one pass over its rows.

    Each chunk of rows[start:end] is partitioned on its own (`partition_range`'s scatter:
    lefts in place, rights to scratch) and parks its lefts behind its rights in scratch; then
    every chunk copies both runs to their final places in rows. Both phases run in parallel,
    and past the scatter only sequential copies remain. column: (n,) bins of the split feature;
    scratch: int32 (n,); counts: int64 (n_chunks,) scratch, rows going left per chunk.
    Returns the number of rows going left.
    """
    n = end - start
    left = default_left != 0
    for c in nb.prange(n_chunks):
        lo = start + n * c // n_chunks
        hi = start + n * (c + 1) // n_chunks
        counts[c] = _scatter(column, rows, lo, hi, threshold_bin, missing_bin, left, scratch)
        # chunk c's rights now fill scratch[lo:hi - counts[c]]; park its lefts after them
        # (chunk 0's lefts are already in place)
        if c > 0:
            _copy(rows, lo, scratch, hi - counts[c], counts[c])
    total_left = 0
    for c in range(n_chunks):
        total_left += counts[c]
    for c in nb.prange(n_chunks):
        lo = start + n * c // n_chunks
        hi = start + n * (c + 1) // n_chunks
        lpos = start
        for cc in range(c):
            lpos += counts[cc]
        n_right = hi - lo - counts[c]
        if c > 0:
            _copy(scratch, lo + n_right, rows, lpos, counts[c])
        rpos = start + total_left + (lo - lpos)
        _copy(scratch, lo, rows, rpos, n_right)
    return total_left
