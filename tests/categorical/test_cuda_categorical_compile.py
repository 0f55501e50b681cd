"""The categorical statistics kernels compile to sm_90 PTX with the signatures they are launched
with, and divide as the CPU does (one IEEE-rounded division, no fused multiply-add). Skipped
unless numba-cuda and the NVVM/NVRTC libraries are installed."""

from __future__ import annotations

import os

import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("compiling needs the real CUDA target", allow_module_level=True)
cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
pytest.importorskip("torch", reason="the CUDA kernels are launched on torch tensors")


def _compiler_or_skip() -> None:
    def tiny(x):
        x[0] = 1

    try:
        cuda.compile_ptx(tiny, "void(int64[::1])", cc=(9, 0))
    except Exception as e:  # missing NVVM / NVRTC shows up as various errors
        pytest.skip(f"no CUDA compiler libraries: {type(e).__name__}: {str(e)[:100]}")


def test_target_stats_kernels_compile():
    from histboost.kernels.cuda import target_stats
    from histboost.kernels.launch import numba_signature

    _compiler_or_skip()
    ptx = {k.name: cuda.compile_ptx(k.dispatcher.py_func, numba_signature(k.spec), cc=(9, 0))[0]
           for k in target_stats.KERNELS}
    assert len(ptx) == 4 and all(".entry" in p for p in ptx.values())
    for name in ("_bin_statistics", "_bin_frequency"):
        assert "div.rn.f64" in ptx[name] and "fma.rn.f64" not in ptx[name], name


def test_prediction_kernels_compile():
    """The extended matrix of prediction (`ctr_tables`): one IEEE division per statistic and no
    fused multiply-add, as on the host; the hashes mix as uint64 (no float conversion)."""
    from histboost.kernels.cuda import ctr_tables
    from histboost.kernels.launch import numba_signature

    _compiler_or_skip()
    ptx = {k.name: cuda.compile_ptx(k.dispatcher.py_func, numba_signature(k.spec), cc=(9, 0))[0]
           for k in ctr_tables.KERNELS}
    assert len(ptx) == 4 and all(".entry" in p for p in ptx.values())
    assert "div.rn.f64" in ptx["_derived_values"] and "fma.rn.f64" not in ptx["_derived_values"]
    for name in ("_hash_int_ids", "_table_rows"):
        assert "cvt.rn.f64" not in ptx[name] and "mul.lo.s64" in ptx[name], name
