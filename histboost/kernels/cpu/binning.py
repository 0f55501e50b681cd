"""Map raw feature values to bin indices."""

from __future__ import annotations

import numba as nb
import numpy as np

# rows binned together, feature by feature (the block's values and search positions stay in
# L1)
_BLOCK = 512


@nb.njit(parallel=True, cache=True, nogil=True)
def bin_matrix(X, cut_values, cut_ptr, out):
    """Bin a dense matrix.

    X: (n, F) float32/float64, NaN = missing. cut_values: float64 concatenated upper bounds of
    the value bins of every feature (each feature's last bound is +inf); feature f owns
    ``cut_values[cut_ptr[f]:cut_ptr[f+1]]``. out: (n, F) uint8/uint16. A value x lands in the
    first bin whose bound is >= x; NaN lands in the missing slot, one past the value bins.
    """
    n, F = X.shape
    for blk in nb.prange((n + _BLOCK - 1) // _BLOCK):
        r0 = blk * _BLOCK
        m = min(n, r0 + _BLOCK) - r0
        base = np.empty(_BLOCK, np.intp)
        xs = np.empty(_BLOCK, np.float64)
        for f in range(F):
            lo = cut_ptr[f]
            n_cuts = cut_ptr[f + 1] - lo
            cuts = cut_values[lo:lo + n_cuts]
            for j in range(m):
                xs[j] = X[r0 + j, f]
                base[j] = 0
            # lower bound (first cut >= x; the last cut is +inf), one halving step at a time
            # for the whole block: the searches are independent, so the loads of a step
            # overlap instead of each value waiting on its own chain of dependent loads
            length = n_cuts
            while length > 1:
                half = length >> 1
                for j in range(m):
                    base[j] += half * (cuts[base[j] + half - 1] < xs[j])
                length -= half
            for j in range(m):
                # NaN compares false everywhere: it lands in the missing slot
                out[r0 + j, f] = n_cuts if np.isnan(xs[j]) else base[j]
