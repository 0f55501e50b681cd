"""Training callbacks (XGBoost's `TrainingCallback` protocol).

`train()` calls ``before_training(model)`` once, ``before_iteration(model, epoch, evals_log)``
before and ``after_iteration(model, epoch, evals_log)`` after every boosting round (True from
either stops training) and ``after_training(model)`` at the end (its return value replaces the
model). ``evals_log`` is ``{data_name: {metric: [values]}}``. `histboost.cv` calls them with a
model standing for all folds (`histboost.cross_validation.CVBooster`) and the folds' mean metrics.

Here too: `EvaluationMonitor` (printing), `EarlyStopping`, `LearningRateScheduler` (a learning
rate per round) and `TrainingCheckPoint` (the model written every N rounds).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .metrics import MAXIMIZE

if TYPE_CHECKING:
    from .booster import Booster

EvalsLog = dict[str, dict[str, list[float]]]


class TrainingCallback:
    """Base class: override the hooks you need."""

    def before_training(self, model: Booster) -> Booster:
        return model

    def before_iteration(self, model: Booster, epoch: int, evals_log: EvalsLog) -> bool:
        return False

    def after_iteration(self, model: Booster, epoch: int, evals_log: EvalsLog) -> bool:
        return False

    def after_training(self, model: Booster) -> Booster:
        return model


class EvaluationMonitor(TrainingCallback):
    """Prints one line of evaluation results every `period` rounds (and the last round)."""

    def __init__(self, period: int = 1) -> None:
        if period < 1:
            raise ValueError(f"period must be >= 1, got {period}")
        self.period = period
        self._epoch = -1
        self._last_printed = -1
        self._last_line = ""

    @staticmethod
    def format_line(epoch: int, evals_log: EvalsLog) -> str:
        parts = [f"[{epoch}]"]
        for data, metrics in evals_log.items():
            for name, values in metrics.items():
                parts.append(f"{data}-{name}:{values[-1]:.5f}")
        return "\t".join(parts)

    def after_iteration(self, model: Booster, epoch: int, evals_log: EvalsLog) -> bool:
        if not evals_log:
            return False
        self._last_line = self.format_line(epoch, evals_log)
        if epoch % self.period == 0:
            print(self._last_line, flush=True)
            self._last_printed = epoch
        self._epoch = epoch
        return False

    def after_training(self, model: Booster) -> Booster:
        if self._last_line and self._epoch != self._last_printed:
            print(self._last_line, flush=True)
        return model


class EarlyStopping(TrainingCallback):
    """Stops when the watched metric has not improved for `rounds` rounds.

    Watches `metric_name` on `data_name` (default: the last metric of the last eval set, as
    XGBoost). Sets ``model.best_iteration`` and ``model.best_score``; with ``save_best=True``
    the returned model is truncated to the best iteration. ``min_delta`` is the smallest change
    that counts as an improvement.
    """

    def __init__(self, rounds: int, metric_name: str | None = None,
                 data_name: str | None = None, maximize: bool | None = None,
                 save_best: bool = False, min_delta: float = 0.0) -> None:
        # a float would be truncated (or compared as a float), a bool read as 1
        if isinstance(rounds, bool) or not isinstance(rounds, int | np.integer) or rounds < 1:
            raise ValueError(f"early stopping rounds must be an integer >= 1, got {rounds!r}")
        try:
            delta = float(min_delta)
        except (TypeError, ValueError):
            delta = math.nan
        if not (math.isfinite(delta) and delta >= 0):
            # NaN would make every comparison false: no round could ever improve
            raise ValueError(f"min_delta must be a finite number >= 0, got {min_delta!r}")
        self.rounds = int(rounds)
        self.metric_name = metric_name
        self.data_name = data_name
        self.maximize = maximize
        self.save_best = save_best
        self.min_delta = delta
        self._best: float | None = None
        self._best_epoch = 0

    def after_iteration(self, model: Booster, epoch: int, evals_log: EvalsLog) -> bool:
        if not evals_log:
            raise ValueError("early stopping needs at least one evaluation set in evals")
        data = self.data_name or list(evals_log)[-1]
        if data not in evals_log:
            raise ValueError(f"early stopping data {data!r} is not among the eval sets "
                             f"{list(evals_log)}")
        metric = self.metric_name or list(evals_log[data])[-1]
        if metric not in evals_log[data]:
            raise ValueError(f"early stopping metric {metric!r} is not evaluated on {data!r}")
        maximize = self.maximize if self.maximize is not None else metric in MAXIMIZE
        score = evals_log[data][metric][-1]
        if score != score:  # NaN compares false with everything: it would never improve
            raise ValueError(f"early stopping metric {metric!r} on evaluation set {data!r} is "
                             f"NaN at round {epoch}: the metric is undefined on this data, so "
                             "it cannot pick the best iteration")
        if self._best is None:
            improved = True
        elif maximize:
            improved = score > self._best + self.min_delta
        else:
            improved = score < self._best - self.min_delta
        if improved:
            self._best = score
            self._best_epoch = epoch
        model.best_iteration = self._best_epoch
        model.best_score = float(self._best)  # type: ignore[arg-type]
        return epoch - self._best_epoch >= self.rounds

    def after_training(self, model: Booster) -> Booster:
        if self.save_best and model.best_iteration is not None:
            return model[: model.best_iteration + 1]
        return model


class LearningRateScheduler(TrainingCallback):
    """Sets the learning rate of every round: ``learning_rates(epoch)`` for a callable, or
    ``learning_rates[epoch]`` for a sequence (one rate per round; `epoch` counts the model's
    rounds, so a continued model's first new round is its number of rounds so far).

    The rate is set with ``model.set_param("learning_rate", rate)`` before round `epoch` is
    grown, so round `epoch`'s trees are scaled by it, as the schedule reads (LightGBM's
    ``reset_parameter``; XGBoost 3's scheduler sets it after the round, so its first round
    uses ``eta`` and round e + 1 the rate of e).
    """

    def __init__(self, learning_rates: Callable[[int], float] | Sequence[float]) -> None:
        if callable(learning_rates):
            self._rate = learning_rates
        elif isinstance(learning_rates, Sequence) and not isinstance(learning_rates, str):
            rates = list(learning_rates)

            def rate(epoch: int) -> float:
                if epoch >= len(rates):
                    raise ValueError(f"LearningRateScheduler has {len(rates)} learning rates, "
                                     f"round {epoch} needs one more (one rate per round)")
                return rates[epoch]
            self._rate = rate
        else:
            raise TypeError("learning_rates must be a callable epoch -> rate or a sequence of "
                            f"rates, got {type(learning_rates).__name__}")

    def before_iteration(self, model: Any, epoch: int, evals_log: EvalsLog) -> bool:
        model.set_param("learning_rate", float(self._rate(epoch)))
        return False


class TrainingCheckPoint(TrainingCallback):
    """Writes the model every `interval` rounds to ``<directory>/<name>_<epoch>.json``
    (`epoch`: the model's last round, counted from 0), atomically (`Booster.save_model`), so a
    crashed run can continue from the last file (``train(..., xgb_model=path)``). The
    directory is created if missing. Models are saved as JSON only: ``as_pickle=True``
    raises. In distributed training every rank holds the same model; give the callback to
    one rank only."""

    def __init__(self, directory: str | os.PathLike, name: str = "model",
                 as_pickle: bool = False, interval: int = 100) -> None:
        if as_pickle:
            raise ValueError("TrainingCheckPoint(as_pickle=True): histboost models are saved as "
                             "JSON only (no pickle); leave as_pickle=False")
        if isinstance(interval, bool) or not isinstance(interval, int | np.integer) \
                or interval < 1:
            raise ValueError(f"interval must be an integer >= 1, got {interval!r}")
        self.directory = os.fspath(directory)
        self.name = str(name)
        self.interval = int(interval)
        self._start = 0

    def path(self, epoch: int) -> str:
        """The file of the checkpoint written after round `epoch`."""
        return os.path.join(self.directory, f"{self.name}_{epoch}.json")

    def before_training(self, model: Booster) -> Booster:
        if not hasattr(model, "save_model"):  # cv's CVBooster stands for several models
            raise ValueError("TrainingCheckPoint writes the model of train(); cv() has one "
                             "model per fold")
        os.makedirs(self.directory, exist_ok=True)
        self._start = model.num_boosted_rounds()
        return model

    def after_iteration(self, model: Booster, epoch: int, evals_log: EvalsLog) -> bool:
        if (epoch + 1 - self._start) % self.interval == 0:
            model.save_model(self.path(epoch))
        return False
