"""Numba CPU kernels (``@njit(cache=True)``): binning, histograms, split scan, partition,
prediction. They take plain NumPy arrays and hold no orchestration."""
