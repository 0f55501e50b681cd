"""CPU implementation of `histboost.kernels.backend.Backend` over the Numba kernels."""

from __future__ import annotations

import numba as nb
import numpy as np

from . import histogram, partition, predict, split

# Nodes with at least this many rows are histogrammed / partitioned by all threads, each
# thread taking a chunk of the rows; smaller nodes go one thread per node, several at once,
# and a call whose nodes hold fewer rows in all runs on one thread: waking the thread team
# costs more than it saves there, and on a busy machine every parallel region waits for a
# time slice on each core. Partitioning a row is ~10x cheaper than histogramming it.
_CHUNKED_MIN_ROWS = 4_096
# measured on 2 threads: from 16k rows the one-pass chunked partition beats the serial one
# (1.2 vs 1.7 ns/row at 16k-64k rows, 0.9 vs 1.4 ns/row on the root)
_PARTITION_CHUNKED_MIN_ROWS = 16_384


class CPUBackend:
    """Kernels on host memory.

    bins: (n, F) uint8/uint16 C-ordered; bin_offsets: int64 (F+1,). The histogram kernel
    reads a row-major copy holding global slot indices, the partition a column-major copy.
    quantized: gradient pairs arrive as int32 (n, 2); histograms are then exact int64 sums,
    packed into one int64 per slot when the tree's totals fit (see `kernels.cpu.histogram`).
    count_rows: histograms carry per-slot row counts as a third channel (for
    min_data_in_leaf); otherwise the split search estimates child counts from hessians.
    """

    name = "cpu"

    def __init__(self, bins: np.ndarray, bin_offsets: np.ndarray, n_threads: int,
                 quantized: bool, count_rows: bool = False) -> None:
        self.bins = bins
        self.columns = np.ascontiguousarray(bins.T)
        self.offsets = np.ascontiguousarray(bin_offsets, dtype=np.int64)
        self.slots = np.empty(bins.shape, np.uint16 if self.offsets[-1] <= 65536 else np.uint32)
        histogram.global_slots(bins, self.offsets, self.slots)
        self.missing_bins = (self.offsets[1:] - 1 - self.offsets[:-1]).astype(np.int32)
        self.total_bins = int(self.offsets[-1])
        self.n_threads = max(1, int(n_threads))
        self.quantized = quantized
        self.count_rows = count_rows
        self._channels = 3 if count_rows else 2
        self.hist_dtype = np.dtype(np.int64 if quantized else np.float64)
        self.rows = np.zeros(0, np.int32)
        self._scratch = np.zeros(0, np.int32)
        self.gh: np.ndarray = np.zeros((0, 2), np.float32)
        self._hist_shape: tuple[int, ...] = (self.total_bins, 2)
        self._chunk_buffers = np.zeros((0,), self.hist_dtype)

    def _threads(self, parallel: bool = True) -> int:
        n = min(self.n_threads if parallel else 1, nb.config.NUMBA_NUM_THREADS)
        nb.set_num_threads(n)
        return n

    def begin_tree(self, gh: np.ndarray, rows: np.ndarray) -> None:
        if self.quantized:
            gh = np.ascontiguousarray(gh, dtype=np.int32)
            used = gh  # all rows: a bound for any sample of them, without a gather
            # packed sums are exact while every node's |sum g| < 2**31 and sum h < 2**32
            if (not self.count_rows
                    and int(np.abs(used[:, 0], dtype=np.int64).sum()) < 2**31
                    and int(used[:, 1].astype(np.int64).sum()) < 2**32
                    and int(used[:, 1].min(initial=0)) >= 0):
                packed = np.empty(gh.shape[0], np.int64)
                histogram.pack_pairs(gh, packed)
                gh = packed
        self.gh = gh
        self._hist_shape = ((self.total_bins,) if gh.ndim == 1
                            else (self.total_bins, self._channels))
        shape = (self.n_threads, *self._hist_shape)
        if self._chunk_buffers.shape != shape:
            self._chunk_buffers = np.zeros(shape, self.hist_dtype)
        # the row and scratch arrays are reused from tree to tree: fresh ones would take a
        # page fault per 4 KiB on their first writes, every tree
        if self.rows.shape != rows.shape:
            self.rows = np.empty(rows.shape, np.int32)
            self._scratch = np.empty(rows.shape, np.int32)
        np.copyto(self.rows, rows)

    def build_histograms(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        if len(starts) == 1:  # best-first growth: one node a call, without the batching below
            start, end = int(starts[0]), int(ends[0])
            out = np.empty((1, *self._hist_shape), self.hist_dtype)
            if self._threads(end - start >= _CHUNKED_MIN_ROWS) > 1:
                histogram.build_histogram_chunked(self.slots, self.gh, self.rows, start, end,
                                                  self._chunk_buffers, out[0])
            else:
                histogram.build_histograms(self.slots, self.gh, self.rows,
                                           np.array([start], np.int64),
                                           np.array([end], np.int64), out)
            return out
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        threads = self._threads(int((ends - starts).sum()) >= _CHUNKED_MIN_ROWS)
        out = np.empty((starts.shape[0], *self._hist_shape), self.hist_dtype)
        big = (ends - starts) >= _CHUNKED_MIN_ROWS
        if threads > 1:
            for k in np.flatnonzero(big):
                histogram.build_histogram_chunked(self.slots, self.gh, self.rows, starts[k],
                                                  ends[k], self._chunk_buffers, out[k])
            small = np.flatnonzero(~big)
        else:
            small = np.arange(starts.shape[0])
        if small.size == starts.shape[0]:
            histogram.build_histograms(self.slots, self.gh, self.rows, starts, ends, out)
        elif small.size:
            sub = np.empty((small.size, *self._hist_shape), self.hist_dtype)
            histogram.build_histograms(self.slots, self.gh, self.rows, starts[small],
                                       ends[small], sub)
            out[small] = sub
        return out

    def subtract_histograms(self, parents: np.ndarray, children: np.ndarray) -> np.ndarray:
        out = np.empty_like(parents)
        k = parents.shape[0]
        histogram.subtract_histograms(parents.reshape(k, -1), children.reshape(k, -1),
                                      out.reshape(k, -1))
        return out

    def to_float(self, hists: np.ndarray, g_scale: float, h_scale: float) -> np.ndarray:
        if hists.ndim == 2:  # packed quantised sums
            out = np.empty((*hists.shape, 2), np.float64)
            histogram.unpack_to_float(hists, g_scale, h_scale, out)
            return out
        if hists.dtype == np.float64 and g_scale == 1.0 and h_scale == 1.0:
            return hists
        # scales are powers of two, so these products and all later sums are exact
        return hists.astype(np.float64) * np.array([g_scale, h_scale, 1.0][:hists.shape[2]])

    def find_best_splits(self, hists: np.ndarray, totals: np.ndarray,
                         feature_masks: np.ndarray, reg: np.ndarray) -> np.ndarray:
        # nodes run in parallel; scanning a slot costs about as much as histogramming a row
        # (20-40 us per node here), so two nodes already pay for the parallel launch
        self._threads(hists.shape[0] > 1
                      and hists.shape[0] * self.total_bins >= _CHUNKED_MIN_ROWS)
        out = np.zeros((hists.shape[0], split.REC_WIDTH), np.float64)
        split.find_best_splits(hists, np.ascontiguousarray(totals, np.float64), self.offsets,
                               feature_masks, reg, out)
        return out

    def oblivious_gains(self, hists: np.ndarray, totals: np.ndarray, feature_mask: np.ndarray,
                        reg: np.ndarray) -> np.ndarray:
        self._threads(hists.shape[0] * self.total_bins // 4 >= _CHUNKED_MIN_ROWS)
        out = np.empty((self.total_bins, 2), np.float64)
        split.oblivious_gain_table(hists, np.ascontiguousarray(totals, np.float64),
                                   self.offsets, feature_mask, reg, out)
        return out

    def partition(self, starts: np.ndarray, ends: np.ndarray, features: np.ndarray,
                  split_bins: np.ndarray, default_left: np.ndarray) -> np.ndarray:
        if len(starts) == 1 and (ends[0] - starts[0] < _PARTITION_CHUNKED_MIN_ROWS
                                 or self.n_threads < 2):
            # one node that chunks would not speed up (best-first growth splits one at a
            # time): the serial kernel, without the parallel launch and bookkeeping below
            f = int(features[0])
            n = partition.partition_range(self.columns[f], self.rows, int(starts[0]),
                                          int(ends[0]), int(split_bins[0]),
                                          int(self.missing_bins[f]), bool(default_left[0]),
                                          self._scratch)
            return np.array([n], np.int64)
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        threads = self._threads(int((ends - starts).sum()) >= _PARTITION_CHUNKED_MIN_ROWS)
        features = np.asarray(features, dtype=np.int32)
        split_bins = np.asarray(split_bins, dtype=np.int32)
        default_left = np.asarray(default_left, dtype=np.uint8)
        n_left = np.zeros(starts.shape[0], np.int64)
        big = ((ends - starts) >= _PARTITION_CHUNKED_MIN_ROWS) & (threads >= 2)
        counts = np.zeros(self.n_threads, np.int64)
        for k in np.flatnonzero(big):
            f = features[k]
            n_left[k] = partition.partition_node_chunked(
                self.columns[f], self.rows, starts[k], ends[k], split_bins[k],
                self.missing_bins[f], default_left[k], self.n_threads, self._scratch, counts)
        small = np.flatnonzero(~big)
        if small.size:
            sub = np.zeros(small.size, np.int64)
            partition.partition_nodes(self.columns, self.rows, starts[small], ends[small],
                                      features[small], split_bins[small], self.missing_bins,
                                      default_left[small], self._scratch, sub)
            n_left[small] = sub
        return n_left

    def add_leaf_values(self, starts: np.ndarray, ends: np.ndarray, values: np.ndarray,
                        margin: np.ndarray, column: int) -> None:
        self._threads(int(self.rows.shape[0]) >= _PARTITION_CHUNKED_MIN_ROWS)
        predict.add_leaf_values(self.rows, np.asarray(starts, np.int64),
                                np.asarray(ends, np.int64), np.asarray(values, np.float64),
                                margin, column)
