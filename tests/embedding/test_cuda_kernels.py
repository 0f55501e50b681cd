"""The Numba-CUDA kernels, run on the CPU under Numba's CUDA simulator (needs numba-cuda)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")


def test_cuda_kernels_in_simulator():
    script = Path(__file__).with_name("_cudasim_checks.py")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "4 passed, 0 failed" in res.stdout
