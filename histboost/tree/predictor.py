"""`PackedForest`: all trees of a model in flat arrays for the prediction kernels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..data.sparse import SparseMatrix
from ..kernels.cpu import predict as kpredict
from ..kernels.cpu import sparse_predict
from ..kernels.cpu._threads import run_ranges
from .tree import Tree

# rows of a thread, at least: ~64k (row, tree) visits, and whole blocks of the kernels
_THREAD_MIN_VISITS = 1 << 16


def _min_rows(n_trees: int) -> int:
    return max(kpredict._BLOCK, _THREAD_MIN_VISITS // max(1, n_trees))


class PackedForest:
    """Concatenated tree arrays (layout documented in `histboost.kernels.cpu.predict`)."""

    def __init__(self, trees: Sequence[Tree]) -> None:
        self.n_trees = len(trees)
        self.tree_class = np.array([t.class_index for t in trees], dtype=np.int32)
        node_sizes = [0 if t.is_oblivious else t.left_child.shape[0] for t in trees]
        level_sizes = [t.level_feature.shape[0] if t.is_oblivious else 0 for t in trees]
        leaf_sizes = [t.leaf_value.shape[0] if t.is_oblivious else 0 for t in trees]
        self.node_ptr = np.concatenate([[0], np.cumsum(node_sizes)]).astype(np.int64)
        self.level_ptr = np.concatenate([[0], np.cumsum(level_sizes)]).astype(np.int64)
        self.leaf_ptr = np.concatenate([[0], np.cumsum(leaf_sizes)]).astype(np.int64)

        def cat(name: str, dtype: type, oblivious: bool) -> np.ndarray:
            parts = [t.arrays[name] for t in trees if t.is_oblivious == oblivious]
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

        self.left = cat("left_child", np.int32, False)
        self.right = cat("right_child", np.int32, False)
        self.feature = cat("split_feature", np.int32, False)
        self.split_bin = cat("split_bin", np.int32, False)
        self.threshold = cat("threshold", np.float64, False)
        self.default_left = cat("default_left", np.uint8, False)
        self.value = cat("value", np.float64, False)
        self.obl_feature = cat("level_feature", np.int32, True)
        self.obl_bin = cat("level_bin", np.int32, True)
        self.obl_threshold = cat("level_threshold", np.float64, True)
        self.obl_default_left = cat("level_default_left", np.uint8, True)
        self.obl_leaf_value = cat("leaf_value", np.float64, True)
        self.has_oblivious = bool(self.level_ptr[-1] > 0)

    def _oblivious(self, *arrays: np.ndarray) -> tuple[np.ndarray | None, ...]:
        """The oblivious arrays for the dense kernels: None without oblivious trees, which
        compiles the kernels without the oblivious traversal."""
        return arrays if self.has_oblivious else (None,) * len(arrays)

    def add_margin(self, X: np.ndarray | SparseMatrix, out: np.ndarray, begin: int = 0,
                   end: int | None = None) -> None:
        """out (n, K) float64 += margins of trees [begin, end) on raw X (n, F), dense or a
        `SparseMatrix` (read without densifying); dense rows on Numba's thread count of the
        calling thread."""
        end = self.n_trees if end is None else end
        if isinstance(X, SparseMatrix):
            sparse_predict.predict_margin_raw(
                X.indptr, X.indices, X.data, X.fill, begin, end, self.tree_class, self.left,
                self.right, self.feature, self.threshold, self.default_left, self.value,
                self.node_ptr, self.level_ptr, self.obl_feature, self.obl_threshold,
                self.obl_default_left, self.leaf_ptr, self.obl_leaf_value, out)
            return
        obl_feature, obl_threshold, obl_default_left, obl_leaf_value = self._oblivious(
            self.obl_feature, self.obl_threshold, self.obl_default_left, self.obl_leaf_value)
        run_ranges(kpredict.predict_margin_raw, X.shape[0], X, begin, end, self.tree_class,
                   self.left, self.right, self.feature, self.threshold, self.default_left,
                   self.value, self.node_ptr, self.level_ptr, obl_feature, obl_threshold,
                   obl_default_left, self.leaf_ptr, obl_leaf_value, out,
                   min_rows=_min_rows(end - begin))

    def add_margin_binned(self, bins: np.ndarray, missing_bins: np.ndarray, out: np.ndarray,
                          begin: int = 0, end: int | None = None) -> None:
        """As `add_margin` on binned data that shares the training cuts."""
        end = self.n_trees if end is None else end
        obl_feature, obl_bin, obl_default_left, obl_leaf_value = self._oblivious(
            self.obl_feature, self.obl_bin, self.obl_default_left, self.obl_leaf_value)
        run_ranges(kpredict.predict_margin_binned, bins.shape[0], bins, missing_bins, begin,
                   end, self.tree_class, self.left, self.right, self.feature, self.split_bin,
                   self.default_left, self.value, self.node_ptr, self.level_ptr, obl_feature,
                   obl_bin, obl_default_left, self.leaf_ptr, obl_leaf_value, out,
                   min_rows=_min_rows(end - begin))

    def leaf_indices(self, X: np.ndarray | SparseMatrix, begin: int = 0,
                     end: int | None = None) -> np.ndarray:
        """int32 (n, end - begin): leaf index of every row in every tree."""
        end = self.n_trees if end is None else end
        out = np.zeros((X.shape[0], end - begin), dtype=np.int32)
        if isinstance(X, SparseMatrix):
            sparse_predict.predict_leaf_raw(
                X.indptr, X.indices, X.data, X.fill, begin, end, self.left, self.right,
                self.feature, self.threshold, self.default_left, self.node_ptr,
                self.level_ptr, self.obl_feature, self.obl_threshold, self.obl_default_left,
                out)
            return out
        obl_feature, obl_threshold, obl_default_left = self._oblivious(
            self.obl_feature, self.obl_threshold, self.obl_default_left)
        run_ranges(kpredict.predict_leaf_raw, X.shape[0], X, begin, end, self.left,
                   self.right, self.feature, self.threshold, self.default_left,
                   self.node_ptr, self.level_ptr, obl_feature, obl_threshold,
                   obl_default_left, out, min_rows=_min_rows(end - begin))
        return out
