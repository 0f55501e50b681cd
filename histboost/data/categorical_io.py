"""Delimited text files with categorical columns (the CLI's ``--categorical``): read with
pandas, categorical columns kept as text (their values are hashed as strings, see
`histboost.data.categorical`), the others numeric."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .io import FileData, _base_ext, _check_path


def parse_columns(text: str) -> list[int | str]:
    """``--categorical`` COLS: comma-separated 0-based indices or header names."""
    out: list[int | str] = []
    for part in text.split(","):
        part = part.strip()
        if part:
            out.append(int(part) if part.lstrip("-").isdigit() else part)
    if not out:
        raise ValueError(f"--categorical needs column indices or names, got {text!r}")
    return out


def _name(frame: Any, col: int | str, what: str, path: str) -> Any:
    if isinstance(col, int):
        if not 0 <= col < frame.shape[1]:
            raise ValueError(f"{path}: {what} {col} is out of range ({frame.shape[1]} columns)")
        return frame.columns[col]
    if col not in frame.columns:
        raise ValueError(f"{path}: {what} {col!r} is not a column of the header "
                         f"({list(frame.columns)[:8]})")
    return col


def read_categorical_csv(path: str, categorical: Sequence[int | str], *,
                         label_column: int | str | None, weight_column: int | str | None = None,
                         header: bool | None = None, format: str = "auto") -> FileData:
    """FileData whose X is a pandas DataFrame: the categorical columns as text, the others
    float; indices count the file's columns (label and weight included)."""
    import pandas as pd

    path = _check_path(path)
    fmt = format if format != "auto" else ("tsv" if _base_ext(path) in (".tsv", ".tab")
                                           else "csv")
    if fmt == "libsvm":
        raise ValueError("--categorical needs a CSV / TSV file (libsvm holds numbers only)")
    sep = "\t" if fmt == "tsv" else ","
    frame = pd.read_csv(path, sep=sep, header=0 if header is not False else None,
                        dtype=str, keep_default_na=True)
    if header is False:
        frame.columns = [f"f{i}" for i in range(frame.shape[1])]
    cats = {_name(frame, c, "categorical column", path) for c in categorical}
    label = None if label_column is None else _name(frame, label_column, "label column", path)
    weight = None if weight_column is None else _name(frame, weight_column, "weight column",
                                                      path)
    if label in cats or (weight is not None and weight in cats):
        raise ValueError(f"{path}: the label / weight column cannot be categorical")

    def numbers(col: Any) -> np.ndarray:
        try:
            return pd.to_numeric(frame[col]).to_numpy(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{path}: column {col!r} is not numeric; name it in --categorical "
                             "to use it as a categorical feature") from None

    y = None if label is None else numbers(label)
    w = None if weight is None else numbers(weight)
    features = [c for c in frame.columns if c not in (label, weight)]
    X = pd.DataFrame({c: (frame[c] if c in cats else numbers(c)) for c in features})
    X = X.astype({c: object for c in features if c in cats})
    return FileData(X, y, None, w, [str(c) for c in features])


