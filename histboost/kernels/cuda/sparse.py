"""Sparse training data on the GPU: `SparseCUDABackend`, the CUDA backend over the layout of
`histboost.data.sparse.SparseBins`, and its kernels.

The device holds the row-major CSR of global histogram slots (indptr int64 (n+1,), slots
int32 (stored,): each row's slots ascending, only entries off their feature's *default bin*
stored, feature 0 stored for every row) and per-feature arrays (default bins, missing slots):
memory follows the stored values, never n x F. Histograms stay full width (int64 (slots,
total_bins, C) in the dense backend's pool), so everything that reads histograms (the split
search, subtraction, totals, oblivious gain tables) is the dense backend's, unchanged:

- Build (`BUILD`): each group of `LANES` threads takes a row of a chunk of a node (the node
  tables and chunks of `histboost.kernels.cuda._common`) and adds its pair to the slots the
  row stores, with integer atomics: in global memory (slots of a wide matrix are spread
  thin, so atomics rarely collide) except feature 0's, which every row stores and which
  would serialise on one address: those sum in 32-bit shared memory per block, as the
  dense kernel sums (chunks sized by `histogram.chunk_cap`), and are flushed once.
- Fix (`FIX_DEFAULT_BINS`): a built histogram lacks every feature's default bin; it is the
  node total (feature 0's slots) minus the feature's other slots, written in place. Integer
  sums, so the fixed histogram is bit for bit the dense layout's, and a histogram subtracted
  from a fixed parent and a fixed sibling is fixed too.
- Partition (`SPLIT_FLAGS`): a thread per row of each parent finds the row's bin of the split
  feature by binary search in its slots (absent: the default bin), applies the split and
  writes 0 (left) or 1 (right) into a byte per row; the dense partition kernels
  (`partition.COUNT_LEFT`, `SCATTER_ROWS`) then move the rows by those bytes, read as a
  one-feature matrix whose every split is "bin <= 0 goes left" (the kernel writes that node
  table beside the real one).
- Margins (`ADD_MARGIN`): a thread per row walks the tree, each split's bin found as above.
- Search: the build also marks the features each node's rows store (a byte per pool slot
  and feature; a subtracted child keeps its parent's marks, a superset), and the split
  search takes only those, listed per node on the device (`_searched_features`), with the
  warp-wide search kernel (`split.NARROW_BEST_SPLIT`): a feature no row of a node stores has
  all of them in its default bin, so no split.

The device-planned levels and best-first steps (`ahead`, `best_first`, the next round's tree
launched ahead) read the dense matrix: `plan_levels` declines, so every step is planned on
the host (the grower's calls, each one a launch sequence as the dense backend's).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ...tree.tree import Tree
from ..cpu.predict import binned_goes_left
from ..cpu.sparse_predict import _bin_at
from ..launch import CudaKernel, simulated
from . import histogram, partition, predict, split
from ._common import (
    T_BIN,
    T_DEFAULT_LEFT,
    T_END,
    T_FEATURE,
    T_SIDE,
    T_SLOT,
    T_START,
    TABLE_WIDTH,
    THREADS,
    chunk_node,
    chunk_rows,
    grid,
)
from .backend import CUDABackend
from .histogram import IDENTITY_SIDE, SHARED_VALUES

# threads of a build block taking one row together (consecutive entries of the row: a group's
# loads of the slots are one sector); sparse_like rows store ~40 values, 6 passes of 8
LANES = 8
# blocks of a split search's launch, shared by its nodes, each block taking every P-th listed
# feature of its node (a node stores tens of thousands of features at 100k columns; 32 warp
# blocks fit an SM); under the simulator 2, so that the tests' blocks take several features
SEARCH_BLOCKS = 2 if simulated() else 4096
# the device's bin lookups and split rule are the CPU sparse predictor's
_bin_at_d = cuda.jit(device=True, inline=True)(_bin_at.py_func)
_goes_left_d = cuda.jit(device=True, inline=True)(binned_goes_left.py_func)


@cuda.jit(device=True, inline=True)
def _pair(gh, r):
    """Row r's (g, h): one 8-byte load of its two int32 (g in the low word)."""
    v = gh[r]
    return np.int32((v << 32) >> 32), np.int32(v >> 32)


def _make_build(channels: int):
    """The build kernel for histograms of `channels` channels (a compile-time constant)."""
    u64 = np.uint64

    @cuda.jit
    def _build(indptr, slots, gh, rows2, table, width0, slot_feature, pool, present):
        """grid (chunks,): pool[slot] += the stored slots of the rows of each chunk of the
        nodes of `table` (int64 (k, TABLE_WIDTH)); default bins are left out (`FIX`), and
        present[slot, f] = 1 for every feature f stored by a row (slot_feature int32
        (total_bins,): each slot's feature). width0: feature 0's slots summed in dynamic
        shared memory (width0 x channels int32, one plane per channel), 0: every slot in
        global memory (values too wide for int32 chunk sums)."""
        c = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        threads = cuda.blockDim.x
        shared = cuda.shared.array(0, np.int32)
        j = chunk_node(table, c)
        start, end = chunk_rows(table, j, c)
        if start >= end:
            return
        identity = table[j, T_SIDE] == IDENTITY_SIDE
        side = u64(table[j, T_SIDE])
        dst = table[j, T_SLOT]
        for s in range(tid, width0 * channels, threads):
            shared[s] = 0
        cuda.syncthreads()
        lane = tid % LANES
        p = start + tid // LANES
        step = threads // LANES
        while p < end:
            r = u64(p) if identity else u64(rows2[side, u64(p)])
            g, h = _pair(gh, r)
            for e in range(indptr[r] + lane, indptr[r + u64(1)], LANES):
                s = slots[u64(e)]
                present[dst, slot_feature[s]] = 1
                if s < width0:
                    cuda.atomic.add(shared, s, g)
                    cuda.atomic.add(shared, s + width0, h)
                    if channels == 3:
                        cuda.atomic.add(shared, s + 2 * width0, np.int32(1))
                else:
                    cuda.atomic.add(pool, (dst, s, 0), np.int64(g))
                    cuda.atomic.add(pool, (dst, s, 1), np.int64(h))
                    if channels == 3:
                        cuda.atomic.add(pool, (dst, s, 2), np.int64(1))
            p += step
        cuda.syncthreads()
        for v in range(tid, width0 * channels, threads):
            total = shared[v]
            if total != 0:
                cuda.atomic.add(pool, (dst, v % width0, v // width0), np.int64(total))

    return _build


@cuda.jit
def _fix_default_bins(table, offsets, default_bins, pool):
    """grid (feature blocks, nodes of `table`): every feature f >= 1 of the histogram in pool
    slot table[j, T_SLOT] gets its default bin = node total (the sum of feature 0's slots,
    which every row stores) minus its other bins, per channel."""
    j = cuda.blockIdx.y
    t = cuda.threadIdx.x
    totals = cuda.shared.array((3, THREADS), np.int64)
    channels = pool.shape[2]
    dst = table[j, T_SLOT]
    if table[j, T_END] <= table[j, T_START]:
        return  # no rows: all zeros
    for ch in range(channels):
        acc = np.int64(0)
        for s in range(offsets[0] + t, offsets[1], THREADS):
            acc += pool[dst, s, ch]
        totals[ch, t] = acc
    cuda.syncthreads()
    width = THREADS // 2
    while width > 0:
        if t < width:
            for ch in range(channels):
                totals[ch, t] += totals[ch, t + width]
        cuda.syncthreads()
        width //= 2
    f = cuda.blockIdx.x * THREADS + t + 1
    if f >= default_bins.shape[0]:
        return
    own = offsets[f] + default_bins[f]
    for ch in range(channels):
        rest = np.int64(0)
        for s in range(offsets[f], offsets[f + 1]):
            if s != own:
                rest += pool[dst, s, ch]
        pool[dst, own, ch] = totals[ch, 0] - rest


@cuda.jit
def _split_flags(indptr, slots, offsets, default_bins, missing_bins, rows2, table, flags,
                 flag_table):
    """grid (chunks of the partition's node table): flags[r] = 0 when row r goes left under
    its node's split (table columns T_FEATURE, T_BIN, T_DEFAULT_LEFT), else 1; and
    flag_table = table with those columns 0 (every split "bin <= 0 goes left" of a one-feature
    matrix: the dense partition kernels over `flags` move the rows), written grid-stride."""
    c = cuda.blockIdx.x
    t = cuda.threadIdx.x
    for i in range(c * THREADS + t, table.shape[0] * TABLE_WIDTH, cuda.gridDim.x * THREADS):
        col = i % TABLE_WIDTH
        flag_table[i // TABLE_WIDTH, col] = 0 if col >= T_FEATURE else \
            table[i // TABLE_WIDTH, col]
    j = chunk_node(table, c)
    start, end = chunk_rows(table, j, c)
    side = table[j, T_SIDE]
    f = table[j, T_FEATURE]
    split_bin = table[j, T_BIN]
    missing = missing_bins[f]
    dleft = table[j, T_DEFAULT_LEFT] != 0
    for p in range(start + t, end, THREADS):
        r = rows2[side, p]
        b = _bin_at_d(indptr, slots, offsets, default_bins, r, f)
        flags[0, r] = 0 if _goes_left_d(b, missing, split_bin, dleft) else 1


@cuda.jit(device=True, inline=True)
def _sparse_rule(indptr, slots, offsets, default_bins, missing_bins, i, f, cut, default_left):
    """The CPU sparse predictor's rule (`sparse_binned_rule`) on the device's lookups (the
    simulator cannot pass its arrays to the CPU's compiled `_bin_at`)."""
    b = _bin_at_d(indptr, slots, offsets, default_bins, i, f)
    return _goes_left_d(b, missing_bins[f], cut, default_left)


@cuda.jit
def _add_margin(indptr, slots, offsets, default_bins, missing_bins, tree_class, left, right,
                feature, split_bin, default_left, value, node_ptr, level_ptr, obl_feature,
                obl_bin, obl_default_left, leaf_ptr, obl_leaf_value, margin):
    """margin[i, class] += the leaf value of row i in each tree (`PackedForest` layout), one
    thread a row: the predictor's tree walk (`predict.leaf_index`) with the CPU sparse
    predictor's rule (each split's bin found in the row's slots)."""
    i = cuda.grid(1)
    if i >= margin.shape[0]:
        return
    for t in range(tree_class.shape[0]):
        leaf = predict.leaf_index(_sparse_rule, indptr, slots, offsets, default_bins,
                                  missing_bins, i, t, left, right, feature, split_bin,
                                  default_left, node_ptr, level_ptr, obl_feature, obl_bin,
                                  obl_default_left)
        margin[i, tree_class[t]] += predict.leaf_value(t, leaf, value, node_ptr, level_ptr,
                                                       leaf_ptr, obl_leaf_value)


_CSR = (("int64", 1), ("int32", 1))
BUILD = {channels: CudaKernel(_make_build(channels), (*_CSR, ("int64", 1), ("int32", 2),
                                                      ("int64", 2), "int64", ("int32", 1),
                                                      ("int64", 3), ("uint8", 2)))
         for channels in (2, 3)}
FIX_DEFAULT_BINS = CudaKernel(_fix_default_bins, (("int64", 2), ("int64", 1), ("int32", 1),
                                                  ("int64", 3)))
SPLIT_FLAGS = CudaKernel(_split_flags, (*_CSR, ("int64", 1), ("int32", 1), ("int32", 1),
                                        ("int32", 2), ("int64", 2), ("uint8", 2),
                                        ("int64", 2)))
ADD_MARGIN = CudaKernel(_add_margin, (*_CSR, ("int64", 1), ("int32", 1), *predict._TAIL))
KERNELS = (*BUILD.values(), FIX_DEFAULT_BINS, SPLIT_FLAGS, ADD_MARGIN)


class SparseCUDABackend(CUDABackend):
    """`CUDABackend` over a `SparseBins` layout (module docstring): arguments as
    `CUDABackend`'s, `sbins` for the binned matrix."""

    # Best-first growth splits up to this many leaves a step (`TreeGrower`), as on the CPU's
    # sparse backend: a search costs a block per feature whatever the node (100k on
    # `sparse_like`), and steps of more leaves search more nodes without taking fewer steps
    # (200k x 100k sparse_like, 63 leaves, 10 trees counted on the CPU engine: 48.4 steps a
    # tree with 2 or 32 leaves a step, 159 against 344 searched nodes)
    best_first_batch = 2

    def __init__(self, sbins, device: str = "cuda", label: np.ndarray | None = None,
                 weight: np.ndarray | None = None, n_outputs: int = 1,
                 count_rows: bool = False, row_ids: np.ndarray | None = None) -> None:
        super().__init__(sbins, sbins.offsets, device, label=label, weight=weight,
                         n_outputs=n_outputs, count_rows=count_rows, row_ids=row_ids)
        self._check_pool_fits(3)  # the root and two children

    def _place_matrix(self, sbins, raw: None, mapper: None) -> None:
        """The sparse layout on the device (module docstring) instead of a dense matrix."""
        torch = self._torch
        self.bins = self._words = self._columns = self._bin_dtype = None
        self.indptr = self._tensor(np.asarray(sbins.indptr, np.int64))
        self.slots = self._tensor(np.asarray(sbins.slots, np.int32))
        self.default_bins = self._tensor(np.asarray(sbins.default_bins, np.int32))
        # the partition's byte a row (0: left) and the node table reading them as a
        # one-feature matrix without a missing slot (`_launch_partition`)
        self._flags = torch.empty((1, self.n_rows), dtype=torch.uint8, device=self.device)
        self._no_missing = torch.full((1,), -1, dtype=torch.int32, device=self.device)
        self._flag_table = None
        self._width0 = int(self.offsets_host[1] - self.offsets_host[0])
        self._feature_ids = self._tensor(np.arange(self.n_features, dtype=np.int32))
        # features stored by some row of the node in each pool slot (a subtracted child keeps
        # its parent's: a superset), the features its split search lists (`_searched_features`)
        self._slot_feature = self._tensor(np.repeat(
            np.arange(self.n_features, dtype=np.int32), np.diff(self.offsets_host)))
        self._present = torch.zeros((0, self.n_features), dtype=torch.uint8,
                                    device=self.device)

    # -- memory ---------------------------------------------------------------------------
    def _free_bytes(self) -> int | None:
        """Device memory this backend could still take (free plus torch's cached), None
        under the simulator."""
        if self.device.type != "cuda":
            return None
        torch = self._torch
        free, _ = torch.cuda.mem_get_info(self.device)
        cached = torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(
            self.device)
        return int(free + cached)

    def _check_pool_fits(self, slots: int) -> None:
        """Raise MemoryError naming the sizes when a histogram pool of `slots` full-width
        histograms would not fit the device beside what it holds (the old pool included:
        it is copied into the new one)."""
        per_slot = self.total_bins * self._channels * 8 + self.n_features
        need = slots * per_slot
        free = self._free_bytes()
        if free is not None and need > free:
            raise MemoryError(
                f"device={self.device}: sparse training keeps full-width histograms of "
                f"{self.total_bins:,} slots x {self._channels} channels x 8 bytes (and a byte "
                f"a feature) = {per_slot / 2**20:,.1f} MiB a node; a pool of {slots} nodes needs "
                f"{need / 2**30:,.2f} GiB, {free / 2**30:,.2f} GiB is free. Lower "
                f"max_leaves / max_depth or max_bin, or train with device='cpu' (its sparse "
                f"histograms follow the stored values)")

    def _alloc_slots(self, k: int) -> int:
        """`CUDABackend._alloc_slots`, its pool grown as there (a quarter more than needed)
        where that fits, else to exactly the slots the tree needs, else MemoryError
        (`_check_pool_fits`)."""
        need = self._state.used + k
        if need > self._pool.shape[0]:
            try:
                self._check_pool_fits(max(need + need // 4, 8))
            except MemoryError:
                self._check_pool_fits(need)
                self._grow_pool(need)
        first = super()._alloc_slots(k)
        if self._present.shape[0] < self._pool.shape[0]:
            present = self._torch.zeros((self._pool.shape[0], self.n_features),
                                        dtype=self._torch.uint8, device=self.device)
            present[:first] = self._present[:first]
            self._present = present
        return first

    def begin_tree(self, output: int, rows: np.ndarray | None, quantisation,
                   bounds: tuple[float, float] | None = None) -> int:
        # with the pool's slots (`CUDABackend.begin_tree`)
        self._present[:self._state.used].zero_()
        return super().begin_tree(output, rows, quantisation, bounds)

    def _grow_pool(self, slots: int) -> None:
        """The pool grown to exactly `slots` slots, the tree's histograms kept."""
        torch = self._torch
        pool = torch.zeros((slots, self.total_bins, self._channels), dtype=torch.int64,
                           device=self.device)
        pool[:self._state.used] = self._pool[:self._state.used]
        self._pool = pool

    def release(self) -> None:
        super().release()
        self.indptr = self.slots = self.default_bins = None
        self._flags = self._no_missing = self._flag_table = None
        self._feature_ids = self._slot_feature = self._present = None

    # -- layout-bound kernels ---------------------------------------------------------------
    def _launch_build(self, table_d, n_chunks: int) -> None:
        """The sparse build over the chunks of a node table on the device, then the default
        bins of its nodes (`FIX_DEFAULT_BINS`)."""
        width0 = 0 if self._state.wide or self._width0 * self._channels > SHARED_VALUES \
            else self._width0
        BUILD[self._channels].launch(
            n_chunks, THREADS, self.device, self.indptr, self.slots, self._ints_words,
            self._rows2, table_d, width0, self._slot_feature, self._pool, self._present,
            shared_bytes=4 * width0 * self._channels)
        FIX_DEFAULT_BINS.launch(
            (grid(max(self.n_features - 1, 1)), int(table_d.shape[0])), THREADS, self.device,
            table_d, self.offsets, self.default_bins, self._pool)

    def _launch_partition(self, table_d, n_chunks: int, k: int):
        """The split of every row into `_flags` (`SPLIT_FLAGS`), then the dense partition
        kernels over those bytes; returns the children's counts buffer (int64 (>= k, 2))."""
        torch = self._torch
        chunk_left = self._buffer("_chunk_left", max(n_chunks, 1), (), torch.int64)
        counts = self._buffer("_child_counts", k, (2,), torch.int64)
        if n_chunks:
            flag_table = self._front(self._buffer("_flag_table", k, (TABLE_WIDTH,),
                                                  torch.int64), k)
            SPLIT_FLAGS.launch(n_chunks, THREADS, self.device, self.indptr, self.slots,
                               self.offsets, self.default_bins, self.missing_bins,
                               self._rows2, table_d, self._flags, flag_table)
            args = (self._flags, self._rows2, flag_table, self._no_missing, chunk_left)
            one_byte = np.dtype(np.uint8)
            partition.COUNT_LEFT[one_byte].launch(n_chunks, THREADS, self.device, *args)
            partition.SCATTER_ROWS[one_byte].launch(n_chunks, THREADS, self.device, *args,
                                                    counts)
        return counts

    def _searched_features(self, masks, nodes) -> tuple:
        """A feature none of a node's rows stores has all of them in its default bin, so no
        split (the CPU's sparse lists leave it out too): each node searches the features
        present in its slot and not masked, listed on the device (positions from one
        cumulative sum over the nodes' flags; no read), with the warp-wide search kernel
        (features of few bins) over about SEARCH_BLOCKS blocks a launch. The kernel
        subtracts only the features it lists, so the nodes' pending subtractions are made
        here first, over every slot (later reads of the histograms see them whole), and
        nodes[:, 1] becomes -1."""
        torch = self._torch
        k = int(nodes.shape[0])
        F = self.n_features
        histogram.SUBTRACT.launch(grid(k * self.total_bins * self._channels), THREADS,
                                  self.device, self._pool, nodes)
        nodes[:, 1] = -1
        searched = masks.mul_(self._present.index_select(0, nodes[:, 0]))
        ends = torch.cumsum(searched.view(-1), 0, dtype=torch.int32).view(k, F)
        before = torch.cat([ends.new_zeros(1), ends[:-1, -1]])  # listed in earlier nodes
        n_listed = ends[:, -1] - before
        position = (ends - 1 - before[:, None]).long()
        position.masked_fill_(searched == 0, F)  # not listed: a spare last column
        listed = torch.empty((k, F + 1), dtype=torch.int32, device=self.device)
        listed.scatter_(1, position, self._feature_ids.expand(k, -1))
        per_node = min(F, max(1, SEARCH_BLOCKS // k))
        return (split.NARROW_BEST_SPLIT, split.NARROW_SPLIT_THREADS, per_node, listed,
                n_listed)

    def _add_margin(self, tree: Tree, output: int) -> None:
        ADD_MARGIN.launch(grid(self.n_rows), THREADS, self.device, self.indptr, self.slots,
                          self.offsets, self.default_bins, self.missing_bins,
                          *self._tree_arrays(tree, output), self._state.margin)

    def plan_levels(self, levels: int, feature_mask: np.ndarray, reg: np.ndarray,
                    search_last: bool, learning_rate: float | None = None,
                    best_first: tuple[int, int, int] | None = None) -> bool:
        """Declined: the device's level and step plans read the dense matrix (module
        docstring); the host plans every step."""
        return False

    def replace_columns(self, features: np.ndarray, bins, combine: object = None) -> None:
        raise ValueError("categorical features need dense input; a sparse Dataset has none")


