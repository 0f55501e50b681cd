"""Per-phase wall-clock timers for verbose training output (as scikit-learn's
`_hist_gradient_boosting` prints them)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable


class PhaseTimer:
    """Accumulates seconds per named phase: ``with timer("histogram"): ...``.

    sync: called before each clock reading when set (a GPU backend's `synchronize`), so
    asynchronous device work is charged to the phase that launched it.
    """

    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.sync = sync

    def __call__(self, phase: str) -> _Phase:
        return _Phase(self, phase)

    def summary(self) -> str:
        total = sum(self.seconds.values())
        parts = [f"{k} {v:.3f}s" for k, v in sorted(self.seconds.items(), key=lambda kv: -kv[1])]
        return f"time by phase ({total:.3f}s): " + ", ".join(parts)


class _Phase:
    """One timed block of a `PhaseTimer` (a plain context manager: best-first growth enters
    several a split, and a generator-based one costs twice as much per block)."""

    __slots__ = ("_timer", "_phase", "_t0")

    def __init__(self, timer: PhaseTimer, phase: str) -> None:
        self._timer = timer
        self._phase = phase

    def __enter__(self) -> None:
        if self._timer.sync is not None:
            self._timer.sync()
        self._t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        timer = self._timer
        if timer.sync is not None:
            timer.sync()
        timer.seconds[self._phase] += time.perf_counter() - self._t0
