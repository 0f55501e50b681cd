"""Prediction of a model with categorical features on the GPU: the extended matrix
(`histboost.categorical.model`) of raw input built on the device, column-major (F, n) as the
raw-feature traversal (`histboost.kernels.cuda.predict`) reads it.

1. `HASH_IDS`: categorical columns of integer ids given on the device (float64 or int64) to
   the stable 64-bit hashes of `histboost.data.categorical` (splitmix64 of the value plus the
   golden-ratio salt; NaN: the missing category 0; 0 moves to 1). String columns are hashed on
   the host (pandas' SipHash) and uploaded.
2. `TABLE_ROWS`: for each (row, table), the table's key (a column's hash, or a combination's
   `combine_hashes` of its columns' hashes) and its entry in the table's sorted keys (binary
   search; -1 for an unseen category).
3. `DERIVED_VALUES`: for each (row, derived feature), its float64 value from the entry:
   ``(sums[e, channel] + add) / (count[e] + denominator)`` for a statistic, ``count[e] /
   n_train`` for a frequency (count 0 and zero sums for an unseen category: the prior alone),
   ``hash == h`` for a one-hot feature. The same float64 expressions, each one IEEE operation,
   as `CtrSettings.statistics` on the host: the matrix is the CPU's bit for bit.

Hashes travel as int64 tensors holding the uint64 bit patterns (torch has few uint64
operators); the kernels compare and mix them as uint64.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ..launch import CudaKernel

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
# histboost.data.categorical._COMBINE_MUL
_COMBINE_MUL = np.uint64(0xBF58476D1CE4E5B9)

KIND_CTR, KIND_FREQ, KIND_ONEHOT = 0, 1, 2


@cuda.jit(device=True, inline=True)
def _mix(z):
    """splitmix64's output function (`histboost.data.binning._mix64`) of a uint64."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@cuda.jit(device=True, inline=True)
def _int_hash(v):
    """The hash of integer value v (int64): `histboost.data.categorical._int_hashes`."""
    z = _mix(np.uint64(v) + _GOLDEN)
    return np.int64(1) if z == np.uint64(0) else np.int64(z)


@cuda.jit
def _hash_float_ids(values, columns, out, bad):
    """out[r, c] = the hash of the id values[r, columns[c]] (float64 (n, F); NaN: missing,
    0). bad[c] = 1 when the column holds a value that is no integer below 2**63."""
    t = cuda.grid(1)
    k = columns.shape[0]
    if t >= values.shape[0] * k:
        return
    r = t // k
    c = t - r * k
    v = values[r, columns[c]]
    if v != v:
        out[r, c] = 0
    elif v != math.floor(v) or abs(v) >= 9.223372036854775808e18:
        bad[c] = 1
        out[r, c] = 0
    else:
        out[r, c] = _int_hash(np.int64(v))


@cuda.jit
def _hash_int_ids(values, columns, out):
    """out[r, c] = the hash of the id values[r, columns[c]] (int64 (n, F))."""
    t = cuda.grid(1)
    k = columns.shape[0]
    if t >= values.shape[0] * k:
        return
    r = t // k
    c = t - r * k
    out[r, c] = _int_hash(values[r, columns[c]])


@cuda.jit
def _table_rows(hashes, table_columns, table_width, keys, key_ptr, out):
    """out[r, t] = the index into keys of row r's key in table t, -1 when absent.

    hashes int64 (n, C) (uint64 patterns); table_columns int64 (T, W), the first
    table_width[t] of row t its columns; keys int64 (M,), each table's keys sorted as uint64
    in keys[key_ptr[t]:key_ptr[t + 1]]."""
    i = cuda.grid(1)
    n_tables = table_width.shape[0]
    if i >= hashes.shape[0] * n_tables:
        return
    r = i // n_tables
    t = i - r * n_tables
    key = np.uint64(hashes[r, table_columns[t, 0]])
    for j in range(1, table_width[t]):
        key = _mix(key * _COMBINE_MUL + np.uint64(hashes[r, table_columns[t, j]]))
    lo = key_ptr[t]
    hi = key_ptr[t + 1]
    end = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if np.uint64(keys[mid]) < key:
            lo = mid + 1
        else:
            hi = mid
    out[r, t] = lo if lo < end and np.uint64(keys[lo]) == key else -1


@cuda.jit
def _derived_values(hashes, entries, kind, table, channel, add, denominator, column, onehot,
                    counts, sums, n_train, XT, first):
    """XT[first + d, r] = derived feature d of row r (module docstring). entries int64 (n, T)
    from `TABLE_ROWS`; per feature d: kind int32, table int64, channel int64, add float64,
    denominator float64, column int64, onehot int64 (the hash); counts float64 (M,), sums
    float64 (M, channels) aligned with the keys; n_train: the divisor of the frequency."""
    i = cuda.grid(1)
    n = hashes.shape[0]
    n_derived = kind.shape[0]
    if i >= n * n_derived:
        return
    d = i // n  # consecutive threads: consecutive rows of one feature, written coalesced
    r = i - d * n
    k = kind[d]
    if k == 2:
        XT[first + d, r] = 1.0 if hashes[r, column[d]] == onehot[d] else 0.0
        return
    e = entries[r, table[d]]
    count = counts[e] if e >= 0 else 0.0
    if k == 1:
        XT[first + d, r] = count / n_train
    else:
        s = sums[e, channel[d]] if e >= 0 else 0.0
        XT[first + d, r] = (s + add[d]) / (count + denominator[d])


HASH_FLOAT_IDS = CudaKernel(_hash_float_ids, (("float64", 2), ("int64", 1), ("int64", 2),
                                              ("int32", 1)))
HASH_INT_IDS = CudaKernel(_hash_int_ids, (("int64", 2), ("int64", 1), ("int64", 2)))
TABLE_ROWS = CudaKernel(_table_rows, (("int64", 2), ("int64", 2), ("int64", 1), ("int64", 1),
                                      ("int64", 1), ("int64", 2)))
DERIVED_VALUES = CudaKernel(_derived_values, (
    ("int64", 2), ("int64", 2), ("int32", 1), ("int64", 1), ("int64", 1), ("float64", 1),
    ("float64", 1), ("int64", 1), ("int64", 1), ("float64", 1), ("float64", 2), "float64",
    ("float64", 2), "int64"))
KERNELS = (HASH_FLOAT_IDS, HASH_INT_IDS, TABLE_ROWS, DERIVED_VALUES)
