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
below 2**20, the largest value the histogram kernel sums in 32-bit shared memory: an error of
at most about 2**-20 of the tree's largest value per row, unbiased over many rows (LightGBM's
quantised training works with 2**-7).
"""

from __future__ import annotations

import math

import numpy as np

from ...tree.predictor import PackedForest
from ...tree.quantize import Quantisation
from ...tree.split import REC_BIN, REC_DEFAULT_LEFT, REC_FEATURE, REC_GAIN, REC_WIDTH
from ...tree.tree import Tree
from ..nodes import HistogramStore, NodeRanges

_TORCH_DTYPE: dict[str, object] = {}


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


def _chunks(starts: np.ndarray, ends: np.ndarray, chunk_rows: int) -> np.ndarray:
    """Cut ranges [starts[j], ends[j]) into chunks of at most chunk_rows rows: int64 (3, m)
    rows (range index, chunk start, chunk end), empty ranges giving none."""
    lengths = np.maximum(ends - starts, 0)
    per_range = (lengths + chunk_rows - 1) // chunk_rows
    node = np.repeat(np.arange(starts.shape[0], dtype=np.int64), per_range)
    first = np.cumsum(per_range) - per_range
    start = starts[node] + chunk_rows * (np.arange(node.shape[0], dtype=np.int64)
                                         - first[node])
    return np.stack([node, start, np.minimum(start + chunk_rows, ends[node])])


class CUDABackend:
    """Kernels on one CUDA device (see `histboost.kernels.backend.Backend`).

    bins: host (n, F) uint8/uint16; bin_offsets: int64 (F+1,); device: 'cuda' or 'cuda:N';
    label float64 (n,), weight float64 (n,) or None; n_outputs: margins per row (K);
    count_rows: histograms carry a row-count channel (min_data_in_leaf). row_ids: int64 (n,)
    global row indices of quantised rounding (a worker's share of the rows; None: 0..n-1).
    """

    name = "cuda"
    # fixed point: half a unit of a scale within a factor 2 of max|v| / MAX_SHARED_VALUE
    row_rounding = 2.0**-19

    def __init__(self, bins: np.ndarray | None, bin_offsets: np.ndarray, device: str = "cuda",
                 label: np.ndarray | None = None, weight: np.ndarray | None = None,
                 n_outputs: int = 1, count_rows: bool = False, raw: np.ndarray | None = None,
                 mapper=None, row_ids: np.ndarray | None = None) -> None:
        import torch

        from . import _common, binning, gradients, histogram, partition, predict, split

        self._torch = torch
        _torch_dtypes(torch)
        self._k = {"common": _common, "gradients": gradients, "histogram": histogram,
                   "partition": partition, "predict": predict, "split": split,
                   "binning": binning}
        self.device = _cuda_device(device)
        dev = self.device
        self._staging = None
        self._staging_done = None
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
        one_byte = int(np.diff(self.offsets_host).max(initial=1)) <= 256
        self._bin_dtype = np.dtype(np.uint8 if one_byte else np.int32)
        # one-byte bins: rows padded to whole 4-byte words, which the histogram kernel reads
        width = -(-self.n_features // 4) * 4 if one_byte else self.n_features
        self.bins = torch.zeros((self.n_rows, width), dtype=_TORCH_DTYPE[self._bin_dtype.str],
                                device=dev)
        if bins is not None:
            self.bins[:, :self.n_features] = torch.from_numpy(
                np.ascontiguousarray(bins).astype(self._bin_dtype, copy=False)).to(dev)
        else:
            self._bin_on_device(raw, mapper)
        self._words = self.bins.view(torch.int32) if one_byte else self.bins
        self._columns = self.bins[:, :self.n_features].t().contiguous()  # for the partition
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
        self._margin = torch.zeros((self.n_rows, self.n_outputs), dtype=torch.float64,
                                   device=dev)
        self._pairs = torch.zeros((self.n_outputs, self.n_rows, 2), dtype=torch.float32,
                                  device=dev)
        self._ints = torch.zeros((self.n_rows, 2), dtype=torch.int32, device=dev)
        self._all_rows = torch.arange(self.n_rows, dtype=torch.int32, device=dev)
        # global row indices of quantised rounding (empty: 0..n-1), see the CPU backend
        if row_ids is not None and np.shape(row_ids) != (self.n_rows,):
            raise ValueError(f"row_ids must have shape ({self.n_rows},), got "
                             f"{np.shape(row_ids)}")
        self._row_ids = torch.as_tensor(
            np.zeros(0, np.int64) if row_ids is None else np.ascontiguousarray(row_ids, np.int64),
            device=dev)
        self.rows = self._all_rows.clone()
        self._scratch = torch.empty_like(self.rows)
        first, last = histogram.feature_groups(self.offsets_host, self._channels)
        self._group_first = torch.from_numpy(first).to(dev)
        self._group_last = torch.from_numpy(last).to(dev)
        self._scales = (1.0, 1.0)
        self._wide = False
        self._uses_all_rows = True
        self._hists = HistogramStore(torch.stack)
        self._ranges = NodeRanges()

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

    def _upload(self, *arrays: np.ndarray) -> list:
        """Host arrays as device tensors in one asynchronous host-to-device copy (a copy
        costs more in latency than in bytes at these sizes; from pageable memory it also
        blocks the host, measured 75 us a call on an H100 host): the arrays are packed into
        one pinned staging buffer, each at an 8-byte aligned offset, and viewed back on the
        device with their dtypes and shapes. The buffer is reused once its last copy is done."""
        torch = self._torch
        flat = [np.ascontiguousarray(a) for a in arrays]
        offsets, total = [], 0
        for a in flat:
            offsets.append(total)
            total += (a.nbytes + 7) // 8 * 8
        total = max(total, 8)
        if self._staging_done is not None:
            self._staging_done.synchronize()
        if self._staging is None or self._staging.shape[0] < total:
            pinned = self.device.type == "cuda"
            self._staging = torch.empty(max(total, 1 << 16), dtype=torch.uint8,
                                        pin_memory=pinned)
        host = self._staging.numpy()
        for a, o in zip(flat, offsets, strict=True):
            host[o:o + a.nbytes] = a.reshape(-1).view(np.uint8)
        if self.device.type == "cuda":
            dev = self._staging[:total].to(self.device, non_blocking=True)
            self._staging_done = torch.cuda.Event()
            self._staging_done.record()
        else:
            dev = self._staging[:total].clone()
        out = []
        for a, o in zip(flat, offsets, strict=True):
            t = dev[o:o + a.nbytes].view(_TORCH_DTYPE[a.dtype.str]) if a.size else \
                torch.empty(0, dtype=_TORCH_DTYPE[a.dtype.str], device=self.device)
            out.append(t.view(a.shape))
        return out

    def _chunk_arrays(self, bounds: list[tuple[int, int]]) -> tuple[np.ndarray, ...]:
        b = np.array(bounds, np.int64).reshape(-1, 2)
        return b[:, 0], b[:, 1], _chunks(b[:, 0], b[:, 1], self._k["common"].CHUNK_ROWS)

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            self._torch.cuda.synchronize(self.device)

    def release(self) -> None:
        """Drop every device buffer and return the cached memory to the driver."""
        for name in ("_staging", "bins", "_words", "_columns", "offsets", "missing_bins", "label",
                     "weight", "_margin", "_pairs", "_ints", "_all_rows", "_row_ids", "rows",
                     "_scratch"):
            setattr(self, name, None)
        self._hists.clear()
        if self.device.type == "cuda":
            self._torch.cuda.synchronize(self.device)
            self._torch.cuda.empty_cache()

    # -- margins and gradients ----------------------------------------------------------------
    def set_margin(self, margin: np.ndarray) -> None:
        if margin.shape != tuple(self._margin.shape):
            raise ValueError(f"margin must have shape {tuple(self._margin.shape)}, got "
                             f"{margin.shape}")
        self._margin.copy_(self._tensor(np.asarray(margin, np.float64)))

    def margin(self) -> np.ndarray:
        return self._margin.cpu().numpy().copy()

    def compute_gradients(self, loss: str) -> None:
        try:
            kernel = self._k["gradients"].PAIR_KERNELS[loss]
        except KeyError:
            raise ValueError(f"the CUDA backend has no gradient kernel for loss {loss!r}") \
                from None
        if not self._has_label:
            raise ValueError("the backend holds no labels")
        grid = self._k["common"].grid(self.n_rows)
        kernel.launch(grid, self._k["common"].THREADS, self.device, self._margin, self.label,
                      self.weight, self._weighted, self._pairs)

    def set_gradients(self, pairs: np.ndarray) -> None:
        if pairs.shape != tuple(self._pairs.shape):
            raise ValueError(f"gradient pairs must have shape {tuple(self._pairs.shape)}, got "
                             f"{pairs.shape}")
        self._pairs.copy_(self._tensor(np.asarray(pairs, np.float32)))

    def gradients(self, output: int) -> np.ndarray:
        return self._pairs[output].cpu().numpy().copy()

    def gradient_bounds(self, output: int) -> tuple[float, float]:
        if self.n_rows == 0:
            return 0.0, 0.0
        g, h = self._pairs[output].abs().amax(dim=0).cpu().tolist()
        return float(g), float(h)

    # -- one tree -----------------------------------------------------------------------------
    def begin_tree(self, output: int, rows: np.ndarray | None,
                   quantisation: Quantisation | None,
                   bounds: tuple[float, float] | None = None) -> int:
        torch = self._torch
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
            common.grid(self.n_rows), common.THREADS, self.device, self._pairs, output,
            self._row_ids, g_inv, h_inv, key >> 32, key & 0xFFFFFFFF, stochastic, self._ints)
        self._scales = (1.0 / g_inv, 1.0 / h_inv)
        self._wide = largest > top
        self._uses_all_rows = rows is None
        if rows is None:
            if self.rows.shape[0] != self.n_rows:
                self.rows = torch.empty_like(self._all_rows)
                self._scratch = torch.empty_like(self._all_rows)
            self.rows.copy_(self._all_rows)
        else:
            self.rows = self._tensor(np.asarray(rows, np.int32))
            self._scratch = torch.empty_like(self.rows)
        self._hists.clear()
        self._ranges.reset(self.rows.shape[0])
        return int(self.rows.shape[0])

    def build_histograms(self, nodes: list[int]):
        torch = self._torch
        out = torch.zeros((len(nodes), self.total_bins, self._channels), dtype=torch.int64,
                          device=self.device)
        _, _, chunks = self._chunk_arrays(self._ranges.bounds(nodes))
        if chunks.shape[1]:
            (chunks,) = self._upload(chunks)
            self._k["histogram"].BUILD[self._bin_dtype].launch(
                (int(chunks.shape[1]), int(self._group_first.shape[0])),
                self._k["common"].THREADS, self.device, self._words, self._ints, self.rows,
                chunks[0], chunks[1], chunks[2], self._group_first, self._group_last,
                self.offsets, self._channels, self._wide, out)
        self._hists.store(nodes, out)
        return out

    def subtract_histograms(self, parents: list[int], built: list[int],
                            targets: list[int]) -> None:
        self._hists.store(targets, self._hists.stack(parents) - self._hists.stack(built))
        self._hists.release(parents)

    def _scale_vector(self, channels: int):
        return self._torch.tensor([self._scales[0], self._scales[1], 1.0][:channels],
                                  dtype=self._torch.float64, device=self.device)

    def read_histograms(self, nodes: list[int]) -> np.ndarray:
        h = self._hists.stack(nodes)
        return (h.to(self._torch.float64) * self._scale_vector(h.shape[2])).cpu().numpy()

    def histogram_totals(self, nodes: list[int]) -> np.ndarray:
        o0, o1 = int(self.offsets_host[0]), int(self.offsets_host[1])
        sums = self._hists.stack(nodes)[:, o0:o1, :2].sum(dim=1)  # exact integers
        return (sums.to(self._torch.float64) * self._scale_vector(2)).cpu().numpy()

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

    def find_best_splits(self, nodes: list[int], totals: np.ndarray, feature_masks: np.ndarray,
                         reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        torch = self._torch
        k = len(nodes)
        hists = self._hists.stack(nodes).contiguous()
        out = torch.empty((k, self.n_features, REC_WIDTH), dtype=torch.float64,
                          device=self.device)
        constrained, cons, lower, upper = self._bounds(k, monotone)
        tot, masks, reg_d, cons, lower, upper = self._upload(
            np.asarray(totals, np.float64), np.asarray(feature_masks, np.uint8),
            np.asarray(reg, np.float64), cons, lower, upper)
        split = self._k["split"]
        split.BEST_SPLIT.launch(
            k * self.n_features, split.SPLIT_THREADS, self.device, hists,
            self._scales[0], self._scales[1], tot, self.offsets, masks, reg_d, constrained,
            cons, lower, upper, out)
        # per-feature records to the host (k x F x 7 floats), the first maximum over features:
        # ties go to the lowest feature, as on the CPU
        recs = out.cpu().numpy()
        best = np.argmax(recs[:, :, REC_GAIN], axis=1)
        return recs[np.arange(k), best]

    def oblivious_gains(self, nodes: list[int], totals: np.ndarray, feature_mask: np.ndarray,
                        reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        torch = self._torch
        k = len(nodes)
        hists = self._hists.stack(nodes).contiguous()
        node_gains = torch.full((k, self.total_bins, 2), -math.inf, dtype=torch.float64,
                                device=self.device)
        unordered = torch.zeros((self.total_bins, 2), dtype=torch.uint8, device=self.device)
        common = self._k["common"]
        split = self._k["split"]
        constrained, cons, lower, upper = self._bounds(k, monotone)
        tot, mask, reg_d, cons, lower, upper = self._upload(
            np.asarray(totals, np.float64), np.asarray(feature_mask, np.uint8),
            np.asarray(reg, np.float64), cons, lower, upper)
        split.OBLIVIOUS_NODE_GAINS.launch(
            common.grid(k * self.n_features), common.THREADS, self.device, hists,
            self._scales[0], self._scales[1], tot, self.offsets, mask, reg_d, constrained, cons,
            lower, upper, node_gains, unordered)
        out = torch.empty((self.total_bins, 2), dtype=torch.float64, device=self.device)
        split.SUM_OVER_NODES.launch(common.grid(2 * self.total_bins), common.THREADS,
                                    self.device, node_gains, unordered, out)
        return out.cpu().numpy()

    def evaluate_split(self, nodes: list[int], feature: int, split_bin: int,
                       default_left: bool) -> np.ndarray:
        hists = self._hists.stack(nodes)
        o = int(self.offsets_host[feature])
        left = hists[:, o:o + split_bin + 1, :2].sum(dim=1)
        if default_left:
            left = left + hists[:, int(self.offsets_host[feature + 1]) - 1, :2]
        return (left.to(self._torch.float64) * self._scale_vector(2)).cpu().numpy()

    def apply_splits(self, parents: list[int], lefts: list[int], rights: list[int],
                     records: np.ndarray) -> np.ndarray:
        torch = self._torch
        bounds = self._ranges.bounds(parents)
        starts, ends, chunks = self._chunk_arrays(bounds)
        n_left = np.zeros(len(parents), np.int64)
        if chunks.shape[1]:
            threads = self._k["common"].THREADS
            part = self._k["partition"]
            chunks, feats, bins, dleft, starts_d, ends_d = self._upload(
                chunks, records[:, REC_FEATURE].astype(np.int32),
                records[:, REC_BIN].astype(np.int64),
                records[:, REC_DEFAULT_LEFT].astype(np.uint8), starts, ends)
            node, start, end = chunks[0], chunks[1], chunks[2]
            n_chunks = int(chunks.shape[1])
            # flags and their prefix sum cover only the span of the parents' positions (one
            # node at a time for best-first growth), shifted by one so that cum[i] sums the
            # flags of the positions before lo + i: no concatenated zero is needed
            lo, hi = int(starts.min()), int(ends.max())
            off = lo - 1
            flags = torch.zeros(hi - lo + 1, dtype=torch.int32, device=self.device)
            part.SPLIT_FLAGS[self._bin_dtype].launch(
                n_chunks, threads, self.device, self._columns, self.rows, node, start, end,
                feats, bins, dleft, self.missing_bins, off, flags)
            cum = torch.cumsum(flags, dim=0)
            base = cum[starts_d - lo]
            n_left_dev = cum[ends_d - lo] - base
            part.SCATTER_ROWS.launch(n_chunks, threads, self.device, self.rows, flags, cum,
                                     node, start, end, starts_d, base, n_left_dev, off,
                                     self._scratch)
            part.COPY_ROWS.launch(n_chunks, threads, self.device, self._scratch, start, end,
                                  self.rows)
            n_left = n_left_dev.cpu().numpy()
        return self._ranges.split(parents, lefts, rights, n_left)

    def replace_columns(self, features: np.ndarray, bins: np.ndarray) -> None:
        raise ValueError("categorical features train on the CPU for now (device='cpu')")

    def update_margin(self, tree: Tree, leaves: list[int], values: np.ndarray,
                      output: int) -> None:
        threads = self._k["common"].THREADS
        if self._uses_all_rows:
            _, _, chunks = self._chunk_arrays(self._ranges.bounds(leaves))
            if chunks.shape[1]:
                chunks, vals = self._upload(chunks, np.asarray(values, np.float64))
                self._k["partition"].ADD_LEAF_VALUES.launch(
                    int(chunks.shape[1]), threads, self.device, self.rows, chunks[0],
                    chunks[1], chunks[2], vals, output, self._margin)
            return
        if tree.class_index != output:
            raise ValueError(f"tree of output {tree.class_index} added to output {output}")
        f = PackedForest([tree])
        arrays = self._upload(f.tree_class, f.left, f.right, f.feature, f.split_bin,
                              f.default_left, f.value, f.node_ptr, f.level_ptr, f.obl_feature,
                              f.obl_bin, f.obl_default_left, f.leaf_ptr, f.obl_leaf_value)
        self._k["predict"].ADD_MARGIN_BINNED[self._bin_dtype].launch(
            self._k["common"].grid(self.n_rows), threads, self.device, self._columns,
            self.missing_bins, *arrays, self._margin)
