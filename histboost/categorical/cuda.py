"""Categorical features trained on the GPU (``device="cuda"``): the CPU engine's `CtrTrainer`
and `CombinationSlots` with the work that changes from tree to tree on the device
(`histboost.kernels.cuda.target_stats`):

- the ordered target statistics of every permutation (sort, segmented scans, scatter), binned
  with the CPU engine's cuts into device columns that `CUDABackend.replace_columns` copies
  into the binned matrix: the bins never cross to the host;
- a combination's dense ids (pack, sort, unique), its category counts, target sums and first
  rows, its frequency column, and its ordered statistics.

The cuts are the CPU engine's: fixed borders in [0, 1] for statistics of 0/1 channels
(`CtrTrainer.uniform_cuts`); for the label mean and the frequencies, the values of the same
sample of rows (`cut_rows`) are read to the host and cut there by the same functions
(`CtrSettings.statistics`, `padded_cuts`), so with the same seed both engines grow the same
trees. A combination's final
table (the model's) is read only when a tree first uses it. The static columns (numeric bins,
the frequency and one-hot columns of single categorical columns) are computed once on the host,
as on the CPU, and uploaded with the matrix.

Distributed training (``comm``): the statistics, tables and cuts come from the owner ranks
on the host (`histboost.distributed.categorical`, as with ``device="cpu"``) and their bins are
copied into the device matrix by `CUDABackend.replace_columns`; combinations added mid-tree
rebuild only their columns' histogram slots, summed across ranks (``combine``).

The device scans are integer sums: targets that are not all integers (regression on the mean,
``ctr_target_borders=0``, with a fractional label) are computed on the host by the CPU engine
and copied to the device, which gives the same model.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..data.categorical import combine_hashes
from ..kernels.launch import simulated
from ..params import TrainParams
from .combinations import CombinationSlots, pack_ids
from .model import CtrTable
from .training import CtrTrainer, padded_cuts

# per-permutation device columns of the single-column statistics are kept up to this size
_DEVICE_CACHE_BYTES = 1 << 30
# host threads preparing statistic columns at once (each holds a few (n, C) int64 temporaries
# on the device)
_DEVICE_WORKERS = 8


class CudaCtrTrainer(CtrTrainer):
    """`CtrTrainer` whose statistic columns are computed on the CUDA backend's device (module
    docstring). The device state is made at the first tree, from the backend."""

    def __init__(self, dtrain: Any, params: TrainParams, mapper: Any, bins: np.ndarray,
                 y: np.ndarray, objective: str, comm: Any = None,
                 row_ids: np.ndarray | None = None) -> None:
        self._constructed = False
        super().__init__(dtrain, params, mapper, bins, y, objective, comm=comm,
                         row_ids=row_ids)
        self._constructed = True
        t = self.targets
        # int64 scans are exact for integer targets (sums below 2**62); with comm the
        # statistics of all ranks' rows come from the owner ranks (histboost.distributed.
        # categorical), on the host, and are copied into the device matrix
        self.on_device = comm is None and bool(np.array_equal(t, np.floor(t))) and \
            float(np.abs(t).sum(axis=0).max(initial=0.0)) < 2.0**62
        self.stats: Any = None
        self._ids_d: list[Any] = []
        self._perms_d: dict[int, Any] = {}
        self._device_cache: dict[int, tuple[Any, np.ndarray]] = {}
        if self.on_device and self.slots is not None:
            old = self.slots
            self.slots = CudaCombinationSlots(self, old.first, old.n_slots, old.max_complexity,
                                              old.colsets[:old.first])

    # -- device state --------------------------------------------------------------------
    def _setup(self, backend: Any) -> None:
        from ..kernels.cuda.target_stats import DeviceTargetStats

        self.stats = DeviceTargetStats(backend.device, self.targets.astype(np.int64))
        self._ids_d = [self.stats.tensor(ids.astype(np.int32)) for ids in self.ids]
        self._cut_rows_d = self.stats.tensor(np.asarray(self.cut_rows, np.int64))

    def permutation(self, perm: int) -> Any:
        """The rows in permutation `perm`'s order, int64 (n,) on the device."""
        got = self._perms_d.get(perm)
        if got is None:
            got = self._perms_d[perm] = self.stats.tensor(
                np.asarray(self.perms[perm], np.int64))
        return got

    def release(self) -> None:
        """Drop the device tensors (the backend's release returns the memory)."""
        self.stats = None
        self._ids_d = []
        self._cut_rows_d = None
        self._perms_d = {}
        self._device_cache = {}
        if self.slots is not None and isinstance(self.slots, CudaCombinationSlots):
            self.slots.release()

    # -- ordered statistics --------------------------------------------------------------
    def device_statistics(self, ids: Any, n_ids: int, perm: int, out: Any, col: int
                          ) -> np.ndarray:
        """Bin the ordered statistics under permutation `perm` of the categories `ids`
        (int32 (n,) device tensor, dense in [0, n_ids)) into out[:, col:col + n_stats]
        (uint8 device tensor); returns their cuts float64 (n_stats, value_bins)."""
        count, sums = self.stats.ordered(ids, n_ids, self.permutation(perm))
        if self.settings.target != "mean":  # the CPU engine's fixed borders
            cuts = self.uniform_cuts()
        else:
            count_s, sums_s = self.stats.read_rows(self._cut_rows_d, count, sums)
            values = self.settings.statistics(count_s.astype(np.float64),
                                              sums_s.astype(np.float64))
            cuts = np.stack([padded_cuts(values[:, s], self.value_bins)
                             for s in range(values.shape[1])])
        self.stats.bin_statistics(count, sums, self.settings.terms(), cuts, out, col)
        return cuts

    def ordered_columns(self, perm: int) -> tuple[Any, np.ndarray]:
        """As `CtrTrainer.ordered_columns`, the bins a uint8 (n, D_ctr) device tensor."""
        if not self.on_device or self.stats is None:
            return super().ordered_columns(perm)
        if perm in self._device_cache:
            return self._device_cache[perm]
        import torch

        k = self.settings.n_stats
        out = torch.empty((self.n_rows, len(self.ctr_tables) * k), dtype=torch.uint8,
                          device=self.stats.device)
        cuts = np.empty((out.shape[1], self.value_bins))

        def one(j: int) -> None:
            c = self.model.tables[self.ctr_tables[j]].columns[0]
            cuts[j * k:(j + 1) * k] = self.device_statistics(self._ids_d[c], self.n_ids[c],
                                                             perm, out, j * k)

        # the host's share (reading a sample, its quantile cuts) overlaps other columns'
        # device work; every column writes its own bins and cuts
        workers = min(len(self.ctr_tables), self.n_threads, os.cpu_count() or 1,
                      _DEVICE_WORKERS)
        if workers > 1 and not simulated():
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(one, range(len(self.ctr_tables))))
        else:
            for j in range(len(self.ctr_tables)):
                one(j)
        if out.numel() * len(self.perms) <= _DEVICE_CACHE_BYTES:
            self._device_cache[perm] = (out, cuts)
        return out, cuts

    def _load_permutation(self, perm: int, backend: Any) -> None:
        # construction writes no statistics into the host matrix: the first tree loads its
        # permutation's on the device
        if not self._constructed:
            return
        if backend is not None and self.on_device and self.stats is None:
            self._setup(backend)
        super()._load_permutation(perm, backend)


class _DeviceCombination:
    """One combination's device data: dense ids int32 (n,), counts int64 (m,), target sums
    int64 (m, C), first rows int64 (m,), frequency bins uint8 (n, 1) and their cuts; the
    final table (host) made on first use."""

    def __init__(self, trainer: CudaCtrTrainer, columns: tuple[int, ...], ids: Any, n_ids: int
                 ) -> None:
        import torch

        stats = trainer.stats
        self.trainer = trainer
        self.columns = columns
        self.ids = ids
        self.n_ids = n_ids
        self.counts, self.sums, self.first = stats.totals(ids, n_ids)
        (sample,) = stats.read_rows(trainer._cut_rows_d, self.counts.index_select(0, ids))
        self.freq_cuts = padded_cuts(sample / trainer.n_rows, trainer.value_bins)
        self.freq_bins = torch.empty((trainer.n_rows, 1), dtype=torch.uint8, device=stats.device)
        stats.bin_frequency(ids, self.counts, self.freq_cuts, self.freq_bins, 0)
        self._table: CtrTable | None = None

    @property
    def table(self) -> CtrTable:
        if self._table is None:
            tr = self.trainer
            first = self.first.cpu().numpy()
            keys = combine_hashes([tr.hashes[first, c] for c in self.columns])
            self._table = CtrTable.from_keys(self.columns, keys,
                                             self.counts.cpu().numpy().astype(np.float64),
                                             self.sums.cpu().numpy().astype(np.float64))
        return self._table


class CudaCombinationSlots(CombinationSlots):
    """`CombinationSlots` whose combinations' ids, frequencies and statistics are computed on
    the device (module docstring)."""

    def release(self) -> None:
        self._combos.clear()
        self._binned.clear()
        self._cache_bytes = 0

    def _combination(self, combo: tuple[int, ...]) -> Any:
        got = self._combos.get(combo)
        if got is not None:
            return got
        tr = self.trainer
        packed = tr.stats.combination_ids([tr._ids_d[c] for c in combo],
                                          [tr.n_ids[c] for c in combo])
        if packed is None:  # packs beyond int64: hashes of the ids, on the host
            ids, m = pack_ids([tr.ids[c] for c in combo], [tr.n_ids[c] for c in combo])
            packed = (tr.stats.tensor(ids.astype(np.int32)), m)
        got = _DeviceCombination(tr, combo, *packed)
        self._remember(got.ids.element_size() + got.freq_bins.element_size())  # per row
        self._combos[combo] = got
        return got

    def _columns(self, combo: tuple[int, ...]) -> tuple[Any, np.ndarray]:
        """(bins uint8 (n, width) device tensor, cuts (width, value_bins)) of a combination
        under the tree's permutation."""
        key = (combo, self._perm)
        if key in self._binned:
            return self._binned[key]
        import torch

        tr = self.trainer
        cmb = self._combination(combo)
        bins = torch.empty((tr.n_rows, self.width), dtype=torch.uint8, device=tr.stats.device)
        cuts = np.empty((self.width, tr.value_bins))
        cuts[:-1] = tr.device_statistics(cmb.ids, cmb.n_ids, self._perm, bins, 0)
        bins[:, -1:] = cmb.freq_bins
        cuts[-1] = cmb.freq_cuts
        self._remember(self.width * bins.element_size())  # per row
        self._binned[key] = (bins, cuts)
        return bins, cuts
