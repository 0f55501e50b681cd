"""`device` / `tree_method` choose the backend; a GPU that cannot be used is a clear error."""

from __future__ import annotations

import os

import numpy as np
import pytest

import histboost
from histboost.params import parse_params


def _data():
    rng = np.random.default_rng(0)
    return histboost.Dataset(rng.normal(size=(50, 3)), label=rng.integers(0, 2, 50))


@pytest.mark.parametrize("given,device", [
    ({}, "cpu"), ({"device": "gpu"}, "cuda"), ({"device": "cuda:1"}, "cuda:1"),
    ({"tree_method": "gpu_hist"}, "cuda"), ({"tree_method": "hist", "device": "cuda"}, "cuda"),
    ({"tree_method": "auto"}, "cpu"),
])
def test_device_and_tree_method(given, device):
    assert parse_params(given).device == device


@pytest.mark.parametrize("bad,match", [
    ({"tree_method": "approx"}, "histboost only builds histograms"),
    ({"tree_method": "exact"}, "histboost only builds histograms"),
    ({"tree_method": "gpu_hist", "device": "cpu"}, "gpu_hist"),
    ({"device": "tpu"}, "device must be"),
    ({"device": "cuda:x"}, "device must be"),
])
def test_bad_device_or_tree_method_raises(bad, match):
    with pytest.raises(ValueError, match=match):
        parse_params(bad)


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", reason="simulated GPU")
def test_cuda_without_a_gpu_names_what_is_missing():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(RuntimeError, match="no CUDA GPU is visible"):
        histboost.train({"device": "cuda"}, _data(), 1, verbose_eval=False)
    with pytest.raises(RuntimeError, match="no CUDA GPU is visible"):
        histboost.train({"tree_method": "gpu_hist"}, _data(), 1, verbose_eval=False)


def test_unknown_loss_kernel_raises():
    from histboost.kernels.backend import make_backend
    d = _data().construct()
    be = make_backend("cpu", d.bins, d.bin_mapper.bin_offsets, n_threads=1, label=d.label,
                      weight=None, n_outputs=1, count_rows=False)
    with pytest.raises(ValueError, match="no gradient kernel for loss 'hinge'"):
        be.compute_gradients("hinge")
