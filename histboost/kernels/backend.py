"""The kernel interface the tree growers are written against.

A backend owns the binned matrix and the row partition of the tree being grown, and offers the
few data-parallel steps of growing a tree. The CPU backend (`histboost.kernels.cpu.backend`)
works on NumPy arrays with Numba kernels; a CUDA backend implements the same methods on device
arrays, and a distributed wrapper can allreduce what `build_histograms` returns before the
grower searches it. Histograms (layouts in `histboost.kernels.cpu.histogram`) hold gradient
and hessian sums per (feature, bin) slot: float64 (k, total_bins, 2), or exact int64 in
quantised mode, (k, total_bins, 2) or packed (k, total_bins); `to_float` turns any of them into
float64 (k, total_bins, 2) for the split search. Row counts come from the partition. Split
records are float64 (k, REC_WIDTH) rows (see `histboost.kernels.cpu.split`).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Backend(Protocol):
    name: str
    total_bins: int
    hist_dtype: np.dtype

    def begin_tree(self, gh: np.ndarray, rows: np.ndarray) -> None:
        """Start a tree: gh (n, 2) gradient pairs (float32, or int32 when quantised), rows int32
        sorted indices of the rows used by this tree; all rows start in the root."""

    def build_histograms(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Histograms of the nodes owning partition ranges [start, end), one per node."""

    def subtract_histograms(self, parents: np.ndarray, children: np.ndarray) -> np.ndarray:
        """parents - children, elementwise: the siblings' histograms."""

    def to_float(self, hists: np.ndarray, g_scale: float, h_scale: float) -> np.ndarray:
        """float64 (k, total_bins, 2) histograms, quantised sums scaled to gradient units."""

    def find_best_splits(self, hists: np.ndarray, totals: np.ndarray,
                         feature_masks: np.ndarray, reg: np.ndarray) -> np.ndarray:
        """Best split record per node from float64 histograms and node totals (k, 3)."""

    def oblivious_gains(self, hists: np.ndarray, totals: np.ndarray, feature_mask: np.ndarray,
                        reg: np.ndarray) -> np.ndarray:
        """(total_bins, 2) gain of every shared split candidate summed over the nodes."""

    def partition(self, starts: np.ndarray, ends: np.ndarray, features: np.ndarray,
                  split_bins: np.ndarray, default_left: np.ndarray) -> np.ndarray:
        """Split each node's range in place (stable); returns int64 rows going left per node."""

    def add_leaf_values(self, starts: np.ndarray, ends: np.ndarray, values: np.ndarray,
                        margin: np.ndarray, column: int) -> None:
        """margin[rows in each leaf range, column] += the leaf's value."""
