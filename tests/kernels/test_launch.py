"""histboost.kernels.launch: signatures and argument flattening (no GPU needed)."""

from __future__ import annotations

import ctypes

import pytest

torch = pytest.importorskip("torch")

from histboost.kernels.launch import CudaKernel, flatten_args, numba_signature  # noqa: E402

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


def _kernel(spec=SPEC):
    """A CudaKernel named k over `spec` (its packing needs no GPU)."""
    def k():
        pass
    return CudaKernel(k, spec)


def _read_packed(packed, spec):
    """The parameters a driver reads at packed.address (void**), decoded per spec."""
    n = sum(5 + 2 * a[1] if isinstance(a, tuple) else 1 for a in spec)
    slots = (ctypes.c_void_p * n).from_address(packed.address)
    out, k = [], 0
    for arg in spec:
        if isinstance(arg, tuple):
            size = 5 + 2 * arg[1]
            out += [ctypes.c_int64.from_address(slots[k + j]).value for j in range(size)]
            k += size
        else:
            ctype = {"boolean": ctypes.c_bool, "float64": ctypes.c_double,
                     "int64": ctypes.c_int64, "float32": ctypes.c_float,
                     "int32": ctypes.c_int32}[arg]
            out.append(ctype.from_address(slots[k]).value)
            k += 1
    return out


def _as_numbers(flat):
    return [p.value if isinstance(p, ctypes._SimpleCData) else p for p in flat]


def test_packed_parameters_are_the_flattened_ones():
    spec = (("float32", 2), "float32", ("int64", 1), "int32", "boolean", "float64", "int64")
    kernel = _kernel(spec)
    w, rows = torch.randn(5, 3), torch.arange(4)
    args = (w, 0.25, rows, -3, True, -1.5, 2**40 + 7)
    packed = kernel.packed(args, CPU)
    assert _read_packed(packed, spec) == [0, 0, 15, 4, w.data_ptr(), 5, 3, 12, 4, 0.25,
                                          0, 0, 4, 8, rows.data_ptr(), 4, 8,
                                          -3, True, -1.5, 2**40 + 7]
    assert _read_packed(packed, spec) == _as_numbers(flatten_args("k", spec, args, CPU))
    # the same tensors: the same buffer, the scalars written afresh
    args = (w, 4.5, rows, 9, False, 3.25, -11)
    assert kernel.packed(args, CPU) is packed
    assert _read_packed(packed, spec) == _as_numbers(flatten_args("k", spec, args, CPU))


def test_packed_parameters_follow_tensors_changed_in_place():
    kernel = _kernel()
    w, rows = torch.zeros(5, 3), torch.arange(4)
    first = kernel.packed((w, rows, True, 0.5, 7), CPU)
    w.resize_(7, 3)  # new storage and shape: packed afresh
    grown = kernel.packed((w, rows, True, 0.5, 7), CPU)
    assert grown is not first
    assert _read_packed(grown, SPEC)[:9] == [0, 0, 21, 4, w.data_ptr(), 7, 3, 12, 4]
    w.resize_(2, 3)  # the same storage, a smaller shape
    assert w.data_ptr() == grown.ptrs[0]
    small = kernel.packed((w, rows, True, 0.5, 7), CPU)
    assert small is not grown and _read_packed(small, SPEC)[2] == 6


def test_packed_parameters_are_dropped_with_their_tensors():
    kernel = _kernel()
    rows = torch.arange(4)
    kernel.packed((torch.zeros(5, 3), rows, True, 0.5, 7), CPU)  # a temporary
    kernel.packed((torch.zeros(5, 3), rows, True, 0.5, 7), CPU)
    assert kernel._packed == {}
    w = torch.zeros(5, 3)
    kernel.packed((w, rows, True, 0.5, 7), CPU)
    assert len(kernel._packed) == 1
    del w
    assert kernel._packed == {}


def test_packed_launch_keeps_the_checks():
    kernel = _kernel()
    w, rows = torch.zeros(5, 3), torch.arange(4)
    kernel.packed((w, rows, True, 0.5, 7), CPU)
    with pytest.raises(TypeError, match=r"k: argument 4 \(int64\)"):
        kernel.packed((w, rows, True, 0.5, 7.5), CPU)
    with pytest.raises(TypeError, match=r"k: argument 3 \(float64\)"):
        kernel.packed((w, rows, True, "0.5", 7), CPU)
    with pytest.raises(TypeError, match="expected 5 arguments, got 4"):
        kernel.packed((w, rows, True, 0.5), CPU)
    # a kept tensor in another position, or on another device, is checked
    with pytest.raises(TypeError, match="argument 0 must be a contiguous 2-D float32"):
        kernel.packed((rows, rows, True, 0.5, 7), CPU)
    with pytest.raises(TypeError, match="on meta"):
        kernel.packed((w, rows, True, 0.5, 7), torch.device("meta"))
    with pytest.raises(TypeError, match="ndarray"):
        kernel.packed((w.numpy(), rows, True, 0.5, 7), CPU)
