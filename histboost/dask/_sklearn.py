"""scikit-learn style estimators on Dask collections: `DaskHistBoostRegressor` and
`DaskHistBoostClassifier` (``xgboost.dask.DaskXGBRegressor`` / ``DaskXGBClassifier``).

The constructor parameters are those of `histboost.sklearn.HistBoostRegressor` /
`HistBoostClassifier`, plus ``client`` (None: the default client; not a hyperparameter, so
`get_params` leaves it out). ``fit`` takes Dask arrays or DataFrames and trains with
`histboost.dask.train`; ``predict`` / ``predict_proba`` return Dask collections computed per
partition on the workers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from ..booster import Booster
from ..objectives.classification import sigmoid, softmax
from ..sklearn import HistBoostClassifier, HistBoostRegressor, _HistBoostModel
from ._core import (
    DaskDataset,
    _client,
    _is_dask_array,
    _predict_parts,
    _values,
    train,
)


def _encode_block(y: Any, classes: np.ndarray, where: str) -> Any:
    """Labels -> float64 class indices (pandas in, pandas out); unseen labels raise."""
    values = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
    pos = np.minimum(np.searchsorted(classes, values), len(classes) - 1)
    unseen = classes[pos] != values
    if np.any(unseen):
        raise ValueError(f"{where} has label {values[unseen][0]!r}, which is not among the "
                         f"training classes {classes.tolist()}")
    out = pos.astype(np.float64)
    if hasattr(y, "index"):
        import pandas as pd

        return pd.Series(out, index=y.index, name=getattr(y, "name", None))
    return out


def _proba(booster: Booster, X: Any, iteration_range: tuple[int, int] | None) -> np.ndarray:
    margin = booster.predict(X, output_margin=True, iteration_range=iteration_range)
    if margin.ndim == 1:
        p = sigmoid(margin)
        return np.column_stack([1.0 - p, p])
    return softmax(margin)


def _labels(booster: Booster, X: Any, classes: np.ndarray,
            iteration_range: tuple[int, int] | None) -> np.ndarray:
    return classes[np.argmax(_proba(booster, X, iteration_range), axis=1)]


class _DaskModel:
    """Shared Dask behaviour, mixed in before the in-memory estimator."""

    def __init__(self, *, client: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client = client

    @classmethod
    def _get_param_names(cls) -> list[str]:
        # the in-memory estimator's parameters (this __init__ only adds `client`)
        return _HistBoostModel._get_param_names()

    def set_params(self, **params: Any) -> Any:
        if "client" in params:
            self.client = params.pop("client")
        return super().set_params(**params)

    def _train_params(self) -> dict[str, Any]:
        params = super()._train_params()
        if self.n_jobs is None or int(self.n_jobs) <= 0:
            params.pop("nthread", None)  # each worker uses its own thread count
        return params

    def _encode_dask_y(self, client: Any, y: Any, fitting: bool, where: str) -> tuple[Any, dict]:
        return y, {"objective": self.objective or "reg:squarederror"}

    def fit(self, X: Any, y: Any, sample_weight: Any = None,
            eval_set: Sequence[tuple[Any, Any]] | None = None,
            sample_weight_eval_set: Sequence[Any] | None = None, verbose: bool | int = False,
            xgb_model: Booster | str | os.PathLike | _HistBoostModel | None = None) -> Any:
        """Train on X (Dask array (n, F) or DataFrame; NaN = missing; categorical columns
        as in `DaskDataset`) and y (Dask array or Series with X's partitions). As
        `HistBoostRegressor.fit`; rows of zero weight stay in the data (they add nothing to
        the gradients)."""
        if not isinstance(self.n_estimators, int | np.integer) or self.n_estimators < 1:
            raise ValueError(f"n_estimators must be a positive integer, got "
                             f"{self.n_estimators!r}")
        client = _client(self.client)
        names = None if _is_dask_array(X) else [str(c) for c in X.columns]
        y, objective_params = self._encode_dask_y(client, y, True, "y")
        dtrain = DaskDataset(client, X, label=y, weight=sample_weight, feature_names=names,
                             categorical_features=self.categorical_features)
        self.n_features_in_ = dtrain.n_features
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        evals = []
        if eval_set:
            if sample_weight_eval_set is not None and len(sample_weight_eval_set) != len(
                    eval_set):
                raise ValueError(f"sample_weight_eval_set has {len(sample_weight_eval_set)} "
                                 f"entries for {len(eval_set)} eval sets")
            for i, pair in enumerate(eval_set):
                if not isinstance(pair, tuple | list) or len(pair) != 2:
                    raise TypeError("eval_set must be a list of (X, y) pairs")
                we = None if sample_weight_eval_set is None else sample_weight_eval_set[i]
                ye = self._encode_dask_y(client, pair[1], False, f"eval_set {i}")[0]
                evals.append((DaskDataset(client, pair[0], label=ye, weight=we,
                                          feature_names=names,
                                          categorical_features=dtrain.categorical_features),
                              f"validation_{i}"))
        if isinstance(xgb_model, _HistBoostModel):
            xgb_model = xgb_model.get_booster()
        out = train(client, {**self._train_params(), **objective_params}, dtrain,
                    num_boost_round=int(self.n_estimators), evals=evals,
                    early_stopping_rounds=self.early_stopping_rounds, verbose_eval=verbose,
                    xgb_model=xgb_model)
        booster = out["booster"]
        self._Booster = booster
        self.evals_result_ = out["history"]
        self.best_iteration_ = booster.best_iteration
        self.best_score_ = booster.best_score
        return self

    def _rounds(self) -> tuple[int, int] | None:
        best = self.get_booster().best_iteration
        return None if best is None else (0, best + 1)


class DaskHistBoostRegressor(_DaskModel, HistBoostRegressor):
    """Gradient-boosted trees for regression on Dask collections (see the module doc)."""

    def predict(self, X: Any, output_margin: bool = False) -> Any:
        """(n,) predictions, lazily: a Dask array (array X) or Series (DataFrame X)."""
        booster = self.get_booster()
        fn = partial(_values, output_margin=output_margin, iteration_range=self._rounds())
        return _predict_parts(_client(self.client), booster, X, fn, None, np.float64)


class DaskHistBoostClassifier(_DaskModel, HistBoostClassifier):
    """Gradient-boosted trees for binary and multiclass classification on Dask collections
    (see the module doc). ``classes_`` are the sorted distinct labels of y, computed on the
    cluster."""

    def _encode_dask_y(self, client: Any, y: Any, fitting: bool, where: str) -> tuple[Any, dict]:
        if fitting:
            uniq = y.unique() if not _is_dask_array(y) else _unique_array(y)
            classes = np.asarray(client.compute(uniq).result())
            self.classes_ = np.unique(classes.ravel())
            self.n_classes_ = len(self.classes_)
            if self.n_classes_ < 2:
                raise ValueError(f"the classifier needs samples of at least 2 classes, but "
                                 f"the data contains only one class: "
                                 f"{self.classes_[0] if self.n_classes_ else None!r}")
        classes = self.classes_
        if _is_dask_array(y):
            y = y.map_blocks(_encode_block, classes, where, dtype=np.float64)
        else:
            import pandas as pd

            y = y.map_partitions(_encode_block, classes, where,
                                 meta=pd.Series([], dtype=np.float64, name=y.name))
        return y, self._objective_params()

    def predict_proba(self, X: Any) -> Any:
        """(n, n_classes_) class probabilities, lazily (columns in ``classes_`` order)."""
        booster = self.get_booster()
        fn = partial(_proba, iteration_range=self._rounds())
        return _predict_parts(_client(self.client), booster, X, fn, self.n_classes_,
                              np.float64)

    def predict(self, X: Any, output_margin: bool = False) -> Any:
        """(n,) predicted labels (from ``classes_``), or raw margins with `output_margin`,
        lazily."""
        booster = self.get_booster()
        if output_margin:
            fn = partial(_values, output_margin=True, iteration_range=self._rounds())
            width = None if booster.trees_per_round == 1 else booster.trees_per_round
            return _predict_parts(_client(self.client), booster, X, fn, width, np.float64)
        fn = partial(_labels, classes=self.classes_, iteration_range=self._rounds())
        return _predict_parts(_client(self.client), booster, X, fn, None, self.classes_.dtype)


def _unique_array(y: Any) -> Any:
    import dask.array as da

    return da.unique(y.ravel() if y.ndim > 1 else y)


__all__ = ["DaskHistBoostClassifier", "DaskHistBoostRegressor"]
