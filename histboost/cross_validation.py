"""`cv`: k-fold cross-validation, as ``xgboost.cv``.

The folds train in lockstep, one round at a time (one `histboost.training._Training` run per
fold), so that callbacks, early stopping included, see the folds' mean metrics after every
round. Every fold is binned with the cuts of the whole Dataset (its rows are sliced from the
Dataset's bins, `Dataset.subset`), as LightGBM's ``cv`` does; XGBoost computes cuts from each
fold's training rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .booster import Booster
from .callback import EarlyStopping, EvalsLog, EvaluationMonitor, TrainingCallback
from .data.dataset import Dataset
from .params import ALIASES, parse_params
from .training import CustomMetricFn, CustomObjectiveFn, _max_bin_given, _Training

Folds = list[tuple[np.ndarray, np.ndarray]]


class CVBooster:
    """The fold models of a `cv` run as one model for callbacks: `set_param` sets every
    fold's parameters (a `LearningRateScheduler` schedules all folds), early stopping sets
    ``best_iteration`` / ``best_score`` here."""

    def __init__(self, boosters: list[Booster]) -> None:
        self.boosters = boosters
        self.best_iteration: int | None = None
        self.best_score: float | None = None

    def set_param(self, params: dict[str, Any] | str, value: Any = None) -> None:
        for b in self.boosters:
            b.set_param(params, value)

    def num_boosted_rounds(self) -> int:
        return self.boosters[0].num_boosted_rounds()

    def __getitem__(self, item: slice) -> CVBooster:
        out = CVBooster([b[item] for b in self.boosters])
        out.best_iteration, out.best_score = self.best_iteration, self.best_score
        return out


class _CVMonitor(EvaluationMonitor):
    """Prints the folds' mean metrics every `period` rounds, with their standard deviations
    (``mean+std``) when `stds` is given."""

    def __init__(self, period: int, stds: EvalsLog | None) -> None:
        super().__init__(period)
        self.stds = stds

    def format_line(self, epoch: int, evals_log: EvalsLog) -> str:  # type: ignore[override]
        parts = [f"[{epoch}]"]
        for data, metrics in evals_log.items():
            for name, values in metrics.items():
                std = "" if self.stds is None else f"+{self.stds[data][name][-1]:.5f}"
                parts.append(f"{data}-{name}:{values[-1]:.5f}{std}")
        return "\t".join(parts)


def kfold(n: int, nfold: int, rng: np.random.Generator | None) -> Folds:
    """(train rows, test rows) of `nfold` folds of n rows: the rows in random order (`rng`;
    None: in order) cut into nfold near-equal parts (sizes differ by at most one), each
    fold's test part one of them; indices ascending."""
    order = np.arange(n) if rng is None else rng.permutation(n)
    return _complements(n, [np.sort(part) for part in np.array_split(order, nfold)])


def stratified_kfold(y: np.ndarray, nfold: int, rng: np.random.Generator | None) -> Folds:
    """Folds whose test parts hold every class of labels y (n,) in proportion: the rows,
    shuffled (`rng`) and then grouped by class, dealt to the folds in turn, so a class's
    count (and a fold's size) differs by at most one between folds."""
    classes = np.unique(y)
    if not np.all(classes == np.floor(classes)):
        bad = classes[classes != np.floor(classes)][0]
        raise ValueError(f"stratified=True needs class labels (integers), found {bad!r}; "
                         "stratify continuous labels with folds=")
    n = y.shape[0]
    order = np.arange(n) if rng is None else rng.permutation(n)
    order = order[np.argsort(y[order], kind="stable")]
    fold_of = np.empty(n, np.int64)
    fold_of[order] = np.arange(n) % nfold
    return _complements(n, [np.flatnonzero(fold_of == k) for k in range(nfold)])


def query_kfold(group: np.ndarray, nfold: int, rng: np.random.Generator | None) -> Folds:
    """Folds of whole queries (query sizes `group`): the queries cut as `kfold` cuts rows,
    each fold's rows in query order."""
    bounds = np.r_[0, np.cumsum(group)]
    n = int(bounds[-1])
    tests = []
    for _, queries in kfold(group.shape[0], nfold, rng):
        tests.append(np.concatenate([np.arange(bounds[q], bounds[q + 1]) for q in queries]))
    return _complements(n, tests)


def _complements(n: int, tests: list[np.ndarray]) -> Folds:
    out = []
    for test in tests:
        train = np.ones(n, bool)
        train[test] = False
        out.append((np.flatnonzero(train), test))
    return out


def _user_folds(folds: Any, dtrain: Dataset) -> Folds:
    """(train, test) index pairs from `folds`: a sequence of pairs, or a scikit-learn style
    splitter (``folds.split(X, y)``)."""
    if hasattr(folds, "split"):
        y = dtrain.label
        pairs = list(folds.split(np.zeros((dtrain.num_row(), 1)), y))
    else:
        pairs = list(folds)
    out = []
    for k, pair in enumerate(pairs):
        try:
            train, test = (np.asarray(part) for part in pair)
        except (TypeError, ValueError):
            raise ValueError(f"folds[{k}] must be a (train indices, test indices) pair") \
                from None
        out.append((train, test))
    if len(out) < 1:
        raise ValueError("folds is empty")
    return out


def cv(params: dict[str, Any], dtrain: Dataset, num_boost_round: int = 10, nfold: int = 5,
       stratified: bool = False, folds: Any = None, metrics: Sequence[str] | str = (),
       obj: CustomObjectiveFn | None = None, maximize: bool | None = None,
       early_stopping_rounds: int | None = None, seed: int = 0, shuffle: bool = True,
       verbose_eval: bool | int | None = None, show_stdv: bool = True,
       callbacks: Sequence[TrainingCallback] | None = None, as_pandas: bool = True,
       custom_metric: CustomMetricFn | None = None) -> Any:
    """Cross-validate: train one model per fold for `num_boost_round` rounds, in lockstep,
    and evaluate each on its training and test rows after every round.

    Parameters
    ----------
    params : training parameters, as for `histboost.train`.
    dtrain : the whole data set (a `Dataset` with labels).
    nfold : number of folds (without `folds`).
    stratified : folds with the label's classes in proportion (class labels only).
    folds : the folds instead: a sequence of (train indices, test indices) pairs, or a
        scikit-learn splitter (``folds.split(X, y)`` is called with the labels as y).
    metrics : evaluation metrics (replace the params' eval_metric; default: the objective's).
    obj, custom_metric, maximize : as for `histboost.train`.
    early_stopping_rounds : stop when the mean test metric (the last metric) has not
        improved for this many rounds; the table then ends at the best round.
    seed, shuffle : the rows are shuffled (with `seed`) before they are cut into folds.
        A Dataset with query groups is cut into folds of whole queries.
    verbose_eval : print the mean (``+std`` with `show_stdv`) metrics every round (True) or
        every N rounds (int).
    callbacks : `TrainingCallback` objects, called with a `CVBooster` standing for all folds
        and the log of the folds' mean metrics.
    as_pandas : return a pandas DataFrame when pandas is installed, else a dict of lists.

    Returns
    -------
    One row per round, columns ``train-<metric>-mean``, ``train-<metric>-std``,
    ``test-<metric>-mean``, ``test-<metric>-std`` per metric (std: the folds' population
    standard deviation).
    """
    if not isinstance(dtrain, Dataset):
        raise TypeError(f"dtrain must be a histboost.Dataset, got {type(dtrain).__name__}")
    if dtrain.categorical is not None:
        raise ValueError("cv() with categorical features is not supported yet: each fold's "
                         "target statistics need its own training rows; run train() per fold")
    params = dict(params or {})
    if isinstance(metrics, str):
        metrics = [metrics]
    if metrics:
        params = {k: v for k, v in params.items() if ALIASES.get(k, k) != "eval_metric"}
        params["eval_metric"] = list(metrics)
    p = parse_params(params)
    fold_rows = _make_folds(dtrain, nfold, stratified, folds, seed, shuffle)

    cbs: list[TrainingCallback] = list(callbacks or ())
    stds: EvalsLog = {}
    if verbose_eval:
        cbs.append(_CVMonitor(int(verbose_eval), stds if show_stdv else None))
    if early_stopping_rounds is not None:
        cbs.append(EarlyStopping(early_stopping_rounds, maximize=maximize))

    # the whole set binned once: every fold slices these bins
    dtrain.construct(p.max_bin if _max_bin_given(params) else None, bin_rows=p.device == "cpu")
    runs: list[_Training] = []
    try:
        for train_rows, test_rows in fold_rows:
            d_train, d_test = dtrain.subset(train_rows), dtrain.subset(test_rows)
            runs.append(_Training(params, d_train, num_boost_round,
                                  [(d_train, "train"), (d_test, "test")], obj, None, None,
                                  custom_metric, early_stopping_rounds, {}))
        model = CVBooster([r.booster for r in runs])
        means: EvalsLog = {}
        for cb in cbs:
            model = cb.before_training(model)
        for epoch in range(num_boost_round):
            if any([cb.before_iteration(model, epoch, means) for cb in cbs]):
                break
            for run in runs:
                run.boost_round(epoch)
                run.evaluate()
            _aggregate(runs, means, stds)
            if any([cb.after_iteration(model, epoch, means) for cb in cbs]):
                if early_stopping_rounds is not None and model.best_iteration is not None:
                    _truncate(means, stds, model.best_iteration + 1)
                break
    finally:
        for run in runs:
            run.release()
    for cb in cbs:
        model = cb.after_training(model)
    return _table(means, stds, as_pandas)


def _make_folds(dtrain: Dataset, nfold: int, stratified: bool, folds: Any, seed: int,
                shuffle: bool) -> Folds:
    n = dtrain.num_row()
    if folds is not None:
        out = _user_folds(folds, dtrain)
        for k, (train, test) in enumerate(out):
            for what, rows in (("train", train), ("test", test)):
                if rows.ndim != 1 or rows.dtype.kind not in "iu" or rows.size == 0:
                    raise ValueError(f"folds[{k}]: the {what} indices must be a non-empty 1-D "
                                     "integer array")
                if int(rows.min()) < 0 or int(rows.max()) >= n:
                    raise ValueError(f"folds[{k}]: {what} index out of range [0, {n})")
        return out
    units = n if dtrain.group is None else dtrain.group.shape[0]
    if isinstance(nfold, bool) or not isinstance(nfold, int | np.integer) \
            or not 2 <= nfold <= units:
        what = "rows" if dtrain.group is None else "queries"
        raise ValueError(f"nfold must be an integer in [2, {units}] (the {what}), got {nfold!r}")
    rng = np.random.default_rng(seed) if shuffle else None
    if stratified:
        if dtrain.group is not None:
            raise ValueError("stratified=True does not apply to a Dataset with query groups "
                             "(its folds hold whole queries)")
        if dtrain.label is None:
            raise ValueError("stratified=True needs class labels (Dataset(label=...))")
        return stratified_kfold(dtrain.label, int(nfold), rng)
    if dtrain.group is not None:
        return query_kfold(dtrain.group, int(nfold), rng)
    return kfold(n, int(nfold), rng)


def _aggregate(runs: list[_Training], means: EvalsLog, stds: EvalsLog) -> None:
    """Append the folds' mean and standard deviation of the round's metrics."""
    for data, metrics in runs[0].history.items():
        for name in metrics:
            values = np.array([r.history[data][name][-1] for r in runs], np.float64)
            means.setdefault(data, {}).setdefault(name, []).append(float(values.mean()))
            stds.setdefault(data, {}).setdefault(name, []).append(float(values.std()))


def _truncate(means: EvalsLog, stds: EvalsLog, rounds: int) -> None:
    for log in (means, stds):
        for metrics in log.values():
            for name in metrics:
                del metrics[name][rounds:]


def _table(means: EvalsLog, stds: EvalsLog, as_pandas: bool) -> Any:
    columns: dict[str, list[float]] = {}
    for data, metrics in means.items():
        for name, values in metrics.items():
            columns[f"{data}-{name}-mean"] = list(values)
            columns[f"{data}-{name}-std"] = list(stds[data][name])
    if as_pandas:
        try:
            import pandas as pd
        except ImportError:
            return columns
        return pd.DataFrame(columns)
    return columns
