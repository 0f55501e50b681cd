"""Greedy combinations of categorical features, built while a tree grows.

After a split on a feature derived from categorical columns S (a column's statistics, its
frequency or a one-hot indicator, or those of a combination), the tree's later splits may use
the combinations S + {c} of every other categorical column c, up to `max_ctr_complexity`
columns (CatBoost's greedy rule). A combination's rows are grouped by a perfect hash of its
components' dense ids (`pack_ids`: pack, sort, unique), its statistics are the ordered ones of
`histboost.kernels.cpu.target_stats` under the tree's permutation, plus its frequency.

The backend's matrix holds `n_slots` combination slots after the other columns, each of
``n_stats + 1`` columns (statistics, frequency) with the statistic columns' slot layout. A
slot gets a combination at most once per tree (a node's pending split may use it), through
`Backend.replace_columns`, which also builds the new columns' histograms of the nodes that
hold histograms (they have no parent histogram to subtract from). Slots without a combination
are masked out of the split search. When a tree is done, its splits on slots are renamed to
the model's features of their combinations (`finish_tree`); the model gets a combination's
final table and features the first time a tree uses it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..data.categorical import combine_hashes
from ..distributed.categorical import key_statistics
from ..kernels.cpu.target_stats import category_totals, ordered_statistics
from ..tree.tree import Tree
from .model import CtrTable, DerivedFeature

# combinations a tree may add (slots of the matrix): each costs a pass over the rows for its
# statistics and histograms of its columns for every node holding one
DEFAULT_SLOTS = 8
# bytes of cached per-combination ids and binned statistics, beyond which the cache is emptied
_CACHE_BYTES = 1 << 29


def pack_ids(ids: list[np.ndarray], n_ids: list[int]) -> tuple[np.ndarray, int]:
    """Dense ids (int32 (n,), in [0, m)) and their count m of the combination of columns
    with dense ids `ids` (int (n,) each, in [0, n_ids[j])): the ids packed into one int64
    (mixed radix), sorted and made unique. Packs that could overflow int64 are hashes of the
    ids instead (`combine_hashes`), unique with overwhelming probability."""
    if float(np.prod(np.array(n_ids, np.float64))) < 2.0**62:
        packed = ids[0].astype(np.int64)
        for col, m in zip(ids[1:], n_ids[1:], strict=True):
            packed *= m
            packed += col
    else:
        packed = combine_hashes([c.astype(np.uint64) for c in ids])
    uniq, inverse = np.unique(packed, return_inverse=True)
    return inverse.astype(np.int32).reshape(-1), int(uniq.size)


class _Combination:
    """One combination's training data: dense ids, final table, frequency column."""

    def __init__(self, columns: tuple[int, ...], ids: np.ndarray, n_ids: int, table: CtrTable,
                 freq_bins: np.ndarray, freq_cuts: np.ndarray) -> None:
        self.columns = columns
        self.ids = ids
        self.n_ids = n_ids
        self.table = table
        self.freq_bins = freq_bins
        self.freq_cuts = freq_cuts


class CombinationSlots:
    """The combination slots of one training run (see the module docstring).

    trainer: the `CtrTrainer` (dense ids, hashes, targets, permutations, model, mapper);
    first: the matrix column of the first slot; n_slots: slots; max_complexity: columns per
    combination; colsets: the categorical columns each matrix column derives from (None
    for numeric columns), extended here for the slots."""

    def __init__(self, trainer: Any, first: int, n_slots: int, max_complexity: int,
                 colsets: list[tuple[int, ...] | None]) -> None:
        self.trainer = trainer
        self.first = first
        self.n_slots = n_slots
        self.width = trainer.settings.n_stats + 1
        self.max_complexity = max_complexity
        self.colsets = colsets + [None] * (n_slots * self.width)
        self.n_features = first + n_slots * self.width
        self.n_columns = len(trainer.ids)
        self._combos: dict[tuple[int, ...], _Combination] = {}
        self._binned: dict[tuple[tuple[int, ...], int], tuple[np.ndarray, np.ndarray]] = {}
        self._cache_bytes = 0
        self._tree: list[tuple[int, ...]] = []  # combination of each slot used in this tree
        self._perm = 0
        self._active = np.ones(self.n_features, bool)
        self.model_columns: dict[tuple[int, ...], int] = {}  # first model feature of each

    # -- per tree ------------------------------------------------------------------------
    def begin_tree(self, perm: int) -> np.ndarray:
        self._perm = perm
        self._tree = []
        self._active[self.first:] = False
        self.colsets[self.first:] = [None] * (self.n_slots * self.width)
        return self._active.copy()

    def after_splits(self, features: list[int], backend: Any) -> np.ndarray | None:
        """New combinations after splits on `features` (matrix columns); the new active
        mask, or None when none was added."""
        added = False
        for f in features:
            base = self.colsets[f]
            if base is None or len(base) >= self.max_complexity:
                continue
            for c in range(self.n_columns):
                if len(self._tree) >= self.n_slots:
                    break
                if c in base:
                    continue
                combo = tuple(sorted((*base, c)))
                if combo in self._tree:
                    continue
                self._assign(combo, backend)
                added = True
        return self._active.copy() if added else None

    def _assign(self, combo: tuple[int, ...], backend: Any) -> None:
        s = len(self._tree)
        self._tree.append(combo)
        lo = self.first + s * self.width
        bins, cuts = self._columns(combo)
        features = np.arange(lo, lo + self.width, dtype=np.int64)
        backend.replace_columns(features, bins)
        mapper = self.trainer.mapper
        for j, f in enumerate(features):
            mapper.cut_values[mapper.cut_ptr[f]:mapper.cut_ptr[f + 1]] = cuts[j]
        self._active[lo:lo + self.width] = True
        self.colsets[lo:lo + self.width] = [combo] * self.width

    # -- a combination's columns ---------------------------------------------------------
    def _combination(self, combo: tuple[int, ...]) -> _Combination:
        got = self._combos.get(combo)
        if got is not None:
            return got
        from .training import bin_values

        tr = self.trainer
        if tr.comm is not None:
            return self._distributed_combination(combo)
        ids, m = pack_ids([tr.ids[c] for c in combo], [tr.n_ids[c] for c in combo])
        first = np.empty(m, np.int64)
        first[ids[::-1]] = np.arange(ids.shape[0] - 1, -1, -1)  # the first row of each id
        keys = combine_hashes([tr.hashes[first, c] for c in combo])
        counts, sums = category_totals(ids, m, tr.targets)
        table = CtrTable.from_keys(combo, keys, counts, sums)
        freq = counts[ids] / ids.shape[0]
        freq_cuts = tr.sample_cuts(freq[tr.cut_rows, None])[0]
        got = _Combination(combo, ids, m, table, bin_values(freq, freq_cuts, tr.bins.dtype),
                           freq_cuts)
        self._remember(ids.itemsize + got.freq_bins.itemsize)
        self._combos[combo] = got
        return got

    def _distributed_combination(self, combo: tuple[int, ...]) -> _Combination:
        """A combination over all ranks' rows (`histboost.distributed.categorical`): its
        table, frequency and the binned statistics of every permutation at once (cached)."""
        from .training import bin_values

        tr = self.trainer
        keys = combine_hashes([tr.hashes[:, c] for c in combo])
        ks = key_statistics(tr.comm, keys, tr.row_ids, tr.global_rows)
        table = CtrTable(combo, *ks.table)
        freq = ks.totals / tr.n_total
        bins, cuts, freq_cuts = tr._bin_all_permutations(ks.ordered, freq, tr.bins.dtype)
        freq_bins = bin_values(freq, freq_cuts, tr.bins.dtype)
        got = _Combination(combo, np.zeros(0, np.int32), ks.n_categories, table, freq_bins,
                           freq_cuts)
        self._remember(freq_bins.itemsize)
        self._combos[combo] = got
        # the tree's permutation last: a full cache drops the others first
        for j in sorted(range(len(tr.perm_seeds)), key=lambda j: j == self._perm):
            self._store(combo, j, bins[j], cuts[j], freq_bins, freq_cuts)
        return got

    def _store(self, combo: tuple[int, ...], perm: int, stat_bins: np.ndarray,
               stat_cuts: np.ndarray, freq_bins: np.ndarray, freq_cuts: np.ndarray) -> None:
        bins = np.empty((stat_bins.shape[0], self.width), stat_bins.dtype)
        cuts = np.empty((self.width, self.trainer.value_bins))
        bins[:, :-1] = stat_bins
        cuts[:-1] = stat_cuts
        bins[:, -1] = freq_bins
        cuts[-1] = freq_cuts
        self._remember(bins.shape[1] * bins.itemsize)
        self._binned[(combo, perm)] = (bins, cuts)

    def _columns(self, combo: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(bins (n, width), cuts (width, value_bins)) of a combination under the tree's
        permutation."""
        key = (combo, self._perm)
        if key not in self._binned:
            tr = self.trainer
            cmb = self._combination(combo)
            if key not in self._binned and tr.comm is not None:
                # emptied cache (a decision every rank takes alike): all permutations again
                del self._combos[combo]
                cmb = self._distributed_combination(combo)
            if key not in self._binned:  # one process: this permutation only
                count, sums = ordered_statistics(cmb.ids, cmb.n_ids, tr.perms[self._perm],
                                                 tr.targets)
                cuts = tr.statistic_cuts(count, sums)
                self._store(combo, self._perm, tr.bin_statistics(count, sums, cuts), cuts,
                            cmb.freq_bins, cmb.freq_cuts)
        return self._binned[key]

    def _remember(self, row_bytes: int) -> None:
        """Count `row_bytes` per row of the rows of all ranks (so that with comm every rank
        takes the same decision: emptying the cache makes later calls collective again)."""
        self._cache_bytes += row_bytes * self.trainer.n_total
        if self._cache_bytes > _CACHE_BYTES:  # start over: the recent ones come back
            self._binned.clear()
            self._combos = {k: v for k, v in self._combos.items() if k in self._tree}
            # ids (none kept in distributed training) and the frequency column, per row
            self._cache_bytes = sum((v.ids.itemsize if v.ids.shape[0] else 0)
                                    + v.freq_bins.itemsize
                                    for v in self._combos.values()) * self.trainer.n_total

    # -- the model -----------------------------------------------------------------------
    def _model_feature(self, f: int) -> int:
        """The model's feature of matrix column f (a slot column: its combination's)."""
        if f < self.first:
            return f
        s, j = divmod(f - self.first, self.width)
        combo = self._tree[s]
        if combo not in self.model_columns:
            model = self.trainer.model
            model.tables.append(self._combination(combo).table)
            t = len(model.tables) - 1
            self.model_columns[combo] = model.n_features
            model.derived += [DerivedFeature("ctr", table=t, stat=k)
                              for k in range(self.width - 1)]
            model.derived.append(DerivedFeature("freq", table=t))
        return self.model_columns[combo] + j

    def finish_tree(self, tree: Tree) -> Tree:
        """`tree` with its splits on slot columns renamed to the model's features."""
        name = "level_feature" if tree.is_oblivious else "split_feature"
        feats = tree.arrays[name]
        if not np.any(feats >= self.first):
            return tree
        arrays = dict(tree.arrays)
        arrays[name] = np.array([self._model_feature(int(f)) if f >= 0 else -1
                                 for f in feats], feats.dtype)
        return Tree(tree.kind, tree.class_index, arrays)
