"""Kernels of the sparse layout (`histboost.data.sparse.SparseBins`): binning a CSR matrix,
histograms over the stored slots of a node's rows, the "fix" of each feature's default bin,
and the row partition by a feature stored column-wise.

Layout. Every feature f has a default bin ``default_bins[f]``: the bin of an unstored entry
(the bin of 0.0, or the missing slot when unstored entries are missing values). Row-major,
``indptr`` int64 (n+1,) and ``slots`` uint16/uint32 hold, for every row, the global histogram
slots ``offsets[f] + bin`` of its entries whose bin is not the default, in feature order;
feature 0 is the exception, stored for every row (default bin included), so the sum over
feature 0's slots of a node's histogram is the node's total. Column-major, ``col_ptr`` int64
(F+1,), ``col_rows`` int32 and ``col_bins`` uint8/uint16 hold each feature's non-default
entries in row order (the partition reads them).

A histogram built from the rows thus misses every default bin of the features f >= 1;
`gather_fixed` sets it to the node total minus the feature's other slots (LightGBM's "fix
histogram") while it copies the node's live features into its compact histogram (see
`kernels.cpu.sparse_backend`). Histograms, split search and trees are then those of the dense
layout.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba.extending import overload

from ._intrinsics import add_pair, prefetch

_PREFETCH_DISTANCE = 16


# -- binning ---------------------------------------------------------------------------------------
@nb.njit(cache=True, nogil=True, inline="always")
def _bin_of(x, cut_values, lo, hi):
    """Bin of value x among cuts cut_values[lo:hi] (the first bound >= x; the last bound is
    +inf); NaN goes to the missing slot hi - lo (the rule of `kernels.cpu.binning`)."""
    if np.isnan(x):
        return hi - lo
    a = lo
    b = hi - 1  # the last bound is +inf: x <= it
    while a < b:
        mid = (a + b) >> 1
        if cut_values[mid] < x:
            a = mid + 1
        else:
            b = mid
    return a - lo


@nb.njit(parallel=True, cache=True, nogil=True)
def default_bins_of(cut_values, cut_ptr, fill, out):
    """out[f] = the bin of value `fill` (0.0, or NaN: the missing slot) for every feature."""
    for f in nb.prange(out.shape[0]):
        out[f] = _bin_of(fill, cut_values, cut_ptr[f], cut_ptr[f + 1])


@nb.njit(parallel=True, cache=True, nogil=True)
def bin_entries(indptr, indices, data, cut_values, cut_ptr, default_bins, bins, row_counts):
    """Bin every stored entry (bins: uint16 (nnz,)) and count the entries each row keeps in
    the row-major layout (row_counts: int64 (n,)): its non-default entries, and always one
    for feature 0."""
    for r in nb.prange(indptr.shape[0] - 1):
        count = 1  # feature 0, stored or not
        for j in range(indptr[r], indptr[r + 1]):
            f = indices[j]
            b = _bin_of(data[j], cut_values, cut_ptr[f], cut_ptr[f + 1])
            bins[j] = b
            if f != 0 and b != default_bins[f]:
                count += 1
        row_counts[r] = count


@nb.njit(parallel=True, cache=True, nogil=True)
def fill_row_slots(indptr, indices, bins, offsets, default_bins, row_ptr, slots):
    """Write each row's kept entries as global slots (see the module docstring)."""
    for r in nb.prange(indptr.shape[0] - 1):
        k = row_ptr[r]
        first = indptr[r]
        end = indptr[r + 1]
        if first < end and indices[first] == 0:
            slots[k] = offsets[0] + bins[first]
            first += 1
        else:
            slots[k] = offsets[0] + default_bins[0]
        k += 1
        for j in range(first, end):
            f = indices[j]
            b = bins[j]
            if b != default_bins[f]:
                slots[k] = offsets[f] + b
                k += 1


@nb.njit(cache=True, nogil=True)
def fill_columns(indptr, indices, bins, default_bins, col_ptr, col_rows, col_bins):
    """Column-major copy of the non-default entries, rows ascending within a column (a
    counting sort; col_ptr: int64 (F+1,) zeros in, offsets out)."""
    n = indptr.shape[0] - 1
    F = col_ptr.shape[0] - 1
    for j in range(indptr[n]):
        f = indices[j]
        if bins[j] != default_bins[f]:
            col_ptr[f + 1] += 1
    for f in range(F):
        col_ptr[f + 1] += col_ptr[f]
    pos = col_ptr[:-1].copy()
    for r in range(n):
        for j in range(indptr[r], indptr[r + 1]):
            f = indices[j]
            b = bins[j]
            if b != default_bins[f]:
                p = pos[f]
                col_rows[p] = r
                col_bins[p] = b
                pos[f] = p + 1


@nb.njit(cache=True, nogil=True)
def csr_to_csc(indptr, indices, data, n_cols, col_ptr, col_rows, col_data):
    """Stable counting-sort transpose of a CSR matrix (rows ascending within a column)."""
    n = indptr.shape[0] - 1
    for j in range(indptr[n]):
        col_ptr[indices[j] + 1] += 1
    for f in range(n_cols):
        col_ptr[f + 1] += col_ptr[f]
    pos = col_ptr[:-1].copy()
    for r in range(n):
        for j in range(indptr[r], indptr[r + 1]):
            f = indices[j]
            p = pos[f]
            col_rows[p] = r
            col_data[p] = data[j]
            pos[f] = p + 1


# -- histograms ------------------------------------------------------------------------------------
def _accumulate(indptr, slots, gh, rows, start, end, hist):
    """hist += sums of gh over the stored slots of rows[start:end], in row order (layout
    chosen at compile time by hist.ndim, as `kernels.cpu.histogram`)."""


@overload(_accumulate, inline="always")
def _accumulate_impl(indptr, slots, gh, rows, start, end, hist):
    if hist.ndim == 1:
        def packed(indptr, slots, gh, rows, start, end, hist):
            for k in range(start, end):
                if k + _PREFETCH_DISTANCE < end:
                    ahead = rows[k + _PREFETCH_DISTANCE]
                    prefetch(slots, indptr[ahead])
                    prefetch(gh, ahead)
                r = rows[k]
                v = gh[r]
                for j in range(indptr[r], indptr[r + 1]):
                    hist[slots[j]] += v
        return packed

    def pairs(indptr, slots, gh, rows, start, end, hist):
        counted = hist.shape[1] == 3
        for k in range(start, end):
            if k + _PREFETCH_DISTANCE < end:
                ahead = rows[k + _PREFETCH_DISTANCE]
                prefetch(slots, indptr[ahead])
                prefetch(gh[ahead], 0)
            r = rows[k]
            g = gh[r, 0]
            h = gh[r, 1]
            for j in range(indptr[r], indptr[r + 1]):
                idx = slots[j]
                add_pair(hist, idx, g, h)
                if counted:
                    hist[idx, 2] += 1
    return pairs


@nb.njit(cache=True, nogil=True, inline="always")
def _zero(h, lo, hi, a, b):
    """Zero h's slots in the ranges [lo[r], hi[r]) for r in [a, b)."""
    for r in range(a, b):
        h[lo[r]:hi[r]] = 0


@nb.njit(parallel=True, cache=True, nogil=True)
def build_histograms(indptr, slots, gh, rows, starts, ends, rng_ptr, rng_lo, rng_hi, out):
    """One histogram per node (node k owns rows[starts[k]:ends[k]]), nodes in parallel, each
    summed in row order into out[k] (k, total_bins[, C]). Only node k's live slot ranges
    [rng_lo[r], rng_hi[r]) for r in [rng_ptr[k], rng_ptr[k+1]) are zeroed first and hold its
    sums; the other slots are left unspecified. Not fixed."""
    for k in nb.prange(starts.shape[0]):
        h = out[k]
        _zero(h, rng_lo, rng_hi, rng_ptr[k], rng_ptr[k + 1])
        _accumulate(indptr, slots, gh, rows, starts[k], ends[k], h)


@nb.njit(cache=True, nogil=True)
def build_histograms_serial(indptr, slots, gh, rows, starts, ends, rng_ptr, rng_lo, rng_hi,
                            out):
    """`build_histograms` on the calling thread."""
    for k in range(starts.shape[0]):
        h = out[k]
        _zero(h, rng_lo, rng_hi, rng_ptr[k], rng_ptr[k + 1])
        _accumulate(indptr, slots, gh, rows, starts[k], ends[k], h)


@nb.njit(parallel=True, cache=True, nogil=True)
def build_histogram_chunked(indptr, slots, gh, rows, start, end, rng_lo, rng_hi, buffers,
                            out):
    """One node's histogram (its live ranges rng_lo/hi) in ``buffers.shape[0]`` row chunks
    built in parallel, then added in chunk order (the result depends on the chunk count
    only)."""
    n_chunks = buffers.shape[0]
    n = end - start
    n_ranges = rng_lo.shape[0]
    for c in nb.prange(n_chunks):
        b = buffers[c]
        _zero(b, rng_lo, rng_hi, 0, n_ranges)
        _accumulate(indptr, slots, gh, rows, start + n * c // n_chunks,
                    start + n * (c + 1) // n_chunks, b)
    flat = buffers.reshape((n_chunks, -1))
    dst = out.reshape(-1)
    width = dst.shape[0] // out.shape[0]
    for r in nb.prange(n_ranges):
        for i in range(rng_lo[r] * width, rng_hi[r] * width):
            acc = flat[0, i]
            for c in range(1, n_chunks):
                acc += flat[c, i]
            dst[i] = acc


@nb.njit(cache=True, nogil=True)
def build_histogram_chunked_serial(indptr, slots, gh, rows, start, end, rng_lo, rng_hi,
                                   n_chunks, buffer, out):
    """`build_histogram_chunked` on the calling thread: the same chunks, the same sums."""
    n = end - start
    n_ranges = rng_lo.shape[0]
    _zero(out, rng_lo, rng_hi, 0, n_ranges)
    _accumulate(indptr, slots, gh, rows, start, start + n // n_chunks, out)
    src = buffer.reshape(-1)
    dst = out.reshape(-1)
    width = dst.shape[0] // out.shape[0]
    for c in range(1, n_chunks):
        _zero(buffer, rng_lo, rng_hi, 0, n_ranges)
        _accumulate(indptr, slots, gh, rows, start + n * c // n_chunks,
                    start + n * (c + 1) // n_chunks, buffer)
        for r in range(n_ranges):
            for i in range(rng_lo[r] * width, rng_hi[r] * width):
                dst[i] += src[i]


@nb.njit(cache=True, nogil=True)
def node_layout(features, offsets, default_bins, gap, starts, ptr, defaults, lo, hi):
    """The compact layout of live features (int32 (L,) ascending): starts[i] = offsets[f],
    ptr (L+1,) the compact runs, defaults[i] the compact slot of f's default bin, and ranges
    [lo[r], hi[r]) of global slots covering the features' slots, runs closer than `gap`
    slots merged; returns the number of ranges (all int64 arrays, lo/hi of size L)."""
    p = 0
    r = -1
    for i in range(features.shape[0]):
        f = features[i]
        a = offsets[f]
        b = offsets[f + 1]
        starts[i] = a
        ptr[i] = p
        defaults[i] = p + default_bins[f]
        p += b - a
        if r >= 0 and a - hi[r] <= gap:
            hi[r] = b
        else:
            r += 1
            lo[r] = a
            hi[r] = b
    ptr[features.shape[0]] = p
    return r + 1


@nb.njit(cache=True, nogil=True)
def gather_slots(src, starts, dst_ptr, dst):
    """Runs of slots of one histogram into another: dst[dst_ptr[i]:dst_ptr[i+1]] =
    src[starts[i]:starts[i] + dst_ptr[i+1] - dst_ptr[i]] for every i (src, dst: 2-D (slots,
    channels) of one dtype): a compact histogram into the compact layout of fewer
    features."""
    C = dst.shape[1]
    for i in range(starts.shape[0]):
        s = starts[i]
        for d in range(dst_ptr[i], dst_ptr[i + 1]):
            for c in range(C):
                dst[d, c] = src[s, c]
            s += 1


@nb.njit(cache=True, nogil=True)
def gather_fixed(src, starts, ptr, defaults, totals, dst):
    """A node's compact histogram dst (size, C) from its built, unfixed full-width one src
    (total_bins, C), both float64 or int64 (packed sums: C = 1; two's-complement differences
    of packed sums are the packed differences): the runs src[starts[i]:...] of its live
    features into dst[ptr[i]:ptr[i+1]], feature 0 first; then each other feature's default
    slot (dst index defaults[i]) is *fixed*: the node total (the sum of feature 0's slots,
    every row once) minus the feature's other slots, summed in slot order. totals: (C,)
    zeros of dst's dtype (scratch)."""
    C = dst.shape[1]
    s = starts[0]
    for k in range(ptr[1]):
        for c in range(C):
            dst[k, c] = src[s + k, c]
    for c in range(C):
        t = totals[c] - totals[c]  # zero of the dtype
        for k in range(ptr[1]):
            t += dst[k, c]
        totals[c] = t
    for i in range(1, starts.shape[0]):
        a = ptr[i]
        b = ptr[i + 1]
        d = defaults[i]
        s = starts[i] - a
        for c in range(C):
            rest = totals[c] - totals[c]
            for k in range(a, d):
                v = src[s + k, c]
                dst[k, c] = v
                rest += v
            for k in range(d + 1, b):
                v = src[s + k, c]
                dst[k, c] = v
                rest += v
            dst[d, c] = totals[c] - rest


@nb.njit(cache=True, nogil=True)
def searched_bins(hist, ptr, out, out_ptr, bins):
    """What the split search needs of a compact float64 histogram hist (size, C) with
    features' runs ptr (L+1,): per feature its first and last value bins, the value bins
    between them that hold anything (a channel non-zero), and its missing slot, into out
    (size, C), runs out_ptr (L+1,), bins int32 (size,) each kept slot's bin in its feature;
    returns the slots kept.

    A split after a left-out (empty) bin has the sums, so the gain and validity, of the split
    after the bin before it, which the search (the first of equal gains wins) ranks first;
    the first and last value bins bound the candidates (missing values alone on the left; all
    values on the left). So the search on `out` finds the split of `hist`, its bin read back
    through `bins`."""
    C = hist.shape[1]
    pos = 0
    for i in range(ptr.shape[0] - 1):
        out_ptr[i] = pos
        a = ptr[i]
        b = ptr[i + 1]
        for s in range(a, b):
            # branch-free: every slot is written at pos, which moves on past the kept ones
            keep = (s == a) | (s >= b - 2)
            for c in range(C):
                v = hist[s, c]
                out[pos, c] = v
                keep |= v != 0.0
            bins[pos] = s - a
            pos += np.int64(keep)
    out_ptr[ptr.shape[0] - 1] = pos
    return pos


_LOW32 = np.int64(0xFFFFFFFF)


def _slot_hc(hist, d):
    """(hessian, row count or -1) of slot d of one histogram (layout chosen at compile time:
    packed (total_bins,), or (total_bins, 2 or 3))."""


@overload(_slot_hc, inline="always")
def _slot_hc_impl(hist, d):
    if hist.ndim == 1:
        def packed(hist, d):
            return np.float64(hist[d] & _LOW32), -1.0
        return packed

    def pairs(hist, d):
        return np.float64(hist[d, 1]), np.float64(hist[d, 2]) if hist.shape[1] == 3 else -1.0
    return pairs


@nb.njit(cache=True, nogil=True)
def splittable_features(hist, live, default_slots, H, C, h_scale, mcw, min_data, tol, out):
    """out[i] = whether live feature live[i] may have a valid split in a node of hessian sum
    H and row count C (hist: its fixed histogram, (total_bins,) packed or (total_bins, 2 or
    3)); hessians must be non-negative.

    One child of any split of f holds none of the rows in f's default bin, so at most the
    node's hessian (rows) outside that bin: below min_child_weight (min_data_in_leaf, with
    row counts) no split of f is valid, in the node or below it (a subset of its rows has no
    more). `h_scale` turns quantised hessians into gradient units; `tol` is a margin for the
    rounding of float sums, the test applying only when min_child_weight > 0."""
    for i in range(live.shape[0]):
        f = live[i]
        hd, cd = _slot_hc(hist, default_slots[f])
        ok = True
        if mcw > 0.0 and H - hd * h_scale + tol < mcw:
            ok = False
        elif cd >= 0.0 and min_data > 0.0 and C - cd < min_data:
            ok = False
        out[i] = ok


# -- partition -------------------------------------------------------------------------------------
@nb.njit(cache=True, nogil=True, inline="always")
def _seek(col_rows, p, hi, r):
    """The first q in [p, hi) with col_rows[q] >= r (hi if none); col_rows ascending. Gallops
    from p: O(log gap), so a walk over a node's ascending rows costs O(rows x log(column
    entries / rows)) for a small node and O(rows + entries) for a large one."""
    if p >= hi or col_rows[p] >= r:
        return p
    step = 1
    while p + step < hi and col_rows[p + step] < r:
        p += step
        step *= 2
    # col_rows[p] < r; the answer is in (p, min(p + step, hi)]
    lo = p + 1
    top = min(p + step, hi)
    while lo < top:
        mid = (lo + top) >> 1
        if col_rows[mid] < r:
            lo = mid + 1
        else:
            top = mid
    return lo


@nb.njit(cache=True, nogil=True, inline="always")
def _scatter(col_rows, col_bins, c_lo, c_hi, rows, start, end, threshold_bin, missing_bin,
             default_left, default_bin, scratch):
    """One pass over rows[start:end] (ascending) against the column's entries
    col_rows/col_bins[c_lo:c_hi]: lefts to the front of the range in order, rights to
    scratch[start:...] in order; returns the number going left."""
    n_left = start
    n_right = start
    p = c_lo
    for k in range(start, end):
        r = rows[k]
        p = _seek(col_rows, p, c_hi, r)
        b = np.int64(default_bin)
        if p < c_hi and col_rows[p] == r:
            b = np.int64(col_bins[p])
        is_missing = np.int64(b == missing_bin)
        left = is_missing * np.int64(default_left) + (1 - is_missing) * np.int64(
            b <= threshold_bin)
        rows[n_left] = r
        scratch[n_right] = r
        n_left += left
        n_right += 1 - left
    return n_left - start


@nb.njit(cache=True, nogil=True)
def partition_range(col_rows, col_bins, c_lo, c_hi, rows, start, end, threshold_bin,
                    missing_bin, default_left, default_bin, scratch):
    """Partition rows[start:end] by one feature (its entries col_*[c_lo:c_hi]) on one thread,
    stably; returns the number going left."""
    n_left = _scatter(col_rows, col_bins, c_lo, c_hi, rows, start, end, threshold_bin,
                      missing_bin, default_left, default_bin, scratch)
    rows[start + n_left:end] = scratch[start:end - n_left]
    return n_left


@nb.njit(parallel=True, cache=True, nogil=True)
def partition_nodes(col_ptr, col_rows, col_bins, rows, starts, ends, features, threshold_bins,
                    missing_bins, default_bins, default_left, scratch, n_left):
    """Partition several nodes, one thread per node (as `kernels.cpu.partition`)."""
    for k in nb.prange(starts.shape[0]):
        f = features[k]
        n_left[k] = partition_range(col_rows, col_bins, col_ptr[f], col_ptr[f + 1], rows,
                                    starts[k], ends[k], threshold_bins[k], missing_bins[f],
                                    default_left[k] != 0, default_bins[f], scratch)


@nb.njit(cache=True, nogil=True)
def partition_nodes_serial(col_ptr, col_rows, col_bins, rows, starts, ends, features,
                           threshold_bins, missing_bins, default_bins, default_left, scratch,
                           n_left):
    """`partition_nodes` on the calling thread."""
    for k in range(starts.shape[0]):
        f = features[k]
        n_left[k] = partition_range(col_rows, col_bins, col_ptr[f], col_ptr[f + 1], rows,
                                    starts[k], ends[k], threshold_bins[k], missing_bins[f],
                                    default_left[k] != 0, default_bins[f], scratch)


@nb.njit(parallel=True, cache=True, nogil=True)
def partition_node_chunked(col_rows, col_bins, c_lo, c_hi, rows, start, end, threshold_bin,
                           missing_bin, default_left, default_bin, n_chunks, scratch, counts):
    """Partition one large node in n_chunks chunks in parallel, in one pass (the scheme of
    `kernels.cpu.partition.partition_node_chunked`); returns the number going left."""
    n = end - start
    left = default_left != 0
    for c in nb.prange(n_chunks):
        lo = start + n * c // n_chunks
        hi = start + n * (c + 1) // n_chunks
        counts[c] = 0
        if hi > lo:
            p = _seek(col_rows, c_lo, c_hi, rows[lo])
            counts[c] = _scatter(col_rows, col_bins, p, c_hi, rows, lo, hi, threshold_bin,
                                 missing_bin, left, default_bin, scratch)
        if c > 0:
            scratch[hi - counts[c]:hi] = rows[lo:lo + counts[c]]
    total_left = 0
    for c in range(n_chunks):
        total_left += counts[c]
    for c in nb.prange(n_chunks):
        lo = start + n * c // n_chunks
        hi = start + n * (c + 1) // n_chunks
        lpos = start
        for cc in range(c):
            lpos += counts[cc]
        n_right = hi - lo - counts[c]
        if c > 0:
            rows[lpos:lpos + counts[c]] = scratch[lo + n_right:hi]
        rpos = start + total_left + (lo - lpos)
        rows[rpos:rpos + n_right] = scratch[lo:lo + n_right]
    return total_left
