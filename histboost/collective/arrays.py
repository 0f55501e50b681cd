"""Array kinds (numpy, torch, CuPy) and the flat working buffers the algorithms move.

Everything a collective sends is a flat, contiguous torch tensor (the engine's currency); it
is made from the caller's array without copying where the memory allows (``torch.from_numpy``
for numpy, DLPack for CuPy, a view for torch) and handed back the same way. numpy dtypes torch
cannot hold (structured records, non-native byte order, datetimes) travel as raw bytes and are
reduced through numpy views.

Only `Buffer` needs torch, and imports it lazily: world size 1 runs without torch.
"""

from __future__ import annotations

import sys
import zlib
from typing import Any

import numpy as np

KINDS = ("numpy", "torch", "cupy")
DEVICE_CODES = {"cpu": 0, "cuda": 1}


def array_kind(x: Any) -> str:
    """``"numpy"``, ``"torch"``, ``"cupy"`` or ``"other"`` (scalars, lists), without importing
    torch or CuPy."""
    if isinstance(x, np.ndarray):
        return "numpy"
    mod = type(x).__module__ or ""
    if mod.startswith("torch") and hasattr(x, "data_ptr"):
        return "torch"
    if mod.startswith("cupy") and hasattr(x, "__cuda_array_interface__"):
        return "cupy"
    return "other"


def as_input(x: Any) -> tuple[Any, str]:
    """The array to work on and its kind; scalars and sequences become numpy arrays."""
    kind = array_kind(x)
    if kind == "other":
        x = np.asarray(x)
        kind = "numpy"
    if kind == "numpy" and x.dtype.hasobject:
        raise TypeError("collectives need fixed-size dtypes; got an object array")
    return x, kind


_NAMES: dict[Any, str] = {}  # dtype_name by dtype: every collective call asks


def dtype_name(x: Any, kind: str) -> str:
    """A name that is equal across ranks for equal element types, whatever the array kind
    (numpy float32 and torch.float32 are both ``"float32"``)."""
    name = _NAMES.get(x.dtype)
    if name is None:
        name = _NAMES[x.dtype] = _dtype_name(x, kind)
    return name


def _dtype_name(x: Any, kind: str) -> str:
    if kind == "torch":
        return str(x.dtype).removeprefix("torch.")
    dt = np.dtype(x.dtype)
    if dt.fields is not None:
        return f"struct{dt.descr}"
    if dt.byteorder == ">" or (dt.byteorder == "<" and sys.byteorder == "big"):
        return dt.str
    return dt.name


def dtype_code(name: str) -> int:
    """A stable 31-bit code for `dtype_name`, for the metadata exchange."""
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


_COMMON_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
]
DTYPE_NAMES = {dtype_code(n): n for n in _COMMON_DTYPES}


def device_type(x: Any, kind: str) -> str:
    if kind == "numpy":
        return "cpu"
    if kind == "cupy":
        return "cuda"
    return x.device.type


def is_structured(x: Any, kind: str) -> bool:
    return kind == "numpy" and x.dtype.fields is not None


def copy_array(x: Any, kind: str) -> Any:
    """A copy of the same kind, device and dtype (world size 1 needs nothing more)."""
    if kind == "torch":
        return x.clone()
    return x.copy()


class Buffer:
    """A flat, contiguous array of ``n`` elements of the caller's dtype.

    ``wire`` is the torch tensor that travels (typed where torch has the dtype, else uint8
    with ``scale`` = itemsize bytes per element); `view` gives the array a reduction works on.
    All offsets are in elements of the caller's dtype.
    """

    __slots__ = ("wire", "n", "scale", "kind", "np_dtype")

    def __init__(self, wire: Any, n: int, scale: int, kind: str, np_dtype: np.dtype | None):
        self.wire = wire
        self.n = n
        self.scale = scale
        self.kind = kind
        self.np_dtype = np_dtype

    # -- construction -------------------------------------------------------------------
    @classmethod
    def wrap(cls, x: Any, kind: str) -> Buffer:
        """A flat view of ``x`` (copied only if ``x`` is not contiguous)."""
        import torch

        if kind == "numpy":
            a = np.ascontiguousarray(x).reshape(-1)
            try:
                # Zero-copy: the tensor shares the numpy array's memory.
                return cls(torch.from_numpy(a), a.size, 1, kind, a.dtype)
            except (TypeError, RuntimeError):
                raw = a.view(np.uint8) if a.size else np.empty(0, np.uint8)
                return cls(torch.from_numpy(raw), a.size, a.dtype.itemsize, kind, a.dtype)
        if kind == "cupy":
            t = torch.from_dlpack(x.reshape(-1) if x.flags.c_contiguous else x.ravel())
            return cls(t, t.numel(), 1, kind, None)
        t = x.contiguous().view(-1)
        return cls(t, t.numel(), 1, kind, None)

    def empty(self, n: int) -> Buffer:
        """A new uninitialised buffer of ``n`` elements, same dtype and device."""
        import torch

        wire = torch.empty(n * self.scale, dtype=self.wire.dtype, device=self.wire.device)
        return Buffer(wire, n, self.scale, self.kind, self.np_dtype)

    def on(self, wire: Any) -> Buffer:
        """This buffer's dtype description over another wire tensor (``n`` follows it)."""
        return Buffer(wire, wire.numel() // self.scale, self.scale, self.kind, self.np_dtype)

    # -- access -------------------------------------------------------------------------
    def seg(self, start: int, stop: int) -> Any:
        """The wire tensor of elements [start, stop): what send/recv take."""
        return self.wire[start * self.scale : stop * self.scale]

    def view(self, start: int, stop: int, user: bool) -> Any:
        """Elements [start, stop) as an array to reduce on: the caller's kind when ``user``
        (user functions), else numpy for numpy callers and torch otherwise."""
        t = self.seg(start, stop)
        if self.kind == "numpy":
            a = t.numpy()
            return a.view(self.np_dtype) if self.scale != 1 else a
        if user and self.kind == "cupy":
            import cupy

            return cupy.from_dlpack(t)
        return t

    def copy_(self, start: int, src: Buffer, src_start: int, n: int) -> None:
        """Copy ``n`` elements of ``src`` from ``src_start`` to our ``start``."""
        if not n:
            return
        w, sw = self.wire, src.wire
        if w.device.type == "cpu" and sw.device.type == "cpu" and w.dtype == sw.dtype:
            # host memory: numpy slicing costs a fraction of torch's per call (small calls
            # of the tree learner are mostly such overhead); dtypes numpy lacks take torch
            try:
                dst, source = w.numpy(), sw.numpy()
            except (TypeError, RuntimeError):
                pass
            else:
                a, b = self.scale * start, src.scale * src_start
                dst[a:a + n * self.scale] = source[b:b + n * src.scale]
                return
        self.seg(start, start + n).copy_(src.seg(src_start, src_start + n))

    def to_user(self, shape: tuple[int, ...], like: Any = None) -> Any:
        """The whole buffer as the caller's kind of array of ``shape`` (zero-copy)."""
        if self.kind == "numpy":
            a = self.wire.numpy()
            if self.scale != 1 or a.dtype != self.np_dtype:
                a = a.view(self.np_dtype)
            return a.reshape(shape)
        if self.kind == "cupy":
            import cupy

            return cupy.from_dlpack(self.wire).reshape(shape)
        return self.wire.view(shape)

    @property
    def device(self) -> Any:
        return self.wire.device
