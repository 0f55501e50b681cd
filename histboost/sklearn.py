"""scikit-learn estimators: `HistBoostRegressor`, `HistBoostClassifier` and `HistBoostRanker`.

Thin wrappers over `histboost.train` with XGBoost's scikit-learn conventions: constructor
parameters use XGBoost names (None leaves the engine default), extra keyword arguments are
passed on as training parameters, ``fit`` takes ``eval_set`` / ``sample_weight`` and stops early
with ``early_stopping_rounds``, and prediction after early stopping uses the best iteration.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import Tags, check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from ._files import atomic_write
from .booster import Booster
from .data.categorical import has_categorical_input
from .data.dataset import Dataset, check_group_sizes, groups_from_qid
from .metrics import RANKING, get_metric
from .objectives import get_objective
from .objectives.classification import sigmoid, softmax
from .params import RANKING_OBJECTIVES, parse_params
from .training import train

# Constructor parameters handed to `train` under the same name when not None.
_TRAIN_PARAMS = ("learning_rate", "max_depth", "max_leaves", "grow_policy", "reg_lambda",
                 "reg_alpha", "gamma", "min_child_weight", "min_data_in_leaf", "subsample",
                 "colsample_bytree", "max_bin", "quantized_grad", "eval_metric", "verbosity")
# Input accepted by fit / predict: float32 stays float32 (the engine bins it exactly), the rest
# becomes float64; NaN marks missing values; sparse matrices stay sparse, entries that are not
# stored are zeros (scipy's meaning; see docs/sparse.md).
_CHECK_X = {"accept_sparse": "csr", "ensure_all_finite": "allow-nan",
            "dtype": [np.float64, np.float32]}
_SKLEARN_KEY = "sklearn"  # extra top-level key of model files written by `save_model`


class _HistBoostModel(BaseEstimator):
    """Shared implementation; use `HistBoostRegressor` or `HistBoostClassifier`.

    Parameters
    ----------
    n_estimators : boosting rounds.
    learning_rate, max_depth, max_leaves, grow_policy, reg_lambda, reg_alpha, gamma,
    min_child_weight, min_data_in_leaf, subsample, colsample_bytree, max_bin, quantized_grad,
    eval_metric, verbosity : training parameters (see `histboost.params.TrainParams`); None
        keeps the engine default.
    objective : objective name; None means ``"reg:squarederror"`` for the regressor and
        ``"binary:logistic"`` / ``"multi:softprob"`` (by the number of classes) for the
        classifier.
    random_state : seed (int, None for 0, or a `numpy.random.RandomState`).
    n_jobs : threads; None or -1 uses every core, -2 all but one, as in scikit-learn.
    early_stopping_rounds : stop when the last metric on the last ``eval_set`` has not improved
        for this many rounds; predictions then use the best iteration.
    categorical_features : column indices or names of categorical columns (pandas category,
        object and string columns are categorical without being named); see
        docs/categorical.md. X is then passed to `Dataset` as it is (strings allowed).
    importance_type : what ``feature_importances_`` measures, with XGBoost's meanings:
        ``"gain"`` (average loss reduction per split, the default), ``"weight"``, ``"cover"``,
        ``"total_gain"``, ``"total_cover"`` (see `histboost.explain.importance`).
    **kwargs : further training parameters (e.g. ``colsample_bynode``, ``max_delta_step``).
    """

    def __init__(self, *, n_estimators: int = 100, learning_rate: float | None = None,
                 max_depth: int | None = None, max_leaves: int | None = None,
                 grow_policy: str | None = None, reg_lambda: float | None = None,
                 reg_alpha: float | None = None, gamma: float | None = None,
                 min_child_weight: float | None = None, min_data_in_leaf: int | None = None,
                 subsample: float | None = None, colsample_bytree: float | None = None,
                 max_bin: int | None = None, objective: str | None = None,
                 random_state: int | np.random.RandomState | None = None,
                 n_jobs: int | None = None, quantized_grad: bool | None = None,
                 early_stopping_rounds: int | None = None,
                 eval_metric: str | Sequence[str] | None = None, verbosity: int | None = None,
                 importance_type: str | None = None, categorical_features: Any = None,
                 **kwargs: Any) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.grow_policy = grow_policy
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.min_data_in_leaf = min_data_in_leaf
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.max_bin = max_bin
        self.objective = objective
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.quantized_grad = quantized_grad
        self.early_stopping_rounds = early_stopping_rounds
        self.eval_metric = eval_metric
        self.verbosity = verbosity
        self.importance_type = importance_type
        self.categorical_features = categorical_features
        if kwargs:  # only when given: scikit-learn checks that __init__ sets nothing else
            self.kwargs = kwargs

    # -- parameters ---------------------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        params = super().get_params(deep)
        params.update(getattr(self, "kwargs", {}))
        return params

    def set_params(self, **params: Any) -> _HistBoostModel:
        own = self._get_param_names()
        for key, value in params.items():
            if key in own:
                setattr(self, key, value)
            else:
                self.__dict__.setdefault("kwargs", {})[key] = value
        return self

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    def _train_params(self) -> dict[str, Any]:
        params = {k: getattr(self, k) for k in _TRAIN_PARAMS if getattr(self, k) is not None}
        rs = self.random_state
        if isinstance(rs, int | np.integer):
            params["seed"] = int(rs)
        elif rs is not None:  # a RandomState: draw the seed from it
            params["seed"] = int(check_random_state(rs).randint(2**31 - 1))
        if self.n_jobs is not None:
            n = int(self.n_jobs)
            params["nthread"] = n if n > 0 else max(1, (os.cpu_count() or 1) + 1 + n)
        params.update(getattr(self, "kwargs", {}))
        return params

    # -- fitting ------------------------------------------------------------------------------
    def _encode_y(self, y: np.ndarray, fitting: bool) -> tuple[np.ndarray, dict[str, Any]]:
        """Labels as the engine sees them, and objective parameters (classifier overrides)."""
        return y, {"objective": self.objective or "reg:squarederror"}

    def fit(self, X: Any, y: Any, sample_weight: Any = None,
            eval_set: Sequence[tuple[Any, Any]] | None = None,
            sample_weight_eval_set: Sequence[Any] | None = None, verbose: bool | int = False,
            xgb_model: Booster | str | os.PathLike | _HistBoostModel | None = None
            ) -> _HistBoostModel:
        """Train on X (n, F) (array, DataFrame or sparse matrix; NaN = missing) and y (n,).

        Parameters
        ----------
        sample_weight : (n,) non-negative row weights.
        eval_set : (X, y) pairs evaluated every round, named ``validation_0``, ...; the last
            one drives early stopping.
        sample_weight_eval_set : row weights for each eval set (or None entries).
        verbose : print evaluation results every round (True) or every N rounds.
        xgb_model : Booster, model file or fitted estimator to continue training from.
        """
        self._check_n_estimators()
        categorical = has_categorical_input(X, self.categorical_features)
        if categorical:  # raw values, strings included: the Dataset checks them
            X, y = validate_data(self, X, y, skip_check_array=True)
            y = column_or_1d(y, warn=True)
            if not isinstance(self, ClassifierMixin):
                y = np.asarray(y, np.float64)
        else:
            X, y = validate_data(self, X, y, y_numeric=not isinstance(self, ClassifierMixin),
                                 **_CHECK_X)
        y, objective_params = self._encode_y(y, fitting=True)
        weight = None
        if sample_weight is not None:
            weight = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                          ensure_non_negative=True)
            if 0 < np.count_nonzero(weight) < weight.size:
                # a zero weight means "not in the data" (scikit-learn's contract); dropped
                # rows also leave the bin cut points, which they would otherwise shift
                keep = weight > 0
                X = X[keep] if not hasattr(X, "iloc") else X.iloc[np.flatnonzero(keep)]
                y, weight = y[keep], weight[keep]
        names = list(getattr(self, "feature_names_in_", [])) or None
        dtrain = Dataset(X, label=y, weight=weight, feature_names=names,
                         categorical_features=self.categorical_features if categorical
                         else None)
        evals = self._eval_datasets(dtrain, eval_set, sample_weight_eval_set)
        return self._train_booster(dtrain, evals, objective_params, verbose, xgb_model)

    def _check_n_estimators(self) -> None:
        if not isinstance(self.n_estimators, int | np.integer) or self.n_estimators < 1:
            raise ValueError(f"n_estimators must be a positive integer, got "
                             f"{self.n_estimators!r}")

    def _train_booster(self, dtrain: Dataset, evals: list[tuple[Dataset, str]],
                       objective_params: dict[str, Any], verbose: bool | int,
                       xgb_model: Booster | str | os.PathLike | _HistBoostModel | None
                       ) -> _HistBoostModel:
        """Train on `dtrain` with `evals` and keep the Booster and the evaluation log."""
        if isinstance(xgb_model, _HistBoostModel):
            xgb_model = xgb_model.get_booster()
        results: dict[str, dict[str, list[float]]] = {}
        params = {**self._train_params(), **objective_params}
        custom_metric = None
        if callable(self.eval_metric):
            custom_metric = _sklearn_metric(self.eval_metric)
            del params["eval_metric"]
            params["disable_default_eval_metric"] = True
        booster = train(params, dtrain,
                        num_boost_round=int(self.n_estimators), evals=evals,
                        early_stopping_rounds=self.early_stopping_rounds, evals_result=results,
                        verbose_eval=verbose, xgb_model=xgb_model, custom_metric=custom_metric)
        self._Booster = booster
        self.evals_result_ = results
        self.best_iteration_ = booster.best_iteration
        self.best_score_ = booster.best_score
        return self

    def _eval_datasets(self, dtrain: Dataset, eval_set: Sequence[tuple[Any, Any]] | None,
                       weights: Sequence[Any] | None) -> list[tuple[Dataset, str]]:
        if not eval_set:
            return []
        if weights is not None and len(weights) != len(eval_set):
            raise ValueError(f"sample_weight_eval_set has {len(weights)} entries for "
                             f"{len(eval_set)} eval sets")
        evals = []
        for i, pair in enumerate(eval_set):
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise TypeError("eval_set must be a list of (X, y) pairs")
            if dtrain.categorical is not None:
                Xe, ye = validate_data(self, pair[0], pair[1], reset=False,
                                       skip_check_array=True)
                ye = column_or_1d(ye)
            else:
                Xe, ye = validate_data(self, pair[0], pair[1], reset=False,
                                       y_numeric=not isinstance(self, ClassifierMixin),
                                       **_CHECK_X)
            we = None if weights is None or weights[i] is None else _check_sample_weight(
                weights[i], Xe, dtype=np.float64, ensure_non_negative=True)
            cat = None if dtrain.categorical is None else dtrain.categorical.positions
            evals.append((Dataset(Xe, label=self._encode_y(ye, fitting=False)[0], weight=we,
                                  feature_names=dtrain.feature_names, reference=dtrain,
                                  categorical_features=cat), f"validation_{i}"))
        return evals

    # -- prediction ---------------------------------------------------------------------------
    def get_booster(self) -> Booster:
        """The trained `Booster`."""
        check_is_fitted(self, "_Booster")
        return self._Booster

    def _predict(self, X: Any, output_margin: bool = False) -> np.ndarray:
        booster = self.get_booster()
        X = validate_data(self, X, reset=False, **({"skip_check_array": True}
                                                   if booster.categorical is not None
                                                   else _CHECK_X))
        best = booster.best_iteration
        rounds = None if best is None else (0, best + 1)
        return booster.predict(X, output_margin=output_margin, iteration_range=rounds)

    @property
    def feature_importances_(self) -> np.ndarray:
        """float64 (n_features_in_,): the importance of `importance_type` (default
        ``"gain"``, the average gain per split, as XGBoost) per feature, normalised to sum to
        1 (all zeros when no tree has a split)."""
        from .explain.importance import importance
        b = self.get_booster()
        imp = importance(b.trees, b.n_features, self.importance_type or "gain")
        if b.categorical is not None:  # derived features credit their input columns
            imp = b.categorical.input_importance(imp)
        total = imp.sum()
        return imp / total if total > 0 else imp

    def evals_result(self) -> dict[str, dict[str, list[float]]]:
        """``{"validation_i": {metric: [value per round]}}`` of the last `fit`."""
        check_is_fitted(self, "_Booster")
        return self.evals_result_

    # -- persistence --------------------------------------------------------------------------
    def _sklearn_state(self) -> dict[str, Any]:
        return {"estimator": type(self).__name__, "n_features_in": int(self.n_features_in_),
                "feature_names_in": (None if not hasattr(self, "feature_names_in_")
                                     else [str(c) for c in self.feature_names_in_])}

    def save_model(self, path: str | os.PathLike) -> None:
        """Write the model as histboost JSON (loadable by `Booster` and the CLI) plus the
        estimator's attributes (classes, feature names), atomically."""
        model = self.get_booster().to_dict()
        model[_SKLEARN_KEY] = self._sklearn_state()
        atomic_write(path, json.dumps(model, separators=(",", ":")))

    def load_model(self, path: str | os.PathLike) -> _HistBoostModel:
        """Load a model written by `save_model`, `Booster.save_model` or the CLI."""
        booster = Booster(model_file=path)  # raises ValueError for a malformed model
        with open(path, "rb") as f:
            state = json.load(f).get(_SKLEARN_KEY) or {}
        _check_state(state, _n_inputs(booster), os.fspath(path))
        self._restore(booster, state)
        return self

    def _restore(self, booster: Booster, state: dict[str, Any]) -> None:
        self._Booster = booster
        self.n_features_in_ = _n_inputs(booster)
        if state.get("feature_names_in") is not None:
            self.feature_names_in_ = np.asarray(state["feature_names_in"], dtype=object)
        self.best_iteration_ = booster.best_iteration
        self.best_score_ = booster.best_score
        self.evals_result_ = {}


def _n_inputs(booster: Booster) -> int:
    """Input columns of a model (categorical ones included)."""
    cat = booster.categorical
    return booster.num_features() if cat is None else len(cat.input_names)


def _sklearn_metric(fn: Any) -> Any:
    """A scikit-learn style ``fn(y_true, y_pred[, sample_weight])`` (lower is better) as a
    `train` custom metric named by the function, on the model's predictions (probabilities
    for classifiers), as XGBoost's estimators take a callable `eval_metric`."""
    name = getattr(fn, "__name__", "custom")

    def metric(pred: np.ndarray, data: Dataset) -> tuple[str, float]:
        y, w = data.get_label(), data.weight
        value = fn(y, pred) if w is None else fn(y, pred, sample_weight=w)
        return name, float(value)

    return metric


def _check_state(state: Any, n_features: int, where: str) -> None:
    """Raise ValueError unless `state` is the estimator part `save_model` writes."""
    def bad(what: str) -> ValueError:
        return ValueError(f"{where} is a corrupt histboost model: its {_SKLEARN_KEY!r} part "
                          f"{what}")

    if not isinstance(state, dict):
        raise bad(f"must be an object, got {type(state).__name__}")
    names = state.get("feature_names_in")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
            raise bad("has feature_names_in that are not a list of strings")
        if len(names) != n_features or len(set(names)) != len(names):
            raise bad(f"has {len(names)} feature_names_in (unique: {len(set(names))}) for "
                      f"{n_features} features")
    classes = state.get("classes")
    if classes is not None:
        if not isinstance(classes, list) or not all(
                isinstance(c, str | int | float) for c in classes):
            raise bad("has classes that are not a list of labels")
        if len({(type(c), c) for c in classes}) != len(classes):
            raise bad(f"lists a class twice: {classes}")


class HistBoostRegressor(RegressorMixin, _HistBoostModel):
    """Gradient-boosted trees for regression (``reg:squarederror`` by default).

    Parameters are those of the shared base (see ``_HistBoostModel``); e.g.
    ``HistBoostRegressor(n_estimators=200, max_depth=6, learning_rate=0.1)``.
    """

    def predict(self, X: Any, output_margin: bool = False) -> np.ndarray:
        """float64 (n,) predictions for X (n, n_features_in_)."""
        return self._predict(X, output_margin)

    def _restore(self, booster: Booster, state: dict[str, Any]) -> None:
        if booster.objective_name.startswith(("binary:", "multi:")):
            raise ValueError(f"the model has objective {booster.objective_name!r}; load it "
                             "with HistBoostClassifier")
        if booster.objective_name in RANKING_OBJECTIVES:
            raise ValueError(f"the model has objective {booster.objective_name!r}; load it "
                             "with HistBoostRanker")
        super()._restore(booster, state)


class HistBoostClassifier(ClassifierMixin, _HistBoostModel):
    """Gradient-boosted trees for binary and multiclass classification.

    Labels may be any sortable values (``classes_`` holds them in sorted order); two classes
    train ``binary:logistic``, more train ``multi:softprob``. Parameters are those of the
    shared base (see ``_HistBoostModel``).
    """

    def _encode_y(self, y: np.ndarray, fitting: bool) -> tuple[np.ndarray, dict[str, Any]]:
        if fitting:
            check_classification_targets(y)
            self.classes_, encoded = np.unique(y, return_inverse=True)
            self.n_classes_ = len(self.classes_)
            if self.n_classes_ < 2:
                raise ValueError(f"the classifier needs samples of at least 2 classes, but "
                                 f"the data contains only one class: {self.classes_[0]!r}")
        else:
            pos = np.searchsorted(self.classes_, y)
            pos = np.minimum(pos, self.n_classes_ - 1)
            unseen = self.classes_[pos] != y
            if np.any(unseen):
                raise ValueError(f"eval_set has label {y[unseen][0]!r}, which is not among the "
                                 f"training classes {self.classes_.tolist()}")
            encoded = pos
        return encoded.astype(np.float64), self._objective_params()

    def _objective_params(self) -> dict[str, Any]:
        binary = self.n_classes_ == 2
        allowed = ("binary:logistic",) if binary else ("multi:softprob", "multi:softmax")
        if self.objective is not None and self.objective not in allowed:
            raise ValueError(f"objective {self.objective!r} does not fit {self.n_classes_} "
                             f"classes; use one of {allowed} or None")
        if binary:
            return {"objective": "binary:logistic"}
        # softmax and softprob grow the same trees; softprob gives predict_proba its input
        return {"objective": "multi:softprob", "num_class": self.n_classes_}

    def predict_proba(self, X: Any) -> np.ndarray:
        """float64 (n, n_classes_) class probabilities, columns in ``classes_`` order."""
        # from margins, so that a loaded multi:softmax model gives probabilities too
        margin = self._predict(X, output_margin=True)
        if margin.ndim == 1:
            p = sigmoid(margin)
            return np.column_stack([1.0 - p, p])
        return softmax(margin)

    def predict(self, X: Any, output_margin: bool = False) -> np.ndarray:
        """(n,) predicted labels (from ``classes_``), or raw margins with `output_margin`."""
        if output_margin:
            return self._predict(X, output_margin=True)
        proba = self.predict_proba(X)  # first: it raises NotFittedError when unfitted
        return self.classes_[np.argmax(proba, axis=1)]

    def _sklearn_state(self) -> dict[str, Any]:
        return {**super()._sklearn_state(), "classes": self.classes_.tolist()}

    def _restore(self, booster: Booster, state: dict[str, Any]) -> None:
        name = booster.objective_name
        if not name.startswith(("binary:logistic", "multi:")):
            raise ValueError(f"the model has objective {name!r}; load it with "
                             "HistBoostRegressor")
        n_classes = booster.num_class if name.startswith("multi:") else 2
        classes = state.get("classes")
        self.classes_ = np.asarray(classes) if classes is not None else np.arange(n_classes)
        if len(self.classes_) != n_classes:
            raise ValueError(f"the model file lists {len(self.classes_)} classes for "
                             f"{n_classes} outputs")
        self.n_classes_ = n_classes
        super()._restore(booster, state)


class HistBoostRanker(_HistBoostModel):
    """Gradient-boosted trees for learning to rank (``rank:ndcg`` by default; also
    ``rank:pairwise`` and ``rank:map``), as XGBoost's ``XGBRanker``.

    The rows of each query must be contiguous; give the queries to `fit` as ``group`` (sizes)
    or ``qid`` (one id per row), or as a ``qid`` column of a pandas DataFrame X (in `fit`,
    `predict` and `score`). Ranking parameters (``lambdarank_pair_method``,
    ``lambdarank_num_pair_per_sample``, ``ndcg_exp_gain``, ...) go in as keyword arguments.
    Other parameters are those of the shared base (see ``_HistBoostModel``).
    """

    def _encode_y(self, y: np.ndarray, fitting: bool) -> tuple[np.ndarray, dict[str, Any]]:
        objective = self.objective or "rank:ndcg"
        if parse_params({"objective": objective}).objective not in RANKING_OBJECTIVES:
            raise ValueError(f"HistBoostRanker trains the ranking objectives "
                             f"{RANKING_OBJECTIVES}, got objective {objective!r}")
        return y, {"objective": objective}

    def fit(self, X: Any, y: Any, *, group: Any = None, qid: Any = None,  # type: ignore[override]
            sample_weight: Any = None, eval_set: Sequence[tuple[Any, Any]] | None = None,
            eval_group: Sequence[Any] | None = None, eval_qid: Sequence[Any] | None = None,
            sample_weight_eval_set: Sequence[Any] | None = None, verbose: bool | int = False,
            xgb_model: Booster | str | os.PathLike | _HistBoostModel | None = None
            ) -> HistBoostRanker:
        """Train on X (n, F) and relevance labels y (n,) of the queries given by `group`
        (int (G,) query sizes) or `qid` ((n,) query ids, each query's rows contiguous).

        Parameters
        ----------
        sample_weight : one weight per query (G,) as in XGBoost, or (n,) row weights equal
            within each query.
        eval_set : (X, y) pairs evaluated every round (``validation_0``, ...), each with its
            queries in `eval_group` (sizes) or `eval_qid` (ids), one entry per set; the last
            set drives early stopping.
        sample_weight_eval_set : query weights for each eval set (or None entries).
        verbose, xgb_model : as in `HistBoostRegressor.fit`.
        """
        self._check_n_estimators()
        X, qid = _qid_column(X, qid, group)
        if (group is None) == (qid is None):
            raise ValueError("HistBoostRanker.fit needs the queries: give group (query sizes) "
                             "or qid (a query id per row), not both"
                             if group is not None else
                             "HistBoostRanker.fit needs the queries: give group (query "
                             "sizes) or qid (a query id per row)")
        X, y = validate_data(self, X, y, y_numeric=True, **_CHECK_X)
        y, objective_params = self._encode_y(y, fitting=True)
        names = list(getattr(self, "feature_names_in_", [])) or None
        dtrain = Dataset(X, label=y, weight=sample_weight, group=group, qid=qid,
                         feature_names=names)
        evals = []
        n_sets = len(eval_set or ())
        for what, given in (("eval_group", eval_group), ("eval_qid", eval_qid),
                            ("sample_weight_eval_set", sample_weight_eval_set)):
            if given is not None and len(given) != n_sets:
                raise ValueError(f"{what} has {len(given)} entries for {n_sets} eval sets")
        for i, pair in enumerate(eval_set or ()):
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise TypeError("eval_set must be a list of (X, y) pairs")
            g_i = None if eval_group is None else eval_group[i]
            Xe, q_i = _qid_column(pair[0], None if eval_qid is None else eval_qid[i], g_i)
            if g_i is None and q_i is None:
                raise ValueError(f"eval_set {i} needs its queries: give eval_group or eval_qid "
                                 "(one entry per eval set)")
            Xe, ye = validate_data(self, Xe, pair[1], reset=False, y_numeric=True, **_CHECK_X)
            we = None if sample_weight_eval_set is None else sample_weight_eval_set[i]
            evals.append((Dataset(Xe, label=ye, weight=we, group=g_i, qid=q_i,
                                  feature_names=dtrain.feature_names, reference=dtrain),
                          f"validation_{i}"))
        return self._train_booster(dtrain, evals, objective_params, verbose, xgb_model)

    def predict(self, X: Any, output_margin: bool = False) -> np.ndarray:
        """float64 (n,) scores of the rows of X; sort each query's rows by them (a ``qid``
        column of a DataFrame X is dropped)."""
        X, _ = _qid_column(X, None, None)
        return self._predict(X, output_margin)

    def score(self, X: Any, y: Any, group: Any = None, qid: Any = None) -> float:
        """The ranking metric of the predictions for X against relevance labels y, averaged
        over the queries (`group` sizes, `qid` ids, or a ``qid`` column of a DataFrame X):
        the last ranking metric of ``eval_metric``, else the objective's default metric
        (``ndcg@32`` for ``rank:ndcg``, as XGBRanker's score)."""
        X, qid = _qid_column(X, qid, group)
        if (group is None) == (qid is None):
            raise ValueError("score needs the queries: give group (sizes) or qid (ids)")
        y = np.asarray(y, np.float64)
        sizes = (check_group_sizes(group, y.shape[0]) if qid is None
                 else groups_from_qid(qid, y.shape[0]))
        booster = self.get_booster()
        metrics = [self.eval_metric] if isinstance(self.eval_metric, str) else list(
            self.eval_metric or [])
        ranking = [m for m in metrics if isinstance(m, str) and m in RANKING]
        p = parse_params(dict(booster.params))
        name = ranking[-1] if ranking else get_objective(p.objective, 1, p).default_metric
        return get_metric(name, p.label_gain, p.ndcg_exp_gain)(y, self.predict(X), None,
                                                                 group=sizes)

    def _restore(self, booster: Booster, state: dict[str, Any]) -> None:
        if booster.objective_name not in RANKING_OBJECTIVES:
            raise ValueError(f"the model has objective {booster.objective_name!r}; load it "
                             "with HistBoostRegressor or HistBoostClassifier")
        super()._restore(booster, state)


def _qid_column(X: Any, qid: Any, group: Any) -> tuple[Any, Any]:
    """(X, qid): a pandas DataFrame X with a ``qid`` column gives its values as the query ids
    (when neither qid nor group is given) and is returned without it (XGBRanker's
    convention)."""
    if type(X).__name__ == "DataFrame" and hasattr(X, "columns") and "qid" in X.columns:
        if qid is None and group is None:
            qid = X["qid"].to_numpy()
        X = X.drop(columns="qid")
    return X, qid


__all__ = ["HistBoostClassifier", "HistBoostRanker", "HistBoostRegressor"]
