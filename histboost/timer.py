"""Per-phase wall-clock timers for verbose training output (as scikit-learn's
`_hist_gradient_boosting` prints them)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager


class PhaseTimer:
    """Accumulates seconds per named phase: ``with timer("histogram"): ...``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - t0

    def summary(self) -> str:
        total = sum(self.seconds.values())
        parts = [f"{k} {v:.3f}s" for k, v in sorted(self.seconds.items(), key=lambda kv: -kv[1])]
        return f"time by phase ({total:.3f}s): " + ", ".join(parts)
