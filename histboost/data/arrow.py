"""Arrow-native input: pyarrow Tables / RecordBatches / RecordBatchReaders, polars DataFrames
and anything else exporting the Arrow C stream interface (``__arrow_c_stream__``), turned into
the float matrix `Dataset` and `Booster.predict` use, column by column, without pandas.

Numeric and boolean columns only; nulls become NaN (missing values). All-float32 tables stay
float32, as float32 arrays do; anything else becomes float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _module(data: Any) -> str:
    return type(data).__module__.split(".")[0]


def is_arrow_like(data: Any) -> bool:
    """pyarrow / polars data, or an Arrow C stream exporter that is not a pandas object
    (pandas frames keep their own conversion)."""
    mod = _module(data)
    if mod == "polars":
        return type(data).__name__ in ("DataFrame", "LazyFrame")
    if mod == "pyarrow":
        return hasattr(data, "__arrow_c_stream__") or hasattr(data, "read_all")
    return mod != "pandas" and (hasattr(data, "__arrow_c_stream__")
                                or hasattr(data, "__arrow_c_array__"))


def to_matrix(data: Any) -> tuple[np.ndarray, list[str]] | None:
    """(C-ordered float matrix, column names) of Arrow-like `data`; None for other data."""
    if not is_arrow_like(data):
        return None
    if _module(data) == "polars" and type(data).__name__ == "LazyFrame":
        data = data.collect()
    try:
        import pyarrow as pa
    except ImportError:
        if _module(data) == "polars":
            return _polars_matrix(data)
        raise TypeError(f"{type(data).__name__} input needs pyarrow (pip install pyarrow)") \
            from None
    if isinstance(data, pa.RecordBatchReader):
        table = data.read_all()
    elif isinstance(data, pa.RecordBatch):
        table = pa.Table.from_batches([data])
    elif isinstance(data, pa.Table):
        table = data
    elif _module(data) == "polars" and hasattr(data, "to_arrow"):
        table = data.to_arrow()
    else:
        table = pa.table(data)
    return _table_matrix(table)


def _check_types(names: list[str], kinds: list[str], types: list[Any]) -> None:
    bad = [n for n, k in zip(names, kinds, strict=True) if k not in "biuf"]
    if bad:
        t = types[names.index(bad[0])]
        raise TypeError(f"columns {bad[:5]} are not numeric (type {t}); encode categorical "
                        "columns as numbers first")


def _table_matrix(table: Any) -> tuple[np.ndarray, list[str]]:
    import pyarrow as pa

    names = [str(c) for c in table.column_names]
    types = [f.type for f in table.schema]
    kinds = ["b" if pa.types.is_boolean(t) else "i" if pa.types.is_integer(t) else
             "f" if pa.types.is_floating(t) else "?" for t in types]
    _check_types(names, kinds, types)
    dtype = np.float32 if types and all(t == pa.float32() for t in types) else np.float64
    target = pa.float32() if dtype == np.float32 else pa.float64()
    X = np.empty((table.num_rows, len(names)), dtype=dtype)
    for j, col in enumerate(table.columns):
        col = col.cast(target) if col.type != target else col
        for chunk, start in zip(col.chunks, np.cumsum([0] + [len(c) for c in col.chunks]),
                                strict=False):
            if chunk.null_count:
                chunk = chunk.fill_null(np.nan)
            X[start:start + len(chunk), j] = chunk.to_numpy(zero_copy_only=False)
    return X, names


def _polars_matrix(df: Any) -> tuple[np.ndarray, list[str]]:
    """polars without pyarrow: polars' own conversion (nulls become NaN)."""
    import polars as pl

    names = [str(c) for c in df.columns]
    kinds = ["b" if t == pl.Boolean else "i" if t.is_integer() else
             "f" if t.is_float() else "?" for t in df.dtypes]
    _check_types(names, kinds, list(df.dtypes))
    f32 = bool(df.dtypes) and all(t == pl.Float32 for t in df.dtypes)
    target = pl.Float32 if f32 else pl.Float64
    X = df.select(pl.all().cast(target).fill_null(float("nan"))).to_numpy()
    return np.ascontiguousarray(X), names
