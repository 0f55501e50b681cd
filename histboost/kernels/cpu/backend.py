"""CPU implementation of `histboost.kernels.backend.Backend` over the Numba kernels."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import numba as nb
import numpy as np

from ...tree.predictor import PackedForest
from ...tree.quantize import Quantisation
from ...tree.tree import Tree
from ..backend import ComposedSteps
from ..nodes import HistogramStore, NodeRanges
from . import gradients, histogram, partition, predict, quantize, split

# Every call is cut into work items sized from the thread count and the work, all run in one
# parallel region (a step of several nodes included), and calls too small to pay for a
# parallel region run the same kernel body serially: waking the threads of a parallel region
# costs tens of microseconds on a many-core machine, as much as building a small node's
# histogram, and on a busy machine every parallel region waits for a time slice on each of
# its cores.
#
# Histograms: a node of n >= _CHUNKED_MIN_ROWS rows is summed in row chunks, each in row order,
# then the chunks in chunk order. The chunk count is the largest power of two whose square is
# at most 4n / _CHUNKED_MIN_ROWS (2 at 4k rows, 4 at 16k, 8 at 64k, 16 at 256k; at most
# _MAX_SUM_CHUNKS): it follows from the node's size alone, so float histograms, and the
# models, are the same for any thread count. Each chunk costs a zeroed scratch histogram and
# its share of the reduction (~6 us at 28 x 256 slots, ~10% of a 2k-row chunk's sums): the
# square root keeps chunks of 2-4k rows on small nodes and grows them on large ones, where the
# overhead would add up. The threads' work items split a node's chunks further into feature
# blocks (each item sums its chunk's rows into its block's slots: no reduction, no change to
# any sum), as many as the thread count asks of the node's share of the call's rows: a small
# node of a best-first step keeps every thread busy.
_CHUNKED_MIN_ROWS = 4_096
_MAX_SUM_CHUNKS = 64
_MAX_CHUNK_BUFFER_BYTES = 256 << 20
# a call builds its histograms in parallel when that saves the time of this many rows, the
# rows all threads but one take off the calling thread (about a parallel region's cost:
# 4k rows on 2 threads, 2.2k on 16)
_HISTOGRAM_THREAD_MIN_ROWS = 2_048
# work items per thread of a parallel histogram call (threads take them dynamically, largest
# first), at least this many (row, feature) values each and at least this many features a
# block (a row's slots are read once per block: more blocks, more reads of each row)
_HISTOGRAM_ITEMS_PER_THREAD = 1
_HISTOGRAM_ITEM_MIN_VALUES = 8_192
_HISTOGRAM_BLOCK_MIN_FEATURES = 3
# a chunked node's chunk sums are added in pieces of at least this many values per thread;
# a call's only reduction of up to _REDUCE_SERIAL_MAX_VALUES values (4 chunks of 28 x 256
# slots of float pairs) runs on the calling thread (~20 us, less than a parallel launch)
_REDUCE_ITEM_MIN_VALUES = 8_192
_REDUCE_SERIAL_MAX_VALUES = 65_536
# partition: a call of at least this many rows runs in parallel, its nodes cut into chunks of
# at least _PARTITION_THREAD_MIN_ROWS rows, about one per thread (measured on 2 threads: from
# 16k rows the one-pass chunked partition beats the serial one, 1.2 vs 1.7 ns/row at 16k-64k
# rows). Partitions are exact, so their chunking may follow the thread count.
_PARTITION_CHUNKED_MIN_ROWS = 16_384
_PARTITION_THREAD_MIN_ROWS = 4_096
# split search: (node, feature) items in parallel when that saves scanning this many
# histogram slots (as for histograms: a slot costs about as much as histogramming a row, 20-40
# us for a node of 28 x 256 slots)
_SPLIT_THREAD_MIN_SLOTS = 4_096
# once-a-tree row kernels (gradients, quantisation, margin updates): one thread per this many
# rows (a parallel loop wakes the whole pool: only once half of it has rows)
_ROW_KERNEL_THREAD_MIN_ROWS = 16_384
# elementwise histogram work (sibling subtraction, unpacking quantised sums): in parallel
# when the threads but one take this many values off the calling thread, in pieces of at
# least _ELEMENTWISE_ITEM_MIN_VALUES values (a launch costs ~8 us on the 16-core host, a value
# about 1 ns on one thread; the former rule, one thread per 2^17 values of the call, kept the
# subtraction of up to 9 histogram pairs on the calling thread: 160 us a call there, and a
# node's unpacking always on one thread, 210 us)
_ELEMENTWISE_THREAD_MIN_VALUES = 32_768
_ELEMENTWISE_ITEM_MIN_VALUES = 4_096
# below this many rows a backend runs every kernel on the calling thread: no call of such data
# gains more from a parallel region than it costs to wake one, and a first run in a fresh
# environment does not compile the parallel kernels (about 5 s of its ~10 s compiling on the
# development machine; docs/compile_cache.md)
_PARALLEL_MIN_ROWS = 16_384
# histogram arrays kept for reuse (`_HistogramBuffers`), those in use included
_HISTOGRAM_POOL_BYTES = 256 << 20


class _HistogramBuffers:
    """Histogram-sized arrays for reuse. A fresh array of a few hundred KiB comes from mmap,
    or from heap the allocator has just given back, and pays a page fault per 4 KiB on its
    first writes: measured 120 us for a pair of 28 x 256-slot histograms, ten times the
    subtraction that fills them. An array of k histograms is a view of the first k rows of
    a pooled array of the next power of two rows (the steps of a tree have many node counts:
    kept by exact shape, depth-wise growth with a leaf limit allocated 20 MB of fresh
    buffers a tree, 200k x 28 rows, 256 bins). A pooled array is free again once nothing
    refers to it or to a view of it (the histogram store released its nodes). Free arrays
    are dropped once the pool holds more than _HISTOGRAM_POOL_BYTES."""

    def __init__(self) -> None:
        self._bufs: dict[tuple, list[np.ndarray]] = {}
        self._bytes = 0

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        if shape[0] == 0:
            return np.empty(shape, dtype)
        rows = 1 << (shape[0] - 1).bit_length()
        bufs = self._bufs.setdefault(((rows, *shape[1:]), dtype.str), [])
        for buf in bufs:
            # references: the list, this loop's name and getrefcount's argument (a view
            # handed out holds one more)
            if sys.getrefcount(buf) <= 3:
                return buf[:shape[0]]
        buf = np.empty((rows, *shape[1:]), dtype)
        if self._bytes + buf.nbytes > _HISTOGRAM_POOL_BYTES:
            self._drop_free()
        bufs.append(buf)
        self._bytes += buf.nbytes
        return buf[:shape[0]]

    def _drop_free(self) -> None:
        for bufs in self._bufs.values():
            bufs[:] = [b for b in bufs if sys.getrefcount(b) > 3]
        self._bytes = sum(b.nbytes for bufs in self._bufs.values() for b in bufs)


class CPUBackend(ComposedSteps):
    """Kernels on host memory (see `histboost.kernels.backend.Backend`).

    bins: (n, F) uint8/uint16 C-ordered; bin_offsets: int64 (F+1,); label: float64 (n,);
    weight: float64 (n,) or None; n_outputs: margins per row (K). The histogram kernel reads
    a row-major copy holding global slot indices, the partition a column-major copy.
    count_rows: histograms carry per-slot row counts as a third channel (for
    min_data_in_leaf); otherwise the split search estimates child counts from hessians.
    Quantised trees have exact int64 histograms, packed into one int64 per slot when the
    tree's totals fit (see `kernels.cpu.histogram`) and `pack`; float trees float64 ones.
    pack=False keeps (k, total_bins, C) int64 histograms whatever the totals; pack_rows > 0
    (the rows of all workers) decides the layout from the a priori bound (max_value + 1) x
    pack_rows on every sum instead of this backend's sums, so that workers whose histograms
    a distributed wrapper adds up choose one layout and their packed sums cannot overflow.
    row_ids: int64 (n,) global index of each row, the counter of its stochastic rounding
    (None: 0..n-1), so a worker holding part of the rows rounds them as one process would.
    raw: the raw matrix (n, F) float32/float64 the bins were made from (the same columns), or
    None. A tree grown on a sample of the rows adds its values to every row's margin by
    traversing it: on the raw values when raw is given and the data small (the traversal
    that prediction and evaluation sets compile anyway: a first run compiles one traversal
    kernel instead of two, docs/compile_cache.md), else on the bins (an eighth of the bytes
    of float64 values). Both rules give every row the same leaf.
    """

    name = "cpu"
    row_rounding = 0.0

    def __init__(self, bins: np.ndarray, bin_offsets: np.ndarray, n_threads: int,
                 label: np.ndarray | None = None, weight: np.ndarray | None = None,
                 n_outputs: int = 1, count_rows: bool = False, pack: bool = True,
                 row_ids: np.ndarray | None = None, pack_rows: int = 0,
                 raw: np.ndarray | None = None) -> None:
        self._bins = bins
        self._raw = (raw if isinstance(raw, np.ndarray) and raw.shape == bins.shape
                     and bins.shape[0] < _PARALLEL_MIN_ROWS else None)
        # replaced columns not yet copied into _bins: (features, their bins (n, k)); the
        # histograms read slots, so the row-major bins are needed only to traverse a tree
        # over sampled rows and to refresh a column-major copy (see replace_columns)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._stale = np.zeros(bins.shape[1], bool)  # columns behind bins (replace_columns)
        self.offsets = np.ascontiguousarray(bin_offsets, dtype=np.int64)
        self.bin_offsets = self.offsets
        self.n_threads = max(1, int(n_threads))
        self.n_rows = int(bins.shape[0])
        # the parallel kernels' threads (`_pool`, read several times a step)
        self._threads = (1 if self.n_rows < _PARALLEL_MIN_ROWS
                         else max(1, min(self.n_threads, nb.config.NUMBA_NUM_THREADS)))
        self.slots = np.empty(bins.shape, np.uint16 if self.offsets[-1] <= 65536 else np.uint32)
        self._claim_pool()
        self.columns = partition.column_major(bins, threads=self._pool())
        histogram.global_slots(bins, self.offsets, self.slots, threads=self._pool())
        self.missing_bins = (self.offsets[1:] - 1 - self.offsets[:-1]).astype(np.int32)
        self.total_bins = int(self.offsets[-1])
        self.n_features = int(bins.shape[1])
        self.n_outputs = int(n_outputs)
        self.label = None if label is None else np.ascontiguousarray(label, np.float64)
        self.weight = None if weight is None else np.ascontiguousarray(weight, np.float64)
        self.count_rows = count_rows
        self.pack = pack
        self.pack_rows = int(pack_rows)
        self.row_ids = (np.zeros(0, np.int64) if row_ids is None
                        else np.ascontiguousarray(row_ids, np.int64))
        if row_ids is not None and self.row_ids.shape != (self.n_rows,):
            raise ValueError(f"row_ids must have shape ({self.n_rows},), got "
                             f"{self.row_ids.shape}")
        self._channels = 3 if count_rows else 2
        self._margin = np.zeros((self.n_rows, self.n_outputs), np.float64)
        self._pairs = np.zeros((self.n_outputs, self.n_rows, 2), np.float32)
        self._quantised = np.zeros((0, 2), np.int32)
        self._packed = np.zeros(0, np.int64)
        self._all_rows = np.arange(self.n_rows, dtype=np.int32)
        self.rows = np.zeros(0, np.int32)
        self._scratch = np.zeros(0, np.int32)
        self.gh: np.ndarray = np.zeros((0, 2), np.float32)
        self._uses_all_rows = True
        self._growing = False  # between begin_tree and update_margin
        self._quantisation: Quantisation | None = None
        self.hist_dtype = np.dtype(np.float64)
        self._hist_shape: tuple[int, ...] = (self.total_bins, 2)
        self._hists = HistogramStore(np.stack)
        self._hist_buffers = _HistogramBuffers()
        self._float_memo: tuple[tuple[int, ...], np.ndarray, tuple[int, int] | None] | None = None
        self._ranges = NodeRanges()
        self._chunk_buffers = np.zeros((0,), self.hist_dtype)
        self._offsets_list: list[int] = self.offsets.tolist()
        self._hist_width = self.total_bins * 2
        # the work item of one node over all features (its rows set per call), and an empty
        # reduction table
        self._one_item = np.array([[0, 0, 0, 0, self.n_features, -1, 0, self.total_bins]],
                                  np.int64)
        self._no_reduces = np.zeros((0, histogram.RED_WIDTH), np.int64)
        self._max_chunks = 1
        self._partition_counts = np.zeros(max(2, self.n_threads), np.int64)

    # -- thread teams ---------------------------------------------------------------------
    def _team(self, limit: int) -> int:
        """Threads worth using on `limit` units of work (>= 1, at most nthread and Numba's
        pool): a caller runs its serial kernel on 1. The parallel kernels always get the
        whole pool (`_claim_pool`), splitting the work into at most this many units: Numba's
        OpenMP pool ends the threads a smaller team leaves out and starts them again for a
        larger one (measured with 16 threads on 2 cores: 1.3 ms a call alternating 2 and 16
        threads, 0.12 ms at 16 only)."""
        return max(1, min(self._threads, int(limit)))

    def _claim_pool(self) -> None:
        """Numba's thread count (per calling thread) to the pool, at the entry points that
        start work: construction, gradients, `begin_tree` (the calls of one tree follow it on
        the same thread) and `update_margin`. Once a tree rather than once a kernel call:
        setting it costs ~5 us, several times per split."""
        nb.set_num_threads(self._pool())

    def _run_rows(self, kernels: tuple, n: int, *args):
        """A once-a-tree row kernel over rows [0, n): kernels = (serial, parallel), called
        as serial(0, n, *args) on this thread for small n, else parallel(*args). Numba's
        parallel loops, not the Python thread pool: they run right after the split kernels'
        parallel loops, whose threads keep their cores busy for a few milliseconds (waiting
        for more work), so pool threads would have to wait for a core."""
        serial, parallel = kernels
        team = self._team(n // _ROW_KERNEL_THREAD_MIN_ROWS)
        if team > 1 and 2 * team >= self._pool():
            return parallel(*args)
        return serial(0, n, *args)

    def _pool(self) -> int:
        return self._threads

    def _elementwise_pieces(self, k: int, m: int) -> int:
        """Pieces per node of an elementwise pass over k nodes of m values each, run in
        parallel; 0: run it on this thread."""
        threads = self._pool()
        values = k * m
        if threads < 2 or values - values // threads < _ELEMENTWISE_THREAD_MIN_VALUES:
            return 0
        return max(1, min(-(-threads // max(k, 1)), m // _ELEMENTWISE_ITEM_MIN_VALUES))

    def _sum_chunks(self, n_rows: int) -> int:
        """Row chunks of a node's histogram: a function of its size only (see the top)."""
        if n_rows < _CHUNKED_MIN_ROWS:
            return 1
        root = math.isqrt(4 * n_rows // _CHUNKED_MIN_ROWS)
        return min(1 << (root.bit_length() - 1), self._max_chunks)

    def synchronize(self) -> None:
        """Nothing runs asynchronously on the CPU."""

    def release(self) -> None:
        self._hists.clear()
        self._hist_buffers = _HistogramBuffers()
        self._float_memo = None
        self.slots = self.columns = self._chunk_buffers = self._scratch = None  # type: ignore
        self._raw = None
        self._pending = []

    # -- margins and gradients ------------------------------------------------------------
    def set_margin(self, margin: np.ndarray) -> None:
        if margin.shape != self._margin.shape:
            raise ValueError(f"margin must have shape {self._margin.shape}, got {margin.shape}")
        np.copyto(self._margin, margin)

    def margin(self) -> np.ndarray:
        return self._margin

    def compute_gradients(self, loss: str) -> None:
        try:
            kernels = gradients.PAIR_KERNELS[loss]
        except KeyError:
            raise ValueError(f"the CPU backend has no gradient kernel for loss {loss!r}") \
                from None
        if self.label is None:
            raise ValueError("the backend holds no labels")
        self._claim_pool()
        self._run_rows(kernels, self.n_rows, self._margin, self.label, self.weight, self._pairs)

    def set_gradients(self, pairs: np.ndarray) -> None:
        if pairs.shape != self._pairs.shape:
            raise ValueError(f"gradient pairs must have shape {self._pairs.shape}, got "
                             f"{pairs.shape}")
        np.copyto(self._pairs, pairs, casting="same_kind")

    def gradients(self, output: int) -> np.ndarray:
        return self._pairs[output].copy()

    def gradient_bounds(self, output: int) -> tuple[float, float]:
        gh = self._pairs[output]
        if gh.shape[0] == 0:
            return 0.0, 0.0
        threads = self._team(gh.shape[0] // _ROW_KERNEL_THREAD_MIN_ROWS)
        if threads > 1 and 2 * threads >= self._pool():
            # one parallel loop, right after the gradients' (see `_run_rows`)
            blocks = np.empty((threads, 2), np.int32)
            quantize.pair_bounds(gh.view(np.int32), threads, blocks)
            top = blocks.max(axis=0).view(np.float32)
        else:  # NumPy over each column, no temporary (a reduction over axis 0 of the (n, 2)
            # array runs an inner loop of 2: ten times slower)
            top = [max(gh[:, c].max(), -gh[:, c].min()) for c in range(2)]
        return float(top[0]), float(top[1])

    # -- one tree -------------------------------------------------------------------------
    def begin_tree(self, output: int, rows: np.ndarray | None,
                   quantisation: Quantisation | None,
                   bounds: tuple[float, float] | None = None) -> int:
        # bounds: unused, float trees sum the float pairs themselves (row_rounding = 0)
        self._claim_pool()
        self._begin(self._pairs[output], self._all_rows if rows is None else rows,
                    quantisation)
        self._uses_all_rows = rows is None
        self._growing = True
        self._hists.clear()
        self._float_memo = None
        self._ranges.reset(self.rows.shape[0])
        return int(self.rows.shape[0])

    def _begin(self, gh: np.ndarray, rows: np.ndarray, quantisation: Quantisation | None
               ) -> None:
        """Take the tree's pairs and rows (int32 sorted): float32 (n, 2) pairs as they are;
        with a quantisation, float32 pairs are rounded to int32 (n, 2), packed into one int64
        per row when their sums fit; int32 (n, 2) pairs are taken as rounded already."""
        self._quantisation = quantisation
        if quantisation is not None:
            gh = self._quantise(gh, quantisation)
        self.gh = gh
        self.hist_dtype = np.dtype(np.float64 if quantisation is None else np.int64)
        self._hist_shape = ((self.total_bins,) if gh.ndim == 1
                            else (self.total_bins, self._channels))
        self._hist_width = int(np.prod(self._hist_shape))
        slot_bytes = self._hist_width * self.hist_dtype.itemsize
        cap = max(1, min(_MAX_SUM_CHUNKS, _MAX_CHUNK_BUFFER_BYTES // slot_bytes))
        self._max_chunks = 1 << (cap.bit_length() - 1)
        if (self._chunk_buffers.shape[1:] != self._hist_shape
                or self._chunk_buffers.dtype != self.hist_dtype):
            self._chunk_buffers = np.zeros((0, *self._hist_shape), self.hist_dtype)
        # the row and scratch arrays are reused from tree to tree: fresh ones would take a
        # page fault per 4 KiB on their first writes, every tree
        if self.rows.shape != rows.shape:
            self.rows = np.empty(rows.shape, np.int32)
            self._scratch = np.empty(rows.shape, np.int32)
        np.copyto(self.rows, rows)

    def _quantise(self, gh: np.ndarray, q: Quantisation) -> np.ndarray:
        """The tree's integer pairs of gh (float32 (n, 2) rounded here, or int32 (n, 2)):
        packed int64 (n,) when every node's |sum g| < 2**31 and sum h < 2**32 (all rows
        bound any sample of them), else int32 (n, 2). Rounded straight into the packed
        layout, one pass, when the a priori bound (max_value + 1) x rows allows it (pack_rows
        > 0: every worker's rows, so that workers choose alike) and no hessian is negative."""
        n = gh.shape[0]
        packable = not self.count_rows and self.pack
        a_priori = (q.max_value + 1) * (self.pack_rows if self.pack_rows > 0 else n) < 2**31
        if gh.dtype == np.float32:
            if packable and a_priori:
                if self._packed.shape[0] != n:
                    self._packed = np.empty(n, np.int64)
                # a distributed worker keeps the layout all workers chose (hessians >= 0)
                if self._round(gh, q, self._packed) == 0 or self.pack_rows > 0:
                    return self._packed
            if self._quantised.shape != gh.shape:
                self._quantised = np.empty(gh.shape, np.int32)
            self._round(gh, q, self._quantised)
            gh = self._quantised
        if not packable:
            return gh
        if self.pack_rows > 0:
            fits = a_priori
        else:
            fits = (int(np.abs(gh[:, 0], dtype=np.int64).sum()) < 2**31
                    and int(gh[:, 1].sum(dtype=np.int64)) < 2**32
                    and int(gh[:, 1].min(initial=0)) >= 0)
        if not fits:
            return gh
        if self._packed.shape[0] != n:
            self._packed = np.empty(n, np.int64)
        np.left_shift(gh[:, 0], 32, out=self._packed, dtype=np.int64)
        self._packed += gh[:, 1]
        return self._packed

    def _round(self, gh: np.ndarray, q: Quantisation, out: np.ndarray) -> int:
        """Stochastic rounding of float32 pairs gh into out (see `quantize`); returns the
        number of negative rounded hessians."""
        return int(self._run_rows(
            (quantize.quantize_gradients, quantize.quantize_gradients_parallel), gh.shape[0],
            gh, self.row_ids, q.g_inv_scale, q.h_inv_scale, np.uint64(q.key), out))

    def build_histograms(self, nodes: list[int]) -> np.ndarray:
        bounds = self._ranges.bounds(nodes)
        out = self._build_ranges(np.array([b[0] for b in bounds], np.int64),
                                 np.array([b[1] for b in bounds], np.int64))
        self._hists.store(nodes, out)
        self._float_memo = None
        return out

    def _build_ranges(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Histograms (k, *hist_shape) of the row ranges [starts[j], ends[j]) (int64), in
        groups of nodes whose chunk scratch fits _MAX_CHUNK_BUFFER_BYTES, one kernel call
        each."""
        out = self._hist_buffers.empty((starts.shape[0], *self._hist_shape), self.hist_dtype)
        starts_l, ends_l = starts.tolist(), ends.tolist()
        sizes = [e - s for s, e in zip(starts_l, ends_l, strict=True)]
        chunks = [self._sum_chunks(n) for n in sizes]
        if len(sizes) == 1:
            self._build_group(starts_l, sizes, chunks, out)
            return out
        cap = max(self._max_chunks, _MAX_CHUNK_BUFFER_BYTES
                  // (self._hist_width * self.hist_dtype.itemsize))
        first = 0
        while first < len(sizes):
            last, need = first, 0
            while last < len(sizes) and (last == first or need + chunks[last] <= cap):
                need += chunks[last] if chunks[last] > 1 else 0
                last += 1
            self._build_group(starts_l[first:last], sizes[first:last], chunks[first:last],
                              out[first:last])
            first = last
        return out

    def _build_group(self, starts: list[int], sizes: list[int], chunks: list[int],
                     out: np.ndarray) -> None:
        """One `histogram.build_histograms` call for nodes (starts, sizes, chunk counts)."""
        n_features = self.n_features
        offsets = self._offsets_list
        total = sum(sizes)
        threads = self._pool()
        parallel = threads > 1 and total - total // threads >= _HISTOGRAM_THREAD_MIN_ROWS
        if not parallel and len(sizes) == 1 and chunks[0] == 1:
            # one small node (best-first growth): one item over all features
            item = self._one_item
            item[0, histogram.ITEM_ROW_LO] = starts[0]
            item[0, histogram.ITEM_ROW_HI] = starts[0] + sizes[0]
            self._histograms(histogram.build_histograms_serial, self.slots, item,
                             self._no_reduces, 1, out)
            return
        item_values = max(_HISTOGRAM_ITEM_MIN_VALUES,
                          total * n_features // (threads * _HISTOGRAM_ITEMS_PER_THREAD))
        max_blocks = max(1, n_features // _HISTOGRAM_BLOCK_MIN_FEATURES)
        width = self._hist_width
        items: list[tuple[int, ...]] = []
        reduces: list[tuple[int, ...]] = []
        n_buffers = 0
        for k, (start, n, c) in enumerate(zip(starts, sizes, chunks, strict=True)):
            blocks = 1
            if parallel:
                wanted = -(-n * n_features // item_values)
                blocks = min(max_blocks, max(1, -(-wanted // c)))
            cuts = [n_features * b // blocks for b in range(blocks + 1)]
            for ci in range(c):
                lo, hi = start + n * ci // c, start + n * (ci + 1) // c
                dst = -1 if c == 1 else n_buffers + ci
                items += [(k, lo, hi, f0, f1, dst, offsets[f0], offsets[f1])
                          for f0, f1 in zip(cuts[:-1], cuts[1:], strict=True)]
            if c > 1:
                # one piece (added on the calling thread, no second parallel launch) when it
                # is the call's only reduction and small
                pieces = 1
                if parallel and (len(sizes) > 1 or c * width > _REDUCE_SERIAL_MAX_VALUES):
                    pieces = min(threads, max(1, c * width // _REDUCE_ITEM_MIN_VALUES))
                reduces += [(k, n_buffers, c, width * p // pieces, width * (p + 1) // pieces)
                            for p in range(pieces)]
                n_buffers += c
        if self._chunk_buffers.shape[0] < n_buffers:  # as many as the largest call needs
            self._chunk_buffers = np.zeros((n_buffers, *self._hist_shape), self.hist_dtype)
        reduce_table = (np.array(reduces, np.int64) if reduces else self._no_reduces)
        if parallel and len(items) > 1:
            # largest first, the threads take them in turns: items differ in size
            items.sort(key=lambda it: (it[2] - it[1]) * (it[3] - it[4]))
            self._histograms(histogram.build_histograms, self.slots, np.array(items, np.int64),
                             reduce_table, threads, out)
        else:
            self._histograms(histogram.build_histograms_serial, self.slots,
                             np.array(items, np.int64), reduce_table, 1, out)

    def _histograms(self, kernel: Callable, slots: np.ndarray, items: np.ndarray,
                    reduces: np.ndarray, workers: int, out: np.ndarray) -> None:
        """`histogram.build_histograms` or its serial twin over this backend's gradients,
        rows and chunk buffers."""
        kernel(slots, self.gh, self.rows, items, reduces, workers, self._chunk_buffers, out,
               histogram.flat(self._chunk_buffers), histogram.flat(out))

    def subtract_histograms(self, parents: list[int], built: list[int],
                            targets: list[int]) -> None:
        # both children of each parent into one buffer, in node-id order (siblings' rows
        # adjacent): the split search of a pair, or of a level, reads a view of it. The
        # parents are read where they are stored, not stacked (best-first growth splits
        # leaves of many steps together: a stacked copy of them cost as much as the rest)
        order, built_rows, target_rows = HistogramStore.pair_layout(built, targets)
        out = self._subtract_pairs([self._hists.histogram(i) for i in parents],
                                   self._hists.stack(built), built_rows, target_rows,
                                   self._hists.source(parents))
        self._hists.release(parents)
        self._hists.store(order, out)
        self._float_memo = None

    def _subtract_pairs(self, parents: list[np.ndarray] | np.ndarray, b: np.ndarray,
                        built_rows: list[int], target_rows: list[int],
                        source: tuple[np.ndarray, list[int]] | None = None) -> np.ndarray:
        """(2k, ...) histograms: row target_rows[j] = parents[j] - b[j], row built_rows[j] =
        b[j]. parents: k histograms, an array (k, ...) or views; source: (buffer, rows) when
        they are those rows of one buffer (an array `parents` is its own source)."""
        k = b.shape[0]
        out = self._hist_buffers.empty((2 * k, *b.shape[1:]), b.dtype)
        m = b[0].size
        pieces = self._elementwise_pieces(k, m)
        if pieces == 0:
            histogram.subtract_pairs_numpy(parents, b, built_rows, target_rows, out)
            return out
        if isinstance(parents, np.ndarray):
            source = (parents, list(range(k)))
        flat = out.reshape(2 * k, -1)
        if source is not None and source[0].flags.c_contiguous:
            src, rows = source[0].reshape(source[0].shape[0], -1), source[1]
        else:  # parents of several buffers: each copied to its sibling's row, used there
            for j, t in enumerate(target_rows):
                np.copyto(out[t], parents[j])
            src, rows = flat, target_rows
        histogram.subtract_pairs(src, np.array(rows, np.int64), b.reshape(k, -1),
                                 np.array(built_rows, np.int64), np.array(target_rows, np.int64),
                                 pieces, flat)
        return out

    def _float_histograms(self, nodes: list[int], slots: tuple[int, int] | None = None
                          ) -> np.ndarray:
        """float64 (k, total_bins, C) histograms of `nodes` in gradient units; with `slots`
        (lo, hi), only those slots are converted (the others hold anything). The last result
        is kept until histograms change: the split search and the totals (or the oblivious
        gain table and the split's left sums) read the same nodes in a row."""
        key = tuple(nodes)
        memo = self._float_memo
        if memo is not None and memo[0] == key and (
                memo[2] is None or slots is not None and memo[2][0] <= slots[0]
                and slots[1] <= memo[2][1]):
            return memo[1]
        stacked = self._hists.stack(nodes)
        hists = self._to_float(stacked) if slots is None else self._to_float(stacked, slots)
        self._float_memo = (key, hists, slots)
        return hists

    def _searched_slots(self, feature_masks: np.ndarray) -> tuple[int, int] | None:
        """The slots (lo, hi) of the features a search may use (feature_masks bool (k, F)),
        None when they span all: a distributed worker searching its block of features, or
        column sampling, converts no more of the histograms than it reads."""
        used = np.flatnonzero(np.asarray(feature_masks).any(axis=0))
        if used.size == 0 or (used[0] == 0 and used[-1] == self.n_features - 1):
            return None
        return int(self.offsets[used[0]]), int(self.offsets[used[-1] + 1])

    def _to_float(self, hists: np.ndarray, slots: tuple[int, int] | None = None
                  ) -> np.ndarray:
        """Histograms of any layout as float64 (k, total_bins, C) in gradient units (only
        slots lo:hi, when given)."""
        q = self._quantisation
        if q is None:
            return hists
        lo, hi = (0, hists.shape[1]) if slots is None else slots
        part = hists[:, lo:hi] if slots is not None else hists
        # values written per node (two per packed sum)
        pieces = self._elementwise_pieces(hists.shape[0],
                                          part[0].size * (2 if hists.ndim == 2 else 1))
        if hists.ndim == 2:  # packed quantised sums
            out = self._hist_buffers.empty((*hists.shape, 2), np.dtype(np.float64))
            dst = out[:, lo:hi] if slots is not None else out
            if pieces:
                histogram.unpack_to_float(part, q.g_scale, q.h_scale, dst, pieces)
            else:
                histogram.unpack_to_float_serial(part, q.g_scale, q.h_scale, dst)
            return out
        # scales are powers of two, so these products and all later sums are exact
        out = self._hist_buffers.empty(hists.shape, np.dtype(np.float64))
        scales = np.array([q.g_scale, q.h_scale, 1.0][:hists.shape[2]])
        dst = out[:, lo:hi] if slots is not None else out
        if pieces:
            histogram.scale_to_float(np.ascontiguousarray(part), scales, dst, pieces)
        else:
            histogram.scale_to_float_serial(np.ascontiguousarray(part), scales, dst)
        return out

    def read_histograms(self, nodes: list[int]) -> np.ndarray:
        return np.array(self._float_histograms(nodes), dtype=np.float64, copy=True)

    def histogram_totals(self, nodes: list[int]) -> np.ndarray:
        hists = self._float_histograms(nodes)
        return hists[:, self.offsets[0]:self.offsets[1], :2].sum(axis=1)

    def find_best_splits(self, nodes: list[int], totals: np.ndarray, feature_masks: np.ndarray,
                         reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        hists = self._float_histograms(nodes, self._searched_slots(feature_masks))
        slots = hists.shape[0] * self.total_bins
        parallel = slots - slots // self._pool() >= _SPLIT_THREAD_MIN_SLOTS
        return split.search(hists, totals, self.offsets, feature_masks, reg, parallel,
                            monotone)

    def oblivious_gains(self, nodes: list[int], totals: np.ndarray, feature_mask: np.ndarray,
                        reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        hists = self._float_histograms(nodes)
        out = np.empty((self.total_bins, 2), np.float64)
        return split.oblivious_gains(hists, totals, self.offsets, feature_mask, reg, monotone,
                                     out)

    def evaluate_split(self, nodes: list[int], feature: int, split_bin: int,
                       default_left: bool) -> np.ndarray:
        hists = self._float_histograms(nodes)
        o = int(self.offsets[feature])
        left = hists[:, o:o + split_bin + 1, :2].sum(axis=1)
        if default_left:
            left = left + hists[:, int(self.offsets[feature + 1]) - 1, :2]
        return left

    def _partition_chunks(self, n_rows: int) -> int:
        """Chunks (threads) of a lone node's partition; 1: the serial kernel (the sparse
        backend's rule; this backend cuts a whole call at once, `_partition_items`)."""
        if n_rows < _PARTITION_CHUNKED_MIN_ROWS or self._pool() < 2:
            return 1
        return min(self._pool(), max(2, n_rows // _PARTITION_THREAD_MIN_ROWS))

    def _partition_items(self, starts: list[int], ends: list[int]) -> np.ndarray:
        """Work items int64 (m, PART_WIDTH) of partitioning the nodes [starts[k], ends[k])
        in parallel: each node cut into chunks of about the call's rows / threads, at least
        _PARTITION_THREAD_MIN_ROWS rows each."""
        threads = self._pool()
        chunk_rows = max(_PARTITION_THREAD_MIN_ROWS,
                         -(-sum(e - s for s, e in zip(starts, ends, strict=True)) // threads))
        items = []
        for k, (s, e) in enumerate(zip(starts, ends, strict=True)):
            n = e - s
            c = max(1, min(threads, n // chunk_rows))
            items += [(k, s + n * j // c, s + n * (j + 1) // c) for j in range(c)]
        return np.array(items, np.int64)

    def apply_splits(self, parents: list[int], lefts: list[int], rights: list[int],
                     records: np.ndarray) -> np.ndarray:
        bounds = self._ranges.bounds(parents)
        n_left = self._partition(bounds, records[:, split.REC_FEATURE].astype(np.int32),
                                 records[:, split.REC_BIN].astype(np.int32),
                                 records[:, split.REC_DEFAULT_LEFT].astype(np.uint8))
        return self._ranges.split(parents, lefts, rights, n_left)

    def _partition(self, bounds: list[tuple[int, int]], features: np.ndarray,
                   split_bins: np.ndarray, default_left: np.ndarray) -> np.ndarray:
        """Partition the nodes' ranges `bounds`: in parallel from _PARTITION_CHUNKED_MIN_ROWS
        rows a call, else on this thread."""
        if self._stale.any():
            self._fresh_columns(np.asarray(features, np.int64))
        total = sum(e - s for s, e in bounds)
        parallel = self._pool() > 1 and total >= _PARTITION_CHUNKED_MIN_ROWS
        starts = [b[0] for b in bounds]
        if parallel:
            items = self._partition_items(starts, [b[1] for b in bounds])
        else:
            items = np.array([(k, s, e) for k, (s, e) in enumerate(bounds)], np.int64)
        n_left = np.zeros(len(bounds), np.int64)
        args = (self.columns, self.rows, np.array(starts, np.int64), features, split_bins,
                self.missing_bins, default_left, items, self._pool() if parallel else 1,
                self._scratch, n_left)
        if parallel:
            partition.partition_nodes(*args)
        else:
            partition.partition_nodes_serial(*args)
        return n_left

    def replace_columns(self, features: np.ndarray, bins: np.ndarray,
                        combine: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        f = np.asarray(features, np.int64)
        if bins.shape != (self.n_rows, f.shape[0]):
            raise ValueError(f"bins must have shape ({self.n_rows}, {f.shape[0]}), got "
                             f"{bins.shape}")
        if f.size == 0:
            return
        self._raw = None  # the bins no longer those of the raw values
        # older pending writes of these columns must not win: dropped when this one covers
        # them (the per-tree statistics block replaces the last tree's), else written now
        self._pending = [(fs, b) for fs, b in self._pending if not np.isin(fs, f).all()]
        self._sync_bins(f)
        if np.array_equal(f, np.arange(f[0], f[0] + f.size)):  # the usual case: one pass
            new = np.ascontiguousarray(bins, self._bins.dtype)
            histogram.write_slots(new, self.offsets[f].astype(self.slots.dtype), self.slots,
                                  int(f[0]))
        else:
            new = np.asarray(bins, self._bins.dtype)
            self.slots[:, f] = new + self.offsets[f].astype(self.slots.dtype)
        # the row-major bins and the column-major copy (read by the partition for the split's
        # feature only: a tree splits on few of the replaced columns) are brought up to date
        # when needed; the backend keeps a reference to `bins` until then (callers do not
        # modify a matrix they passed)
        self._pending.append((f, new))
        self._stale[f] = True
        held = self._hists.nodes() if self._growing else []
        if held:
            self._rebuild_columns(held, f, combine)
        self._float_memo = None

    @property
    def bins(self) -> np.ndarray:
        """The binned matrix (n_rows, F), current."""
        self._sync_bins()
        return self._bins

    @bins.setter
    def bins(self, value: np.ndarray) -> None:
        self._bins = value
        self._pending = []
        self._raw = None

    def _sync_bins(self, features: np.ndarray | None = None) -> None:
        """Copy pending replaced columns into the row-major bins (those among `features`, or
        all)."""
        if not self._pending:
            return
        keep = []
        for f, new in self._pending:
            if features is not None and not np.isin(f, features).any():
                keep.append((f, new))
            elif np.array_equal(f, np.arange(f[0], f[0] + f.size)):
                self._bins[:, f[0]:f[0] + f.size] = new
            else:
                self._bins[:, f] = new
        self._pending = keep

    def _fresh_columns(self, features: np.ndarray) -> None:
        """The column-major copies of `features` made current (see replace_columns)."""
        stale = np.unique(features[self._stale[features]])
        if stale.size == 0:
            return
        for f in stale.tolist():
            # the latest write of f: a pending replaced block, else the row-major bins
            source = next(((fs, new) for fs, new in reversed(self._pending) if f in fs), None)
            if source is None:
                self.columns[f] = self._bins[:, f]
            else:
                self.columns[f] = source[1][:, int(np.flatnonzero(source[0] == f)[0])]
            self._stale[f] = False

    def _rebuild_columns(self, nodes: list[int], features: np.ndarray,
                         combine: Callable[[np.ndarray], np.ndarray] | None) -> None:
        """Histograms of `nodes` rebuilt from their rows for the slots of `features`
        (`combine`: see replace_columns)."""
        sub = np.ascontiguousarray(self.slots[:, features])
        bounds = self._ranges.bounds(nodes)
        out = np.empty((len(nodes), *self._hist_shape), self.hist_dtype)
        items = np.array([(j, lo, hi, 0, features.shape[0], -1, 0, self.total_bins)
                          for j, (lo, hi) in enumerate(bounds)], np.int64)
        self._histograms(histogram.build_histograms_serial, sub, items, self._no_reduces, 1,
                         out)
        ranges = [(int(self.offsets[f]), int(self.offsets[f + 1])) for f in features.tolist()]
        if combine is not None:
            parts = np.ascontiguousarray(np.concatenate([out[:, lo:hi] for lo, hi in ranges],
                                                        axis=1))
            parts = combine(parts)
            at = 0
            for lo, hi in ranges:
                out[:, lo:hi] = parts[:, at:at + hi - lo]
                at += hi - lo
        for j, node in enumerate(nodes):
            h = self._hists.histogram(node)
            for lo, hi in ranges:
                h[lo:hi] = out[j, lo:hi]

    def update_margin(self, tree: Tree, leaves: list[int], values: np.ndarray,
                      output: int) -> None:
        self._growing = False  # the tree is done: its histograms need no more columns
        self._claim_pool()
        if self._uses_all_rows:
            bounds = self._ranges.bounds(leaves)
            self._run_rows((predict.add_leaf_values, predict.add_leaf_values_parallel),
                           self.rows.shape[0], self.rows,
                           np.array([b[0] for b in bounds], np.int64),
                           np.array([b[1] for b in bounds], np.int64),
                           np.asarray(values, np.float64), self._margin, output)
        else:  # rows outside the sample are in no leaf range: traverse
            if tree.class_index != output:
                raise ValueError(f"tree of output {tree.class_index} added to output {output}")
            forest = PackedForest([tree])
            if self._raw is not None:
                forest.add_margin(self._raw, self._margin)
            else:
                forest.add_margin_binned(self.bins, self.missing_bins, self._margin)
