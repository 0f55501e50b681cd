"""Every Numba-CUDA kernel of the tree engine compiles to sm_90 PTX with the signature its
`CudaKernel` launches it with (the simulator runs kernels as Python and type-checks nothing).
Skipped unless numba-cuda and the NVVM/NVRTC libraries are installed
(``pip install "cuda-toolkit[nvvm,nvrtc]==13.*"``)."""

from __future__ import annotations

import os

import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("compiling needs the real CUDA target", allow_module_level=True)
cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
pytest.importorskip("torch", reason="the CUDA kernels are launched on torch tensors")


@pytest.fixture(scope="module")
def compile_ptx():
    def tiny(x):
        x[0] = 1

    try:
        cuda.compile_ptx(tiny, "void(int64[::1])", cc=(9, 0))
    except Exception as e:  # missing NVVM / NVRTC shows up as various errors
        pytest.skip(f"no CUDA compiler libraries: {type(e).__name__}: {str(e)[:100]}")
    return lambda kernel, sig: cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))[0]


def _kernels():
    from histboost.kernels.cuda import (
        best_first,
        binning,
        gradients,
        histogram,
        partition,
        predict,
        sparse,
        split,
    )

    return [k for m in (best_first, binning, gradients, histogram, partition, predict, sparse,
                        split) for k in m.KERNELS]


def test_tree_kernels_compile(compile_ptx):
    from histboost.kernels.launch import numba_signature

    kernels = _kernels()
    assert len(kernels) == 42
    ptx = {k.name + str(k.spec[0]): compile_ptx(k.dispatcher, numba_signature(k.spec))
           for k in kernels}
    assert all(".entry" in p for p in ptx.values())
    # split gains must not fuse multiply-adds (the CPU engine rounds every product)
    # nor leaf values (the margin update of a tree planned on the device)
    for name in ("_best_split", "_oblivious_node_gains", "_plan_leaves"):
        gains = next(p for n, p in ptx.items() if n.startswith(name))
        assert "fma.rn.f64" not in gains and "mul.rn.f64" in gains, name
    # histograms sum in shared memory with native 32-bit integer atomics
    hist = next(p for n, p in ptx.items() if n.startswith("_build"))
    assert "atom.shared.add.u32" in hist and "atom.shared.add.u64" not in hist
