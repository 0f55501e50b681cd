"""Reusable test layer: float64 NumPy references of the engine's steps (`reference`), NumPy
traversals of saved models (`model_reference`), the backend conformance suite that every
implementation of `histboost.kernels.backend.Backend` passes (`conformance`), data generators
(`data`), thread helpers (`threads`) and the runner of CUDA-backend checks under Numba's
simulator (`simulator`)."""
