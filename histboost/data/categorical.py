"""Categorical input columns: which columns are categorical, and their raw values as stable
64-bit hashes.

A categorical value maps to a uint64 through a hash that is the same in every process, run and
machine (never Python's salted ``hash()``):

- integers (any integer dtype, integer-valued floats, bools, Python ints in object columns):
  splitmix64's output function of the value's 64-bit two's-complement pattern plus a constant,
  so 5, 5.0 and np.int8(5) are one category;
- strings: pandas' ``hash_array`` (SipHash-2-4 of the UTF-8 bytes under pandas' fixed key);
- None / NaN / pandas NA: `MISSING_HASH`, a category of its own.

A column is of kind ``"int"`` or ``"str"``; a model records each column's kind and raises at
prediction when a column comes back as the other kind (a number where strings were trained
reads as an unseen category otherwise, silently).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .binning import _mix64

MISSING_HASH = np.uint64(0)
# added to integer values before mixing (the golden ratio's 64 bits): the value 0 does not
# hash to 0 = MISSING_HASH
_INT_SALT = np.uint64(0x9E3779B97F4A7C15)
# combination keys: the running key times this odd constant plus the next component's hash
_COMBINE_MUL = np.uint64(0xBF58476D1CE4E5B9)


@dataclass
class CategoricalColumns:
    """The categorical columns of a Dataset.

    names: column names; positions: int (C,) index of each in the input's columns; kinds:
    ``"int"`` or ``"str"`` per column; hashes: uint64 (n, C), C-ordered by column
    (``hashes[:, c]`` is a contiguous copy on demand); examples: for each column, up to a few
    (hash, raw value as text) pairs, to name one-hot features.
    """

    names: list[str]
    positions: list[int]
    kinds: list[str]
    hashes: np.ndarray
    labels: list[dict[int, str]]

    @property
    def n_columns(self) -> int:
        return len(self.names)


def _mix(z: np.ndarray) -> np.ndarray:
    z = z + _INT_SALT
    _mix64(z, np.empty_like(z))
    z[z == MISSING_HASH] = np.uint64(1)  # 0 is the missing category
    return z


def _int_hashes(values: np.ndarray, missing: np.ndarray | None) -> np.ndarray:
    """uint64 hashes of an integer array (any width, signed or not)."""
    if values.dtype.kind == "b":
        values = values.astype(np.int64)
    z = values.astype(np.int64 if values.dtype.kind == "i" else np.uint64).view(np.uint64)
    out = _mix(np.array(z, np.uint64))
    if missing is not None:
        out[missing] = MISSING_HASH
    return out


def _float_hashes(values: np.ndarray, name: str) -> np.ndarray:
    """Hashes of a float column whose values must be integers (NaN: missing)."""
    v = values.astype(np.float64)
    missing = np.isnan(v)
    ok = v[~missing]
    if ok.size and not (np.all(np.isfinite(ok)) and np.all(ok == np.floor(ok))
                        and np.all(np.abs(ok) < 2.0**63)):
        bad = ok[~(np.isfinite(ok) & (ok == np.floor(ok)) & (np.abs(ok) < 2.0**63))][0]
        raise ValueError(f"categorical column {name!r} holds the non-integer value {bad!r}; "
                         "a float column is categorical only when its values are integers "
                         "(ids): round them, or leave the column numeric")
    return _int_hashes(np.where(missing, 0.0, v).astype(np.int64), missing)


def _string_hashes(values: np.ndarray) -> np.ndarray:
    """Hashes of an object array of strings (missing already removed)."""
    from pandas.util import hash_array

    out = hash_array(values.astype(object), categorize=True).astype(np.uint64)
    out[out == MISSING_HASH] = np.uint64(1)
    return out


def _is_missing(values: np.ndarray) -> np.ndarray:
    import pandas as pd

    return np.asarray(pd.isna(values), bool)


def hash_column(values: Any, name: str, kind: str | None = None) -> tuple[np.ndarray, str]:
    """(uint64 hashes (n,), kind) of one column of raw categorical values: a NumPy array of
    any dtype, a pandas Series (category, object, string or numeric dtype) or a list.

    kind: the kind the column must have (a model's), None to infer it. Raises ValueError
    naming the column for non-integer floats and TypeError for a column that mixes strings
    and numbers or is of another kind than `kind`."""
    import pandas as pd

    if isinstance(values, pd.Series | pd.Index):
        if isinstance(values.dtype, pd.CategoricalDtype):
            cats = values.cat.categories.to_numpy()
            cat_hashes, got = hash_column(cats, name, kind)
            codes = values.cat.codes.to_numpy()
            out = np.where(codes >= 0, cat_hashes[np.maximum(codes, 0)] if cats.size
                           else MISSING_HASH, MISSING_HASH).astype(np.uint64)
            return out, got
        if values.dtype.kind in "biuf":
            values = values.to_numpy()
        else:
            values = values.to_numpy(dtype=object, na_value=None)
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"categorical column {name!r} must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind in "biu":
        got, out = "int", _int_hashes(arr, None)
    elif arr.dtype.kind == "f":
        got, out = "int", _float_hashes(arr, name)
    elif arr.dtype.kind in "USO":
        obj = arr.astype(object)
        missing = _is_missing(obj)
        present = obj[~missing]
        inferred = pd.api.types.infer_dtype(present, skipna=False) if present.size else "empty"
        out = np.full(arr.shape[0], MISSING_HASH, np.uint64)
        if inferred in ("string", "empty"):
            got = "str" if inferred == "string" or kind is None else kind
            if present.size:
                out[~missing] = _string_hashes(present)
        elif inferred in ("integer", "boolean"):
            got = "int"
            try:
                ints = present.astype(np.int64)
            except OverflowError:
                try:
                    ints = present.astype(np.uint64)
                except OverflowError:
                    raise ValueError(f"categorical column {name!r} holds integers beyond 64 "
                                     "bits; pass them as strings") from None
            out[~missing] = _int_hashes(ints, None)
        elif inferred in ("floating", "mixed-integer-float", "decimal"):
            got = "int"
            out[~missing] = _float_hashes(present.astype(np.float64), name)
        elif inferred == "bytes":
            got = "str"
            out[~missing] = _string_hashes(np.array([b.decode("utf-8", "surrogateescape")
                                                     for b in present], object))
        else:
            raise TypeError(f"categorical column {name!r} mixes strings and numbers (pandas "
                            f"infers {inferred!r}); give every value one type")
    else:
        raise TypeError(f"categorical column {name!r} has dtype {arr.dtype}, which holds no "
                        "categories (use integers or strings)")
    if kind is not None and got != kind:
        raise TypeError(f"categorical column {name!r} holds {_KIND_WORDS[got]} but the model "
                        f"was trained on {_KIND_WORDS[kind]}; pass the column as it was "
                        "trained")
    return out, got


# rows whose distinct values `column_labels` counts first
_LABEL_PROBE_ROWS = 4096
_KIND_WORDS = {"int": "numbers (integer ids)", "str": "strings"}


def column_labels(values: Any, hashes: np.ndarray, limit: int) -> dict[int, str]:
    """Up to `limit` distinct (hash -> text of the raw value) pairs of a column, to name the
    one-hot features of low-cardinality columns; {} when the column has more values."""
    import pandas as pd

    # more than `limit` values among the first rows: among all rows too (no full factorize
    # of a high-cardinality column, 30 ms per million rows)
    if pd.unique(hashes[:_LABEL_PROBE_ROWS]).size > limit:
        return {}
    codes, uniq = pd.factorize(hashes)
    if uniq.size > limit:
        return {}
    first = np.empty(uniq.size, np.int64)
    first[codes[::-1]] = np.arange(codes.size)[::-1]  # the last write is the first row
    raw = values.to_numpy(dtype=object) if isinstance(values, pd.Series) \
        else np.asarray(values, dtype=object)
    return {int(h): ("NaN" if h == MISSING_HASH else str(raw[i]))
            for h, i in zip(uniq.tolist(), first.tolist(), strict=True)}


def combine_hashes(columns: Sequence[np.ndarray]) -> np.ndarray:
    """uint64 (n,) key of a combination of categorical columns: a hash of the components'
    hashes (uint64 (n,) each) in the given order. Stable like the component hashes."""
    key = np.array(columns[0], np.uint64)
    for h in columns[1:]:
        key *= _COMBINE_MUL
        key += h
        _mix64(key, np.empty_like(key))
    return key


def _is_frame(data: Any) -> bool:
    return type(data).__name__ == "DataFrame" and hasattr(data, "dtypes")


def _auto_categorical(dtype: Any) -> bool:
    """pandas dtypes that are categorical without being named: category, object, string."""
    import pandas as pd

    return (isinstance(dtype, pd.CategoricalDtype) or dtype == np.dtype(object)
            or pd.api.types.is_string_dtype(dtype))


def _resolve(requested: Any, names: list[str], what: str) -> list[int]:
    """Column indices of the requested categorical columns (indices or names)."""
    if isinstance(requested, str | int | np.integer):
        requested = [requested]
    out: list[int] = []
    for c in requested:
        if isinstance(c, bool | np.bool_):
            raise TypeError(f"categorical_features takes column indices or names, got {c!r}")
        if isinstance(c, int | np.integer):
            if not 0 <= int(c) < len(names):
                raise ValueError(f"categorical feature index {int(c)} is out of range: "
                                 f"{what} has {len(names)} columns")
            out.append(int(c))
        elif isinstance(c, str):
            if c not in names:
                raise ValueError(f"categorical feature {c!r} is not a column of {what} "
                                 f"(columns: {names[:8]}{'...' if len(names) > 8 else ''})")
            out.append(names.index(c))
        else:
            raise TypeError(f"categorical_features takes column indices or names, got {c!r}")
    if len(set(out)) != len(out):
        raise ValueError("categorical_features names a column twice")
    return sorted(out)


def has_categorical_input(data: Any, requested: Any) -> bool:
    """Whether `data` has categorical columns: named ones, or pandas category / object /
    string columns."""
    if requested is not None and len(np.atleast_1d(np.asarray(requested, dtype=object))):
        return True
    return _is_frame(data) and any(_auto_categorical(t) for t in data.dtypes)


def split_columns(data: Any, requested: Any, feature_names: Sequence[str] | None,
                  one_hot_labels: int = 255) -> tuple[np.ndarray, list[str],
                                                      CategoricalColumns]:
    """(numeric float matrix (n, F_num) C-ordered, all input column names in order, the
    categorical columns) of dense 2-D input: a pandas DataFrame (category / object / string
    columns are categorical without being named) or a NumPy array (object or numeric)."""
    import pandas as pd

    if _is_frame(data):
        names = [str(c) for c in data.columns]
        if feature_names is not None:
            names = [str(x) for x in feature_names]
            if len(names) != data.shape[1]:
                raise ValueError(f"feature_names has {len(names)} names for {data.shape[1]} "
                                 "features")
        cat_idx = set(_resolve(requested, names, "the data") if requested is not None else [])
        cat_idx |= {i for i, t in enumerate(data.dtypes) if _auto_categorical(t)}
        cols = [data.iloc[:, i] for i in range(data.shape[1])]
    else:
        arr = np.asarray(data)
        if arr.ndim != 2:
            raise ValueError(f"data must be 2-D (n_rows, n_features), got shape {arr.shape}")
        names = ([str(x) for x in feature_names] if feature_names is not None
                 else [f"f{i}" for i in range(arr.shape[1])])
        if len(names) != arr.shape[1]:
            raise ValueError(f"feature_names has {len(names)} names for {arr.shape[1]} "
                             "features")
        cat_idx = set(_resolve(requested, names, "the data") if requested is not None else [])
        cols = [pd.Series(arr[:, i]) for i in range(arr.shape[1])]
    order = sorted(cat_idx)
    numeric = [i for i in range(len(names)) if i not in cat_idx]
    n = len(cols[0]) if cols else 0
    X = np.empty((n, len(numeric)), np.float64)
    for j, i in enumerate(numeric):
        col = cols[i]
        try:
            X[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan) \
                if isinstance(col, pd.Series) else np.asarray(col, np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"column {names[i]!r} is not numeric (dtype {col.dtype}); name it "
                            "in categorical_features to use it as a categorical feature") \
                from None
    hashes = np.empty((n, len(order)), np.uint64)
    kinds, labels = [], []
    for j, i in enumerate(order):
        hashes[:, j], kind = hash_column(cols[i], names[i])
        kinds.append(kind)
        labels.append(column_labels(cols[i], hashes[:, j], one_hot_labels))
    return X, names, CategoricalColumns([names[i] for i in order], order, kinds, hashes, labels)
