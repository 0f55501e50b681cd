"""Reduction operators: the built-in ``"sum"``, ``"max"``, ``"min"`` and user functions.

A user function ``f(a, b) -> a`` combines two partial results. It must be associative and
commutative (as MPI and LightGBM require of reducers); each algorithm fixes which operand comes
first, so every rank gets bit-identical results and reruns repeat them.

Records. A plain callable reduces one *record* at a time: a record is ``x[i]``, an entry along
axis 0, except that a 0-d or 1-d array of a non-structured dtype is a single record (its
entries are plain numbers, not records). So best-split rows of shape ``(n_leaves, REC_WIDTH)``
are reduced row by row, and a single ``(REC_WIDTH,)`` row is one record; ``f`` receives
arrays of the caller's kind (numpy, torch or CuPy) and may return ``a``, ``b`` or a new array.
Algorithms never cut a record between blocks.

`elementwise(f)` marks ``f`` as ufunc-like (``np.add``, ``np.fmax``, ...): it is then called
once per block on flat 1-d views of any length, which is much faster for large buffers and
lets every algorithm split the buffer anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

BUILTIN_OPS = ("sum", "max", "min")
# Codes exchanged in the metadata check; stable across versions.
OP_CODES = {"sum": 1, "max": 2, "min": 3, "callable": 4, "elementwise": 5}

_NUMPY_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum}


@dataclass(frozen=True)
class Reducer:
    """A reduction operator. ``name`` is ``"sum"``, ``"max"``, ``"min"`` or, for user
    functions, ``"callable"``/``"elementwise"`` with ``fn`` set."""

    name: str
    fn: Callable[[Any, Any], Any] | None = None

    @property
    def builtin(self) -> bool:
        return self.fn is None

    @property
    def elementwise(self) -> bool:
        """True when the operator may be applied to any flat run of elements."""
        return self.fn is None or self.name == "elementwise"

    @property
    def code(self) -> int:
        return OP_CODES[self.name]

    def bind(self, shape: tuple[int, ...], structured: bool) -> BoundReducer:
        """The operator for one call on an array of ``shape`` (``structured``: numpy dtype
        with fields, whose entries are records even in 1-d)."""
        if self.elementwise:
            rec_shape: tuple[int, ...] = ()
        elif len(shape) >= 2 or (structured and len(shape) == 1):
            rec_shape = tuple(shape[1:])
        else:
            rec_shape = tuple(shape)  # 0-d/1-d plain array: one record
        return BoundReducer(self, rec_shape, math.prod(rec_shape))


def elementwise(fn: Callable[[Any, Any], Any]) -> Reducer:
    """Wrap a ufunc-like ``fn(a, b)`` (elementwise over equally shaped flat arrays) so that it
    is called once per block instead of once per record."""
    if not callable(fn):
        raise TypeError(f"elementwise() needs a callable, got {type(fn).__name__}")
    return Reducer("elementwise", fn)


def as_reducer(op: str | Callable[[Any, Any], Any] | Reducer) -> Reducer:
    """Normalise the ``op`` argument of the public API."""
    if isinstance(op, Reducer):
        return op
    if isinstance(op, str):
        if op not in BUILTIN_OPS:
            raise ValueError(f"unknown op {op!r}: use one of {BUILTIN_OPS} or a callable")
        return Reducer(op)
    if callable(op):
        return Reducer("callable", op)
    raise TypeError(f"op must be 'sum', 'max', 'min' or a callable, got {type(op).__name__}")


@dataclass(frozen=True)
class BoundReducer:
    """A `Reducer` fixed to one call's record shape. ``rec_size`` elements form one record
    (1 for elementwise operators); block boundaries are multiples of it."""

    reducer: Reducer
    rec_shape: tuple[int, ...]
    rec_size: int

    @property
    def user_arrays(self) -> bool:
        """Whether the operator wants the caller's array kind (user functions do; built-ins
        run on numpy for numpy callers and on torch otherwise)."""
        return self.reducer.fn is not None

    def __call__(self, a: Any, b: Any, into_a: bool) -> None:
        """Store ``f(a, b)`` into ``a`` (``into_a``) or ``b``. ``a``, ``b``: equally long flat
        1-d arrays of one kind holding whole records."""
        out = a if into_a else b
        red = self.reducer
        if red.fn is None:
            if isinstance(a, np.ndarray):
                _NUMPY_UFUNCS[red.name](a, b, out=out)
            else:
                _torch_builtin(red.name, a, b, out)
            return
        if red.name == "elementwise":
            res = red.fn(a, b)
            if res is not out:
                out[...] = res
            return
        n_rec = a.shape[0] // self.rec_size if self.rec_size else 0
        sa = a.reshape((n_rec, *self.rec_shape))
        sb = b.reshape((n_rec, *self.rec_shape))
        so = sa if into_a else sb
        for i in range(n_rec):
            ai, bi = sa[i], sb[i]
            res = red.fn(ai, bi)
            # A record function typically returns one of its operands (better_split does);
            # copy only when the winner is not already where the result goes.
            if res is not (ai if into_a else bi):
                so[i] = res


    def into(self, a: Any, b: Any, out: Any) -> bool:
        """Store ``f(a, b)`` into a third array ``out`` for the built-in operators (one pass,
        no copy); returns False, having done nothing, for user functions."""
        if self.reducer.fn is not None:
            return False
        if isinstance(a, np.ndarray):
            _NUMPY_UFUNCS[self.reducer.name](a, b, out=out)
        else:
            _torch_builtin(self.reducer.name, a, b, out)
        return True


def _torch_builtin(name: str, a: Any, b: Any, out: Any) -> None:
    import torch

    if name == "sum":
        torch.add(a, b, out=out)
    elif name == "max":
        torch.maximum(a, b, out=out)
    else:
        torch.minimum(a, b, out=out)
