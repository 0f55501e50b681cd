"""Map raw feature values to bin indices."""

from __future__ import annotations

import numba as nb
import numpy as np

from ._threads import run_ranges

# rows binned together, feature by feature (the block's values and search positions stay in
# L1)
_BLOCK = 512
# matrices of at most this many values are binned by NumPy: a few tens of milliseconds, less
# than compiling `bin_matrix` (seconds) on a fresh compile cache
_NUMPY_MAX_VALUES = 1 << 20


def bin_matrix(X, cut_values, cut_ptr, out):
    """Bin a dense matrix (see `bin_rows`) on Numba's thread count of the calling thread."""
    run_ranges(bin_rows, X.shape[0], X, cut_values, cut_ptr, out, min_rows=4 * _BLOCK)


def bin_dense(X, cut_values, cut_ptr, out):
    """`bin_matrix` (same arguments, same bins), by NumPy on small matrices."""
    if X.size > _NUMPY_MAX_VALUES:
        bin_matrix(X, cut_values, cut_ptr, out)
        return
    for f in range(X.shape[1]):
        # the first cut >= x (side="left"); NumPy orders NaN after +inf, so NaN lands one
        # past the last cut: the missing slot
        out[:, f] = np.searchsorted(cut_values[cut_ptr[f]:cut_ptr[f + 1]], X[:, f])


@nb.njit(cache=True, nogil=True)
def bin_rows(lo, hi, X, cut_values, cut_ptr, out):
    """Bin rows [lo, hi) of a dense matrix (`run_ranges`; `bin_matrix`: all of them).

    X: (n, F) float32/float64, NaN = missing. cut_values: float64 concatenated upper bounds of
    the value bins of every feature (each feature's last bound is +inf); feature f owns
    ``cut_values[cut_ptr[f]:cut_ptr[f+1]]``. out: (n, F) uint8/uint16. A value x lands in the
    first bin whose bound is >= x; NaN lands in the missing slot, one past the value bins.
    """
    F = X.shape[1]
    base = np.empty(_BLOCK, np.intp)
    xs = np.empty(_BLOCK, np.float64)
    for r0 in range(lo, hi, _BLOCK):
        m = min(hi, r0 + _BLOCK) - r0
        for f in range(F):
            c0 = cut_ptr[f]
            n_cuts = cut_ptr[f + 1] - c0
            cuts = cut_values[c0:c0 + n_cuts]
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
