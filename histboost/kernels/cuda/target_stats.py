"""Ordered target statistics of categorical features on the GPU (the CPU's
`histboost.kernels.cpu.target_stats`, the design of CatBoost's GPU engine):

1. sort the rows by (category id, position in the permutation): a stable radix sort of the ids
   taken in permutation order (`sort_by_category`, torch's sort on the tensors' device);
2. exclusive segmented scans of the count and of each target channel along the sorted rows:
   an exclusive prefix sum over all rows (torch's cumsum) minus its value at the first row of
   the row's segment (`SEGMENT_STARTS`, `SCATTER_EXCLUSIVE`), scattered back to the rows;
3. each row's statistics binned with the cuts of the CPU engine (`BIN_STATISTICS`), and the
   frequency column of a combination (`BIN_FREQUENCY`).

Targets are integers here (0/1 channels of binary, multiclass and border targets): the scans
are int64, exact in any order, so the statistics are the CPU engine's bits (the statistic is
the same float64 expression, ``(sum + add) / (count + denominator)``, one IEEE division, and
the bin the same lower bound). Under Numba's CUDA simulator the tensors are CPU tensors and
torch sorts them on the CPU: the same code runs in CI.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..launch import CudaKernel


def sort_by_category(ids, order):
    """(sorted_rows int64 (n,), sorted_ids int32 (n,)): the rows of `order` (int64 (n,), the
    rows in permutation order) stably sorted by their category ids (`ids` int32 (n,)): rows of
    one category in permutation order. torch's stable sort (a radix sort on CUDA tensors)."""
    import torch

    sorted_ids, index = torch.sort(ids[order], stable=True)
    return order[index], sorted_ids.contiguous()


@cuda.jit
def _segment_starts(sorted_ids, starts):
    """starts[g] = the first position of category g in sorted_ids (int32 (n,), sorted)."""
    k = cuda.grid(1)
    if k >= sorted_ids.shape[0]:
        return
    g = sorted_ids[k]
    if k == 0 or sorted_ids[k - 1] != g:
        starts[g] = k


@cuda.jit
def _scatter_exclusive(sorted_rows, sorted_ids, starts, scan, count_out, sums_out):
    """Row r at sorted position k of segment g (first position s = starts[g]): count_out[r] =
    k - s, sums_out[r, j] = scan[k, j] - scan[s, j], where scan int64 (n, C) is the exclusive
    prefix sum of the targets along the sorted rows."""
    k = cuda.grid(1)
    if k >= sorted_rows.shape[0]:
        return
    s = starts[sorted_ids[k]]
    r = sorted_rows[k]
    count_out[r] = k - s
    for j in range(scan.shape[1]):
        sums_out[r, j] = scan[k, j] - scan[s, j]


@cuda.jit(device=True, inline=True)
def _lower_bound(cuts, s, v):
    """The first b with v <= cuts[s, b] (cuts.shape[1] when none)."""
    lo = 0
    hi = cuts.shape[1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if cuts[s, mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@cuda.jit
def _bin_statistics(count, sums, channels, adds, denominators, cuts, out, col):
    """out[r, col + s] = the bin of statistic s of row r, value (sums[r, channels[s]] +
    adds[s]) / (count[r] + denominators[s]) (`CtrSettings.terms`); count int64 (n,), sums
    int64 (n, C), cuts float64 (k, V) non-decreasing. One thread per (row, statistic)."""
    t = cuda.grid(1)
    k = channels.shape[0]
    if t >= count.shape[0] * k:
        return
    r = t // k
    s = t - r * k
    v = (np.float64(sums[r, channels[s]]) + adds[s]) / (np.float64(count[r]) + denominators[s])
    out[r, col + s] = _lower_bound(cuts, s, v)


@cuda.jit
def _bin_frequency(ids, counts, n_rows, cuts, out, col):
    """out[r, col] = the bin of the frequency counts[ids[r]] / n_rows of row r's category
    (ids int32 (n,), counts int64 (m,)) in cuts float64 (1, V)."""
    r = cuda.grid(1)
    if r >= ids.shape[0]:
        return
    v = np.float64(counts[ids[r]]) / n_rows
    out[r, col] = _lower_bound(cuts, 0, v)


SEGMENT_STARTS = CudaKernel(_segment_starts, (("int32", 1), ("int64", 1)))
SCATTER_EXCLUSIVE = CudaKernel(_scatter_exclusive, (
    ("int64", 1), ("int32", 1), ("int64", 1), ("int64", 2), ("int64", 1), ("int64", 2)))
BIN_STATISTICS = CudaKernel(_bin_statistics, (
    ("int64", 1), ("int64", 2), ("int64", 1), ("float64", 1), ("float64", 1), ("float64", 2),
    ("uint8", 2), "int64"))
BIN_FREQUENCY = CudaKernel(_bin_frequency, (
    ("int32", 1), ("int64", 1), "float64", ("float64", 2), ("uint8", 2), "int64"))
KERNELS = (SEGMENT_STARTS, SCATTER_EXCLUSIVE, BIN_STATISTICS, BIN_FREQUENCY)


class DeviceTargetStats:
    """The device side of one training run's ordered statistics.

    device: the backend's torch device; targets: int64-valued (n, C) per-row target channels
    (`CtrSettings.targets`, integers). Tensors given to and returned by the methods live on
    `device`."""

    def __init__(self, device, targets: np.ndarray) -> None:
        import torch

        from . import _common

        self._torch = torch
        self._common = _common
        self.device = device
        self.targets = self.tensor(np.ascontiguousarray(targets, np.int64))
        self.n_rows = int(targets.shape[0])

    def tensor(self, a: np.ndarray):
        """A device copy of host array a."""
        return self._torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

    def ordered(self, ids, n_ids: int, order):
        """(count int64 (n,), sums int64 (n, C)): for each row, the rows of its category
        (ids int32 (n,), dense in [0, n_ids)) before it in `order` (int64 (n,), the rows in
        permutation order), and the sums of their targets."""
        torch = self._torch
        common = self._common
        n = self.n_rows
        sorted_rows, sorted_ids = sort_by_category(ids, order)
        starts = torch.empty(n_ids, dtype=torch.int64, device=self.device)
        SEGMENT_STARTS.launch(common.grid(n), common.THREADS, self.device, sorted_ids, starts)
        t = self.targets.index_select(0, sorted_rows)
        scan = (torch.cumsum(t, 0) - t).contiguous()
        count = torch.empty(n, dtype=torch.int64, device=self.device)
        sums = torch.empty((n, t.shape[1]), dtype=torch.int64, device=self.device)
        SCATTER_EXCLUSIVE.launch(common.grid(n), common.THREADS, self.device, sorted_rows,
                                 sorted_ids, starts, scan, count, sums)
        return count, sums

    def read_rows(self, rows, *columns) -> list[np.ndarray]:
        """Host copies of columns[j][rows] (rows int64 device tensor; columns int64 (n,) or
        (n, C)), in one read."""
        torch = self._torch
        parts = [c.index_select(0, rows).reshape(rows.shape[0], -1) for c in columns]
        host = torch.cat(parts, dim=1).cpu().numpy().copy()
        out, at = [], 0
        for c, p in zip(columns, parts, strict=True):
            block = host[:, at:at + p.shape[1]]
            out.append(block.reshape(-1) if c.dim() == 1 else block)
            at += p.shape[1]
        return out

    def bin_statistics(self, count, sums, terms: tuple[np.ndarray, np.ndarray, np.ndarray],
                       cuts: np.ndarray, out, col: int) -> None:
        """out[:, col:col + k] (uint8 (n, >= col + k)) = the bins of the k statistics
        `terms` (channel int64, add float64, denominator float64 (k,)) of count, sums in
        cuts float64 (k, V)."""
        common = self._common
        chan, add, den = (self.tensor(a) for a in (np.asarray(terms[0], np.int64),
                                                    np.asarray(terms[1], np.float64),
                                                    np.asarray(terms[2], np.float64)))
        cuts_d = self.tensor(np.asarray(cuts, np.float64))
        BIN_STATISTICS.launch(common.grid(self.n_rows * chan.shape[0]), common.THREADS,
                              self.device, count, sums, chan, add, den, cuts_d, out, col)

    def combination_ids(self, ids: list, n_ids: list[int]):
        """(dense ids int32 (n,), their count m) of the combination of columns with dense ids
        `ids` (int32 (n,) device tensors, in [0, n_ids[j])): mixed-radix int64 packs, made
        unique by torch's sort (`histboost.categorical.combinations.pack_ids` on the host,
        the same ids). None when a pack could overflow int64."""
        torch = self._torch
        if float(np.prod(np.array(n_ids, np.float64))) >= 2.0**62:
            return None
        packed = ids[0].to(torch.int64)
        for col, m in zip(ids[1:], n_ids[1:], strict=True):
            packed = packed * m + col
        uniq, inverse = torch.unique(packed, sorted=True, return_inverse=True)
        return inverse.to(torch.int32).contiguous(), int(uniq.shape[0])

    def totals(self, ids, n_ids: int):
        """(counts int64 (m,), target sums int64 (m, C), first row int64 (m,)) of each
        category over all rows (integer sums: the same in any order)."""
        torch = self._torch
        counts = torch.bincount(ids, minlength=n_ids)
        sums = torch.zeros((n_ids, self.targets.shape[1]), dtype=torch.int64,
                           device=self.device).index_add_(0, ids, self.targets)
        rows = torch.arange(self.n_rows, dtype=torch.int64, device=self.device)
        first = torch.full((n_ids,), self.n_rows, dtype=torch.int64, device=self.device)
        first.scatter_reduce_(0, ids.to(torch.int64), rows, "amin")
        return counts, sums, first

    def bin_frequency(self, ids, counts, cuts: np.ndarray, out, col: int) -> None:
        """out[:, col] = the bins of the rows' category frequencies counts[ids] / n in cuts
        float64 (V,)."""
        common = self._common
        BIN_FREQUENCY.launch(common.grid(self.n_rows), common.THREADS, self.device, ids,
                             counts, float(self.n_rows),
                             self.tensor(np.asarray(cuts, np.float64).reshape(1, -1)), out, col)
