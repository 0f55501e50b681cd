"""Ordered (online) target statistics of categorical features, and their final tables.

Under a permutation of the rows, a row's statistic sums the targets of the rows of its
category that come before it, so no row sees its own label. The computation (the design of
CatBoost's GPU engine, here on the CPU):

1. sort the rows by (category id, position in the permutation): a stable counting sort by id of
   the rows taken in permutation order (ids are dense, 0..n_ids-1), linear in rows;
2. exclusive segmented scans of the count and of each target channel along the sorted rows,
   one segment per category;
3. scatter the scans back to the rows.

Sums of 0/1 targets are exact integers in float64 (below 2**53 rows), so the result does not
depend on the order of additions.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def sort_by_category(ids, n_ids, order, sorted_rows, starts):
    """Counting sort: sorted_rows = the rows in `order` (a permutation, int64 (n,)) stably
    sorted by ids (int32/int64 (n,), in [0, n_ids)); starts int64 (n_ids + 1,): category g
    owns sorted_rows[starts[g]:starts[g+1]]."""
    starts[:] = 0
    for r in range(ids.shape[0]):
        starts[ids[r] + 1] += 1
    for g in range(n_ids):
        starts[g + 1] += starts[g]
    fill = starts[:-1].copy()
    for p in range(order.shape[0]):
        r = order[p]
        g = ids[r]
        sorted_rows[fill[g]] = r
        fill[g] += 1


@nb.njit(cache=True, nogil=True)
def exclusive_scan_scatter(sorted_rows, starts, targets, count_out, sums_out):
    """Per category segment of sorted_rows: count_out[r] = rows of the segment before r,
    sums_out[r, j] = sum of targets[., j] over them (exclusive scans, scattered to rows).
    targets float64 (n, m); count_out float64 (n,); sums_out float64 (n, m)."""
    m = targets.shape[1]
    acc = np.zeros(m, np.float64)
    for g in range(starts.shape[0] - 1):
        c = 0.0
        acc[:] = 0.0
        for k in range(starts[g], starts[g + 1]):
            r = sorted_rows[k]
            count_out[r] = c
            for j in range(m):
                sums_out[r, j] = acc[j]
                acc[j] += targets[r, j]
            c += 1.0


def ordered_statistics(ids: np.ndarray, n_ids: int, order: np.ndarray, targets: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(count float64 (n,), sums float64 (n, m)): for each row, the number of rows of its
    category before it in `order` (int64 (n,), the rows in permutation order) and their target
    sums. ids: int (n,) dense category ids in [0, n_ids); targets float64 (n, m)."""
    n = ids.shape[0]
    sorted_rows = np.empty(n, np.int64)
    starts = np.empty(n_ids + 1, np.int64)
    sort_by_category(ids, n_ids, np.ascontiguousarray(order, np.int64), sorted_rows, starts)
    count = np.empty(n, np.float64)
    sums = np.empty((n, targets.shape[1]), np.float64)
    exclusive_scan_scatter(sorted_rows, starts, np.ascontiguousarray(targets, np.float64),
                           count, sums)
    return count, sums


def category_totals(ids: np.ndarray, n_ids: int, targets: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(count float64 (n_ids,), sums float64 (n_ids, m)) over all rows: the final tables."""
    count = np.bincount(ids, minlength=n_ids).astype(np.float64)
    sums = np.empty((n_ids, targets.shape[1]), np.float64)
    for j in range(targets.shape[1]):
        sums[:, j] = np.bincount(ids, weights=targets[:, j], minlength=n_ids)
    return count, sums


@nb.njit(parallel=True, cache=True, nogil=True)
def bin_statistics(count, sums, channels, adds, denominators, cuts, out):
    """out[r, s] = the bin of statistic s of row r: the first b with value <= cuts[s, b],
    value = (sums[r, channels[s]] + adds[s]) / (count[r] + denominators[s]) (the float
    operations of `CtrSettings.statistics`). count float64 (n,); sums float64 (n, m);
    channels int64 (k,); adds, denominators float64 (k,); cuts float64 (k, V) non-decreasing;
    out (n, k) unsigned ints. Rows in parallel."""
    k = channels.shape[0]
    n_cuts = cuts.shape[1]
    for r in nb.prange(count.shape[0]):
        for s in range(k):
            v = (sums[r, channels[s]] + adds[s]) / (count[r] + denominators[s])
            # the number of cuts below v (the cuts are sorted: the lower bound), counted
            # over all 16-ish cuts: no branch to mispredict, vectorised, ~3x a binary search
            b = 0
            for j in range(n_cuts):
                b += cuts[s, j] < v
            out[r, s] = b
