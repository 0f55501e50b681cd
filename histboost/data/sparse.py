"""Sparse input: scipy CSR / CSC matrices (and libsvm files) binned and stored without
densifying.

Unstored entries follow the Dataset's ``unstored`` rule: ``"zero"`` (the default, scipy's
meaning: an entry that is not stored is 0.0) or ``"nan"`` (a missing value, as XGBoost reads
sparse input). Stored values are used as they are: an explicitly stored 0.0 is zero and a stored
NaN is missing under either rule; duplicate entries add up, as in scipy's ``toarray()``.

Cuts: every column's cut points come from `histboost.data.binning.feature_cuts` over its stored
values plus, under the zero rule, one value 0.0 weighted by the number (or total weight) of
rows that do not store the column, on the same row sample as `compute_bin_mapper`: the cuts of
the dense equivalent.

Storage (`SparseBins`, kernels in `histboost.kernels.cpu.sparse`): every feature's *default
bin* is the bin of an unstored entry. Only entries in another bin are stored, as global
histogram slots in a row-major CSR (for the histograms) and as (row, bin) in a column-major copy
(for the partition), about 10 bytes a stored value, plus 12 bytes a row and about 40 a column.
A histogram built from a node's rows lacks the default bins; each is recovered as the node total
minus the feature's other bins ("fix histogram"), so histograms, split search, trees and the
model are those of the dense equivalent.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..kernels.cpu import sparse as ksparse
from .binning import DEFAULT_SAMPLE_ROWS, BinMapper, _midpoints, feature_cuts, sample_row_ids

UNSTORED_RULES = ("zero", "nan")
# feature ids are int32 in trees, and a feature takes at least two histogram slots (uint32)
MAX_FEATURES = 2**31 - 1
# per-column memory of training (cut points and pointers, names, histogram slots in a few
# node histograms): a width needing more than the machine's memory is refused up front
_BYTES_PER_COLUMN = 200


def check_unstored(unstored: Any) -> str:
    if unstored not in UNSTORED_RULES:
        raise ValueError(f"unstored must be 'zero' (entries a sparse matrix does not store are "
                         f"0.0, as in scipy) or 'nan' (they are missing values), got "
                         f"{unstored!r}")
    return str(unstored)


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def check_width(n_cols: int) -> None:
    """Refuse a column count that could not be trained on (instead of a MemoryError later)."""
    if n_cols > MAX_FEATURES:
        raise ValueError(f"data has {n_cols:,} columns; histboost takes at most "
                         f"{MAX_FEATURES:,} (2**31 - 1) features. A libsvm file with feature "
                         f"indices this large needs them renumbered (or hashed) into a "
                         f"smaller range")
    mem = _physical_memory()
    if mem is not None and n_cols * _BYTES_PER_COLUMN > mem:
        raise ValueError(f"data has {n_cols:,} columns: their cut points, names and histogram "
                         f"slots would take about {n_cols * _BYTES_PER_COLUMN / 2**30:.0f} GiB, "
                         f"more than this machine's {mem / 2**30:.0f} GiB; renumber (or hash) "
                         f"the feature indices into a smaller range")


class SparseMatrix:
    """A canonical CSR matrix (column indices ascending within a row, no duplicates) and the
    rule for its unstored entries: ``Dataset.data`` of a sparse Dataset, and what prediction
    reads without densifying.

    indptr: int64 (n+1,); indices: int32 (nnz,); data: float32/float64 (nnz,); shape (n, F);
    unstored: ``"zero"`` or ``"nan"``.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                 shape: tuple[int, int], unstored: str = "zero") -> None:
        self.indptr = indptr
        self.indices = indices
        self.data = data
        self.shape = (int(shape[0]), int(shape[1]))
        self.unstored = check_unstored(unstored)

    @classmethod
    def from_any(cls, data: Any, unstored: str = "zero") -> SparseMatrix:
        """From a scipy sparse matrix / array (any format) or a SparseMatrix (whose rule is
        replaced by `unstored`). The caller's matrix is never modified; a canonical float32 /
        float64 CSR with int32 indices is used without a copy."""
        unstored = check_unstored(unstored)
        if isinstance(data, SparseMatrix):
            return cls(data.indptr, data.indices, data.data, data.shape, unstored)
        check_width(int(data.shape[1]))
        csr = data.tocsr()
        if not csr.has_canonical_format:
            # duplicates add up (as toarray()), indices sorted; on a copy: tocsr() may return
            # `data` itself
            csr = csr.copy()
            csr.sum_duplicates()
        values = csr.data
        if values.dtype not in (np.float32, np.float64):
            if values.dtype.kind not in "biuf":
                raise TypeError(f"sparse data must be numeric, got dtype {values.dtype}")
            values = values.astype(np.float64)
        return cls(np.asarray(csr.indptr, np.int64), np.asarray(csr.indices, np.int32),
                   np.ascontiguousarray(values), csr.shape, unstored)

    @property
    def fill(self) -> float:
        """The value of an unstored entry: 0.0 or NaN."""
        return 0.0 if self.unstored == "zero" else math.nan

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    @property
    def ndim(self) -> int:
        return 2

    @property
    def nbytes(self) -> int:
        return self.indptr.nbytes + self.indices.nbytes + self.data.nbytes

    def toarray(self) -> np.ndarray:
        """The dense equivalent (unstored entries = `fill`), for checks and small data."""
        out = np.full(self.shape, self.fill, self.data.dtype)
        rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))
        out[rows, self.indices] = self.data
        return out

    def take_rows(self, rows: np.ndarray) -> SparseMatrix:
        """The rows `rows` (int, ascending) as a new SparseMatrix."""
        counts = np.diff(self.indptr)[rows]
        indptr = np.zeros(rows.size + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        starts = self.indptr[rows]
        idx = np.repeat(starts - indptr[:-1], counts) + np.arange(indptr[-1])
        return SparseMatrix(indptr, self.indices[idx], self.data[idx],
                            (rows.size, self.shape[1]), self.unstored)

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Column-major copy: col_ptr int64 (F+1,), rows int32, values (rows ascending)."""
        col_ptr = np.zeros(self.shape[1] + 1, np.int64)
        col_rows = np.empty(self.nnz, np.int32)
        col_data = np.empty(self.nnz, self.data.dtype)
        ksparse.csr_to_csc(self.indptr, self.indices, self.data, self.shape[1], col_ptr,
                           col_rows, col_data)
        return col_ptr, col_rows, col_data

    def __repr__(self) -> str:
        return (f"SparseMatrix(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype}, "
                f"unstored={self.unstored!r})")


# -- cut points ------------------------------------------------------------------------------------
def sparse_bin_mapper(S: SparseMatrix, weight: np.ndarray | None, max_bin: int,
                      sample_rows: int | None = None, seed: int = 0) -> BinMapper:
    """Cut points of every column of S: those `compute_bin_mapper` gives its dense equivalent.

    The same row sample; each column's values reach `feature_cuts` as its distinct values with
    their total weights (counts when unweighted), under the zero rule 0.0 weighted by the
    unstored rows too: the weighted distribution of the dense column, at a cost proportional to
    the stored values. The cuts of columns of at most max_bin - 1 distinct values (every value
    its own bin: midpoints) are computed for all of them at once; of the other columns, those
    of the same distribution share one call."""
    if max_bin < 2:
        raise ValueError(f"max_bin must be >= 2, got {max_bin}")
    sample_rows = DEFAULT_SAMPLE_ROWS if sample_rows is None else sample_rows
    n = S.shape[0]
    if n > sample_rows:  # the sample of compute_bin_mapper
        rows = sample_row_ids(0, n, n, sample_rows, seed)
        S = S.take_rows(rows)
        weight = None if weight is None else weight[rows]
    return sample_bin_mapper(S, weight, max_bin)


def sample_bin_mapper(S: SparseMatrix, ws: np.ndarray | None, max_bin: int) -> BinMapper:
    """`sparse_bin_mapper`'s cuts of the cut sample S itself (its rows in global row order,
    their weights ws (n,) or None), without sampling again: the step a distributed job runs on
    the sample gathered from every rank (`histboost.distributed.cuts`)."""
    n, F = S.shape
    col_ptr, col_rows, col_vals = S.columns()
    stored = np.diff(col_ptr)
    col_of = np.repeat(np.arange(F, dtype=np.int64), stored)
    # rows of weight 0 must not move the cuts (compute_bin_mapper drops them too)
    positive = None if ws is None else ws[col_rows] > 0
    if S.unstored == "zero":  # weight of each column's unstored rows: its one 0.0
        if ws is None:
            lump = (n - stored).astype(np.float64)
        else:
            total = float(ws[ws > 0].sum())
            lump = total - np.bincount(col_of[positive], weights=ws[col_rows[positive]],
                                       minlength=F)
    else:
        lump = np.zeros(F)
    ok = ~np.isnan(col_vals) if positive is None else ~np.isnan(col_vals) & positive
    active = np.flatnonzero(stored)
    zeros = active[lump[active] > 0]  # the unstored rows of a column: one 0.0 of their weight
    col_of = np.concatenate((col_of[ok], zeros))
    vals = np.concatenate((col_vals[ok].astype(np.float64), np.zeros(zeros.size)))
    w = np.concatenate((np.ones(int(ok.sum())) if ws is None
                        else ws[col_rows[ok]].astype(np.float64), lump[zeros]))
    del col_rows, col_vals, positive, ok, zeros
    # distinct (column, value) runs with their total weight (-0.0 and 0.0 are one value); the
    # sort is stable, so a run sums its weights in row order, the unstored rows' last
    order = np.lexsort((vals, col_of))
    col_of, vals, w = col_of[order], vals[order], w[order]
    del order
    new = np.ones(vals.size, bool)
    new[1:] = (col_of[1:] != col_of[:-1]) | (vals[1:] != vals[:-1])
    starts = np.flatnonzero(new)
    run_col, run_val = col_of[starts], vals[starts]
    run_w = np.add.reduceat(w, starts) if starts.size else np.zeros(0)
    run_ptr = np.zeros(F + 1, np.int64)
    np.cumsum(np.bincount(run_col, minlength=F), out=run_ptr[1:])
    del col_of, vals, w, new, starts

    # a column of at most max_bin - 1 distinct values gives each its own bin: its cuts are
    # the midpoints of consecutive distinct values and +inf (`feature_cuts`), computed here
    # for all such columns at once; the others go through `feature_cuts` one by one,
    # columns of the same distribution once
    distinct = np.diff(run_ptr)
    own = distinct <= max_bin - 1
    counts = np.maximum(distinct, 1)  # no or one distinct value: only +inf
    cache: dict[tuple[bytes, bytes], np.ndarray] = {}

    def cuts(v: np.ndarray, wt: np.ndarray) -> np.ndarray:
        key = (v.tobytes(), wt.tobytes())
        out = cache.get(key)
        if out is None:
            out = cache[key] = feature_cuts(v, wt, max_bin - 1)
        return out

    quantiled = np.flatnonzero(~own)
    parts = [cuts(run_val[run_ptr[f]:run_ptr[f + 1]], run_w[run_ptr[f]:run_ptr[f + 1]])
             for f in quantiled.tolist()]
    counts[quantiled] = [c.size for c in parts]
    cut_ptr = np.zeros(F + 1, np.int64)
    np.cumsum(counts, out=cut_ptr[1:])
    cut_values = np.full(int(cut_ptr[-1]), np.inf)
    # midpoints of the pairs of consecutive runs of one column, at the column's cut slots
    pair = np.flatnonzero((run_col[1:] == run_col[:-1]) & own[run_col[:-1]])
    col = run_col[pair]
    cut_values[cut_ptr[col] + pair - run_ptr[col]] = _midpoints(run_val[pair],
                                                                run_val[pair + 1])
    if parts:
        at = np.repeat(cut_ptr[quantiled] - np.concatenate(
            ([0], np.cumsum(counts[quantiled])[:-1])), counts[quantiled]) + np.arange(
            int(counts[quantiled].sum()))
        cut_values[at] = np.concatenate(parts)
    return BinMapper(cut_values, cut_ptr, int(max_bin))


# -- binned layout ---------------------------------------------------------------------------------
class SparseBins:
    """The binned sparse training matrix (layout: `histboost.kernels.cpu.sparse`).

    default_bins: int32 (F,) each feature's bin of an unstored entry; offsets: int64 (F+1,)
    histogram slot offsets (`BinMapper.bin_offsets`); indptr int64 (n+1,) and slots
    uint16/uint32 (row-major, global slots of the non-default entries, feature 0 always);
    col_ptr int64 (F+1,), col_rows int32, col_bins uint8/uint16 (column-major, non-default
    entries).
    """

    def __init__(self, S: SparseMatrix, mapper: BinMapper) -> None:
        if S.shape[1] != mapper.n_features:
            raise ValueError(f"data has {S.shape[1]} features, the bin cuts have "
                             f"{mapper.n_features}")
        n, F = S.shape
        self.shape = (n, F)
        self.offsets = mapper.bin_offsets
        self.missing_bins = mapper.n_value_bins.astype(np.int32)
        self.default_bins = np.empty(F, np.int32)
        ksparse.default_bins_of(mapper.cut_values, mapper.cut_ptr, S.fill, self.default_bins)
        bins = np.empty(S.nnz, np.uint16)
        row_counts = np.empty(n, np.int64)
        ksparse.bin_entries(S.indptr, S.indices, S.data, mapper.cut_values, mapper.cut_ptr,
                            self.default_bins, bins, row_counts)
        self.indptr = np.zeros(n + 1, np.int64)
        np.cumsum(row_counts, out=self.indptr[1:])
        del row_counts
        total_bins = int(self.offsets[-1])
        self.slots = np.empty(int(self.indptr[-1]),
                              np.uint16 if total_bins <= 65536 else np.uint32)
        ksparse.fill_row_slots(S.indptr, S.indices, bins, self.offsets, self.default_bins,
                               self.indptr, self.slots)
        self.col_ptr = np.zeros(F + 1, np.int64)
        n_col = int(self.indptr[-1]) - n + int(np.count_nonzero(
            self.slots[self.indptr[:-1]] != self.offsets[0] + self.default_bins[0]))
        self.col_rows = np.empty(n_col, np.int32)
        self.col_bins = np.empty(n_col, mapper.bin_dtype)
        ksparse.fill_columns(S.indptr, S.indices, bins, self.default_bins, self.col_ptr,
                             self.col_rows, self.col_bins)

    @property
    def default_slots(self) -> np.ndarray:
        """int64 (F,): global slot of every feature's default bin."""
        return self.offsets[:-1] + self.default_bins

    @property
    def nbytes(self) -> int:
        """Bytes of the stored arrays."""
        return sum(a.nbytes for a in (self.offsets, self.missing_bins, self.default_bins,
                                      self.indptr, self.slots, self.col_ptr, self.col_rows,
                                      self.col_bins))

    def to_dense(self) -> np.ndarray:
        """(n, F) bins of the dense equivalent (for checks on small data)."""
        n, F = self.shape
        out = np.tile(self.default_bins.astype(np.uint16), (n, 1))
        for f in range(F):
            a, b = self.col_ptr[f], self.col_ptr[f + 1]
            out[self.col_rows[a:b], f] = self.col_bins[a:b]
        return out

    def __repr__(self) -> str:
        return (f"SparseBins(shape={self.shape}, stored={self.slots.size}, "
                f"nbytes={self.nbytes})")


__all__ = ["MAX_FEATURES", "UNSTORED_RULES", "SparseBins", "SparseMatrix", "check_unstored",
           "sample_bin_mapper", "sparse_bin_mapper"]
