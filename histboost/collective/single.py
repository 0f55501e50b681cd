"""The one-process communicator: every collective is a copy. Needs no engine (no torch), so
single-machine training runs with numpy alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import copy_array
from .base import Call, Communicator, Operand
from .ops import Reducer


class SingleCommunicator(Communicator):
    """World size 1. Results are copies of the input (or the input with ``inplace``), so
    callers may write to them exactly as in a multi-process run."""

    def __init__(self, timeout: float = 60.0, check_metadata: bool = True) -> None:
        super().__init__(0, 1, timeout, check_metadata)

    def _exchange_metadata(self, call: Call, vec: np.ndarray) -> np.ndarray:
        return vec[None, :]

    def _allreduce(self, call: Call, arg: Operand, red: Reducer, inplace: bool,
                   tail: Operand | None = None) -> Any:
        return arg.x if inplace else copy_array(arg.x, arg.kind)

    def _reduce_scatter(self, call: Call, arg: Operand, red: Reducer) -> Any:
        return copy_array(arg.x, arg.kind)

    def _allgather(self, call: Call, arg: Operand, lengths: list[int]) -> Any:
        return copy_array(arg.x, arg.kind)

    def _broadcast(self, call: Call, arg: Operand, root: int, inplace: bool) -> Any:
        return arg.x if inplace else copy_array(arg.x, arg.kind)

    def _reduce(self, call: Call, arg: Operand, red: Reducer, root: int) -> Any:
        return copy_array(arg.x, arg.kind)

    def _alltoall(self, call: Call, arg: Operand, counts: list[int]
                  ) -> tuple[Any, np.ndarray]:
        return copy_array(arg.x, arg.kind), np.array(counts, np.int64)
