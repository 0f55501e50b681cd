"""Evaluation metrics on predictions (after the objective's transform) or margins.

Each metric is ``metric(y, pred, weight) -> float`` with y float64 (n,) labels, weight float64
(n,) or None, and pred as the objective outputs it for the metric: float64 (n,) probabilities
for logloss / auc / error, (n, K) class probabilities for mlogloss / merror, values or margins
for rmse / mae. The survival:aft metrics (`INTERVAL`) take y float64 (n, 2) intervals (lower,
upper) and pred (n,) margins, as XGBoost's.

Most metrics are a weighted mean of a per-row loss, finished by a transform (rmse: the square
root): `METRIC_SUMS` gives their ``(sum of w * loss, sum of w)``, which workers holding
different rows add up (`histboost.distributed`) to the metric of all rows. Ranking metrics
(auc) need all rows at once and are computed on the rows gathered from every worker.

Some metrics are undefined on some data (AUC when the labels hold one class, any metric when
every weight is zero). `check_metrics_defined` says so, naming the metric and the evaluation
set, before training starts, instead of the metric returning NaN every round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

_EPS = 1e-15

Metric = Callable[[np.ndarray, np.ndarray, np.ndarray | None], float]
# per-row losses float64 (n,) of labels y (n,) and predictions p
RowLoss = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _squared_error(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return (p - y) ** 2


def _absolute_error(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.abs(p - y)


def _log_loss(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    p = np.clip(p, _EPS, 1 - _EPS)
    return -(y * np.log(p) + (1 - y) * np.log(1 - p))


def _binary_error(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return ((p > 0.5) != (y > 0.5)).astype(np.float64)


def _multi_log_loss(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return -np.log(np.clip(p[np.arange(y.shape[0]), y.astype(np.int64)], _EPS, 1.0))


def _multi_error(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return (np.argmax(p, axis=1) != y.astype(np.int64)).astype(np.float64)


def _squared_log_error(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return (np.log1p(p) - np.log1p(y)) ** 2


def _abs_percentage_error(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.abs((y - p) / y)


def _poisson_nloglik(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    from scipy.special import gammaln  # noqa: PLC0415 (scipy.special: 0.2 s to import)

    p = np.maximum(p, 1e-16)
    return gammaln(y + 1.0) + p - np.log(p) * y


def _gamma_nloglik(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    return y / p + np.log(p)


def _gamma_deviance(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    r = (y + 1e-6) / (p + 1e-6)
    return r - np.log(r) - 1.0


def _tweedie_nloglik(rho: float) -> RowLoss:
    def loss(y: np.ndarray, p: np.ndarray) -> np.ndarray:
        a = y * np.exp((1.0 - rho) * np.log(p)) / (1.0 - rho)
        b = np.exp((2.0 - rho) * np.log(p)) / (2.0 - rho)
        return -a + b
    return loss


def _pinball(alpha: float) -> RowLoss:
    def loss(y: np.ndarray, p: np.ndarray) -> np.ndarray:
        d = y - p
        return np.where(d >= 0, alpha * d, (alpha - 1.0) * d)
    return loss


def _pseudo_huber(slope: float) -> RowLoss:
    def loss(y: np.ndarray, p: np.ndarray) -> np.ndarray:
        return slope * slope * (np.sqrt(1.0 + ((y - p) / slope) ** 2) - 1.0)
    return loss


def _error_at(t: float) -> RowLoss:
    def loss(y: np.ndarray, p: np.ndarray) -> np.ndarray:
        return ((p > t) != (y > 0.5)).astype(np.float64)
    return loss


def _interval_accuracy(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """1 where the predicted time exp(p) lies in the interval y (n, 2), else 0."""
    t = np.exp(p)
    return ((t >= y[:, 0]) & (t <= y[:, 1])).astype(np.float64)


# name: (per-row loss, transform of the weighted mean)
_MEAN_METRICS: dict[str, tuple[RowLoss, Callable[[float], float]]] = {
    "rmse": (_squared_error, np.sqrt),
    "mae": (_absolute_error, float),
    "logloss": (_log_loss, float),
    "error": (_binary_error, float),
    "mlogloss": (_multi_log_loss, float),
    "merror": (_multi_error, float),
    "rmsle": (_squared_log_error, np.sqrt),
    "mape": (_abs_percentage_error, float),
    "poisson-nloglik": (_poisson_nloglik, float),
    "gamma-nloglik": (_gamma_nloglik, float),
    "gamma-deviance": (_gamma_deviance, lambda v: 2.0 * v),
    "interval-regression-accuracy": (_interval_accuracy, float),
}


def _number(arg: str) -> float:
    try:
        return float(arg)
    except ValueError:
        raise ValueError(f"{arg!r} after '@' is not a number") from None


def _aft_nloglik(arg: str) -> RowLoss:
    """aft-nloglik@<distribution>:<scale> (training sets it from aft_loss_distribution and
    aft_loss_distribution_scale): labels y (n, 2) intervals, p (n,) margins."""
    from ..objectives.survival import LAWS, aft_loss

    distribution, _, scale = arg.partition(":")
    if distribution not in LAWS:
        raise ValueError(f"the distribution must be one of {sorted(LAWS)}, got "
                         f"{distribution!r}")
    sigma = _number(scale or "1")
    if not sigma > 0:
        raise ValueError(f"the scale must be > 0, got {sigma!r}")

    def loss(y: np.ndarray, p: np.ndarray) -> np.ndarray:
        return aft_loss(y[:, 0], y[:, 1], p, distribution, sigma)
    return loss


# mean metrics with an argument, ``name@arg``: name: (row loss of the argument's text,
# transform, default argument)
_MEAN_METRICS_AT: dict[str, tuple[Callable[[str], RowLoss], Callable[[float], float],
                                  str]] = {
    "error": (lambda a: _error_at(_number(a)), float, "0.5"),
    "tweedie-nloglik": (lambda a: _tweedie_nloglik(_number(a)), float, "1.5"),
    "quantile": (lambda a: _pinball(_number(a)), float, "0.5"),
    "mphe": (lambda a: _pseudo_huber(_number(a)), float, "1.0"),
    "aft-nloglik": (_aft_nloglik, float, "normal:1.0"),
}


def _split_name(name: str) -> tuple[str, str | None]:
    base, at, arg = name.partition("@")
    return base, (arg if at else None)


def _mean_spec(name: str) -> tuple[RowLoss, Callable[[float], float]]:
    if name in _MEAN_METRICS:
        return _MEAN_METRICS[name]
    base, arg = _split_name(name)
    if base in _MEAN_METRICS_AT:
        make, finish, default = _MEAN_METRICS_AT[base]
        try:
            return make(default if arg is None else arg), finish
        except ValueError as e:
            raise ValueError(f"eval_metric {name!r}: {e}") from None
    raise KeyError(name)


def metric_sums(name: str, y: np.ndarray, p: np.ndarray,
                w: np.ndarray | None = None) -> np.ndarray:
    """float64 (2,): (sum of w * loss, sum of w) of mean metric `name` over these rows; the
    sums of disjoint row sets add up to the sums of their union."""
    loss = _mean_spec(name)[0](y, p)
    if w is None:
        return np.array([float(np.sum(loss)), float(loss.shape[0])])
    return np.array([float(np.dot(w, loss)), float(np.sum(w))])


def finish_metric(name: str, sums: np.ndarray) -> float:
    """Mean metric `name` from its (sum of w * loss, sum of w)."""
    return float(_mean_spec(name)[1](sums[0] / sums[1]))


def _mean_metric(name: str, doc: str) -> Metric:
    def metric(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
        return finish_metric(name, metric_sums(name, y, p, w))

    metric.__name__ = metric.__qualname__ = name
    metric.__doc__ = doc
    return metric


rmse = _mean_metric("rmse", "Root of the (weighted) mean squared error of predictions p (n,).")
mae = _mean_metric("mae", "(Weighted) mean absolute error of predictions p (n,).")
logloss = _mean_metric(
    "logloss", "(Weighted) mean negative log-likelihood of probabilities p (n,) for labels in "
    "[0, 1]; p is clipped to [1e-15, 1 - 1e-15].")
error = _mean_metric(
    "error", "(Weighted) fraction of rows where ``p > 0.5`` disagrees with ``y > 0.5``.")
mlogloss = _mean_metric(
    "mlogloss", "(Weighted) mean negative log-probability p (n, K) of the true classes y "
    "(integers in [0, K)); probabilities are clipped below at 1e-15.")
merror = _mean_metric(
    "merror", "(Weighted) fraction of rows whose most probable class in p (n, K) is not y.")


def auc(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
    """Weighted ROC AUC of scores p (n,), positives ``y > 0.5``, ties counted half (trapezoid
    over tie groups). NaN when the labels hold one class: see `check_metrics_defined`."""
    w = np.ones_like(y, dtype=np.float64) if w is None else np.asarray(w, np.float64)
    order = np.argsort(-p, kind="mergesort")
    ps, ys, ws = p[order], y[order], w[order]
    pos = ws * (ys > 0.5)
    neg = ws * (ys <= 0.5)
    # tie groups: last index of each run of equal scores
    ends = np.r_[np.flatnonzero(np.diff(ps) != 0), ps.size - 1]
    tp = np.cumsum(pos)[ends]
    fp = np.cumsum(neg)[ends]
    tp = np.r_[0.0, tp]
    fp = np.r_[0.0, fp]
    if tp[-1] <= 0 or fp[-1] <= 0:
        return float("nan")
    area = np.sum((fp[1:] - fp[:-1]) * (tp[1:] + tp[:-1]) / 2.0)
    return float(area / (tp[-1] * fp[-1]))


def aucpr(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
    """Weighted area under the precision-recall curve of scores p (n,), positives ``y > 0.5``,
    as average precision: sum over score thresholds (tie groups) of the recall gained times
    the precision there (scikit-learn's ``average_precision_score``; XGBoost interpolates
    between the points and can differ in the third decimal). NaN without positives."""
    w = np.ones_like(y, dtype=np.float64) if w is None else np.asarray(w, np.float64)
    order = np.argsort(-p, kind="mergesort")
    ps, ys, ws = p[order], y[order], w[order]
    ends = np.r_[np.flatnonzero(np.diff(ps) != 0), ps.size - 1]
    tp = np.cumsum(ws * (ys > 0.5))[ends]
    fp = np.cumsum(ws * (ys <= 0.5))[ends]
    if tp[-1] <= 0:
        return float("nan")
    precision = tp / np.maximum(tp + fp, 1e-300)
    recall_gain = np.diff(np.r_[0.0, tp]) / tp[-1]
    return float(np.sum(recall_gain * precision))


def cox_nloglik(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None) -> float:
    """Negative partial log-likelihood of the Cox model (Breslow ties) per event, of hazard
    ratios p (n,) = exp(margin); labels are times, negative for censored rows (XGBoost's
    cox-nloglik)."""
    order = np.argsort(np.abs(y), kind="stable")
    ps, t, event = p[order], np.abs(y[order]), y[order] > 0
    first = np.searchsorted(t, t, side="left")
    risk = np.concatenate([np.cumsum(ps[::-1])[::-1], [0.0]])[first]
    n_events = int(event.sum())
    if n_events == 0:
        return float("nan")
    return float(-np.sum(np.log(ps[event]) - np.log(risk[event])) / n_events)


def _groups(n: int, group: np.ndarray | None) -> np.ndarray:
    """int64 (G + 1,) query boundaries (one query of all rows without groups)."""
    if group is None:
        return np.array([0, n], np.int64)
    return np.concatenate([[0], np.cumsum(np.asarray(group, np.int64))])


def _ranking_args(name: str) -> tuple[str, int, bool]:
    """(base name, k (0: all), minus) of ndcg / map names: ``ndcg``, ``ndcg@5``, ``ndcg-``,
    ``ndcg@5-``."""
    minus = name.endswith("-")
    body = name[:-1] if minus else name
    base, arg = _split_name(body)
    try:
        k = 0 if arg is None else int(arg)
    except ValueError:
        raise ValueError(f"eval_metric {name!r}: the cut-off after '@' must be an integer") \
            from None
    if k < 0:
        raise ValueError(f"eval_metric {name!r}: the cut-off must be >= 0")
    return base, k, minus


def ndcg_gain(y: np.ndarray, label_gain: Sequence[float] = (),
              exp_gain: bool = True) -> np.ndarray:
    """float64 (n,): the NDCG gain of each label of y float64 (n,): ``label_gain[y]``
    (LightGBM's table, when given: labels must be integers in [0, len(label_gain))), else
    ``2**y - 1`` (exp_gain, XGBoost's default) or y itself (XGBoost's ``ndcg_exp_gain=False``).
    """
    if len(label_gain):
        table = np.asarray(label_gain, np.float64)
        bad = (y < 0) | (y >= table.shape[0]) | (y != np.floor(y))
        if np.any(bad):
            raise ValueError(f"label_gain has {table.shape[0]} entries: labels must be integers "
                             f"in [0, {table.shape[0] - 1}], found {float(y[bad][0])!r}")
        return table[y.astype(np.int64)]
    return np.exp2(y) - 1.0 if exp_gain else np.asarray(y, np.float64)


def _ranking_metric(name: str, label_gain: Sequence[float] = (),
                    exp_gain: bool = True) -> Metric:
    base, k, minus = _ranking_args(name)

    def metric(y: np.ndarray, p: np.ndarray, w: np.ndarray | None = None,
               group: np.ndarray | None = None) -> float:
        bounds = _groups(y.shape[0], group)
        gains = ndcg_gain(y, label_gain, exp_gain) if base == "ndcg" else y
        scores = []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            yq, pq = y[a:b], p[a:b]
            top = (b - a) if k == 0 else min(k, b - a)
            order = np.argsort(-pq, kind="stable")[:top]
            if base == "ndcg":
                gq = gains[a:b]
                disc = 1.0 / np.log2(np.arange(2, top + 2))
                dcg = np.sum(gq[order] * disc)
                idcg = np.sum(np.sort(gq)[::-1][:top] * disc)
                scores.append(dcg / idcg if idcg > 0 else (0.0 if minus else 1.0))
            else:
                rel = yq > 0
                n_rel = int(rel.sum())
                if n_rel == 0:
                    scores.append(0.0 if minus else 1.0)
                    continue
                hits = rel[np.argsort(-pq, kind="stable")]
                cum = np.cumsum(hits)
                pos = np.flatnonzero(hits[:top])
                scores.append(float(np.sum(cum[pos] / (pos + 1.0))) / min(n_rel, top))
        return float(np.mean(scores))

    gain_doc = ("the gains of label_gain" if len(label_gain) else
                "exponential gain 2**rel - 1" if exp_gain else "linear gain rel")
    metric.__name__ = metric.__qualname__ = name
    metric.__doc__ = (f"{base.upper()}{'@' + str(k) if k else ''} averaged over the query "
                      f"groups ({gain_doc} and 1/log2 discount for NDCG; "
                      "for MAP, precision at each relevant row of the top k over "
                      "min(relevant rows, k), as XGBoost 3); a query without relevant rows "
                      f"scores {0 if minus else 1}.")
    return metric


METRICS: dict[str, Metric] = {
    "rmse": rmse, "mae": mae, "logloss": logloss, "error": error, "auc": auc,
    "mlogloss": mlogloss, "merror": merror, "aucpr": aucpr, "cox-nloglik": cox_nloglik,
}
for _name in ("rmsle", "mape", "poisson-nloglik", "gamma-nloglik", "gamma-deviance",
              "interval-regression-accuracy"):
    METRICS[_name] = _mean_metric(_name, f"(Weighted) mean {_name} (XGBoost's definition).")


class _ByBaseName(frozenset):
    """A set of metric names that also holds their parametrised forms (``name@arg``,
    ``name-``)."""

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if frozenset.__contains__(self, name):
            return True
        return frozenset.__contains__(self, _split_name(name.rstrip("-"))[0] + "@")


# metrics that are a weighted mean of a per-row loss (`metric_sums`); the others need all rows
MEAN_METRICS = _ByBaseName(set(_MEAN_METRICS) | {f"{b}@" for b in _MEAN_METRICS_AT})
# metrics of query groups (they take ``group=``)
RANKING = _ByBaseName({"ndcg", "map", "ndcg@", "map@", "ndcg-", "map-"})
# metrics where larger is better (early stopping direction)
MAXIMIZE = _ByBaseName({"auc", "aucpr", "ndcg", "map", "ndcg@", "map@", "ndcg-", "map-",
                        "interval-regression-accuracy"})
# metrics computed on multiclass probability matrices
MULTICLASS = {"mlogloss", "merror"}
# metrics of interval labels (n, 2) (survival:aft), computed on margins as XGBoost's
INTERVAL = _ByBaseName({"aft-nloglik", "aft-nloglik@", "interval-regression-accuracy"})


def get_metric(name: str, label_gain: Sequence[float] = (),
               ndcg_exp_gain: bool = True) -> Metric:
    """The metric function called `name` (``error@0.7``, ``ndcg@5-``, ``tweedie-nloglik@1.2``
    ... included); ValueError naming the choices for an unknown one. label_gain,
    ndcg_exp_gain: the NDCG gain of the ndcg metrics (`ndcg_gain`)."""
    if name in METRICS:
        return METRICS[name]
    if name in RANKING:
        return _ranking_metric(name, label_gain, ndcg_exp_gain)
    if name in MEAN_METRICS:
        _mean_spec(name)  # a bad argument raises here
        return _mean_metric(name, f"(Weighted) mean {name}.")
    choices = sorted(set(METRICS) | {"ndcg@k", "map@k", "error@t", "tweedie-nloglik@rho",
                                     "quantile", "mphe"})
    raise ValueError(f"unknown eval_metric {name!r}; choose from {choices}")


def set_facts(y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """float64 (3,): the facts about an evaluation set that decide whether a metric is
    defined: (weight of the counted rows, of their positives (> 0.5), of their negatives).
    Facts of disjoint row sets add up (workers sum theirs)."""
    counted = np.ones(y.shape[0], np.float64) if w is None else np.asarray(w, np.float64)
    positive = y > 0.5 if y.ndim == 1 else np.zeros(y.shape[0], bool)  # intervals: no class
    return np.array([counted.sum(), counted[positive].sum(), counted[~positive].sum()])


# labels each metric needs: (test, what), on top of the checks below
_LABELS_NEEDED: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "rmsle": (lambda y: y > -1, "labels > -1"),
    "mape": (lambda y: y != 0, "non-zero labels"),
    "poisson-nloglik": (lambda y: y >= 0, "non-negative labels"),
    "gamma-nloglik": (lambda y: y > 0, "positive labels"),
    "gamma-deviance": (lambda y: y > 0, "positive labels"),
    "tweedie-nloglik": (lambda y: y >= 0, "non-negative labels"),
    "cox-nloglik": (lambda y: y != 0, "non-zero survival times"),
}
# metrics of predictions that only some objectives make
_OBJECTIVES_NEEDED: dict[str, tuple[str, ...]] = {
    "cox-nloglik": ("survival:cox",),
    "aft-nloglik": ("survival:aft",),
    "interval-regression-accuracy": ("survival:aft",),
    "poisson-nloglik": ("count:poisson", "reg:gamma", "reg:tweedie", "survival:cox"),
    "gamma-nloglik": ("count:poisson", "reg:gamma", "reg:tweedie"),
    "gamma-deviance": ("count:poisson", "reg:gamma", "reg:tweedie"),
    "tweedie-nloglik": ("count:poisson", "reg:gamma", "reg:tweedie"),
    "logloss": ("binary:logistic", "binary:logitraw"),
    "error": ("binary:logistic", "binary:logitraw"),
}


def _undefined_because(name: str, y: np.ndarray, facts: np.ndarray,
                       n_outputs: int, objective: str | None = None) -> str | None:
    """Why metric `name` cannot be computed on labels y (n,) of a set with `set_facts`
    `facts` (of this set, or of all workers' parts of it), for a model of `objective` (None:
    a custom objective, whose predictions are margins), or None."""
    if not facts[0] > 0:
        return "every weight of the set is zero"
    base = _split_name(name.rstrip("-"))[0]
    if objective is not None and base in _OBJECTIVES_NEEDED:
        fits = _OBJECTIVES_NEEDED[base]
        if objective not in fits:
            return (f"it scores the predictions of {' / '.join(fits)}, and the objective is "
                    f"{objective!r}")
    if (y.ndim == 2) != (name in INTERVAL):
        return ("the labels are intervals (label_lower_bound, label_upper_bound): use "
                "aft-nloglik or interval-regression-accuracy" if y.ndim == 2 else
                "it needs interval labels (Dataset(label_lower_bound=..., "
                "label_upper_bound=...)) and objective survival:aft")
    if base in _LABELS_NEEDED:
        test, what = _LABELS_NEEDED[base]
        bad = ~test(y)
        if np.any(bad):
            return f"it needs {what}, found {float(y[bad][0])!r}"
    if name in MULTICLASS:
        if n_outputs < 2:
            return "it needs a multi-class objective (multi:softprob / multi:softmax)"
        bad = (y < 0) | (y >= n_outputs) | (y != np.floor(y))
        if np.any(bad):
            return (f"it needs integer labels in [0, {n_outputs - 1}], found "
                    f"{float(y[bad][0])!r}")
    elif n_outputs > 1:
        return (f"it scores one output per row and this model has {n_outputs}; use "
                f"{' or '.join(sorted(MULTICLASS))}")
    if name == "logloss" and np.any((y < 0) | (y > 1)):
        return f"it needs labels in [0, 1], found {float(y[(y < 0) | (y > 1)][0])!r}"
    if name == "aucpr" and not facts[1] > 0:
        return "no label is positive (> 0.5): precision-recall needs positives"
    if name == "auc" and not (facts[1] > 0 and facts[2] > 0):
        which = "positive (> 0.5)" if facts[1] > 0 else "negative (<= 0.5)"
        return (f"every label is {which}: AUC needs both classes (choose another "
                "eval_metric, such as logloss, or an evaluation set with both classes)")
    return None


def check_metrics_defined(metrics: Sequence[str], y: np.ndarray, w: np.ndarray | None,
                          n_outputs: int, data_name: str,
                          facts: np.ndarray | None = None, objective: str | None = None
                          ) -> None:
    """Raise ValueError naming the metric and the evaluation set if any of `metrics` is
    undefined on labels y float64 (n,) with weights w float64 (n,) or None, for a model of
    `n_outputs` margins per row (instead of a NaN every round, or a crash mid-training).
    facts: the set's `set_facts` summed over every worker's rows (default: these rows').
    objective: the model's objective name (metrics of some objectives' predictions, such as
    cox-nloglik, are undefined for the others)."""
    if facts is None:
        facts = set_facts(y, w)
    for name in metrics:
        if name not in METRICS and name not in MEAN_METRICS and name not in RANKING:
            get_metric(name)  # unknown: raises naming the choices
        reason = _undefined_because(name, y, facts, n_outputs, objective)
        if reason is not None:
            raise ValueError(f"eval_metric {name!r} is undefined on evaluation set "
                             f"{data_name!r}: {reason}")


__all__ = ["INTERVAL", "MAXIMIZE", "MEAN_METRICS", "METRICS", "MULTICLASS", "RANKING", "Metric",
           "auc", "aucpr", "check_metrics_defined", "cox_nloglik", "error", "finish_metric",
           "get_metric", "logloss", "mae", "merror", "metric_sums", "mlogloss", "ndcg_gain",
           "rmse", "set_facts"]
