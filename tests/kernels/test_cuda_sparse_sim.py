"""The sparse CUDA backend's kernels and training under Numba's CUDA simulator (CI has no
GPU): kernels against NumPy, the conformance suite, and models equal to the CPU engine's
(`_cudasim_sparse.py`, in a subprocess: the simulator is chosen when numba.cuda is first
imported)."""

from __future__ import annotations

from pathlib import Path

import pytest

from histboost.testing.simulator import run_script

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
pytest.importorskip("torch", reason="the CUDA backend needs torch")

# started when the session collects this test (tests/conftest.py)
SIMULATOR_SCRIPT = Path(__file__).with_name("_cudasim_sparse.py")


def test_sparse_cuda_backend_in_simulator():
    run_script(SIMULATOR_SCRIPT)
