"""Reusable test layer: float64 NumPy references of the engine's steps (`reference`), NumPy
traversals of saved models (`model_reference`), data generators (`data`) and thread helpers
(`threads`). Conformance checks that the CPU, CUDA and distributed backends run alike are being
added; until then each suite compares its backend against these references."""
