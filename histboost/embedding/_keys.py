"""Conversion of user keys (and row offsets) to int64, the one key type of the tables.

Keys are signed 64-bit integers; ``-2**63`` is reserved as the empty-slot marker (checked by
`validate_csr` and the hash table). What is refused, with a message, rather than guessed:

* booleans (``True`` would silently be key 1) and floats (1.5 would be truncated): TypeError;
* unsigned or Python integers of ``2**63`` and more, which int64 cannot hold: ValueError.
  Casting would wrap them onto negative keys (``2**64 - 1`` onto ``-1``, sharing its row). To
  use unsigned 64-bit ids, reinterpret their bits deliberately, e.g.
  ``ids.astype(np.uint64).view(np.int64)`` (only ``2**63`` itself is then reserved), or hash
  them (`histboost.embedding.stable_hash_strings`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_UNSIGNED_HINT = ("keys are signed 64-bit integers: reinterpret unsigned 64-bit ids with "
                  "ids.astype(np.uint64).view(np.int64) (2**63 itself is reserved) or hash them")


def _too_large(what: str, value: Any) -> ValueError:
    return ValueError(f"{what} holds {value}, outside int64 [-2**63, 2**63 - 1]; "
                      f"{_UNSIGNED_HINT}")


def _not_integer(what: str, value: Any) -> TypeError:
    kind = "booleans" if isinstance(value, bool | np.bool_) else repr(value)
    return TypeError(f"{what} must be integers, got {kind}")


def int64_key(v: Any, what: str = "keys") -> int:
    """One key: a Python or NumPy integer within int64 (not a bool, float or string)."""
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer):
        raise _not_integer(what, v)
    v = int(v)
    if not INT64_MIN <= v <= INT64_MAX:
        raise _too_large(what, v)
    return v


def _is_tensor(a: Any) -> bool:
    return hasattr(a, "detach") and hasattr(a, "dtype") and hasattr(a, "is_floating_point")


def as_int64_array(a: Any, what: str = "keys") -> np.ndarray:
    """int64 NumPy array (same shape) of integer array-like `a` (array, tensor, nested list).

    No copy for int64 input. Raises TypeError for bool, float or other non-integer data and
    ValueError for values outside int64 (unsigned ids of 2**63 and more)."""
    if _is_tensor(a):
        return as_int64_tensor(a, what).detach().cpu().numpy()
    arr = np.asarray(a)
    if arr.dtype.kind in "fO" and not isinstance(a, np.ndarray):
        if arr.size == 0:
            return np.zeros(arr.shape, np.int64)  # [] reads as float64
        # a list holding a big int, a float or a bool: find and name the element
        arr = np.asarray(a, dtype=object)
    kind = arr.dtype.kind
    if kind == "b":
        raise TypeError(f"{what} must be integers, got booleans (dtype bool)")
    if kind == "u" and arr.dtype.itemsize == 8 and arr.size and int(arr.max()) > INT64_MAX:
        raise _too_large(what, int(arr.max()))
    if kind in "iu":
        return arr.astype(np.int64, copy=False)
    if kind == "O":
        out = np.empty(arr.shape, np.int64)
        flat = out.reshape(-1)
        for i, v in enumerate(arr.reshape(-1).tolist()):
            flat[i] = int64_key(v, what)
        return out
    raise TypeError(f"{what} must be integers, got dtype {arr.dtype}")


def as_int64_tensor(t: Any, what: str = "keys", device: Any = None) -> Any:
    """int64 torch tensor of integer `t` (a tensor, or anything `as_int64_array` takes) on
    `device` (default: where it is). Same errors as `as_int64_array`; a uint64 tensor costs
    one check of its top bits (a device sync on GPU)."""
    import torch

    if not isinstance(t, torch.Tensor):
        t = torch.from_numpy(np.ascontiguousarray(as_int64_array(t, what)))
    if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
        raise TypeError(f"{what} must be integers, got dtype {t.dtype}")
    if t.dtype == getattr(torch, "uint64", None):
        signed = t.view(torch.int64)  # the same bits: negative exactly where t >= 2**63
        if signed.numel() and bool((signed < 0).any()):
            raise _too_large(what, f"a value >= 2**63 ({int(signed[signed < 0][0]) + 2**64})")
        t = signed
    elif t.dtype != torch.int64:
        t = t.to(torch.int64)
    return t if device is None else t.to(device)
