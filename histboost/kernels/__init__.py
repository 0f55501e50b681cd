"""Hot loops only. `kernels.cpu` holds the Numba CPU kernels; a CUDA backend implements the
same `histboost.kernels.backend.Backend` interface with device kernels."""
