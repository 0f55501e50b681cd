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

A histogram built from the rows thus misses every default bin of the features f >= 1; the
search (`search_node`) and `gather_fixed` set it to the node total minus the feature's other
slots (LightGBM's "fix histogram"). Node histograms are kept sparse (below, and
`kernels.cpu.sparse_backend`). Histograms, split search and trees are then those of the dense
layout.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import overload

from . import split
from ._intrinsics import add_pair, fetch_add, prefetch
from .partition import PART_HI, PART_LO, PART_NODE, chunk_positions, copy_range, place_chunk

_PREFETCH_DISTANCE = 16
_LOW32 = np.int64(0xFFFFFFFF)


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
# A node's histogram is kept *sparse*: its non-default slots that may hold anything, as a
# sorted int32/int64 array of global slots and their sums (m, C) (C = 1: packed quantised
# sums), every slot holding a non-zero sum included (all-zero ones may be left in or out).
# Feature 0's slots are all there (every row stores it), so their sum is the node total; every
# other feature's default bin is left out and recovered from that total when it is read
# ("fix histogram"). See `kernels.cpu.sparse_backend`.
def _accumulate_marked(indptr, slots, gh, rows, start, end, acc, bitmap, lo, hi):
    """acc += sums of gh over the stored slots of rows[start:end], in row order, where a
    slot's first value is written (not added) and its bit set in bitmap (uint64 words, zero
    for every slot not yet touched): acc needs no zeroing. Returns the slots newly touched.
    Layout chosen at compile time by gh.ndim: packed int64 pairs into acc (total_bins, 1),
    else pairs into acc (total_bins, C), C = 3 counting rows. lo, hi: None (every slot), or
    only slots in [lo, hi) added (multiples of 64: ranges of bitmap words, so that ranges
    of one item run on several threads)."""


@overload(_accumulate_marked, inline="always")
def _accumulate_marked_impl(indptr, slots, gh, rows, start, end, acc, bitmap, lo, hi):
    ranged = not isinstance(lo, types.NoneType)
    if gh.ndim == 1:
        def packed(indptr, slots, gh, rows, start, end, acc, bitmap, lo, hi):
            touched = 0
            for k in range(start, end):
                if k + _PREFETCH_DISTANCE < end:
                    ahead = rows[k + _PREFETCH_DISTANCE]
                    prefetch(slots, indptr[ahead])
                    prefetch(gh, ahead)
                r = rows[k]
                v = gh[r]
                for j in range(indptr[r], indptr[r + 1]):
                    s = np.int64(slots[j])
                    if ranged and (s < lo or s >= hi):
                        continue
                    w = s >> 6
                    bit = np.uint64(1) << np.uint64(s & 63)
                    word = bitmap[w]
                    if word & bit:
                        acc[s, 0] += v
                    else:
                        bitmap[w] = word | bit
                        acc[s, 0] = v
                        touched += 1
            return touched
        return packed

    def pairs(indptr, slots, gh, rows, start, end, acc, bitmap, lo, hi):
        counted = acc.shape[1] == 3
        touched = 0
        for k in range(start, end):
            if k + _PREFETCH_DISTANCE < end:
                ahead = rows[k + _PREFETCH_DISTANCE]
                prefetch(slots, indptr[ahead])
                prefetch(gh[ahead], 0)
            r = rows[k]
            g = gh[r, 0]
            h = gh[r, 1]
            for j in range(indptr[r], indptr[r + 1]):
                s = np.int64(slots[j])
                if ranged and (s < lo or s >= hi):
                    continue
                w = s >> 6
                bit = np.uint64(1) << np.uint64(s & 63)
                word = bitmap[w]
                if word & bit:
                    add_pair(acc, s, g, h)
                    if counted:
                        acc[s, 2] += 1
                else:
                    bitmap[w] = word | bit
                    acc[s, 0] = g
                    acc[s, 1] = h
                    if counted:
                        acc[s, 2] = 1
                    touched += 1
        return touched
    return pairs


@nb.njit(cache=True, nogil=True)
def accumulate_items(indptr, slots, gh, rows, starts, ends, accs, bitmaps, touched):
    """Item i sums the stored slots of rows[starts[i]:ends[i]] into its own scratch accs[i]
    (total_bins, C), marking them in bitmaps[i] (uint64 words, all zero on entry: see
    `_accumulate_marked`); touched[i] (int64) the slots it marked. An item is a node, or a
    row chunk of one (chunks follow the node's size only); the backend runs ranges of items
    on the thread pool (`_threads.run_ranges`: its threads sleep between tasks, where
    Numba's parallel loops keep theirs spinning on the cores, which cost a loaded machine
    more than the loops saved)."""
    for i in range(starts.shape[0]):
        touched[i] = _accumulate_marked(indptr, slots, gh, rows, starts[i], ends[i], accs[i],
                                        bitmaps[i], None, None)


@nb.njit(parallel=True, cache=True, nogil=True)
def accumulate_items_parallel(workers, indptr, slots, gh, rows, starts, ends, accs, bitmaps,
                              touched):
    """`accumulate_items` on Numba's parallel loop in `workers` units: ranges of consecutive
    items when there are at least as many items as workers; else each item in workers //
    items ranges of its slots (of bitmap words), each unit reading all of its item's rows
    and adding only its range's slots (a small node's build is mostly cache misses in its
    full-width scratch, which the ranges share out). Every slot's sums in row order: the
    same sums."""
    m = starts.shape[0]
    if m >= workers:
        for w in nb.prange(workers):
            lo = m * w // workers
            hi = m * (w + 1) // workers
            accumulate_items(indptr, slots, gh, rows, starts[lo:hi], ends[lo:hi], accs[lo:hi],
                             bitmaps[lo:hi], touched[lo:hi])
        return
    parts = workers // m
    n_words = bitmaps.shape[1]
    counts = np.zeros(m * parts, np.int64)
    for u in nb.prange(m * parts):
        i = u // parts
        r = u % parts
        counts[u] = _accumulate_marked(indptr, slots, gh, rows, starts[i], ends[i], accs[i],
                                       bitmaps[i], (n_words * r // parts) << 6,
                                       (n_words * (r + 1) // parts) << 6)
    for i in range(m):
        touched[i] = counts[i * parts:(i + 1) * parts].sum()


def _row_into(out, m, gh, r, first):
    """out[m] = (first) or += (else) row r's gradient pair gh[r] as `_accumulate_marked`
    sums it: packed int64 pairs (gh 1-d, out (k, 1)), or (g, h[, count]) (out (k, 2 or 3))."""


@overload(_row_into, inline="always")
def _row_into_impl(out, m, gh, r, first):
    if gh.ndim == 1:
        def packed(out, m, gh, r, first):
            if first:
                out[m, 0] = gh[r]
            else:
                out[m, 0] += gh[r]
        return packed

    def pairs(out, m, gh, r, first):
        g = gh[r, 0]
        h = gh[r, 1]
        if first:
            out[m, 0] = g
            out[m, 1] = h
            if out.shape[1] == 3:
                out[m, 2] = 1
        else:
            add_pair(out, m, g, h)
            if out.shape[1] == 3:
                out[m, 2] += 1
    return pairs


# The root of a tree on all rows is built feature by feature from the column-major entries
# (`root_features`): each feature's entries (rows ascending) are summed into a scratch of its
# own bins, one per row chunk of the root, then the chunks added in order into a full-width
# stage at the feature's own slots: the sums of `accumulate_items` and `emit_touched` with
# the same chunks, in parallel over features, in one pass over the entries; the features'
# runs are then moved together.
@nb.njit(cache=True, nogil=True, inline="always")
def _root_entries(f, j, indptr, slots, offsets, col_rows, col_bins):
    """(row, bin) of entry j of feature f: feature 0 from its slot in row j's row-major
    entries (stored for every row), the others from their column."""
    if f == 0:
        return np.int64(j), np.int64(slots[indptr[j]]) - offsets[0]
    return np.int64(col_rows[j]), np.int64(col_bins[j])


@nb.njit(cache=True, nogil=True)
def root_features(lo, hi, n_rows, n_chunks, indptr, slots, offsets, col_ptr, col_rows,
                  col_bins, dead, gh, acc, seen, stage_slots, stage_vals, counts):
    """The root's sparse histogram, features lo..hi-1, each into the stage at its own slots:
    feature f's slots holding anything, ascending, from stage_slots[offsets[f]] on, their
    sums in stage_vals (total_bins, C) from the same row, their number into counts[f] (0
    for a dead feature). The root's rows are all rows in order, in n_chunks row chunks
    (chunk i: rows n_rows * i // n_chunks ...); acc (n_chunks * widest, C) and seen uint8
    (n_chunks * widest,) zeros are scratch, bin k of chunk i at i * widest + k (seen left
    zero). Ranges of features run on several threads."""
    width = seen.shape[0] // n_chunks
    for f in range(lo, hi):
        counts[f] = 0
        if dead[f]:
            continue
        a, b = (0, n_rows) if f == 0 else (col_ptr[f], col_ptr[f + 1])
        base = 0
        bound = n_rows // n_chunks
        chunk = 0
        for j in range(a, b):
            r, k = _root_entries(f, j, indptr, slots, offsets, col_rows, col_bins)
            while r >= bound:
                chunk += 1
                base += width
                bound = n_rows * (chunk + 1) // n_chunks
            q = base + k
            _row_into(acc, q, gh, r, seen[q] == 0)
            seen[q] = 1
        p = offsets[f]
        for k in range(offsets[f + 1] - offsets[f]):
            first = True
            for q in range(k, k + n_chunks * width, width):
                if seen[q]:
                    seen[q] = 0
                    if first:
                        for c in range(stage_vals.shape[1]):
                            stage_vals[p, c] = acc[q, c]
                        first = False
                    else:
                        for c in range(stage_vals.shape[1]):
                            stage_vals[p, c] += acc[q, c]
            if not first:
                stage_slots[p] = offsets[f] + k
                p += 1
        counts[f] = p - offsets[f]


@nb.njit(cache=True, nogil=True)
def root_parts(lo, hi, step, bounds, n_rows, n_chunks, indptr, slots, offsets, col_ptr, col_rows,
               col_bins, dead, gh, acc, seen, counts, pos, stage_slots, stage_vals, out_slots,
               out_vals):
    """Parts lo..hi-1 of the root's build (part w: features bounds[w]..bounds[w+1]-1, its
    scratch acc[w] (n_chunks * widest, C) and seen[w] uint8 (n_chunks * widest,), zeros):
    step 0 `root_features` into the stage and counts, step 1 (counts' prefix sums in pos)
    each feature's run moved from the stage to out_slots / out_vals[pos[f]:pos[f + 1]].
    Ranges of parts run on several threads (`_threads.run_ranges`, or
    `root_parts_parallel`)."""
    for w in range(lo, hi):
        if step == 0:
            root_features(bounds[w], bounds[w + 1], n_rows, n_chunks, indptr, slots, offsets,
                          col_ptr, col_rows, col_bins, dead, gh, acc[w], seen[w], stage_slots,
                          stage_vals, counts)
            continue
        for f in range(bounds[w], bounds[w + 1]):
            s = offsets[f]
            d = pos[f]
            for i in range(counts[f]):
                out_slots[d + i] = stage_slots[s + i]
                for c in range(out_vals.shape[1]):
                    out_vals[d + i, c] = stage_vals[s + i, c]


@nb.njit(parallel=True, cache=True, nogil=True)
def root_parts_parallel(workers, order, step, bounds, n_rows, n_chunks, indptr, slots,
                        offsets, col_ptr, col_rows, col_bins, dead, gh, acc, seen, counts, pos,
                        stage_slots, stage_vals, out_slots, out_vals):
    """`root_parts` of every part on Numba's parallel loop: `workers` threads take the parts
    in the order of `order` (int64, every part once: the longest first) from a shared
    counter as they come free."""
    taken = np.zeros(24, np.int64)  # the counter at taken[8], a cache line of its own
    for _ in nb.prange(workers):
        while True:
            c = fetch_add(taken, 8, 1)
            if c >= order.shape[0]:
                break
            w = order[c]
            root_parts(w, w + 1, step, bounds, n_rows, n_chunks, indptr, slots, offsets,
                       col_ptr, col_rows, col_bins, dead, gh, acc, seen, counts, pos,
                       stage_slots, stage_vals, out_slots, out_vals)


@nb.njit(cache=True, nogil=True)
def emit_words(lo, hi, write, accs, bitmaps, a, b, slot_feature, dead, out_slots, out_vals, m):
    """The slots of bitmap words lo..hi-1 that any of items a..b-1 (`accumulate_items`)
    marked, ascending, but those of the node's dead features (dead: uint8 (F,);
    slot_feature: int32 (total_bins,) each slot's feature). With `write`, from out_slots[m]
    on, their sums added in item order (an item that did not mark a slot adds nothing: a
    zero) into out_vals (k, C), and the words cleared in the items' bitmaps; else only
    counted. Returns m plus their number. Ranges of words are disjoint: they run on several
    threads (`emit_touched_parallel`)."""
    C = out_vals.shape[1]
    for w in range(lo, hi):
        word = bitmaps[a, w]
        for i in range(a + 1, b):
            word |= bitmaps[i, w]
        while word != 0:
            t = np.int64(trailing_zeros(word))
            word &= word - np.uint64(1)
            s = (w << 6) + t
            if dead[slot_feature[s]]:
                continue
            if write:
                bit = np.uint64(1) << np.uint64(t)
                first = True
                for i in range(a, b):
                    if bitmaps[i, w] & bit:
                        if first:
                            for c in range(C):
                                out_vals[m, c] = accs[i, s, c]
                            first = False
                        else:
                            for c in range(C):
                                out_vals[m, c] += accs[i, s, c]
                out_slots[m] = s
            m += 1
        if write:
            for i in range(a, b):
                bitmaps[i, w] = 0
    return m


@nb.njit(cache=True, nogil=True)
def emit_touched(accs, bitmaps, a, b, slot_feature, dead, out_slots, out_vals):
    """A node's sparse histogram from its items a..b-1 (`accumulate_items`): `emit_words` of
    every word, written from the start; clears their bitmaps. Returns its length."""
    return emit_words(0, bitmaps.shape[1], True, accs, bitmaps, a, b, slot_feature, dead,
                      out_slots, out_vals, 0)


@nb.njit(parallel=True, cache=True, nogil=True)
def emit_touched_parallel(blocks, accs, bitmaps, a, b, slot_feature, dead, out_slots, out_vals,
                          starts):
    """`emit_touched` on Numba's parallel loop: the words in `blocks` ranges, each counted
    (`emit_words`), then written from the count of those before it (starts: int64
    (blocks + 1,) scratch). The same list."""
    n_words = bitmaps.shape[1]
    for k in nb.prange(blocks):
        starts[k + 1] = emit_words(n_words * k // blocks, n_words * (k + 1) // blocks, False,
                                   accs, bitmaps, a, b, slot_feature, dead, out_slots,
                                   out_vals, 0)
    starts[0] = 0
    for k in range(blocks):
        starts[k + 1] += starts[k]
    for k in nb.prange(blocks):
        emit_words(n_words * k // blocks, n_words * (k + 1) // blocks, True, accs, bitmaps, a,
                   b, slot_feature, dead, out_slots, out_vals, starts[k])
    return starts[blocks]


@nb.njit(cache=True, nogil=True)
def subtract_range(lo, hi, p_slots, p_vals, s_slots, s_vals, missing):
    """The larger child's histogram in place of its parent's, entries lo..hi-1 of the built
    child's: p_vals[q] -= s_vals[i] where p_slots[q] == s_slots[i] (both sorted; a galloping
    walk from the parent's start, so the cost follows the child's slots). The indices i of
    slots the parent does not hold (its all-zero slots left out) go to missing from
    missing[lo] on; returns their count. Ranges touch disjoint entries of the parent's (its
    slots are distinct): they run on several threads (`subtract_parallel`)."""
    C = p_vals.shape[1]
    n = p_slots.shape[0]
    q = 0
    k = lo
    for i in range(lo, hi):
        s = s_slots[i]
        q = _seek(p_slots, q, n, s)
        if q < n and p_slots[q] == s:
            for c in range(C):
                p_vals[q, c] -= s_vals[i, c]
        else:
            missing[k] = i
            k += 1
    return k - lo


@nb.njit(cache=True, nogil=True)
def subtract_in_place(p_slots, p_vals, s_slots, s_vals, missing):
    """`subtract_range` of all the child's entries; returns the count of missing ones (from
    missing[0] on)."""
    return subtract_range(0, s_slots.shape[0], p_slots, p_vals, s_slots, s_vals, missing)


@nb.njit(parallel=True, cache=True, nogil=True)
def subtract_parallel(workers, p_slots, p_vals, s_slots, s_vals, missing, counts):
    """`subtract_in_place` on Numba's parallel loop, the child's entries in `workers` ranges
    (counts: int64 (workers,) scratch); the missing indices then put one after another.
    The same sums and indices."""
    m = s_slots.shape[0]
    for w in nb.prange(workers):
        counts[w] = subtract_range(m * w // workers, m * (w + 1) // workers, p_slots, p_vals,
                                   s_slots, s_vals, missing)
    k = 0
    for w in range(workers):
        lo = m * w // workers
        for i in range(counts[w]):
            missing[k] = missing[lo + i]
            k += 1
    return k


@nb.njit(cache=True, nogil=True, inline="always")
def _put(out, out_bins, pos, bin_, src, i):
    """out[pos] = src[i], its bin in out_bins; returns pos + 1."""
    for c in range(out.shape[1]):
        out[pos, c] = src[i, c]
    out_bins[pos] = bin_
    return pos + 1


@nb.njit(cache=True, nogil=True, inline="always")
def _put_run(out, out_bins, pos, slots, vals, a, b, o):
    """Entries a..b-1 of a node's list (slots - o: their bins) from out[pos] on; returns the
    position after them."""
    for k in range(a, b):
        for c in range(out.shape[1]):
            out[pos, c] = vals[k, c]
        out_bins[pos] = slots[k] - o
        pos += 1
    return pos


def _slot_hc(hist, d):
    """(hessian, row count or -1) of slot d of sums hist (m, C): packed int64 pairs (C = 1),
    or (gradient, hessian[, count]) (C = 2 or 3)."""


@overload(_slot_hc, inline="always")
def _slot_hc_impl(hist, d):
    if isinstance(hist.dtype, nb.types.Integer):
        def integer(hist, d):
            if hist.shape[1] == 1:
                return np.float64(hist[d, 0] & _LOW32), -1.0
            return (np.float64(hist[d, 1]),
                    np.float64(hist[d, 2]) if hist.shape[1] == 3 else -1.0)
        return integer

    def pairs(hist, d):
        return np.float64(hist[d, 1]), np.float64(hist[d, 2]) if hist.shape[1] == 3 else -1.0
    return pairs


def _as_float(out, a, b, g_scale, h_scale, fbuf):
    """Sums out[a:b] (m, C) as float64 in gradient units: the slice itself for float sums,
    else converted into fbuf[:b - a] by the operations of `histogram.unpack_to_float` (packed
    pairs, C = 1) and `histogram.scale_to_float` (C = 2 or 3), so the values are theirs."""


@overload(_as_float, inline="always")
def _as_float_impl(out, a, b, g_scale, h_scale, fbuf):
    if isinstance(out.dtype, nb.types.Float):
        def same(out, a, b, g_scale, h_scale, fbuf):
            return out[a:b]
        return same

    def converted(out, a, b, g_scale, h_scale, fbuf):
        m = b - a
        if out.shape[1] == 1:
            for i in range(m):
                v = out[a + i, 0]
                h = v & _LOW32
                fbuf[i, 0] = np.float64((v - h) >> 32) * g_scale
                fbuf[i, 1] = np.float64(h) * h_scale
        else:
            for i in range(m):
                fbuf[i, 0] = np.float64(out[a + i, 0]) * g_scale
                fbuf[i, 1] = np.float64(out[a + i, 1]) * h_scale
                if out.shape[1] == 3:
                    fbuf[i, 2] = np.float64(out[a + i, 2]) * 1.0
        return fbuf[:m]
    return converted


# A node's list visits a few slots of each of thousands of features, scattered over the
# per-feature arrays (offsets, default bins, mask, dead flags): each feature's first slot
# costs a chain of two cache misses (its feature id, then those arrays), which stalls the
# pass. They are prefetched this many slots ahead (the feature id from twice as far), as the
# histogram kernels prefetch rows (measured: the pass alone 2x faster on 50k x 100k).
_FEATURE_AHEAD = 24


@nb.njit(inline="always")
def _prefetch_features(slots, i, n, slot_feature, offsets, default_bins, mask, dead):
    """Prefetch the feature id of slots[i + 2 * _FEATURE_AHEAD] and the per-feature entries
    of the feature of slots[i + _FEATURE_AHEAD] (their lines: see above)."""
    if i + 2 * _FEATURE_AHEAD < n:
        prefetch(slot_feature, slots[i + 2 * _FEATURE_AHEAD])
    if i + _FEATURE_AHEAD < n:
        g = slot_feature[slots[i + _FEATURE_AHEAD]]
        prefetch(offsets, g + 1)
        prefetch(default_bins, g)
        prefetch(mask, g)
        prefetch(dead, g)


def _g_h(vals, i):
    """(gradient, hessian) of sums vals[i] (m, C) in native units, as float64: packed int64
    pairs (C = 1, the gradient in the high 32 bits) or (gradient, hessian[, count])."""


@overload(_g_h, inline="always")
def _g_h_impl(vals, i):
    if isinstance(vals.dtype, nb.types.Integer):
        def integer(vals, i):
            v = vals[i, 0]
            if vals.shape[1] == 1:
                h = v & _LOW32
                return np.float64((v - h) >> 32), np.float64(h)
            return np.float64(v), np.float64(vals[i, 1])
        return integer

    def floating(vals, i):
        return np.float64(vals[i, 0]), np.float64(vals[i, 1])
    return floating


@nb.njit(cache=True, nogil=True, inline="always")
def child_box(slots, vals, a, b, o, d, miss):
    """The box (g_lo, g_hi, h_min) holding the sums of the child without the default bin's
    rows of every split of one feature, from its run of a node's list (slots[a:b] ascending,
    its bins slots - o, none the default bin d; sums vals (m, C) in native units; hessians
    non-negative; miss its missing slot). That child holds a prefix of the value bins below
    d or a suffix of those above it (all value bins when d is the missing slot), with or
    without the missing slot: its gradient lies between the least and the largest such sum
    (0 included), its hessian is at least the least of the first bin's below d, the last
    bin's above d and the missing slot's (each candidate holds one of them whole)."""
    top = d if d < miss else np.int64(-1)  # bins above `top` form the suffixes
    below = 0.0
    g_lo = 0.0
    g_hi = 0.0
    h_min = np.inf
    first = True
    above = 0.0
    a_lo = 0.0
    a_hi = 0.0
    h_last = np.inf
    any_above = False
    gm = 0.0
    hm = np.inf
    for k in range(a, b):
        bin_ = np.int64(slots[k]) - o
        g, h = _g_h(vals, k)
        if bin_ == miss:
            gm = g
            hm = h
            continue
        if bin_ < d:
            below += g
            g_lo = min(g_lo, below)
            g_hi = max(g_hi, below)
            if first:
                h_min = h
                first = False
        if bin_ > top:
            # suffix sums are the run's total above minus a prefix before a bin
            a_lo = min(a_lo, above)
            a_hi = max(a_hi, above)
            above += g
            h_last = h
            any_above = True
    if any_above:
        g_lo = min(g_lo, above - a_hi)
        g_hi = max(g_hi, above - a_lo)
        h_min = min(h_min, h_last)
    if hm < np.inf:
        g_lo = min(g_lo, g_lo + gm)
        g_hi = max(g_hi, g_hi + gm)
        h_min = min(h_min, hm)
    return g_lo, g_hi, h_min


@nb.njit(cache=True, nogil=True, inline="always")
def gain_bound_terms(G, H, lam, mcw):
    """What `split_gain_bound` needs of a node of sums (G, H) (float64 (3,)): G, the
    lightest valid child hessian and the parent's score G^2 / (H + lam) (NaN when H + lam
    is not positive: no finite bound)."""
    out = np.empty(3)
    out[0] = G
    out[1] = mcw if mcw > 0.0 else 0.0
    out[2] = G * G / (H + lam) if H + lam > 0.0 else np.nan
    return out


@nb.njit(cache=True, nogil=True, inline="always")
def split_gain_bound(terms, H, g_lo, g_hi, h_min, h_off, lam, mcw):
    """An upper bound of the closed-form gain (no L1, no max_delta_step) of any valid split
    of a feature in a node of hessian sum H (hessians non-negative; terms: its
    `gain_bound_terms`) whose child without the default bin's rows has its gradient sum in
    [g_lo, g_hi] and its hessian sum at least h_min and at most h_off (the hessian off the
    default bin; `child_box`): -inf when no split of the feature can be valid, NaN when
    there is no finite bound.

    Valid, that child's hessian h also lies in [min_child_weight, H - min_child_weight].
    The children's score g^2 / (h + lam) + (G - g)^2 / (H - h + lam) is jointly convex in
    (g, h) (two quadratic-over-linear terms), so its largest value over that box is at one
    of its four corners; the gain is the score minus the parent's."""
    lo = max(terms[1], h_min)
    hi = min(h_off, H - mcw)
    if hi < lo or hi <= 0.0:
        return -np.inf
    if lo + lam <= 0.0 or H - hi + lam <= 0.0:
        return np.nan
    G = terms[0]
    best = -np.inf
    for h in (lo, hi):
        # both corners of this h over one denominator: one division
        a = h + lam
        c = H - h + lam
        top = max(g_lo * g_lo * c + (G - g_lo) * (G - g_lo) * a,
                  g_hi * g_hi * c + (G - g_hi) * (G - g_hi) * a)
        best = max(best, top / (a * c))
    return best - terms[2]


def _bound_terms(G, H, reg, mcw):
    """`gain_bound_terms` of the node, for `_outranked` (reg None: the search is not run
    in the pass, nothing to bound)."""


@overload(_bound_terms, inline="always")
def _bound_terms_impl(G, H, reg, mcw):
    if isinstance(reg, nb.types.NoneType):
        return lambda G, H, reg, mcw: np.empty(3)
    return lambda G, H, reg, mcw: gain_bound_terms(G, H, reg[split.P_LAMBDA], mcw)


def _outranked(terms, H, box, h_off, reg, mcw, general, rec, shared):
    """Whether no split of a feature (`split_gain_bound`'s box (g_lo, g_hi, h_min), h_off)
    can gain more than the best record so far, rec, or than shared[0], a gain another
    stretch of the node reached (it would not be kept: ties keep the lower feature, and the
    margin makes the bound strictly lower than either): the feature is then not scanned.
    The margin covers the rounding of both gains; a NaN bound (none finite) is never below
    it. False without a record, or with L1 / max_delta_step (general: not None), whose gains
    the bound does not cover."""


@overload(_outranked, inline="always")
def _outranked_impl(terms, H, box, h_off, reg, mcw, general, rec, shared):
    if isinstance(rec, nb.types.NoneType) or not isinstance(general, nb.types.NoneType):
        return lambda terms, H, box, h_off, reg, mcw, general, rec, shared: False

    def check(terms, H, box, h_off, reg, mcw, general, rec, shared):
        bound = split_gain_bound(terms, H, box[0], box[1], box[2], h_off, reg[split.P_LAMBDA],
                                 mcw)
        best = max(rec[split.REC_GAIN], shared[0])
        return bound == -np.inf or bound + 1e-9 * (abs(bound) + abs(terms[2]) + 1.0) <= best
    return check


@nb.njit(cache=True, nogil=True, inline="always")
def node_total(slots, vals, offsets, total):
    """total (C,) = the sums of a node's list's feature 0 slots (every row once: the node
    total), in slot order; left as it is when the list does not start with feature 0's
    slots (a stretch of a node's list after the first, `feature_chunks`: the caller passes
    the node's)."""
    n = slots.shape[0]
    if n == 0 or slots[0] >= offsets[1]:
        return
    end0 = 0
    while end0 < n and slots[end0] < offsets[1]:
        end0 += 1
    for c in range(vals.shape[1]):
        t = total[c] - total[c]  # a zero of the dtype
        for k in range(end0):
            t += vals[k, c]
        total[c] = t


@nb.njit(inline="always")
def _node_pass(slots, vals, offsets, slot_feature, default_bins, mask, dead, mark, prune, G, H,
               n_rows, h_scale, mcw, min_data, tol, total, fixed, out, out_ptr,
               out_features, out_bins, reg, general, foff, frec, rec, shared, g_scale, fbuf):
    """The body of `searched_node` (rec None: every searched feature's bins written) and
    `search_node` (rec a split record: each feature searched as soon as its bins are written,
    over the same stretch of `out`, as float64 in gradient units through fbuf; shared the
    best gain of the node's stretches); total: the node's `node_total` (slots may be a
    stretch of its list)."""
    C = vals.shape[1]
    n = slots.shape[0]
    zero = np.zeros_like(fixed)  # an empty bin's sums
    terms = _bound_terms(G, H, reg, mcw)
    pos = 0
    nf = 0
    w = 0
    i = 0
    while i < n:
        _prefetch_features(slots, i, n, slot_feature, offsets, default_bins, mask, dead)
        f = slot_feature[slots[i]]
        hi = offsets[f + 1]
        if dead[f]:
            i += 1
            while i < n and slots[i] < hi:
                i += 1
            continue
        # one pass over the feature's run: its sums (rest) and the run compacted to
        # [w0, w) (all-zero slots left out). The sums of the C <= 3 channels in locals, not
        # in `fixed`: stores to memory in this loop would stall on one another and, with
        # stretches on several threads, contend for the cache lines of their scratch
        w0 = w
        s0 = s1 = s2 = total[0] - total[0]
        while i < n and slots[i] < hi:
            v = vals[i, 0]
            s0 += v
            vals[w, 0] = v
            z = v == 0
            if C > 1:
                v = vals[i, 1]
                s1 += v
                vals[w, 1] = v
                z &= v == 0
            if C > 2:
                v = vals[i, 2]
                s2 += v
                vals[w, 2] = v
                z &= v == 0
            slots[w] = slots[i]
            w += np.int64(not z)
            i += 1
        fixed[0, 0] = s0
        if C > 1:
            fixed[0, 1] = s1
        if C > 2:
            fixed[0, 2] = s2
        o = offsets[f]
        nvb = hi - o - 1
        searched = mask[f]
        d = np.int64(-1)
        if f > 0 and (searched or mark):
            d = default_bins[f]
            anything = False
            for c in range(C):
                anything |= fixed[0, c] != 0
                fixed[0, c] = total[c] - fixed[0, c]
            searched &= anything
            if prune:
                hd, cd = _slot_hc(fixed, 0)
                if ((mcw > 0.0 and H - hd * h_scale + tol < mcw)
                        or (cd >= 0.0 and min_data > 0.0 and n_rows - cd < min_data)):
                    searched = False
                    if mark:
                        dead[f] = 1
                        w = w0
                        continue
                if searched and rec is not None:
                    g_lo, g_hi, h_min = child_box(slots, vals, w0, w, o, d, nvb)
                    if _outranked(terms, H, (g_lo * g_scale, g_hi * g_scale,
                                             h_min * h_scale - tol),
                                  H - hd * h_scale + tol, reg, mcw, general, rec, shared):
                        searched = False
        if searched:
            out_ptr[nf] = pos
            out_features[nf] = f
            nf += 1
            # the feature's bins in order: an empty first bin, its slots below the default
            # bin, the default bin fixed (f > 0), its other slots, empty last value and
            # missing bins. Empty bins among them change no split (see below); the edges are
            # written even when empty
            p0 = pos
            b = w
            kd = w0
            if f > 0:
                while kd < b and slots[kd] - o < d:
                    kd += 1
            if d != 0 and (w0 == b or slots[w0] != o):
                pos = _put(out, out_bins, pos, 0, zero, 0)
            pos = _put_run(out, out_bins, pos, slots, vals, w0, kd, o)
            last = np.int64(-1) if kd == w0 else np.int64(slots[kd - 1] - o)
            if f > 0:
                pos = _put(out, out_bins, pos, d, fixed, 0)
                last = d
            pos = _put_run(out, out_bins, pos, slots, vals, kd, b, o)
            if kd < b:
                last = np.int64(slots[b - 1] - o)
            if last < nvb - 1:
                pos = _put(out, out_bins, pos, nvb - 1, zero, 0)
            if last < nvb:
                pos = _put(out, out_bins, pos, nvb, zero, 0)
            if rec is not None:
                foff[1] = pos - p0
                split._best_split_feature(_as_float(out, p0, pos, g_scale, h_scale, fbuf),
                                          foff, 0, G, H, n_rows, reg, general, frec)
                # ties keep the lowest feature, as in `split.find_best_splits`
                if frec[split.REC_FEATURE] >= 0.0 and frec[split.REC_GAIN] > rec[
                        split.REC_GAIN]:
                    for c in range(split.REC_WIDTH):
                        rec[c] = frec[c]
                    rec[split.REC_FEATURE] = f
                    rec[split.REC_BIN] = out_bins[p0 + np.int64(frec[split.REC_BIN])]
                    # racy between stretches: a lost raise leaves a gain some feature reached
                    if rec[split.REC_GAIN] > shared[0]:
                        shared[0] = rec[split.REC_GAIN]
                pos = p0
    out_ptr[nf] = pos
    return pos, nf, w


@nb.njit(cache=True, nogil=True)
def searched_node(slots, vals, offsets, slot_feature, default_bins, mask, dead, mark, prune, H,
                  n_rows, h_scale, mcw, min_data, tol, total, fixed, out, out_ptr,
                  out_features, out_bins):
    """What the split search of one node needs of its sparse histogram (slots, vals (m, C),
    native dtype; see the section's top): for each feature it searches, its slots with
    anything in them, its default bin fixed (the node total minus the feature's other slots,
    summed in slot order) and its first and last value bins and missing slot (kept even when
    empty), bin by bin into out (size, C), their bins in out_bins, the features' runs in
    out_ptr and ids in out_features. The node's list is compacted in place as it is read
    (all-zero slots and those of dead features left out). slot_feature: int32 (total_bins,)
    each slot's feature; total: (C,) zeros, or the node total for a stretch of a node's list
    after the first (`node_total`, `feature_chunks`), fixed: (1, C) scratch, both of vals'
    dtype. Returns (slots written, features written, the list's new length).

    Searched: features of mask (bool (F,)) not dead (dead: uint8 (F,)) with a slot off their
    default bin holding anything, and, when `prune` (hessians non-negative), whose rows off
    the default bin carry at least min_child_weight of hessian (min_data_in_leaf rows, with
    row counts): one child of any split of a feature holds none of its default bin's rows,
    so no split of the others is valid, in the node or below it (H: the node's hessian sum,
    n_rows its row count; h_scale turns native hessians into gradient units; tol a rounding
    margin). With `mark`, every feature failing that test, masked or not, is marked in dead
    (and its slots left out of the list): no node below this one can split it. Feature 0
    (stored for every row) is searched whenever masked in.

    A split after a left-out (empty) bin has the sums, so the gain and validity, of the split
    after the bin before it, which the search (the first of equal gains wins) ranks first
    (so empty bins may as well be left in); the first and last value bins bound the
    candidates. So the dense search on `out` finds the split of the node's full histogram,
    its bin read back through out_bins."""
    node_total(slots, vals, offsets, total)
    return _node_pass(slots, vals, offsets, slot_feature, default_bins, mask, dead, mark, prune,
                      0.0, H, n_rows, h_scale, mcw, min_data, tol, total, fixed, out,
                      out_ptr, out_features, out_bins, None, None, None, None, None, None, 1.0,
                      None)


@nb.njit(cache=True, nogil=True)
def search_node(slots, vals, offsets, slot_feature, default_bins, mask, dead, mark, prune, G,
                H, n_rows, g_scale, h_scale, mcw, min_data, tol, total, fixed, out,
                out_ptr, out_features, out_bins, reg, general, foff, frec, rec, shared, fbuf):
    """`searched_node` with each feature searched (the dense kernel's
    `split._best_split_feature`, totals G, H, n_rows, reg and general as there) while its
    bins are in cache, the best record into rec[:REC_WIDTH] (gain 0, feature -1 on entry:
    kept when no split gains): one pass, `out` reused for every feature (size: the widest
    feature plus 4). Quantised sums are searched in gradient units (g_scale, h_scale) through
    fbuf (float64 (size, 2 or 3)). foff: int64 (>= 2,) scratch, frec: (>= REC_WIDTH,)
    scratch; fixed: (>= 1, C) (row 0 used; rows may be padded, see the backend)
    shared: float64 (1,), the best gain the node's stretches reached so far (0 on entry),
    read by the gain bound and raised by this call: stretches searched at once share it, so
    a feature another stretch outranks is not scanned (the records are the same).
    Returns as `searched_node` (nothing of `out` kept)."""
    node_total(slots, vals, offsets, total)
    return _node_pass(slots, vals, offsets, slot_feature, default_bins, mask, dead, mark, prune,
                      G, H, n_rows, h_scale, mcw, min_data, tol, total, fixed, out,
                      out_ptr, out_features, out_bins, reg, general, foff, frec, rec, shared,
                      g_scale, fbuf)


@nb.njit(cache=True, nogil=True)
def search_stretch_range(lo, hi, step, bounds, slots, vals, offsets, slot_feature, default_bins,
                         mask, dead, mark, prune, G, H, n_rows, g_scale, h_scale, mcw, min_data,
                         tol, totals, fixed, out, out_ptr, out_features, out_bins, reg, general,
                         foff, frec, recs, shared, fbuf, lengths):
    """`search_node` of stretches lo, lo + step, ... below hi of a node's list (stretch c:
    slots[bounds[c]:bounds[c + 1]], whole features, `feature_chunks`), each with its own
    scratch, row c of totals (k, C) (the node total), fixed (k, >= 1, C), out (k, width,
    C), out_ptr (k, w), out_features (k, w), out_bins (k, width), foff (k, >= 2), frec (k,
    >= REC_WIDTH), fbuf (k, width, 2 or C), its record into recs[c] and its list's new length
    into lengths[c] (its compacted slots stay at the stretch's start); shared: the best gain
    of all stretches (one value, see `search_node`). Ranges of stretches run on several
    threads (`_threads.run_ranges`; `search_nodes` runs the same searches for several
    nodes at once); `merge_stretches` then puts the lists and records together."""
    for c in range(lo, hi, step):
        a = bounds[c]
        b = bounds[c + 1]
        lengths[c] = search_node(
            slots[a:b], vals[a:b], offsets, slot_feature, default_bins, mask, dead, mark, prune,
            G, H, n_rows, g_scale, h_scale, mcw, min_data, tol, totals[c], fixed[c], out[c],
            out_ptr[c], out_features[c], out_bins[c], reg, general, foff[c], frec[c], recs[c],
            shared, fbuf[c])[2]


@nb.njit(cache=True, nogil=True)
def stretch_positions(bounds, lengths, positions):
    """positions[c] (int64 (k,)) = where stretch c's compacted run goes in the node's list
    (the lengths of the stretches before it). Returns (the first stretch that moves, k if
    none; the list's new length): those before it stay where they are."""
    k = lengths.shape[0]
    first = k
    w = 0
    for c in range(k):
        positions[c] = w
        if first == k and w < bounds[c]:
            first = c
        w += lengths[c]
    return first, w


@nb.njit(cache=True, nogil=True)
def move_stretches(lo, hi, step, bounds, lengths, positions, slots, vals, tmp_slots, tmp_vals):
    """The compacted runs of stretches lo, lo + step, ... below hi copied to their places
    (`stretch_positions`) in tmp_slots / tmp_vals (the list's size: then stretches read and
    write disjoint places, so ranges of them run on several threads; or slots / vals
    themselves, stretches in order on one thread)."""
    for c in range(lo, hi, step):
        a = bounds[c]
        p = positions[c]
        for i in range(lengths[c]):
            tmp_slots[p + i] = slots[a + i]
            for q in range(vals.shape[1]):
                tmp_vals[p + i, q] = vals[a + i, q]


@nb.njit(cache=True, nogil=True)
def copy_entries(lo, hi, src_slots, src_vals, dst_slots, dst_vals):
    """dst[lo:hi] = src[lo:hi] of a list's slots and sums (ranges on several threads)."""
    for i in range(lo, hi):
        dst_slots[i] = src_slots[i]
        for q in range(src_vals.shape[1]):
            dst_vals[i, q] = src_vals[i, q]


@nb.njit(cache=True, nogil=True)
def merge_records(recs, rec):
    """The stretches' records recs (k, >= REC_WIDTH) merged in order into rec (a later one kept
    only when it gains strictly more: the lowest feature of equal gains)."""
    for c in range(recs.shape[0]):
        if recs[c, split.REC_FEATURE] >= 0.0 and recs[c, split.REC_GAIN] > rec[split.REC_GAIN]:
            for q in range(split.REC_WIDTH):
                rec[q] = recs[c, q]


@nb.njit(cache=True, nogil=True)
def merge_stretches(bounds, slots, vals, lengths, positions, recs, rec):
    """After `search_stretch_range` of every stretch, on the calling thread: their compacted
    lists moved after one another in place (in order: a stretch moves only to places before
    its own, which those before it have left) and their records merged into rec; returns the
    list's new length (`search_nodes` runs the same steps in parallel, through a
    scratch)."""
    k = lengths.shape[0]
    first, total = stretch_positions(bounds, lengths, positions)
    move_stretches(first, k, 1, bounds, lengths, positions, slots, vals, slots, vals)
    merge_records(recs, rec)
    return total


@nb.njit(parallel=True, cache=True, nogil=True)
def search_nodes(workers, first, bounds, node_slots, node_vals, node_dead, masks, totals,
                 offsets, slot_feature, default_bins, mark, prune, g_scale, h_scale, mcw,
                 min_data, tol, stretch_totals, fixed, out, out_ptr, out_features, out_bins, reg,
                 general, foff, frec, recs, shared, fbuf, lengths, positions, tmp_slots,
                 tmp_vals, node_recs, node_lengths):
    """`search_node` of the lists of m nodes (a grower step's) in stretches of whole features,
    all in one parallel loop: node j (j < m = len(first) - 1) of node_slots / node_vals /
    node_dead (tuples of its list, sums and dead flags; longer tuples padded with anything
    of the same types) is cut into stretches first[j] .. first[j + 1] - 1
    (`feature_chunks`; its bounds into bounds[first[j] + j : first[j + 1] + j + 1], int64
    (first[m] + m,) out), searched with masks[j], totals[j] (G, H, rows), shared[j] (its
    stretches' best gain, a row of a cache line, zeros on entry); each of `workers` threads
    takes the next stretch of all nodes in order as it comes free. Each stretch c has the
    scratch rows c of `search_stretch_range`'s arrays (stretch_totals (K, C) out: its node's
    total), its record into recs[c] (feature -1 on entry). Then each node's compacted
    stretches are put one after another (moved into tmp_slots / tmp_vals, which hold the
    nodes' lists one after another, and copied back, both in parallel) and its stretches'
    records merged into node_recs[j] (`merge_records`; gain 0, feature -1 on entry), its
    list's new length into node_lengths[j]. Records, lists and dead flags are one pass's
    whatever the stretches and threads."""
    m = first.shape[0] - 1
    k = first[m]
    stretch_node = np.empty(k, np.int64)
    base = np.empty(m + 1, np.int64)  # node j's place in tmp
    base[0] = 0
    for j in range(m):
        slots = node_slots[j]
        feature_chunks(slots, slot_feature, bounds[first[j] + j:first[j + 1] + j + 1])
        total = stretch_totals[first[j]]
        total[:] = 0
        node_total(slots, node_vals[j], offsets, total)
        for c in range(first[j], first[j + 1]):
            stretch_totals[c] = total
            stretch_node[c] = j
        base[j + 1] = base[j] + slots.shape[0]
    # stretches taken in order from a shared counter as threads come free: their costs
    # differ (a feature scanned or passed over by the gain bound, runs of 1 or 256 slots), so
    # a fixed share a thread leaves threads waiting on the slowest
    # (the counter at taken[8], padded to a cache line of its own: the arrays the threads
    # read for every stretch must not share its line)
    taken = np.zeros(24, np.int64)
    for _ in nb.prange(workers):
        while True:
            c = fetch_add(taken, 8, 1)
            if c >= k:
                break
            j = stretch_node[c]
            a = bounds[c + j]
            b = bounds[c + j + 1]
            lengths[c] = search_node(
                node_slots[j][a:b], node_vals[j][a:b], offsets, slot_feature, default_bins,
                masks[j], node_dead[j], mark, prune, totals[j, 0], totals[j, 1], totals[j, 2],
                g_scale, h_scale, mcw, min_data, tol, stretch_totals[c], fixed[c], out[c],
                out_ptr[c], out_features[c], out_bins[c], reg, general, foff[c], frec[c],
                recs[c], shared[j], fbuf[c])[2]
    moving = np.empty(m, np.int64)  # each node's first stretch that moves
    any_moves = False
    for j in range(m):
        c0, c1 = first[j], first[j + 1]
        f, node_lengths[j] = stretch_positions(bounds[c0 + j:c1 + j + 1], lengths[c0:c1],
                                               positions[c0:c1])
        moving[j] = c0 + f
        any_moves |= moving[j] < c1
        merge_records(recs[c0:c1], node_recs[j])
    if any_moves:
        for w in nb.prange(workers):
            for c in range(w, k, workers):
                j = stretch_node[c]
                if c >= moving[j]:
                    c0 = first[j]
                    move_stretches(c - c0, c - c0 + 1, 1, bounds[c0 + j:], lengths[c0:],
                                   positions[c0:], node_slots[j], node_vals[j],
                                   tmp_slots[base[j]:], tmp_vals[base[j]:])
        for w in nb.prange(workers):
            for j in range(m):
                if moving[j] < first[j + 1]:
                    start = positions[moving[j]]
                    n = node_lengths[j] - start
                    copy_entries(start + n * w // workers, start + n * (w + 1) // workers,
                                 tmp_slots[base[j]:], tmp_vals[base[j]:], node_slots[j],
                                 node_vals[j])


@nb.njit(cache=True, nogil=True)
def feature_chunks(slots, slot_feature, bounds):
    """Cut a node's list into len(bounds) - 1 stretches of about equal length at feature
    boundaries (no feature's slots in two): bounds int64 (k+1,) out, ascending, from 0 to
    the list's length (a stretch may be empty)."""
    n = slots.shape[0]
    k = bounds.shape[0] - 1
    bounds[0] = 0
    for c in range(1, k):
        p = max(bounds[c - 1], n * c // k)
        while 0 < p < n and slot_feature[slots[p]] == slot_feature[slots[p - 1]]:
            p += 1
        bounds[c] = p
    bounds[k] = n


@nb.njit(cache=True, nogil=True)
def gather_fixed(src, starts, ptr, defaults, totals, dst):
    """A node's fixed histogram dst (size, C) from its unfixed full-width one src
    (total_bins, C), both float64 or int64 (packed sums: C = 1; two's-complement differences
    of packed sums are the packed differences): the runs src[starts[i]:...] of features
    into dst[ptr[i]:ptr[i+1]], feature 0 first; then each other feature's default
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


@nb.njit(cache=True, nogil=True)
def partition_nodes_serial(col_ptr, col_rows, col_bins, rows, starts, ends, features,
                           threshold_bins, missing_bins, default_bins, default_left, scratch,
                           n_left):
    """Partition several nodes on the calling thread, one after another (their ranges in
    starts/ends int64 (k,); the rest as `partition_scatter`'s); n_left int64 (k,) out."""
    for k in range(starts.shape[0]):
        f = features[k]
        n_left[k] = partition_range(col_rows, col_bins, col_ptr[f], col_ptr[f + 1], rows,
                                    starts[k], ends[k], threshold_bins[k], missing_bins[f],
                                    default_left[k] != 0, default_bins[f], scratch)


@nb.njit(cache=True, nogil=True)
def partition_scatter(lo_item, hi_item, items, col_ptr, col_rows, col_bins, rows, starts,
                      features, threshold_bins, missing_bins, default_bins, default_left,
                      scratch, counts):
    """First pass of a chunked partition, items lo_item..hi_item-1 of items int64 (m, 3)
    (`PART_NODE`, `PART_LO`, `PART_HI`): each chunk partitioned on its own (`_scatter`: its
    lefts to the front of its range, its rights to scratch at the same place), counts[j]
    (int64) its lefts; a chunk after its node's first parks its lefts behind its rights in
    scratch. Chunks touch only their own ranges, so ranges of items run on several threads
    (`_threads.run_ranges`); `partition_place` then moves every chunk's rows to their final
    places. starts: int64 (k,) each node's first row; features, threshold_bins: int32 (k,);
    default_left: uint8 (k,)."""
    for j in range(lo_item, hi_item):
        k = items[j, PART_NODE]
        lo = items[j, PART_LO]
        hi = items[j, PART_HI]
        f = features[k]
        c_hi = col_ptr[f + 1]
        counts[j] = 0
        if hi > lo:
            p = _seek(col_rows, col_ptr[f], c_hi, rows[lo])
            c = _scatter(col_rows, col_bins, p, c_hi, rows, lo, hi, threshold_bins[k],
                         missing_bins[f], default_left[k] != 0, default_bins[f], scratch)
            counts[j] = c
            if lo > starts[k]:
                copy_range(rows, lo, scratch, hi - c, c)


@nb.njit(cache=True, nogil=True)
def partition_place(lo_item, hi_item, items, rows, starts, scratch, counts, positions, n_left):
    """Second pass of a chunked partition (items lo_item..hi_item-1): each chunk's lefts
    (parked in scratch, or already in place for a node's first chunk) and rights to their
    final places, the node's lefts in chunk order, then its rights: the stable partition,
    whatever the chunks. Reads scratch only and writes disjoint places of rows, so ranges
    of items run on several threads (`partition.place_chunk`)."""
    for j in range(lo_item, hi_item):
        place_chunk(j, items, rows, starts, scratch, counts, positions, n_left)


@nb.njit(parallel=True, cache=True, nogil=True)
def partition_items(workers, items, col_ptr, col_rows, col_bins, rows, starts, features,
                    threshold_bins, missing_bins, default_bins, default_left, scratch, counts,
                    positions, n_left):
    """A chunked partition on Numba's parallel loop: `partition_scatter` of `workers` ranges
    of consecutive items, `partition.chunk_positions`, then `partition_place` of the same ranges
    (arguments as theirs)."""
    m = items.shape[0]
    for w in nb.prange(workers):
        partition_scatter(m * w // workers, m * (w + 1) // workers, items, col_ptr, col_rows,
                          col_bins, rows, starts, features, threshold_bins, missing_bins,
                          default_bins, default_left, scratch, counts)
    chunk_positions(items, starts, counts, positions, n_left)
    for w in nb.prange(workers):
        partition_place(m * w // workers, m * (w + 1) // workers, items, rows, starts,
                        scratch, counts, positions, n_left)
