"""CUDA implementation of `histboost.kernels.backend.Backend`: Numba-CUDA kernels on torch
tensors.

Device memory and the library primitives (prefix sums, reductions, argmax, gathers) come from
PyTorch: the package already launches Numba-CUDA kernels on torch tensors with a low-overhead
launcher (`histboost.kernels.launch`), torch's caching allocator makes the per-level buffers
cheap, and its tensors take CuPy, JAX and NumPy inputs through DLPack. Under Numba's CUDA
simulator the same code runs on CPU tensors (CI).

Everything as large as the data stays on the device: bins (n, F) uint8 (int32 when a feature
has more than 256 slots; rows padded to 4-byte words) and their column-major copy, labels,
weights, margins float64 (n, K), gradient pairs float32 (K, n, 2), the tree's integer pairs
int32 (n, 2), the row-index array and the histograms. Only split records, gain tables of
oblivious levels (total_bins x 2), node totals and row counts cross to the host.

Histograms are always integer sums, so they do not depend on the order of the atomics and a
model is the same bits on every run. Quantised trees round the pairs as the CPU engine does
(stochastically, `grad_quant_bits`), so both engines grow the same trees. Float trees round
them to nearest in fixed point with a power-of-two scale putting max |g| (and max |h|) just
below `histogram.MAX_SHARED_VALUE` (2**17 on a GPU), the largest value the histogram kernel
sums in 32-bit shared memory in its blocks of rows: an error of at most about 2**-17 of the
tree's largest value per row, unbiased over many rows (LightGBM's
quantised training works with 2**-7).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...tree.predictor import PackedForest
from ...tree.quantize import Quantisation
from ...tree.split import REC_BIN, REC_DEFAULT_LEFT, REC_FEATURE, REC_WIDTH
from ...tree.tree import Tree
from ..backend import ComposedSteps, phase
from ..nodes import NodeRanges

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...timer import PhaseTimer
    from .ahead import LevelPlan
    from .best_first import BestFirstPlan

_TORCH_DTYPE: dict[str, object] = {}
# upload staging: host buffers in the ring (uploads in flight at once), copy sizes rounded up
# to this many bytes (fewer distinct cached copies)
_STAGING_RING = 4
_STAGING_ALIGN = 512
_MAX_CACHED_VIEWS = 4096
# finished best-first trees whose steps size the next trees' (`_plan_best_first`): with the
# last tree's alone, trees needing one or two steps more than it were left to the host
# (2 of 5 trees of 63 leaves on an H100), and lost their margins added ahead and the next
# tree launched ahead
_RECENT_TREES = 8
def _torch_dtypes(torch) -> None:
    _TORCH_DTYPE.update({np.dtype(k).str: v for k, v in (
        (np.int64, torch.int64), (np.int32, torch.int32), (np.uint8, torch.uint8),
        (np.float64, torch.float64), (np.float32, torch.float32))})


def _cuda_device(device: str):
    """The torch device of 'cuda' / 'cuda:N' (the CPU under the simulator), or RuntimeError
    naming what is missing."""
    try:
        import torch
    except ImportError:
        raise RuntimeError("device='cuda' needs PyTorch and numba-cuda: pip install "
                           "'histboost[gpu]' (and a CUDA build of torch)") from None
    try:
        from numba import cuda  # noqa: F401
    except ImportError:
        raise RuntimeError("device='cuda' needs numba-cuda: pip install 'histboost[gpu]'") \
            from None
    from ..launch import simulated

    if simulated():
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r}: no CUDA GPU is visible to PyTorch "
                           f"(torch {torch.__version__}, torch.cuda.is_available() is False); "
                           "train with device='cpu'")
    index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
    if not 0 <= index < torch.cuda.device_count():
        raise RuntimeError(f"device={device!r}: only {torch.cuda.device_count()} CUDA "
                           "device(s) are visible")
    return torch.device("cuda", index)


def sector_row_bytes(row_bytes: int) -> int:
    """Bytes of a row of the binned matrix padded so that no row straddles two 32-byte
    sectors (the unit the device reads from memory): the least multiple of 32 or divisor of
    32 at least `row_bytes`, where that adds at most a third; else `row_bytes`. A row
    gathered through the row-index buffer (every node below the root) then costs one sector
    read, not two (28 one-byte bins: 28 -> 32 bytes, three rows in four straddled)."""
    padded = next(v for v in (4, 8, 16, *range(32, row_bytes + 32, 32)) if v >= row_bytes)
    return padded if 3 * padded <= 4 * row_bytes else row_bytes


class _TreeState:
    """The backend's state of one tree: the host records of the tree being grown, the plan
    answering the grower, and the margin and gradient buffers it grows from and writes. The
    backend holds the current tree's (`CUDABackend._state`); a tree launched ahead of its
    round (`CUDABackend._launch_next_tree`) is launched on one of its own (`_NextTree`), and
    taken by making it the current one: one reference swapped."""

    __slots__ = (
        "scales", "wide", "chunk_cap", "uses_all_rows", "growing", "output", "ranges", "side",
        "used", "slot", "pending", "ahead", "best_first", "margin_plan", "level_buffers",
        "best_first_buffers", "margin", "margin_spare", "pairs", "pairs_ahead", "loss",
        "ahead_loss", "spare_loss", "bounds_host", "bounds_event", "bounds_ready")

    def __init__(self, margin, pairs, chunk_cap: int) -> None:
        """margin: float64 (n, K) device tensor; pairs: float32 (K, n, 2); chunk_cap: the
        histogram's rows per block before the first tree."""
        self.scales = (1.0, 1.0)  # the gradient pairs' (g, h) scales of the rounded pairs
        self.wide = False  # the rounded pairs exceed the histogram's shared 32-bit sums
        self.chunk_cap = chunk_cap
        self.uses_all_rows = True
        self.growing = False  # replace_columns rebuilds the tree's held histograms
        self.output = 0
        self.ranges = NodeRanges()  # node -> its rows in its row buffer
        self.side: dict[int, int] = {}  # node -> the row buffer holding its rows
        # histograms: one pool of slots, zeroed up to `used` at every tree; a subtracted
        # sibling takes its parent's slot and is made in place by the next kernel reading it
        # (`pending`: node -> its built sibling's slot)
        self.used = 0
        self.slot: dict[int, int] = {}
        self.pending: dict[int, int] = {}
        # steps planned on the device (`ahead.LevelPlan`, then `best_first.BestFirstPlan`);
        # the best-first one; the plan whose margin update was launched ahead into
        # `margin_spare` (n, 1); the plans' buffers, kept from tree to tree
        self.ahead: LevelPlan | BestFirstPlan | None = None
        self.best_first: BestFirstPlan | None = None
        self.margin_plan: LevelPlan | BestFirstPlan | None = None
        self.level_buffers = None
        self.best_first_buffers = None
        self.margin = margin
        self.margin_spare = None
        self.pairs = pairs
        # the next round's gradients, computed ahead behind a round's last margin update
        # (`_gradients_ahead`): pairs and their bounds (K, 2) in pinned memory behind an
        # event; valid (of loss `ahead_loss`) once the margins they were computed from are
        # kept; `spare_loss`: those of the margins added ahead into `margin_spare`
        self.pairs_ahead = None
        self.loss: str | None = None  # the loss of the last compute_gradients
        self.ahead_loss: str | None = None
        self.spare_loss: str | None = None
        self.bounds_host = None
        self.bounds_event = None
        self.bounds_ready = False  # bounds_host holds the bounds of `pairs`

    def fork(self, **fields: Any) -> _TreeState:
        """A copy of this state (the same objects) with `fields` replaced."""
        out = _TreeState.__new__(_TreeState)
        for name in self.__slots__:
            setattr(out, name, fields.pop(name) if name in fields else getattr(self, name))
        if fields:
            raise TypeError(f"no tree state fields {sorted(fields)}")
        return out


class _NextTree:
    """The next round's tree, launched behind a tree whose margins the device adds ahead
    (`CUDABackend._launch_next_tree`): the state it was launched on and left (`state`, a
    `_TreeState`), its rounding (`quantisation`, a `Quantisation` or None) from the
    gradient bounds (g, h) it read, and the arguments of its `plan_levels` (`plan`: levels,
    feature mask, reg, search_last, learning rate, best_first)."""

    def __init__(self, state: _TreeState, quantisation: Quantisation | None,
                 bounds: tuple[float, float], plan: tuple) -> None:
        self.state = state
        self.quantisation = quantisation
        self.bounds = bounds
        self.plan = plan

    def foretold(self, be: CUDABackend, output: int, rows: np.ndarray | None,
                 quantisation: Quantisation | None, bounds: tuple[float, float] | None) -> bool:
        """Whether `be.begin_tree(output, rows, quantisation, bounds)` starts this tree: one
        over all rows, rounded alike, from the margins it was launched on (the last tree's
        margins added ahead were kept) and the gradients of those margins (taken ahead by
        `compute_gradients`)."""
        return (output == 0 and rows is None and bounds is None
                and quantisation == self.quantisation
                and be._state.margin is self.state.margin and be._state.pairs is self.state.pairs)

    def same_plan(self, levels: int, feature_mask: np.ndarray, reg: np.ndarray,
                  search_last: bool, learning_rate: float | None,
                  best_first: tuple[int, int, int] | None) -> bool:
        """Whether `plan_levels` with these arguments is the plan launched."""
        plan_levels, mask, plan_reg, plan_search_last, rate, plan_best_first = self.plan
        return (levels == plan_levels and search_last == plan_search_last
                and best_first == plan_best_first and learning_rate == rate
                and np.array_equal(feature_mask, mask) and np.array_equal(reg, plan_reg))


class CUDABackend:
    """Kernels on one CUDA device (see `histboost.kernels.backend.Backend`).

    bins: host (n, F) uint8/uint16; bin_offsets: int64 (F+1,); device: 'cuda' or 'cuda:N';
    label float64 (n,), weight float64 (n,) or None; n_outputs: margins per row (K);
    count_rows: histograms carry a row-count channel (min_data_in_leaf). row_ids: int64 (n,)
    global row indices of quantised rounding (a worker's share of the rows; None: 0..n-1).
    """

    name = "cuda"

    def __init__(self, bins: np.ndarray | None, bin_offsets: np.ndarray, device: str = "cuda",
                 label: np.ndarray | None = None, weight: np.ndarray | None = None,
                 n_outputs: int = 1, count_rows: bool = False, raw: np.ndarray | None = None,
                 mapper=None, row_ids: np.ndarray | None = None) -> None:
        import torch

        from . import _common, binning, gradients, histogram, partition, predict, split

        self._torch = torch
        _torch_dtypes(torch)
        # fixed point: half a unit of a scale within a factor 2 of max|v| / MAX_SHARED_VALUE
        self.row_rounding = max(2.0**-19, 2.0 / (histogram.MAX_SHARED_VALUE + 1))
        self._k = {"common": _common, "gradients": gradients, "histogram": histogram,
                   "partition": partition, "predict": predict, "split": split,
                   "binning": binning}
        self.device = _cuda_device(device)
        dev = self.device
        self._stage_dev = None
        self._stage_next = 0
        self._front_views: dict[tuple, object] = {}
        self.offsets_host = np.ascontiguousarray(bin_offsets, np.int64)
        self.bin_offsets = self.offsets_host
        if bins is None and (raw is None or mapper is None):
            raise ValueError("the CUDA backend needs the binned matrix, or the raw matrix and "
                             "its BinMapper")
        shape = bins.shape if bins is not None else raw.shape
        self.n_rows, self.n_features = (int(s) for s in shape)
        self.total_bins = int(self.offsets_host[-1])
        self.n_outputs = int(n_outputs)
        self.count_rows = count_rows
        self._channels = 3 if count_rows else 2
        self._place_matrix(bins, raw, mapper)
        self.offsets = torch.from_numpy(self.offsets_host).to(dev)
        self.missing_bins = torch.from_numpy(
            (self.offsets_host[1:] - 1 - self.offsets_host[:-1]).astype(np.int32)).to(dev)
        self.label = (torch.zeros(self.n_rows, dtype=torch.float64, device=dev)
                      if label is None else torch.from_numpy(
                          np.ascontiguousarray(label, np.float64)).to(dev))
        self._weighted = weight is not None
        self.weight = (torch.ones(1, dtype=torch.float64, device=dev) if weight is None
                       else torch.from_numpy(np.ascontiguousarray(weight, np.float64)).to(dev))
        self._has_label = label is not None
        self._state = _TreeState(
            torch.zeros((self.n_rows, self.n_outputs), dtype=torch.float64, device=dev),
            torch.zeros((self.n_outputs, self.n_rows, 2), dtype=torch.float32, device=dev),
            self._k["common"].CHUNK_ROWS)
        self._ints = torch.zeros((self.n_rows, 2), dtype=torch.int32, device=dev)
        # the same pairs as one int64 a row, which the histogram kernel loads in one access
        self._ints_words = self._ints.view(torch.int64).view(self.n_rows)
        self._all_rows = torch.arange(self.n_rows, dtype=torch.int32, device=dev)
        # global row indices of quantised rounding (empty: 0..n-1), see the CPU backend
        if row_ids is not None and np.shape(row_ids) != (self.n_rows,):
            raise ValueError(f"row_ids must have shape ({self.n_rows},), got "
                             f"{np.shape(row_ids)}")
        self._row_ids = torch.as_tensor(
            np.zeros(0, np.int64) if row_ids is None else np.ascontiguousarray(row_ids, np.int64),
            device=dev)
        # the two row-index buffers of the partition (module `partition`); a tree's rows are
        # their first entries, the root's in buffer 0
        self._rows2 = torch.empty((2, self.n_rows), dtype=torch.int32, device=dev)
        self._set_histogram_launch(histogram.HIST_THREADS, None, None)
        # histograms: one pool of slots, shared by the trees (`_TreeState.used`, `slot`)
        self._pool = torch.zeros((0, self.total_bins, self._channels), dtype=torch.int64,
                                 device=dev)
        # `split.BEST_SPLIT`'s feature lists of a search over every feature
        self.every_feature = (torch.zeros((0, 0), dtype=torch.int32, device=dev),
                              torch.zeros(0, dtype=torch.int32, device=dev))
        # persistent kernel outputs, grown on demand (`_buffer`)
        self._chunk_left = None  # int64 (chunks,): left rows per partition chunk
        self._child_counts = None  # int64 (k, 2)
        self._records = None  # float64 (k, F, REC_WIDTH): per-feature best splits
        self._best = None  # float64 (k, REC_WIDTH)
        self._done = None  # int32 (k,) zeros: finished blocks per node of a split search
        self._step_build = None  # int64 (k, TABLE_WIDTH): a step's built children
        self._step_search = None  # int64 (2k, 2): a step's children for the split search
        self._step_out = None  # float64 (3k, REC_WIDTH): a step's records and row counts
        self._step_ranges = None  # int64 (2k, 3): a step's children's rows (unread)
        self.margins_kept_ahead = 0  # trees whose margin update ran ahead and was kept
        # steps the last finished best-first trees took from the device, by their shape
        # (max_leaves, max_depth, batch), at most `_RECENT_TREES` (`_plan_best_first`)
        self._best_first_steps: dict[tuple[int, int, int], list[int]] = {}
        # the grower's calls of best-first steps answered from steps planned on the device
        self.best_first_calls_answered = 0
        # the next round's tree launched ahead (`_launch_next_tree`): the hint of
        # `next_round`, the tree launched, and the one taken by `begin_tree` until the
        # grower's root histogram ("root") and plan ("plan") confirm it
        self._next_quantise = None
        self._next: _NextTree | None = None
        self._taken: _NextTree | None = None
        self._taken_stage = ""
        self._launching_ahead = False  # in `_launch_next_tree`
        # buffers of the tree launched ahead, besides the current tree's, by `_TreeState`
        # field: margin_spare (n, 1), bounds ((pinned (K, 2), event)), level_buffers and
        # best_first_buffers (absent: made when first needed)
        self._free: dict[str, Any] = {}
        self.trees_ahead_launched = 0  # next rounds' trees launched ahead
        self.trees_ahead_kept = 0  # ... and taken
        self.trees_ahead_dropped = 0  # ... and dropped (the next round was not as foretold)

    def _place_matrix(self, bins: np.ndarray | None, raw: np.ndarray | None, mapper) -> None:
        """The binned matrix on the device, from `bins` or binned there from `raw` and the
        mapper's cuts: `bins` (n, W) (rows padded), `_words` (its 32-bit words) and
        `_columns` (F, n) (column-major, for the partition and margins), of `_bin_dtype`.
        (`sparse.SparseCUDABackend` places its sparse layout instead.)"""
        torch = self._torch
        one_byte = int(np.diff(self.offsets_host).max(initial=1)) <= 256
        self._bin_dtype = np.dtype(np.uint8 if one_byte else np.int32)
        # rows padded to whole 4-byte words, which the histogram kernel reads, and where that
        # adds at most a third to 32-byte sectors (`sector_row_bytes`)
        size = 1 if one_byte else 4
        width = sector_row_bytes(-(-self.n_features * size // 4) * 4) // size
        self.bins = torch.zeros((self.n_rows, width), dtype=_TORCH_DTYPE[self._bin_dtype.str],
                                device=self.device)
        if bins is not None:
            self.bins[:, :self.n_features] = torch.from_numpy(
                np.ascontiguousarray(bins).astype(self._bin_dtype, copy=False)).to(self.device)
        else:
            self._bin_on_device(raw, mapper)
        self._words = self.bins.view(torch.int32) if one_byte else self.bins
        self._columns = self.bins[:, :self.n_features].t().contiguous()  # for the partition

    def _set_histogram_launch(self, threads: int, shared_bytes: int | None,
                              blocks: int | None) -> None:
        """The histogram kernel's launch: threads per block, dynamic shared memory per block
        (None: the device's opt-in limit; under the simulator `histogram.SHARED_VALUES`),
        and the blocks a call aims at (None: as many as the device runs at once,
        `BLOCKS_PER_SM` per multiprocessor). The feature groups follow from the shared memory.
        (`bench/gpu.py` sweeps these on the root.)"""
        hist = self._k["histogram"]
        if self.device.type == "cuda":
            from cuda.core import Device

            props = Device(self.device.index).properties
            limit = props.max_shared_memory_per_block_optin
            sms = props.multiprocessor_count
        else:
            limit, sms = 4 * hist.SHARED_VALUES, 1
        nbytes = limit if shared_bytes is None else min(int(shared_bytes), limit)
        self._shared_values = nbytes // 4
        self._hist_threads = int(threads)
        self._hist_blocks = hist.BLOCKS_PER_SM * sms if blocks is None else int(blocks)
        first, last = hist.feature_groups(self.offsets_host, self._channels,
                                          self._shared_values)
        self._hist_shared = hist.shared_bytes(self.offsets_host, first, last, self._channels,
                                              self._shared_values)
        self._group_first = self._torch.from_numpy(first).to(self.device)
        self._group_last = self._torch.from_numpy(last).to(self.device)

    def _hist_chunk(self, rows: int) -> int:
        """Rows per block of a histogram call over `rows` rows in all
        (`partition.hist_chunk_rows`: about `_hist_blocks` blocks)."""
        return self._k["partition"].hist_chunk_rows(int(rows), self._hist_blocks,
                                                    self._state.chunk_cap)

    def _build_blocks(self, lengths: np.ndarray) -> tuple[int, np.ndarray, int]:
        """The blocks of a step's smaller children, from their parents' row counts (a child
        has at most half its parent's rows): rows per block (`_hist_chunk` over all halves),
        each parent's first block (int64 (k,); parent j owns ceil(half / chunk) blocks, so no
        block takes more than `chunk` rows however unequal the children) and the blocks in
        all."""
        halves = lengths // 2
        chunk = self._hist_chunk(int(halves.sum()))
        blocks = -(-halves // chunk)
        first = np.zeros(len(lengths), np.int64)
        np.cumsum(blocks[:-1], out=first[1:])
        return chunk, first, int(blocks.sum())

    def _launch_build(self, table_d, n_chunks: int) -> None:
        """The histogram kernel over the chunks of a node table on the device."""
        hist = self._k["histogram"]
        hist.BUILD[self._bin_dtype, self._channels].launch(
            (n_chunks, int(self._group_first.shape[0])), self._hist_threads, self.device,
            self._words, self._ints_words, self._rows2, table_d, self._group_first,
            self._group_last, self.offsets, self._shared_values, self._state.wide, self._pool,
            shared_bytes=self._hist_shared)

    def _bin_on_device(self, raw: np.ndarray, mapper) -> None:
        """Bin the raw matrix on the device with the mapper's cuts, uploading it in blocks of
        about 128 MiB (the device never holds the whole raw matrix)."""
        torch = self._torch
        raw = np.ascontiguousarray(raw)
        if raw.dtype not in (np.float32, np.float64):
            raw = raw.astype(np.float64)
        cuts, ptr = self._upload(np.asarray(mapper.cut_values, np.float64),
                                 np.asarray(mapper.cut_ptr, np.int64))
        kernel = self._k["binning"].BIN_MATRIX[(raw.dtype, self._bin_dtype)]
        common = self._k["common"]
        step = max(1, (128 << 20) // max(1, raw.shape[1] * raw.itemsize))
        for a in range(0, self.n_rows, step):
            block = torch.from_numpy(raw[a:a + step]).to(self.device)
            out = self.bins[a:a + step]
            kernel.launch(common.grid(block.shape[0] * block.shape[1]), common.THREADS,
                          self.device, block, cuts, ptr, out)

    # -- helpers ------------------------------------------------------------------------------
    def _tensor(self, a: np.ndarray):
        return self._torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

    def _grow_staging(self, nbytes: int) -> None:
        """Pinned host buffers (a ring) and the one device buffer of `_upload`, at least
        nbytes each. Views and copies cut from the old buffers are dropped with them; kernels
        still reading the old device buffer keep it alive (torch's allocator frees memory in
        stream order)."""
        torch = self._torch
        size = max(nbytes, 1 << 16)
        size = 1 << (size - 1).bit_length()
        pinned = self.device.type == "cuda"
        self.synchronize()  # the ring's last copies out of the old host buffers
        self._stage_host = [torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
                            for _ in range(_STAGING_RING)]
        self._stage_np = [t.numpy() for t in self._stage_host]
        self._stage_dev = torch.empty(size, dtype=torch.uint8, device=self.device)
        self._stage_events = [None] * _STAGING_RING
        self._stage_copies: dict[tuple[int, int], tuple] = {}
        self._stage_views: dict[tuple, object] = {}

    def _upload(self, *arrays: np.ndarray) -> list:
        """Host arrays as device tensors in one asynchronous host-to-device copy (a copy costs
        more in latency than in bytes at these sizes; from pageable memory it also blocks the
        host, measured 75 us a call on an H100 host). The arrays are packed into a pinned
        staging buffer, each at an 8-byte aligned offset, copied to the front of one device
        buffer, and returned as views of it with their dtypes and shapes, views that are kept
        from call to call (no tensor operation is dispatched for them). The device buffer is
        overwritten by the next upload, which is ordered after every kernel launched before
        it on the stream, so a view is valid for the launches of the call that uploaded it.
        The host buffers are a ring, each reused once its last copy is done."""
        flat = [np.ascontiguousarray(a) for a in arrays]
        offsets, total = [], 0
        for a in flat:
            offsets.append(total)
            total += (a.nbytes + 7) // 8 * 8
        total = max(-(-total // _STAGING_ALIGN) * _STAGING_ALIGN, _STAGING_ALIGN)
        if self._stage_dev is None or total > self._stage_dev.shape[0]:
            self._grow_staging(total)
        i = self._stage_next
        self._stage_next = (i + 1) % _STAGING_RING
        event = self._stage_events[i]
        if event is not None:
            event.synchronize()
        host = self._stage_np[i]
        for a, o in zip(flat, offsets, strict=True):
            host[o:o + a.nbytes] = a.reshape(-1).view(np.uint8)
        copy = self._stage_copies.get((i, total))
        if copy is None:
            copy = (self._stage_dev[:total], self._stage_host[i][:total])
            self._stage_copies[(i, total)] = copy
        if self.device.type == "cuda":
            copy[0].copy_(copy[1], non_blocking=True)
            if event is None:
                event = self._stage_events[i] = self._torch.cuda.Event()
            event.record()
        else:
            copy[0].copy_(copy[1])
        out = []
        for a, o in zip(flat, offsets, strict=True):
            key = (o, a.dtype.str, a.shape)
            view = self._stage_views.get(key)
            if view is None:
                dtype = _TORCH_DTYPE[a.dtype.str]
                view = (self._stage_dev[o:o + a.nbytes].view(dtype).view(a.shape) if a.size
                        else self._torch.empty(a.shape, dtype=dtype, device=self.device))
                if len(self._stage_views) > _MAX_CACHED_VIEWS:
                    self._stage_views.clear()
                self._stage_views[key] = view
            out.append(view)
        return out

    def _buffer(self, name: str, rows: int, shape: tuple, dtype, zeros: bool = False):
        """A persistent device buffer of at least `rows` leading entries (grown by doubling;
        zero-filled when `zeros`)."""
        buf = getattr(self, name)
        if buf is None or buf.shape[0] < rows:
            n = max(rows, 2 * (0 if buf is None else buf.shape[0]), 8)
            make = self._torch.zeros if zeros else self._torch.empty
            buf = make((n, *shape), dtype=dtype, device=self.device)
            setattr(self, name, buf)
            self._front_views.clear()
        return buf

    def _read(self, t) -> np.ndarray:
        """A host copy of device tensor t (under the simulator t is on the host: copied too, as
        the backend's buffers are reused)."""
        return t.cpu().numpy() if self.device.type == "cuda" else t.numpy().copy()

    def _front(self, buf, k: int, first: int = 0):
        """buf[first:first + k], a view kept from call to call."""
        key = (id(buf), first, k)
        view = self._front_views.get(key)
        if view is None or view._base is not buf:
            view = buf[first:first + k]
            if len(self._front_views) > _MAX_CACHED_VIEWS:
                self._front_views.clear()
            self._front_views[key] = view
        return view

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            self._torch.cuda.synchronize(self.device)

    def release(self) -> None:
        """Drop every device buffer and return the cached memory to the driver."""
        self.synchronize()
        for name in ("_stage_dev", "bins", "_words", "_columns", "offsets", "missing_bins",
                     "label", "weight", "_ints", "_ints_words", "_all_rows", "_row_ids",
                     "_rows2", "_pool", "_chunk_left", "_child_counts", "_records", "_best",
                     "_done", "_step_build", "_step_search", "_step_out", "_step_ranges",
                     "_group_first", "_group_last"):
            setattr(self, name, None)
        self._state = None  # the tree's buffers and plans
        self._best_first_steps = {}
        self._next = self._taken = self._next_quantise = None
        self._free = {}
        self._stage_host = self._stage_np = None
        self._stage_copies = {}
        self._stage_views = {}
        self._front_views.clear()
        if self.device.type == "cuda":
            self._torch.cuda.empty_cache()

    # -- margins and gradients ----------------------------------------------------------------
    def _spare_margin(self):
        """float64 (n, 1): margins of one output written out of place (a tree's margin
        update launched ahead, `ahead.LevelPlan.launch_leaves`)."""
        st = self._state
        if st.margin_spare is None:
            st.margin_spare = self._torch.empty((self.n_rows, 1), dtype=self._torch.float64,
                                                device=self.device)
        return st.margin_spare

    def _keep_spare_margin(self, output: int) -> None:
        """The spare margins become output's (a swap with one output, else a copy)."""
        self.margins_kept_ahead += 1
        st = self._state
        if self.n_outputs == 1:
            st.margin, st.margin_spare = st.margin_spare, st.margin
        else:
            st.margin[:, output].copy_(st.margin_spare[:, 0])

    def set_margin(self, margin: np.ndarray) -> None:
        if margin.shape != tuple(self._state.margin.shape):
            raise ValueError(f"margin must have shape {tuple(self._state.margin.shape)}, got "
                             f"{margin.shape}")
        margin = np.asarray(margin, np.float64)
        if margin.ndim == 2 and margin.strides[0] == 0:  # every row the same (a broadcast)
            self._state.margin.copy_(self._tensor(margin[:1].copy()).expand_as(self._state.margin))
        else:
            self._state.margin.copy_(self._tensor(margin))
        self._state.ahead_loss = self._state.spare_loss = None
        self._forget_next()

    def margin(self) -> np.ndarray:
        return self._state.margin.cpu().numpy().copy()

    def compute_gradients(self, loss: str) -> None:
        try:
            kernel = self._k["gradients"].PAIR_KERNELS[loss]
        except KeyError:
            raise ValueError(f"the CUDA backend has no gradient kernel for loss {loss!r}") \
                from None
        if not self._has_label:
            raise ValueError("the backend holds no labels")
        self._state.loss = loss
        if self._state.ahead_loss == loss:  # computed ahead from these margins (_gradients_ahead)
            self._state.pairs, self._state.pairs_ahead = self._state.pairs_ahead, self._state.pairs
            self._state.ahead_loss = None
            self._state.bounds_ready = True
            return
        self._state.ahead_loss = None
        self._state.bounds_ready = False
        grid = self._k["common"].grid(self.n_rows)
        kernel.launch(grid, self._k["common"].THREADS, self.device, self._state.margin, self.label,
                      self.weight, self._weighted, self._state.pairs)

    def _gradients_ahead(self, margin=None) -> str | None:
        """The next round's gradient pairs of the last loss from `margin` (float64 (n, K);
        None: the backend's margins), and their bounds, launched into a second pairs buffer,
        the bounds copied to pinned memory behind an event; returns the loss (None when no
        loss is known). The caller marks them valid (`_ahead_loss`) once `margin` holds the
        next round's margins: then the next `compute_gradients` of that loss takes them (a
        buffer swap) and `gradient_bounds` reads them once the event has passed, so the
        round's start launches no gradient kernel and waits for none. Anything that changes
        the margins or pairs first (`set_margin`, `update_margin`, `set_gradients`) drops
        them."""
        if self._state.loss is None or self.n_rows == 0:
            return None
        torch = self._torch
        if self._state.pairs_ahead is None:
            self._state.pairs_ahead = torch.empty_like(self._state.pairs)
            self._state.bounds_host, self._state.bounds_event = self._new_bounds()
        kernel = self._k["gradients"].PAIR_KERNELS[self._state.loss]
        grid = self._k["common"].grid(self.n_rows)
        kernel.launch(grid, self._k["common"].THREADS, self.device,
                      self._state.margin if margin is None else margin, self.label, self.weight,
                      self._weighted, self._state.pairs_ahead)
        bounds = torch.linalg.vector_norm(self._state.pairs_ahead, ord=math.inf, dim=1)
        if self._state.bounds_event is None:  # the simulator: CPU tensors
            self._state.bounds_host.copy_(bounds)
        else:
            self._state.bounds_host.copy_(bounds, non_blocking=True)
            self._state.bounds_event.record(torch.cuda.current_stream(self.device))
        return self._state.loss

    def _gradients_of_spare(self) -> None:
        """The next round's gradients from the margins a tree's margin update launched ahead
        wrote into the spare column, while the host replays the tree (with one output;
        `update_margin` makes them valid when it keeps the margins)."""
        if self.n_outputs == 1:
            st = self._state
            st.spare_loss = self._gradients_ahead(st.margin_spare)

    def _new_bounds(self) -> tuple:
        """Pinned float32 (K, 2) host bounds and their event (None under the simulator)."""
        torch = self._torch
        on_gpu = self.device.type == "cuda"
        return (torch.zeros((self.n_outputs, 2), dtype=torch.float32, pin_memory=on_gpu),
                torch.cuda.Event() if on_gpu else None)

    def set_gradients(self, pairs: np.ndarray) -> None:
        if pairs.shape != tuple(self._state.pairs.shape):
            raise ValueError(f"gradient pairs must have shape {tuple(self._state.pairs.shape)}, "
                             f"got {pairs.shape}")
        self._state.pairs.copy_(self._tensor(np.asarray(pairs, np.float32)))
        self._state.loss = self._state.ahead_loss = None
        self._forget_next()
        self._state.bounds_ready = False

    def gradients(self, output: int) -> np.ndarray:
        return self._state.pairs[output].cpu().numpy().copy()

    def gradient_bounds(self, output: int) -> tuple[float, float]:
        if self.n_rows == 0:
            return 0.0, 0.0
        if self._state.bounds_ready:  # computed ahead with the pairs (_gradients_ahead)
            if self._state.bounds_event is not None:
                self._state.bounds_event.synchronize()
            g, h = self._state.bounds_host[output].tolist()
            return float(g), float(h)
        # max |v| in one pass (abs().amax() wrote and read an n x 2 temporary)
        g, h = self._torch.linalg.vector_norm(self._state.pairs[output], ord=math.inf,
                                              dim=0).cpu().tolist()
        return float(g), float(h)

    # -- one tree -----------------------------------------------------------------------------
    def begin_tree(self, output: int, rows: np.ndarray | None,
                   quantisation: Quantisation | None,
                   bounds: tuple[float, float] | None = None) -> int:
        nxt, self._next = self._next, None
        self._taken = None
        if nxt is not None:
            if nxt.foretold(self, output, rows, quantisation, bounds):
                self._take_next(nxt)
                return self.n_rows
            self._drop_next(nxt)
        top = float(self._k["histogram"].MAX_SHARED_VALUE)
        if quantisation is None:  # fixed point, rounded to nearest (module docstring)
            g_bound, h_bound = bounds if bounds is not None else self.gradient_bounds(output)
            g_inv, h_inv = (1.0 if b == 0.0 or not math.isfinite(b)
                            else 2.0 ** math.floor(math.log2(top / b))
                            for b in (g_bound, h_bound))
            key, stochastic = 0, False
            # rounded values stay within max|v| * inv_scale + 1/2 of zero
            largest = max(g_bound * g_inv, h_bound * h_inv) + 1
        else:
            g_inv, h_inv = quantisation.g_inv_scale, quantisation.h_inv_scale
            key, stochastic = quantisation.key, True
            largest = quantisation.max_value
        common = self._k["common"]
        self._k["gradients"].ROUND_PAIRS.launch(
            common.grid(self.n_rows), common.THREADS, self.device, self._state.pairs, output,
            self._row_ids, g_inv, h_inv, key >> 32, key & 0xFFFFFFFF, stochastic, self._ints)
        self._state.scales = (1.0 / g_inv, 1.0 / h_inv)
        self._state.wide = largest > top
        self._state.chunk_cap = self._k["histogram"].chunk_cap(largest)
        self._state.uses_all_rows = rows is None
        self._state.growing = True  # replace_columns rebuilds the tree's held histograms
        self._state.ahead = None
        self._state.best_first = None
        self._state.margin_plan = None
        self._state.spare_loss = None
        self._state.output = int(output)
        if rows is None:
            n = self.n_rows
            self._rows2[0].copy_(self._all_rows)
        else:
            n = int(np.shape(rows)[0])
            if n:
                self._rows2[0, :n].copy_(self._torch.from_numpy(
                    np.ascontiguousarray(rows, np.int32)))
        if self._state.used:
            self._pool[:self._state.used].zero_()
        self._state.used = 0
        self._state.slot.clear()
        self._state.pending.clear()
        self._state.side = {0: 0}
        self._state.ranges.reset(n)
        return n

    def _node_table(self, nodes: list[int], chunk, extra: list | None = None
                    ) -> tuple[np.ndarray, int]:
        """The int64 node table of `nodes` and its chunk count (`_common.node_table`)."""
        return self._k["common"].node_table(self._state.ranges.bounds(nodes),
                                            [self._state.side[i] for i in nodes], chunk, extra)

    def _settle(self, nodes: list[int] | None = None) -> None:
        """Make the pending subtractions of `nodes` (None: all) in one launch."""
        todo = list(self._state.pending) if nodes is None else [i for i in dict.fromkeys(nodes)
                                                          if i in self._state.pending]
        if not todo:
            return
        st = self._state
        pairs = np.array([(st.slot[i], st.pending.pop(i)) for i in todo], np.int64)
        (pairs_d,) = self._upload(pairs)
        common = self._k["common"]
        self._k["histogram"].SUBTRACT.launch(
            common.grid(pairs.shape[0] * self.total_bins * self._channels), common.THREADS,
            self.device, self._pool, pairs_d)

    def _search_nodes(self, nodes: list[int]) -> np.ndarray:
        """int64 (k, 2) (slot, pending sibling's slot or -1) of `nodes` for the split kernels,
        which make the pending subtractions; the nodes are settled from here on. A node listed
        twice is settled first (two blocks would subtract)."""
        if len(set(nodes)) < len(nodes):
            self._settle(nodes)
        st = self._state
        table = np.array([(st.slot[i], st.pending.pop(i, -1)) for i in nodes], np.int64)
        return table.reshape(-1, 2)

    def _gather(self, nodes: list[int]):
        """The (k, total_bins, C) histograms of settled `nodes`: a view of the pool when their
        slots are consecutive, else a copy."""
        slots = [self._state.slot[i] for i in nodes]
        first = slots[0]
        if slots == list(range(first, first + len(slots))):
            return self._pool[first:first + len(slots)]
        (index,) = self._upload(np.array(slots, np.int64))
        return self._pool.index_select(0, index)

    def _scaled(self, sums: np.ndarray) -> np.ndarray:
        """Integer sums (..., C) in gradient units (float64; exact: power-of-two scales)."""
        scale = np.array([self._state.scales[0], self._state.scales[1], 1.0][:sums.shape[-1]])
        return sums.astype(np.float64) * scale

    def _alloc_slots(self, k: int) -> int:
        """k fresh (zero) consecutive pool slots; returns the first. The pool grows to a
        quarter more than needed, not to twice its size: a 255-leaf tree needs about 64 +
        33 a best-first step launched, 115 KB a slot at 28 features of 256 bins, and a
        doubling past 512 slots would hold 59 MB more than needed (docs/gpu.md)."""
        first = self._state.used
        if first + k > self._pool.shape[0]:  # grow, keeping the tree's histograms
            torch = self._torch
            need = first + k
            pool = torch.zeros((max(need + need // 4, 8), self.total_bins, self._channels),
                               dtype=torch.int64, device=self.device)
            pool[:first] = self._pool[:first]
            self._pool = pool
        self._state.used = first + k
        return first

    def build_histograms(self, nodes: list[int]):
        if self._taken is not None:
            if nodes == [0] and self._taken_stage == "root":  # built when launched ahead
                self._taken_stage = "plan"
                return self._pool[:1]
            self._rewind()
        k = len(nodes)
        first = self._alloc_slots(k)
        for j, i in enumerate(nodes):
            self._state.slot[i] = first + j
            self._state.pending.pop(i, None)
        common = self._k["common"]
        bounds = self._state.ranges.bounds(nodes)
        chunk = self._hist_chunk(sum(max(b - a, 0) for a, b in bounds))
        table, n_chunks = self._node_table(nodes, chunk, [(first + j,) for j in range(k)])
        if self._state.uses_all_rows:  # a node over all rows in order reads no row indices
            whole = (table[:, common.T_START] == 0) & (table[:, common.T_END] == self.n_rows) \
                & (table[:, common.T_SIDE] == 0)
            table[whole, common.T_SIDE] = self._k["histogram"].IDENTITY_SIDE
        if n_chunks:
            (table_d,) = self._upload(table)
            self._launch_build(table_d, n_chunks)
        return self._pool[first:first + k]

    def _settle_before_split(self, parents: list[int], built: list[int]) -> None:
        """Make the pending subtractions that must not wait past a subtraction from `parents`
        (whose slots their siblings take and change): of the parents and built nodes, and of
        nodes whose built sibling's slot a parent's is."""
        slots = {self._state.slot[i] for i in parents}
        waiting = [i for i in (*parents, *built) if i in self._state.pending]
        waiting += [i for i, s in self._state.pending.items() if s in slots]
        self._settle(waiting)

    def subtract_histograms(self, parents: list[int], built: list[int],
                            targets: list[int]) -> None:
        self._settle_before_split(parents, built)
        for p, b, t in zip(parents, built, targets, strict=True):
            self._state.slot[t] = self._state.slot.pop(p)
            self._state.pending[t] = self._state.slot[b]

    def read_histograms(self, nodes: list[int]) -> np.ndarray:
        self._settle(nodes)
        return self._scaled(self._gather(nodes).cpu().numpy())

    def plan_levels(self, levels: int, feature_mask: np.ndarray, reg: np.ndarray,
                    search_last: bool, learning_rate: float | None = None,
                    best_first: tuple[int, int, int] | None = None) -> bool:
        """`Backend.plan_levels`: the levels launched at once, each planned on the device
        (`histboost.kernels.cuda.ahead`); the grower's calls for them are then answered from
        them. Declined (False) for more than `ahead.MAX_LEVELS` levels (its launches are
        sized for 2**levels nodes) or when other histograms than the root's are held. With
        `best_first`, the tree's next best-first steps are launched behind the levels
        (`_plan_best_first`). With a learning rate and a tree over all rows, the tree's
        margin update is launched behind its levels (`ahead.LevelPlan.launch_leaves`) or
        best-first steps (`best_first.BestFirstPlan.launch_leaves`), `update_margin`
        checks it, and the next round's tree is launched behind it (`_launch_next_tree`)."""
        from . import ahead

        taken, self._taken = self._taken, None
        if taken is not None:
            if self._taken_stage == "plan" and taken.same_plan(
                    levels, feature_mask, reg, search_last, learning_rate, best_first):
                self.trees_ahead_kept += 1
                self._launch_next_tree(taken.plan)
                return True
            self._taken = taken
            self._rewind()
        st = self._state
        if not 0 < levels <= ahead.MAX_LEVELS or list(st.slot) != [0] or st.pending:
            return False
        n = st.ranges.bounds([0])[0][1]
        bufs = st.level_buffers
        if bufs is None or bufs.depth != levels or bufs.n_rows != n:
            st.level_buffers = None
            bufs = st.level_buffers = ahead.LevelBuffers(self, levels, n)
        plan = ahead.LevelPlan(self, bufs, n, search_last, at_once=self._launching_ahead)
        rate = learning_rate if st.uses_all_rows else None
        plan.launch(feature_mask, reg, None if search_last else rate, st.output)
        st.ahead = plan
        if best_first is not None and search_last:
            st.best_first = self._plan_best_first(plan, feature_mask, reg, rate, *best_first)
            st.margin_plan = st.best_first if rate is not None else None
        else:
            st.margin_plan = plan if rate is not None and not search_last else None
        if st.margin_plan is not None:
            self._launch_next_tree((levels, np.asarray(feature_mask, bool).copy(),
                                    np.asarray(reg, np.float64).copy(), search_last,
                                    learning_rate, best_first))
        return True

    def next_round(self, quantise: Callable[[float, float], Quantisation | None] | None
                   ) -> None:
        """`Backend.next_round`: kept for the round's tree whose margins the device adds
        ahead, behind which `_launch_next_tree` launches the next round's."""
        self._next_quantise = quantise

    def _launch_next_tree(self, plan: tuple) -> None:
        """The next round's tree launched behind this one (`Backend.next_round`'s hint),
        while the host replays this one: once the device has computed the next round's
        gradient bounds (behind this tree's margins added ahead: the host waits for this
        tree's kernels here, which its replay waits for anyway), the next round's
        `begin_tree`, root histogram and `plan_levels` (`plan`: this tree's arguments; the
        margin update and the following round's gradients behind it) run on the state the
        next round will have (a `_TreeState` of its own, `_NextTree`): this tree's spare
        margins as the margins, the gradients computed ahead as the pairs, this tree's pairs
        for its own gradients ahead, and buffers of their own for what it writes (the third
        margin buffer, a second set of bounds, level and best-first buffers). The current
        tree's state is restored; `begin_tree` takes the launched one when the next round is
        the one foretold (`_NextTree.foretold`), else it is dropped, having changed nothing
        the model depends on. One output, all rows, the tree's feature mask all features (so
        the next tree's too), and a best-first tree finished on the device (otherwise the
        host plans its last steps from the histograms and rows the next tree would
        overwrite), else nothing is launched."""
        quantise, self._next_quantise = self._next_quantise, None
        cur = self._state
        if (quantise is None or self.n_outputs != 1 or cur.spare_loss is None
                or not cur.uses_all_rows or not bool(np.all(plan[1]))):
            return
        if cur.bounds_event is not None:
            cur.bounds_event.synchronize()
        if cur.best_first is not None and not cur.best_first.finished():
            return
        g, h = (float(v) for v in cur.bounds_host[0].tolist())
        quantisation = quantise(g, h)
        torch = self._torch
        free, self._free = self._free, {}
        margin_spare = free.get("margin_spare")
        bounds_host, bounds_event = free.get("bounds") or self._new_bounds()
        # its next round's gradients go into this round's pairs: read only by this tree's
        # rounding (`begin_tree`), which the device runs before them
        state = cur.fork(
            margin=cur.margin_spare, pairs=cur.pairs_ahead, pairs_ahead=cur.pairs,
            margin_spare=torch.empty_like(cur.margin_spare) if margin_spare is None
            else margin_spare,
            bounds_host=bounds_host, bounds_event=bounds_event, bounds_ready=False,
            ahead_loss=None, level_buffers=free.get("level_buffers"),
            best_first_buffers=free.get("best_first_buffers"), slot={}, pending={}, side={},
            ranges=NodeRanges())
        self._state = state
        self._launching_ahead = True
        try:
            self.begin_tree(0, None, quantisation, (g, h) if quantisation is None else None)
            self.build_histograms([0])
            self.plan_levels(*plan)
        finally:
            self._launching_ahead = False
            self._state = cur
        self.trees_ahead_launched += 1
        self._next = _NextTree(state, quantisation, (g, h), plan)

    @staticmethod
    def _buffers_of(state: _TreeState) -> dict[str, Any]:
        """The buffers of `state` that a tree launched ahead takes as its own (`_free`)."""
        return {"margin_spare": state.margin_spare,
                "bounds": (state.bounds_host, state.bounds_event),
                "level_buffers": state.level_buffers,
                "best_first_buffers": state.best_first_buffers}

    def _take_next(self, nxt: _NextTree) -> None:
        """The tree launched ahead becomes the current tree (its root histogram built, its
        levels planned); the current state's buffers it does not use become the free ones."""
        self._free = self._buffers_of(self._state)
        self._state = nxt.state
        self._taken, self._taken_stage = nxt, "root"

    def _drop_next(self, nxt: _NextTree) -> None:
        """The tree launched ahead is not the next round's: its buffers are free again (what
        it wrote there and in the tree's shared buffers is overwritten by the next tree
        before it is read; its pool slots are zeroed with the next tree's)."""
        self._free = self._buffers_of(nxt.state)
        self._state.used = max(self._state.used, nxt.state.used)
        self.trees_ahead_dropped += 1

    def _forget_next(self) -> None:
        """Drop the tree launched ahead (the margins or gradients it assumed changed)."""
        nxt, self._next = self._next, None
        if nxt is not None:
            self._drop_next(nxt)

    def _rewind(self) -> None:
        """A tree taken from ahead that the grower grows otherwise (another learning rate or
        plan): started again as `begin_tree` and `build_histograms([0])` start it (the same
        rounding of the same pairs; every pool slot zeroed), so that the grower's calls are
        made as usual."""
        taken, self._taken = self._taken, None
        self.trees_ahead_dropped += 1
        self.begin_tree(0, None, taken.quantisation,
                        taken.bounds if taken.quantisation is None else None)
        self.build_histograms([0])

    def _plan_best_first(self, levels: LevelPlan, feature_mask: np.ndarray, reg: np.ndarray,
                         learning_rate: float | None, max_leaves: int, max_depth: int,
                         batch: int) -> BestFirstPlan | None:
        """Best-first steps after the planned levels (`levels`, launched) run on the device
        (`histboost.kernels.cuda.best_first`); the host plans any step beyond them. How
        many: two more than the most the last finished trees of the same shape took from the
        device (`_RECENT_TREES`; a step launched and not needed costs six launches of
        kernels that return at once; a step needed and not launched, a host round trip, and
        the tree's margins are not added ahead nor the next tree launched ahead), for the
        first tree the leaves left in batches of `batch` and a few more (a step splits
        leaves ahead that the tree may not keep). With a learning rate, the tree's margin
        update follows the steps. None (not planned) for trees without a leaf budget or with
        more leaves than the device's tables hold."""
        from . import best_first as bf

        # a step adds a leaf per parent to a tree of fewer than max_leaves leaves
        parents = min(bf.step_shape(batch, max_depth), max_leaves - 1)
        if not 0 < max_leaves <= bf.NODE_CAP // 2 - 32 or parents > bf.MAX_PARENTS:
            return None
        left = max(0, max_leaves - (1 << levels.bufs.depth))
        first_guess = min(bf.MAX_STEPS, -(-left // max(1, batch)) + 2)
        recent = self._best_first_steps.get((max_leaves, max_depth, batch))
        steps = min(bf.MAX_STEPS, max(recent) + 2) if recent else first_guess
        # buffers for the most steps at once: grown to each tree's guess, they were made
        # again (and every step's kernel parameters packed again) tree after tree while the
        # guesses rose from the first towards MAX_STEPS
        st = self._state
        bufs = st.best_first_buffers
        if bufs is None or (bufs.parents, bufs.n_rows) != (parents, levels.n_rows):
            st.best_first_buffers = None
            bufs = st.best_first_buffers = bf.BestFirstBuffers(
                self, bf.MAX_STEPS, parents, levels.n_rows)
        plan = bf.BestFirstPlan(self, bufs, levels, max_leaves, max_depth, batch,
                                at_once=self._launching_ahead)
        plan.launch(feature_mask, reg, steps, learning_rate, st.output)
        return plan

    def _answer_ahead(self, parents: list[int], lefts: list[int], rights: list[int],
                      feature_masks: np.ndarray | None, reg: np.ndarray | None
                      ) -> tuple[np.ndarray, np.ndarray | None] | None:
        """A step answered from the plan ahead (`_ahead`): the children's counts and records
        (None without a search); None when the plan does not hold this step (the host plans
        it, and the tree's later steps)."""
        plan = self._state.ahead
        answer = plan.step(parents, lefts, rights, feature_masks, reg)
        if answer is None:
            self._state.ahead = None
            return None
        counts, recs, last = answer
        if plan is self._state.best_first:
            self.best_first_calls_answered += 1
        elif last:  # the levels are stepped: best-first steps planned on the device follow
            self._state.ahead = self._state.best_first
            if self._state.best_first is not None:
                self._state.best_first.begin()
        return self._record_children(parents, lefts, rights, counts[:, 0]), recs

    def histogram_totals(self, nodes: list[int]) -> np.ndarray:
        if self._taken is not None:  # the tree is not planned as foretold
            self._rewind()
        if self._state.ahead is not None and not self._state.ahead.root_read and nodes == [0]:
            return self._state.ahead.root_totals()
        self._settle(nodes)
        o0, o1 = int(self.offsets_host[0]), int(self.offsets_host[1])
        sums = self._gather(nodes)[:, o0:o1, :2].sum(dim=1)  # exact integers
        return self._scaled(sums.cpu().numpy())

    def _bounds(self, k: int, monotone: tuple | None) -> tuple[bool, np.ndarray, np.ndarray,
                                                               np.ndarray]:
        """The split kernels' constraint arguments: (constrained, constraint int32 (F,),
        lower float64 (k,), upper float64 (k,)); without constraints (False, zeros, -inf,
        +inf), which the kernels do not use."""
        if monotone is None:
            return (False, np.zeros(self.n_features, np.int32), np.full(k, -np.inf),
                    np.full(k, np.inf))
        cons, lower, upper = monotone
        if np.shape(cons) != (self.n_features,) or np.shape(lower) != (k,) \
                or np.shape(upper) != (k,):
            raise ValueError(f"monotone must be (constraint ({self.n_features},), lower "
                             f"({k},), upper ({k},)), got shapes {np.shape(cons)}, "
                             f"{np.shape(lower)}, {np.shape(upper)}")
        return (True, np.asarray(cons, np.int32), np.asarray(lower, np.float64),
                np.asarray(upper, np.float64))

    def _searched_features(self, masks, nodes) -> tuple:
        """How a split search takes the features of the nodes of nodes (device int64 (k, 2):
        pool slot, pending sibling's slot) under their feature masks (device uint8 (k, F)):
        (kernel, its threads, blocks a node, listed, n_listed), the last two the kernel's
        lists (`split.BEST_SPLIT`). The dense layout searches every feature, a block of
        SPLIT_THREADS each (empty lists); `sparse.SparseCUDABackend` lists the features with
        stored values in each node."""
        split = self._k["split"]
        return split.BEST_SPLIT, split.SPLIT_THREADS, self.n_features, *self.every_feature

    def _launch_search(self, nodes, totals, masks, reg, bounds: tuple, records, best,
                       done) -> None:
        """The split search of the nodes of `nodes` (device int64 (k, 2)) into best (float64
        (k, REC_WIDTH)), its arguments on the device as `split.BEST_SPLIT` takes them
        (bounds: constrained, constraint, lower, upper), over `_searched_features`."""
        kernel, threads, per_node, listed, n_listed = self._searched_features(masks, nodes)
        kernel.launch(int(nodes.shape[0]) * per_node, threads, self.device, self._pool,
                      self._state.scales[0], self._state.scales[1], nodes, totals, self.offsets,
                      masks, reg, *bounds, listed, n_listed, records, best, done)

    def find_best_splits(self, nodes: list[int], totals: np.ndarray, feature_masks: np.ndarray,
                         reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        torch = self._torch
        k = len(nodes)
        if k == 0:
            return np.zeros((0, REC_WIDTH))
        if self._state.ahead is not None:
            if monotone is not None or nodes != [0] or self._state.ahead.root_read:
                self._state.ahead.mismatch("a search other than the root's")
            return self._state.ahead.root_records(totals, feature_masks, reg)
        records = self._buffer("_records", k, (self.n_features, REC_WIDTH), torch.float64)
        best = self._buffer("_best", k, (REC_WIDTH,), torch.float64)
        done = self._buffer("_done", k, (), torch.int32, zeros=True)
        constrained, cons, lower, upper = self._bounds(k, monotone)
        table, tot, masks, reg_d, cons, lower, upper = self._upload(
            self._search_nodes(nodes), np.asarray(totals, np.float64),
            np.asarray(feature_masks, np.uint8), np.asarray(reg, np.float64), cons, lower,
            upper)
        self._launch_search(table, tot, masks, reg_d, (constrained, cons, lower, upper),
                            records, best, done)
        return self._read(self._front(best, k))

    def oblivious_gains(self, nodes: list[int], totals: np.ndarray, feature_mask: np.ndarray,
                        reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        torch = self._torch
        k = len(nodes)
        node_gains = torch.full((k, self.total_bins, 2), -math.inf, dtype=torch.float64,
                                device=self.device)
        unordered = torch.zeros((self.total_bins, 2), dtype=torch.uint8, device=self.device)
        common = self._k["common"]
        split = self._k["split"]
        constrained, cons, lower, upper = self._bounds(k, monotone)
        table, tot, mask, reg_d, cons, lower, upper = self._upload(
            self._search_nodes(nodes), np.asarray(totals, np.float64),
            np.asarray(feature_mask, np.uint8), np.asarray(reg, np.float64), cons, lower,
            upper)
        split.OBLIVIOUS_NODE_GAINS.launch(
            common.grid(k * self.n_features), common.THREADS, self.device, self._pool,
            self._state.scales[0], self._state.scales[1], table, tot, self.offsets, mask, reg_d,
            constrained, cons, lower, upper, node_gains, unordered)
        out = torch.empty((self.total_bins, 2), dtype=torch.float64, device=self.device)
        split.SUM_OVER_NODES.launch(common.grid(2 * self.total_bins), common.THREADS,
                                    self.device, node_gains, unordered, out)
        return out.cpu().numpy()

    def evaluate_split(self, nodes: list[int], feature: int, split_bin: int,
                       default_left: bool) -> np.ndarray:
        self._settle(nodes)
        hists = self._gather(nodes)
        o = int(self.offsets_host[feature])
        left = hists[:, o:o + split_bin + 1, :2].sum(dim=1)
        if default_left:
            left = left + hists[:, int(self.offsets_host[feature + 1]) - 1, :2]
        return self._scaled(left.cpu().numpy())

    def _partition(self, parents: list[int], records: np.ndarray) -> tuple[np.ndarray, int]:
        """The node table of a partition of `parents` by their records (split columns
        filled) and its chunk count."""
        part = self._k["partition"]
        splits = records[:, [REC_FEATURE, REC_BIN, REC_DEFAULT_LEFT]].astype(np.int64).tolist()
        table, n_chunks = self._node_table(parents, part.partition_chunk_rows, splits)
        return table, n_chunks

    def _launch_partition(self, table_d, n_chunks: int, k: int):
        """The two partition launches over a node table on the device; returns the children's
        counts buffer (int64 (>= k, 2))."""
        torch = self._torch
        common = self._k["common"]
        part = self._k["partition"]
        chunk_left = self._buffer("_chunk_left", max(n_chunks, 1), (), torch.int64)
        counts = self._buffer("_child_counts", k, (2,), torch.int64)
        if n_chunks:
            args = (self._columns, self._rows2, table_d, self.missing_bins, chunk_left)
            part.COUNT_LEFT[self._bin_dtype].launch(n_chunks, common.THREADS, self.device,
                                                    *args)
            part.SCATTER_ROWS[self._bin_dtype].launch(n_chunks, common.THREADS, self.device,
                                                      *args, counts)
        return counts

    def _record_children(self, parents: list[int], lefts: list[int], rights: list[int],
                         n_left: np.ndarray) -> np.ndarray:
        for p, left, right in zip(parents, lefts, rights, strict=True):
            self._state.side[left] = self._state.side[right] = 1 - self._state.side[p]
        return self._state.ranges.split(parents, lefts, rights, n_left)

    def apply_splits(self, parents: list[int], lefts: list[int], rights: list[int],
                     records: np.ndarray) -> np.ndarray:
        common = self._k["common"]
        k = len(parents)
        if self._state.ahead is not None:
            answer = self._answer_ahead(parents, lefts, rights, None, None)
            if answer is not None:
                return answer[0]
        table, n_chunks = self._partition(parents, records)
        n_left = np.zeros(k, np.int64)
        if n_chunks:
            (table_d,) = self._upload(table)
            counts = self._launch_partition(table_d, n_chunks, k)
            # parents without rows own no chunk: their entries are stale
            has_rows = table[:, common.T_END] > table[:, common.T_START]
            n_left = np.where(has_rows, self._read(self._front(counts, k))[:, 0], 0)
        return self._record_children(parents, lefts, rights, n_left)

    # made of the backend's own calls, as `ComposedSteps` makes it: the partition's row counts
    # are read once to choose the smaller children, whose builds then queue behind it
    split_and_build = ComposedSteps.split_and_build

    def split_and_search(self, parents: list[int], lefts: list[int], rights: list[int],
                         records: np.ndarray, child_sums: np.ndarray,
                         feature_masks: np.ndarray, reg: np.ndarray,
                         monotone: tuple | None = None, timer: PhaseTimer | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
        """`Backend.split_and_search` as one step on the device: one upload (the parents'
        table and splits, the search's arguments), the partition, a kernel planning the
        children's histograms from the counts (`partition.PLAN_CHILDREN`: the rule of
        `child_histograms`), the build of the smaller children over a budget of blocks per
        parent (`_build_blocks`), the split search (which subtracts the siblings), and one
        read of the records and counts."""
        torch = self._torch
        common = self._k["common"]
        part = self._k["partition"]
        k = len(parents)
        if self._state.ahead is not None:
            if monotone is not None:
                self._state.ahead.mismatch("monotone constraints")
            with phase(timer, "levels"):  # waiting for the device's level
                answer = self._answer_ahead(parents, lefts, rights, feature_masks, reg)
            if answer is not None:
                return answer
        with phase(timer, "partition"):
            self._settle_before_split(parents, [])
            table, n_chunks = self._partition(parents, records)
            lengths = table[:, common.T_END] - table[:, common.T_START]
            chunk, build_first, n_blocks = self._build_blocks(lengths)
            first_slot = self._alloc_slots(k)
            parent_slots = np.array([self._state.slot[p] for p in parents], np.int64)
            constrained, cons, lower, upper = self._bounds(2 * k, monotone)
            totals = np.zeros((2 * k, 3))
            totals[:, :2] = child_sums
            table_d, slots_d, first_d, chunk_d, totals_d, masks, reg_d, cons, lower, upper = \
                self._upload(table, parent_slots, build_first, np.array([chunk], np.int64),
                             totals, np.asarray(feature_masks, np.uint8),
                             np.asarray(reg, np.float64), cons, lower, upper)
            counts = self._launch_partition(table_d, n_chunks, k)
            build = self._front(self._buffer("_step_build", k, (common.TABLE_WIDTH,),
                                             torch.int64), k)
            search = self._front(self._buffer("_step_search", 2 * k, (2,), torch.int64),
                                 2 * k)
            out = self._buffer("_step_out", 3 * k, (REC_WIDTH,), torch.float64)
            ranges = self._front(self._buffer("_step_ranges", 2 * k, (3,), torch.int64),
                                 2 * k)
            part.PLAN_CHILDREN.launch(
                common.grid(k), common.THREADS, self.device, table_d, counts, first_slot,
                first_d, chunk_d, slots_d, build, search, totals_d, self._front(out, k, 2 * k),
                ranges)
        with phase(timer, "histogram"):
            if n_blocks:
                self._launch_build(build, n_blocks)
        with phase(timer, "split"):
            records_buf = self._buffer("_records", 2 * k, (self.n_features, REC_WIDTH),
                                       torch.float64)
            done = self._buffer("_done", 2 * k, (), torch.int32, zeros=True)
            self._launch_search(search, totals_d, masks, reg_d,
                                (constrained, cons, lower, upper), records_buf, out, done)
            result = self._read(self._front(out, 3 * k))
        child_counts = result[2 * k:, :2].astype(np.int64)
        # the histograms' slots, as the planning kernel chose them; every one settled
        for j, (p, left, right) in enumerate(zip(parents, lefts, rights, strict=True)):
            small, large = (left, right) if child_counts[j, 0] <= child_counts[j, 1] \
                else (right, left)
            self._state.slot[small] = first_slot + j
            self._state.slot[large] = self._state.slot.pop(p)
        return self._record_children(parents, lefts, rights, child_counts[:, 0]), \
            result[:2 * k]

    def replace_columns(self, features: np.ndarray, bins, combine: Any = None) -> None:
        """`Backend.replace_columns`; bins may also be a device tensor (n, k) (categorical
        statistics computed on the device, `histboost.categorical.cuda`). Held histograms
        of the tree being grown are rebuilt whole, into fresh pool slots; with `combine`
        (distributed training), only the columns' slots are rebuilt, combined and written
        into the held slots."""
        torch = self._torch
        f = np.asarray(features, np.int64)
        if tuple(bins.shape) != (self.n_rows, f.shape[0]):
            raise ValueError(f"bins must have shape ({self.n_rows}, {f.shape[0]}), got "
                             f"{tuple(bins.shape)}")
        if f.size == 0:
            return
        src = bins if isinstance(bins, torch.Tensor) else torch.from_numpy(
            np.ascontiguousarray(bins))
        src = src.to(device=self.device, dtype=self.bins.dtype)
        if np.array_equal(f, np.arange(f[0], f[0] + f.size)):
            lo, hi = int(f[0]), int(f[0]) + f.size
            self.bins[:, lo:hi] = src
            self._columns[lo:hi] = src.t()
        else:
            index = torch.from_numpy(f).to(self.device)
            self.bins[:, index] = src
            self._columns[index] = src.t()
        held = list(self._state.slot) if self._state.growing else []
        if held:
            self._settle()
            if combine is None:
                self.build_histograms(held)
            else:
                self._rebuild_combined(held, f, combine)

    def _rebuild_combined(self, held: list[int], features: np.ndarray, combine: Any) -> None:
        """The held nodes' histogram slots of `features` rebuilt from this backend's rows
        and replaced by combine(int64 (held, those slots, channels) host array); the other
        slots (sums over every worker) are kept."""
        torch = self._torch
        old = {i: self._state.slot[i] for i in held}
        fresh = self.build_histograms(held)  # whole, local rows, in fresh slots
        o = self.offsets_host
        index = torch.from_numpy(np.concatenate(
            [np.arange(o[f], o[f + 1], dtype=np.int64) for f in features])).to(self.device)
        local = fresh.index_select(1, index).cpu().numpy()
        summed = np.ascontiguousarray(combine(np.ascontiguousarray(local)), np.int64)
        slots = torch.tensor([old[i] for i in held], dtype=torch.int64, device=self.device)
        self._pool[slots[:, None], index[None, :]] = torch.from_numpy(summed).to(self.device)
        self._state.slot.update(old)

    def update_margin(self, tree: Tree, leaves: list[int], values: np.ndarray,
                      output: int) -> None:
        st = self._state
        st.growing = False  # the tree is done: its histograms need no more columns
        st.ahead = None
        st.ahead_loss = None  # the margins change
        if st.best_first is not None:  # its steps taken size the next trees'
            steps = self._best_first_steps.setdefault(st.best_first.shape, [])
            steps.append(st.best_first.index)
            del steps[:-_RECENT_TREES]
        spare_loss, st.spare_loss = st.spare_loss, None
        plan, st.margin_plan = st.margin_plan, None
        if plan is not None and output == st.output and plan.leaves_match(leaves, values):
            self._keep_spare_margin(output)
            if spare_loss is not None:  # the gradients of these margins were launched ahead
                st.ahead_loss = spare_loss
                return
        else:
            self._forget_next()  # launched on the spare margins, not kept
            self._add_margin(tree, output)
        if output == self.n_outputs - 1:  # the round's margins are complete
            st.ahead_loss = self._gradients_ahead()

    def _add_margin(self, tree: Tree, output: int) -> None:
        """margin[:, output] += the tree's leaf values, every row walking the tree on the
        binned columns (read in order: a warp's bins of one feature are one sector). Adding
        by leaf through the row-index buffer, as before, gathered every row's margin at
        random: 0.64 ms a 255-leaf tree of 10M rows on an H100."""
        common = self._k["common"]
        self._k["predict"].ADD_MARGIN_BINNED[self._bin_dtype].launch(
            common.grid(self.n_rows), common.THREADS, self.device, self._columns,
            self.missing_bins, *self._tree_arrays(tree, output), self._state.margin)

    def _tree_arrays(self, tree: Tree, output: int) -> tuple:
        """The tree's `PackedForest` arrays on the device, in the margin kernels' argument
        order; raises ValueError when the tree is not of `output`."""
        if tree.class_index != output:
            raise ValueError(f"tree of output {tree.class_index} added to output {output}")
        f = PackedForest([tree])
        return self._upload(f.tree_class, f.left, f.right, f.feature, f.split_bin,
                            f.default_left, f.value, f.node_ptr, f.level_ptr, f.obl_feature,
                            f.obl_bin, f.obl_default_left, f.leaf_ptr, f.obl_leaf_value)
