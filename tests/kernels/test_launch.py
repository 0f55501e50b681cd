"""histboost.kernels.launch: signatures and argument flattening (no GPU needed)."""

from __future__ import annotations

import ctypes

import pytest

torch = pytest.importorskip("torch")

from histboost.kernels.launch import flatten_args, numba_signature  # noqa: E402

SPEC = (("float32", 2), ("int64", 1), "boolean", "float64", "int64")
CPU = torch.device("cpu")


def test_numba_signature():
    assert numba_signature(SPEC) == "void(float32[:, ::1], int64[::1], boolean, float64, int64)"


def test_flatten_matches_numbas_array_layout():
    w = torch.zeros(5, 3)
    rows = torch.arange(4)
    params = flatten_args("k", SPEC, (w, rows, True, 0.5, 7), CPU)
    # Array: meminfo, parent, size, itemsize, data pointer, shape..., strides in bytes...
    assert params[:9] == [0, 0, 15, 4, w.data_ptr(), 5, 3, 12, 4]
    assert params[9:16] == [0, 0, 4, 8, rows.data_ptr(), 4, 8]
    assert params[16] is True
    assert isinstance(params[17], ctypes.c_double) and params[17].value == 0.5
    assert isinstance(params[18], ctypes.c_int64) and params[18].value == 7


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (torch.zeros(5, 3, dtype=torch.float64), "argument 0 must be a contiguous 2-D float32"),
        (torch.zeros(3, 5).t(), "contiguous=False"),
        (torch.zeros(15), "1-D"),
        (torch.zeros(5, 3).numpy(), "ndarray"),
    ],
)
def test_flatten_rejects_mismatched_tensors(bad, match):
    with pytest.raises(TypeError, match=match):
        flatten_args("k", SPEC, (bad, torch.arange(4), True, 0.5, 7), CPU)


def test_flatten_rejects_wrong_device_and_arity():
    meta = torch.device("meta")
    with pytest.raises(TypeError, match="on meta"):
        flatten_args("k", SPEC, (torch.zeros(5, 3), torch.arange(4), True, 0.5, 7), meta)
    with pytest.raises(TypeError, match="expected 5 arguments, got 2"):
        flatten_args("k", SPEC, (torch.zeros(5, 3), torch.arange(4)), CPU)


def test_flattened_tensors_are_kept_while_unchanged():
    w = torch.zeros(5, 3)
    rows = torch.arange(4)
    first = flatten_args("k", SPEC, (w, rows, True, 0.5, 7), CPU)
    again = flatten_args("k", SPEC, (w, rows, False, 1.5, 8), CPU)
    assert again[:16] == first[:16] and again[16] is False and again[17].value == 1.5
    w.resize_(7, 3)  # new storage and shape: flattened afresh
    grown = flatten_args("k", SPEC, (w, rows, True, 0.5, 7), CPU)
    assert grown[:9] == [0, 0, 21, 4, w.data_ptr(), 7, 3, 12, 4]
    # a kept tensor is still checked against each kernel's own spec
    with pytest.raises(TypeError, match="argument 0 must be a contiguous 2-D float64"):
        flatten_args("k2", (("float64", 2),), (w,), CPU)
