"""`Dataset`: features, label and metadata, binned once for training.

Raw values are kept (as a float32/float64 C-ordered matrix) so that a different `max_bin` can
re-bin and so that predictions on the training data need no copy; the binned matrix is
(n_rows, n_features) uint8 (uint16 when a feature has more than 256 slots), row-major, which is
the layout the CPU histogram kernel reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .binning import BinMapper, compute_bin_mapper


def _is_pandas_frame(data: Any) -> bool:
    return type(data).__name__ == "DataFrame" and hasattr(data, "dtypes")


def _is_scipy_sparse(data: Any) -> bool:
    return hasattr(data, "tocsr") and hasattr(data, "nnz")


def to_float_matrix(data: Any) -> tuple[np.ndarray, list[str] | None]:
    """Convert numpy / pandas / scipy-sparse input into a C-ordered float matrix.

    Returns (X, column names or None). float32 input stays float32 (its cut points and
    thresholds are exact in float64); everything else becomes float64. Sparse matrices are
    densified: entries that are not stored are missing values, as in XGBoost, and duplicate
    entries add up, as in scipy's ``toarray()``.
    """
    names: list[str] | None = None
    if _is_pandas_frame(data):
        names = [str(c) for c in data.columns]
        bad = [str(c) for c, t in zip(data.columns, data.dtypes, strict=True)
               if t.kind not in "biuf"]
        if bad:
            raise TypeError(
                f"columns {bad[:5]} are not numeric (dtype {data.dtypes[bad[0]]}); encode "
                "categorical columns as numbers first")
        kinds = {t.kind for t in data.dtypes}
        dtype = np.float32 if kinds == {"f"} and all(t == np.float32 for t in data.dtypes) \
            else np.float64
        X = data.to_numpy(dtype=dtype, na_value=np.nan)
    elif _is_scipy_sparse(data):
        csr = data.tocsr()
        if not csr.has_canonical_format:
            # duplicate entries add up, as in scipy's toarray(); sum_duplicates works in place
            # and tocsr() may return `data` itself
            csr = csr.copy()
            csr.sum_duplicates()
        dtype = np.float32 if csr.dtype == np.float32 else np.float64
        X = np.full(csr.shape, np.nan, dtype=dtype)
        rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
        X[rows, csr.indices] = csr.data
    else:
        if isinstance(data, list | tuple):
            data = np.asarray(data)
        if not isinstance(data, np.ndarray):
            raise TypeError(f"data must be a numpy array, pandas DataFrame or scipy sparse "
                            f"matrix, got {type(data).__name__}")
        if data.dtype.kind not in "biuf":
            raise TypeError(f"data must be numeric, got dtype {data.dtype}")
        dtype = np.float32 if data.dtype == np.float32 else np.float64
        X = data.astype(dtype, copy=False)
    if X.ndim == 1:
        raise ValueError("data must be 2-D (n_rows, n_features); reshape a single feature with "
                         "x.reshape(-1, 1)")
    if X.ndim != 2:
        raise ValueError(f"data must be 2-D, got {X.ndim} dimensions")
    return np.ascontiguousarray(X), names


def _vector(name: str, v: Any, n: int, finite: bool = True) -> np.ndarray | None:
    if v is None:
        return None
    if _is_pandas_frame(v) or type(v).__name__ == "Series":
        v = v.to_numpy()
    arr = np.asarray(v, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} must have one value per row ({n}), got shape {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name} contains NaN or infinite values (first at row {bad})")
    return arr


class Dataset:
    """Training or validation data for `histboost.train`.

    Parameters
    ----------
    data : array (n, F), pandas DataFrame or scipy sparse matrix; NaN marks missing values.
    label : (n,) targets, optional for prediction-only data.
    weight : (n,) non-negative row weights.
    base_margin : (n,) or (n, K) initial margins used instead of `base_score`.
    group : query sizes (ranking metadata), summing to n.
    feature_names : names of the F features (default: DataFrame columns or f0..f{F-1}).
    max_bin : histogram slots per feature including the missing slot (<= 256: uint8 bins).
    reference : the training `Dataset` whose cut points this (validation) set must share.
    """

    def __init__(self, data: Any, label: Any = None, weight: Any = None,
                 base_margin: Any = None, group: Any = None,
                 feature_names: Sequence[str] | None = None, max_bin: int = 256,
                 reference: Dataset | None = None) -> None:
        X, names = to_float_matrix(data)
        n, F = X.shape
        if n == 0:
            raise ValueError("data is empty: it has 0 rows")
        if F == 0:
            raise ValueError("data has 0 features")
        if reference is not None and not isinstance(reference, Dataset):
            raise TypeError("reference must be a histboost.Dataset")
        if not isinstance(max_bin, int | np.integer) or not 2 <= max_bin <= 65536:
            raise ValueError(f"max_bin must be an integer in [2, 65536], got {max_bin!r}")
        self.data = X
        self.label = _vector("label", label, n)
        self.weight = _vector("weight", weight, n)
        if self.weight is not None and np.any(self.weight < 0):
            raise ValueError("weight must be non-negative")
        self.base_margin = None
        if base_margin is not None:
            bm = np.asarray(base_margin, dtype=np.float64)
            if bm.shape[0] != n or not np.all(np.isfinite(bm)):
                raise ValueError(f"base_margin must be finite with {n} rows, got shape "
                                 f"{bm.shape}")
            self.base_margin = bm
        self.group = None
        if group is not None:
            g = np.asarray(group, dtype=np.int64)
            if g.ndim != 1 or np.any(g <= 0) or int(g.sum()) != n:
                raise ValueError(f"group must be positive query sizes summing to {n}")
            self.group = g
        if feature_names is None:
            feature_names = names if names is not None else [f"f{i}" for i in range(F)]
        feature_names = [str(x) for x in feature_names]
        if len(feature_names) != F:
            raise ValueError(f"feature_names has {len(feature_names)} names for {F} features")
        if len(set(feature_names)) != F:
            raise ValueError("feature_names must be unique")
        self.feature_names = feature_names
        self.max_bin = int(max_bin)
        self.reference = reference
        if reference is not None and reference.num_col() != F:
            raise ValueError(f"data has {F} features but the reference Dataset has "
                             f"{reference.num_col()}")
        self._bin_mapper: BinMapper | None = None
        self._bins: np.ndarray | None = None

    # -- shape ------------------------------------------------------------------------------
    def num_row(self) -> int:
        return self.data.shape[0]

    def num_col(self) -> int:
        return self.data.shape[1]

    @property
    def shape(self) -> tuple[int, int]:
        return self.data.shape

    # -- binning ----------------------------------------------------------------------------
    def construct(self, max_bin: int | None = None) -> Dataset:
        """Compute cut points (or take the reference's) and bin the data. Idempotent; a
        different `max_bin` re-bins."""
        if self.reference is not None:
            ref = self.reference
            if max_bin is not None or ref._bin_mapper is None:
                ref.construct(max_bin)  # else keep the cuts the reference was trained with
            mapper = ref.bin_mapper
        else:
            mb = self.max_bin if max_bin is None else int(max_bin)
            mapper = self._bin_mapper
            if mapper is None or mapper.max_bin != mb:
                mapper = compute_bin_mapper(self.data, self.weight, mb)
        if mapper is not self._bin_mapper or self._bins is None:
            self._bin_mapper = mapper
            self._bins = mapper.transform(self.data)
        return self

    @property
    def bin_mapper(self) -> BinMapper:
        if self._bin_mapper is None:
            self.construct()
        assert self._bin_mapper is not None
        return self._bin_mapper

    @property
    def bins(self) -> np.ndarray:
        """(n, F) uint8/uint16 bin indices, C order."""
        if self._bins is None:
            self.construct()
        assert self._bins is not None
        return self._bins

    # -- metadata setters (XGBoost DMatrix style) -------------------------------------------
    def get_label(self) -> np.ndarray | None:
        return self.label

    def set_label(self, label: Any) -> None:
        self.label = _vector("label", label, self.num_row())

    def get_weight(self) -> np.ndarray | None:
        return self.weight

    def set_weight(self, weight: Any) -> None:
        w = _vector("weight", weight, self.num_row())
        if w is not None and np.any(w < 0):
            raise ValueError("weight must be non-negative")
        self.weight = w

    def set_base_margin(self, margin: Any) -> None:
        bm = np.asarray(margin, dtype=np.float64)
        if bm.shape[0] != self.num_row():
            raise ValueError(f"base_margin must have {self.num_row()} rows")
        self.base_margin = bm

    def __repr__(self) -> str:
        return f"Dataset(n_rows={self.num_row()}, n_features={self.num_col()})"
