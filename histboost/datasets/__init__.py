"""Small real datasets bundled with histboost (see data/LICENSE-lightgbm-examples).

- ``load_higgs_sample(split)``: 7000 train / 500 test rows of the HIGGS physics benchmark,
  28 features, binary label (from LightGBM's examples, MIT licence).
- ``load_multiclass_sample(split)``: 7000 / 500 rows, 28 features, 5 classes (same source).
- ``load_adult(split)``: the UCI Adult census data, 32,561 train / 16,281 test rows, 6 numeric
  and 8 categorical (string) columns, binary label (see data/LICENSE-adult, CC BY 4.0).
"""

from __future__ import annotations

import gzip
from importlib import resources
from typing import Any

import numpy as np

_SPLITS = ("train", "test")


def _load_tsv(name: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
    ref = resources.files(__package__).joinpath("data", f"{name}.{split}.gz")
    with ref.open("rb") as raw, gzip.open(raw, "rt") as f:
        table = np.loadtxt(f, dtype=np.float64, delimiter="\t")
    return np.ascontiguousarray(table[:, 1:]), table[:, 0].copy()


def load_higgs_sample(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """(X float64 (n, 28), y float64 (n,) in {0, 1}) of the bundled HIGGS sample."""
    return _load_tsv("binary", split)


def load_multiclass_sample(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """(X float64 (n, 28), y float64 (n,) in {0..4}) of the bundled multiclass sample."""
    return _load_tsv("multiclass", split)


def load_adult(split: str = "train") -> tuple[Any, np.ndarray]:
    """(X pandas DataFrame (n, 14): 6 int64 and 8 string columns, missing values NaN;
    y float64 (n,) in {0, 1}, income above 50K) of the bundled Adult census data."""
    import pandas as pd

    if split not in _SPLITS:
        raise ValueError(f"split must be one of {_SPLITS}, got {split!r}")
    ref = resources.files(__package__).joinpath("data", f"adult.{split}.csv.gz")
    with ref.open("rb") as raw:
        frame = pd.read_csv(raw, compression="gzip")
    y = frame.pop("income_gt_50k").to_numpy(np.float64)
    return frame, y


__all__ = ["load_adult", "load_higgs_sample", "load_multiclass_sample"]
