"""Row subsampling with a counter-based hash: row r of the whole data set is in round t's
sample iff ``uniform01(key(seed, t), r) < fraction``.

Each row's draw depends on its global index only, so a worker holding a block of the rows
keeps exactly the rows one process holding all of them would keep (the same rule as the
stochastic rounding in `histboost.kernels.cpu.quantize`), on any thread count. The sample size
is Binomial(n, fraction), as in XGBoost's uniform sampling, not an exact count.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ._threads import run_ranges
from .quantize import uniform01, uniform01_numpy

# below this many rows the draws are made in NumPy (the same draws; no kernel to compile on a
# first run with small data, docs/compile_cache.md)
_KERNEL_MIN_ROWS = 16_384


@nb.njit(cache=True, nogil=True)
def _mark_sampled(lo, hi, row_ids, key, fraction, out):
    """out[i] = row i is in the sample, i in [lo, hi); row_ids None: the global index is i
    (a compile-time choice: the call compiles one of the two loops)."""
    if row_ids is None:
        for i in range(lo, hi):
            out[i] = uniform01(key, np.uint64(i)) < fraction
    else:
        for i in range(lo, hi):
            out[i] = uniform01(key, np.uint64(row_ids[i])) < fraction


def sample_rows(n_rows: int, row_ids: np.ndarray | None, key: int,
                fraction: float) -> np.ndarray:
    """int32 sorted indices of the sampled rows among n_rows local rows whose global indices
    are row_ids int64 (n_rows,) (None: 0..n_rows-1). key: the round's uint64 key."""
    ids = None if row_ids is None else np.ascontiguousarray(row_ids, np.int64)
    if n_rows < _KERNEL_MIN_ROWS:
        counters = np.arange(n_rows, dtype=np.uint64) if ids is None else ids
        return np.flatnonzero(uniform01_numpy(np.uint64(key), counters) < fraction
                              ).astype(np.int32)
    mask = np.empty(n_rows, np.bool_)
    run_ranges(_mark_sampled, n_rows, ids, np.uint64(key), float(fraction), mask)
    return np.flatnonzero(mask).astype(np.int32)
