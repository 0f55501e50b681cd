"""Numba CPU kernels (``@njit(cache=True)``): binning, histograms, split scan, partition,
prediction. They take plain NumPy arrays and hold no orchestration. Per-split kernels use
Numba's parallel loops; once-a-round ones are serial functions over a row range run on a
thread pool (`_threads`), which compile several times faster. Compiled kernels are cached on
disk (beside the package, else in the user's cache directory, or in ``NUMBA_CACHE_DIR``)."""
