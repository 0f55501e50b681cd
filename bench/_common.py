"""Helpers shared by the benchmark scripts: the synthetic data module, the AUC they report and
the time stamps of training rounds."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import numpy as np

HERE = Path(__file__).resolve().parent
# ../shared/bench beside the checkout on the development machine, shared/bench inside it on the
# device host (the only copy that travels)
SYNTH_DIRS = [HERE.parent.parent / "shared" / "bench", HERE.parent / "shared" / "bench"]


def synth() -> ModuleType:
    """`synth.py` (higgs_like, ctr_like, sparse_like) from the shared benchmark folder."""
    for d in SYNTH_DIRS:
        if (d / "synth.py").exists():
            sys.path.insert(0, str(d))
            import synth as module  # noqa: PLC0415
            return module
    raise FileNotFoundError(f"synth.py not found in {[str(d) for d in SYNTH_DIRS]}")


def auc(y: np.ndarray, p: np.ndarray) -> float:
    from histboost.metrics import auc as histboost_auc
    return histboost_auc(y, p)


def round_stamps():
    """A histboost training callback keeping `time.perf_counter()` at the end of every round
    in its list `t` (steady time a round: the median of np.diff(t) after the first rounds).
    Imported when called, from whichever histboost is first on sys.path."""
    import time

    from histboost.callback import TrainingCallback

    class RoundStamps(TrainingCallback):
        def __init__(self) -> None:
            self.t: list[float] = []

        def after_iteration(self, model, epoch, log) -> bool:
            self.t.append(time.perf_counter())
            return False

    return RoundStamps()
