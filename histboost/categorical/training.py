"""Categorical features in training: the derived columns of the binned matrix the backend
holds, and the model's categorical part.

The backend's matrix (`CtrTrainer.bins`, uint8/uint16 (n, F_num + D)) is

    [numeric bins | derived columns: per categorical column either one-hot indicators
     (at most `one_hot_max_size` categories) or its target statistics and its frequency]

Target statistic columns are ordered: tree t uses permutation t mod `n_permutations` of the
rows (seeded), and a row's statistic sums the targets of the rows of its category before it
(`histboost.kernels.cpu.target_stats`). They change when the permutation does: `begin_tree`
replaces their bins in the backend (`Backend.replace_columns`) and their cut values in the
training `BinMapper` the grower reads thresholds from (every statistic column has exactly
``ctr_border_count + 1`` value bins, padded with empty +inf bins, so the slot layout never
changes). Trees store raw thresholds; prediction computes the statistics from the final tables
over all training rows (`histboost.categorical.model`).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..data.binning import BinMapper, feature_cuts, mapper_from_cuts, row_hash, sample_row_ids
from ..distributed.categorical import (
    GlobalRows,
    global_labels,
    global_labels_of_settings,
    global_padded_cuts,
    key_statistics_columns,
    permutation_order,
    permutation_seed,
)
from ..kernels.cpu.target_stats import bin_statistics, category_totals, ordered_statistics
from ..params import TrainParams
from ..tree.tree import Tree
from .combinations import DEFAULT_SLOTS, CombinationSlots
from .model import CategoricalModel, CtrTable, DerivedFeature
from .settings import CtrSettings

# permutation-dependent bins are cached for every permutation up to this many bytes in all
_CACHE_BYTES = 1 << 30
# rows whose statistics place the quantile cuts of a statistic (15 cuts need few)
_CUT_SAMPLE_ROWS = 50_000
# distributed training: categorical columns exchanged together up to about this many bytes
# of messages per rank (a row of a column: 12 bytes out, up to 8 (1 + P (1 + m)) back): fewer
# collective calls, while each batch's arrays stay small (all 26 columns of ctr_like 200k at
# once, ~350 MB, cost more CPU per rank than one column at a time)
_BATCH_BYTES = 1 << 26


def dense_ids(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int32 (n,) dense ids in order of first appearance, uint64 (m,) the hash of each id)."""
    import pandas as pd

    codes, uniq = pd.factorize(hashes)
    return codes.astype(np.int32), np.asarray(uniq, np.uint64)


def padded_cuts(values: np.ndarray, n_value_bins: int) -> np.ndarray:
    """Exactly `n_value_bins` increasing-or-equal upper bounds of quantile bins of `values`
    (float64 (m,)), the real ones first, then +inf padding (empty bins)."""
    cuts = feature_cuts(values, None, n_value_bins)
    return np.concatenate([cuts, np.full(n_value_bins - cuts.size, np.inf)])


def bin_values(values: np.ndarray, cuts: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Bin of each value: the first b with value <= cuts[b]."""
    return np.searchsorted(cuts, values, side="left").astype(dtype)


class CtrTrainer:
    """Derived categorical columns of one training run.

    dtrain: the training Dataset (with `categorical` columns); mapper / bins: the numeric
    columns' cuts and bins; y: float64 (n,) labels; objective: the objective's name;
    comm / row_ids: data-parallel training (`histboost.distributed.categorical`): the
    communicator and the global index of each local row (int64 (n,)); the statistics,
    tables and cuts are then those of one process on the rows of all ranks.
    After construction: `mapper` and `bins` are the backend's matrix (statistics of the
    first permutation), `model` the model's categorical part (its final tables)."""

    def __init__(self, dtrain: Any, params: TrainParams, mapper: BinMapper, bins: np.ndarray,
                 y: np.ndarray, objective: str, comm: Any = None,
                 row_ids: np.ndarray | None = None) -> None:
        cat = dtrain.categorical
        p = params
        n = dtrain.num_row()
        self.comm = comm
        self.row_ids = (np.arange(n, dtype=np.int64) if row_ids is None
                        else np.asarray(row_ids, np.int64))
        self.n_rows = n
        self.n_total = n
        if comm is not None:
            total = np.array([n], np.int64)
            comm.allreduce(total, op="sum", inplace=True)
            self.n_total = int(total[0])
        self.n_threads = p.n_threads
        # with comm: every rank's labels in global row order (8 bytes per row, once), for the
        # statistics' settings as one process makes them and every row's targets
        y_all = None if comm is None else global_labels_of_settings(comm, y, self.row_ids)
        self.settings = CtrSettings.from_labels(objective, p.num_class,
                                                y if y_all is None else y_all, p.ctr_priors,
                                                p.ctr_target_borders)
        self.targets = self.settings.targets(y)
        self.value_bins = p.ctr_border_count + 1
        numeric = [i for i in range(len(dtrain.feature_names)) if i not in set(cat.positions)]
        self.model = CategoricalModel(list(dtrain.feature_names), numeric, list(cat.names),
                                      list(cat.positions), list(cat.kinds), self.n_total,
                                      self.settings)
        self.hashes = cat.hashes
        self.ids: list[np.ndarray] = []
        self.n_ids: list[int] = []
        self.cut_rows = self._cut_rows()
        self.perm_seeds = [permutation_seed(p.seed, j) for j in range(p.n_permutations)]
        self.global_rows: GlobalRows | None = None
        if y_all is not None:
            self.global_rows = GlobalRows(self.n_total, self.settings.targets(y_all),
                                          self.perm_seeds, self.settings.target != "mean")
        # the matrix dtype (every derived column has value_bins + 1 slots)
        dtype = np.promote_types(bins.dtype, np.uint8 if self.value_bins < 256 else np.uint16)
        static: list[tuple[int, np.ndarray, np.ndarray]] = []  # (derived index, values, cuts)
        self.ctr_tables: list[int] = []  # tables whose statistics are ordered columns
        model = self.model
        onehot: list[tuple[int, int]] = []
        freqs: list[tuple[np.ndarray, np.ndarray]] = []  # (values, cuts) per ctr table
        # distributed: every permutation's binned statistics and cuts, per ctr table
        binned: list[tuple[list[np.ndarray], np.ndarray]] = []
        key_stats = []
        if comm is not None:  # every column's exchanges together, in batches
            row_bytes = 8 * (3 + len(self.perm_seeds) * (1 + self.settings.n_channels))
            batch = max(1, _BATCH_BYTES // max(1, row_bytes * self.n_total
                                               // comm.world_size))
            for lo in range(0, cat.n_columns, batch):
                key_stats += key_statistics_columns(comm, cat.hashes[:, lo:lo + batch],
                                                    self.row_ids, self.global_rows,
                                                    p.one_hot_max_size)
        distributed_ctr = []  # (table, KeyStatistics) of the ctr columns, with comm
        for c in range(cat.n_columns):
            if comm is None:
                ids, uniq = dense_ids(cat.hashes[:, c])
                self.ids.append(ids)
                self.n_ids.append(int(uniq.size))
                categories = uniq if uniq.size <= p.one_hot_max_size else None
            else:  # the owner ranks' dense ids (local ones are never used)
                ks = key_stats[c]
                self.ids.append(np.zeros(0, np.int32))
                self.n_ids.append(ks.n_categories)
                categories = ks.categories
            if categories is not None:
                if categories.size > 1:  # one category: nothing to split
                    onehot += [(c, int(h)) for h in
                               np.sort(categories)[:1 if categories.size == 2 else None]]
                continue
            if comm is None:
                counts, sums = category_totals(ids, int(uniq.size), self.targets)
                model.tables.append(CtrTable.from_keys((c,), uniq, counts, sums))
                freq = counts[ids] / n
                freqs.append((freq, self.sample_cuts(freq[self.cut_rows, None])[0]))
            else:
                model.tables.append(CtrTable((c,), *ks.table))
                distributed_ctr.append(ks)
            self.ctr_tables.append(len(model.tables) - 1)
        if distributed_ctr:  # one cut computation (collective) for every column
            freq_all = [ks.totals / self.n_total for ks in distributed_ctr]
            done = self._bin_all_permutations_many(
                [(ks.ordered, f) for ks, f in zip(distributed_ctr, freq_all, strict=True)],
                dtype)
            for freq, (bins_c, cuts_c, freq_cuts) in zip(freq_all, done, strict=True):
                binned.append((bins_c, cuts_c))
                freqs.append((freq, freq_cuts))
        # derived columns grouped by kind: the statistic columns, replaced every permutation,
        # are contiguous in the matrix (row-contiguous copies)
        for t in self.ctr_tables:
            model.derived += [DerivedFeature("ctr", table=t, stat=s)
                              for s in range(self.settings.n_stats)]
        for t, (freq, cuts) in zip(self.ctr_tables, freqs, strict=True):
            model.derived.append(DerivedFeature("freq", table=t))
            static.append((len(model.derived) - 1, freq, cuts))
        labels = cat.labels
        if comm is not None and onehot:
            labels = [global_labels(comm, cat.hashes[:, c], self.row_ids, cat.labels[c],
                                    [h for cc, h in onehot if cc == c])
                      if any(cc == c for cc, _ in onehot) else {}
                      for c in range(cat.n_columns)]
        for c, h in onehot:
            model.derived.append(DerivedFeature("onehot", column=c, hash=h,
                                                label=labels[c].get(h, "")))
            static.append((len(model.derived) - 1,
                           (cat.hashes[:, c] == np.uint64(h)).astype(np.float64),
                           np.array([0.5, np.inf])))
        # the training matrix: numeric | derived columns
        n_num = mapper.n_features
        self.n_numeric = n_num
        all_cuts = [mapper.feature_cuts(f) for f in range(n_num)]
        self._ctr_features: list[int] = []  # matrix columns of ordered statistics
        static_cuts = {k: cuts for k, _, cuts in static}
        for k, d in enumerate(model.derived):
            if d.kind == "ctr":
                self._ctr_features.append(n_num + k)
                all_cuts.append(np.full(self.value_bins, np.inf))
            else:
                all_cuts.append(static_cuts[k])
        # the combination slots (combinations.py) after every other column
        colsets: list[tuple[int, ...] | None] = [None] * n_num + [
            (d.column,) if d.kind == "onehot" else model.tables[d.table].columns
            for d in model.derived]
        self.slots: CombinationSlots | None = None
        if p.max_ctr_complexity > 1 and cat.n_columns > 1:
            self.slots = CombinationSlots(self, len(all_cuts), DEFAULT_SLOTS,
                                          p.max_ctr_complexity, colsets)
            all_cuts += [np.full(self.value_bins, np.inf)] * (self.slots.n_features
                                                                - len(all_cuts))
        self.mapper = mapper_from_cuts(all_cuts, mapper.max_bin)
        dtype = np.promote_types(bins.dtype, self.mapper.bin_dtype)
        self.bins = np.zeros((n, self.mapper.n_features), dtype)
        self.bins[:, :n_num] = bins
        for k, values, cuts in static:
            self.bins[:, n_num + k] = bin_values(values, cuts, dtype)
        self.perms: list[np.ndarray] = []  # the rows in each permutation's order (one process)
        if comm is None:
            self.perms = [permutation_order(s, self.row_ids) for s in self.perm_seeds]
        per_perm = n * len(self._ctr_features) * dtype.itemsize
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._cache_all = per_perm * len(self.perm_seeds) <= _CACHE_BYTES
        if comm is not None:  # computed above, for every permutation at once
            for j in range(len(self.perm_seeds)):
                self._cache[j] = (
                    np.hstack([b[j] for b, _ in binned]) if binned
                    else np.zeros((n, 0), dtype),
                    np.vstack([cuts[j] for _, cuts in binned]) if binned
                    else np.zeros((0, self.value_bins)))
        self._perm = -1
        self._backend: Any = None
        self._load_permutation(0, None)

    def _cut_rows(self) -> np.ndarray:
        """int64 local indices of this rank's rows in the cut sample (rows sampled by a hash
        of their global index: the same sample however the rows are split)."""
        if self.comm is None or self.n_total <= _CUT_SAMPLE_ROWS:
            return sample_row_ids(0, self.n_rows, self.n_total, _CUT_SAMPLE_ROWS) \
                if self.comm is None else np.arange(self.n_rows, dtype=np.int64)
        threshold = np.uint64((_CUT_SAMPLE_ROWS << 64) // self.n_total)
        return np.flatnonzero(row_hash(0, self.row_ids) < threshold).astype(np.int64)

    def sample_cuts(self, values: np.ndarray) -> np.ndarray:
        """float64 (k, value_bins) `padded_cuts` of each column of values (s, k) of the cut
        sample's rows (`cut_rows`; with comm, of all ranks: a collective call)."""
        if self.comm is not None:
            return global_padded_cuts(self.comm, values, self.value_bins)
        return np.stack([padded_cuts(values[:, j], self.value_bins)
                         for j in range(values.shape[1])]) if values.shape[1] \
            else np.zeros((0, self.value_bins))

    def _bin_all_permutations(self, ordered: list[tuple[np.ndarray, np.ndarray]],
                              freq: np.ndarray | None, dtype: np.dtype
                              ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray | None]:
        """(bins (n, n_stats) per permutation, cuts (P, n_stats, value_bins), the frequency's
        cuts (value_bins,) or None) of a key's statistics under every permutation, with one
        cut computation (collective with comm) for all of them."""
        return self._bin_all_permutations_many([(ordered, freq)], dtype)[0]

    def _bin_all_permutations_many(
            self, keys: list[tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray | None]],
            dtype: np.dtype) -> list[tuple[list[np.ndarray], np.ndarray, np.ndarray | None]]:
        """`_bin_all_permutations` of several keys ((ordered, freq) each) with one cut
        computation (one collective call with comm) for all of them."""
        k = self.settings.n_stats
        uniform = self.settings.target != "mean"  # fixed cuts: nothing to sample
        sample = []
        for ordered, freq in keys:
            if not uniform:
                sample += [self.settings.statistics(c[self.cut_rows], s[self.cut_rows])
                           for c, s in ordered]
            if freq is not None:
                sample.append(freq[self.cut_rows, None])
        cuts = (self.sample_cuts(np.hstack(sample)) if sample
                else np.zeros((0, self.value_bins)))
        out = []
        at = 0
        for ordered, freq in keys:
            if uniform:
                per_perm = np.broadcast_to(self.uniform_cuts(),
                                           (len(ordered), k, self.value_bins)).copy()
            else:
                per_perm = cuts[at:at + len(ordered) * k].reshape(len(ordered), k,
                                                                  self.value_bins)
                at += len(ordered) * k
            freq_cuts = None
            if freq is not None:
                freq_cuts = cuts[at]
                at += 1
            bins = [self.bin_statistics(c, s, per_perm[j], dtype)
                    for j, (c, s) in enumerate(ordered)]
            out.append((bins, per_perm, freq_cuts))
        return out

    # -- ordered statistics --------------------------------------------------------------
    def ordered_columns(self, perm: int) -> tuple[np.ndarray, np.ndarray]:
        """(bins (n, D_ctr) of the ordered statistic columns under permutation `perm`, their
        cuts float64 (D_ctr, value_bins))."""
        if perm in self._cache:
            return self._cache[perm]
        order = self.perms[perm]
        per_table = self.settings.n_stats
        bins = np.empty((self.n_rows, len(self.ctr_tables) * per_table), self.bins.dtype)
        cuts = np.empty((bins.shape[1], self.value_bins))

        def one(j: int) -> None:
            c = self.model.tables[self.ctr_tables[j]].columns[0]
            count, sums = ordered_statistics(self.ids[c], self.n_ids[c], order, self.targets)
            k = slice(j * per_table, (j + 1) * per_table)
            cuts[k] = self.statistic_cuts(count, sums)
            self.bin_statistics(count, sums, cuts[k], out=bins[:, k])

        workers = min(len(self.ctr_tables), self.n_threads, os.cpu_count() or 1)
        if workers > 1:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(one, range(len(self.ctr_tables))))
        else:
            for j in range(len(self.ctr_tables)):
                one(j)
        if self._cache_all:
            self._cache[perm] = (bins, cuts)
        return bins, cuts

    def uniform_cuts(self) -> np.ndarray:
        """float64 (n_stats, value_bins): ``ctr_border_count`` borders evenly spaced in
        [0, 1], then +inf, for every statistic (statistics of 0/1 target channels lie in
        [0, 1])."""
        borders = np.arange(1, self.value_bins) / self.value_bins
        return np.tile(np.append(borders, np.inf), (self.settings.n_stats, 1))

    def statistic_cuts(self, count: np.ndarray, sums: np.ndarray) -> np.ndarray:
        """float64 (n_stats, value_bins) cuts of the statistics: `uniform_cuts` for
        statistics of 0/1 channels (CatBoost's rule for its CTRs: on Adult and ctr_like it
        beat quantile cuts by 0.001 and 0.0004 AUC, averaged over 3 seeds); for the label
        mean, quantile cuts of a sample of the rows (`cut_rows`; one process only: with
        comm, `_bin_all_permutations`)."""
        if self.settings.target != "mean":
            return self.uniform_cuts()
        return self.sample_cuts(self.settings.statistics(count[self.cut_rows],
                                                         sums[self.cut_rows]))

    def bin_statistics(self, count: np.ndarray, sums: np.ndarray, cuts: np.ndarray,
                       dtype: np.dtype | None = None, out: np.ndarray | None = None
                       ) -> np.ndarray:
        """(n, n_stats) bins of the statistics of every row (one fused pass), of the
        matrix's dtype (or `dtype`), written into `out` when given (a view of a wider
        matrix: no copy)."""
        chan, add, den = self.settings.terms()
        if out is None:
            out = np.empty((count.shape[0], chan.size),
                           self.bins.dtype if dtype is None else dtype)
        bin_statistics(count, sums, chan, add, den, np.ascontiguousarray(cuts), out)
        return out

    def _load_permutation(self, perm: int, backend: Any) -> None:
        if perm == self._perm or not self._ctr_features:
            return
        bins, cuts = self.ordered_columns(perm)
        features = np.array(self._ctr_features, np.int64)
        if backend is None:
            # the statistic columns are contiguous (__init__): a slice, 60x faster than an
            # indexed assignment (0.9 s at 1M rows and 78 columns)
            self.bins[:, features[0]:features[-1] + 1] = bins
        else:
            backend.replace_columns(features, bins)
        ptr = self.mapper.cut_ptr
        for j, f in enumerate(features):
            self.mapper.cut_values[ptr[f]:ptr[f + 1]] = cuts[j]
        self._perm = perm

    def begin_tree(self, tree_index: int, backend: Any) -> None:
        """Before tree `tree_index` grows: the backend's statistic columns (and the cut values
        the grower reads) for its permutation."""
        self._backend = backend
        self._load_permutation(tree_index % len(self.perm_seeds), backend)

    # -- the grower's column source (histboost.tree.grower.ColumnSource) -----------------
    def tree_features(self) -> np.ndarray | None:
        if self.slots is None:
            return None
        return self.slots.begin_tree(self._perm)

    def after_splits(self, features: list[int]) -> np.ndarray | None:
        if self.slots is None:
            return None
        return self.slots.after_splits(features, self._backend)

    def finish_tree(self, tree: Tree) -> Tree:
        """A grown tree with the model's feature indices (combinations added to the model
        the first time a tree uses them)."""
        return tree if self.slots is None else self.slots.finish_tree(tree)

    # -- the model -----------------------------------------------------------------------
    def eval_matrix(self, data: Any) -> np.ndarray:
        """The extended matrix of an evaluation Dataset (final tables)."""
        return self.model.matrix(data)
