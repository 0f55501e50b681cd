"""Numba-CUDA kernels of the hash table (same layout and hash as :mod:`._cpu_kernels`).

Concurrency design:

* Insertion claims an empty slot with ``atomic.cas(slot_keys, h, EMPTY, key)``. A key is
  written once and never changes, so a stale (cached) read of a slot can only be a stale
  ``EMPTY``; the CAS then returns the real content and the probe continues correctly.
* The thread whose CAS succeeds hands out the row. Rows come from one global counter, but
  one atomic per new key on a single address serialises at L2 (the first batches insert
  millions of keys), so each block first counts its winners in shared memory and issues a
  single ``atomic.add`` for all of them.
* Threads that find a key inserted by another thread need its row, which that thread may not
  have written yet; rather than spinning, the kernel stores the slot index of every key and a
  second kernel (after the launch boundary, which orders all writes) reads ``slot_rows``.
* The table keeps fewer keys than slots (load factor < 1), so every probe ends; a probe that
  wraps around the whole table reports status 2 instead of looping forever.

The kernels also run under ``NUMBA_ENABLE_CUDASIM=1`` on NumPy arrays (CI has no GPU). The
simulator executes them as Python with NumPy scalars, so 64-bit hash products that wrap by
design raise NumPy overflow warnings there; callers in the simulator silence those.
Shared arrays use constant sizes, as the simulator and the compiler both require.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from ..kernels.launch import CudaKernel
from ._hashing import EMPTY_KEY, mix64_numba

THREADS = 256
_EMPTY = EMPTY_KEY
mix64_device = cuda.jit(device=True, inline=True)(mix64_numba)
_mix = mix64_device

STATUS_OK = 0
STATUS_RESERVED_KEY = 1
STATUS_TABLE_FULL = 2


@cuda.jit
def _insert_kernel(slot_keys, slot_rows, row_keys, state, keys, slot_of_key):
    """Phase 1 of get-or-insert: claim/find a slot per key, number the new rows.

    ``state``: int64 ``[2]``, ``state[0]`` is the row counter (table size) and ``state[1]``
    the status. ``slot_of_key``: int64 ``[n]`` output, the slot of each key or -1.
    """
    i = cuda.grid(1)
    tid = cuda.threadIdx.x
    block_new = cuda.shared.array(2, dtype=np.int64)
    if tid == 0:
        block_new[0] = 0
    cuda.syncthreads()
    n_slots = slot_keys.shape[0]
    mask = np.uint64(n_slots - 1)
    won = False
    h = np.uint64(0)
    k = _EMPTY
    if i < keys.shape[0]:
        k = keys[i]
        slot_of_key[i] = -1
        if k == _EMPTY:
            state[1] = 1
        else:
            h = _mix(k) & mask
            found = False
            for _probe in range(n_slots):
                cur = slot_keys[h]
                if cur == k:
                    found = True
                    break
                if cur == _EMPTY:
                    old = cuda.atomic.cas(slot_keys, h, _EMPTY, k)
                    if old == _EMPTY:
                        won = True
                        found = True
                        break
                    if old == k:
                        found = True
                        break
                h = (h + np.uint64(1)) & mask
            if found:
                slot_of_key[i] = np.int64(h)
            else:
                state[1] = 2
    local = 0
    if won:
        local = cuda.atomic.add(block_new, 0, 1)
    cuda.syncthreads()
    if tid == 0 and block_new[0] > 0:
        block_new[1] = cuda.atomic.add(state, 0, block_new[0])
    cuda.syncthreads()
    if won:
        r = block_new[1] + local
        slot_rows[h] = r
        row_keys[r] = k


@cuda.jit
def _gather_rows_kernel(slot_rows, slot_of_key, rows_out):
    """Phase 2 of get-or-insert: ``rows_out[i] = slot_rows[slot_of_key[i]]`` (or -1)."""
    i = cuda.grid(1)
    if i < rows_out.shape[0]:
        s = slot_of_key[i]
        rows_out[i] = slot_rows[s] if s >= 0 else -1


@cuda.jit
def _lookup_kernel(slot_keys, slot_rows, keys, rows_out):
    """Rows of keys without inserting; -1 for unknown keys."""
    i = cuda.grid(1)
    if i < keys.shape[0]:
        k = keys[i]
        rows_out[i] = -1
        if k != _EMPTY:
            n_slots = slot_keys.shape[0]
            mask = np.uint64(n_slots - 1)
            h = _mix(k) & mask
            for _probe in range(n_slots):
                cur = slot_keys[h]
                if cur == k:
                    rows_out[i] = slot_rows[h]
                    break
                if cur == _EMPTY:
                    break
                h = (h + np.uint64(1)) & mask


@cuda.jit
def _rehash_kernel(slot_keys, slot_rows, row_keys, size):
    """Insert rows ``0..size-1`` into an empty table (keys are distinct)."""
    r = cuda.grid(1)
    if r < size:
        k = row_keys[r]
        n_slots = slot_keys.shape[0]
        mask = np.uint64(n_slots - 1)
        h = _mix(k) & mask
        for _probe in range(n_slots):
            old = cuda.atomic.cas(slot_keys, h, _EMPTY, k)
            if old == _EMPTY:
                slot_rows[h] = r
                break
            h = (h + np.uint64(1)) & mask


def _blocks(n: int) -> int:
    return (n + THREADS - 1) // THREADS


def get_or_insert(
    slot_keys: Any,
    slot_rows: Any,
    row_keys: Any,
    state: Any,
    keys: Any,
    rows_out: Any,
    slot_scratch: Any,
    stream: Any = 0,
) -> None:
    """Launch both phases of get-or-insert; arrays are device arrays (or NumPy in the simulator).

    ``row_keys`` must have room for ``state[0] + len(keys)`` rows and the table must have more
    than that many slots (the caller grows it first); ``slot_scratch`` is int64 ``[len(keys)]``.
    The new size and status are left in ``state`` (read them after the stream synchronises).
    """
    n = keys.shape[0]
    if n == 0:
        return
    _insert_kernel[_blocks(n), THREADS, stream](
        slot_keys, slot_rows, row_keys, state, keys, slot_scratch
    )
    _gather_rows_kernel[_blocks(n), THREADS, stream](slot_rows, slot_scratch, rows_out)


def lookup(slot_keys: Any, slot_rows: Any, keys: Any, rows_out: Any, stream: Any = 0) -> None:
    """Launch the lookup kernel (rows of unknown keys become -1)."""
    n = keys.shape[0]
    if n:
        _lookup_kernel[_blocks(n), THREADS, stream](slot_keys, slot_rows, keys, rows_out)


def rehash(slot_keys: Any, slot_rows: Any, row_keys: Any, size: int, stream: Any = 0) -> None:
    """Launch the rehash kernel into freshly emptied ``slot_keys``/``slot_rows``."""
    if size:
        _rehash_kernel[_blocks(size), THREADS, stream](slot_keys, slot_rows, row_keys, size)


# ---------------------------------------------------------------------- torch wrappers
# The launches above on CUDA tensors (int64, contiguous), through CudaKernel: fixed
# signatures, torch's current stream, little host time per launch.
_I1 = ("int64", 1)
_INSERT = CudaKernel(_insert_kernel, (_I1,) * 6)
_GATHER_ROWS = CudaKernel(_gather_rows_kernel, (_I1,) * 3)
_LOOKUP = CudaKernel(_lookup_kernel, (_I1,) * 4)
_REHASH = CudaKernel(_rehash_kernel, (_I1, _I1, _I1, "int64"))
KERNELS = (_INSERT, _GATHER_ROWS, _LOOKUP, _REHASH)


def get_or_insert_tensors(slot_keys, slot_rows, row_keys, state, keys, rows_out,
                          slot_scratch) -> None:
    """:func:`get_or_insert` on CUDA tensors."""
    n = keys.shape[0]
    if n:
        dev = keys.device
        _INSERT.launch(_blocks(n), THREADS, dev, slot_keys, slot_rows, row_keys, state, keys,
                       slot_scratch)
        _GATHER_ROWS.launch(_blocks(n), THREADS, dev, slot_rows, slot_scratch, rows_out)


def lookup_tensors(slot_keys, slot_rows, keys, rows_out) -> None:
    """:func:`lookup` on CUDA tensors."""
    n = keys.shape[0]
    if n:
        _LOOKUP.launch(_blocks(n), THREADS, keys.device, slot_keys, slot_rows, keys, rows_out)


def rehash_tensors(slot_keys, slot_rows, row_keys, size: int) -> None:
    """:func:`rehash` on CUDA tensors."""
    if size:
        _REHASH.launch(_blocks(size), THREADS, slot_keys.device, slot_keys, slot_rows,
                       row_keys, size)
