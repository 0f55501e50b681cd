"""`SparseCPUBackend`: the CPU backend over the sparse layout of
`histboost.data.sparse.SparseBins` (kernels: `histboost.kernels.cpu.sparse`).

Everything but the layout-bound steps is `CPUBackend`'s: gradients, histogram storage, split
search kernels, margins. Histograms have the dense layout (every slot of every feature) and are
built over the stored slots of a node's rows (time proportional to its stored values), then
each feature's default bin is fixed from the node total; the partition reads the split
feature's column of non-default entries.

Live features. A wide sparse matrix has far more histogram slots than a node has stored values,
so per-node work over every slot (zeroing, fixing, subtracting, searching) would dominate. A
feature is *live* in a node while some split of it could be valid there: its rows outside the
default bin carry at least min_child_weight of hessian (and min_data_in_leaf rows, when rows
are counted). A node's descendants hold subsets of its rows, so a feature dead in a node is dead
in its whole subtree (hessians are non-negative; otherwise nothing is pruned). Every step on a
node's histogram touches only the slots of its live features (feature 0, which carries the node
total, always included); the other slots of its histogram are left unspecified, and the split
search skips those features, which it would find no valid split of anyway: the model is that of
the dense layout. `read_histograms` therefore returns meaningful values only in the slots of
live features (all of them with min_child_weight = 0).
"""

from __future__ import annotations

import sys

import numpy as np

from ...tree.predictor import PackedForest
from ...tree.quantize import Quantisation
from ...tree.tree import Tree
from ..nodes import HistogramStore
from . import backend as dense_backend
from . import histogram, sparse, sparse_predict, split
from .backend import CPUBackend

# the row chunks of a large node's histogram each zero and add a scratch histogram of the live
# slots: at most one chunk per this many (stored values / live histogram values), so that the
# scratch work stays below the sums (a function of the node and the data only, as the chunk
# count of the dense layout: float models do not depend on the threads)
_VALUES_PER_CHUNK_SLOT = 1
# free histogram buffers kept for reuse between trees
_POOL_KEEP = 8
# Parallel regions: each costs a wake-up of the pool, and on a busy machine a wait for a time
# slice on every core (measured on 2 shared cores under load: ~10 ms a region, more than most
# of a sparse node's steps). Elementwise work over live slots (fixing, subtracting) runs in
# parallel from this many values (several milliseconds of work), and a node's partition, a
# galloping walk cheaper per row than the dense one, is chunked from this many rows.
_PARALLEL_MIN_VALUES = 1 << 20
_PARTITION_CHUNKED_MIN_ROWS = 1 << 16


class _Pool:
    """Histogram-sized arrays for reuse. A sparse layout's histograms span every slot of a
    wide matrix (megabytes each); a fresh array of that size comes from mmap and pays a page
    fault per 4 KiB on its first writes, as slow as filling it. An array is free again once
    nothing else refers to it (the store released its nodes)."""

    def __init__(self) -> None:
        self._bufs: list[np.ndarray] = []

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        for buf in self._bufs:
            # references: the list, this loop's name and getrefcount's argument
            if buf.shape == shape and buf.dtype == dtype and sys.getrefcount(buf) <= 3:
                return buf
        buf = np.empty(shape, dtype)
        self._bufs.append(buf)
        return buf

    def trim(self, keep: int) -> None:
        """Drop all but `keep` of the free arrays (the newest kept)."""
        free = [i for i, b in enumerate(self._bufs) if sys.getrefcount(b) <= 3]
        drop = set(free[:max(0, len(free) - keep)])
        self._bufs = [b for i, b in enumerate(self._bufs) if i not in drop]


# live slot ranges closer than this many slots are handled as one (the slots between them are
# unspecified either way): fewer, longer loops
_RANGE_GAP = 32


class _Live:
    """A node's live features (int32, ascending, 0 included) and ranges [lo[r], hi[r]) of
    slots covering theirs (the gaps between ranges hold no live slot)."""

    __slots__ = ("features", "lo", "hi", "values")

    def __init__(self, features: np.ndarray, offsets: np.ndarray) -> None:
        self.features = features
        lo, hi = offsets[features], offsets[features + 1]
        start = np.ones(lo.size, bool)
        start[1:] = lo[1:] - hi[:-1] > _RANGE_GAP
        end = np.ones(lo.size, bool)
        end[:-1] = start[1:]
        self.lo = np.ascontiguousarray(lo[start])
        self.hi = np.ascontiguousarray(hi[end])
        self.values = int((self.hi - self.lo).sum())  # slots covered


class SparseCPUBackend(CPUBackend):
    """`CPUBackend` on a `SparseBins` layout (arguments as `CPUBackend`'s, `sbins` for the
    binned matrix)."""

    def __init__(self, sbins, n_threads: int, label: np.ndarray | None = None,
                 weight: np.ndarray | None = None, n_outputs: int = 1,
                 count_rows: bool = False) -> None:
        n, F = sbins.shape
        # the dense state of a zero-width matrix, then the sparse layout in its place
        super().__init__(np.zeros((n, 0), np.uint8), sbins.offsets, n_threads, label=label,
                         weight=weight, n_outputs=n_outputs, count_rows=count_rows)
        self.sbins = sbins
        self.n_features = int(F)
        self.bins = self.columns = None  # type: ignore[assignment]
        self.slots = sbins.slots
        self.default_bins = sbins.default_bins
        self.default_slots = sbins.default_slots
        self._values_per_row = sbins.slots.shape[0] / max(1, n)
        self._pool_bufs = _Pool()
        self._hists = HistogramStore(self._stack)
        # features with no entry off their default bin never split (nor need slots)
        varying = np.flatnonzero(np.diff(sbins.col_ptr) > 0)
        self._root_live = _Live(np.union1d([0], varying).astype(np.int32), self.offsets)
        self._live: dict[int, _Live] = {}
        self._refined: dict[int, _Live] = {}
        self._prune = False
        self._tol = 0.0

    def replace_columns(self, features: np.ndarray, bins: np.ndarray,
                        combine: object = None) -> None:
        raise ValueError("categorical features need dense input; a sparse Dataset has none")

    def release(self) -> None:
        super().release()
        self.sbins = None
        self._pool_bufs = _Pool()
        self._live, self._refined = {}, {}

    # -- buffers -------------------------------------------------------------------------
    def _empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return self._pool_bufs.empty(tuple(shape), np.dtype(dtype))

    def _stack(self, arrays: list[np.ndarray]) -> np.ndarray:
        out = self._empty((len(arrays), *arrays[0].shape), arrays[0].dtype)
        for j, a in enumerate(arrays):
            out[j] = a
        return out

    def _to_float(self, hists: np.ndarray) -> np.ndarray:
        q = self._quantisation
        if q is None:
            return hists
        if hists.ndim == 2:  # packed quantised sums
            out = self._empty((*hists.shape, 2), np.float64)
            self._team(min(hists.shape[0], hists.size // _PARALLEL_MIN_VALUES))
            histogram.unpack_to_float(hists, q.g_scale, q.h_scale, out)
            return out
        # scales are powers of two, so these products are exact
        out = self._empty(hists.shape, np.float64)
        np.multiply(hists, np.array([q.g_scale, q.h_scale, 1.0][:hists.shape[2]]), out=out)
        return out

    # -- one tree ------------------------------------------------------------------------
    def begin_tree(self, output: int, rows: np.ndarray | None,
                   quantisation: Quantisation | None) -> int:
        count = super().begin_tree(output, rows, quantisation)  # drops the last tree's
        self._pool_bufs.trim(_POOL_KEEP)
        h = self._pairs[output][:, 1]
        self._prune = h.shape[0] > 0 and float(h.min()) >= 0.0
        # rounding margin of the float hessian sums the live-feature test compares
        self._tol = 1e-9 * (float(np.abs(h).sum(dtype=np.float64)) + 1.0)
        self._live = {0: self._root_live}
        self._refined = {}
        return count

    def build_histograms(self, nodes: list[int]) -> np.ndarray:
        sb = self.sbins
        bounds = self._ranges.bounds(nodes)
        starts = np.array([b[0] for b in bounds], np.int64)
        ends = np.array([b[1] for b in bounds], np.int64)
        lives = [self._live[i] for i in nodes]
        out = self._empty((len(nodes), *self._hist_shape), self.hist_dtype)
        width = int(np.prod(self._hist_shape[1:], dtype=np.int64))
        batch = []
        for k, live in enumerate(lives):
            n_rows = int(ends[k] - starts[k])
            c = self._sum_chunks(n_rows)
            while c > 1 and (n_rows * self._values_per_row / c
                             < _VALUES_PER_CHUNK_SLOT * live.values * width):
                c //= 2
            if c == 1:
                batch.append(k)
                continue
            if self._chunk_buffers.shape[0] < c:
                self._chunk_buffers = np.zeros((c, *self._hist_shape), self.hist_dtype)
            s, e = int(starts[k]), int(ends[k])
            if self._team(c) > 1:
                sparse.build_histogram_chunked(sb.indptr, sb.slots, self.gh, self.rows, s, e,
                                               live.lo, live.hi, self._chunk_buffers[:c],
                                               out[k])
            else:
                sparse.build_histogram_chunked_serial(sb.indptr, sb.slots, self.gh, self.rows,
                                                      s, e, live.lo, live.hi, c,
                                                      self._chunk_buffers[0], out[k])
        if batch:
            idx = np.array(batch)
            sub = out if len(batch) == len(nodes) else self._empty(
                (idx.size, *self._hist_shape), self.hist_dtype)
            rng_ptr = np.zeros(idx.size + 1, np.int64)
            np.cumsum([lives[k].lo.size for k in batch], out=rng_ptr[1:])
            lo = np.concatenate([lives[k].lo for k in batch])
            hi = np.concatenate([lives[k].hi for k in batch])
            threads = self._team(min(idx.size, int((ends[idx] - starts[idx]).sum())
                                     // dense_backend._HISTOGRAM_THREAD_MIN_ROWS))
            kernel = sparse.build_histograms if threads > 1 else sparse.build_histograms_serial
            kernel(sb.indptr, sb.slots, self.gh, self.rows, starts[idx], ends[idx], rng_ptr,
                   lo, hi, sub)
            if sub is not out:
                out[idx] = sub
        self._fix(out, lives)
        self._hists.store(nodes, out)
        return out

    def _fix(self, out: np.ndarray, lives: list[_Live]) -> None:
        """Every live feature's default bin from the node total (`kernels.cpu.sparse`)."""
        hists = out.reshape(out.shape[0], out.shape[1], -1)
        # zeros, not empty: the kernels take `totals - totals` as their zero (NaN from garbage)
        totals = np.zeros((hists.shape[0], hists.shape[2]), hists.dtype)
        live_ptr = np.zeros(len(lives) + 1, np.int64)
        np.cumsum([lv.features.size for lv in lives], out=live_ptr[1:])
        live = np.concatenate([lv.features for lv in lives])
        work = sum(lv.values for lv in lives) * hists.shape[2]
        parallel = self._team(work // _PARALLEL_MIN_VALUES) > 1
        kernel = sparse.fix_histograms if parallel else sparse.fix_histograms_serial
        kernel(hists, self.offsets, self.default_slots, live_ptr, live, totals)

    def subtract_histograms(self, parents: list[int], built: list[int],
                            targets: list[int]) -> None:
        lives = [self._live[t] for t in targets]
        out = self._empty((len(targets), *self._hist_shape), self.hist_dtype)
        flat = out.reshape(len(targets), -1)
        width = flat.shape[1] // self.total_bins
        work = sum(lv.values for lv in lives) * width
        kernel = (sparse.subtract_ranges
                  if self._team(work // _PARALLEL_MIN_VALUES) > 1
                  else sparse.subtract_ranges_serial)
        for j, (p, b, live) in enumerate(zip(parents, built, lives, strict=True)):
            kernel(self._hists.stack([p]).reshape(-1), self._hists.stack([b]).reshape(-1),
                   flat[j], live.lo, live.hi, width)
        self._hists.store(targets, out)
        self._hists.release(parents)

    # -- split search --------------------------------------------------------------------
    def _refine(self, node: int, hist: np.ndarray, H: float, C: float, reg: np.ndarray
                ) -> _Live:
        """The node's live features that stay live (see the module docstring)."""
        live = self._live[node]
        if not self._prune:
            return live
        ok = np.empty(live.features.size, np.bool_)
        q = self._quantisation
        sparse.splittable_features(hist, live.features, self.default_slots, H, C,
                                   1.0 if q is None else float(q.h_scale),
                                   float(reg[split.P_MCW]), float(reg[split.P_MIN_DATA]),
                                   self._tol, ok)
        ok[0] = True  # feature 0 carries the node total
        if ok.all():
            return live
        return _Live(live.features[ok], self.offsets)

    def _float_live(self, hist: np.ndarray, live: _Live) -> np.ndarray:
        """(1, total_bins, C) float64 histogram in gradient units, meaningful in the live
        slots: the stored one itself for float trees."""
        q = self._quantisation
        if q is None:
            return hist[None]
        if hist.ndim == 1:  # packed
            out = self._empty((1, self.total_bins, 2), np.float64)
            sparse.unpack_ranges(hist, q.g_scale, q.h_scale, live.lo, live.hi, out[0])
            return out
        out = self._empty((1, *hist.shape), np.float64)
        scales = np.array([q.g_scale, q.h_scale, 1.0][:hist.shape[1]])
        sparse.scale_ranges(hist, scales, live.lo, live.hi, out[0])
        return out

    def find_best_splits(self, nodes: list[int], totals: np.ndarray, feature_masks: np.ndarray,
                         reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        totals = np.ascontiguousarray(totals, np.float64)
        masks = np.ascontiguousarray(feature_masks, np.bool_)
        out = np.zeros((len(nodes), split.REC_WIDTH), np.float64)
        for j, node in enumerate(nodes):
            hist = self._hists.stack([node])[0]
            refined = self._refined[node] = self._refine(node, hist, float(totals[j, 1]),
                                                         float(totals[j, 2]), reg)
            mask = np.zeros((1, self.n_features), np.bool_)
            mask[0, refined.features] = masks[j, refined.features]
            if monotone is None:
                out[j] = split.search(self._float_live(hist, refined), totals[j:j + 1],
                                      self.offsets, mask, reg, parallel=False)[0]
            else:
                cons, lower, upper = monotone
                out[j] = split.monotone_search(self._float_live(hist, refined),
                                               totals[j:j + 1], self.offsets, mask, reg,
                                               (cons, lower[j:j + 1], upper[j:j + 1]))[0]
        return out

    def oblivious_gains(self, nodes: list[int], totals: np.ndarray, feature_mask: np.ndarray,
                        reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        # live sets are not refined here: evaluate_split may read the level's feature in any
        # of its nodes
        mask = np.zeros(self.n_features, np.bool_)
        for j, node in enumerate(nodes):
            hist = self._hists.stack([node])[0]
            live = self._refine(node, hist, float(totals[j, 1]), float(totals[j, 2]), reg)
            mask[live.features] = True
        return super().oblivious_gains(nodes, totals, mask & feature_mask, reg, monotone)

    def apply_splits(self, parents: list[int], lefts: list[int], rights: list[int],
                     records: np.ndarray) -> np.ndarray:
        counts = super().apply_splits(parents, lefts, rights, records)
        for p, left, right in zip(parents, lefts, rights, strict=True):
            live = self._refined.pop(p, None) or self._live[p]
            self._live[left] = self._live[right] = live
            del self._live[p]  # a split node is not searched again
        return counts

    # -- partition -----------------------------------------------------------------------
    def _partition(self, bounds: list[tuple[int, int]], features: np.ndarray,
                   split_bins: np.ndarray, default_left: np.ndarray) -> np.ndarray:
        sb = self.sbins
        starts = np.array([b[0] for b in bounds], np.int64)
        ends = np.array([b[1] for b in bounds], np.int64)
        n_left = np.zeros(starts.shape[0], np.int64)
        small = []
        for k in range(starts.shape[0]):
            n_rows = int(ends[k] - starts[k])
            chunks = (self._partition_chunks(n_rows) if n_rows >= _PARTITION_CHUNKED_MIN_ROWS
                      else 1)
            if chunks == 1:
                small.append(k)
                continue
            self._team(chunks)
            f = int(features[k])
            n_left[k] = sparse.partition_node_chunked(
                sb.col_rows, sb.col_bins, sb.col_ptr[f], sb.col_ptr[f + 1], self.rows,
                starts[k], ends[k], split_bins[k], self.missing_bins[f], default_left[k],
                self.default_bins[f], chunks, self._scratch, self._partition_counts)
        if small:
            idx = np.array(small)
            sub = np.zeros(idx.size, np.int64)
            threads = self._team(min(idx.size, int((ends[idx] - starts[idx]).sum())
                                     // dense_backend._PARTITION_THREAD_MIN_ROWS))
            kernel = sparse.partition_nodes if threads > 1 else sparse.partition_nodes_serial
            kernel(sb.col_ptr, sb.col_rows, sb.col_bins, self.rows, starts[idx], ends[idx],
                   features[idx], split_bins[idx], self.missing_bins, self.default_bins,
                   default_left[idx], self._scratch, sub)
            n_left[idx] = sub
        return n_left

    # -- margins -------------------------------------------------------------------------
    def update_margin(self, tree: Tree, leaves: list[int], values: np.ndarray,
                      output: int) -> None:
        if self._uses_all_rows:
            super().update_margin(tree, leaves, values, output)
            return
        if tree.class_index != output:
            raise ValueError(f"tree of output {tree.class_index} added to output {output}")
        self._team(self.n_threads)
        pf = PackedForest([tree])
        sb = self.sbins
        sparse_predict.predict_margin_binned(
            sb.indptr, sb.slots, self.offsets, self.default_bins, self.missing_bins, 0, 1,
            pf.tree_class, pf.left, pf.right, pf.feature, pf.split_bin, pf.default_left,
            pf.value, pf.node_ptr, pf.level_ptr, pf.obl_feature, pf.obl_bin,
            pf.obl_default_left, pf.leaf_ptr, pf.obl_leaf_value, self._margin)
