"""The CUDA backend's kernels under Numba's CUDA simulator (CI has no GPU): the backend
conformance suite and training against the CPU engine (`_cudasim_backend.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from histboost.testing.simulator import run_script

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
pytest.importorskip("torch", reason="the CUDA backend needs torch")

# started when the session collects this test (tests/conftest.py)
SIMULATOR_SCRIPT = Path(__file__).with_name("_cudasim_backend.py")


def test_cuda_backend_in_simulator():
    run_script(SIMULATOR_SCRIPT)
