"""`CompactSparseCPUBackend`: the sparse layout's backend under a distributed wrapper, with its
histogram kernels (the rest: `histboost.kernels.cpu.sparse`).

One process trains with `histboost.kernels.cpu.sparse_backend.SparseCPUBackend`, whose node
histograms are sparse (each worker's would hold different slots); the wrapper sums compact
histograms of one layout on every worker slot by slot, which this backend keeps. Its models
are those of the dense layout, as the other's.

Everything but the layout-bound steps is `CPUBackend`'s: gradients, split search kernels,
margins. A node's histogram is built over the stored slots of its rows (time proportional to
its stored values) in a full-width scratch histogram, each feature's default bin is fixed from
the node total, and the partition reads the split feature's column of non-default entries.

Live features. A wide sparse matrix has far more histogram slots than a node has stored values,
so per-node work over every slot (zeroing, fixing, subtracting, searching) would dominate. A
feature is *live* in a node while some split of it could be valid there: its rows outside the
default bin carry at least min_child_weight of hessian (and min_data_in_leaf rows, when rows
are counted). A node's descendants hold subsets of its rows, so a feature dead in a node is dead
in its whole subtree (hessians are non-negative; otherwise nothing is pruned).

Compact histograms. A node's histogram is kept *compact*: the slots of its live features only,
feature after feature in ascending order (feature 0, which carries the node total, always
first), so memory and every step after the build (fixing, subtracting, searching) cost its live
slots. Both children of a split take the live features that stay live in the parent; the
parent's histogram is compacted to them when its split is searched, so a subtraction is one
elementwise difference of two arrays of one layout. The split search runs the dense kernels on
the compact histogram (compact offsets, features renumbered back): the splits are those of the
dense layout. `read_histograms` returns full-width histograms, zero outside the live features'
slots.

Under a distributed wrapper (`histboost.distributed.backend`) every worker must keep the same
layouts, since the wrapper sums their compact histograms slot by slot: the root's live
features are the union of every worker's (`varying_features`, `set_root_features`), pruning
follows hessian statistics summed over all workers (`pruning_stats`, `set_pruning`) and the
global histograms; where workers hold global sums of their feature block only
("reduce_scatter") the backend does not prune by itself (`prune_live`): the wrapper agrees on
each searched node's live features (`live_flags`, `restrict_live`). A worker whose rows
store nothing of a live feature adds a histogram that is zero there but for the default bin
(the fix), so the sums are the global histogram. `compact_histograms` hands the wrapper the
stored arrays to reduce in place.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba.extending import overload

from ...tree.quantize import Quantisation
from . import histogram, sparse, split
from ._intrinsics import add_pair, prefetch
from .sparse_backend import (
    _PARALLEL_MIN_VALUES,
    _POOL_KEEP,
    _SPLIT_COST,
    SparseLayoutBackend,
)

# the row chunks of a large node's histogram each zero and add a scratch histogram of the live
# slots: at most one chunk per this many (stored values / live histogram values), so that the
# scratch work stays below the sums (a function of the node and the data only, as the chunk
# count of the dense layout: float models do not depend on the threads)
_VALUES_PER_CHUNK_SLOT = 1


# -- compact histogram kernels ---------------------------------------------------------
def _accumulate(indptr, slots, gh, rows, start, end, hist):
    """hist += sums of gh over the stored slots of rows[start:end], in row order (layout
    chosen at compile time by hist.ndim, as `kernels.cpu.histogram`)."""


@overload(_accumulate, inline="always")
def _accumulate_impl(indptr, slots, gh, rows, start, end, hist):
    if hist.ndim == 1:
        def packed(indptr, slots, gh, rows, start, end, hist):
            for k in range(start, end):
                if k + sparse._PREFETCH_DISTANCE < end:
                    ahead = rows[k + sparse._PREFETCH_DISTANCE]
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
            if k + sparse._PREFETCH_DISTANCE < end:
                ahead = rows[k + sparse._PREFETCH_DISTANCE]
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


sparse._LOW32 = np.int64(0xFFFFFFFF)


def _slot_hc(hist, d):
    """(hessian, row count or -1) of slot d of one histogram (layout chosen at compile time:
    packed (total_bins,), or (total_bins, 2 or 3))."""


@overload(_slot_hc, inline="always")
def _slot_hc_impl(hist, d):
    if hist.ndim == 1:
        def packed(hist, d):
            return np.float64(hist[d] & sparse._LOW32), -1.0
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




# live slot ranges closer than this many slots are zeroed as one (the slots between them are
# unspecified in the scratch either way): fewer, longer loops
_RANGE_GAP = 32
# full-width scratch histograms a build uses at most (a depth-wise level is built in groups)
_BUILD_GROUP = 4


class _Live:
    """A node's live features and its compact histogram layout. features: int32 (L,)
    ascending, 0 included; starts: int64 (L,) their first global slots; ptr: int64 (L+1,)
    their first compact slots; defaults: int64 (L,) the compact slot of each one's default
    bin; size: compact slots; lo, hi: int64 ranges [lo[r], hi[r]) of global slots covering
    theirs (the gaps hold no live slot); values: the slots the ranges cover."""

    __slots__ = ("features", "starts", "ptr", "defaults", "size", "lo", "hi", "values")

    def __init__(self, features: np.ndarray, offsets: np.ndarray,
                 default_bins: np.ndarray) -> None:
        L = features.size
        self.features = features
        self.starts = np.empty(L, np.int64)
        self.ptr = np.empty(L + 1, np.int64)
        self.defaults = np.empty(L, np.int64)
        lo = np.empty(L, np.int64)
        hi = np.empty(L, np.int64)
        n = node_layout(features, offsets, default_bins, _RANGE_GAP, self.starts,
                               self.ptr, self.defaults, lo, hi)
        self.lo, self.hi = lo[:n], hi[:n]
        self.size = int(self.ptr[-1])
        self.values = int(hi[:n].sum() - lo[:n].sum())


class CompactSparseCPUBackend(SparseLayoutBackend):
    """`SparseLayoutBackend` with compact node histograms (the module docstring)."""

    def __init__(self, sbins, n_threads: int, label: np.ndarray | None = None,
                 weight: np.ndarray | None = None, n_outputs: int = 1,
                 count_rows: bool = False, pack: bool = True,
                 row_ids: np.ndarray | None = None, pack_rows: int = 0) -> None:
        super().__init__(sbins, n_threads, label, weight, n_outputs, count_rows, pack,
                         row_ids, pack_rows)
        # features with no entry off their default bin never split (nor need slots)
        varying = np.flatnonzero(np.diff(sbins.col_ptr) > 0)
        self._root_live = self._layout(np.union1d([0], varying).astype(np.int32))
        # the layout of every node not split yet (its histogram's, once built)
        self._live: dict[int, _Live] = {}
        # node -> its compact histogram: (size,) packed int64, or (size, C)
        self._compact: dict[int, np.ndarray] = {}
        self._prune = False
        self._prune_rule = False  # the tree's rule, whether or not this backend prunes
        self._tol = 0.0
        # whether this backend prunes live features by itself (a distributed
        # "reduce_scatter" wrapper turns it off: its workers hold global sums of their
        # feature block only, and it agrees on them through `live_flags`)
        self.prune_live = True

    def varying_features(self) -> np.ndarray:
        """bool (F,): the features with an entry off their default bin in these rows."""
        return np.diff(self.sbins.col_ptr) > 0

    def set_root_features(self, varying: np.ndarray) -> None:
        """The root's live features: those of bool (F,) `varying` (the union of every
        worker's `varying_features`, so that all workers keep one layout), and feature 0."""
        varying = np.asarray(varying, bool).copy()
        varying[0] = True
        self._root_live = self._layout(np.flatnonzero(varying).astype(np.int32))

    def pruning_stats(self, output: int) -> np.ndarray:
        """float64 (3,): (rows, rows with a negative hessian, sum of |hessian|) of these rows'
        gradients of `output`, which `set_pruning` turns into the tree's pruning rule (summed
        over all workers under a distributed wrapper)."""
        h = self._pairs[output][:, 1]
        return np.array([h.shape[0], np.count_nonzero(h < 0),
                         float(np.abs(h).sum(dtype=np.float64))], np.float64)

    def set_pruning(self, stats: np.ndarray) -> None:
        """This tree prunes dead features when there are rows and no hessian is negative (a
        dead feature stays dead in a subtree only then), with a rounding margin for the float
        hessian sums the test compares. stats: `pruning_stats`'s (3,)."""
        self._prune_rule = bool(stats[0] > 0 and stats[1] == 0)
        self._prune = self.prune_live and self._prune_rule
        self._tol = 1e-9 * (float(stats[2]) + 1.0)

    def compact_histograms(self, nodes: list[int]) -> list[tuple[np.ndarray, np.ndarray,
                                                                 np.ndarray]]:
        """The stored compact histograms of `nodes` (built): for each, (its array, (size,)
        packed int64 or (size, C), written through by the caller; its live features int32
        (L,) ascending; their first compact slots int64 (L+1,)). A distributed wrapper sums
        the arrays across workers in place (all workers hold the same layouts)."""
        return [(self._compact[i], self._live[i].features, self._live[i].ptr) for i in nodes]

    def _layout(self, features: np.ndarray) -> _Live:
        return _Live(features, self.offsets, self.default_bins)

    def release(self) -> None:
        super().release()
        self._live, self._compact = {}, {}

    # -- one tree ------------------------------------------------------------------------
    def begin_tree(self, output: int, rows: np.ndarray | None,
                   quantisation: Quantisation | None,
                   bounds: tuple[float, float] | None = None) -> int:
        count = super().begin_tree(output, rows, quantisation, bounds)
        self._pool_bufs.trim(_POOL_KEEP)
        self.set_pruning(self.pruning_stats(output))
        self._live = {0: self._root_live}
        self._compact = {}
        return count

    def build_histograms(self, nodes: list[int]) -> None:
        """Compact histograms of `nodes` (returns None: a distributed wrapper reduces them
        through `compact_histograms`)."""
        self._float_memo = None
        for g in range(0, len(nodes), _BUILD_GROUP):
            self._build_group(nodes[g:g + _BUILD_GROUP])

    def _build_group(self, nodes: list[int]) -> None:
        """Build `nodes` in full-width scratch histograms over their live ranges (nodes too
        small for row chunks in one call, first), then copy each into its compact histogram,
        fixing its default bins."""
        sb = self.sbins
        bounds = self._ranges.bounds(nodes)
        width = int(np.prod(self._hist_shape[1:], dtype=np.int64))
        batch, chunked = [], []
        for k, (s, e) in enumerate(bounds):
            live = self._live[nodes[k]]
            c = self._sum_chunks(e - s)
            while c > 1 and ((e - s) * self._values_per_row / c
                             < _VALUES_PER_CHUNK_SLOT * live.values * width):
                c //= 2
            (batch if c == 1 else chunked).append((k, c))
        order = [k for k, _ in batch] + [k for k, _ in chunked]
        lives = [self._live[nodes[k]] for k in order]
        out = self._empty((len(nodes), *self._hist_shape), self.hist_dtype)
        if batch:
            idx = [k for k, _ in batch]
            starts = np.array([bounds[k][0] for k in idx], np.int64)
            ends = np.array([bounds[k][1] for k in idx], np.int64)
            rng_ptr = np.zeros(len(idx) + 1, np.int64)
            np.cumsum([lives[j].lo.size for j in range(len(idx))], out=rng_ptr[1:])
            lo = np.concatenate([lives[j].lo for j in range(len(idx))])
            hi = np.concatenate([lives[j].hi for j in range(len(idx))])
            threads = self._team(min(len(idx), int(int((ends - starts).sum())
                                                   * self._values_per_row)
                                     // _PARALLEL_MIN_VALUES))
            kernel = build_histograms if threads > 1 else build_histograms_serial
            kernel(sb.indptr, sb.slots, self.gh, self.rows, starts, ends, rng_ptr, lo, hi,
                   out[:len(idx)])
        for j, (k, c) in enumerate(chunked, start=len(batch)):
            live = lives[j]
            s, e = bounds[k]
            if self._chunk_buffers.shape[0] < c:
                self._chunk_buffers = np.zeros((c, *self._hist_shape), self.hist_dtype)
            if self._team(c) > 1:
                build_histogram_chunked(sb.indptr, sb.slots, self.gh, self.rows, s, e,
                                               live.lo, live.hi, self._chunk_buffers[:c],
                                               out[j])
            else:
                build_histogram_chunked_serial(sb.indptr, sb.slots, self.gh, self.rows,
                                                      s, e, live.lo, live.hi, c,
                                                      self._chunk_buffers[0], out[j])

        def compact(j: int) -> np.ndarray:
            live = lives[j]
            h = np.empty((live.size, *self._hist_shape[1:]), self.hist_dtype)
            sparse.gather_fixed(out[j].reshape(self.total_bins, -1), live.starts, live.ptr,
                                live.defaults, np.zeros(width, self.hist_dtype),
                                h.reshape(live.size, -1))
            return h

        for j, k in enumerate(order):
            self._compact[nodes[k]] = compact(j)

    def subtract_histograms(self, parents: list[int], built: list[int],
                            targets: list[int]) -> None:
        # the parent's histogram was compacted to its children's layout when its split was
        # searched: one elementwise difference, into the parent's array (released here)
        self._float_memo = None
        for p, b, t in zip(parents, built, targets, strict=True):
            parent = self._compact.pop(p)
            child = self._compact[b]
            if parent.shape != child.shape:
                raise ValueError(f"node {p}'s histogram does not have the layout of its "
                                 f"children {b}, {t}")
            np.subtract(parent, child, out=parent)
            self._compact[t] = parent

    # -- split search --------------------------------------------------------------------
    def _compact_float(self, h: np.ndarray) -> np.ndarray:
        """A compact histogram (or run of one) as float64 (slots, C) in gradient units: the
        stored array itself for float trees."""
        q = self._quantisation
        if q is None:
            return h
        if h.ndim == 1:  # packed
            out = np.empty((1, h.shape[0], 2), np.float64)
            histogram.unpack_to_float_serial(h[None], q.g_scale, q.h_scale, out)
            return out[0]
        # scales are powers of two, so these products are exact
        out = np.empty((1, *h.shape), np.float64)
        histogram.scale_to_float_serial(h[None], np.array([q.g_scale, q.h_scale, 1.0][
            :h.shape[1]]), out)
        return out[0]

    def _splittable(self, node: int, H: float, C: float, reg: np.ndarray,
                    prune: bool | None = None) -> np.ndarray | None:
        """bool (L,): which of the node's live features stay live (see the module docstring);
        None when all do, or when the tree does not prune (prune: that rule instead of this
        backend's)."""
        if not (self._prune if prune is None else prune):
            return None
        live = self._live[node]
        ok = np.empty(live.features.size, np.bool_)
        q = self._quantisation
        splittable_features(self._compact[node],
                                   np.arange(live.features.size, dtype=np.int32),
                                   live.defaults, H, C,
                                   1.0 if q is None else float(q.h_scale),
                                   float(reg[split.P_MCW]), float(reg[split.P_MIN_DATA]),
                                   self._tol, ok)
        ok[0] = True  # feature 0 carries the node total
        return None if ok.all() else ok

    def _refine(self, node: int, H: float, C: float, reg: np.ndarray) -> _Live:
        """Compact the node's histogram to its features that stay live (its children's
        layout); returns the layout."""
        keep = self._splittable(node, H, C, reg)
        return self._live[node] if keep is None else self.restrict_live(node, keep)

    def live_flags(self, nodes: list[int], totals: np.ndarray, reg: np.ndarray
                   ) -> list[np.ndarray]:
        """Per node, bool (L,): which of its live features stay live by its histogram and the
        tree's pruning rule (all, when the tree does not prune), whether or not this backend
        prunes itself (`prune_live`): a distributed "reduce_scatter" wrapper, whose workers
        hold global sums of their own features only, agrees on them and applies them with
        `restrict_live`."""
        out = []
        for j, node in enumerate(nodes):
            keep = self._splittable(node, float(totals[j, 1]), float(totals[j, 2]), reg,
                                    prune=self._prune_rule)
            out.append(np.ones(self._live[node].features.size, bool) if keep is None else keep)
        return out

    def restrict_live(self, node: int, keep: np.ndarray) -> _Live:
        """Compact the node's histogram to its live features where bool (L,) `keep` (its
        children's layout); returns the layout."""
        live = self._live[node]
        if keep.all():
            return live
        new = self._layout(live.features[keep])
        h = self._compact[node]
        out = np.empty((new.size, *h.shape[1:]), h.dtype)
        gather_slots(h.reshape(live.size, -1), live.ptr[:-1][keep], new.ptr,
                            out.reshape(new.size, -1))
        self._compact[node] = out
        self._live[node] = new
        return new

    def find_best_splits(self, nodes: list[int], totals: np.ndarray, feature_masks: np.ndarray,
                         reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        totals = np.ascontiguousarray(totals, np.float64)
        masks = np.ascontiguousarray(feature_masks, np.bool_)

        def search(j: int) -> np.ndarray:
            node = nodes[j]
            live = self._refine(node, float(totals[j, 1]), float(totals[j, 2]), reg)
            full = self._compact_float(self._compact[node])
            # the dense search on the bins it needs (`searched_bins`):
            # offsets of those, features numbered 0..L-1, both mapped back after
            hist = np.empty_like(full)
            ptr = np.empty(live.ptr.size, np.int64)
            bins = np.empty(full.shape[0], np.int32)
            kept = searched_bins(full, live.ptr, hist, ptr, bins)
            hist = hist[None, :kept]
            mask = masks[j:j + 1, live.features]
            if monotone is None:
                parallel = self._team(kept * _SPLIT_COST // _PARALLEL_MIN_VALUES) > 1
                rec = split.search(hist, totals[j:j + 1], ptr, mask, reg, parallel)[0]
            else:
                cons, lower, upper = monotone
                rec = split.search(hist, totals[j:j + 1], ptr, mask, reg, False,
                                   (np.asarray(cons)[live.features], lower[j:j + 1],
                                    upper[j:j + 1]))[0]
            if rec[split.REC_FEATURE] >= 0:
                f = int(rec[split.REC_FEATURE])
                rec[split.REC_BIN] = bins[ptr[f] + int(rec[split.REC_BIN])]
                rec[split.REC_FEATURE] = live.features[f]
            return rec

        out = np.zeros((len(nodes), split.REC_WIDTH), np.float64)
        for j in range(len(nodes)):
            out[j] = search(j)
        return out

    def _float_histograms(self, nodes: list[int]) -> np.ndarray:
        """float64 (k, total_bins, C) full-width histograms of `nodes` in gradient units,
        zero outside their live features' slots (the dense backend's readers: totals, the
        oblivious gain table, `read_histograms`)."""
        key = tuple(nodes)
        memo = self._float_memo
        if memo is not None and memo[0] == key:
            return memo[1]
        channels = 2 if len(self._hist_shape) == 1 else self._hist_shape[1]
        out = np.zeros((len(nodes), self.total_bins, channels), np.float64)
        for j, node in enumerate(nodes):
            live = self._live[node]
            at = np.repeat(live.starts - live.ptr[:-1], np.diff(live.ptr)) + np.arange(
                live.size)
            out[j, at] = self._compact_float(self._compact[node])
        self._float_memo = (key, out)
        return out

    def histogram_totals(self, nodes: list[int]) -> np.ndarray:
        # feature 0 comes first in every compact layout
        return np.array([self._compact_float(
            self._compact[i][:self._live[i].ptr[1]])[:, :2].sum(axis=0) for i in nodes])

    def oblivious_gains(self, nodes: list[int], totals: np.ndarray, feature_mask: np.ndarray,
                        reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        # layouts are not refined here: evaluate_split may read the level's feature in any
        # of its nodes
        mask = np.zeros(self.n_features, np.bool_)
        for j, node in enumerate(nodes):
            keep = self._splittable(node, float(totals[j, 1]), float(totals[j, 2]), reg)
            features = self._live[node].features
            mask[features if keep is None else features[keep]] = True
        return super().oblivious_gains(nodes, totals, mask & feature_mask, reg, monotone)

    def apply_splits(self, parents: list[int], lefts: list[int], rights: list[int],
                     records: np.ndarray) -> np.ndarray:
        counts = super().apply_splits(parents, lefts, rights, records)
        for p, left, right in zip(parents, lefts, rights, strict=True):
            self._live[left] = self._live[right] = self._live.pop(p)
        return counts
