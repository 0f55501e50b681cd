"""A model with categorical features predicting on the GPU from raw values
(`Booster.predict` of a model trained with ``device="cuda"``, or given a CUDA tensor).

The model's final tables and derived features go to the device once (`DeviceCategorical`);
each prediction then builds the extended matrix there, column-major, for the raw-feature
traversal (`histboost.kernels.cuda.predict`):

- host input (a DataFrame, an array, a Dataset): the categorical values are hashed on the host
  (strings must be: pandas' SipHash; the hashes are those of training) and uploaded with the
  numeric columns, 8 bytes per value;
- device input (a torch CUDA tensor, or anything with DLPack, (n, input columns) in the
  model's input order): categorical columns hold integer ids (NaN: missing) and are hashed on
  the device; a column trained on strings raises;
- the table lookups (binary search of the rows' keys, combinations hashed from their
  columns), the statistics, frequencies and one-hot indicators: `histboost.kernels.cuda.
  ctr_tables`, the host's float64 expressions, so the matrix, and the margins, are the CPU's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .model import CategoricalModel


class DeviceCategorical:
    """The device copy of a `CategoricalModel` (tensors on `device`): every table's keys
    (int64 views of the uint64 hashes, concatenated, `key_ptr` int64 (T + 1,) delimiting
    them), counts float64 (M,), sums float64 (M, channels), columns int64 (T, W) and widths;
    per derived feature its kind, table, statistic terms, column and one-hot hash."""

    def __init__(self, model: CategoricalModel, device: Any) -> None:
        import torch

        from ..kernels.cuda import ctr_tables as k

        self.model = model
        self._torch = torch
        self._k = k
        # the device as the tensors report it ("cuda" -> "cuda:0"): launches compare it
        self.device = torch.zeros(1, device=device).device
        tables = model.tables
        channels = model.settings.n_channels
        sizes = [t.hashes.shape[0] for t in tables]
        key_ptr = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
        keys = np.concatenate([t.hashes for t in tables] or [np.zeros(0, np.uint64)])
        counts = np.concatenate([t.counts for t in tables] or [np.zeros(0)])
        sums = np.concatenate([t.sums for t in tables] or [np.zeros((0, channels))])
        width = max([len(t.columns) for t in tables] or [1])
        columns = np.zeros((max(len(tables), 1), width), np.int64)
        for j, t in enumerate(tables):
            columns[j, :len(t.columns)] = t.columns
        chan, add, den = model.settings.terms()
        derived = model.derived
        kind = np.array([{"ctr": k.KIND_CTR, "freq": k.KIND_FREQ, "onehot": k.KIND_ONEHOT}[
            d.kind] for d in derived], np.int32)
        stat = np.array([max(d.stat, 0) for d in derived], np.int64)
        up = self._tensor
        self.key_ptr = up(key_ptr)
        # an empty table set still needs one (unused) element per array on the device
        self.keys = up(keys.view(np.int64) if keys.size else np.zeros(1, np.int64))
        self.counts = up(counts if counts.size else np.zeros(1))
        self.sums = up(sums.reshape(-1, channels) if sums.size else np.zeros((1, channels)))
        self.table_columns = up(columns)
        self.table_width = up(np.array([len(t.columns) for t in tables], np.int64))
        self.kind = up(kind)
        self.table = up(np.array([max(d.table, 0) for d in derived], np.int64))
        self.channel = up(chan[stat] if chan.size else np.zeros(len(derived), np.int64))
        self.add = up(add[stat] if add.size else np.zeros(len(derived)))
        self.denominator = up(den[stat] if den.size else np.ones(len(derived)))
        self.column = up(np.array([max(d.column, 0) for d in derived], np.int64))
        self.onehot = up(np.array([d.hash for d in derived], np.uint64).view(np.int64))
        self.positions = up(np.array(model.positions, np.int64))

    def _tensor(self, a: np.ndarray) -> Any:
        return self._torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

    # -- input -------------------------------------------------------------------------------
    def split_input(self, data: Any) -> tuple[Any, Any]:
        """(numeric float64 (n, F_num), hashes int64 (n, C)) device tensors of raw input: a
        torch tensor on the device (ids hashed there) or host input (hashed on the host,
        `CategoricalModel.split_input`)."""
        torch = self._torch
        if isinstance(data, torch.Tensor):
            return self._split_tensor(data)
        X, H = self.model.split_input(data)
        return self._tensor(X), self._tensor(H.view(np.int64))

    def _split_tensor(self, data: Any) -> tuple[Any, Any]:
        torch = self._torch
        model = self.model
        n_in = len(model.input_names)
        if data.ndim != 2 or data.shape[1] != n_in:
            raise ValueError(f"data has shape {tuple(data.shape)} but the model was trained on "
                             f"{n_in} columns ({len(model.columns)} of them categorical)")
        for c, kind in enumerate(model.kinds):
            if kind != "int":
                raise TypeError(f"categorical column {model.columns[c]!r} was trained on "
                                "strings: pass the data from the host (strings are hashed "
                                "there); device input holds integer ids")
        data = data.to(self.device).contiguous()
        numeric = data[:, model.numeric].to(torch.float64) if model.numeric \
            else torch.zeros((data.shape[0], 0), dtype=torch.float64, device=self.device)
        n, C = int(data.shape[0]), len(model.columns)
        hashes = torch.empty((n, C), dtype=torch.int64, device=self.device)
        if n == 0 or C == 0:
            return numeric, hashes
        from ..kernels.cuda._common import THREADS, grid

        k = self._k
        if data.dtype.is_floating_point:
            bad = torch.zeros(C, dtype=torch.int32, device=self.device)
            k.HASH_FLOAT_IDS.launch(grid(n * C), THREADS, self.device, data.to(torch.float64),
                                    self.positions, hashes, bad)
            flagged = np.flatnonzero(bad.cpu().numpy())
            if flagged.size:
                name = model.columns[int(flagged[0])]
                raise ValueError(f"categorical column {name!r} holds a non-integer value; a "
                                 "float column is categorical only when its values are "
                                 "integers (ids)")
        elif data.dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
                            torch.bool):
            k.HASH_INT_IDS.launch(grid(n * C), THREADS, self.device, data.to(torch.int64),
                                  self.positions, hashes)
        else:
            raise TypeError(f"device input of dtype {data.dtype} holds no categories (use a "
                            "float or integer tensor)")
        return numeric, hashes

    # -- the extended matrix -----------------------------------------------------------------
    def columns(self, numeric: Any, hashes: Any) -> Any:
        """The extended matrix, column-major: float64 (n_features, n) device tensor, from
        numeric float64 (n, F_num) and hashes int64 (n, C) device tensors."""
        from ..kernels.cuda._common import THREADS, grid

        torch = self._torch
        model = self.model
        n = int(numeric.shape[0])
        XT = torch.empty((model.n_features, n), dtype=torch.float64, device=self.device)
        XT[:model.n_numeric] = numeric.t()
        n_tables, n_derived = len(model.tables), len(model.derived)
        if n == 0 or n_derived == 0:
            return XT
        k = self._k
        entries = torch.empty((n, max(n_tables, 1)), dtype=torch.int64, device=self.device)
        if n_tables:
            k.TABLE_ROWS.launch(grid(n * n_tables), THREADS, self.device, hashes,
                                self.table_columns, self.table_width, self.keys, self.key_ptr,
                                entries)
        k.DERIVED_VALUES.launch(grid(n * n_derived), THREADS, self.device, hashes, entries,
                                self.kind, self.table, self.channel, self.add,
                                self.denominator, self.column, self.onehot, self.counts,
                                self.sums, float(max(model.n_train, 1)), XT,
                                model.n_numeric)
        return XT
