"""The Numba kernels are compiled once and cached on disk (``cache=True``): a fresh process with
an empty ``NUMBA_CACHE_DIR`` compiles them and writes the cache there, the next process loads
them instead of compiling, and computes the same. (Numba keys each entry on the kernel's
source file, its modification time and the argument types, so an edited kernel is compiled
again rather than loaded stale.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import histboost

SCRIPT = r"""
import hashlib, json
import numpy as np
from histboost.kernels.cpu import gradients, partition

rng = np.random.default_rng(0)
n = 1000
margin = rng.standard_normal((n, 1))
y = (rng.random(n) < 0.5).astype(np.float64)
pairs = np.empty((1, n, 2), np.float32)
gradients.logistic_pairs(0, n, margin, y, None, pairs)
column = rng.integers(0, 8, n).astype(np.uint8)
rows = np.arange(n, dtype=np.int32)
n_left = partition.partition_range(column, rows, 0, n, 3, 7, True, np.empty(n, np.int32))
kernels = (gradients.logistic_pairs, partition.partition_range)
print(json.dumps({
    "hits": sum(sum(k.stats.cache_hits.values()) for k in kernels),
    "misses": sum(sum(k.stats.cache_misses.values()) for k in kernels),
    "result": hashlib.sha256(pairs.tobytes() + rows.tobytes()).hexdigest() + str(n_left),
}))
"""


def _run(cache_dir: Path) -> dict:
    root = Path(histboost.__file__).parent.parent
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir),
           "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_kernels_are_cached_in_numba_cache_dir(tmp_path):
    cold = _run(tmp_path)
    assert cold["misses"] == 2 and cold["hits"] == 0
    files = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert any(f.startswith("gradients.logistic_pairs") and f.endswith(".nbc") for f in files)
    assert any(f.startswith("partition.partition_range") and f.endswith(".nbi") for f in files)
    warm = _run(tmp_path)
    assert warm["hits"] == 2 and warm["misses"] == 0
    assert warm["result"] == cold["result"]
