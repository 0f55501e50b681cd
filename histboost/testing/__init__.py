"""Reusable test layer: float64 NumPy references of the engine's steps (`reference`) and checks
that the CPU, CUDA and distributed suites run alike (`checks`)."""
