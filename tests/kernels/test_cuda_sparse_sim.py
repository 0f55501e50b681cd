"""The sparse CUDA backend's kernels and training under Numba's CUDA simulator (CI has no
GPU): kernels against NumPy, the conformance suite, and models equal to the CPU engine's
(`_cudasim_sparse.py`, in a subprocess: the simulator is chosen when numba.cuda is first
imported)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
pytest.importorskip("torch", reason="the CUDA backend needs torch")


def test_sparse_cuda_backend_in_simulator():
    script = Path(__file__).with_name("_cudasim_sparse.py")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-5000:]
    assert " 0 failed" in res.stdout
