"""Gradient histograms.

A node's histogram holds, for every (feature, bin) slot, the sums of gradient and hessian over
the node's rows; feature f owns slots ``offsets[f]:offsets[f+1]`` and its last slot sums the
missing values. Three layouts, one per gradient representation:

- float: ``gh`` float32 (n, 2) pairs -> float64 (total_bins, 2) sums;
- quantised, wide: ``gh`` int32 (n, 2) -> int64 (total_bins, 2) sums (exact, any order);
- quantised, packed: ``gh`` int64 (n,) with the gradient in the high and the hessian in the low
  32 bits (see `pack_pairs`) -> int64 (total_bins,) packed sums: one add per (row, feature)
  instead of two, exact while a tree's total |g| < 2**31 and total h < 2**32.

The kernels read ``slots``: (n, F) uint16/uint32 global slot indices ``offsets[f] + bin``
(see `global_slots`), which saves an offset load and add per (row, feature) in the inner loop.
Row counts are accumulated only when asked for (a third channel, (total_bins, 3), float64 or
int64; `min_data_in_leaf` needs per-bin counts): otherwise the partition gives every node's
exact count and the inner loop stays at one or two adds per (row, feature).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba as nb
import numpy as np
from numba.extending import overload

from ._intrinsics import add_pair, prefetch
from ._threads import run_ranges

_LOW32 = np.int64(0xFFFFFFFF)
# rows ahead whose slots and gradients are prefetched: far enough to cover a memory access.
# Both ends of a row's slots are prefetched: a row of 28 uint16 slots (56 bytes) straddles two
# cache lines most of the time, and a deep node's rows are too sparse for the hardware
# prefetcher (one miss per row otherwise: 2x slower below ~1/8 of the rows).
_PREFETCH_DISTANCE = 16


def _accumulate(slots, gh, rows, start, end, f0, f1, zero_lo, zero_hi, hist):
    """hist[zero_lo:zero_hi] = 0, then hist += sums of gh over rows[start:end] for the slots
    of features [f0, f1), in row order (layout chosen at compile time by hist.ndim)."""


# not inlined by Numba (LLVM still inlines it after linking): an inlined overload is also
# compiled on its own for its type, so each kernel paid for its loop twice (serial histogram
# kernel 0.94 -> 0.66 s to compile; the same speed on one thread). The zeroing is here, where
# the layout is known, so the kernels need no flat view of a histogram (a `reshape` in a
# kernel compiles Numba's reshape helper, 0.2 s of a first run).
@overload(_accumulate, jit_options={"no_cfunc_wrapper": True})
def _accumulate_impl(slots, gh, rows, start, end, f0, f1, zero_lo, zero_hi, hist):
    if hist.ndim == 1:
        def packed(slots, gh, rows, start, end, f0, f1, zero_lo, zero_hi, hist):
            for i in range(np.uintp(zero_lo), np.uintp(zero_hi)):
                hist[i] = 0
            for k in range(start, end):
                if k + _PREFETCH_DISTANCE < end:
                    ahead = rows[k + _PREFETCH_DISTANCE]
                    prefetch(slots[ahead], f0)
                    prefetch(slots[ahead], f1 - 1)
                    prefetch(gh, ahead)
                r = rows[k]
                v = gh[r]
                s = slots[r]
                for f in range(np.uintp(f0), np.uintp(f1)):
                    hist[s[f]] += v
        return packed

    def pairs(slots, gh, rows, start, end, f0, f1, zero_lo, zero_hi, hist):
        # row counts too, only when min_data_in_leaf needs them (a branch taken the same way
        # for the whole call, so it costs nothing in the loop)
        counted = hist.shape[1] == 3
        for i in range(np.uintp(zero_lo), np.uintp(zero_hi)):
            for c in range(hist.shape[1]):
                hist[i, c] = 0
        for k in range(start, end):
            if k + _PREFETCH_DISTANCE < end:
                ahead = rows[k + _PREFETCH_DISTANCE]
                prefetch(slots[ahead], f0)
                prefetch(slots[ahead], f1 - 1)
                prefetch(gh[ahead], 0)
            r = rows[k]
            g = gh[r, 0]
            h = gh[r, 1]
            s = slots[r]
            for f in range(np.uintp(f0), np.uintp(f1)):
                idx = s[f]
                add_pair(hist, idx, g, h)
                if counted:
                    hist[idx, 2] += 1
    return pairs


def global_slots(bins, offsets, out, threads=1):
    """out[i, f] = offsets[f] + bins[i, f]. bins: (n, F) uint8/uint16; offsets: int64 (F+1,);
    out: (n, F) uint16 (uint32 when offsets[-1] > 65536). NumPy on row ranges of `threads`
    threads (its loops release the GIL): once per training, no kernel to compile."""
    # the first bins.shape[1] features (all of them; none for the sparse backend's empty
    # dense part, whose offsets still describe every feature)
    starts = offsets[:bins.shape[1]]

    def add(lo, hi):
        np.add(bins[lo:hi], starts, out=out[lo:hi], casting="unsafe")

    run_ranges(add, bins.shape[0], threads=threads, min_rows=1 << 16)


@nb.njit(parallel=True, cache=True, nogil=True)
def write_slots(new, offsets, slots, first):
    """slots[:, first + j] = offsets[j] + new[:, j]: the global slots of replaced columns
    first .. first + k - 1 (new: (n, k) bins; offsets: (k,) slot offsets of those columns,
    of slots' dtype, so the loop vectorises; slots (n, F)). Rows in parallel."""
    k = new.shape[1]
    for r in nb.prange(new.shape[0]):
        row = new[r]
        out = slots[r, first:first + k]
        for j in range(k):
            out[j] = offsets[j] + row[j]


@nb.njit(parallel=True, cache=True, nogil=True)
def subtract_pairs(parents, parent_rows, built, built_rows, target_rows, pieces, out):
    """out[target_rows[j]] = parents[parent_rows[j]] - built[j] (the sibling of a built
    child) and out[built_rows[j]] = built[j], in one pass, each pair in `pieces` value ranges
    run in parallel. parents: (p, m), read at the int64 (k,) rows parent_rows (the buffer the
    parents' histograms are rows of, or out itself with the parents copied to their targets'
    rows: each value is read before it is written); built: (k, m); out: (2k, m); built_rows,
    target_rows: int64 (k,) rows of out (see `HistogramStore.pair_layout`). On one thread the
    backend runs the same subtraction in NumPy (`subtract_pairs_numpy`): as fast, and no
    kernel to compile."""
    m = built.shape[1]
    for j in nb.prange(built.shape[0] * pieces):
        pair = j // pieces
        piece = j - pair * pieces
        b = out[built_rows[pair]]
        t = out[target_rows[pair]]
        p = parents[parent_rows[pair]]
        c = built[pair]
        # unsigned indices: no negative-index wraparound, so the loop vectorises
        for i in range(np.uintp(m * piece // pieces), np.uintp(m * (piece + 1) // pieces)):
            v = c[i]
            b[i] = v
            t[i] = p[i] - v


def subtract_pairs_numpy(parents: Sequence[np.ndarray], built: np.ndarray,
                         built_rows: list[int], target_rows: list[int], out: np.ndarray) -> None:
    """`subtract_pairs` on the calling thread: the same values (one IEEE or wrapping integer
    subtraction per value). parents: k histograms (any arrays of built[j]'s shape)."""
    for j, (b, t) in enumerate(zip(built_rows, target_rows, strict=True)):
        np.copyto(out[b], built[j])
        np.subtract(parents[j], built[j], out=out[t])


# columns of a histogram work item (rows `build_histograms` sums in one thread's turn)
ITEM_NODE, ITEM_ROW_LO, ITEM_ROW_HI, ITEM_F0, ITEM_F1, ITEM_DST, ITEM_ZERO_LO, ITEM_ZERO_HI = (
    range(8))
ITEM_WIDTH = 8
# columns of a reduction item (one node's chunk sums added over a range of its values)
RED_NODE, RED_FIRST, RED_CHUNKS, RED_LO, RED_HI = range(5)
RED_WIDTH = 5


@nb.njit(inline="always")
def _histogram_items(slots, gh, rows, items, workers, buffers, out):
    """The work items of `build_histograms` and `build_histograms_serial`: one compiled loop
    nest for both (a prange is a range in the serial one). Worker w of `workers` (the thread
    count) takes items w, w + workers, ... (Numba's parallel loops hand each thread one
    contiguous block of iterations: items listed largest first are shared out more evenly in
    turns)."""
    m = items.shape[0]
    # not min / max: each compiles a Numba overload of its own
    if workers > m:
        workers = m
    if workers < 1:
        workers = 1
    for w in nb.prange(workers):
        for j in range(w, m, workers):
            node = items[j, ITEM_NODE]
            dst = items[j, ITEM_DST]
            _accumulate(slots, gh, rows, items[j, ITEM_ROW_LO], items[j, ITEM_ROW_HI],
                        items[j, ITEM_F0], items[j, ITEM_F1], items[j, ITEM_ZERO_LO],
                        items[j, ITEM_ZERO_HI], out[node] if dst < 0 else buffers[dst])


@nb.njit(inline="always")
def _reduce_item(flat_buffers, flat_out, reduces, j):
    """Reduction item j of `build_histograms`: its node's chunk sums added in chunk order
    (flat_buffers, flat_out: the buffers and histograms as (count, values) views)."""
    dst = flat_out[reduces[j, RED_NODE]]
    first = reduces[j, RED_FIRST]
    n_chunks = reduces[j, RED_CHUNKS]
    for i in range(np.uintp(reduces[j, RED_LO]), np.uintp(reduces[j, RED_HI])):
        acc = flat_buffers[first, i]
        for c in range(1, n_chunks):
            acc += flat_buffers[first + c, i]
        dst[i] = acc


def flat(a: np.ndarray) -> np.ndarray:
    """a (k, ...) C-contiguous as a (k, values) view: the kernels' flat_buffers / flat_out
    (a reshape in NumPy costs nothing; in a kernel it costs compile time)."""
    return a.reshape(a.shape[0], math.prod(a.shape[1:]))


@nb.njit(parallel=True, cache=True, nogil=True)
def build_histograms(slots, gh, rows, items, reduces, workers, buffers, out, flat_buffers,
                     flat_out):
    """Histograms of several nodes, work items in parallel, then their chunk sums added.

    Item j (int64 (m, ITEM_WIDTH) `items`) sums gh over ``rows[ITEM_ROW_LO:ITEM_ROW_HI]``, in
    row order, into the slots of features ITEM_F0 .. ITEM_F1 - 1 of ``out[ITEM_NODE]``
    (ITEM_DST -1) or of the chunk scratch ``buffers[ITEM_DST]``, after zeroing its slots
    ITEM_ZERO_LO .. ITEM_ZERO_HI - 1 there. A node summed in several row chunks (each into
    its own buffer) is then added up by reduction items (int64 (r, RED_WIDTH) `reduces`):
    flat values RED_LO .. RED_HI - 1 of ``out[RED_NODE]`` = the sum of the RED_CHUNKS
    buffers from RED_FIRST on, in chunk order. Items write disjoint slots, so the threads,
    the feature blocks and the order in which items run change no sum: a float histogram
    depends on its row chunks only.

    slots: (n, F) global slot indices (`global_slots`); gh: gradient pairs in one of the
    module's layouts; rows: int32 row indices; buffers: (b, *out.shape[1:]) scratch of out's
    dtype; out: (k, total_bins[, 2 or 3]) float64 or int64; flat_buffers, flat_out: buffers
    and out as (b, values) and (k, values) views (`flat`).
    """
    _histogram_items(slots, gh, rows, items, workers, buffers, out)
    if reduces.shape[0] == 1:
        # one small reduction: on the calling thread, a parallel launch fewer
        _reduce_item(flat_buffers, flat_out, reduces, 0)
    elif reduces.shape[0] > 1:
        for j in nb.prange(reduces.shape[0]):
            _reduce_item(flat_buffers, flat_out, reduces, j)


@nb.njit(cache=True, nogil=True)
def build_histograms_serial(slots, gh, rows, items, reduces, workers, buffers, out,
                            flat_buffers, flat_out):
    """`build_histograms` on the calling thread, without a parallel launch: the same items,
    the same sums (one reduction loop where the parallel kernel has two paths: each copy of
    the inlined reduction costs compile time)."""
    _histogram_items(slots, gh, rows, items, workers, buffers, out)
    for j in range(reduces.shape[0]):
        _reduce_item(flat_buffers, flat_out, reduces, j)


@nb.njit(inline="always")
def _unpack_node(packed, g_scale, h_scale, out, k, lo, hi):
    for i in range(np.uintp(lo), np.uintp(hi)):
        v = packed[k, i]
        h = v & _LOW32
        out[k, i, 0] = np.float64((v - h) >> 32) * g_scale
        out[k, i, 1] = np.float64(h) * h_scale


@nb.njit(parallel=True, cache=True, nogil=True)
def unpack_to_float(packed, g_scale, h_scale, out, pieces):
    """Packed int64 (k, m) sums to float64 (k, m, 2) (gradient, hessian) in gradient units;
    each node in `pieces` ranges of its values, all in parallel (a step of one or two nodes
    keeps many threads busy)."""
    m = packed.shape[1]
    for j in nb.prange(packed.shape[0] * pieces):
        k = j // pieces
        p = j - k * pieces
        _unpack_node(packed, g_scale, h_scale, out, k, m * p // pieces, m * (p + 1) // pieces)


@nb.njit(cache=True, nogil=True)
def unpack_to_float_serial(packed, g_scale, h_scale, out):
    """`unpack_to_float` on the calling thread, without a parallel launch."""
    for k in range(packed.shape[0]):
        _unpack_node(packed, g_scale, h_scale, out, k, 0, packed.shape[1])


@nb.njit(inline="always")
def _scale_node(sums, scales, out, k, lo, hi):
    for i in range(np.uintp(lo), np.uintp(hi)):
        for c in range(sums.shape[2]):
            out[k, i, c] = np.float64(sums[k, i, c]) * scales[c]


@nb.njit(parallel=True, cache=True, nogil=True)
def scale_to_float(sums, scales, out, pieces):
    """Unpacked int64 (k, m, C) sums to float64 (k, m, C) in gradient units: channel c times
    scales[c] (float64 (C,), powers of two: exact). One pass, where NumPy's astype and
    product take two with a temporary; each node in `pieces` ranges of its slots, all in
    parallel."""
    m = sums.shape[1]
    for j in nb.prange(sums.shape[0] * pieces):
        k = j // pieces
        p = j - k * pieces
        _scale_node(sums, scales, out, k, m * p // pieces, m * (p + 1) // pieces)


@nb.njit(cache=True, nogil=True)
def scale_to_float_serial(sums, scales, out):
    """`scale_to_float` on the calling thread, without a parallel launch."""
    for k in range(sums.shape[0]):
        _scale_node(sums, scales, out, k, 0, sums.shape[1])
