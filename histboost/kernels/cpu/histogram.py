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


def _accumulate(slots, gh, rows, start, end, hist):
    """hist += sums of gh over rows[start:end], in row order (layout chosen at compile time by
    hist.ndim)."""


@overload(_accumulate, inline="always")
def _accumulate_impl(slots, gh, rows, start, end, hist):
    if hist.ndim == 1:
        def packed(slots, gh, rows, start, end, hist):
            n_features = slots.shape[1]
            for k in range(start, end):
                if k + _PREFETCH_DISTANCE < end:
                    ahead = rows[k + _PREFETCH_DISTANCE]
                    prefetch(slots[ahead], 0)
                    prefetch(slots[ahead], n_features - 1)
                    prefetch(gh, ahead)
                r = rows[k]
                v = gh[r]
                s = slots[r]
                for f in range(n_features):
                    hist[s[f]] += v
        return packed

    def pairs(slots, gh, rows, start, end, hist):
        n_features = slots.shape[1]
        # row counts too, only when min_data_in_leaf needs them (a branch taken the same way
        # for the whole call, so it costs nothing in the loop)
        counted = hist.shape[1] == 3
        for k in range(start, end):
            if k + _PREFETCH_DISTANCE < end:
                ahead = rows[k + _PREFETCH_DISTANCE]
                prefetch(slots[ahead], 0)
                prefetch(slots[ahead], n_features - 1)
                prefetch(gh[ahead], 0)
            r = rows[k]
            g = gh[r, 0]
            h = gh[r, 1]
            s = slots[r]
            for f in range(n_features):
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


@nb.njit(cache=True, nogil=True)
def subtract_pairs(lo, hi, parents, built, built_rows, target_rows, out):
    """out[target_rows[j]] = parents[j] - built[j] (the sibling of a built child) and
    out[built_rows[j]] = built[j], in one pass, for pairs j in [lo, hi) (`run_ranges`).
    parents, built: (k, m); out: (2k, m); built_rows, target_rows: int64 (k,) rows of out
    (see `HistogramStore.pair_layout`)."""
    for j in range(lo, hi):
        b = out[built_rows[j]]
        t = out[target_rows[j]]
        p = parents[j]
        c = built[j]
        for i in range(p.shape[0]):
            v = c[i]
            b[i] = v
            t[i] = p[i] - v


@nb.njit(parallel=True, cache=True, nogil=True)
def build_histograms(slots, gh, rows, starts, ends, out):
    """One histogram per node, nodes in parallel, each summed in row order.

    slots: (n, F) global slot indices (`global_slots`); gh: gradient pairs in one of the
    module's layouts; rows: int32 row indices, node k owning ``rows[starts[k]:ends[k]]``;
    out: (k, total_bins[, 2 or 3]) float64 or int64, overwritten.
    """
    for k in nb.prange(starts.shape[0]):
        h = out[k]
        h[...] = 0
        _accumulate(slots, gh, rows, starts[k], ends[k], h)


@nb.njit(cache=True, nogil=True)
def build_histograms_serial(slots, gh, rows, starts, ends, out):
    """`build_histograms` on the calling thread, without a parallel launch."""
    for k in range(starts.shape[0]):
        h = out[k]
        h[...] = 0
        _accumulate(slots, gh, rows, starts[k], ends[k], h)


@nb.njit(inline="always")
def _add_chunks(flat, dst, lo, hi):
    """dst[i] = sum of flat[:, i] in chunk order, for i in [lo, hi)."""
    for i in range(lo, hi):
        acc = flat[0, i]
        for c in range(1, flat.shape[0]):
            acc += flat[c, i]
        dst[i] = acc


@nb.njit(parallel=True, cache=True, nogil=True)
def build_histogram_chunked(phase, slots, gh, rows, start, end, buffers, out):
    """One histogram of a large node: its rows split into ``buffers.shape[0]`` equal chunks
    built in parallel, each summed in row order (phase 0), then added in chunk order, slices
    of the slots in parallel (phase 1, a second call); phase 2 builds the chunks and adds
    them on the calling thread, in one call (a parallel loop fewer: few chunks add up in
    less time than a parallel launch takes on a busy machine). The float result depends on
    the chunk count only, not on the threads or the phases. buffers: (n_chunks,) +
    out.shape scratch of out's dtype (summing chunk 0 straight into out measured 5% slower
    at 8+ chunks). Both parallel phases share one loop: a kernel compiles once per loop."""
    n_chunks = buffers.shape[0]
    n = end - start
    flat = buffers.reshape((n_chunks, -1))
    dst = out.reshape(-1)
    m = dst.shape[0]
    for c in nb.prange(n_chunks):
        if phase != 1:
            b = buffers[c]
            b[...] = 0
            _accumulate(slots, gh, rows, start + n * c // n_chunks,
                        start + n * (c + 1) // n_chunks, b)
        else:
            _add_chunks(flat, dst, m * c // n_chunks, m * (c + 1) // n_chunks)
    if phase == 2:
        _add_chunks(flat, dst, 0, m)


@nb.njit(cache=True, nogil=True)
def build_histogram_chunked_serial(slots, gh, rows, start, end, n_chunks, buffer, out):
    """`build_histogram_chunked` on the calling thread, without a parallel launch: the same
    chunks added in the same order, so the same sums, with chunk 0 summed into out and each
    later chunk into one reused buffer (out.shape, out's dtype) then added to out, which keeps
    the scratch in cache."""
    n = end - start
    out[...] = 0
    _accumulate(slots, gh, rows, start, start + n // n_chunks, out)
    src = buffer.reshape(-1)
    dst = out.reshape(-1)
    for c in range(1, n_chunks):
        buffer[...] = 0
        _accumulate(slots, gh, rows, start + n * c // n_chunks, start + n * (c + 1) // n_chunks,
                    buffer)
        for i in range(dst.shape[0]):
            dst[i] += src[i]


@nb.njit(cache=True, nogil=True)
def pack_pairs(lo, hi, gh, out):
    """out[i] = gh[i, 0] * 2**32 + gh[i, 1]: int32 (n, 2) pairs (hessian >= 0) to int64 (n,),
    rows i in [lo, hi)."""
    for i in range(lo, hi):
        out[i] = (np.int64(gh[i, 0]) << 32) + np.int64(gh[i, 1])


@nb.njit(parallel=True, cache=True, nogil=True)
def pack_pairs_parallel(gh, out):
    """`pack_pairs` of all rows, in parallel."""
    for i in nb.prange(gh.shape[0]):
        out[i] = (np.int64(gh[i, 0]) << 32) + np.int64(gh[i, 1])


@nb.njit(inline="always")
def _unpack_node(packed, g_scale, h_scale, out, k):
    for i in range(packed.shape[1]):
        v = packed[k, i]
        h = v & _LOW32
        out[k, i, 0] = np.float64((v - h) >> 32) * g_scale
        out[k, i, 1] = np.float64(h) * h_scale


@nb.njit(parallel=True, cache=True, nogil=True)
def unpack_to_float(packed, g_scale, h_scale, out):
    """Packed int64 (k, m) sums to float64 (k, m, 2) (gradient, hessian) in gradient units."""
    for k in nb.prange(packed.shape[0]):
        _unpack_node(packed, g_scale, h_scale, out, k)


@nb.njit(cache=True, nogil=True)
def unpack_to_float_serial(packed, g_scale, h_scale, out):
    """`unpack_to_float` on the calling thread, without a parallel launch."""
    for k in range(packed.shape[0]):
        _unpack_node(packed, g_scale, h_scale, out, k)


@nb.njit(inline="always")
def _scale_node(sums, scales, out, k):
    for i in range(sums.shape[1]):
        for c in range(sums.shape[2]):
            out[k, i, c] = np.float64(sums[k, i, c]) * scales[c]


@nb.njit(parallel=True, cache=True, nogil=True)
def scale_to_float(sums, scales, out):
    """Unpacked int64 (k, m, C) sums to float64 (k, m, C) in gradient units: channel c times
    scales[c] (float64 (C,), powers of two: exact). One pass, where NumPy's astype and
    product take two with a temporary."""
    for k in nb.prange(sums.shape[0]):
        _scale_node(sums, scales, out, k)


@nb.njit(cache=True, nogil=True)
def scale_to_float_serial(sums, scales, out):
    """`scale_to_float` on the calling thread, without a parallel launch."""
    for k in range(sums.shape[0]):
        _scale_node(sums, scales, out, k)
