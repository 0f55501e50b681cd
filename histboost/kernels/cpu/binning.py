"""Map raw feature values to bin indices."""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(parallel=True, cache=True, nogil=True)
def bin_matrix(X, cut_values, cut_ptr, out):
    """Bin a dense matrix.

    X: (n, F) float32/float64, NaN = missing. cut_values: float64 concatenated upper bounds of
    the value bins of every feature (each feature's last bound is +inf); feature f owns
    ``cut_values[cut_ptr[f]:cut_ptr[f+1]]``. out: (n, F) uint8/uint16. A value x lands in the
    first bin whose bound is >= x; NaN lands in the missing slot, one past the value bins.
    """
    n, F = X.shape
    for i in nb.prange(n):
        for f in range(F):
            x = X[i, f]
            lo = cut_ptr[f]
            hi = cut_ptr[f + 1]
            if np.isnan(x):
                out[i, f] = hi - lo
                continue
            xv = np.float64(x)
            # branchless lower bound (first cut >= x; the last cut is +inf): the select
            # compiles to a conditional move, where a branchy search mispredicts every step
            base = lo
            length = hi - lo
            while length > 1:
                half = length >> 1
                base = base + half if cut_values[base + half - 1] < xv else base
                length -= half
            out[i, f] = base - lo
