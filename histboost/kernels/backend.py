"""The kernel interface the boosting loop and the tree growers are written against.

A backend owns everything that is as large as the data: the binned training matrix, labels and
weights, the training margins, the gradient pairs of the round (and their quantisation), the
row partition of the tree being grown (each node's rows are a contiguous range of a row-index
array), and the histograms of its nodes. The grower (`histboost.tree.grower`) holds only small
host-side records: node ids, node totals, split records and the tree it writes. It names nodes
by id and never reads a histogram, a row index or a margin.

Implementations: `histboost.kernels.cpu.backend.CPUBackend` (NumPy arrays, Numba kernels),
`histboost.kernels.cuda.backend.CUDABackend` (device arrays, Numba-CUDA kernels). A distributed
wrapper reduces across workers what the methods below return, at the points marked "reduce":
the quantisation bounds (max), the root row count and every histogram that was built from rows
(sum, before any subtraction), and the child row counts (sum). Everything else is computed
from reduced quantities, so every worker makes the same choices (`histboost.distributed`;
its local CPU backends keep one histogram layout, ``pack=False``, and round each row's
quantised pair at its global index, ``row_ids``).

Conventions
-----------
- Node ids are small non-negative ints chosen by the grower; the root is node 0.
- Totals are float64 (3,) or (k, 3): gradient sum G, hessian sum H, row count C.
- Split records are float64 (k, REC_WIDTH) rows (layout in `histboost.tree.split`).
- ``reg`` is the float64 (5,) regularisation vector of `histboost.tree.split`.
- Quantised trees: gradient pairs are stochastically rounded to integers
  (`histboost.tree.quantize`); histogram sums are then exact integers and every float result
  (totals, records, gains) is the integer sum times a power-of-two scale, the same on any
  backend, thread count or worker count.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from ..timer import PhaseTimer
    from ..tree.quantize import Quantisation
    from ..tree.tree import Tree


class Backend(Protocol):
    name: str
    n_rows: int
    n_features: int
    total_bins: int
    # host int64 (F+1,): feature f owns histogram slots bin_offsets[f]:bin_offsets[f+1]
    bin_offsets: np.ndarray
    # float trees: the largest error a row's gradient pair may get before it is summed,
    # relative to the tree's largest |g| (or |h|); 0 when pairs are summed as they are
    row_rounding: float

    def synchronize(self) -> None:
        """Wait for the device work launched so far (phase timers of verbose training)."""

    def release(self) -> None:
        """Free the memory the backend holds (device memory goes back to the driver); the
        backend is unusable afterwards. `train()` calls it before returning."""

    # -- margins and gradients (one boosting round) --------------------------------------
    def set_margin(self, margin: np.ndarray) -> None:
        """Take the training margins, float64 (n_rows, K), before the first round."""

    def margin(self) -> np.ndarray:
        """The training margins as a host float64 (n_rows, K) array (a copy on a device)."""

    def compute_gradients(self, loss: str) -> None:
        """Gradient pairs of every output from the margins, labels and weights with the fused
        kernel of built-in `loss` (an `Objective.loss` name)."""

    def set_gradients(self, pairs: np.ndarray) -> None:
        """Take host gradient pairs, float32 (K, n_rows, 2) (custom objectives)."""

    def gradients(self, output: int) -> np.ndarray:
        """Host copy of the float32 (n_rows, 2) gradient pairs of `output` (for checks)."""

    def gradient_bounds(self, output: int) -> tuple[float, float]:
        """(max |g|, max |h|) of output `output` over all rows (a bound for any sample of
        them). Reduce: max."""

    # -- one tree ------------------------------------------------------------------------
    def begin_tree(self, output: int, rows: np.ndarray | None,
                   quantisation: Quantisation | None,
                   bounds: tuple[float, float] | None = None) -> int:
        """Start a tree on the gradients of `output`: rows int32 sorted (None: all rows), all
        in the root (node 0); quantise the pairs if asked. Drops every histogram of the last
        tree. Returns the root's row count. Reduce: sum. bounds: (max |g|, max |h|) over all
        workers, passed by a distributed wrapper to a backend that sums float trees in fixed
        point (``row_rounding > 0``), so that every worker's sums share one scale (None:
        this backend's own `gradient_bounds`); a backend summing floats ignores it."""

    def build_histograms(self, nodes: list[int]) -> Any:
        """Histograms of `nodes` summed over their rows. Returns the backend's buffer of the
        new histograms, (k, total_bins, channels) on the backend's device, for a distributed
        wrapper to reduce in place (sum); the grower never reads it."""

    def subtract_histograms(self, parents: list[int], built: list[int],
                            targets: list[int]) -> None:
        """hist[targets[j]] = hist[parents[j]] - hist[built[j]] (the sibling of a built
        child); the parents' histograms are released."""

    def read_histograms(self, nodes: list[int]) -> np.ndarray:
        """Host float64 (k, total_bins, channels) histograms of `nodes` in gradient units
        (channels: G, H, and the row count when histograms count rows). For checks."""

    def plan_levels(self, levels: int, feature_mask: np.ndarray, reg: np.ndarray,
                    search_last: bool, learning_rate: float | None = None,
                    best_first: tuple[int, int, int] | None = None) -> bool:
        """A hint, given after the root's `build_histograms([0])`: the tree's first `levels`
        steps split, level by level, every node of the level whose best gain exceeds
        `MIN_SPLIT_GAIN` (in any order within a level), their children searched (those of the
        last level only with `search_last`), every search with the bool (n_features,)
        `feature_mask` and `reg`, without monotone constraints. A backend may then grow these
        levels ahead (a device without waiting for the host between levels) and answer the
        grower's calls for them (`histogram_totals([0])`, `find_best_splits` of the root,
        `split_and_search`, `apply_splits`) from that, checking them; after the last one it
        holds the searched children's histograms as `split_and_search` leaves them.
        best_first (with search_last): (max_leaves, max_depth, batch): after these levels
        the tree grows best-first as `TreeGrower._grow_lossguide` grows it with that leaf
        budget, depth limit (0: none) and batch, with the same masks and `reg`; a backend may
        plan those steps too and answer the grower's `split_and_search` / `apply_splits` of
        them, checking them, and hand any step it did not plan back to its own host-planned
        code. learning_rate (with search_last False, or with best_first): these levels (and
        those best-first steps) are the whole tree, whose leaf values are likely
        leaf_weight(G, H, reg) * learning_rate of its leaves (best-first: of the committed
        splits' leaves); a backend may then start the margin update before `update_margin`,
        which must still give the margins of the leaves and values it is passed. Returns
        whether it plans; `ComposedSteps` declines."""

    def next_round(self, quantise: Callable[[float, float], Quantisation | None] | None
                   ) -> None:
        """A hint before a round's trees (`train`'s loop): the next round grows one tree, of
        output 0 over all rows, from the gradients of the same loss on the margins this
        round leaves, quantised by ``quantise(max |g|, max |h|)`` of those gradients (its
        result; None: float pairs); None: no next round, or one that cannot be foretold. A
        device backend may then launch the next tree behind this round's (its gradients,
        rounding, root histogram, planned levels and best-first steps, when this round's
        tree is planned whole on the device) while the host replays this one, and take that
        work when the next round's calls are the ones foretold (a learning rate changed in
        between, margins not kept, a stop: it is dropped, and the calls are made as usual).
        `ComposedSteps` ignores it."""

    def histogram_totals(self, nodes: list[int]) -> np.ndarray:
        """float64 (k, 2): (G, H) of each node summed from its histogram (over the first
        feature's slots, which hold every row once), so they match the histogram exactly."""

    def find_best_splits(self, nodes: list[int], totals: np.ndarray, feature_masks: np.ndarray,
                         reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        """Best split record of each node (feature -1: none with a positive gain).
        totals (k, 3); feature_masks bool (k, n_features). Ties go to the lowest feature, then
        the lowest bin, then missing-right. monotone (None: unconstrained): (constraint int8
        (n_features,) +1/-1/0, lower float64 (k,), upper float64 (k,)): the nodes' bounds on
        their unscaled weights; weights are clipped to them, gains use the clipped weights,
        and a split on a constrained feature must order its children's weights (XGBoost's
        rule)."""

    def oblivious_gains(self, nodes: list[int], totals: np.ndarray, feature_mask: np.ndarray,
                        reg: np.ndarray, monotone: tuple | None = None) -> np.ndarray:
        """float64 (total_bins, 2): the gain of every shared split candidate (slot
        offsets[f] + b, missing right 0 / left 1) summed over `nodes`; -inf where it is a
        split of none of them. monotone: as in `find_best_splits`; a candidate on a
        constrained feature must order the clipped weights of its children in every node
        (-inf otherwise)."""

    def evaluate_split(self, nodes: list[int], feature: int, split_bin: int,
                       default_left: bool) -> np.ndarray:
        """Left-child sums float64 (k, 2) (G, H) of one split applied to each of `nodes`."""

    def apply_splits(self, parents: list[int], lefts: list[int], rights: list[int],
                     records: np.ndarray) -> np.ndarray:
        """Partition the rows of each parent by its record (bin <= REC_BIN goes left, the
        missing slot to REC_DEFAULT_LEFT) into nodes lefts[j], rights[j]. Returns int64 (k, 2)
        row counts of the children. Reduce: sum."""

    def split_and_build(self, parents: list[int], lefts: list[int], rights: list[int],
                        records: np.ndarray, child_sums: np.ndarray,
                        timer: PhaseTimer | None = None) -> np.ndarray:
        """`apply_splits`, then the children's histograms (`child_histograms`): a step whose
        children are searched otherwise (oblivious levels). child_sums: float64 (2k, 2)
        (G, H) of the children in the order lefts[0], rights[0], ...: a backend may choose
        the child to build by them before the counts are known (the distributed wrapper
        does, so the counts travel with the histograms). Returns the counts int64 (k, 2).
        timer: charged the partition and histogram phases."""

    def split_and_search(self, parents: list[int], lefts: list[int], rights: list[int],
                         records: np.ndarray, child_sums: np.ndarray,
                         feature_masks: np.ndarray, reg: np.ndarray,
                         monotone: tuple | None = None, timer: PhaseTimer | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
        """One step of a tree: `apply_splits`, the children's histograms (`child_histograms`),
        then `find_best_splits` of the children in the order lefts[0], rights[0], lefts[1],
        ... with totals (child_sums float64 (2k, 2) (G, H), their row counts); feature_masks
        (2k, n_features) and monotone as there. Returns (counts int64 (k, 2), records (2k,
        REC_WIDTH)), what those calls return. `ComposedSteps` makes these calls; a device
        backend runs them as one step (one upload, one read). timer: charged the step's
        partition, histogram and split phases."""

    def update_margin(self, tree: Tree, leaves: list[int], values: np.ndarray,
                      output: int) -> None:
        """margin[:, output] += the tree's leaf value for every training row: from the leaf
        nodes' rows (`leaves`, `values` float64) when the tree used all rows, by traversing
        `tree` over the binned matrix otherwise."""

    def replace_columns(self, features: np.ndarray, bins: np.ndarray,
                        combine: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        """Replace the bins of columns `features` (int64 (k,)) by bins (n_rows, k) of the
        matrix's dtype, in the same slot layout (categorical target statistics change with
        the permutation of each tree, and feature combinations appear while a tree grows).
        Histograms the backend holds for nodes of the tree being grown are rebuilt for these
        columns from the nodes' rows (a column added mid-tree has no parent histogram to
        subtract from), so later subtractions stay exact. The CUDA backend also takes bins as
        a device tensor (statistics computed on the device). combine: when given and nodes
        are held, called with the rebuilt histograms of those columns' slots, a C-contiguous
        array (held nodes, the columns' slots, channels) of the histogram dtype, in node
        order; its result is stored instead (the distributed wrapper sums it across
        workers)."""


def child_histograms(backend: Backend, parents: list[int], lefts: list[int],
                     rights: list[int], counts: np.ndarray) -> None:
    """The histograms of the children of `parents`: of each pair, the child with fewer rows
    (ties: the left one) built from its rows, the other by subtraction from the parent.
    counts: int64 (k, 2), the children's row counts (reduced across workers: every worker
    builds the same child)."""
    left_small = (counts[:, 0] <= counts[:, 1]).tolist()  # Python bools: cheaper to zip
    small = [lc if s else rc for lc, rc, s in zip(lefts, rights, left_small, strict=True)]
    large = [rc if s else lc for lc, rc, s in zip(lefts, rights, left_small, strict=True)]
    backend.build_histograms(small)
    backend.subtract_histograms(parents, small, large)


def phase(timer: PhaseTimer | None, name: str) -> AbstractContextManager:
    """timer(name), or no timing without a timer."""
    return nullcontext() if timer is None else timer(name)


class ComposedSteps:
    """`Backend.split_and_search` and `split_and_build` made of the backend's own calls
    (backends whose calls cost no transfer, and wrappers that reduce between them)."""

    def plan_levels(self, levels: int, feature_mask: np.ndarray, reg: np.ndarray,
                    search_last: bool, learning_rate: float | None = None,
                    best_first: tuple[int, int, int] | None = None) -> bool:
        return False

    def next_round(self, quantise: Callable[[float, float], Quantisation | None] | None
                   ) -> None:
        pass

    def split_and_build(self, parents: list[int], lefts: list[int], rights: list[int],
                        records: np.ndarray, child_sums: np.ndarray,
                        timer: PhaseTimer | None = None) -> np.ndarray:
        with phase(timer, "partition"):
            counts = self.apply_splits(parents, lefts, rights, records)
        with phase(timer, "histogram"):
            child_histograms(self, parents, lefts, rights, counts)
        return counts

    def split_and_search(self, parents: list[int], lefts: list[int], rights: list[int],
                         records: np.ndarray, child_sums: np.ndarray,
                         feature_masks: np.ndarray, reg: np.ndarray,
                         monotone: tuple | None = None, timer: PhaseTimer | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
        with phase(timer, "partition"):
            counts = self.apply_splits(parents, lefts, rights, records)
        with phase(timer, "histogram"):
            child_histograms(self, parents, lefts, rights, counts)
        with phase(timer, "split"):
            children = [i for pair in zip(lefts, rights, strict=True) for i in pair]
            totals = np.empty((child_sums.shape[0], 3))
            totals[:, :2] = child_sums
            totals[:, 2] = counts.reshape(-1)
            kw = {} if monotone is None else {"monotone": monotone}
            return counts, self.find_best_splits(children, totals, feature_masks, reg, **kw)


def make_backend(device: str, bins: np.ndarray | None, bin_offsets: np.ndarray, *,
                 n_threads: int, label: np.ndarray | None, weight: np.ndarray | None,
                 n_outputs: int, count_rows: bool, raw: np.ndarray | None = None,
                 mapper: Any = None, row_ids: np.ndarray | None = None,
                 pack: bool = True, pack_rows: int = 0) -> Backend:
    """The backend of `device` ('cpu', 'cuda' or 'cuda:N') over the binned training matrix
    bins (n, F) uint8/uint16 (or a sparse Dataset's `SparseBins`: the CPU's
    `SparseCPUBackend`, CUDA's `SparseCUDABackend`) with slot offsets int64 (F+1,). A dense
    CUDA backend may instead take the raw matrix `raw` (n, F) float32/float64 and the
    `BinMapper` of its cuts and bin it on the device; the CPU backend traverses it for the
    margins of rows left out of a tree's sample on small data (see `CPUBackend`). row_ids:
    int64 (n,) global index of each row when the rows are one worker's share (quantised
    rounding draws at global rows); pack=False: CPU histograms keep one layout whatever the
    totals; pack_rows: the rows of all workers, from which CPU backends decide their layout
    alike (a distributed wrapper adds their histograms up). Raises ValueError for an unknown
    device and RuntimeError naming what is missing when CUDA cannot be used."""
    if device == "cpu":
        from .cpu.backend import CPUBackend

        if bins is None:
            raise ValueError("the CPU backend needs the binned matrix")
        if not isinstance(bins, np.ndarray):  # a sparse Dataset's `SparseBins`
            from .cpu.sparse_backend import SparseCPUBackend

            return SparseCPUBackend(bins, n_threads, label=label, weight=weight,
                                    n_outputs=n_outputs, count_rows=count_rows, pack=pack,
                                    row_ids=row_ids, pack_rows=pack_rows)
        return CPUBackend(bins, bin_offsets, n_threads, label=label, weight=weight,
                          n_outputs=n_outputs, count_rows=count_rows, pack=pack,
                          row_ids=row_ids, pack_rows=pack_rows, raw=raw)
    if device == "cuda" or device.startswith("cuda:"):
        from .cuda.backend import CUDABackend

        if bins is not None and not isinstance(bins, np.ndarray):  # a `SparseBins`
            from .cuda.sparse import SparseCUDABackend

            return SparseCUDABackend(bins, device, label=label, weight=weight,
                                     n_outputs=n_outputs, count_rows=count_rows,
                                     row_ids=row_ids)
        return CUDABackend(bins, bin_offsets, device, label=label, weight=weight,
                           n_outputs=n_outputs, count_rows=count_rows, raw=raw, mapper=mapper,
                           row_ids=row_ids)
    raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got {device!r}")
