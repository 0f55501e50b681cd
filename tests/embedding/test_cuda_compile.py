"""Every Numba-CUDA kernel compiles to sm_90 PTX with its real argument types.

The simulator (test_cuda_kernels.py) runs the kernels as Python and type-checks nothing; this
compiles them with Numba's CUDA typing and NVVM, no GPU needed. Skipped unless numba-cuda and
the NVVM/NVRTC libraries (``pip install "cuda-toolkit[nvvm,nvrtc]==13.*"``) are installed.
"""

from __future__ import annotations

import os

import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("compiling needs the real CUDA target", allow_module_level=True)
cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")


@pytest.fixture(scope="module")
def compile_ptx():
    def tiny(x):
        x[0] = 1

    try:
        cuda.compile_ptx(tiny, "void(int64[::1])", cc=(9, 0))
    except Exception as e:  # missing NVVM / NVRTC shows up as various errors
        pytest.skip(f"no CUDA compiler libraries: {type(e).__name__}: {str(e)[:100]}")
    return lambda kernel, sig: cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))[0]


def test_kernels_compile(compile_ptx):
    """Every kernel with the signature its CudaKernel launches it with (the one source)."""
    from histboost.embedding import _cuda_kernels as K
    from histboost.embedding import _cuda_ops as O
    from histboost.kernels.launch import numba_signature

    kernels = K.KERNELS + O.KERNELS
    assert len(kernels) == 11
    for k in kernels:
        ptx = compile_ptx(k.dispatcher, numba_signature(k.spec))
        assert ".entry" in ptx, k.name
    # The hash table claims slots with a 64-bit compare-and-swap.
    insert = K.KERNELS[0]
    assert "atom.global.cas.b64" in compile_ptx(insert.dispatcher, numba_signature(insert.spec))
