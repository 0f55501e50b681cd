"""Stochastic rounding of gradients to integers with a counter-based RNG.

The random draw for (key, counter) is splitmix64(key ^ splitmix64(counter)), so every row's
rounding depends only on the seed, the round, the class and the row index: the same on any
thread count and on the GPU.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba.extending import overload

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
# rows of a work item of the parallel rounding (a vectorised loop each)
_ROUND_BLOCK_ROWS = 8192


@nb.njit(cache=True, inline="always")
def splitmix64(x):
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True, inline="always")
def uniform01(key, counter):
    """float64 in [0, 1) from the top 53 bits of a splitmix64 hash. The 53-bit integer is
    converted in two parts of 27 and 26 bits, each exact as an int32 and their sum exact: the
    value of float64(z >> 11), but without a uint64 -> float64 conversion, which has no vector
    instruction below AVX-512 and kept the rounding loop scalar."""
    z = splitmix64(key ^ splitmix64(np.uint64(counter))) >> np.uint64(11)
    high = np.int32(z >> np.uint64(26))
    low = np.int32(z & np.uint64(0x3FFFFFF))
    return (np.float64(high) * 67108864.0 + np.float64(low)) * (1.0 / 9007199254740992.0)


def uniform01_numpy(key: np.uint64, counters: np.ndarray) -> np.ndarray:
    """`uniform01` of uint64 counters (n,) in NumPy (uint64 arithmetic wraps as in the
    kernels): the same float64 draws, for small inputs where compiling a kernel costs more
    than the loop."""
    with np.errstate(over="ignore"):
        def mix(x):
            z = x + _GOLDEN
            z = (z ^ (z >> np.uint64(30))) * _M1
            z = (z ^ (z >> np.uint64(27))) * _M2
            return z ^ (z >> np.uint64(31))
        z = mix(np.uint64(key) ^ mix(counters.astype(np.uint64)))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def _store(out, i, g, h):
    """Row i's rounded pair (g, h: int32) into out; returns 1 when h is negative (custom
    objectives), else 0. Layout chosen at compile time by out.ndim."""


@overload(_store)
def _store_impl(out, i, g, h):
    if out.ndim == 1:
        # packed: the gradient in the high and the hessian in the low 32 bits (see
        # `kernels.cpu.histogram`), for trees whose sums fit
        def packed(out, i, g, h):
            out[i] = (np.int64(g) << 32) + np.int64(h)
            return np.int64(h < 0)
        return packed

    def pairs(out, i, g, h):
        out[i, 0] = g
        out[i, 1] = h
        return np.int64(h < 0)
    return pairs


@nb.njit(cache=True, nogil=True)
def quantize_gradients(lo, hi, gh, row_ids, g_inv_scale, h_inv_scale, key, out):
    """out[i] = (floor(g_i * g_inv_scale + u), floor(h_i * h_inv_scale + u')) as int32,
    u, u' uniform in [0, 1) drawn at counters 2 * r and 2 * r + 1 of the row's global index r
    (row_ids[i], or i when row_ids is None): unbiased stochastic rounding, and a worker
    holding some rows of a larger matrix rounds each as one process holding all would. Rows
    i in [lo, hi). gh: float32 (n, 2) pairs; row_ids: int64 (n,) or None (a compile-time
    choice); key: uint64; out: int32 (n, 2), or int64 (n,) for the pairs packed as
    g * 2**32 + h. Returns the number of rows whose rounded hessian is negative (a packed
    layout needs none).

    The loop vectorises (unsigned indices, no branch per row, `uniform01`'s conversion):
    4 rows a vector with AVX2 or AVX-512's 256-bit lanes, where it ran a row at a time."""
    negative = 0
    for i in range(np.uintp(lo), np.uintp(hi)):
        r = np.uint64(i) if row_ids is None else np.uint64(row_ids[i])
        u1 = uniform01(key, np.uint64(2) * r)
        u2 = uniform01(key, np.uint64(2) * r + np.uint64(1))
        g = np.int32(np.floor(np.float64(gh[i, 0]) * g_inv_scale + u1))
        h = np.int32(np.floor(np.float64(gh[i, 1]) * h_inv_scale + u2))
        negative += _store(out, i, g, h)
    return negative


@nb.njit(parallel=True, cache=True, nogil=True)
def quantize_gradients_parallel(gh, row_ids, g_inv_scale, h_inv_scale, key, out):
    """`quantize_gradients` of all rows, in parallel blocks of _ROUND_BLOCK_ROWS rows (each
    thread takes a contiguous run of blocks)."""
    n = gh.shape[0]
    negative = 0
    for b in nb.prange((n + _ROUND_BLOCK_ROWS - 1) // _ROUND_BLOCK_ROWS):
        negative += quantize_gradients(b * _ROUND_BLOCK_ROWS,
                                       min(n, (b + 1) * _ROUND_BLOCK_ROWS), gh, row_ids,
                                       g_inv_scale, h_inv_scale, key, out)
    return negative


@nb.njit(parallel=True, cache=True, nogil=True)
def pair_bounds(bits, n_blocks, out):
    """out[b] = the bits of (max |g|, max |h|) over block b of n_blocks equal row blocks,
    blocks in parallel. bits: int32 (n, 2), the float32 pairs' bit patterns
    (``gh.view(np.int32)``); out: int32 (n_blocks, 2), to be read as float32
    (``out.view(np.float32)``). With the sign bit cleared a float32's bits order as its
    magnitude does, a NaN above infinity: an integer maximum, which vectorises (the float
    one with a NaN test per value did not), gives the largest magnitude, or a NaN when there
    is one (as NumPy's max)."""
    n = bits.shape[0]
    magnitude = np.int32(0x7FFFFFFF)
    for b in nb.prange(n_blocks):
        g_top = np.int32(0)
        h_top = np.int32(0)
        for i in range(np.uintp(n * b // n_blocks), np.uintp(n * (b + 1) // n_blocks)):
            g_top = max(g_top, bits[i, 0] & magnitude)
            h_top = max(h_top, bits[i, 1] & magnitude)
        out[b, 0] = g_top
        out[b, 1] = h_top
