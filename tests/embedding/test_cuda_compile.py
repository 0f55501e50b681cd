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
types = pytest.importorskip("numba.core.types")


def _arr(dtype, ndim=1):
    return types.Array(dtype, ndim, "C")


@pytest.fixture(scope="module")
def compile_ptx():
    def tiny(x):
        x[0] = 1

    try:
        cuda.compile_ptx(tiny, (_arr(types.int64),), cc=(9, 0))
    except Exception as e:  # missing NVVM / NVRTC shows up as various errors
        pytest.skip(f"no CUDA compiler libraries: {type(e).__name__}: {str(e)[:100]}")
    return lambda kernel, sig: cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))[0]


def test_kernels_compile(compile_ptx):
    from histboost.embedding import _cuda_kernels as K
    from histboost.embedding import _cuda_ops as O

    i64, i32, f32, f64, b1 = types.int64, types.int32, types.float32, types.float64, \
        types.boolean
    v, mf, vi = _arr(i64), _arr(f32, 2), _arr(i32)
    sigs = {
        K._insert_kernel: (v, v, v, v, v, v),
        K._gather_rows_kernel: (v, v, v),
        K._lookup_kernel: (v, v, v, v),
        K._rehash_kernel: (v, v, v, i64),
        O._pool_kernel: (mf, v, v, b1, mf),
        O._segment_grad_kernel: (v, v, v, v, b1, mf, mf),
        O._sgd_kernel: (mf, v, mf, f64, f64),
        O._momentum_kernel: (mf, mf, v, mf, f64, f64, f64, b1),
        O._adagrad_kernel: (mf, mf, v, mf, f64, f64, f64),
        O._adam_kernel: (mf, mf, mf, vi, v, mf, f64, f64, f64, f64, f64),
        O._init_kernel: (v, i64, i64, f64, f64, mf),
    }
    for kernel, sig in sigs.items():
        ptx = compile_ptx(kernel, sig)
        assert ".entry" in ptx, kernel.py_func.__name__
    # The hash table claims slots with a 64-bit compare-and-swap.
    assert "atom.global.cas.b64" in compile_ptx(K._insert_kernel, sigs[K._insert_kernel])
