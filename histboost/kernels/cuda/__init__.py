"""Numba-CUDA kernels of the tree engine and `CUDABackend`, the backend that runs them on
torch CUDA tensors (`histboost.kernels.launch`). The same kernels run under Numba's CUDA
simulator on CPU tensors, which is how CI (no GPU) tests them."""
