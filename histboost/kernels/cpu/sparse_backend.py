"""`SparseCPUBackend`: the CPU backend over the sparse layout of
`histboost.data.sparse.SparseBins` (kernels: `histboost.kernels.cpu.sparse`).

Everything but the layout-bound steps is `CPUBackend`'s: gradients, split search kernels,
margins. A wide sparse matrix has far more histogram slots than a node has stored values, so
no step of a node works over every slot:

- A node's histogram is *sparse*: the slots that hold anything, ascending, with their sums;
  every feature's default bin (the bin of an unstored entry) left out and fixed from the node
  total (feature 0's slots, stored for every row) when it is read.
- The smaller child of a split is built from its rows' stored slots (a full-width scratch
  never zeroed, a bitmap of the slots touched); the larger child is its parent's histogram
  minus those slots, in place.
- The search visits only the features with a slot in the node's list, fixes each one's
  default bin, writes its bins in order and runs the dense kernel's per-feature scan on them:
  the splits of the dense layout.
- Features *dead* in a node (its rows off their default bin carry less than
  min_child_weight of hessian, or fewer than min_data_in_leaf rows) cannot split there nor
  below (descendants hold subsets of its rows; hessians non-negative): each node's search
  marks them in an array its children inherit, and their slots leave its list and its
  children's builds.

The partition reads the split feature's column of non-default entries.

Workers. Under a distributed wrapper (`histboost.distributed.backend`) each worker's lists
hold the slots of its own rows, which differ from worker to worker, so a built node's
histogram is summed over an *index* every worker knows (`share_layout`): the root's is every
slot some worker's rows store (one max-allreduce of a byte per slot when the wrapper is
built); a child's is its parent's global list after the parent's search (all-zero slots and
dead features' left out, the same on every worker, since the search reads global sums and
marks dead features whether or not they are searched). A child holds a subset of its
parent's rows, so its slots are in that index, except where the parent's sums of a slot
cancelled to zero (g and h both; with row counts or positive hessians never): such *extra*
entries are counted in the buffer's tail and, when some worker has any, allgathered and
added in rank order (`extra_entries`, `store_shared`). The pruning rule follows hessian
statistics of all workers (`pruning_stats`, `set_pruning`). The histograms, so the
quantised models, are one process's.
"""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np

from ...tree.predictor import PackedForest
from ...tree.quantize import Quantisation
from ...tree.tree import Tree
from . import histogram, partition, sparse, sparse_predict, split
from ._threads import run_ranges
from .backend import CPUBackend

# the row chunks of a large node's build each take a full-width scratch and scan a bitmap of
# every slot: at most one chunk per this many (stored values / slots of the matrix), so that
# this stays below the sums (a function of the node and the data only, as the chunk count of
# the dense layout: float models do not depend on the threads)
_VALUES_PER_CHUNK_SLOT = 1
# items (nodes or row chunks of one) built in one call, each in a full-width scratch
_BUILD_ITEMS = 8
# free histogram buffers kept for reuse between trees
_POOL_KEEP = 8
# Threads. A step's parallel work runs on Numba's parallel loops from _LOOP_MIN_THREADS
# threads: on the 16-core host the thread pool's launches (a Python call and a GIL hand-off
# per thread) cost more than a node's work split 16 ways, and the loops' threads, spinning on
# their cores for a while after each loop, take cores nothing else needs. On fewer threads
# it runs on the thread pool (`_threads.run_ranges`, whose threads sleep between tasks): on
# a busy machine every loop waits for a time slice on each core (measured on 2 shared
# cores: ~10 ms a loop), and on 200k x 100k with 2 threads the loops' spinning threads once
# took 111 s of wall time (one thread: the whole training about 50 s). Sizes from which the
# work is split, on the loops / on the pool (coarser: a pool launch costs more on a loaded
# machine): the root's build in parts of the features (on the loops) / a step's builds
# (items in parallel) from this many stored values' worth of work (the loops' other builds:
# _BUILD_MIN_VALUES), a node's split search in stretches of whole features from this many
# slots a stretch, a partition in row chunks of at least this many rows (one chunk a
# thread).
_PARALLEL_MIN_VALUES = 1 << 12
_POOL_PARALLEL_MIN_VALUES = 1 << 20
# On the loops, a step's builds from this many stored values a thread, fewer items than
# threads in ranges of the items' slots (`sparse.accumulate_items_parallel`: a small node's
# build, a few thousand values, is mostly cache misses in its full-width scratch, 0.4 ms on
# one thread of the 16-core host, 200k x 100k)
_BUILD_MIN_VALUES = 1 << 9
_SEARCH_STRETCH_MIN_SLOTS = 1 << 12
_POOL_SEARCH_STRETCH_MIN_SLOTS = 1 << 14
_PARTITION_THREAD_MIN_ROWS = 1 << 13
_POOL_PARTITION_THREAD_MIN_ROWS = 1 << 19
_LOOP_MIN_THREADS = 4
# On the loops, a built node's list is emitted from its bitmaps in ranges of words from this
# many slots it touched a thread, or this many words a thread (the scan of every word costs
# a small node more than its slots: 0.18 ms a node on one thread of the 16-core host, 200k x
# 100k), and a subtraction in ranges of the built child's slots from this many a thread
# (serial on the pool: session 11 measured on 16 cores builds 1.7x faster than on one
# thread, subtractions not at all). A small child's subtraction gallops through its parent's
# list, mostly cache misses: split from 256 slots a thread, the 100 trees' subtractions took
# 0.48 s on the 16-core host against 0.75-0.80 s from 1k (most built children hold 1-2k)
_EMIT_THREAD_MIN_SLOTS = 1 << 13
_EMIT_THREAD_MIN_WORDS = 1 << 11
_SUBTRACT_THREAD_MIN_SLOTS = 1 << 8
# a node's search on the loops cuts its list into this many stretches a thread, which the
# threads take in order as they come free (uneven stretches even out; measured on captured
# 200k x 100k nodes, 16 stretches: the longest took 2x the mean)
_STRETCHES_PER_THREAD = 4
# On the loops, the nodes of a step (up to this many at a time) are searched in one parallel
# loop, their stretches shared by the threads (`_search_nodes`)
_SEARCH_GROUP = 4
# The root's build (`_build_root`) in this many parts of the features a thread: the parts'
# entries are about equal, but a few features hold one entry for nearly every row (200k x
# 100k sparse_like: five of about 200k, a sixteenth of all being 332k), and parts taken
# longest first as threads come free even out their uneven sizes (there, 16 threads: a
# part a thread, the longest 1.6x the mean; 4 a thread, the busiest thread 1.03x)
_ROOT_PARTS_PER_THREAD = 4


def _lines(items: int, itemsize: int) -> int:
    """Items of `itemsize` bytes in a row of whole cache lines (64 bytes) holding `items`."""
    return -(-items * itemsize // 64) * 64 // itemsize


class _Pool:
    """Full-width scratch arrays for reuse. A sparse layout's histograms span every slot of a
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


class SparseCPUBackend(CPUBackend):
    """`CPUBackend` on a `SparseBins` layout (arguments as `CPUBackend`'s, `sbins` for the
    binned matrix) with sparse node histograms (the module docstring)."""

    # Best-first growth splits up to this many leaves a step (`TreeGrower`). A sparse node's
    # work is proportional to its stored values, not to a step's fixed cost, and leaves split
    # ahead of their turn are mostly undone on sparse data, whose trees are lopsided (50k x
    # 100k sparse_like, 63 leaves: 32 a step searched 2.2x the nodes of one a step and kept
    # a histogram for each; 2 a step 1.03x, 4 a step 1.3x)
    best_first_batch = 2

    def __init__(self, sbins, n_threads: int, label: np.ndarray | None = None,
                 weight: np.ndarray | None = None, n_outputs: int = 1,
                 count_rows: bool = False, pack: bool = True,
                 row_ids: np.ndarray | None = None, pack_rows: int = 0) -> None:
        n, F = sbins.shape
        # the dense state of a zero-width matrix, then the sparse layout in its place
        super().__init__(np.zeros((n, 0), np.uint8), sbins.offsets, n_threads, label=label,
                         weight=weight, n_outputs=n_outputs, count_rows=count_rows,
                         pack=pack, row_ids=row_ids, pack_rows=pack_rows)
        self.sbins = sbins
        self.n_features = int(F)
        self.bins = self.columns = None  # type: ignore[assignment]
        self.slots = sbins.slots
        self.default_bins = sbins.default_bins
        self.default_slots = sbins.default_slots
        self._values_per_row = sbins.slots.shape[0] / max(1, n)
        self._pool_bufs = _Pool()
        F = self.n_features
        self._slot_dtype = np.dtype(np.int32 if self.total_bins < 2**31 else np.int64)
        self._slot_feature = np.repeat(np.arange(F, dtype=np.int32), np.diff(self.offsets))
        self._widest = int(np.diff(self.offsets).max(initial=0))
        # node -> uint8 (F,) the features it cannot split, nor can any node below it (marked
        # by its search and its ancestors'), left out of its histograms and its children's
        self._dead: dict[int, np.ndarray] = {}
        # scratch of the builds: full-width sums (never zeroed: a slot's first value is
        # written) and bitmaps of the slots touched (zero between builds)
        self._bitmaps = np.zeros((0, (self.total_bins + 63) >> 6), np.uint64)
        # node -> its sparse histogram (slots (m,) ascending, sums (m, C) native dtype)
        self._hist: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._kept_bufs: dict[str, np.ndarray] = {}
        self._prune = False
        self._tol = 0.0
        # one of several workers (`share_layout`): the slots any worker's rows store, int
        # (S,) ascending (the root's index); each child's parent (its index); the nodes of
        # the last build with their indices and the extra entries outside them
        self._root_index: np.ndarray | None = None
        self._worker = (0, 1)
        self._parent: dict[int, int] = {}
        self._pending: tuple[list[int], list[np.ndarray], list[tuple[np.ndarray, np.ndarray]],
                             np.ndarray] | None = None

    def replace_columns(self, features: np.ndarray, bins: np.ndarray,
                        combine: object = None) -> None:
        raise ValueError("categorical features need dense input; a sparse Dataset has none")

    def release(self) -> None:
        super().release()
        self.sbins = None
        self._pool_bufs = _Pool()
        self._bitmaps = np.zeros((0, 0), np.uint64)
        self._hist = {}
        self._kept_bufs = {}

    def _loops(self) -> bool:
        """Whether parallel work runs on Numba's parallel loops (else on the thread pool)."""
        return self._pool() >= _LOOP_MIN_THREADS

    def _empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return self._pool_bufs.empty(tuple(shape), np.dtype(dtype))

    # -- partition -----------------------------------------------------------------------
    def _partition(self, bounds: list[tuple[int, int]], features: np.ndarray,
                   split_bins: np.ndarray, default_left: np.ndarray) -> np.ndarray:
        # exact whatever the chunks, so they follow the thread count: a call of at least
        # _PARTITION_THREAD_MIN_ROWS rows a thread is cut into about one chunk per thread
        sb = self.sbins
        starts = np.array([b[0] for b in bounds], np.int64)
        ends = np.array([b[1] for b in bounds], np.int64)
        n_left = np.zeros(starts.shape[0], np.int64)
        total = sum(e - s for s, e in bounds)
        threads = self._team(total // (_PARTITION_THREAD_MIN_ROWS if self._loops()
                                        else _POOL_PARTITION_THREAD_MIN_ROWS))
        if threads == 1:
            sparse.partition_nodes_serial(
                sb.col_ptr, sb.col_rows, sb.col_bins, self.rows, starts, ends, features,
                split_bins, self.missing_bins, self.default_bins, default_left, self._scratch,
                n_left)
            return n_left
        chunk_rows = -(-total // threads)
        items = []
        for k, (s, e) in enumerate(bounds):
            c = max(1, -(-(e - s) // chunk_rows))
            items += [(k, s + (e - s) * i // c, s + (e - s) * (i + 1) // c) for i in range(c)]
        items_a = np.array(items, np.int64)
        m = items_a.shape[0]
        counts = np.zeros(m, np.int64)
        positions = np.zeros(m, np.int64)
        args = (items_a, sb.col_ptr, sb.col_rows, sb.col_bins, self.rows, starts, features,
                split_bins, self.missing_bins, self.default_bins, default_left, self._scratch,
                counts)
        if self._loops():
            sparse.partition_items(threads, *args, positions, n_left)
            return n_left
        run_ranges(sparse.partition_scatter, m, *args, threads=threads)
        partition.chunk_positions(items_a, starts, counts, positions, n_left)
        run_ranges(sparse.partition_place, m, items_a, self.rows, starts, self._scratch,
                   counts, positions, n_left, threads=threads)
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

    def _kept(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Scratch of `shape` and `dtype` (C-contiguous, contents undefined): a view of a
        flat array kept under `name` and grown as needed. A node's search takes several
        arrays of up to its list's size; fresh ones would cost an mmap and munmap each (and
        a page fault per 4 KiB touched) for every node."""
        size = math.prod(shape)
        dtype = np.dtype(dtype)
        buf = self._kept_bufs.get(name)
        if buf is None or buf.dtype != dtype or buf.shape[0] < size:
            grown = 2 * buf.shape[0] if buf is not None and buf.dtype == dtype else 0
            buf = np.empty(max(size, grown), dtype)
            self._kept_bufs[name] = buf
        return buf[:size].reshape(shape)

    @property
    def _channels_native(self) -> int:
        """Channels of a sparse histogram's sums: 1 (packed quantised pairs), 2 or 3."""
        return 1 if len(self._hist_shape) == 1 else int(self._hist_shape[1])

    # -- one tree ------------------------------------------------------------------------
    def begin_tree(self, output: int, rows: np.ndarray | None,
                   quantisation: Quantisation | None,
                   bounds: tuple[float, float] | None = None) -> int:
        count = super().begin_tree(output, rows, quantisation, bounds)
        self._pool_bufs.trim(_POOL_KEEP)
        h = self._pairs[output][:, 1]
        self._prune = h.shape[0] > 0 and float(h.min()) >= 0.0
        # rounding margin of the float hessian sums the searched-feature test compares
        self._tol = 1e-9 * (float(np.abs(h).sum(dtype=np.float64)) + 1.0)
        self._hist = {}
        self._dead = {0: np.zeros(self.n_features, np.uint8)}
        self._parent = {}
        return count

    # -- one of several workers ----------------------------------------------------------
    def stored_slots(self) -> np.ndarray:
        """uint8 (total_bins,): 1 at each slot some row of this worker stores."""
        out = np.zeros(self.total_bins, np.uint8)
        out[self.slots] = 1
        return out

    def share_layout(self, stored: np.ndarray, rank: int, world: int) -> None:
        """Train as worker `rank` of `world` whose histograms a distributed wrapper sums:
        stored: uint8 (total_bins,), `stored_slots` maxed over all workers (the root's
        index)."""
        self._root_index = np.flatnonzero(stored).astype(self._slot_dtype)
        self._worker = (int(rank), int(world))

    def pruning_stats(self, output: int) -> np.ndarray:
        """float64 (3,): (rows, rows with a negative hessian, sum of |hessian|) of these
        rows' gradients of `output`; `set_pruning` takes their sums over all workers."""
        h = self._pairs[output][:, 1]
        return np.array([h.shape[0], np.count_nonzero(h < 0),
                         float(np.abs(h).sum(dtype=np.float64))], np.float64)

    def set_pruning(self, stats: np.ndarray) -> None:
        """The tree's rule for dead features from `pruning_stats` summed over all workers
        (as `begin_tree` sets it from one process's rows)."""
        self._prune = bool(stats[0] > 0 and stats[1] == 0)
        self._tol = 1e-9 * (float(stats[2]) + 1.0)

    def _index(self, node: int) -> np.ndarray:
        """The slots a built node's histogram is reduced over: its parent's (searched,
        compacted, the same on every worker), or the root's."""
        p = self._parent.get(node)
        return self._root_index if p is None else self._hist[p][0]

    def _shared_buffer(self, nodes: list[int]) -> np.ndarray:
        """(rows, C) of the histogram dtype: each built node's local sums over its index
        (`_index`), node after node, then a tail of len(nodes) x world rows whose channel 0
        at row j * world + rank holds how many non-zero entries node j has outside its
        index here (the *extras*, kept for `extra_entries`)."""
        rank, world = self._worker
        C = self._channels_native
        indices, extras, parts = [], [], []
        tail = np.zeros((len(nodes) * world, C), self.hist_dtype)
        for j, node in enumerate(nodes):
            index = self._index(node)
            slots, vals = self._hist[node]
            pos = np.searchsorted(index, slots)
            inside = pos < index.shape[0]
            inside[inside] = index[pos[inside]] == slots[inside]
            dense = np.zeros((index.shape[0], C), self.hist_dtype)
            dense[pos[inside]] = vals[inside]
            out = ~inside
            if out.any():
                out[out] = vals[out].any(axis=1)
            extras.append((slots[out], vals[out]))
            tail[j * world + rank, 0] = int(out.sum())
            indices.append(index)
            parts.append(dense)
        parts.append(tail)
        flat = np.concatenate(parts)
        self._pending = (nodes, indices, extras, flat)
        return flat

    def extra_entries(self) -> np.ndarray | None:
        """After the wrapper summed `build_histograms`'s buffer: None when no worker has
        extras, else this worker's extras as rows (node position, slot, sums C) of the
        histogram dtype, padded with rows of node -1 to the most any worker has, for an
        allgather."""
        nodes, _, extras, flat = self._pending
        world = self._worker[1]
        counts = flat[flat.shape[0] - len(nodes) * world:, 0].reshape(len(nodes), world)
        most = int(counts.sum(axis=0).max(initial=0))
        if most == 0:
            return None
        C = self._channels_native
        rows = np.zeros((most, 2 + C), self.hist_dtype)
        rows[:, 0] = -1
        at = 0
        for j, (slots, vals) in enumerate(extras):
            k = slots.shape[0]
            rows[at:at + k, 0] = j
            rows[at:at + k, 1] = slots
            rows[at:at + k, 2:] = vals
            at += k
        return rows

    def store_shared(self, gathered: np.ndarray | None = None) -> None:
        """The built nodes' histograms from the summed buffer: their index slots holding
        anything, and the extras of every worker (gathered (world, rows, 2 + C), rank
        order, from `extra_entries`' allgather), summed in rank order."""
        nodes, indices, _, flat = self._pending
        self._pending = None
        at = 0
        for j, (node, index) in enumerate(zip(nodes, indices, strict=True)):
            vals = flat[at:at + index.shape[0]]
            at += index.shape[0]
            keep = vals.any(axis=1)
            slots, vals = index[keep], vals[keep]
            if gathered is not None:
                mine = gathered[gathered[..., 0] == j]  # rank order, each rank's ascending
                if mine.shape[0]:
                    extra, where = np.unique(mine[:, 1].astype(np.int64), return_inverse=True)
                    sums = np.zeros((extra.shape[0], vals.shape[1]), vals.dtype)
                    np.add.at(sums, where, mine[:, 2:])
                    nz = sums.any(axis=1)
                    slots = np.concatenate([slots, extra[nz].astype(slots.dtype)])
                    order = np.argsort(slots, kind="stable")
                    slots, vals = slots[order], np.concatenate([vals, sums[nz]])[order]
            self._hist[node] = (slots, vals)

    def _chunks(self, n_rows: int) -> int:
        """Row chunks of a node's build: `_sum_chunks` (a function of the node's size only,
        so float models do not depend on the threads), fewer while a chunk would hold fewer
        stored values than the matrix has slots (each chunk scans a bitmap of them and takes
        a full-width scratch)."""
        c = self._sum_chunks(n_rows)
        while c > 1 and n_rows * self._values_per_row / c < _VALUES_PER_CHUNK_SLOT * (
                self.total_bins):
            c //= 2
        return c

    def build_histograms(self, nodes: list[int]) -> np.ndarray | None:
        """Sparse histograms of `nodes` from their rows' stored slots. Returns None, or for
        one of several workers (`share_layout`) the buffer a distributed wrapper sums across
        workers before `store_shared` ("Workers" in the module docstring)."""
        self._float_memo = None
        bounds = self._ranges.bounds(nodes)
        chunks = [self._chunks(e - s) for s, e in bounds]
        # groups of nodes whose items (a node or its row chunks) fit the scratch in use
        group: list[int] = []
        for k in range(len(nodes)):
            parts = self._team(int(self.slots.shape[0]) // _PARALLEL_MIN_VALUES)
            if (parts > 1 and self._loops() and self._uses_all_rows
                    and bounds[k] == (0, self.n_rows)):
                self._build_root(nodes[k], chunks[k], parts)
                continue
            if group and sum(chunks[j] for j in group) + chunks[k] > _BUILD_ITEMS:
                self._build_group(nodes, bounds, chunks, group)
                group = []
            group.append(k)
        if group:
            self._build_group(nodes, bounds, chunks, group)
        return None if self._root_index is None else self._shared_buffer(nodes)

    def _build_root(self, node: int, chunks: int, threads: int) -> None:
        """The histogram of a node of all rows in order (the root, without row sampling),
        feature by feature from the column-major entries (`sparse.root_parts`): the sums of
        `_build_group` with the same chunks, on parts of the features (about equal stored
        values each) on `threads` threads (used on Numba's loops: on one thread the row-chunk
        build is as fast), each feature's run staged at its own slots in one pass over the
        entries, then the runs moved together."""
        sb = self.sbins
        F = self.n_features
        # parts of about equal entries (feature 0 has one a row: its column holds only its
        # non-default ones), _ROOT_PARTS_PER_THREAD a thread, taken as threads come free,
        # the longest first
        parts = min(F, threads * _ROOT_PARTS_PER_THREAD)
        entries = sb.col_ptr.copy()
        entries[1:] += self.n_rows - (entries[1] - entries[0])
        bounds = np.searchsorted(entries, np.arange(parts + 1) * (int(entries[-1]) // parts))
        bounds = np.minimum(bounds, F).astype(np.int64)
        bounds[0], bounds[-1] = 0, F
        order = np.argsort(entries[bounds[:-1]] - entries[bounds[1:]], kind="stable")
        C = self._channels_native
        width = max(1, self._widest)
        acc = np.empty((parts, chunks * width, C), self.hist_dtype)
        seen = np.zeros((parts, chunks * width), np.uint8)
        counts = np.empty(F, np.int64)
        pos = np.zeros(F + 1, np.int64)
        # the stage: the builds' full-width scratch (free between trees), each feature's run
        # at its own slots
        stage_vals = self._empty((_BUILD_ITEMS, self.total_bins, C), self.hist_dtype)[0]
        stage_slots = self._empty((self.total_bins,), self._slot_dtype)
        args = [bounds, self.n_rows, chunks, sb.indptr, sb.slots, self.offsets, sb.col_ptr,
                sb.col_rows, sb.col_bins, self._dead[node], self.gh, acc, seen, counts, pos,
                stage_slots, stage_vals, np.empty(0, self._slot_dtype),
                np.empty((0, C), self.hist_dtype)]
        for step in (0, 1):
            if step == 1:
                np.cumsum(counts, out=pos[1:])
                args[-2] = np.empty(int(pos[-1]), self._slot_dtype)
                args[-1] = np.empty((int(pos[-1]), C), self.hist_dtype)
            if threads > 1 and self._loops():
                sparse.root_parts_parallel(threads, order, step, *args)
            else:
                run_ranges(sparse.root_parts, parts, step, *args, threads=threads)
        self._hist[node] = (args[-2], args[-1])

    def _build_group(self, nodes: list[int], bounds: list[tuple[int, int]],
                     chunks: list[int], group: list[int]) -> None:
        starts, ends, first = [], [], [0]
        for k in group:
            s, e = bounds[k]
            c = chunks[k]
            starts += [s + (e - s) * i // c for i in range(c)]
            ends += [s + (e - s) * (i + 1) // c for i in range(c)]
            first.append(first[-1] + c)
        m = len(starts)
        C = self._channels_native
        # one scratch of a call's most items, its pages touched only as far as used
        accs = self._empty((max(m, _BUILD_ITEMS), self.total_bins, C), self.hist_dtype)[:m]
        if self._bitmaps.shape[0] < m:
            self._bitmaps = np.zeros((m, self._bitmaps.shape[1]), np.uint64)
        touched = np.zeros(m, np.int64)
        starts_a, ends_a = np.array(starts, np.int64), np.array(ends, np.int64)
        gh = self.gh
        values = int(sum(bounds[k][1] - bounds[k][0] for k in group) * self._values_per_row)
        threads = (self._team(values // _BUILD_MIN_VALUES) if self._loops()
                   else self._team(min(m, values // _POOL_PARALLEL_MIN_VALUES)))
        sb = self.sbins
        bitmaps = self._bitmaps

        if threads > 1 and self._loops():
            sparse.accumulate_items_parallel(threads, sb.indptr, sb.slots, gh, self.rows,
                                             starts_a, ends_a, accs, bitmaps, touched)
        else:
            def items(lo: int, hi: int) -> None:
                sparse.accumulate_items(sb.indptr, sb.slots, gh, self.rows, starts_a[lo:hi],
                                        ends_a[lo:hi], accs[lo:hi], bitmaps[lo:hi],
                                        touched[lo:hi])

            run_ranges(items, m, threads=threads)
        touched_rows = touched.tolist()
        for j, k in enumerate(group):
            a, b = first[j], first[j + 1]
            bound = sum(touched_rows[a:b])
            out_slots = np.empty(bound, self._slot_dtype)
            out_vals = np.empty((bound, C), self.hist_dtype)
            args = (accs, self._bitmaps, a, b, self._slot_feature, self._dead[nodes[k]],
                    out_slots, out_vals)
            blocks = (self._team(max(bound // _EMIT_THREAD_MIN_SLOTS,
                                     self._bitmaps.shape[1] // _EMIT_THREAD_MIN_WORDS))
                      if self._loops() else 1)
            if blocks > 1:
                size = sparse.emit_touched_parallel(blocks, *args,
                                                    np.empty(blocks + 1, np.int64))
            else:
                size = sparse.emit_touched(*args)
            # views: their arrays' unused tail (dead features' slots) is freed with them
            self._hist[nodes[k]] = (out_slots[:size], out_vals[:size])

    def subtract_histograms(self, parents: list[int], built: list[int],
                            targets: list[int]) -> None:
        # the larger child in place of its parent's histogram, touching the built (smaller)
        # child's slots only
        self._float_memo = None
        for p, b, t in zip(parents, built, targets, strict=True):
            p_slots, p_vals = self._hist.pop(p)
            s_slots, s_vals = self._hist[b]
            missing = np.empty(s_slots.shape[0], np.int64)
            args = (p_slots, p_vals, s_slots, s_vals, missing)
            workers = (self._team(s_slots.shape[0] // _SUBTRACT_THREAD_MIN_SLOTS)
                       if self._loops() else 1)
            if workers > 1:
                k = sparse.subtract_parallel(workers, *args, np.empty(workers, np.int64))
            else:
                k = sparse.subtract_in_place(*args)
            if k:
                # slots the parent left out as all-zero (rare): -child's sums there
                slots = np.concatenate([p_slots, s_slots[missing[:k]]])
                order = np.argsort(slots, kind="stable")
                p_slots = slots[order]
                p_vals = np.concatenate([p_vals, -s_vals[missing[:k]]])[order]
            self._hist[t] = (p_slots, p_vals)

    # -- split search --------------------------------------------------------------------
    def _to_float_rows(self, vals: np.ndarray) -> np.ndarray:
        """Native sums (m, C) as float64 (m, 2 or 3) in gradient units (the array itself for
        float trees)."""
        q = self._quantisation
        if q is None:
            return vals
        if vals.shape[1] == 1:  # packed
            out = np.empty((1, vals.shape[0], 2), np.float64)
            histogram.unpack_to_float_serial(vals.reshape(1, -1), q.g_scale, q.h_scale, out)
            return out[0]
        # scales are powers of two, so these products are exact
        out = np.empty((1, *vals.shape), np.float64)
        histogram.scale_to_float_serial(vals[None], np.array([q.g_scale, q.h_scale, 1.0][
            :vals.shape[1]]), out)
        return out[0]

    def find_best_splits(self, nodes: list[int], totals: np.ndarray, feature_masks: np.ndarray,
                         reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        totals = np.ascontiguousarray(totals, np.float64)
        masks = np.ascontiguousarray(feature_masks, np.bool_)
        C = self._channels_native
        q = self._quantisation
        h_scale = 1.0 if q is None else float(q.h_scale)
        out = np.zeros((len(nodes), split.REC_WIDTH), np.float64)
        general = split.gain_path(reg)
        if monotone is None and self._loops():
            # a step's nodes searched together, in stretches on the loops (`_search_nodes`)
            for j in range(0, len(nodes), _SEARCH_GROUP):
                self._search_nodes(nodes[j:j + _SEARCH_GROUP], totals[j:j + _SEARCH_GROUP],
                                   masks[j:j + _SEARCH_GROUP], reg, general,
                                   out[j:j + _SEARCH_GROUP])
            return out
        # a feature's sums in gradient units (quantised trees), channels as the search reads
        fbuf = np.empty((self._widest + 4, 2 if C == 1 else C), np.float64)
        for j, node in enumerate(nodes):
            slots, vals = self._hist[node]
            n = slots.shape[0]
            nf_max = min(n, self.n_features)
            ptr = self._kept("ptr", (nf_max + 1,), np.int64)
            features = self._kept("features", (nf_max,), np.int32)
            scratch = (np.zeros(C, self.hist_dtype), np.zeros((1, C), self.hist_dtype))
            args = (slots, vals, self.offsets, self._slot_feature, self.default_bins, masks[j],
                    self._dead[node], True, self._prune)
            prune_args = (float(reg[split.P_MCW]), float(reg[split.P_MIN_DATA]), self._tol)
            # each searched feature adds at most its default and three edge bins
            size = n + 4 * nf_max
            if monotone is None:
                # one pass: each feature searched as its bins are written; a long list in
                # stretches of whole features on several threads (the same records)
                team = self._team(n // _POOL_SEARCH_STRETCH_MIN_SLOTS)
                rec = out[j]
                rec[split.REC_FEATURE] = -1.0
                sums = (float(totals[j, 0]), float(totals[j, 1]), float(totals[j, 2]),
                        1.0 if q is None else float(q.g_scale), h_scale)
                if team == 1:
                    hist = self._kept("hist", (self._widest + 4, C), self.hist_dtype)
                    bins = self._kept("bins", (self._widest + 4,), np.int32)
                    n_new = sparse.search_node(
                        *args, *sums, *prune_args, *scratch, hist, ptr, features, bins, reg,
                        general, np.zeros(2, np.int64), np.zeros(split.REC_WIDTH), rec,
                        np.zeros(1), fbuf)[2]
                else:
                    n_new = self._search_stretches(team, args, sums, prune_args, C, reg,
                                                   general, rec)
                self._after_search(node, n, n_new)
                continue
            hist = self._kept("hist", (size, C), self.hist_dtype)
            bins = self._kept("bins", (size,), np.int32)
            kept, nf, n_new = sparse.searched_node(
                *args, float(totals[j, 1]), float(totals[j, 2]), h_scale, *prune_args,
                *scratch, hist, ptr, features, bins)
            self._after_search(node, n, n_new)
            if nf == 0:
                out[j, split.REC_FEATURE] = -1.0
                continue
            # monotone constraints: the dense search on the bins written
            fhist = self._to_float_rows(hist[:kept])[None]
            ptr, features = ptr[:nf + 1], features[:nf]
            cons, lower, upper = monotone
            rec = split.search(fhist, totals[j:j + 1], ptr, np.ones((1, nf), np.bool_), reg,
                               False, (np.asarray(cons)[features], lower[j:j + 1],
                                       upper[j:j + 1]))[0]
            if rec[split.REC_FEATURE] >= 0:
                f = int(rec[split.REC_FEATURE])
                rec[split.REC_BIN] = bins[ptr[f] + int(rec[split.REC_BIN])]
                rec[split.REC_FEATURE] = features[f]
            out[j] = rec
        return out

    def _search_nodes(self, nodes: list[int], totals: np.ndarray, masks: np.ndarray,
                      reg: np.ndarray, general: bool | None, out: np.ndarray) -> None:
        """`sparse.search_nodes` of up to _SEARCH_GROUP nodes on Numba's loops, in one
        parallel loop: each node's list in stretches of whole features (one for a short
        list, else _STRETCHES_PER_THREAD for each thread its length is worth), the stretches
        of all nodes taken by the threads as they come free; totals float64 (m, 3) (G, H,
        rows), masks bool (m, F), records into out (m, REC_WIDTH) (zeros on entry). Records,
        lists and dead flags are one pass's whatever the stretches (`search_stretch_range`)."""
        m = len(nodes)
        C = self._channels_native
        dtype = self.hist_dtype
        lists = [(np.ascontiguousarray(s), np.ascontiguousarray(v))
                 for s, v in (self._hist[node] for node in nodes)]
        sizes = [s.shape[0] for s, _ in lists]
        counts = [1 if t == 1 else t * _STRETCHES_PER_THREAD
                  for t in (self._team(n // _SEARCH_STRETCH_MIN_SLOTS) for n in sizes)]
        first = np.array([0, *itertools.accumulate(counts)], np.int64)
        k = sum(counts)
        total = sum(sizes)
        width = self._widest + 4
        # a stretch holds at most its share of the list and one feature's run more
        # (`feature_chunks`), so at most that many features
        most = max(n // c for n, c in zip(sizes, counts, strict=True)) + width
        # the tuples are padded to _SEARCH_GROUP (one compiled kernel for any m)
        pad = _SEARCH_GROUP - m
        node_slots = tuple(s for s, _ in lists) + (np.empty(0, self._slot_dtype),) * pad
        node_vals = tuple(v for _, v in lists) + (np.empty((0, C), dtype),) * pad
        dead = self._dead[nodes[0]]
        node_dead = tuple(self._dead[node] for node in nodes) + (dead,) * pad
        q = self._quantisation
        scales = (1.0, 1.0) if q is None else (float(q.g_scale), float(q.h_scale))
        out[:, split.REC_FEATURE] = -1.0
        # each stretch's small scratch (records, the fixed bin's sums, the scan's offsets)
        # in rows of whole cache lines (`_lines`), and each node's shared best gain in a
        # line of its own: stretches on several threads write them for every feature they
        # search, and rows sharing a line would bounce it between their cores
        recs = np.zeros((k, _lines(split.REC_WIDTH, 8)))
        recs[:, split.REC_FEATURE] = -1.0
        lengths = np.empty(m, np.int64)
        sparse.search_nodes(
            self._team(max(m, total // _SEARCH_STRETCH_MIN_SLOTS)), first,
            np.empty(k + m, np.int64), node_slots, node_vals, node_dead, masks, totals,
            self.offsets, self._slot_feature, self.default_bins, True, self._prune, *scales,
            float(reg[split.P_MCW]), float(reg[split.P_MIN_DATA]), self._tol,
            np.empty((k, C), dtype), np.zeros((k, _lines(1, 8 * C), C), dtype),
            self._kept("out", (k, width, C), dtype), self._kept("out_ptr", (k, most), np.int64),
            self._kept("out_features", (k, most), np.int32),
            self._kept("out_bins", (k, width), np.int32), reg, general,
            np.zeros((k, _lines(2, 8)), np.int64), np.zeros((k, _lines(split.REC_WIDTH, 8))),
            recs, np.zeros((m, 8)),
            self._kept("fbuf", (k, width, 2 if C == 1 else C), np.float64),
            np.empty(k, np.int64), np.empty(k, np.int64),
            self._kept("move_slots", (total,), self._slot_dtype),
            self._kept("move_vals", (total, C), dtype), out, lengths)
        for node, (slots, vals), n in zip(nodes, lists, lengths.tolist(), strict=True):
            self._hist[node] = (slots[:n], vals[:n])

    def _search_stretches(self, team: int, args: tuple, sums: tuple, prune_args: tuple,
                          C: int, reg: np.ndarray, general: bool | None,
                          rec: np.ndarray) -> int:
        """`sparse.search_node` of one node's list (args: its first arguments) on the thread
        pool, one stretch of whole features (`sparse.feature_chunks`) on each of `team`
        threads, each with its own scratch and record; the stretches' compacted lists are
        then moved after one another and their records merged in order into rec
        (`sparse.merge_stretches`: a later one kept only when it gains strictly more, the
        lowest feature of equal gains). Record, list and dead flags are one pass's whatever
        the stretches (each bounds its features by the best gain any stretch has reached so
        far, which only a strictly better split can beat). Returns the list's new length."""
        slots, vals = args[0], args[1]
        k = team
        bounds = np.empty(k + 1, np.int64)
        sparse.feature_chunks(slots, self._slot_feature, bounds)
        dtype = self.hist_dtype
        total = np.zeros(C, dtype)
        sparse.node_total(slots, vals, self.offsets, total)
        # rows of whole cache lines, as in `_search_nodes`
        recs = np.zeros((k, _lines(split.REC_WIDTH, 8)))
        recs[:, split.REC_FEATURE] = -1.0
        lengths = np.zeros(k, np.int64)
        width = self._widest + 4
        most = int((bounds[1:] - bounds[:-1]).max()) + 1
        scratch = (np.repeat(total[None], k, axis=0), np.zeros((k, _lines(1, 8 * C), C), dtype),
                   self._kept("out", (k, width, C), dtype),
                   self._kept("out_ptr", (k, most), np.int64),
                   self._kept("out_features", (k, most), np.int32),
                   self._kept("out_bins", (k, width), np.int32), reg,
                   general, np.zeros((k, _lines(2, 8)), np.int64),
                   np.zeros((k, _lines(split.REC_WIDTH, 8))),
                   # the best gain any stretch reached (`search_node`), a line of its own
                   recs, np.zeros(17)[8:9],
                   self._kept("fbuf", (k, width, 2 if C == 1 else C), np.float64), lengths)
        run_ranges(sparse.search_stretch_range, k, 1, bounds, *args, *sums, *prune_args,
                   *scratch, threads=team)
        return sparse.merge_stretches(bounds, slots, vals, lengths, np.empty(k, np.int64),
                                      recs, rec)

    def _after_search(self, node: int, n: int, n_new: int) -> None:
        """A searched node's list compacted to n_new slots (its dead features' left out)."""
        if n_new < n:
            slots, vals = self._hist[node]
            self._hist[node] = (slots[:n_new], vals[:n_new])

    def apply_splits(self, parents: list[int], lefts: list[int], rights: list[int],
                     records: np.ndarray) -> np.ndarray:
        counts = super().apply_splits(parents, lefts, rights, records)
        # dead in a node, dead below it: its descendants hold subsets of its rows
        for p, left, right in zip(parents, lefts, rights, strict=True):
            dead = self._dead.pop(p)
            self._dead[left], self._dead[right] = dead, dead.copy()
            self._parent[left] = self._parent[right] = p
        return counts

    def _float_histograms(self, nodes: list[int]) -> np.ndarray:
        """float64 (k, total_bins, C) full histograms of `nodes` in gradient units, every
        default bin fixed (the dense backend's readers: totals, the oblivious gain table,
        `read_histograms`)."""
        key = tuple(nodes)
        memo = self._float_memo
        if memo is not None and memo[0] == key:
            return memo[1]
        dead = [n for n in nodes if n in self._dead and self._dead[n].any()]
        if dead:
            # a dead feature's slots have left the node's list: its bins would read as all
            # rows in the default bin (only the split search marks features dead, and no
            # full-histogram reader runs after it)
            raise RuntimeError(f"sparse backend: full histograms of nodes {dead[:4]} were "
                               "asked for after features were marked dead in them")
        C = self._channels_native
        channels = 2 if C == 1 else C
        out = np.zeros((len(nodes), self.total_bins, channels), np.float64)
        starts = self.offsets[:-1]
        defaults = starts + self.default_bins
        for j, node in enumerate(nodes):
            slots, vals = self._hist[node]
            unfixed = np.zeros((self.total_bins, C), self.hist_dtype)
            unfixed[slots] = vals
            full = np.empty_like(unfixed)
            sparse.gather_fixed(unfixed, starts, self.offsets, defaults,
                                np.zeros(C, self.hist_dtype), full)
            out[j] = self._to_float_rows(full)
        self._float_memo = (key, out)
        return out

    def histogram_totals(self, nodes: list[int]) -> np.ndarray:
        # feature 0's slots, every row once (all of them, zeros included: the sum is the
        # dense layout's)
        C = self._channels_native
        width = int(self.offsets[1])
        sums = []
        for node in nodes:
            slots, vals = self._hist[node]
            first = np.zeros((width, C), self.hist_dtype)
            k = int(np.searchsorted(slots, width))
            first[slots[:k]] = vals[:k]
            sums.append(self._to_float_rows(first)[:, :2].sum(axis=0))
        return np.array(sums)

    def oblivious_gains(self, nodes: list[int], totals: np.ndarray, feature_mask: np.ndarray,
                        reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        # only features with a slot off their default bin in some node can split
        present = np.zeros(self.n_features, np.bool_)
        for node in nodes:
            slots = self._hist[node][0]
            present[np.searchsorted(self.offsets, slots, side="right") - 1] = True
        return super().oblivious_gains(nodes, totals, present & feature_mask, reg, monotone)
