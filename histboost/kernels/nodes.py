"""Node bookkeeping shared by the backends: which range of the row-index array each node owns,
and where its histogram is stored. Array-library agnostic (NumPy on the CPU, torch on a GPU)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


class NodeRanges:
    """Node id -> [start, end) of the backend's row-index array (Python ints)."""

    def __init__(self) -> None:
        self._ranges: dict[int, tuple[int, int]] = {}

    def reset(self, n_rows: int) -> None:
        """A new tree: every row in the root, node 0."""
        self._ranges = {0: (0, int(n_rows))}

    def bounds(self, nodes: Sequence[int]) -> list[tuple[int, int]]:
        return [self._ranges[i] for i in nodes]

    def split(self, parents: Sequence[int], lefts: Sequence[int], rights: Sequence[int],
              n_left: np.ndarray) -> np.ndarray:
        """Record the children of a stable partition (left rows first in each parent's
        range); returns int64 (k, 2) child row counts."""
        # counts gathered as Python ints and made an array once: a numpy row write per parent
        # costs more than the rest of the loop
        counts: list[int] = []
        for j, ((s, e), nl) in enumerate(zip(self.bounds(parents), np.asarray(n_left).tolist(),
                                             strict=True)):
            self._ranges[lefts[j]] = (s, s + nl)
            self._ranges[rights[j]] = (s + nl, e)
            counts += (nl, e - s - nl)
        return np.array(counts, np.int64).reshape(-1, 2)


class HistogramStore:
    """Node id -> (buffer, index): a node's histogram is row `index` of a (k, ...) buffer made
    by one build or subtraction call. stack: the array library's stack (np.stack,
    torch.stack)."""

    def __init__(self, stack: Callable[[list[Any]], Any]) -> None:
        self._stack = stack
        self._entries: dict[int, tuple[Any, int]] = {}

    def clear(self) -> None:
        self._entries.clear()

    def store(self, nodes: Sequence[int], buffer: Any) -> None:
        for j, i in enumerate(nodes):
            self._entries[i] = (buffer, j)

    @staticmethod
    def pair_layout(built: Sequence[int], targets: Sequence[int]
                    ) -> tuple[list[int], list[int], list[int]]:
        """Where a subtraction puts its results: one buffer of 2k rows holding each pair
        (built[j], targets[j]) at rows 2j, 2j + 1, the lower node id first, so siblings with
        consecutive ids (the grower's left and right children) are consecutive rows of one
        buffer and `stack` of them is a view. Returns (the nodes in buffer order, the row of
        each built[j], the row of each targets[j])."""
        order: list[int] = []
        built_rows: list[int] = []
        target_rows: list[int] = []
        for j, (b, t) in enumerate(zip(built, targets, strict=True)):
            first = b < t
            order += (b, t) if first else (t, b)
            built_rows.append(2 * j + (not first))
            target_rows.append(2 * j + first)
        return order, built_rows, target_rows

    def release(self, nodes: Sequence[int]) -> None:
        for i in nodes:
            del self._entries[i]

    def nodes(self) -> list[int]:
        """The ids of the nodes whose histograms are held."""
        return list(self._entries)

    def histogram(self, node: int) -> Any:
        """The histogram of `node`, a view into its buffer (writes go to the buffer)."""
        buffer, j = self._entries[node]
        return buffer[j]

    def source(self, nodes: Sequence[int]) -> tuple[Any, list[int]] | None:
        """(buffer, the row of each of `nodes` in it) when their histograms are rows of one
        buffer, else None: a kernel may then read them there, not from a stacked copy."""
        entries = [self._entries[i] for i in nodes]
        buffer = entries[0][0]
        if all(b is buffer for b, _ in entries):
            return buffer, [j for _, j in entries]
        return None

    def stack(self, nodes: Sequence[int]) -> Any:
        """The histograms of `nodes` as one (k, ...) array: a view when they are consecutive
        rows of one buffer (a level built or subtracted in one call), else a copy."""
        entries = [self._entries[i] for i in nodes]
        buffer, first = entries[0]
        if all(b is buffer and j == first + m for m, (b, j) in enumerate(entries)):
            return buffer[first:first + len(nodes)]
        return self._stack([b[j] for b, j in entries])
