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


@nb.njit(cache=True, inline="always")
def splitmix64(x):
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True, inline="always")
def uniform01(key, counter):
    """float64 in [0, 1) from the top 53 bits of a splitmix64 hash."""
    z = splitmix64(key ^ splitmix64(np.uint64(counter)))
    return np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


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


@nb.njit(inline="always")
def _counter(i, row_ids):
    """The row's global index: row_ids[i], or i when row_ids is empty."""
    return np.uint64(row_ids[i]) if row_ids.shape[0] > 0 else np.uint64(i)


def _round_row(i, counter, gh, g_inv_scale, h_inv_scale, key, out):
    """Round row i's pair into out; returns 1 when its rounded hessian is negative (custom
    objectives), else 0. Layout chosen at compile time by out.ndim."""


# not inlined by Numba (LLVM inlines it after linking), as `histogram._accumulate`: an
# inlined overload was compiled again inside each kernel (`quantize_gradients` 0.58 -> 0.14 s
# to compile; 2M rows on one thread 16.1 -> 15.0 ms, the same pairs)
@overload(_round_row, jit_options={"no_cfunc_wrapper": True})
def _round_row_impl(i, counter, gh, g_inv_scale, h_inv_scale, key, out):
    if out.ndim == 1:
        # packed: the gradient in the high and the hessian in the low 32 bits (see
        # `kernels.cpu.histogram`), for trees whose sums fit
        def packed(i, counter, gh, g_inv_scale, h_inv_scale, key, out):
            u1 = uniform01(key, np.uint64(2) * counter)
            u2 = uniform01(key, np.uint64(2) * counter + np.uint64(1))
            g = np.int64(np.int32(np.floor(np.float64(gh[i, 0]) * g_inv_scale + u1)))
            h = np.int64(np.int32(np.floor(np.float64(gh[i, 1]) * h_inv_scale + u2)))
            out[i] = (g << 32) + h
            return np.int64(h < 0)
        return packed

    def pairs(i, counter, gh, g_inv_scale, h_inv_scale, key, out):
        u1 = uniform01(key, np.uint64(2) * counter)
        u2 = uniform01(key, np.uint64(2) * counter + np.uint64(1))
        out[i, 0] = np.int32(np.floor(np.float64(gh[i, 0]) * g_inv_scale + u1))
        out[i, 1] = np.int32(np.floor(np.float64(gh[i, 1]) * h_inv_scale + u2))
        return np.int64(out[i, 1] < 0)
    return pairs


@nb.njit(cache=True, nogil=True)
def quantize_gradients(lo, hi, gh, row_ids, g_inv_scale, h_inv_scale, key, out):
    """out[i] = (floor(g_i * g_inv_scale + u), floor(h_i * h_inv_scale + u')) as int32,
    u, u' uniform in [0, 1) drawn at counters 2 * r and 2 * r + 1 of the row's global index r
    (row_ids[i], or i when row_ids is empty): unbiased stochastic rounding, and a worker
    holding some rows of a larger matrix rounds each as one process holding all would. Rows
    i in [lo, hi). gh: float32 (n, 2) pairs; row_ids: int64 (n,) or (0,); key: uint64;
    out: int32 (n, 2), or int64 (n,) for the pairs packed as g * 2**32 + h. Returns the number
    of rows whose rounded hessian is negative (a packed layout needs none)."""
    negative = 0
    for i in range(lo, hi):
        negative += _round_row(i, _counter(i, row_ids), gh, g_inv_scale, h_inv_scale, key, out)
    return negative


@nb.njit(parallel=True, cache=True, nogil=True)
def quantize_gradients_parallel(gh, row_ids, g_inv_scale, h_inv_scale, key, out):
    """`quantize_gradients` of all rows, in parallel."""
    negative = 0
    for i in nb.prange(gh.shape[0]):
        negative += _round_row(i, _counter(i, row_ids), gh, g_inv_scale, h_inv_scale, key, out)
    return negative


@nb.njit(parallel=True, cache=True, nogil=True)
def pair_bounds(bits, n_blocks, out):
    """out[b] = the bits of (max |g|, max |h|) over block b of n_blocks equal row blocks,
    blocks in parallel. bits: int32 (n, 2), the float32 pairs' bit patterns
    (``gh.view(np.int32)``); out: int32 (n_blocks, 2), to be read as float32
    (``out.view(np.float32)``). With the sign bit cleared a float32's bits order as its
    magnitude does, a NaN above infinity: an integer maximum, which vectorises (the float
    one with a NaN test per value did not; 1M rows on the 16-core host, 16 threads: 174
    against 274 us), gives the largest magnitude, or a NaN when there is one (as NumPy's
    max)."""
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
