"""Categorical features on the CUDA backend under Numba's CUDA simulator (CI has no GPU): the
device's ordered statistics, combination ids and frequencies against brute force and the host,
`replace_columns` mid-tree, and training equal to the CPU engine
(`_cudasim_categorical.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from histboost.testing.simulator import run_script

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
pytest.importorskip("torch", reason="the CUDA backend needs torch")

# started when the session collects this test (tests/conftest.py)
SIMULATOR_SCRIPT = Path(__file__).with_name("_cudasim_categorical.py")


def test_cuda_categorical_in_simulator():
    run_script(SIMULATOR_SCRIPT)
