"""The categorical part of a model: how raw input columns become the features its trees split
on, with the final tables of the target statistics.

A model with categorical features splits on an extended feature matrix (float64):

    [numeric input columns, in input order | derived features, in model order]

Derived features (`DerivedFeature`):

- ``ctr``: statistic `stat` (see `CtrSettings.statistics`) of table `table`, from the table's
  counts over all training rows (unseen categories: count 0, the prior alone);
- ``freq``: the category's share of the training rows, count / n_train (0 unseen);
- ``onehot``: 1.0 when categorical column `column` holds the category of hash `hash`, else 0.

A table (`CtrTable`) belongs to one categorical column or to a combination of several; its key
per row is the column's hash, or `combine_hashes` of the components' hashes in column order.

JSON (``learner["categorical"]``)::

    {"input_names": [...], "numeric": [input positions], "columns": [{"name", "position",
     "kind"}], "n_train": int, "settings": CtrSettings.to_dict(),
     "tables": [{"columns": [c...], "hashes": [uint64...], "counts": [...],
                 "sums": [[channel sums] per entry]}],
     "derived": [{"kind": "ctr", "table": t, "stat": j} | {"kind": "freq", "table": t}
                 | {"kind": "onehot", "column": c, "hash": h, "label": str}]}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.categorical import CategoricalColumns, combine_hashes, hash_column
from .settings import CtrSettings


@dataclass
class CtrTable:
    """Final statistics of one categorical column or combination over all training rows.

    columns: categorical column indices (sorted); hashes: uint64 (m,) sorted keys; counts:
    float64 (m,); sums: float64 (m, n_channels)."""

    columns: tuple[int, ...]
    hashes: np.ndarray
    counts: np.ndarray
    sums: np.ndarray

    @classmethod
    def from_keys(cls, columns: tuple[int, ...], keys: np.ndarray, counts: np.ndarray,
                  sums: np.ndarray) -> CtrTable:
        order = np.argsort(keys, kind="stable")
        return cls(tuple(columns), keys[order], counts[order], sums[order])

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(counts float64 (n,), sums float64 (n, n_channels)) of each key, zeros unseen."""
        m = self.hashes.shape[0]
        idx = np.searchsorted(self.hashes, keys)
        idx_c = np.minimum(idx, max(m - 1, 0))
        found = (idx < m) & (self.hashes[idx_c] == keys) if m else np.zeros(keys.shape, bool)
        counts = np.where(found, self.counts[idx_c] if m else 0.0, 0.0)
        sums = np.zeros((keys.shape[0], self.sums.shape[1]))
        if m:
            sums[found] = self.sums[idx_c[found]]
        return counts, sums

    def to_dict(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "hashes": [int(h) for h in self.hashes],
                "counts": self.counts.tolist(), "sums": self.sums.tolist()}

    @classmethod
    def from_dict(cls, d: dict[str, Any], n_channels: int, n_columns: int) -> CtrTable:
        columns = tuple(int(c) for c in d["columns"])
        if not columns or any(not 0 <= c < n_columns for c in columns) or \
                list(columns) != sorted(set(columns)):
            raise ValueError(f"table columns {list(columns)} are not sorted categorical column "
                             "indices")
        hashes = np.array([int(h) for h in d["hashes"]], dtype=np.uint64)
        counts = np.asarray(d["counts"], np.float64).reshape(-1)
        sums = np.asarray(d["sums"], np.float64).reshape(-1, n_channels) if hashes.size \
            else np.zeros((0, n_channels))
        if counts.shape[0] != hashes.shape[0] or sums.shape[0] != hashes.shape[0]:
            raise ValueError("table hashes, counts and sums differ in length")
        if hashes.size > 1 and not np.all(hashes[1:] > hashes[:-1]):
            raise ValueError("table hashes are not sorted and unique")
        if not (np.all(np.isfinite(counts)) and np.all(np.isfinite(sums))):
            raise ValueError("table counts or sums are not finite")
        return cls(columns, hashes, counts, sums)


@dataclass
class DerivedFeature:
    """kind: "ctr" (table, stat), "freq" (table) or "onehot" (column, hash, label)."""

    kind: str
    table: int = -1
    stat: int = -1
    column: int = -1
    hash: int = 0
    label: str = ""

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "ctr":
            return {"kind": "ctr", "table": self.table, "stat": self.stat}
        if self.kind == "freq":
            return {"kind": "freq", "table": self.table}
        return {"kind": "onehot", "column": self.column, "hash": self.hash, "label": self.label}


@dataclass
class CategoricalModel:
    """input_names: every input column's name; numeric: input positions of the numeric
    columns; columns / positions / kinds: the categorical columns' names, input positions and
    kinds ("int" / "str"); n_train: training rows."""

    input_names: list[str]
    numeric: list[int]
    columns: list[str]
    positions: list[int]
    kinds: list[str]
    n_train: int
    settings: CtrSettings
    tables: list[CtrTable] = field(default_factory=list)
    derived: list[DerivedFeature] = field(default_factory=list)

    # -- layout --------------------------------------------------------------------------
    @property
    def n_numeric(self) -> int:
        return len(self.numeric)

    @property
    def n_features(self) -> int:
        """Columns of the extended matrix the trees split on."""
        return self.n_numeric + len(self.derived)

    def table_name(self, t: int) -> str:
        return "*".join(self.columns[c] for c in self.tables[t].columns)

    def feature_names(self) -> list[str]:
        stats = self.settings.stat_names()
        out = [self.input_names[i] for i in self.numeric]
        for d in self.derived:
            if d.kind == "ctr":
                out.append(f"{self.table_name(d.table)}:ctr_{stats[d.stat]}")
            elif d.kind == "freq":
                out.append(f"{self.table_name(d.table)}:freq")
            else:
                out.append(f"{self.columns[d.column]}=={d.label}")
        return out

    def table_index(self, columns: tuple[int, ...]) -> int:
        """Index of the table of `columns`, -1 when the model has none."""
        for t, tab in enumerate(self.tables):
            if tab.columns == columns:
                return t
        return -1

    def input_importance(self, importance: np.ndarray) -> np.ndarray:
        """float64 (n_inputs,) importances of the input columns from those of the extended
        matrix's features (n_features,): a derived feature's share goes to its categorical
        column, split evenly over the columns of a combination."""
        out = np.zeros(len(self.input_names))
        out[self.numeric] = importance[:self.n_numeric]
        for d, v in zip(self.derived, importance[self.n_numeric:], strict=True):
            cols = [d.column] if d.kind == "onehot" else list(self.tables[d.table].columns)
            for c in cols:
                out[self.positions[c]] += v / len(cols)
        return out

    # -- raw input -----------------------------------------------------------------------
    def split_input(self, data: Any) -> tuple[np.ndarray, np.ndarray]:
        """(numeric float64 (n, F_num), categorical hashes uint64 (n, C)) of raw input: a
        Dataset, a pandas DataFrame (columns by name) or a 2-D array (columns by position,
        object dtype for string categories). Raises naming the column when one is missing
        or holds another kind of values than in training."""
        from ..data.dataset import Dataset

        if isinstance(data, Dataset):
            return self._split_dataset(data)
        import pandas as pd

        n_in = len(self.input_names)
        if type(data).__name__ == "DataFrame" and hasattr(data, "columns"):
            have = [str(c) for c in data.columns]
            missing = [c for c in self.input_names if c not in have]
            if missing:
                kind = "categorical " if missing[0] in self.columns else ""
                raise ValueError(f"{kind}column {missing[0]!r} is missing from the data "
                                 f"({len(missing)} of the model's columns are)")
            cols = [data.iloc[:, have.index(c)] for c in self.input_names]
        else:
            arr = np.asarray(data)
            if arr.ndim != 2:
                raise ValueError(f"data must be 2-D (n_rows, n_features), got shape "
                                 f"{arr.shape}")
            if arr.shape[1] != n_in:
                raise ValueError(f"data has {arr.shape[1]} columns but the model was trained "
                                 f"on {n_in} ({len(self.columns)} of them categorical)")
            cols = [pd.Series(arr[:, i]) for i in range(n_in)]
        n = len(cols[0]) if cols else 0
        X = np.empty((n, self.n_numeric), np.float64)
        for j, i in enumerate(self.numeric):
            col = cols[i]
            if isinstance(col.dtype, pd.CategoricalDtype) or (
                    col.dtype.kind not in "biuf" and not _floats(col)):
                raise TypeError(f"column {self.input_names[i]!r} is numeric in the model but "
                                f"holds {col.dtype} values")
            X[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
        H = np.empty((n, len(self.columns)), np.uint64)
        for c, i in enumerate(self.positions):
            H[:, c], _ = hash_column(cols[i], self.columns[c], self.kinds[c])
        return X, H

    def _split_dataset(self, data: Any) -> tuple[np.ndarray, np.ndarray]:
        cat: CategoricalColumns | None = data.categorical
        names = data.feature_names
        if cat is None or cat.names != self.columns:
            raise ValueError(f"the Dataset's categorical columns "
                             f"{[] if cat is None else cat.names} differ from the model's "
                             f"{self.columns}")
        if list(names) != self.input_names:
            raise ValueError(f"the Dataset's columns differ from the model's "
                             f"({self.input_names[:5]}...)")
        for c, (k, want) in enumerate(zip(cat.kinds, self.kinds, strict=True)):
            if k != want and not _all_missing(cat.hashes[:, c]):
                raise TypeError(f"categorical column {self.columns[c]!r} holds {k} values but "
                                f"the model was trained on {want} values")
        return np.asarray(data.data, np.float64), cat.hashes

    # -- extended matrix -----------------------------------------------------------------
    def table_keys(self, t: int, hashes: np.ndarray) -> np.ndarray:
        cols = self.tables[t].columns
        return hashes[:, cols[0]].copy() if len(cols) == 1 else \
            combine_hashes([hashes[:, c] for c in cols])

    def derived_values(self, hashes: np.ndarray, features: range | list[int]) -> np.ndarray:
        """float64 (n, len(features)) values of derived features (indices into `derived`)
        from categorical hashes (n, C), through the final tables."""
        n = hashes.shape[0]
        out = np.empty((n, len(features)), np.float64)
        looked: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        stats: dict[int, np.ndarray] = {}
        for j, k in enumerate(features):
            d = self.derived[k]
            if d.kind == "onehot":
                out[:, j] = hashes[:, d.column] == np.uint64(d.hash)
                continue
            if d.table not in looked:
                looked[d.table] = self.tables[d.table].lookup(self.table_keys(d.table, hashes))
            counts, sums = looked[d.table]
            if d.kind == "freq":
                out[:, j] = counts / max(self.n_train, 1)
            else:
                if d.table not in stats:
                    stats[d.table] = self.settings.statistics(counts, sums)
                out[:, j] = stats[d.table][:, d.stat]
        return out

    def matrix(self, data: Any) -> np.ndarray:
        """The extended float64 (n, n_features) matrix of raw input (see `split_input`)."""
        X, H = self.split_input(data)
        return self.extend(X, H)

    def extend(self, X: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.hstack(
            [X, self.derived_values(hashes, range(len(self.derived)))]))

    # -- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"input_names": list(self.input_names), "numeric": list(self.numeric),
                "columns": [{"name": n, "position": p, "kind": k} for n, p, k in
                            zip(self.columns, self.positions, self.kinds, strict=True)],
                "n_train": self.n_train, "settings": self.settings.to_dict(),
                "tables": [t.to_dict() for t in self.tables],
                "derived": [d.to_dict() for d in self.derived]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CategoricalModel:
        names = [str(x) for x in d["input_names"]]
        numeric = [int(i) for i in d["numeric"]]
        cols = d["columns"]
        columns = [str(c["name"]) for c in cols]
        positions = [int(c["position"]) for c in cols]
        kinds = [str(c["kind"]) for c in cols]
        if sorted(numeric + positions) != list(range(len(names))):
            raise ValueError("numeric and categorical positions do not cover the input columns")
        if any(k not in ("int", "str") for k in kinds):
            raise ValueError(f"categorical column kinds must be 'int' or 'str', got {kinds}")
        if [names[p] for p in positions] != columns:
            raise ValueError("categorical column names differ from the input names")
        settings = CtrSettings.from_dict(d["settings"])
        tables = [CtrTable.from_dict(t, settings.n_channels, len(columns)) for t in d["tables"]]
        derived = []
        for raw in d["derived"]:
            kind = raw["kind"]
            if kind in ("ctr", "freq"):
                t = int(raw["table"])
                s = int(raw.get("stat", 0))
                if not 0 <= t < len(tables) or not 0 <= s < settings.n_stats:
                    raise ValueError(f"derived feature {raw} refers to no table / statistic")
                derived.append(DerivedFeature(kind, table=t, stat=s if kind == "ctr" else -1))
            elif kind == "onehot":
                c = int(raw["column"])
                if not 0 <= c < len(columns):
                    raise ValueError(f"derived feature {raw} refers to no categorical column")
                derived.append(DerivedFeature("onehot", column=c, hash=int(raw["hash"]),
                                              label=str(raw.get("label", ""))))
            else:
                raise ValueError(f"unknown derived feature kind {kind!r}")
        n_train = int(d["n_train"])
        return cls(names, numeric, columns, positions, kinds, n_train, settings, tables,
                   derived)


def _floats(col: Any) -> bool:
    """Whether an object column converts to floats (numbers and missing values only)."""
    try:
        col.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        return False
    return True


def _all_missing(h: np.ndarray) -> bool:
    return bool(np.all(h == 0))
