"""Numba CPU kernels (``@njit(cache=True)``): binning, histograms, split scan, partition,
prediction. They take plain NumPy arrays and hold no orchestration. Kernels launched per split
or per tree use Numba's parallel loops; prediction and binning are serial functions over a
row range run on a thread pool (`_threads`), which compile several times faster. Compiled
kernels are cached on disk (beside the package, else in the user's cache directory, or in
``NUMBA_CACHE_DIR``)."""
