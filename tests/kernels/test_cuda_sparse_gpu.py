"""Sparse training data on a real GPU (`histboost.kernels.cuda.sparse`): the conformance
suite on the sparse layout, quantised models identical to the CPU engine's on data large
enough for many chunks, and device memory that follows the stored values. Skipped without a
CUDA device (run through `bench/gpu_tree_check.sh` on a GPU machine)."""

from __future__ import annotations

import os

import numpy as np
import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("needs a real GPU", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("numba.cuda")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
sp = pytest.importorskip("scipy.sparse")

import histboost  # noqa: E402
from histboost.kernels.backend import make_backend  # noqa: E402
from histboost.testing.conformance import CHECKS  # noqa: E402
from histboost.testing.data import sparse_bins_of  # noqa: E402


def _sparse_cuda(bins, offsets, **kw):
    return make_backend("cuda", sparse_bins_of(bins, offsets), offsets, n_threads=1, **kw)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("seed", [0, 1])
def test_sparse_cuda_backend_conforms(check, seed):
    check(_sparse_cuda, seed)


def _ctr_like(n: int, F: int, seed: int):
    """A CSR of ~20 stored values a row over F columns (popular columns zipf-distributed,
    values mostly 1.0, a few NaN) and a binary target from a few columns."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(20, n) + 1
    cols = (np.minimum(rng.zipf(1.3, counts.sum()), F) - 1) * 7 % F
    vals = np.where(rng.random(cols.size) < 0.8, 1.0, rng.exponential(2.0, cols.size))
    vals[rng.random(cols.size) < 0.01] = np.nan
    indptr = np.concatenate([[0], np.cumsum(counts)])
    X = sp.csr_matrix((vals, cols, indptr), shape=(n, F))
    X.sum_duplicates()
    w = rng.normal(size=F) * (rng.random(F) < 0.1)
    finite = X.copy()
    finite.data = np.nan_to_num(finite.data)
    y = (finite @ w + rng.logistic(size=n) > 0).astype(np.float64)
    return X, y


@pytest.mark.parametrize("params", [
    {"grow_policy": "lossguide", "max_leaves": 63, "max_depth": 0},
    {"grow_policy": "depthwise", "max_depth": 6, "subsample": 0.8},
    {"grow_policy": "oblivious", "max_depth": 5, "min_data_in_leaf": 20},
    {"grow_policy": "lossguide", "max_leaves": 15, "max_depth": 0,
     "objective": "multi:softprob", "num_class": 3},
])
@pytest.mark.parametrize("unstored", ["zero", "nan"])
def test_quantised_sparse_gpu_model_equals_cpu(params, unstored):
    X, y = _ctr_like(20_000, 3_000, seed=4)
    if "num_class" in params:
        y = y + (np.asarray(X[:, 7].todense()).ravel() > 0)
    base = {"objective": "binary:logistic", "quantized_grad": True, "seed": 3, **params}
    models = [histboost.train({**base, "device": dev},
                              histboost.Dataset(X, label=y, unstored=unstored), 6,
                              verbose_eval=False) for dev in ("cpu", "cuda")]
    a, b = (m.save_raw().replace(f'"device":"{d}"'.encode(), b"")
            for m, d in zip(models, ("cpu", "cuda"), strict=True))
    assert a == b


def test_sparse_device_memory_follows_stored_values():
    """A wide matrix (50k x 200k, ~21 values a row) trains with device memory far below the
    dense layout's 20 GB (bins and their column-major copy): the CSR of slots, per-row
    arrays, the histogram pool (32 slots of 479k slots) and the split search's per-feature
    records."""
    X, y = _ctr_like(50_000, 200_000, seed=1)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    histboost.train({"objective": "binary:logistic", "device": "cuda", "max_leaves": 31,
                     "grow_policy": "lossguide", "max_depth": 0}, histboost.Dataset(X, label=y),
                    3, verbose_eval=False)
    peak = torch.cuda.max_memory_allocated() - before
    assert peak < 2.5e9, f"peak device memory {peak / 2**20:.0f} MiB"
