"""`DistributedBackend`: data-parallel tree learning through the backend seam.

Each worker wraps the backend of its own rows. The wrapper reduces across workers exactly at
the points `histboost.kernels.backend` marks "reduce" and delegates everything else:

- ``gradient_bounds``: max, so every worker derives the same `Quantisation`;
- ``begin_tree``: the root's row count, summed;
- ``build_histograms``: the buffer of the new histograms, summed in place, so the local
  backend's stored histograms become the global ones before any subtraction;
- ``apply_splits``: the children's row counts, summed (the local backend keeps its own row
  ranges; only the grower sees the global counts, and picks the same child to build).

Histogram totals, split search, oblivious gain tables and ``evaluate_split`` read only the
reduced histograms, so they return the same values on every worker, and every worker grows
the same tree. Margins and gradient pairs stay local: each worker updates its rows' margins.

Quantised histograms are int64 sums, exact in any order: a tree grown on N workers equals
the tree of one process on all rows, provided each row is rounded at its global index (the
CPU backend's ``row_ids``) and the local backends keep one histogram layout (``pack=False``:
the packed layout depends on local totals, and packed sums could overflow once added up).
Float histograms are float64 sums reduced in a fixed order: reproducible for a given worker
count, but not bit-identical to one process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..collective.base import Communicator
    from ..kernels.backend import Backend
    from ..tree.quantize import Quantisation
    from ..tree.tree import Tree


class DistributedBackend:
    """A `Backend` over this worker's rows that agrees with the other workers of `comm`.

    local: the backend of this worker's rows (a CPU backend should be built with
    ``pack=False`` and, for quantised trees matching one process, ``row_ids``); comm: a
    `histboost.collective.Communicator`, the same group on every worker. Every worker must
    make the same sequence of calls (the grower does: its choices follow reduced values).
    """

    def __init__(self, local: Backend, comm: Communicator) -> None:
        if getattr(local, "pack", False):
            # packed histograms: one int64 per slot when the *local* totals fit; workers could
            # disagree on the layout, and the packed sums overflow once added up
            raise ValueError("the local CPU backend of a DistributedBackend needs pack=False")
        self.local = local
        self.comm = comm
        self.name = f"distributed({local.name})"
        self.n_features = local.n_features
        self.total_bins = local.total_bins
        self.row_rounding = local.row_rounding

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
        self.local.compute_gradients(loss)

    def set_gradients(self, pairs: np.ndarray) -> None:
        """pairs: float32 (K, n_rows, 2), this worker's rows."""
        self.local.set_gradients(pairs)

    def gradients(self, output: int) -> np.ndarray:
        """float32 (n_rows, 2): this worker's rows."""
        return self.local.gradients(output)

    def gradient_bounds(self, output: int) -> tuple[float, float]:
        """(max |g|, max |h|) over all workers' rows: every worker must quantise with the
        same scales."""
        bounds = np.array(self.local.gradient_bounds(output), np.float64)
        self.comm.allreduce(bounds, op="max", inplace=True)
        return float(bounds[0]), float(bounds[1])

    # -- one tree ------------------------------------------------------------------------
    def begin_tree(self, output: int, rows: np.ndarray | None,
                   quantisation: Quantisation | None) -> int:
        """rows: int32 sorted local row indices (None: all local rows). Returns the root's
        row count over all workers."""
        count = np.array([self.local.begin_tree(output, rows, quantisation)], np.int64)
        self.comm.allreduce(count, op="sum", inplace=True)
        return int(count[0])

    def build_histograms(self, nodes: list[int]) -> Any:
        """Builds the local histograms of `nodes` and sums the returned buffer,
        (k, total_bins, channels), across workers in place: the local backend stores that
        buffer, so its histograms of `nodes` become the global ones before any subtraction
        (a subtracted sibling is then global too). Returns the buffer."""
        buf = self.local.build_histograms(nodes)
        self.comm.allreduce(buf, op="sum", inplace=True)
        return buf

    def subtract_histograms(self, parents: list[int], built: list[int],
                            targets: list[int]) -> None:
        # global parent - global built child: the global sibling, without communication
        self.local.subtract_histograms(parents, built, targets)

    def read_histograms(self, nodes: list[int]) -> np.ndarray:
        return self.local.read_histograms(nodes)

    def histogram_totals(self, nodes: list[int]) -> np.ndarray:
        return self.local.histogram_totals(nodes)

    def find_best_splits(self, nodes: list[int], totals: np.ndarray, feature_masks: np.ndarray,
                         reg: np.ndarray) -> np.ndarray:
        return self.local.find_best_splits(nodes, totals, feature_masks, reg)

    def oblivious_gains(self, nodes: list[int], totals: np.ndarray, feature_mask: np.ndarray,
                        reg: np.ndarray) -> np.ndarray:
        return self.local.oblivious_gains(nodes, totals, feature_mask, reg)

    def evaluate_split(self, nodes: list[int], feature: int, split_bin: int,
                       default_left: bool) -> np.ndarray:
        return self.local.evaluate_split(nodes, feature, split_bin, default_left)

    def apply_splits(self, parents: list[int], lefts: list[int], rights: list[int],
                     records: np.ndarray) -> np.ndarray:
        """Partitions the local rows; returns int64 (k, 2) child row counts over all
        workers (the grower builds the smaller child: every worker must pick the same)."""
        counts = np.ascontiguousarray(
            self.local.apply_splits(parents, lefts, rights, records), np.int64)
        self.comm.allreduce(counts, op="sum", inplace=True)
        return counts

    def update_margin(self, tree: Tree, leaves: list[int], values: np.ndarray,
                      output: int) -> None:
        # the local leaves' row ranges hold this worker's rows: its margins only
        self.local.update_margin(tree, leaves, values, output)
