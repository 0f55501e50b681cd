"""Binning on the GPU, one thread per value: the bin of x is the first cut >= x (the CPU
kernel's lower bound, `histboost.kernels.cpu.binning`, so the same bins), NaN the missing slot
one past the value bins."""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ..launch import CudaKernel


@cuda.jit
def _bin_matrix(X, cut_values, cut_ptr, out):
    """X (m, F) float32/float64 -> out (m, >= F) uint8 / int32 bins (extra columns
    untouched)."""
    t = cuda.grid(1)
    n_features = X.shape[1]
    if t >= X.shape[0] * n_features:
        return
    i = t // n_features
    f = t % n_features
    x = X[i, f]
    lo = cut_ptr[f]
    n_cuts = cut_ptr[f + 1] - lo
    if math.isnan(x):
        out[i, f] = n_cuts
        return
    base = 0
    length = n_cuts
    while length > 1:
        half = length >> 1
        if cut_values[lo + base + half - 1] < x:
            base += half
        length -= half
    out[i, f] = base


_TAIL = (("float64", 1), ("int64", 1))
BIN_MATRIX = {(np.dtype(x), np.dtype(b)): CudaKernel(_bin_matrix, ((x, 2), *_TAIL, (b, 2)))
              for x in ("float32", "float64") for b in ("uint8", "int32")}
KERNELS = tuple(BIN_MATRIX.values())
