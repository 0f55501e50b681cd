"""Hash table mapping arbitrary int64 keys to dense embedding rows ``0..size-1``.

Open addressing with linear probing over a power-of-two number of slots. Rows are handed out
in insertion order by a counter (HugeCTR's "value counter"), so the embedding weights and
the optimiser state are plain row-indexed tensors. On CPU the kernels are Numba ``@njit``
functions working in place on the tensors' memory; on CUDA they are Numba-CUDA kernels using
atomic compare-and-swap, launched on torch's current stream.

Growth: the table holds at most ``load_factor * n_slots`` keys (its *capacity*); inserting
past that doubles the slots and rehashes every key from the row->key array, so no key is ever
lost and rows never move. ``max_capacity`` bounds the number of keys; exceeding it raises
:class:`CapacityError` naming the setting to change, before any key of the batch is inserted.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from . import _cpu_kernels
from ._hashing import EMPTY_KEY
from ._keys import as_int64_tensor

_EMPTY = int(EMPTY_KEY)


class CapacityError(RuntimeError):
    """The table would need more keys than its ``max_capacity`` allows."""


class ReservedKeyError(ValueError):
    """A key equals the reserved empty-slot marker ``-2**63``."""


def _next_pow2(n: int) -> int:
    return 1 << max(3, math.ceil(math.log2(max(n, 1))))


class HashTable:
    """int64 key -> int64 row map on a torch device.

    Args:
        capacity: keys the table holds before it first grows (rounded up so the slot count is
            a power of two).
        load_factor: maximum fraction of occupied slots, in (0, 0.9]; linear probing degrades
            quickly above ~0.7. Default 0.5.
        max_capacity: hard limit on the number of keys (``None``: grow without limit).
        device: torch device of the table (``"cpu"`` or a CUDA device).

    Attributes:
        size: number of keys (= number of rows in use).
        slot_keys, slot_rows: int64 ``[n_slots]`` tensors (the open-addressing arrays).
        row_keys: int64 ``[n_slots]``; ``row_keys[:size]`` is the key of each row.
    """

    def __init__(
        self,
        capacity: int = 1 << 20,
        load_factor: float = 0.5,
        max_capacity: int | None = None,
        device: Any = None,
    ) -> None:
        if not 0.0 < load_factor <= 0.9:
            raise ValueError(f"load_factor must be in (0, 0.9], got {load_factor}")
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if max_capacity is not None and max_capacity < 1:
            raise ValueError(f"max_capacity must be >= 1 or None, got {max_capacity}")
        self.load_factor = float(load_factor)
        self.max_capacity = max_capacity
        self.device = torch.device(device if device is not None else "cpu")
        if max_capacity is not None:
            capacity = min(capacity, max_capacity)
        self.size = 0
        self._alloc(self._slots_for(capacity))
        self.row_keys = torch.full((self.n_slots,), _EMPTY, dtype=torch.int64, device=self.device)
        if self.device.type == "cuda":
            # int64 [2]: row counter and status word, written by the insert kernel.
            self._state = torch.zeros(2, dtype=torch.int64, device=self.device)

    # ------------------------------------------------------------------ sizing
    def _slots_for(self, n_keys: int) -> int:
        return _next_pow2(math.ceil(n_keys / self.load_factor))

    def _alloc(self, n_slots: int) -> None:
        self.n_slots = n_slots
        self.slot_keys = torch.full((n_slots,), _EMPTY, dtype=torch.int64, device=self.device)
        self.slot_rows = torch.full((n_slots,), -1, dtype=torch.int64, device=self.device)

    @property
    def capacity(self) -> int:
        """Keys the table holds before the next growth."""
        cap = int(self.n_slots * self.load_factor)
        cap = min(cap, self.n_slots - 1)  # keep one empty slot so probes always end
        return cap if self.max_capacity is None else min(cap, self.max_capacity)

    def __len__(self) -> int:
        return self.size

    def _capacity_error(self, needed: int) -> CapacityError:
        return CapacityError(
            f"hash table full: {needed} keys needed but max_capacity={self.max_capacity}. "
            f"Raise max_capacity (e.g. max_capacity={_next_pow2(needed)}) or pass "
            "max_capacity=None to let the table grow."
        )

    def reserve(self, n_keys: int) -> None:
        """Grow (rehash) so that ``n_keys`` keys fit below the load factor."""
        if n_keys <= self.capacity:
            return
        if self.max_capacity is not None and n_keys > self.max_capacity:
            raise self._capacity_error(n_keys)
        n_slots = self.n_slots
        while int(n_slots * self.load_factor) < n_keys or n_slots - 1 < n_keys:
            n_slots *= 2
        self._rehash_into(n_slots)

    def _rehash_into(self, n_slots: int) -> None:
        old_rows = self.row_keys[: self.size]
        self._alloc(n_slots)
        row_keys = torch.full((n_slots,), _EMPTY, dtype=torch.int64, device=self.device)
        row_keys[: self.size] = old_rows
        self.row_keys = row_keys
        if self.device.type == "cuda":
            _cuda().rehash_tensors(self.slot_keys, self.slot_rows, self.row_keys, self.size)
        else:
            _cpu_kernels.rehash(
                self.slot_keys.numpy(), self.slot_rows.numpy(), self.row_keys.numpy(), self.size
            )

    # ------------------------------------------------------------------ operations
    def _check_keys(self, keys: torch.Tensor) -> torch.Tensor:
        # bools, floats and unsigned keys beyond int64 raise rather than being cast
        return as_int64_tensor(keys, "keys", self.device).contiguous().reshape(-1)

    def count_new(self, keys: torch.Tensor) -> int:
        """Number of distinct keys in ``keys`` that are not in the table yet."""
        keys = self._check_keys(keys)
        uniq = torch.unique(keys)
        return int((self.lookup(uniq) < 0).sum())

    def get_or_insert(self, keys: torch.Tensor) -> torch.Tensor:
        """Rows of ``keys`` (int64 ``[n]`` on the table's device), inserting unseen keys.

        New keys get the rows ``size, size+1, ...`` (on CUDA their order among one batch is
        unspecified; on CPU it is the order of first appearance). Returns int64 ``[n]``.
        Raises :class:`CapacityError` (nothing inserted) if ``max_capacity`` would be passed,
        :class:`ReservedKeyError` if a key is ``-2**63``.
        """
        keys = self._check_keys(keys)
        n = keys.numel()
        rows = torch.empty(n, dtype=torch.int64, device=self.device)
        if n == 0:
            return rows
        if self.max_capacity is not None and self.size + n > self.max_capacity:
            # Near the hard limit: count exactly so a batch that fits is not refused and one
            # that does not fit is refused before anything is inserted.
            needed = self.size + self.count_new(keys)
            if needed > self.max_capacity:
                raise self._capacity_error(needed)
        if self.device.type == "cuda":
            return self._get_or_insert_cuda(keys, rows)
        keys_np, rows_np = keys.numpy(), rows.numpy()
        pos = 0
        while True:
            pos, size, status = _cpu_kernels.get_or_insert(
                self.slot_keys.numpy(), self.slot_rows.numpy(), self.row_keys.numpy(),
                self.size, self.capacity, keys_np, rows_np, pos,
            )
            self.size = int(size)
            if status:
                raise ReservedKeyError(
                    "key -2**63 is reserved as the empty-slot marker; remap it"
                )
            if pos == n:
                return rows
            self.reserve(self.size + 1)  # doubles the slots

    def _get_or_insert_cuda(self, keys: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        n = keys.numel()
        # The GPU kernel cannot stop half-way, so make sure even an all-new batch fits in the
        # slots with one left empty; the load factor is restored by the rehash below.
        if self.size + n >= self.n_slots:
            self._rehash_into(_next_pow2(self.size + n + 2))
        k = _cuda()
        self._state.copy_(torch.tensor([self.size, 0], dtype=torch.int64))
        scratch = torch.empty(n, dtype=torch.int64, device=self.device)
        k.get_or_insert_tensors(self.slot_keys, self.slot_rows, self.row_keys, self._state, keys,
                                rows, scratch)
        size, status = (int(v) for v in self._state.tolist())
        self.size = size
        if status == k.STATUS_RESERVED_KEY:
            raise ReservedKeyError("key -2**63 is reserved as the empty-slot marker; remap it")
        if status == k.STATUS_TABLE_FULL:  # impossible while size + n < n_slots; a guard
            raise RuntimeError("hash table probe wrapped around a full table")
        if self.size > self.capacity:
            self.reserve(self.size)
        return rows

    def lookup(self, keys: torch.Tensor) -> torch.Tensor:
        """Rows of ``keys`` without inserting; int64 ``[n]``, ``-1`` for unknown keys."""
        keys = self._check_keys(keys)
        rows = torch.empty(keys.numel(), dtype=torch.int64, device=self.device)
        if keys.numel() == 0:
            return rows
        if self.device.type == "cuda":
            _cuda().lookup_tensors(self.slot_keys, self.slot_rows, keys, rows)
        else:
            _cpu_kernels.lookup(
                self.slot_keys.numpy(), self.slot_rows.numpy(), keys.numpy(), rows.numpy()
            )
        return rows

    def keys(self) -> torch.Tensor:
        """Key of each row: int64 ``[size]`` (a view; copy before modifying the table)."""
        return self.row_keys[: self.size]

    def load_keys(self, keys: torch.Tensor) -> None:
        """Replace the content with ``keys`` (distinct), key ``keys[r]`` getting row ``r``.

        Used by checkpoint loading: rows are positional, on CPU and CUDA alike.
        """
        keys = self._check_keys(keys)
        n = keys.numel()
        if n and torch.unique(keys).numel() != n:
            raise ValueError("load_keys needs distinct keys")
        if n and bool((keys == _EMPTY).any()):
            raise ReservedKeyError("key -2**63 is reserved as the empty-slot marker")
        if self.max_capacity is not None and n > self.max_capacity:
            raise self._capacity_error(n)
        self.size = 0
        n_slots = self._slots_for(max(n, self.capacity))
        self.row_keys = torch.full((n_slots,), _EMPTY, dtype=torch.int64, device=self.device)
        self.row_keys[:n] = keys
        self.size = n
        self._rehash_into(n_slots)

    def to(self, device: Any) -> HashTable:
        """Move the table to ``device`` (in place) and return it."""
        device = torch.device(device)
        if device == self.device:
            return self
        keys = self.keys().to(device)
        self.device = device
        if device.type == "cuda":
            self._state = torch.zeros(2, dtype=torch.int64, device=device)
        self.load_keys(keys)
        return self


# ---------------------------------------------------------------------- CUDA glue
def _cuda():
    from . import _cuda_kernels

    return _cuda_kernels
