"""Per-phase wall-clock timers for verbose training output (as scikit-learn's
`_hist_gradient_boosting` prints them)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class PhaseTimer:
    """Accumulates seconds per named phase: ``with timer("histogram"): ...``.

    sync: called before each clock reading when set (a GPU backend's `synchronize`), so
    asynchronous device work is charged to the phase that launched it.
    """

    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.sync = sync

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        if self.sync is not None:
            self.sync()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if self.sync is not None:
                self.sync()
            self.seconds[phase] += time.perf_counter() - t0

    def summary(self) -> str:
        total = sum(self.seconds.values())
        parts = [f"{k} {v:.3f}s" for k, v in sorted(self.seconds.items(), key=lambda kv: -kv[1])]
        return f"time by phase ({total:.3f}s): " + ", ".join(parts)
