"""`Dataset`: features, label and metadata, binned once for training.

Raw values are kept (as a float32/float64 C-ordered matrix) so that a different `max_bin` can
re-bin and so that predictions on the training data need no copy; the binned matrix is
(n_rows, n_features) uint8 (uint16 when a feature has more than 256 slots), row-major. The
kernel backend builds its own layouts from it (the CPU histogram kernel reads global slot
indices, the partition a column-major copy: see `histboost.kernels.cpu.backend`); the Dataset's
bins also serve prediction on binned rows. Sparse input stays sparse: raw values as a
`SparseMatrix`, bins as `SparseBins` (`histboost.data.sparse`).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..params import MIN_MAX_BIN
from .arrow import to_matrix as to_arrow_matrix
from .binning import BinMapper, compute_bin_mapper
from .categorical import CategoricalColumns, has_categorical_input, split_columns
from .sparse import SparseBins, SparseMatrix, check_unstored, sparse_bin_mapper

# Gradients travel as float32 (largest 3.4e38): a row's gradient is at most
# weight x |margin - label|, its hessian a small multiple of the weight. Keeping
# weight x (|label| + |margin|) below this leaves the float32 values two orders of magnitude of
# room; beyond it they overflow to inf and the trees come out constant or NaN.
GRADIENT_LIMIT = 1e36


def _is_pandas_frame(data: Any) -> bool:
    return type(data).__name__ == "DataFrame" and hasattr(data, "dtypes")


def _is_scipy_sparse(data: Any) -> bool:
    return hasattr(data, "tocsr") and hasattr(data, "nnz")


def to_float_matrix(data: Any, unstored: str = "zero"
                    ) -> tuple[np.ndarray | SparseMatrix, list[str] | None]:
    """Convert numpy / pandas / scipy-sparse input into a C-ordered float matrix.

    Returns (X, column names or None). float32 input stays float32 (its cut points and
    thresholds are exact in float64); everything else becomes float64. Sparse matrices (scipy,
    any format, or a `SparseMatrix`) are not densified: X is then a canonical CSR
    `SparseMatrix` whose unstored entries follow `unstored` ("zero" or "nan"), duplicate
    entries added up, as in scipy's ``toarray()``.
    """
    names: list[str] | None = None
    if _is_scipy_sparse(data) or isinstance(data, SparseMatrix):
        return SparseMatrix.from_any(data, unstored), None
    arrow = to_arrow_matrix(data)  # pyarrow, polars, Arrow C streams (histboost.data.arrow)
    if arrow is not None:
        X, names = arrow
    elif _is_pandas_frame(data):
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
    if finite and not _all_finite(arr):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name} contains NaN or infinite values (first at row {bad})")
    return arr


def _all_finite(arr: np.ndarray) -> bool:
    """Whether every value of float64 arr is finite: its sum is one pass with no temporary
    (`np.isfinite(arr)` writes a mask of n bytes, whose fresh pages cost more than the pass
    on a 10M-row label); NaN or inf make the sum NaN or inf, and a sum that overflowed
    from finite values is checked value by value."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.sum(arr)
    return bool(np.isfinite(total)) or bool(np.all(np.isfinite(arr)))


def _largest_abs(arr: np.ndarray) -> float:
    """max |arr| of a non-empty array, without the n-value temporary of np.abs(arr)."""
    return max(abs(float(arr.min())), abs(float(arr.max())))


def _base_margin(v: Any, n: int) -> np.ndarray:
    """(n,) or (n, K) finite float64 margins; the Booster checks K against the model."""
    bm = np.asarray(v, dtype=np.float64)
    if bm.ndim not in (1, 2) or bm.shape[0] != n:
        raise ValueError(f"base_margin must have {n} rows, shape ({n},) or ({n}, K); got "
                         f"shape {bm.shape}")
    if not np.all(np.isfinite(bm)):
        raise ValueError("base_margin contains NaN or infinite values")
    return bm


def check_group_sizes(group: Any, n: int) -> np.ndarray | None:
    """int64 (G,) query sizes, checked: positive integers summing to n."""
    if group is None:
        return None
    try:
        g = np.asarray(group)
    except (TypeError, ValueError):
        raise ValueError("group must be a 1-D array of query sizes") from None
    if g.ndim != 1 or g.size == 0 or g.dtype.kind not in "iuf" or np.any(g != np.floor(g)):
        raise ValueError(f"group must be a 1-D array of integer query sizes, got shape "
                         f"{g.shape}, dtype {g.dtype}")
    if np.any(g <= 0):
        raise ValueError(f"group sizes must be positive, found {g[g <= 0][0]!r} (query "
                         f"{int(np.flatnonzero(g <= 0)[0])})")
    g = g.astype(np.int64)
    if int(g.sum()) != n:
        raise ValueError(f"group sizes sum to {int(g.sum())}, but the data has {n} rows; "
                         "give one size per query, in row order")
    return g


def qid_runs(qid: np.ndarray) -> tuple[np.ndarray, tuple[int, int] | None]:
    """The runs of equal ids of qid (n,): (int64 start row of each run, None), or (starts,
    (first row, row where it starts again)) of the first query whose rows are split."""
    starts = np.concatenate([[0], np.flatnonzero(qid[1:] != qid[:-1]) + 1]).astype(np.int64)
    run_ids = qid[starts]
    order = np.argsort(run_ids, kind="stable")
    dup = np.flatnonzero(run_ids[order][1:] == run_ids[order][:-1])
    if dup.size:
        return starts, (int(starts[order[dup[0]]]), int(starts[order[dup[0] + 1]]))
    return starts, None


def groups_from_qid(qid: Any, n: int) -> np.ndarray:
    """int64 (G,) query sizes of per-row query ids qid (n,): the runs of equal ids. A query
    whose rows are not contiguous raises ValueError naming it and the rows."""
    if _is_pandas_frame(qid) or type(qid).__name__ == "Series":
        qid = qid.to_numpy()
    q = np.asarray(qid)
    if q.ndim == 2 and q.shape[1] == 1:
        q = q[:, 0]
    if q.ndim != 1 or q.shape[0] != n:
        raise ValueError(f"qid must have one query id per row ({n}), got shape {q.shape}")
    if q.dtype.kind == "f" and not np.all(np.isfinite(q)):
        raise ValueError(f"qid contains NaN or infinite values (first at row "
                         f"{int(np.flatnonzero(~np.isfinite(q))[0])})")
    starts, split = qid_runs(q)
    if split is not None:
        raise ValueError(f"qid {q[split[0]].tolist()!r} has rows that are not contiguous (row "
                         f"{split[0]}, then again from row {split[1]}): each query's rows must "
                         "be together; sort the rows by qid")
    return np.diff(np.concatenate([starts, [n]])).astype(np.int64)


def per_row_weight(weight: Any, group: np.ndarray | None, n: int) -> Any:
    """`weight` as per-row values: with query groups, one weight per query (G,) is spread
    over its rows (XGBoost's ranking weights); anything else is returned as given."""
    if weight is None or group is None or group.shape[0] == n:
        return weight
    if _is_pandas_frame(weight) or type(weight).__name__ == "Series":
        weight = weight.to_numpy()
    w = np.asarray(weight, dtype=np.float64)
    if w.ndim == 1 and w.shape[0] == group.shape[0]:
        return np.repeat(w, group)
    return weight


def _interval_bounds(lower: Any, upper: Any, n: int, partial: bool = False
                     ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """float64 (n,) lower and upper bounds of interval labels (survival:aft), checked: lower
    finite and >= 0 (0: left-censored), upper > 0 (+inf: right-censored) and >= lower. Both
    or neither, unless `partial` (one set before the other, as with set_float_info)."""
    if not partial and (lower is None) != (upper is None):
        given, missing = (("label_lower_bound", "label_upper_bound") if upper is None
                          else ("label_upper_bound", "label_lower_bound"))
        raise ValueError(f"interval labels need both bounds: {given} given without {missing}")
    lo = _vector("label_lower_bound", lower, n)
    hi = _vector("label_upper_bound", upper, n, finite=False)
    problems = []
    if lo is not None:
        problems.append((lo < 0, "label_lower_bound must be >= 0 (0 marks a left-censored row)"))
    if hi is not None:
        problems += [(np.isnan(hi), "label_upper_bound contains NaN (+inf marks a "
                      "right-censored row)"), (hi <= 0, "label_upper_bound must be > 0")]
    if lo is not None and hi is not None:
        problems.append((hi < lo, "label_upper_bound must be >= label_lower_bound"))
    for bad, message in problems:
        if np.any(bad):
            row = int(np.flatnonzero(bad)[0])
            found = [f"{name} {float(v[row])!r}" for name, v in (("lower", lo), ("upper", hi))
                     if v is not None]
            raise ValueError(f"{message}; row {row} has {', '.join(found)}")
    return lo, hi


def _check_max_bin(max_bin: Any) -> int:
    if (isinstance(max_bin, bool) or not isinstance(max_bin, int | np.integer)
            or not MIN_MAX_BIN <= max_bin <= 65536):
        raise ValueError(f"max_bin must be an integer in [{MIN_MAX_BIN}, 65536] (it counts the "
                         f"missing-value slot: 3 gives two value bins, the fewest a split "
                         f"needs), got {max_bin!r}")
    return int(max_bin)


def _check_gradient_range(label: np.ndarray | None, weight: np.ndarray | None,
                          base_margin: np.ndarray | None) -> None:
    """Raise if float32 gradients of these labels and weights could overflow."""
    y = _largest_abs(label) if label is not None and label.size else 0.0
    m = _largest_abs(base_margin) if base_margin is not None and base_margin.size else 0.0
    w = float(np.max(weight)) if weight is not None and weight.size else 1.0
    # residuals are at most |label| + |margin|, margins start within the labels' range (or at
    # base_margin), and a classification residual is at most 1
    bound = w * max(1.0, y + max(y, m))
    if bound > GRADIENT_LIMIT:
        raise ValueError(
            f"labels, weights or base_margin too large: weight x (|label| + |margin|) reaches "
            f"{bound:.3g} (largest |label| {y:.3g}, weight {w:.3g}, |base_margin| {m:.3g}), "
            f"beyond {GRADIENT_LIMIT:.0e}, so the float32 gradients would overflow; rescale "
            "them")


def _ranks_agree(comm: Any, uses_reference: bool, has_global_cuts: bool) -> bool:
    """One allreduce: raise ValueError on every rank unless all ranks or none have a
    reference Dataset; True when the ranks may keep the cuts they hold (all use references,
    or all hold global cuts computed with this comm), False when they must compute global
    cuts (the same answer on every rank, so they stay in step)."""
    ref, keep = int(uses_reference), int(uses_reference or has_global_cuts)
    flags = np.array([ref, -ref, -keep], np.int64)  # max of -x is -min(x)
    comm.allreduce(flags, op="max", inplace=True)
    if flags[0] != -flags[1]:
        raise ValueError("distributed training: a reference Dataset on some ranks only; give "
                         "every rank's Dataset a reference with the same cuts, or none (global "
                         "cuts from all ranks' rows)")
    return bool(flags[2] == -1)


class Dataset:
    """Training or validation data for `histboost.train`.

    Parameters
    ----------
    data : array (n, F), pandas DataFrame or scipy sparse matrix (CSR, CSC or any format; kept
        sparse, see `unstored`; duplicate entries add up, as in ``toarray()``); NaN marks
        missing values.
    label : (n,) targets, optional for prediction-only data.
    weight : (n,) non-negative row weights. Labels, weights and base margins so large that
        float32 gradients could overflow (weight x (|label| + |margin|) > `GRADIENT_LIMIT`)
        raise ValueError.
    base_margin : (n,) or (n, K) initial margins used instead of `base_score`.
    group : int (G,) query sizes (ranking), summing to n: the rows of each query are
        contiguous, queries in order.
    qid : (n,) the query id of each row (instead of `group`); each query's rows must be
        contiguous (sorted by qid, as XGBoost requires, is one way).
        With query groups, `weight` may hold one weight per query (G,), as XGBoost's ranking
        weights do; it is then spread over the query's rows.
    label_lower_bound, label_upper_bound : (n,) interval labels of survival:aft, as XGBoost's
        DMatrix: lower == upper for an observed time, upper = +inf for a right-censored row,
        lower = 0 for a left-censored one. Lower bounds are finite and >= 0, upper bounds > 0
        and >= the lower ones.
    feature_names : names of the F features (default: DataFrame columns or f0..f{F-1}).
    max_bin : histogram slots per feature including the missing slot, in [3, 65536] (<= 256:
        uint8 bins).
    reference : the training `Dataset` whose cut points this (validation) set must share.
    row_ids : distributed training only: the index of each row in the whole data set, int64
        (n,), unique across workers (default: the workers' rows are blocks in rank order).
        Each row's stochastic rounding and row sampling draw at this index, so the model does
        not depend on which worker holds which rows (`histboost.dask` sets it from the
        partitions' positions).
    unstored : what the entries a sparse matrix does not store are: ``"zero"`` (the default,
        scipy's meaning) or ``"nan"`` (missing values, as XGBoost reads sparse input). Stored
        values are used as they are (a stored 0.0 is zero, a stored NaN missing). Ignored for
        dense input. See docs/sparse.md.
    categorical_features : column indices or names of categorical columns (alias
        `cat_features`); pandas category, object and string columns are categorical without
        being named. Values may be strings or integers (integer-valued floats), None / NaN a
        category of its own; they are kept as stable 64-bit hashes
        (`histboost.data.categorical`) in `categorical`, and `data` holds the numeric
        columns only. See docs/categorical.md.
    """

    def __init__(self, data: Any, label: Any = None, weight: Any = None,
                 base_margin: Any = None, group: Any = None,
                 feature_names: Sequence[str] | None = None, max_bin: int = 256,
                 reference: Dataset | None = None, unstored: str = "zero",
                 categorical_features: Any = None, *, row_ids: Any = None,
                 qid: Any = None, label_lower_bound: Any = None,
                 label_upper_bound: Any = None, cat_features: Any = None) -> None:
        self.unstored = check_unstored(unstored)
        if categorical_features is not None and cat_features is not None:
            raise ValueError("give categorical_features or its alias cat_features, not both")
        requested = categorical_features if cat_features is None else cat_features
        self.categorical: CategoricalColumns | None = None
        if has_categorical_input(data, requested):
            if _is_scipy_sparse(data) or isinstance(data, SparseMatrix):
                raise ValueError("categorical features need dense input (a DataFrame or an "
                                 "array), not a sparse matrix")
            X, names, cat = split_columns(data, requested, feature_names)
            feature_names = names
            self.categorical = cat if cat.n_columns else None
        else:
            X, names = to_float_matrix(data, self.unstored)
        n = X.shape[0]
        F = X.shape[1] + (0 if self.categorical is None else self.categorical.n_columns)
        if n == 0:
            raise ValueError("data is empty: it has 0 rows")
        if F == 0:
            raise ValueError("data has 0 features")
        if reference is not None and not isinstance(reference, Dataset):
            raise TypeError("reference must be a histboost.Dataset")
        max_bin = _check_max_bin(max_bin)
        self.data = X
        self.label = _vector("label", label, n)
        if group is not None and qid is not None:
            raise ValueError("give the queries once: group (sizes) or qid (one id per row)")
        self.group = check_group_sizes(group, n) if qid is None else groups_from_qid(qid, n)
        self.weight = _vector("weight", per_row_weight(weight, self.group, n), n)
        if self.weight is not None and np.any(self.weight < 0):
            raise ValueError("weight must be non-negative")
        self.base_margin = None if base_margin is None else _base_margin(base_margin, n)
        _check_gradient_range(self.label, self.weight, self.base_margin)
        self.label_lower_bound, self.label_upper_bound = _interval_bounds(
            label_lower_bound, label_upper_bound, n)
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
        self.row_ids = None
        if row_ids is not None:
            ids = np.asarray(row_ids)
            if ids.shape != (n,) or ids.dtype.kind not in "iu" or (n and int(ids.min()) < 0):
                raise ValueError(f"row_ids must be {n} non-negative integers, one per row; got "
                                 f"shape {ids.shape}, dtype {ids.dtype}")
            self.row_ids = ids.astype(np.int64)
        if reference is not None and reference.num_col() != F:
            raise ValueError(f"data has {F} features but the reference Dataset has "
                             f"{reference.num_col()}")
        if reference is not None and ((reference.categorical is None) != (
                self.categorical is None) or (self.categorical is not None and reference.categorical
                                              is not None and self.categorical.names
                                              != reference.categorical.names)):
            have = None if self.categorical is None else self.categorical.names
            ref = None if reference.categorical is None else reference.categorical.names
            raise ValueError(f"categorical columns {have} differ from the reference Dataset's "
                             f"{ref}")
        self._bin_mapper: BinMapper | None = None
        self._bins: np.ndarray | SparseBins | None = None
        # the communicator the held cuts were computed with (global cuts), weakly
        self._cuts_comm: weakref.ref[Any] | None = None

    # -- shape ------------------------------------------------------------------------------
    def num_row(self) -> int:
        return self.data.shape[0]

    def num_col(self) -> int:
        """Input columns, categorical ones included."""
        return len(self.feature_names)

    @property
    def shape(self) -> tuple[int, int]:
        return self.data.shape[0], self.num_col()

    @property
    def is_sparse(self) -> bool:
        """Whether the data is a `SparseMatrix` (binned as `SparseBins`)."""
        return isinstance(self.data, SparseMatrix)

    # -- binning ----------------------------------------------------------------------------
    def construct(self, max_bin: int | None = None, bin_rows: bool = True,
                  comm: Any = None) -> Dataset:
        """Compute cut points (or take the reference's) and bin the data. Idempotent; a
        different `max_bin` re-bins. ``bin_rows=False`` computes the cuts only (a GPU
        backend bins the rows on the device); `bins` bins them on first use.

        comm: a `histboost.collective.Communicator` when this Dataset is one rank's block of
        rows in data-parallel training. A collective call then: every rank makes it, either
        all with a reference (the reference's cuts, as without comm) or all without one
        (ValueError on every rank otherwise); without, the cuts are the global cuts of all
        ranks' rows (`histboost.distributed.cuts.global_bin_mapper`), equal to the cuts of
        one process on all rows. Global cuts are kept for later calls with the same comm."""
        if comm is not None and not _ranks_agree(comm, self.reference is not None,
                                                 self._has_global_cuts(comm, max_bin)):
            from ..distributed.cuts import global_bin_mapper

            mb = self.max_bin if max_bin is None else _check_max_bin(max_bin)
            mapper = global_bin_mapper(comm, self.data, self.weight, mb, row_ids=self.row_ids)
        elif self.reference is not None:
            ref = self.reference
            if max_bin is not None or ref._bin_mapper is None:
                ref.construct(max_bin)  # else keep the cuts the reference was trained with
            mapper = ref.bin_mapper
        else:
            mb = self.max_bin if max_bin is None else _check_max_bin(max_bin)
            mapper = self._bin_mapper
            if mapper is None or mapper.max_bin != mb:
                mapper = (sparse_bin_mapper(self.data, self.weight, mb) if self.is_sparse
                          else compute_bin_mapper(self.data, self.weight, mb))
        if mapper is not self._bin_mapper:
            self._bin_mapper = mapper
            self._bins = None
            self._cuts_comm = None if comm is None or self.reference is not None \
                else weakref.ref(comm)
        if bin_rows and self._bins is None:
            self._bins = self._bin(mapper)
        return self

    def _has_global_cuts(self, comm: Any, max_bin: int | None) -> bool:
        """Whether the cuts held are the global cuts computed with `comm` for `max_bin`."""
        mb = self.max_bin if max_bin is None else max_bin
        return (self.reference is None and self._bin_mapper is not None
                and self._bin_mapper.max_bin == mb and self._cuts_comm is not None
                and self._cuts_comm() is comm)

    def _bin(self, mapper: BinMapper) -> np.ndarray | SparseBins:
        return SparseBins(self.data, mapper) if self.is_sparse else mapper.transform(self.data)

    @property
    def bin_mapper(self) -> BinMapper:
        if self._bin_mapper is None:
            self.construct(bin_rows=False)
        assert self._bin_mapper is not None
        return self._bin_mapper

    @property
    def bins(self) -> np.ndarray | SparseBins:
        """(n, F) uint8/uint16 bin indices, C order (`SparseBins` for sparse data)."""
        if self._bins is None:
            if self._bin_mapper is not None:  # cuts computed without the rows binned
                self._bins = self._bin(self._bin_mapper)
            else:
                self.construct()
        assert self._bins is not None
        return self._bins

    # -- row subsets --------------------------------------------------------------------------
    def subset(self, rows: Any) -> Dataset:
        """A Dataset of rows `rows` (integer indices, in that order; repeats allowed) binned
        with this Dataset's cuts: its `reference` is this Dataset, and rows already binned here
        are sliced, not binned again (`histboost.cv` builds its folds this way). Labels,
        weights, base margins, interval labels, row ids and feature names follow the rows.
        With query groups, `rows` must hold whole queries, each in one run."""
        idx = np.asarray(rows)
        if idx.ndim != 1 or idx.dtype.kind not in "iu" or idx.size == 0:
            raise ValueError(f"rows must be a non-empty 1-D array of integer indices, got "
                             f"shape {idx.shape}, dtype {idx.dtype}")
        n = self.num_row()
        if int(idx.min()) < 0 or int(idx.max()) >= n:
            raise ValueError(f"rows must be indices in [0, {n}), got {int(idx.min())} to "
                             f"{int(idx.max())}")
        idx = idx.astype(np.int64)

        def take(v: np.ndarray | None) -> np.ndarray | None:
            return None if v is None else v[idx]

        out = Dataset(self.data.take_rows(idx) if self.is_sparse else self.data[idx],
                      label=take(self.label), weight=take(self.weight),
                      base_margin=take(self.base_margin), group=self._subset_group(idx),
                      feature_names=self.feature_names, max_bin=self.max_bin, reference=self,
                      unstored=self.unstored, row_ids=take(self.row_ids),
                      label_lower_bound=take(self.label_lower_bound),
                      label_upper_bound=take(self.label_upper_bound))
        if isinstance(self._bins, np.ndarray) and self._bin_mapper is not None:
            out._bin_mapper, out._bins = self._bin_mapper, self._bins[idx]
        return out

    def _subset_group(self, idx: np.ndarray) -> np.ndarray | None:
        """Query sizes of rows `idx` (None without groups); ValueError unless the rows are
        whole queries, each in one run."""
        if self.group is None:
            return None
        query = np.repeat(np.arange(self.group.shape[0]), self.group)[idx]
        starts, split = qid_runs(query)
        sizes = np.diff(np.r_[starts, idx.shape[0]])
        if split is not None or np.any(sizes != self.group[query[starts]]):
            raise ValueError("a subset of a Dataset with query groups must hold whole queries, "
                             "each query's rows together")
        return sizes

    # -- metadata setters (XGBoost DMatrix style) -------------------------------------------
    def get_label(self) -> np.ndarray | None:
        return self.label

    def set_label(self, label: Any) -> None:
        y = _vector("label", label, self.num_row())
        _check_gradient_range(y, self.weight, self.base_margin)
        self.label = y

    def get_weight(self) -> np.ndarray | None:
        return self.weight

    def set_weight(self, weight: Any) -> None:
        w = _vector("weight", per_row_weight(weight, self.group, self.num_row()),
                    self.num_row())
        if w is not None and np.any(w < 0):
            raise ValueError("weight must be non-negative")
        _check_gradient_range(self.label, w, self.base_margin)
        self.weight = w

    def get_group(self) -> np.ndarray | None:
        """int64 (G,) query sizes, or None."""
        return self.group

    def set_group(self, group: Any) -> None:
        """Query sizes (G,) summing to the row count, or None."""
        self.group = check_group_sizes(group, self.num_row())

    def set_qid(self, qid: Any) -> None:
        """The query id of each row (each query's rows contiguous)."""
        self.group = groups_from_qid(qid, self.num_row())

    def set_base_margin(self, margin: Any) -> None:
        """(n,) or (n, K) initial margins, or None to use the model's intercept."""
        bm = None if margin is None else _base_margin(margin, self.num_row())
        _check_gradient_range(self.label, self.weight, bm)
        self.base_margin = bm

    _FLOAT_INFO = ("label", "weight", "base_margin", "label_lower_bound", "label_upper_bound")

    def set_float_info(self, field: str, data: Any) -> None:
        """XGBoost's ``DMatrix.set_float_info``: set `field` ("label", "weight",
        "base_margin", "label_lower_bound" or "label_upper_bound") to `data` (n,), or clear it
        with None. The two bounds may be set one after the other."""
        if field == "label":
            self.set_label(data)
        elif field == "weight":
            self.set_weight(data)
        elif field == "base_margin":
            self.set_base_margin(data)
        elif field in ("label_lower_bound", "label_upper_bound"):
            lower = data if field == "label_lower_bound" else self.label_lower_bound
            upper = data if field == "label_upper_bound" else self.label_upper_bound
            self.label_lower_bound, self.label_upper_bound = _interval_bounds(
                lower, upper, self.num_row(), partial=True)
        else:
            raise ValueError(f"unknown float info field {field!r}; choose from "
                             f"{list(self._FLOAT_INFO)}")

    def get_float_info(self, field: str) -> np.ndarray | None:
        """The float64 (n,) values of `field` (see `set_float_info`), or None if unset."""
        if field not in self._FLOAT_INFO:
            raise ValueError(f"unknown float info field {field!r}; choose from "
                             f"{list(self._FLOAT_INFO)}")
        return getattr(self, field)

    def __repr__(self) -> str:
        sparse = f", sparse, unstored={self.unstored!r}" if self.is_sparse else ""
        cat = "" if self.categorical is None else \
            f", categorical={self.categorical.names}"
        return f"Dataset(n_rows={self.num_row()}, n_features={self.num_col()}{sparse}{cat})"
