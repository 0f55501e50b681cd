"""Numba CPU kernels of the hash table: open addressing with linear probing.

Table layout (shared with the CUDA kernels): ``slot_keys[int64, n_slots]`` holds the key stored
in each slot or ``EMPTY_KEY``; ``slot_rows[int64, n_slots]`` the embedding row of that key;
``row_keys[int64, >= n_rows]`` the inverse map (key of each row, in insertion order). ``n_slots``
is a power of two so the probe start is ``mix64(key) & (n_slots - 1)``.

Rows are handed out by a counter in insertion order, so they are dense ``0..size-1``; the
module keeps its weights and optimiser state as row-indexed arrays of the same length.
"""

from __future__ import annotations

import numba
import numpy as np

from ._hashing import EMPTY_KEY, mix64_numba

_EMPTY = EMPTY_KEY
_mix = numba.njit(inline="always", cache=True)(mix64_numba)


@numba.njit(cache=True, nogil=True)
def get_or_insert(slot_keys, slot_rows, row_keys, size, limit, keys, rows_out, start):
    """Map ``keys[start:]`` to rows, inserting unseen keys, until the table reaches ``limit``.

    Args:
        slot_keys, slot_rows: int64 ``[n_slots]`` table arrays (modified in place).
        row_keys: int64 ``[>= limit]``; ``row_keys[r]`` is set for every new row ``r``.
        size: number of keys in the table before the call.
        limit: stop before inserting the ``limit``-th key (the load-factor threshold).
        keys: int64 ``[n]`` keys to map. rows_out: int64 ``[n]`` output rows.
        start: first position of ``keys`` to process (for resuming after growth).

    Returns:
        ``(next_position, new_size, status)``: ``next_position == n`` when all keys were
        mapped; otherwise the table is at ``limit`` and the caller must grow it and resume.
        ``status`` is 0, or 1 when a key equals the reserved empty marker.
    """
    mask = np.uint64(slot_keys.shape[0] - 1)
    n = keys.shape[0]
    for i in range(start, n):
        k = keys[i]
        if k == _EMPTY:
            return i, size, 1
        h = _mix(k) & mask
        while True:
            cur = slot_keys[h]
            if cur == k:
                rows_out[i] = slot_rows[h]
                break
            if cur == _EMPTY:
                if size >= limit:
                    return i, size, 0
                slot_keys[h] = k
                slot_rows[h] = size
                row_keys[size] = k
                rows_out[i] = size
                size += 1
                break
            h = (h + np.uint64(1)) & mask
    return n, size, 0


@numba.njit(cache=True, nogil=True)
def lookup(slot_keys, slot_rows, keys, rows_out):
    """Rows of ``keys`` without inserting; ``-1`` for keys not in the table.

    The table always keeps at least one empty slot (load factor < 1), so probing ends.
    """
    mask = np.uint64(slot_keys.shape[0] - 1)
    for i in range(keys.shape[0]):
        k = keys[i]
        rows_out[i] = -1
        if k == _EMPTY:
            continue
        h = _mix(k) & mask
        while True:
            cur = slot_keys[h]
            if cur == k:
                rows_out[i] = slot_rows[h]
                break
            if cur == _EMPTY:
                break
            h = (h + np.uint64(1)) & mask


@numba.njit(cache=True, nogil=True)
def rehash(slot_keys, slot_rows, row_keys, size):
    """Insert rows ``0..size-1`` (key ``row_keys[r]`` -> row ``r``) into an empty table."""
    mask = np.uint64(slot_keys.shape[0] - 1)
    for r in range(size):
        k = row_keys[r]
        h = _mix(k) & mask
        while slot_keys[h] != _EMPTY:
            h = (h + np.uint64(1)) & mask
        slot_keys[h] = k
        slot_rows[h] = r
