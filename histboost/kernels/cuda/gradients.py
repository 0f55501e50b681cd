"""Gradient pairs of the built-in losses and their rounding to integers, one thread per row
(the same formulas, in the same order, as `histboost.kernels.cpu.gradients` and
`histboost.kernels.cpu.quantize`)."""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ..cpu.gradients import HESS_FLOOR
from ..launch import CudaKernel
from ._common import uniform01


@cuda.jit
def _squared_error(margin, y, w, weighted, out):
    n = cuda.grid(1)
    if n < y.shape[0]:
        i = np.uint64(n)  # unsigned: no wrap-around check per access
        wi = w[i] if weighted else 1.0
        out[0, i, 0] = (margin[i, 0] - y[i]) * wi
        out[0, i, 1] = wi


@cuda.jit
def _logistic(margin, y, w, weighted, out):
    n = cuda.grid(1)
    if n < y.shape[0]:
        i = np.uint64(n)
        wi = w[i] if weighted else 1.0
        x = margin[i, 0]
        e = math.exp(-abs(x))
        d = 1.0 + e
        p = 1.0 / d if x >= 0.0 else e / d
        out[0, i, 0] = (p - y[i]) * wi
        out[0, i, 1] = max(p * (1.0 - p), HESS_FLOOR) * wi


@cuda.jit
def _softmax(margin, y, w, weighted, out):
    i = cuda.grid(1)
    if i < y.shape[0]:
        K = margin.shape[1]
        mx = margin[i, 0]
        for k in range(1, K):
            mx = max(mx, margin[i, k])
        s = 0.0
        for k in range(K):
            s += math.exp(margin[i, k] - mx)
        label = int(y[i])
        wi = w[i] if weighted else 1.0
        for k in range(K):
            p = math.exp(margin[i, k] - mx) / s
            out[k, i, 0] = (p - (1.0 if k == label else 0.0)) * wi
            out[k, i, 1] = max(2.0 * p * (1.0 - p), HESS_FLOOR) * wi


@cuda.jit
def _round_pairs(pairs, output, row_ids, g_inv_scale, h_inv_scale, key_hi, key_lo, stochastic,
                 out):
    """out[i] = floor(pairs[output, i] * inv_scale + u): u from the counter-based hash at the
    row's global index (row_ids[i], or i when row_ids is empty) when `stochastic` (as the CPU
    engine rounds), 0.5 otherwise (round to nearest)."""
    n = cuda.grid(1)
    if n < out.shape[0]:
        i = np.uint64(n)
        u1 = 0.5
        u2 = 0.5
        if stochastic:
            key = (np.uint64(key_hi) << np.uint64(32)) | np.uint64(key_lo)
            r = i
            if row_ids.shape[0] > 0:
                r = np.uint64(row_ids[i])
            u1 = uniform01(key, np.uint64(2) * r)
            u2 = uniform01(key, np.uint64(2) * r + np.uint64(1))
        out[i, 0] = np.int32(math.floor(np.float64(pairs[output, i, 0]) * g_inv_scale + u1))
        out[i, 1] = np.int32(math.floor(np.float64(pairs[output, i, 1]) * h_inv_scale + u2))


_PAIR_SPEC = (("float64", 2), ("float64", 1), ("float64", 1), "boolean", ("float32", 3))
PAIR_KERNELS = {
    "squared_error": CudaKernel(_squared_error, _PAIR_SPEC),
    "logistic": CudaKernel(_logistic, _PAIR_SPEC),
    "softmax": CudaKernel(_softmax, _PAIR_SPEC),
}
ROUND_PAIRS = CudaKernel(_round_pairs, (("float32", 3), "int64", ("int64", 1), "float64", "float64",
                                        "int64", "int64", "boolean", ("int32", 2)))
KERNELS = (*PAIR_KERNELS.values(), ROUND_PAIRS)
