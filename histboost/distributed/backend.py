"""`DistributedBackend`: data-parallel tree learning through the backend seam.

Each worker wraps the backend of its own rows. The wrapper reduces across workers exactly at
the points `histboost.kernels.backend` marks "reduce" and delegates everything else. Two tree
learners (``tree_learner``):

``"data"`` (XGBoost's histogram allreduce):
- ``gradient_bounds``: max, so every worker derives the same `Quantisation`;
- ``begin_tree``: the root's row count, summed (a tree on all rows: the rows of all workers,
  known, no collective);
- ``build_histograms``: the buffer of the new histograms, summed in place (allreduce), so the
  local backend's stored histograms become the global ones before any subtraction;
- ``apply_splits``: the children's row counts, summed (the local backend keeps its own row
  ranges; only the grower sees the global counts);
- ``split_and_search`` (a level of depthwise and best-first growth): the children's row
  counts ride with the built histograms in one allreduce (`Communicator.allreduce`'s
  ``tail``); the child to build is the one with the smaller global hessian sum, which every
  worker has from the records before any count is reduced.
Totals, split search, oblivious gain tables and ``evaluate_split`` then read global histograms
and return the same values on every worker. Where allgathers are cheap (``divide_search``: by
default dense CPU workers whose communicator shares memory, `Communicator.shares_memory`) each
worker searches only its feature block, as ``"reduce_scatter"`` does below, instead of every
worker repeating the whole search; a step so searched needs global histograms in the worker's
block only, so ``split_and_search`` reduces them block by block
(`Communicator.reduce_blocks`, with feature 0's slots and the counts), and the nodes' histograms
are then partial (tracked, and their children's too). Steps of at most ``full_search_slots``
histogram slots are reduced and searched whole (no allgather).

``"reduce_scatter"`` (LightGBM's data-parallel learner): the features are cut into one block
per worker (contiguous, about equal histogram slots). ``build_histograms`` reduce-scatters the
buffer by feature block: each worker receives the global histograms of its block only (half
the bytes of an allreduce). Each worker searches its block, the best-split records are
allgathered and every worker picks the same best (`better_split`'s order: higher gain, ties to
the lower feature, as one process breaks them); oblivious gain tables are reduced with max
(-inf outside a block), a chosen split's child sums are broadcast by the block's owner, and
the first feature's slots (and, in ``split_and_search``, the children's row counts) are
reduced on every worker in the same `Communicator.reduce_blocks`, so node totals are global
on every worker.
The grower sees the same values as with ``"data"``.

Margins and gradient pairs stay local: each worker updates its rows' margins.

Quantised histograms are int64 sums, exact in any order: a tree grown on N workers equals
the tree of one process on all rows, provided each row is rounded at its global index (the
local backend's ``row_ids``) and the local backends choose one histogram layout: packed (gradient
and hessian in one int64, half the bytes to reduce) when the bound on the sums over all
workers' rows allows it (``pack_rows``), else two int64 channels (a layout chosen from local
totals could differ between workers, and packed sums could overflow once added up).
Float histograms are float64 sums reduced in a fixed order: reproducible for a given worker
count, but not bit-identical to one process.

Sparse data (`CompactSparseCPUBackend`, whose ``compact_histograms`` exist): a node's histogram is
compact, the slots of its live features only, and the wrapper reduces those arrays (one
buffer of the nodes' compact slots; "reduce_scatter": each worker's block is its features'
compact slots of every node). The workers keep one layout: the root's live features are the
union of every worker's (one max-allreduce of F flags at construction), each tree's pruning
rule follows hessian statistics summed over all workers (with the root's row count, one
collective per tree), and the live features of a node follow its global histogram. With
"reduce_scatter" a worker holds global sums of its block only: each decides for its block's
features and the flags are max-allreduced before the search (`_agree_live`, one collective
of a byte per live feature per search).

``traffic`` counts the bytes this worker passed to collectives, by purpose ("histograms",
"splits", "counts"), ``calls`` how many it made, and ``wait_seconds`` the wall-clock time it
spent in them (transfer plus waiting for slower workers), for `bench/distributed.py` and the
docs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..kernels.backend import ComposedSteps, phase
from ..tree.split import REC_BIN, REC_FEATURE, REC_GAIN

if TYPE_CHECKING:
    from ..collective.base import Communicator
    from ..kernels.backend import Backend
    from ..timer import PhaseTimer
    from ..tree.quantize import Quantisation
    from ..tree.tree import Tree

TREE_LEARNERS = ("data", "reduce_scatter")

# "data" dividing the search (divide_search): a step whose searched nodes hold at most this
# many histogram slots (nodes x total_bins) is reduced whole and searched whole by every
# worker, without an allgather of records: at the top of a tree the search of all features
# costs less than a meeting of the ranks (a node of 28 x 256 slots takes ~0.1 ms on one
# core); larger steps reduce and search each worker's block only
FULL_SEARCH_SLOTS = 1 << 16


def best_records(candidates: np.ndarray) -> np.ndarray:
    """float64 (k, REC_WIDTH): per node, the best of the workers' records candidates (W, k,
    REC_WIDTH), by `histboost.tree.split.better_split`'s order (higher gain, ties to the lower
    feature, a record without a feature last, then the lower bin), vectorised."""
    feature = candidates[..., REC_FEATURE]
    keys = (candidates[..., REC_BIN], np.where(feature >= 0, feature, np.inf),
            -candidates[..., REC_GAIN])
    # lexsort sorts by the last key first; the first row of each node's order wins
    order = np.lexsort(keys, axis=0)[0]
    return candidates[order, np.arange(candidates.shape[1])]


def feature_blocks(bin_offsets: np.ndarray, world: int) -> np.ndarray:
    """int64 (world + 1,): worker r owns features ``blocks[r]:blocks[r+1]`` (contiguous, about
    total_bins / world histogram slots each; a block may be empty when features are few)."""
    offsets = np.asarray(bin_offsets, np.int64)
    total = int(offsets[-1])
    starts = offsets[:-1]
    # a feature belongs to the block its first slot falls in
    owner = np.minimum(starts * world // max(total, 1), world - 1)
    blocks = np.searchsorted(owner, np.arange(world + 1), side="left")
    blocks[-1] = offsets.shape[0] - 1
    return blocks.astype(np.int64)


def _nbytes(x: Any) -> int:
    """Bytes of numpy array or torch tensor x."""
    return int(x.nbytes if isinstance(x, np.ndarray) else x.numel() * x.element_size())


def _is_float(x: Any) -> bool:
    """Whether numpy array or torch tensor x holds floating-point values."""
    return bool(x.is_floating_point()) if hasattr(x, "is_floating_point") \
        else np.issubdtype(x.dtype, np.floating)


class DistributedBackend(ComposedSteps):
    """A `Backend` over this worker's rows that agrees with the other workers of `comm`.

    local: the backend of this worker's rows (a CPU backend should be built with
    ``pack_rows`` or ``pack=False`` and, for quantised trees matching one process,
    ``row_ids``); comm: a
    `histboost.collective.Communicator`, the same group on every worker; tree_learner:
    "data" or "reduce_scatter" (module docstring); divide_search: with "data", whether each
    worker searches its feature block only and the best records are allgathered (None: where
    the local backend is the CPU's and the communicator shares memory, so the allgather costs
    less than the search it saves; "reduce_scatter" always does); full_search_slots: with
    "data" dividing the search, a step of at most this many histogram slots (nodes x
    total_bins) is reduced and searched whole instead (`FULL_SEARCH_SLOTS`). Every worker
    must make the same sequence of calls (the grower does: its choices follow reduced
    values).
    """

    def __init__(self, local: Backend, comm: Communicator, tree_learner: str = "data",
                 divide_search: bool | None = None, total_rows: int | None = None,
                 full_search_slots: int = FULL_SEARCH_SLOTS) -> None:
        if getattr(local, "pack", False) and not getattr(local, "pack_rows", 0):
            # packed histograms: one int64 per slot when the *local* totals fit; workers could
            # disagree on the layout, and the packed sums overflow once added up
            raise ValueError("the local CPU backend of a DistributedBackend needs pack=False "
                             "or pack_rows (the rows of all workers)")
        if tree_learner not in TREE_LEARNERS:
            raise ValueError(f"tree_learner must be one of {TREE_LEARNERS}, got "
                             f"{tree_learner!r}")
        self.local = local
        self.comm = comm
        self.full_search_slots = int(full_search_slots)
        self.tree_learner = tree_learner
        self.name = f"distributed({local.name}, {tree_learner})"
        self.n_features = local.n_features
        self.total_bins = local.total_bins
        self.row_rounding = local.row_rounding
        self.traffic = {"histograms": 0, "splits": 0, "counts": 0}
        self.wait_seconds = 0.0
        self.calls = 0  # collectives (each a meeting of the ranks, or two: docs/distributed.md)
        self._bounds: np.ndarray | None = None  # (K, 2) of this round's gradients, reduced
        offsets = np.asarray(local.bin_offsets, np.int64)
        self.bin_offsets = offsets
        blocks = feature_blocks(offsets, comm.world_size)
        self._blocks = blocks
        # this worker's features and histogram slots (reduce_scatter)
        self._own = np.zeros(self.n_features, bool)
        self._own[blocks[comm.rank]:blocks[comm.rank + 1]] = True
        self._slots = [(int(offsets[blocks[r]]), int(offsets[blocks[r + 1]]))
                       for r in range(comm.world_size)]
        self._owner = np.repeat(np.arange(comm.world_size), np.diff(blocks))
        # the histogram slots of the workers' blocks, for `Communicator.reduce_blocks`
        self._slot_bounds = [lo for lo, _ in self._slots] + [self.total_bins]
        self._first_slots = (int(offsets[0]), int(offsets[1]))  # feature 0: node totals
        # nodes of this tree whose histograms are global in this worker's block and feature
        # 0's slots only (reduce_blocks; the rest is never read)
        self._partial: set[int] = set()
        # a sparse local backend (compact histograms of live features): one layout everywhere
        self._compact = hasattr(local, "compact_histograms")
        if self._compact:
            varying = np.ascontiguousarray(local.varying_features(), np.uint8)
            comm.allreduce(varying, op="max", inplace=True, check_metadata=True)
            local.set_root_features(varying.astype(bool))
            if tree_learner == "reduce_scatter":
                local.prune_live = False
        # the metadata check of the first collective of each tree (see begin_tree): none
        # over shared memory, where every step compares the ranks' call numbers and sizes
        self._tree_check: bool | str = "trust" if comm.shares_memory else True
        self._check: bool | str = self._tree_check  # the next collective's check
        self._last_checked = False  # whether the last collective ran the metadata check
        # the rows of all workers (a tree on all rows needs no count reduction); None: the
        # first such tree reduces it
        self._total_rows = total_rows
        # "data" on CPU ranks that share memory: each searches its feature block too (an
        # allgather of a few records costs less than the search of the other blocks); not on
        # compact sparse histograms, whose search of a node converts and scans all its live
        # slots whatever the block (the per-node cost stays, the allgather would be added)
        self.divide_search = tree_learner == "reduce_scatter" or (
            divide_search if divide_search is not None
            else comm.world_size > 1 and comm.shares_memory and not self._compact
            and getattr(local, "name", "") == "cpu")

    def _collective(self, call: Callable[..., Any], *args: Any, exact: bool = True,
                    **kwargs: Any) -> Any:
        """call(*args, **kwargs) with this tree's metadata check, timed. exact: the result
        does not depend on the reduction order (integer sums, max, data movement), so the
        engine's own collective (Gloo, NCCL) may run it where the communicator says that is
        faster for small buffers (over TCP one message costs about a whole native
        collective; over shared memory histboost's algorithms win). Float sums keep
        histboost's algorithms, which promise every rank the same bits."""
        if exact and self.comm.prefers_native(args[0]):
            kwargs["algorithm"] = "native"
        start = time.perf_counter()
        self.calls += 1
        check, self._check = self._check, "trust"  # one checked call, then the tree's own
        self._last_checked = check is True
        try:
            return call(*args, check_metadata=check, **kwargs)
        finally:
            self.wait_seconds += time.perf_counter() - start

    def _reduce(self, x: Any, kind: str, op: Any = "sum", counts: Any = None) -> Any:
        """x reduced in place (op) and returned; counts (int64 (k, 2) numpy, when given)
        summed in the same call, as the tail of x's dtype and device, and written back."""
        self.traffic[kind] += _nbytes(x)
        if counts is None:
            return self._collective(self.comm.allreduce, x, op=op, inplace=True,
                                    exact=op != "sum" or not _is_float(x))
        tail = (counts.astype(x.dtype) if isinstance(x, np.ndarray)  # float64: exact ints
                else x.new_tensor(counts))
        self.traffic["counts"] += _nbytes(tail)
        self._collective(self.comm.allreduce, x, op=op, inplace=True, tail=tail,
                         exact=not _is_float(x))
        counts[...] = tail if isinstance(tail, np.ndarray) else tail.cpu().numpy()
        return x

    @property
    def n_rows(self) -> int:
        """This worker's rows (margins and gradients are per local row)."""
        return self.local.n_rows

    def synchronize(self) -> None:
        self.local.synchronize()

    def release(self) -> None:
        self.local.release()

    # -- margins and gradients: local rows only ------------------------------------------
    def set_margin(self, margin: np.ndarray) -> None:
        """margin: float64 (n_rows, K), this worker's rows."""
        self.local.set_margin(margin)

    def margin(self) -> np.ndarray:
        """float64 (n_rows, K): this worker's rows."""
        return self.local.margin()

    def compute_gradients(self, loss: str) -> None:
        self._bounds = None
        self.local.compute_gradients(loss)

    def set_gradients(self, pairs: np.ndarray) -> None:
        """pairs: float32 (K, n_rows, 2), this worker's rows."""
        self._bounds = None
        self.local.set_gradients(pairs)

    def gradients(self, output: int) -> np.ndarray:
        """float32 (n_rows, 2): this worker's rows."""
        return self.local.gradients(output)

    def gradient_bounds(self, output: int) -> tuple[float, float]:
        """(max |g|, max |h|) over all workers' rows: every worker must quantise with the
        same scales. The first call after new gradients reduces the bounds of every output
        (one collective a round, not one a tree of a multiclass round)."""
        if self._bounds is None:
            outputs = range(getattr(self.local, "n_outputs", 1))
            bounds = np.array([self.local.gradient_bounds(k) for k in outputs], np.float64)
            self._check = self._tree_check  # a call between trees: checked (see begin_tree)
            self._reduce(bounds, "counts", "max")
            self._bounds = bounds
        return float(self._bounds[output, 0]), float(self._bounds[output, 1])

    # -- one tree ------------------------------------------------------------------------
    def begin_tree(self, output: int, rows: np.ndarray | None,
                   quantisation: Quantisation | None) -> int:
        """rows: int32 sorted local row indices (None: all local rows). Returns the root's
        row count over all workers: reduced for a sample of rows, else the rows of all
        workers (reduced once)."""
        self._partial.clear()
        bounds = None
        if quantisation is None and self.row_rounding > 0:
            # fixed-point float sums (the GPU's): every worker scales by the global bounds
            bounds = self.gradient_bounds(output)
        # once per tree, a collective checks that the ranks agree on shapes and dtypes (a rank
        # out of step fails there, naming itself): the tree's first, unless the last one
        # (gradient_bounds, just before) was checked; the tree's own calls, many and small,
        # skip that extra round trip (the whole cost of a small reduction): their shapes
        # follow from the agreed job and from counts every rank reduced
        if not self._last_checked:
            self._check = self._tree_check
        count = np.array([self.local.begin_tree(output, rows, quantisation, bounds)], np.int64)
        if self._compact:
            # the sparse layout's pruning rule from all rows' hessians, with the root count
            # (float64: exact below 2**53 rows)
            stats = np.concatenate([count.astype(np.float64),
                                    self.local.pruning_stats(output)])
            self._reduce(stats, "counts")
            self.local.set_pruning(stats[1:])
            return int(stats[0])
        if rows is None and self._total_rows is not None:
            return self._total_rows
        self._reduce(count, "counts")
        if rows is None:
            self._total_rows = int(count[0])
        return int(count[0])

    def build_histograms(self, nodes: list[int]) -> Any:
        """Builds the local histograms of `nodes` and reduces the returned buffer,
        (k, total_bins, channels), across workers in place: all of it ("data") or this
        worker's feature block ("reduce_scatter"; the rest stays local and is never read).
        The local backend stores that buffer, so its histograms of `nodes` become global
        before any subtraction (a subtracted sibling is then global too). Returns the
        buffer."""
        return self._reduce_built(self.local.build_histograms(nodes), nodes)

    def _reduce_built(self, buf: Any, nodes: list[int], counts: np.ndarray | None = None,
                      blocks: bool = False) -> Any:
        """`build_histograms`'s reduction of the local buffer buf (of `nodes`; None from a
        sparse backend: its compact histograms); counts (int64 (k, 2) child row counts, when
        given) summed in place in the same collective. blocks: with "data", reduce only each
        worker's block and feature 0's slots (the nodes' search is divided, `_divided`):
        "reduce_scatter" always does; the nodes' histograms are then partial."""
        if self._compact:
            self._reduce_compact(nodes, counts)
            return buf
        if self.tree_learner == "data" and not blocks:
            return self._reduce(buf, "histograms", counts=counts)
        self._reduce_blocks(buf, counts)
        self._partial.update(nodes)
        return buf

    def _divided(self, nodes: list[int]) -> bool:
        """Whether the search of `nodes` is divided into the workers' feature blocks: always
        with "reduce_scatter"; with "data" when `divide_search` and the nodes hold more than
        `FULL_SEARCH_SLOTS` histogram slots or some hold partial histograms (the same answer
        on every worker: it follows the nodes and the calls)."""
        if self.tree_learner == "reduce_scatter":
            return True
        return self.divide_search and (len(nodes) * self.total_bins > self.full_search_slots
                                       or any(i in self._partial for i in nodes))

    def split_and_build(self, parents: list[int], lefts: list[int], rights: list[int],
                        records: np.ndarray, child_sums: np.ndarray,
                        timer: PhaseTimer | None = None, blocks: bool = False) -> np.ndarray:
        """`Backend.split_and_build` with one reduction: the children's row counts travel
        with the built histograms. Of each pair the child with the smaller hessian sum
        (child_sums, which every worker has from the records; ties: the left one) is built,
        the other subtracted, where one process builds the child with fewer rows: the
        global counts are not known before that reduction. The sums and so the quantised
        model are the same. blocks: with "data", reduce each worker's block only (the
        children's search is divided; `_reduce_built`); also where a parent is partial."""
        with phase(timer, "partition"):
            counts = np.array(self.local.apply_splits(parents, lefts, rights, records),
                              np.int64)
        hessians = child_sums[:, 1].reshape(-1, 2)
        left_small = (hessians[:, 0] <= hessians[:, 1]).tolist()
        small = [lc if s else rc for lc, rc, s in zip(lefts, rights, left_small, strict=True)]
        large = [rc if s else lc for lc, rc, s in zip(lefts, rights, left_small, strict=True)]
        with phase(timer, "histogram"):
            blocks = not self._compact and (blocks or any(i in self._partial for i in parents))
            self._reduce_built(self.local.build_histograms(small), small, counts, blocks)
            self.subtract_histograms(parents, small, large)
        return counts

    def split_and_search(self, parents: list[int], lefts: list[int], rights: list[int],
                         records: np.ndarray, child_sums: np.ndarray,
                         feature_masks: np.ndarray, reg: np.ndarray,
                         monotone: tuple | None = None, timer: PhaseTimer | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
        """`Backend.split_and_search`: `split_and_build` (one reduction for the step), then
        the children's search (divided or whole: `_divided`, decided before the build)."""
        children = [i for pair in zip(lefts, rights, strict=True) for i in pair]
        counts = self.split_and_build(parents, lefts, rights, records, child_sums, timer,
                                      blocks=self._divided(children))
        with phase(timer, "split"):
            totals = np.column_stack([child_sums, counts.reshape(-1).astype(np.float64)])
            kw = {} if monotone is None else {"monotone": monotone}
            return counts, self.find_best_splits(children, totals, feature_masks, reg, **kw)

    def _reduce_blocks(self, buf: Any, counts: np.ndarray | None = None) -> None:
        """buf (k, total_bins, C) or packed (k, total_bins), numpy or torch: this worker's
        slots become the sums over all workers, and so do feature 0's slots on every worker
        (the local backend's node totals, summed over feature 0's slots, which hold every row
        once, are then global and the same on every worker) and counts (int64 (k, 2), when
        given: written back), in one `Communicator.reduce_blocks`."""
        tail = None
        if counts is not None:
            tail = (counts.astype(buf.dtype) if isinstance(buf, np.ndarray)
                    else buf.new_tensor(counts))
            self.traffic["counts"] += _nbytes(tail)
        lo, hi = self._slots[self.comm.rank]
        f_lo, f_hi = self._first_slots
        others = (self.total_bins - (hi - lo) + f_hi - f_lo) / max(self.total_bins, 1)
        self.traffic["histograms"] += int(_nbytes(buf) * others)
        self._collective(self.comm.reduce_blocks, buf, self._slot_bounds, "sum",
                         common=self._first_slots, tail=tail, exact=not _is_float(buf))
        if counts is not None:
            counts[...] = tail if isinstance(tail, np.ndarray) else tail.cpu().numpy()

    def _reduce_compact(self, nodes: list[int], counts: np.ndarray | None) -> None:
        """The sparse backend's compact histograms of `nodes` summed across workers in place
        (all of them, or with "reduce_scatter" this worker's block of features and feature
        0's slots), through one buffer of their slots; counts as in `_reduce_built`."""
        parts = self.local.compact_histograms(nodes)
        arrays = [a.reshape(a.shape[0], -1) for a, _, _ in parts]
        flat = np.concatenate(arrays)
        if self.tree_learner == "data":
            self._reduce(flat, "histograms", counts=counts)
        else:
            self._reduce_scatter_compact(flat, parts, counts)
        at = 0
        for (a, _, _), part in zip(parts, arrays, strict=True):
            a[...] = flat[at:at + part.shape[0]].reshape(a.shape)
            at += part.shape[0]

    def _reduce_scatter_compact(self, flat: np.ndarray, parts: list[tuple],
                                counts: np.ndarray | None) -> None:
        """`_reduce_blocks` on compact histograms: flat (slots, C) holds the nodes'
        compact slots one node after another; worker r's block is, in every node, the compact
        slots of its features (``blocks[r]:blocks[r+1]``, a contiguous run since the live
        features ascend). Each worker's block travels padded to the widest, followed by
        feature 0's slots of every node and the counts: one reduce-scatter."""
        world, rank = self.comm.world_size, self.comm.rank
        c = flat.shape[1]
        mine: list[list[np.ndarray]] = [[] for _ in range(world)]
        first: list[np.ndarray] = []
        at = 0
        for a, features, ptr in parts:
            bounds = ptr[np.searchsorted(features, self._blocks)] + at
            for r in range(world):
                mine[r].append(np.arange(bounds[r], bounds[r + 1]))
            first.append(np.arange(at, at + ptr[1]))
            at += a.shape[0]
        blocks = [np.concatenate(ix) for ix in mine]
        f0 = np.concatenate(first)
        widest = max(ix.size for ix in blocks)
        k = len(parts)
        count_rows = 0 if counts is None else (2 * k if c == 1 else k)
        rows = widest + f0.size + count_rows
        send = np.zeros((world, rows, c), flat.dtype)
        for r, ix in enumerate(blocks):
            send[r, :ix.size] = flat[ix]
        send[:, widest:widest + f0.size] = flat[f0]
        if counts is not None:
            send[:, rows - count_rows:, :2] = counts.reshape(-1, 1) if c == 1 else counts
        self.traffic["histograms"] += _nbytes(send)
        got = self._collective(self.comm.reduce_scatter, send, op="sum",
                               exact=not _is_float(send))[0]
        own = blocks[rank]
        flat[own] = got[:own.size]
        flat[f0] = got[widest:widest + f0.size]
        if counts is not None:
            counts[...] = got[rows - count_rows:, :2].reshape(k, 2)

    def _agree_live(self, nodes: list[int], totals: np.ndarray, reg: np.ndarray) -> None:
        """"reduce_scatter" on a sparse backend: the live features of each searched node
        (its children's layout) agreed by all workers. Each decides for the features of its
        block, whose sums it holds globally (a byte per live feature; max-allreduced), and
        every worker compacts the node's histogram to them, as one process would."""
        flags = self.local.live_flags(nodes, np.ascontiguousarray(totals, np.float64), reg)
        parts = self.local.compact_histograms(nodes)
        agreed = np.concatenate([f & self._own[features]
                                 for f, (_, features, _) in zip(flags, parts, strict=True)]
                                ).astype(np.uint8)
        self.traffic["splits"] += agreed.nbytes
        self._collective(self.comm.allreduce, agreed, op="max", inplace=True)
        at = 0
        for node, f in zip(nodes, flags, strict=True):
            keep = agreed[at:at + f.size].astype(bool)
            keep[0] = True  # feature 0 carries the node total
            at += f.size
            self.local.restrict_live(node, keep)

    def subtract_histograms(self, parents: list[int], built: list[int],
                            targets: list[int]) -> None:
        # global parent - global built child: the global sibling, without communication
        # (partial, global in this worker's block, if either is)
        self.local.subtract_histograms(parents, built, targets)
        partial = self._partial
        if partial:
            partial.update(t for p, b, t in zip(parents, built, targets, strict=True)
                           if p in partial or b in partial)

    def read_histograms(self, nodes: list[int]) -> np.ndarray:
        """As the local backend's; with "reduce_scatter", and for partial nodes with "data",
        only this worker's feature block and feature 0's slots hold global sums (the other
        slots hold partial sums)."""
        return self.local.read_histograms(nodes)

    def histogram_totals(self, nodes: list[int]) -> np.ndarray:
        return self.local.histogram_totals(nodes)

    def find_best_splits(self, nodes: list[int], totals: np.ndarray, feature_masks: np.ndarray,
                         reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        # monotone: every worker holds the same bounds (they follow the reduced sums)
        kw = {} if monotone is None else {"monotone": monotone}
        if self._compact and self.tree_learner == "reduce_scatter":
            self._agree_live(nodes, totals, reg)
        if not self._divided(nodes):
            return self.local.find_best_splits(nodes, totals, feature_masks, reg, **kw)
        recs = np.ascontiguousarray(
            self.local.find_best_splits(nodes, totals, feature_masks & self._own, reg, **kw),
            np.float64)
        self.traffic["splits"] += recs.nbytes
        # every worker's records, then the same vectorised choice on every worker
        return best_records(np.asarray(self._collective(self.comm.allgather, recs[None])))

    def oblivious_gains(self, nodes: list[int], totals: np.ndarray, feature_mask: np.ndarray,
                        reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        kw = {} if monotone is None else {"monotone": monotone}
        if not self.divide_search:
            return self.local.oblivious_gains(nodes, totals, feature_mask, reg, **kw)
        table = self.local.oblivious_gains(nodes, totals, feature_mask & self._own, reg, **kw)
        return self._reduce(np.ascontiguousarray(table, np.float64), "splits", "max")

    def evaluate_split(self, nodes: list[int], feature: int, split_bin: int,
                       default_left: bool) -> np.ndarray:
        if self.tree_learner == "data":
            return self.local.evaluate_split(nodes, feature, split_bin, default_left)
        owner = int(self._owner[feature])
        if owner == self.comm.rank:
            left = np.ascontiguousarray(
                self.local.evaluate_split(nodes, feature, split_bin, default_left), np.float64)
        else:
            left = np.zeros((len(nodes), 2), np.float64)
        self.traffic["splits"] += left.nbytes
        return self._collective(self.comm.broadcast, left, root=owner, inplace=True)

    def apply_splits(self, parents: list[int], lefts: list[int], rights: list[int],
                     records: np.ndarray) -> np.ndarray:
        """Partitions the local rows; returns int64 (k, 2) child row counts over all
        workers (the grower builds the smaller child: every worker must pick the same)."""
        counts = np.ascontiguousarray(
            self.local.apply_splits(parents, lefts, rights, records), np.int64)
        return self._reduce(counts, "counts")

    def replace_columns(self, features: np.ndarray, bins: np.ndarray,
                        combine: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        """The local rows' bins of columns `features` replaced (categorical statistics: the
        columns of all workers are computed together, `histboost.distributed.categorical`).
        The local backend rebuilds the columns' histograms of the nodes it holds from its
        rows; they are summed across workers before they are stored (`combine`), so the
        held histograms stay global. Every worker holds the same nodes (the tree's)."""

        def summed(hists: np.ndarray) -> np.ndarray:
            self.traffic["histograms"] += int(hists.nbytes)
            start = time.perf_counter()
            try:
                # checked: a worker holding other nodes fails here instead of hanging
                return self.comm.allreduce(hists, op="sum", check_metadata=True)
            finally:
                self.wait_seconds += time.perf_counter() - start

        self.local.replace_columns(features, bins, combine=summed)

    def update_margin(self, tree: Tree, leaves: list[int], values: np.ndarray,
                      output: int) -> None:
        # the local leaves' row ranges hold this worker's rows: its margins only
        self.local.update_margin(tree, leaves, values, output)
