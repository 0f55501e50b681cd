"""CSR batches of sparse keys: one row per (sample, slot), keys as int64.

Layout (HugeCTR's sparse input): for a batch of ``B`` samples with ``S`` slots, row
``b * S + s`` holds the keys of slot ``s`` of sample ``b``; its keys are
``keys[row_offsets[b*S + s] : row_offsets[b*S + s + 1]]``. ``row_offsets`` therefore has
``B*S + 1`` entries, starts at 0, never decreases and ends at ``len(keys)``. A row may be empty.

The builders here run on the host with NumPy and return :class:`CSRBatch` objects holding
NumPy arrays; :meth:`CSRBatch.to_torch` moves them to a torch device.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._hashing import EMPTY_KEY, mix64_numpy
from ._keys import INT64_MAX, as_int64_array, as_int64_tensor, int64_key


class CSRValidationError(ValueError):
    """A CSR batch is malformed (wrong lengths, decreasing offsets, bad dtype, reserved key)."""


@dataclass(frozen=True)
class CSRBatch:
    """A batch of sparse keys in CSR form.

    Attributes:
        row_offsets: int64, shape ``[batch_size * num_slots + 1]``.
        keys: int64, shape ``[nnz]``.
        num_slots: number of slots ``S`` per sample.

    Arrays may be NumPy arrays or torch tensors (see :meth:`to_torch`).
    """

    row_offsets: Any
    keys: Any
    num_slots: int

    @property
    def batch_size(self) -> int:
        return (len(self.row_offsets) - 1) // self.num_slots

    @property
    def nnz(self) -> int:
        return len(self.keys)

    def validate(self) -> CSRBatch:
        """Check the invariants and return ``self``; raises :class:`CSRValidationError`."""
        validate_csr(self.row_offsets, self.keys, self.num_slots)
        return self

    def to_torch(self, device: Any = None) -> CSRBatch:
        """Return the same batch with both arrays as int64 torch tensors on ``device``."""
        return CSRBatch(as_int64_tensor(self.row_offsets, "row_offsets", device),
                        as_int64_tensor(self.keys, "keys", device), self.num_slots)

    def numpy(self) -> CSRBatch:
        """Return the same batch with both arrays as int64 NumPy arrays."""
        return CSRBatch(_as_numpy(self.row_offsets), _as_numpy(self.keys), self.num_slots)

    def slice_samples(self, start: int, stop: int) -> CSRBatch:
        """Samples ``[start, stop)`` as a new batch (offsets rebased to 0)."""
        ro = _as_numpy(self.row_offsets)
        lo, hi = start * self.num_slots, stop * self.num_slots
        sub = ro[lo : hi + 1]
        keys = _as_numpy(self.keys)[sub[0] : sub[-1]]
        return CSRBatch(sub - sub[0], keys, self.num_slots)


def _as_numpy(a: Any, what: str = "keys") -> np.ndarray:
    """int64 NumPy array of integers `a` (bools, floats and values beyond int64 raise)."""
    return as_int64_array(a, what)


def validate_csr(row_offsets: Any, keys: Any, num_slots: int) -> None:
    """Check a CSR batch; raise :class:`CSRValidationError` with the first problem found.

    Args:
        row_offsets: int64 array or tensor, shape ``[B*S + 1]``.
        keys: int64 array or tensor, shape ``[nnz]``.
        num_slots: ``S`` (> 0).

    Checks: integer dtypes (not bool), 1-D shapes, ``len(row_offsets) - 1`` divisible by
    ``S``, first offset 0, offsets non-decreasing, last offset ``== len(keys)``, unsigned keys
    below ``2**63`` (larger ones have no int64 value), no key equal to the reserved empty-slot
    sentinel ``-2**63``. Tensors on a GPU are checked there (one sync).
    """
    if (isinstance(num_slots, bool) or not isinstance(num_slots, int | np.integer)
            or num_slots <= 0):
        raise CSRValidationError(f"num_slots must be a positive int, got {num_slots!r}")
    for name, a in (("row_offsets", row_offsets), ("keys", keys)):
        dt = str(a.dtype)
        if "int" not in dt:
            raise CSRValidationError(f"{name} must be an integer array (int64), got dtype {dt}")
        if a.ndim != 1:
            raise CSRValidationError(f"{name} must be 1-D, got shape {tuple(a.shape)}")
        if dt.endswith("uint64"):
            try:
                as_int64_array(a, name) if not hasattr(a, "detach") else as_int64_tensor(a, name)
            except ValueError as e:
                raise CSRValidationError(str(e)) from None
    n_rows = len(row_offsets) - 1
    if n_rows < 0:
        raise CSRValidationError("row_offsets must have at least one entry (the leading 0)")
    if n_rows % num_slots:
        raise CSRValidationError(
            f"len(row_offsets) - 1 = {n_rows} is not a multiple of num_slots = {num_slots}: "
            "row_offsets needs batch_size * num_slots + 1 entries"
        )
    if hasattr(row_offsets, "detach"):
        import torch

        ro, k = row_offsets, keys
        dec = ro[1:] < ro[:-1]
        # Gather every flag into one tensor so a GPU batch costs a single device->host sync.
        flags = torch.stack([
            ro[0],
            ro[-1],
            dec.any().to(ro.dtype) if n_rows > 0 else ro.new_zeros(()),
            (k == torch.iinfo(torch.int64).min).any().to(ro.dtype) if len(k) else ro.new_zeros(()),
        ]).tolist()
        first, last, bad_step, reserved = flags[0], flags[1], bool(flags[2]), bool(flags[3])
        step_at = int(torch.nonzero(dec)[0, 0]) if bad_step else -1
    else:
        ro = np.asarray(row_offsets)
        k = np.asarray(keys)
        first, last = int(ro[0]), int(ro[-1])
        steps = np.flatnonzero(ro[1:] < ro[:-1]) if n_rows > 0 else np.empty(0, np.int64)
        bad_step = steps.size > 0
        step_at = int(steps[0]) if bad_step else -1
        reserved = bool((k.astype(np.int64, copy=False) == EMPTY_KEY).any()) if k.size else False
    if first != 0:
        raise CSRValidationError(f"row_offsets[0] must be 0, got {first}")
    if bad_step:
        raise CSRValidationError(
            f"row_offsets must be non-decreasing; row_offsets[{step_at + 1}] < "
            f"row_offsets[{step_at}]"
        )
    if last != len(keys):
        raise CSRValidationError(
            f"row_offsets[-1] = {last} must equal len(keys) = {len(keys)}"
        )
    if reserved:
        raise CSRValidationError(
            "key -2**63 is reserved as the hash table's empty-slot marker; remap it"
        )


def csr_from_lists(samples: Sequence[Sequence[Any]], num_slots: int | None = None) -> CSRBatch:
    """Build a batch from nested Python lists.

    Args:
        samples: ``samples[b][s]`` is the content of slot ``s`` of sample ``b``: an int (one
            key), ``None`` (empty slot) or an iterable of ints (a bag of keys, possibly empty,
            repeats allowed). Keys are Python or NumPy integers within int64; a bool, float or
            string raises TypeError, an integer beyond int64 ValueError.
        num_slots: slot count; inferred from the first sample when ``None``. Every sample must
            have exactly this many slots.

    Returns:
        :class:`CSRBatch` with NumPy int64 arrays.
    """
    if num_slots is None:
        if not samples:
            raise CSRValidationError("cannot infer num_slots from an empty batch; pass it")
        num_slots = len(samples[0])
    offsets = [0]
    keys: list[int] = []
    for b, sample in enumerate(samples):
        if len(sample) != num_slots:
            raise CSRValidationError(
                f"sample {b} has {len(sample)} slots, expected num_slots={num_slots}"
            )
        for s, slot in enumerate(sample):
            where = f"sample {b} slot {s}"
            if slot is None:
                pass
            elif isinstance(slot, int | np.integer | bool | np.bool_):
                keys.append(int64_key(slot, f"{where}: keys"))
            elif isinstance(slot, str | bytes) or not hasattr(slot, "__iter__"):
                raise TypeError(f"{where}: expected an int key, None or an iterable of int "
                                f"keys, got {slot!r}")
            else:
                keys.extend(int64_key(k, f"{where}: keys") for k in slot)
            offsets.append(len(keys))
    batch = CSRBatch(np.asarray(offsets, np.int64), np.asarray(keys, np.int64), num_slots)
    return batch.validate()


def stable_hash_strings(values: Iterable[Any], salt: int = 0) -> np.ndarray:
    """Deterministic 63-bit keys for arbitrary values (strings, floats, ...).

    Python's ``hash`` is salted per process, so it cannot give the same key on every worker;
    this combines two CRC32s of differently prefixed UTF-8 encodings of ``str(value)`` into
    62 bits, seeded with ``salt`` so that equal strings in different columns get different
    keys. Returns int64 of shape ``[len(values)]``, all non-negative.
    """
    out = []
    for v in values:
        s = str(v).encode("utf-8")
        hi = zlib.crc32(b"\x01" + s, salt & 0xFFFFFFFF)
        lo = zlib.crc32(b"\x02" + s, (salt >> 32) & 0xFFFFFFFF)
        out.append(((hi & 0x3FFFFFFF) << 32) | lo)
    return np.asarray(out, dtype=np.int64)


def csr_from_pandas(
    df: Any,
    columns: Sequence[str] | None = None,
    salt_columns: bool = True,
) -> CSRBatch:
    """Build a batch from DataFrame columns, one slot per column.

    Args:
        df: a pandas DataFrame.
        columns: the columns to use, in slot order (default: all).
        salt_columns: when True, keys are made column-specific so that the same raw value in
            two columns gets two embedding rows, as is usual for CTR fields: integer key ``k``
            in column ``c`` becomes ``k ^ m_c`` with ``m_c`` a 62-bit mask hashed from ``c``
            (a bijection per column, so ids stay distinct within a column, and non-negative ids
            stay non-negative) and hashed values use ``c + 1`` as hash salt.

    Cell values:
        * integers (any int dtype, or Python ints in object columns) are used as keys; one
          beyond int64 (an unsigned id of 2**63 or more) raises ValueError;
        * missing values (``None``, ``NaN``, ``pd.NA``) give an empty slot;
        * lists / tuples / arrays give a multi-key slot (elements handled recursively);
        * strings, floats, bools and other values are hashed with :func:`stable_hash_strings`.

    Returns:
        :class:`CSRBatch` with NumPy arrays and ``num_slots = len(columns)``.
    """
    import pandas as pd

    cols = list(df.columns) if columns is None else list(columns)
    if not cols:
        raise CSRValidationError("no columns selected")
    parts: list[CSRBatch] = []
    for c, name in enumerate(cols):
        series = df[name]
        salt = column_salt(c) if salt_columns else 0
        hsalt = c + 1 if salt_columns else 0
        if pd.api.types.is_integer_dtype(series.dtype) and not isinstance(
            series.dtype, pd.CategoricalDtype
        ):
            # Fast path: a (nullable) integer column is one key per row, NA -> empty slot.
            na = series.isna().to_numpy()
            if series.dtype.kind == "u" and (~na).any() and int(series.max()) > INT64_MAX:
                int64_key(int(series.max()), f"column {name!r}")  # raises, naming the column
            vals = series.to_numpy(dtype=np.int64, na_value=0) ^ np.int64(salt)
            lengths = (~na).astype(np.int64)
            keys = vals[~na]
        else:
            cells = [_cell_keys(v, salt, hsalt) for v in series.tolist()]
            lengths = np.fromiter((len(x) for x in cells), np.int64, count=len(cells))
            keys = np.concatenate(cells) if cells else np.empty(0, np.int64)
        offsets = np.zeros(len(series) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        parts.append(CSRBatch(offsets, keys.astype(np.int64), 1))
    return concat_slots(*parts).validate()


def column_salt(column: int) -> int:
    """XOR mask making integer ids of slot/column ``column`` distinct from other columns'.

    A 62-bit value hashed from the column index: any number of columns gets distinct masks,
    and ``k ^ mask`` of a non-negative id is non-negative (never the reserved ``-2**63``).
    """
    h = int(mix64_numpy(np.array([column + 1], np.int64))[0])
    return h & ((1 << 62) - 1)


def _to_int64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= (1 << 63) else v


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        import pandas as pd

        res = pd.isna(v)
        return bool(res) if np.ndim(res) == 0 else False
    except (TypeError, ValueError):
        return False


def _cell_keys(v: Any, salt: int, hash_salt: int) -> np.ndarray:
    if isinstance(v, list | tuple | np.ndarray):
        parts = [_cell_keys(x, salt, hash_salt) for x in v]
        return np.concatenate(parts) if parts else np.empty(0, np.int64)
    if _is_missing(v):
        return np.empty(0, np.int64)
    if isinstance(v, bool | np.bool_):
        return stable_hash_strings([v], salt=hash_salt)
    if isinstance(v, int | np.integer):
        return np.array([_to_int64(int64_key(v) ^ salt)], np.int64)
    return stable_hash_strings([v], salt=hash_salt)


def csr_from_dense(ids: Any, num_slots: int | None = None) -> CSRBatch:
    """One key per slot from an int array of shape ``[batch, slots]`` (e.g. Criteo columns)."""
    a = np.ascontiguousarray(_as_numpy(ids, "ids"))
    if a.ndim != 2:
        raise CSRValidationError(f"ids must have shape [batch, slots], got {a.shape}")
    if num_slots is not None and a.shape[1] != num_slots:
        raise CSRValidationError(f"ids has {a.shape[1]} columns, expected {num_slots}")
    offsets = np.arange(a.size + 1, dtype=np.int64)
    return CSRBatch(offsets, a.reshape(-1).astype(np.int64), a.shape[1]).validate()


def csr_from_leaf_indices(
    leaves: Any,
    num_leaves: int | None = None,
    key_offset: int = 1 << 60,
) -> CSRBatch:
    """Leaf indices of a tree ensemble as one slot per tree.

    Args:
        leaves: int array ``[n_rows, n_trees]`` as returned by
            ``Booster.predict(X, pred_leaf=True)``: leaf ``leaves[i, t]`` of tree ``t``.
        num_leaves: an upper bound on leaf ids per tree (default: ``max(leaves) + 1``). Keys
            are ``key_offset + t * num_leaves + leaf``, so a given (tree, leaf) pair always
            gets the same key as long as ``num_leaves`` and ``key_offset`` are kept fixed
            between training and serving: pass the booster's maximum leaf count.
        key_offset: added to every key so leaf keys do not collide with other features' ids
            sharing the same table (default ``2**60``).

    Returns:
        :class:`CSRBatch` with ``num_slots = n_trees`` and one key per slot. Negative leaf
        ids (a tree that does not apply) give an empty slot.
    """
    a = np.asarray(leaves)
    if a.ndim != 2:
        raise CSRValidationError(f"leaves must have shape [n_rows, n_trees], got {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        if np.issubdtype(a.dtype, np.floating) and np.all(np.isnan(a) | (a == np.round(a))):
            a = np.where(np.isnan(a), -1, a).astype(np.int64)
        else:
            raise CSRValidationError(f"leaves must hold integer leaf ids, got dtype {a.dtype}")
    a = a.astype(np.int64)
    n, t = a.shape
    if t == 0:
        raise CSRValidationError("leaves has no trees (0 columns)")
    if num_leaves is None:
        num_leaves = int(a.max()) + 1 if a.size else 1
    if a.size and int(a.max()) >= num_leaves:
        raise CSRValidationError(
            f"leaf id {int(a.max())} >= num_leaves={num_leaves}; pass a larger num_leaves"
        )
    if key_offset + t * num_leaves >= 2**63:
        raise CSRValidationError("key_offset + n_trees * num_leaves overflows int64")
    keys2d = key_offset + np.arange(t, dtype=np.int64)[None, :] * num_leaves + a
    present = a >= 0
    counts = present.reshape(-1).astype(np.int64)
    offsets = np.zeros(n * t + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return CSRBatch(offsets, keys2d[present].astype(np.int64), t)


def concat_slots(*batches: CSRBatch) -> CSRBatch:
    """Put the slots of several batches side by side (same samples, more slots).

    ``concat_slots(a, b)`` has ``a.num_slots + b.num_slots`` slots; slot ``s`` of sample ``i``
    is slot ``s`` of ``a`` for ``s < a.num_slots`` and slot ``s - a.num_slots`` of ``b``
    otherwise. All batches must have the same batch size. Returns NumPy arrays.
    """
    if not batches:
        raise CSRValidationError("concat_slots needs at least one batch")
    bs = {b.batch_size for b in batches}
    if len(bs) != 1:
        raise CSRValidationError(f"batches have different batch sizes: {sorted(bs)}")
    n = bs.pop()
    total_slots = sum(b.num_slots for b in batches)
    lengths = np.zeros((n, total_slots), np.int64)
    col = 0
    starts: list[np.ndarray] = []
    for b in batches:
        ro = _as_numpy(b.row_offsets)
        lengths[:, col : col + b.num_slots] = np.diff(ro).reshape(n, b.num_slots)
        starts.append(ro[:-1].reshape(n, b.num_slots))
        col += b.num_slots
    offsets = np.zeros(n * total_slots + 1, np.int64)
    np.cumsum(lengths.reshape(-1), out=offsets[1:])
    # Gather keys row by row in the new order with one vectorised index computation.
    all_keys = [_as_numpy(b.keys) for b in batches]
    base = np.cumsum([0] + [len(k) for k in all_keys[:-1]])
    src_start = np.concatenate(
        [s + base[i] for i, s in enumerate(starts)], axis=1
    ).reshape(-1)
    flat_len = lengths.reshape(-1)
    idx = np.repeat(src_start - offsets[:-1], flat_len) + np.arange(offsets[-1])
    merged = np.concatenate(all_keys)
    return CSRBatch(offsets, merged[idx].astype(np.int64), total_slots)
