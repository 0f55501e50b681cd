"""`Booster`: a trained model — its trees, the objective and the intercept — with prediction,
versioned JSON serialisation, text dumps and feature importance.

Model file (JSON, ``format == "histboost"``, ``version == 1``)::

    {"format": "histboost", "version": 1, "histboost_version": "...",
     "learner": {"objective": str, "num_class": int, "trees_per_round": int,
                 "base_margin": [K floats], "n_features": int, "feature_names": [str],
                 "best_iteration": int | null, "best_score": float | null,
                 "params": {...}, "categorical": {...} (models with categorical features
                 only: `histboost.categorical.model`)},
     "trees": [Tree.to_dict(), ...]}

Trees are stored round-major: round r owns trees ``r*K .. r*K+K-1``, tree ``r*K+k`` adding to
output column k. Floats are written with ``repr`` precision, so a loaded model predicts
bit-identically.

A model with categorical features splits on an extended matrix, the numeric input columns and
the features derived from the categorical ones (target statistics, frequencies, one-hot
indicators): ``n_features`` and ``feature_names`` describe that matrix, ``categorical`` (a
`CategoricalModel`) the input columns and how the derived features come from them.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numba as nb
import numpy as np

from . import __version__
from ._files import atomic_write
from .data.dataset import Dataset, to_float_matrix
from .data.sparse import SparseMatrix
from .objectives import get_objective
from .objectives.base import Objective
from .params import ALIASES, parse_params
from .tree.predictor import PackedForest
from .tree.tree import Tree

if TYPE_CHECKING:
    from .categorical.model import CategoricalModel

FORMAT_NAME = "histboost"
FORMAT_VERSION = 1


def _as_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"expected an integer, got {v!r}")
    return v


def _cuda_matrix(data: Any) -> Any:
    """`data` as a 2-D torch CUDA tensor when it lives on a GPU (a torch CUDA tensor, or a
    CuPy / Numba / JAX array through DLPack), else None."""
    is_torch = type(data).__module__.startswith("torch")
    if not (hasattr(data, "__cuda_array_interface__") or is_torch):
        return None
    import torch
    t = data if isinstance(data, torch.Tensor) else torch.from_dlpack(data)
    if not t.is_cuda:
        return None
    if t.ndim != 2:
        raise ValueError(f"data must be 2-D (n_rows, n_features), got shape {tuple(t.shape)}")
    return t


class Booster:
    """A gradient-boosted tree model.

    Build one with `histboost.train`, or load a saved model with ``Booster(model_file=path)``.
    """

    def __init__(self, model_file: str | os.PathLike | None = None, *,
                 objective: str = "reg:squarederror", num_class: int = 1,
                 base_margin: np.ndarray | None = None, n_features: int = 0,
                 feature_names: Sequence[str] | None = None,
                 params: dict[str, Any] | None = None) -> None:
        self.trees: list[Tree] = []
        self.objective_name = objective
        self.num_class = int(num_class)
        self.params: dict[str, Any] = dict(params or {})
        self.n_features = int(n_features)
        self.feature_names = list(feature_names) if feature_names is not None else [
            f"f{i}" for i in range(self.n_features)]
        self.best_iteration: int | None = None
        self.best_score: float | None = None
        # set by train(): seconds per phase; bytes this rank passed to collectives by
        # purpose and the number of the trees' collective calls (distributed training only)
        self.timings: dict[str, float] = {}
        self.traffic: dict[str, int] | None = None
        self.collective_calls: int | None = None
        self._objective: Objective | None = None
        self._forest: PackedForest | None = None
        self._forest_size = -1
        self._device_forest: tuple | None = None
        self._device_categorical: tuple | None = None
        self.categorical: CategoricalModel | None = None
        k = self.trees_per_round
        self.base_margin = (np.zeros(k) if base_margin is None
                            else np.asarray(base_margin, dtype=np.float64).reshape(k))
        if model_file is not None:
            self.load_model(model_file)

    # -- structure ----------------------------------------------------------------------------
    @property
    def trees_per_round(self) -> int:
        return self.num_class if self.objective_name.startswith("multi:") or (
            self.objective_name == "custom" and self.num_class > 1) else 1

    @property
    def objective(self) -> Objective:
        if self._objective is None or self._objective.name != self.objective_name:
            if self.objective_name == "custom":
                # predictions of a custom objective are raw margins
                self._objective = Objective("custom", self.num_class)
            else:
                self._objective = get_objective(self.objective_name, self.num_class)
        return self._objective

    def num_boosted_rounds(self) -> int:
        """Number of boosting rounds (trees / trees per round)."""
        return len(self.trees) // self.trees_per_round

    def num_features(self) -> int:
        return self.n_features

    def append_round(self, trees: Sequence[Tree]) -> None:
        if len(trees) != self.trees_per_round:
            raise ValueError(f"a round has {self.trees_per_round} trees, got {len(trees)}")
        self.trees.extend(trees)

    def __getitem__(self, item: slice) -> Booster:
        """Rounds ``[start:stop]`` as a new Booster (step 1 only), as XGBoost's slicing."""
        if not isinstance(item, slice) or item.step not in (None, 1):
            raise TypeError("a Booster can only be sliced by rounds, e.g. booster[:10]")
        start, stop, _ = item.indices(self.num_boosted_rounds())
        k = self.trees_per_round
        out = self._empty_like()
        out.trees = list(self.trees[start * k:max(start, stop) * k])
        if start == 0 and self.best_iteration is not None and self.best_iteration < stop:
            out.best_iteration, out.best_score = self.best_iteration, self.best_score
        return out

    def _empty_like(self) -> Booster:
        out = Booster(objective=self.objective_name, num_class=self.num_class,
                      base_margin=self.base_margin.copy(), n_features=self.n_features,
                      feature_names=self.feature_names, params=self.params)
        out.categorical = self.categorical
        return out

    def set_categorical(self, model: CategoricalModel) -> None:
        """Make this (empty or growing) model one with categorical features: its trees split
        on `model`'s extended matrix (the features and names follow it)."""
        self.categorical = model
        self.n_features = model.n_features
        self.feature_names = model.feature_names()

    def copy(self) -> Booster:
        out = self[:]
        out.best_iteration, out.best_score = self.best_iteration, self.best_score
        return out

    def set_param(self, params: dict[str, Any] | str, value: Any = None) -> None:
        """Set parameters, as XGBoost's ``Booster.set_param``: a dict, or one name (XGBoost's
        or a LightGBM alias) and its value. They are validated and stored in `params` under
        XGBoost's names. During `train` a callback may change ``learning_rate`` between
        rounds (the next round's trees use it); the other parameters are fixed for a run."""
        updates = params if isinstance(params, dict) else {params: value}
        merged = dict(self.params)
        for name, v in updates.items():
            merged[ALIASES.get(name, name)] = v
        self.params = parse_params(merged).to_dict()

    # -- prediction ---------------------------------------------------------------------------
    def _packed(self) -> PackedForest:
        if self._forest is None or self._forest_size != len(self.trees):
            self._forest = PackedForest(self.trees)
            self._forest_size = len(self.trees)
        return self._forest

    def _tree_range(self, iteration_range: tuple[int, int] | None) -> tuple[int, int]:
        rounds = self.num_boosted_rounds()
        if iteration_range is None:
            return 0, len(self.trees)
        if (not isinstance(iteration_range, tuple | list | np.ndarray)
                or len(iteration_range) != 2 or np.ndim(iteration_range) != 1
                or not all(isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)
                           for v in iteration_range)):
            raise TypeError(f"iteration_range must be a (begin, end) pair of integers, got "
                            f"{iteration_range!r}")
        a, b = (int(v) for v in iteration_range)
        if (a, b) == (0, 0):
            return 0, len(self.trees)
        if b == 0:
            b = rounds
        if not (0 <= a <= b <= rounds):
            raise ValueError(f"iteration_range {iteration_range} is outside the model's "
                             f"{rounds} rounds")
        k = self.trees_per_round
        return a * k, b * k

    def _matrix(self, data: Any) -> tuple[np.ndarray | SparseMatrix, np.ndarray | None]:
        """Raw feature matrix of `data` and its base margin (Datasets may carry one); the
        extended matrix for a model with categorical features."""
        if self.categorical is not None:
            if _is_sparse(data):
                raise ValueError("a model with categorical features predicts from dense input "
                                 "(a DataFrame or an array), not a sparse matrix")
            bm = data.base_margin if isinstance(data, Dataset) else None
            return self.categorical.matrix(data), bm
        if isinstance(data, Dataset):
            X, names, bm = data.data, data.feature_names, data.base_margin
            names_given = True
        else:
            X, names = to_float_matrix(data)
            bm, names_given = None, names is not None
        if X.shape[1] != self.n_features:
            raise ValueError(f"data has {X.shape[1]} features but the model was trained on "
                             f"{self.n_features}")
        if names_given and names is not None and list(names) != self.feature_names and not (
                isinstance(data, Dataset) and names == [f"f{i}" for i in range(X.shape[1])]):
            diff = [(a, b) for a, b in zip(names, self.feature_names, strict=True) if a != b]
            raise ValueError(f"feature names differ from the model's: data {diff[0][0]!r} vs "
                             f"model {diff[0][1]!r} (and {len(diff) - 1} more)")
        return X, bm

    def _set_threads(self) -> None:
        n = int(self.params.get("nthread", 0) or 0)
        n = n if n > 0 else (os.cpu_count() or 1)
        nb.set_num_threads(max(1, min(n, nb.config.NUMBA_NUM_THREADS)))

    def predict_margin(self, X: np.ndarray | SparseMatrix, base_margin: np.ndarray | None = None,
                       tree_range: tuple[int, int] | None = None) -> np.ndarray:
        """float64 (n, K) margins of raw X (n, F), dense or a `SparseMatrix` (predicted on
        the CPU without densifying), over trees [a, b) (all by default)."""
        a, b = tree_range if tree_range is not None else (0, len(self.trees))
        out = self._initial_margin(X.shape[0], base_margin)
        if b > a:
            if self._predicts_on_gpu() and not isinstance(X, SparseMatrix):
                self._add_margin_cuda(X, out, a, b)
            else:
                self._set_threads()
                self._packed().add_margin(X, out, a, b)
        return out

    def _initial_margin(self, n: int, base_margin: np.ndarray | None) -> np.ndarray:
        """float64 (n, K): the given base margin, else the model's."""
        k = self.trees_per_round
        if base_margin is None:
            return np.tile(self.base_margin, (n, 1))
        bm = np.asarray(base_margin, np.float64)
        if bm.shape not in ((n,), (n, 1), (n, k)):
            raise ValueError(f"base_margin has shape {bm.shape}; this model has {k} "
                             f"output{'s' if k > 1 else ''}, so it needs ({n},) or ({n}, {k})")
        return np.array(np.broadcast_to(bm.reshape(n, -1), (n, k)), dtype=np.float64)

    # -- prediction on a GPU ----------------------------------------------------------------
    def _predicts_on_gpu(self) -> bool:
        """A model trained with device='cuda' predicts on the GPU when one is visible (the
        model itself is the same on any device; without a GPU it predicts on the CPU)."""
        if not str(self.params.get("device", "cpu")).startswith("cuda"):
            return False
        try:
            import torch
        except ImportError:
            return False
        return torch.cuda.is_available()

    def _add_margin_cuda(self, X: Any, out: np.ndarray, a: int, b: int) -> None:
        """out (n, K) float64 += trees [a, b) on X: a host array (copied to the model's
        device) or a torch CUDA tensor (used where it is)."""
        import torch

        from .kernels.cuda import predict as cuda_predict
        if isinstance(X, torch.Tensor):
            dev = X.device
        else:
            dev = torch.device(str(self.params.get("device", "cuda")))
            X = torch.from_numpy(np.ascontiguousarray(X))
        if X.dtype not in (torch.float32, torch.float64):
            X = X.to(torch.float64)
        X = X.to(dev).contiguous()
        margin = torch.from_numpy(out).to(dev)
        cuda_predict.add_margin_raw(self._forest_on(dev), X, margin, a, b)
        out[...] = margin.cpu().numpy()

    def _forest_on(self, dev: Any) -> tuple:
        """The forest's arrays on torch device `dev` (kept while the trees do not change)."""
        from .kernels.cuda import predict as cuda_predict

        key = (len(self.trees), str(dev))
        if self._device_forest is None or self._device_forest[0] != key:
            self._device_forest = (key, cuda_predict.forest_arrays(self._packed(), dev))
        return self._device_forest[1]

    def _categorical_margin_cuda(self, data: Any, a: int, b: int, device: Any = None
                                 ) -> np.ndarray:
        """float64 (n, K) margins of trees [a, b) of a model with categorical features on raw
        `data` (host input, or a torch tensor on `device`), the extended matrix built on the
        device (`histboost.categorical.predict_cuda`). device: a torch device, by default
        the tensor's or the model's ``device`` parameter's."""
        import torch

        from .categorical.predict_cuda import DeviceCategorical
        from .kernels.cuda import predict as cuda_predict

        if device is None:
            device = data.device if isinstance(data, torch.Tensor) else torch.device(
                str(self.params.get("device", "cuda")))
        cat = self.categorical
        assert cat is not None
        # combinations join the model while it trains: the copy follows its size
        key = (id(cat), len(cat.tables), len(cat.derived), str(device))
        if self._device_categorical is None or self._device_categorical[0] != key:
            self._device_categorical = (key, DeviceCategorical(cat, device))
        dc = self._device_categorical[1]
        numeric, hashes = dc.split_input(data)
        XT = dc.columns(numeric, hashes)
        bm = data.base_margin if isinstance(data, Dataset) else None
        out = self._initial_margin(XT.shape[1], bm)
        if b > a:
            margin = torch.from_numpy(out).to(device)
            cuda_predict.add_margin_columns(self._forest_on(device), XT, margin, a, b)
            out[...] = margin.cpu().numpy()
        return out

    def predict(self, data: Any, output_margin: bool = False, pred_leaf: bool = False,
                iteration_range: tuple[int, int] | None = None, *,
                pred_contribs: bool = False, approx_contribs: bool = False,
                pred_interactions: bool = False) -> np.ndarray:
        """Predict for `data` (Dataset, array (n, F), DataFrame, scipy sparse matrix, or a
        CUDA array: torch tensor, CuPy, anything with DLPack).

        A sparse matrix is read without densifying; its unstored entries are zeros (scipy's
        meaning); wrap it as ``Dataset(X, unstored="nan")`` to read them as missing values.

        A model trained with ``device="cuda"`` predicts on the GPU when one is visible, and
        device input is predicted on its own device without a copy to the host; the result
        is a host NumPy array either way. A model with categorical features takes raw values
        there too: its extended matrix (statistics from the stored tables, combinations,
        frequencies) is built on the device (strings are hashed on the host; device input
        holds integer ids in the categorical columns).

        Returns float64 (n,) predictions — probabilities for binary:logistic, class indices
        for multi:softmax — or (n, K) class probabilities for multi:softprob; raw margins with
        ``output_margin=True``; int32 (n, n_trees) leaf indices with ``pred_leaf=True`` (node
        ids, or the bit path for oblivious trees). `iteration_range` (begin, end) selects
        rounds; the default uses them all.

        ``pred_contribs=True``: float32 SHAP values, (n, F+1) or (n, K, F+1) with the bias
        last (exact TreeSHAP; Saabas attributions with ``approx_contribs=True``);
        ``pred_interactions=True``: SHAP interaction values, (n, F+1, F+1) or
        (n, K, F+1, F+1). See `histboost.explain.shap`.
        """
        if pred_contribs or pred_interactions:
            return self._explain(data, iteration_range, approx_contribs, pred_interactions)
        device_X = _cuda_matrix(data)
        if self.categorical is not None and not pred_leaf and (
                device_X is not None or self._predicts_on_gpu()):
            if _is_sparse(data):
                raise ValueError("a model with categorical features predicts from dense input "
                                 "(a DataFrame or an array), not a sparse matrix")
            a, b = self._tree_range(iteration_range)
            margin = self._categorical_margin_cuda(data if device_X is None else device_X, a,
                                                   b)
            if output_margin:
                return margin[:, 0] if margin.shape[1] == 1 else margin
            return self.objective.transform(margin)
        if device_X is not None and not pred_leaf:  # device input: predicted where it is
            if device_X.shape[1] != self.n_features:
                raise ValueError(f"data has {device_X.shape[1]} features but the model was "
                                 f"trained on {self.n_features}")
            a, b = self._tree_range(iteration_range)
            margin = np.tile(self.base_margin, (device_X.shape[0], 1))
            if b > a:
                self._add_margin_cuda(device_X, margin, a, b)
            if output_margin:
                return margin[:, 0] if margin.shape[1] == 1 else margin
            return self.objective.transform(margin)
        if device_X is not None:
            data = device_X.cpu().numpy()
        X, bm = self._matrix(data)
        a, b = self._tree_range(iteration_range)
        if pred_leaf:
            self._set_threads()
            return self._packed().leaf_indices(X, a, b)
        margin = self.predict_margin(X, bm, (a, b))
        if output_margin:
            return margin[:, 0] if margin.shape[1] == 1 else margin
        return self.objective.transform(margin)

    def _explain(self, data: Any, iteration_range: tuple[int, int] | None, approx: bool,
                 interactions: bool) -> np.ndarray:
        from .explain import shap
        device_X = _cuda_matrix(data)
        X, bm = self._matrix(device_X.cpu().numpy() if device_X is not None else data)
        if isinstance(X, SparseMatrix):
            # the attributions are (n, F+1) dense anyway: a dense input costs no more
            X = X.toarray()
        tree_range = self._tree_range(iteration_range)
        self._set_threads()
        if interactions:
            return shap.predict_interactions(self, X, bm, tree_range)
        return shap.predict_contributions(self, X, bm, tree_range, approx)

    # -- introspection ------------------------------------------------------------------------
    def get_dump(self, with_stats: bool = False, dump_format: str = "text") -> list[str]:
        """One string per tree: XGBoost-style indented text, or JSON (``dump_format="json"``)."""
        if dump_format == "json":
            return [json.dumps(t.to_dict()) for t in self.trees]
        if dump_format != "text":
            raise ValueError(f"dump_format must be 'text' or 'json', got {dump_format!r}")
        return [t.dump(self.feature_names, with_stats) for t in self.trees]

    def feature_importance(self, importance_type: str = "gain") -> np.ndarray:
        """float64 (n_features,): total split gain ("gain") or number of splits ("split"), as
        LightGBM's ``feature_importance``; `get_score` has XGBoost's types."""
        if importance_type not in ("gain", "split"):
            raise ValueError(f"importance_type must be 'gain' or 'split', got "
                             f"{importance_type!r}")
        out = np.zeros(self.n_features)
        for t in self.trees:
            feats, gains = t.split_features_and_gains()
            np.add.at(out, feats, gains if importance_type == "gain" else 1.0)
        return out

    def get_score(self, importance_type: str = "gain") -> dict[str, float]:
        """Importance by feature name for features used in at least one split, with XGBoost's
        meanings: ``weight`` (number of splits), ``gain`` / ``cover`` (average loss reduction
        / cover per split), ``total_gain`` / ``total_cover`` (their sums); see
        `histboost.explain.importance`. (`feature_importance` keeps LightGBM's meanings:
        ``gain`` there is the total.)"""
        from .explain.importance import importance
        imp = importance(self.trees, self.n_features, importance_type)
        used = importance(self.trees, self.n_features, "weight") > 0
        return {n: float(v) for n, v, u in zip(self.feature_names, imp, used, strict=True) if u}

    # -- serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "histboost_version": __version__,
            "learner": {
                "objective": self.objective_name,
                "num_class": self.num_class,
                "trees_per_round": self.trees_per_round,
                "base_margin": self.base_margin.tolist(),
                "n_features": self.n_features,
                "feature_names": self.feature_names,
                "best_iteration": self.best_iteration,
                "best_score": self.best_score,
                "params": self.params,
                **({} if self.categorical is None
                   else {"categorical": self.categorical.to_dict()}),
            },
            "trees": [t.to_dict() for t in self.trees],
        }

    def save_raw(self) -> bytes:
        """The model as UTF-8 JSON bytes."""
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    def save_model(self, path: str | os.PathLike, format: str = "histboost") -> None:
        """Write the model as JSON, atomically (see `histboost._files.atomic_write`: a new
        file gets the umask's permissions, an overwrite keeps the file's, a symlink is
        followed). ``format="xgboost"`` writes an XGBoost JSON model instead (see
        `histboost.exports`), which this class does not load back."""
        if format == "xgboost":
            if self.categorical is not None:
                raise ValueError("a model with categorical features cannot be written as an "
                                 "XGBoost model (its features are computed from raw values "
                                 "XGBoost does not see); save it as format='histboost'")
            from .exports import xgboost_json_bytes
            atomic_write(path, xgboost_json_bytes(self))
        elif format == "histboost":
            atomic_write(path, self.save_raw())
        else:
            raise ValueError(f"format must be 'histboost' or 'xgboost', got {format!r}")

    def trees_to_dataframe(self) -> Any:
        """pandas DataFrame of every node, XGBoost's columns (see
        `histboost.exports.trees_to_dataframe`)."""
        from .exports import trees_to_dataframe
        return trees_to_dataframe(self)

    def load_model(self, source: str | os.PathLike | bytes | bytearray) -> None:
        """Load a model saved by `save_model` (a path) or `save_raw` (bytes)."""
        where = "model bytes"
        if isinstance(source, bytes | bytearray):
            raw = bytes(source)
        else:
            where = os.fspath(source)
            if not os.path.exists(where):
                raise FileNotFoundError(f"model file {where!r} does not exist")
            with open(where, "rb") as f:
                raw = f.read()
        try:
            d = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{where} is not a histboost JSON model: {e}") from None
        except RecursionError:
            raise ValueError(f"{where} is not a histboost JSON model: its JSON is nested too "
                             "deeply") from None
        self._load_dict(d, where)

    def _load_dict(self, d: Any, where: str) -> None:
        """Check every field of a parsed model file, then take it over (a malformed file
        raises ValueError and leaves this Booster as it was)."""
        if not isinstance(d, dict) or d.get("format") != FORMAT_NAME:
            raise ValueError(f"{where} is not a histboost model (no 'format': 'histboost')")
        version = d.get("version")
        if isinstance(version, int) and not isinstance(version, bool) and \
                version > FORMAT_VERSION:
            raise ValueError(f"{where} has model format version {version!r}; this histboost "
                             f"({__version__}) reads versions up to {FORMAT_VERSION}")
        if not (isinstance(version, int) and not isinstance(version, bool) and version >= 1):
            raise ValueError(f"{where} is corrupt: model format version {version!r} is not a "
                             f"version number (1 to {FORMAT_VERSION})")
        try:
            loaded = _parse_model(d)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, UserWarning) as e:
            raise ValueError(f"{where} is a corrupt histboost model: {e}") from None
        for name, value in loaded.items():
            setattr(self, name, value)
        self._device_forest = None
        self._device_categorical = None
        self._objective = None
        self._forest = None
        self._forest_size = -1

    def __repr__(self) -> str:
        return (f"Booster(objective={self.objective_name!r}, rounds={self.num_boosted_rounds()}, "
                f"n_features={self.n_features})")


def _is_sparse(data: Any) -> bool:
    return isinstance(data, SparseMatrix) or (hasattr(data, "tocsr") and hasattr(data, "nnz")) \
        or (isinstance(data, Dataset) and data.is_sparse)


def _number(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v):
        raise ValueError(f"{what} must be a finite number, got {v!r}")
    return float(v)


# floating-point tree fields: predictions must be finite; +-inf thresholds are legitimate
# (a split at the last value bin sends every value left and only missing values right)
_FINITE_TREE_FIELDS = ("value", "leaf_value", "gain", "cover", "level_gain", "leaf_cover")
_THRESHOLD_FIELDS = ("threshold", "level_threshold")


def _parse_model(d: dict[str, Any]) -> dict[str, Any]:
    """The Booster attributes of model dict `d`; raises KeyError / TypeError / ValueError."""
    learner = d["learner"]
    if not isinstance(learner, dict):
        raise TypeError(f"'learner' must be an object, got {type(learner).__name__}")
    objective = learner["objective"]
    if not isinstance(objective, str):
        raise TypeError(f"objective must be a string, got {objective!r}")
    num_class = _as_int(learner["num_class"])
    n_features = _as_int(learner["n_features"])
    if num_class < 1 or n_features < 0:
        raise ValueError(f"num_class {num_class} / n_features {n_features} out of range")
    names = learner["feature_names"]
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
        raise TypeError("feature_names must be a list of strings")
    if len(names) != n_features:
        raise ValueError(f"{len(names)} feature names for {n_features} features")
    if len(set(names)) != len(names):
        dup = next(x for x in names if names.count(x) > 1)
        raise ValueError(f"feature name {dup!r} appears twice")
    k = Booster(objective=objective, num_class=num_class).trees_per_round
    if learner.get("trees_per_round", k) != k:
        raise ValueError(f"trees_per_round is {learner['trees_per_round']!r}, but objective "
                         f"{objective!r} with num_class={num_class} has {k}")
    bm = learner["base_margin"]
    if not isinstance(bm, list) or len(bm) != k:
        raise ValueError(f"base_margin must be a list of {k} numbers, got {bm!r}")
    base_margin = np.array([_number(v, "base_margin") for v in bm], dtype=np.float64)
    params = learner.get("params", {})
    if not isinstance(params, dict):
        raise TypeError(f"params must be an object, got {type(params).__name__}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unknown name means a corrupt file
        parse_params(params)
    if objective != "custom":
        get_objective(objective, num_class)

    raw_trees = d["trees"]
    if not isinstance(raw_trees, list) or not all(isinstance(t, dict) for t in raw_trees):
        raise TypeError("'trees' must be a list of tree objects")
    if len(raw_trees) % k:
        raise ValueError(f"{len(raw_trees)} trees is not a multiple of {k} trees per round")
    trees = []
    for i, raw in enumerate(raw_trees):
        ci = raw.get("class_index", 0)
        if isinstance(ci, bool) or not isinstance(ci, int) or ci != i % k:
            raise ValueError(f"tree {i} has class {ci!r}, expected {i % k}")
        t = Tree.from_dict(raw)
        for name, a in t.arrays.items():
            if a.ndim != 1:
                raise ValueError(f"tree {i} field {name!r} is not a flat list")
            if name in _FINITE_TREE_FIELDS and not np.all(np.isfinite(a)):
                raise ValueError(f"tree {i} field {name!r} holds NaN or infinite values")
            if name in _THRESHOLD_FIELDS and np.any(np.isnan(a)):
                raise ValueError(f"tree {i} field {name!r} holds NaN")
        t.validate(n_features)
        trees.append(t)

    categorical = None
    if learner.get("categorical") is not None:
        from .categorical.model import CategoricalModel

        if not isinstance(learner["categorical"], dict):
            raise TypeError("'categorical' must be an object")
        categorical = CategoricalModel.from_dict(learner["categorical"])
        if categorical.n_features != n_features or categorical.feature_names() != names:
            raise ValueError(f"the categorical part describes {categorical.n_features} "
                             f"features, the model has {n_features}")

    rounds = len(trees) // k
    best_iteration = learner.get("best_iteration")
    if best_iteration is not None:
        best_iteration = _as_int(best_iteration)
        if not 0 <= best_iteration < rounds:
            raise ValueError(f"best_iteration {best_iteration} is outside the model's "
                             f"{rounds} rounds")
    best_score = learner.get("best_score")
    if best_score is not None:
        best_score = _number(best_score, "best_score")
    return {"objective_name": objective, "num_class": num_class, "n_features": n_features,
            "feature_names": names, "base_margin": base_margin, "params": dict(params),
            "trees": trees, "best_iteration": best_iteration, "best_score": best_score,
            "categorical": categorical}
