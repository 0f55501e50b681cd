"""`SparseCPUBackend`: the CPU backend over the sparse layout of
`histboost.data.sparse.SparseBins` (kernels: `histboost.kernels.cpu.sparse`).

Everything but the layout-bound steps is `CPUBackend`'s: gradients, histogram storage and
subtraction, split search, margins. Histograms are built over the stored slots of a node's rows
(time proportional to its stored values), then each feature's default bin is fixed from the node
total; the partition reads the split feature's column of non-default entries.
"""

from __future__ import annotations

import numpy as np

from ...tree.predictor import PackedForest
from ...tree.tree import Tree
from . import sparse, sparse_predict
from .backend import _HISTOGRAM_THREAD_MIN_ROWS, _PARTITION_THREAD_MIN_ROWS, CPUBackend

# the row chunks of a large node's histogram each zero and add a scratch histogram of all the
# slots: at most one chunk per this many (stored values / histogram values), so that the
# scratch work stays below the sums (a function of the node and the data only, as the chunk
# count of the dense layout: float models do not depend on the threads)
_VALUES_PER_CHUNK_SLOT = 1
# fixing default bins: run in parallel from this many histogram values
_FIX_PARALLEL_VALUES = 1 << 17


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

    def release(self) -> None:
        super().release()
        self.sbins = None

    # -- histograms ----------------------------------------------------------------------
    def _sparse_chunks(self, n_rows: int) -> int:
        """The dense layout's chunk count, lowered while a chunk's stored values do not
        outweigh its scratch histogram."""
        chunks = self._sum_chunks(n_rows)
        slot_values = int(np.prod(self._hist_shape))
        while chunks > 1 and (n_rows * self._values_per_row / chunks
                              < _VALUES_PER_CHUNK_SLOT * slot_values):
            chunks //= 2
        return chunks

    def _build_ranges(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        sb = self.sbins
        out = np.empty((starts.shape[0], *self._hist_shape), self.hist_dtype)
        chunks = [self._sparse_chunks(int(e - s)) for s, e in zip(starts, ends, strict=True)]
        batch = [k for k, c in enumerate(chunks) if c == 1]
        for k, c in enumerate(chunks):
            if c == 1:
                continue
            if self._chunk_buffers.shape[0] < c:
                self._chunk_buffers = np.zeros((c, *self._hist_shape), self.hist_dtype)
            s, e = int(starts[k]), int(ends[k])
            if self._team(c) > 1:
                sparse.build_histogram_chunked(sb.indptr, sb.slots, self.gh, self.rows, s, e,
                                               self._chunk_buffers[:c], out[k])
            else:
                sparse.build_histogram_chunked_serial(sb.indptr, sb.slots, self.gh, self.rows,
                                                      s, e, c, self._chunk_buffers[0], out[k])
        if batch:
            idx = np.array(batch)
            sub = out if len(batch) == len(chunks) else np.empty(
                (idx.size, *self._hist_shape), self.hist_dtype)
            threads = self._team(min(idx.size, int((ends[idx] - starts[idx]).sum())
                                     // _HISTOGRAM_THREAD_MIN_ROWS))
            kernel = sparse.build_histograms if threads > 1 else sparse.build_histograms_serial
            kernel(sb.indptr, sb.slots, self.gh, self.rows, starts[idx], ends[idx], sub)
            if sub is not out:
                out[idx] = sub
        self._fix(out)
        return out

    def _fix(self, out: np.ndarray) -> None:
        """Every feature's default bin from the node total (see `kernels.cpu.sparse`)."""
        hists = out.reshape(out.shape[0], out.shape[1], -1)
        totals = np.empty((hists.shape[0], hists.shape[2]), hists.dtype)
        parallel = self._team(hists.size // _FIX_PARALLEL_VALUES) > 1
        kernel = sparse.fix_histograms if parallel else sparse.fix_histograms_serial
        kernel(hists, self.offsets, self.default_slots, totals)

    # -- partition -----------------------------------------------------------------------
    def _partition(self, bounds: list[tuple[int, int]], features: np.ndarray,
                   split_bins: np.ndarray, default_left: np.ndarray) -> np.ndarray:
        sb = self.sbins
        starts = np.array([b[0] for b in bounds], np.int64)
        ends = np.array([b[1] for b in bounds], np.int64)
        n_left = np.zeros(starts.shape[0], np.int64)
        small = []
        for k in range(starts.shape[0]):
            chunks = self._partition_chunks(int(ends[k] - starts[k]))
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
                                     // _PARTITION_THREAD_MIN_ROWS))
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

