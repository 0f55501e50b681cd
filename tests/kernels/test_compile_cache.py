"""The Numba kernels are compiled once and cached on disk (``cache=True``): a fresh process with
an empty ``NUMBA_CACHE_DIR`` compiles them and writes the cache there, the next process loads
them instead of compiling, and computes the same. (Numba keys each entry on the kernel's
source file, its modification time and the argument types, so an edited kernel is compiled
again rather than loaded stale.)"""

from __future__ import annotations

import json
import os
import shutil
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
n_left = np.zeros(1, np.int64)
partition.partition_nodes_serial(column.reshape(1, n), rows, np.zeros(1, np.int64),
                                 np.zeros(1, np.int32), np.full(1, 3, np.int32),
                                 np.full(1, 7, np.int32), np.ones(1, np.uint8),
                                 np.array([[0, 0, n]], np.int64), 1, np.empty(n, np.int32),
                                 n_left)
kernels = (gradients.logistic_pairs, partition.partition_nodes_serial)
print(json.dumps({
    "hits": sum(sum(k.stats.cache_hits.values()) for k in kernels),
    "misses": sum(sum(k.stats.cache_misses.values()) for k in kernels),
    "result": hashlib.sha256(pairs.tobytes() + rows.tobytes()).hexdigest() + str(n_left),
}))
"""


def _run(cache_dir: Path, root: Path | None = None) -> dict:
    """SCRIPT's counts in a fresh process importing histboost from `root` (default: this
    one's)."""
    root = root or Path(histboost.__file__).parent.parent
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=120, cwd=root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_kernels_are_cached_in_numba_cache_dir(tmp_path):
    cold = _run(tmp_path)
    assert cold["misses"] == 2 and cold["hits"] == 0
    files = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert any(f.startswith("gradients.logistic_pairs") and f.endswith(".nbc") for f in files)
    assert any(f.startswith("partition.partition_nodes_serial") and f.endswith(".nbi")
               for f in files)
    warm = _run(tmp_path)
    assert warm["hits"] == 2 and warm["misses"] == 0
    assert warm["result"] == cold["result"]


def test_read_only_package_caches_in_numba_cache_dir(tmp_path):
    """A package directory that cannot be written (a system install, a read-only container
    layer) works with NUMBA_CACHE_DIR: the kernels are compiled and cached there, loaded from
    there by the next process, and nothing is written beside the package's sources. (Run as
    root, the modes do not stop writes: the last check is the one that holds then.)"""
    package = tmp_path / "site" / "histboost"
    shutil.copytree(Path(histboost.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in [package, *package.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    cache = tmp_path / "cache"
    try:
        cold = _run(cache, root=package.parent)
        warm = _run(cache, root=package.parent)
    finally:
        for path in [package, *package.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    assert cold["misses"] == 2 and warm["hits"] == 2 and warm["misses"] == 0
    assert warm["result"] == cold["result"]
    assert any(p.suffix == ".nbi" for p in cache.rglob("*"))
    assert not [p for p in package.rglob("*") if p.suffix in (".nbi", ".nbc")]

