"""64-bit integer mixing shared by the hash table, the sharding rule and the initialisers.

Every place that turns a key into a number (table slot, owning rank, initial vector) goes
through :func:`mix64` (MurmurHash3's ``fmix64`` finaliser), implemented three times with
bit-identical results:

* :func:`mix64_numba` for Numba CPU/CUDA kernels (``uint64`` arithmetic, wraps on overflow),
* :func:`mix64_numpy` for NumPy arrays,
* :func:`mix64_torch` for torch tensors on any device (``int64`` arithmetic; torch has no full
  ``uint64`` support, so logical right shifts are emulated by masking after the arithmetic
  shift; the products wrap modulo 2**64 exactly as the unsigned version does).

Tests check the three against each other, so a table built on GPU can be read on CPU and a
checkpoint written by 4 ranks can be re-sharded onto 3.
"""

from __future__ import annotations

import numpy as np

EMPTY_KEY = np.int64(-(2**63))
"""Sentinel marking an empty table slot. It is the one int64 value that cannot be a key."""

_M1 = 0xFF51AFD7ED558CCD
_M2 = 0xC4CEB9FE1A85EC53
# Salts make the slot hash, the shard hash and the initialiser streams independent of each
# other: otherwise every key owned by rank r would also land in a narrow band of slots.
SLOT_SALT = 0
SHARD_SALT = 0x9E3779B97F4A7C15
INIT_SALT = 0x632BE59BD9B4E019


def _to_signed(v: int) -> int:
    """Reinterpret an unsigned 64-bit Python int as the signed int64 with the same bits."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= (1 << 63) else v


M1_SIGNED = _to_signed(_M1)
M2_SIGNED = _to_signed(_M2)
SHARD_SALT_SIGNED = _to_signed(SHARD_SALT)
INIT_SALT_SIGNED = _to_signed(INIT_SALT)


def mix64_numba(k):  # pragma: no cover - compiled by Numba, exercised through the kernels
    """fmix64 of an int64 key, returned as uint64 (plain Python, compiled by Numba)."""
    x = np.uint64(k)
    x ^= x >> np.uint64(33)
    x *= np.uint64(_M1)
    x ^= x >> np.uint64(33)
    x *= np.uint64(_M2)
    x ^= x >> np.uint64(33)
    return x


def mix64_numpy(keys: np.ndarray) -> np.ndarray:
    """fmix64 of an int64 array; returns uint64 of the same shape."""
    x = np.asarray(keys, dtype=np.int64).view(np.uint64).copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(33)
        x *= np.uint64(_M1)
        x ^= x >> np.uint64(33)
        x *= np.uint64(_M2)
        x ^= x >> np.uint64(33)
    return x


def mix64_torch(keys):
    """fmix64 of an int64 tensor; returns int64 holding the same 64 bits as the uint64 result."""
    import torch

    x = keys.to(torch.int64)
    mask31 = (1 << 31) - 1  # keeps the 31 low bits of an arithmetic shift by 33 = logical shift
    x = x ^ ((x >> 33) & mask31)
    x = x * M1_SIGNED
    x = x ^ ((x >> 33) & mask31)
    x = x * M2_SIGNED
    x = x ^ ((x >> 33) & mask31)
    return x


def shard_of_torch(keys, world_size: int):
    """Owning rank of each key under the distributed-slot rule: ``hash(key) % world_size``.

    ``keys``: int64 tensor of any shape. Returns an int64 tensor of the same shape with values
    in ``[0, world_size)``. Uses the top 62 bits of the salted hash so the result is
    non-negative and independent of the low bits that pick table slots.
    """
    h = mix64_torch(keys ^ SHARD_SALT_SIGNED)
    return ((h >> 2) & ((1 << 62) - 1)) % world_size


def shard_of_numpy(keys: np.ndarray, world_size: int) -> np.ndarray:
    """NumPy twin of :func:`shard_of_torch` (same values), used by checkpoint re-sharding."""
    k = np.asarray(keys, dtype=np.int64).view(np.uint64) ^ np.uint64(SHARD_SALT)
    h = mix64_numpy(k.view(np.int64))
    return ((h >> np.uint64(2)) % np.uint64(world_size)).astype(np.int64)
