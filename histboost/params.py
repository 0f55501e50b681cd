"""Training parameters: XGBoost's names, LightGBM aliases, validation.

`parse_params` turns the user's dict into a frozen `TrainParams`. Unknown names produce a
warning naming the closest known parameter (as XGBoost does); invalid values raise
`ValueError` naming the parameter and the accepted range.
"""

from __future__ import annotations

import ast
import difflib
import math
import os
import warnings
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

# LightGBM / scikit-learn spellings mapped to the XGBoost name used internally.
ALIASES: dict[str, str] = {
    "eta": "learning_rate",
    "shrinkage_rate": "learning_rate",
    "lambda": "reg_lambda",
    "lambda_l2": "reg_lambda",
    "l2_regularization": "reg_lambda",
    "alpha": "reg_alpha",
    "lambda_l1": "reg_alpha",
    "min_split_loss": "gamma",
    "min_gain_to_split": "gamma",
    "num_leaves": "max_leaves",
    "max_leaf_nodes": "max_leaves",
    "min_sum_hessian_in_leaf": "min_child_weight",
    "min_child_samples": "min_data_in_leaf",
    "min_samples_leaf": "min_data_in_leaf",
    "bagging_fraction": "subsample",
    "feature_fraction": "colsample_bytree",
    "feature_fraction_bynode": "colsample_bynode",
    "max_bins": "max_bin",
    "random_state": "seed",
    "random_seed": "seed",
    "n_jobs": "nthread",
    "num_threads": "nthread",
    "eval_metric": "eval_metric",
    "metric": "eval_metric",
    "num_classes": "num_class",
    "use_quantized_grad": "quantized_grad",
    "num_grad_quant_bits": "grad_quant_bits",
    "tree_method": "tree_method",
    "verbose": "verbosity",
    "monotone_constraint": "monotone_constraints",
    "mc": "monotone_constraints",
    "interaction_constraint": "interaction_constraints",
    "lambdarank_truncation_level": "lambdarank_num_pair_per_sample",
    "eval_at": "eval_at",
    "ndcg_eval_at": "eval_at",
    "ndcg_at": "eval_at",
    "map_eval_at": "eval_at",
    "map_at": "eval_at",
    "permutation_count": "n_permutations",
}

OBJECTIVES = (
    "reg:squarederror",
    "binary:logistic",
    "binary:logitraw",
    "multi:softprob",
    "multi:softmax",
    "reg:absoluteerror",
    "reg:pseudohubererror",
    "reg:quantileerror",
    "reg:squaredlogerror",
    "count:poisson",
    "reg:gamma",
    "reg:tweedie",
    "survival:cox",
    "survival:aft",
    "rank:pairwise",
    "rank:ndcg",
    "rank:map",
)
RANKING_OBJECTIVES = ("rank:pairwise", "rank:ndcg", "rank:map")
OBJECTIVE_ALIASES = {
    "regression": "reg:squarederror",
    "l2": "reg:squarederror",
    "mse": "reg:squarederror",
    "reg:linear": "reg:squarederror",
    "binary": "binary:logistic",
    "multiclass": "multi:softprob",
    "softmax": "multi:softmax",
    "l1": "reg:absoluteerror",
    "mae": "reg:absoluteerror",
    "regression_l1": "reg:absoluteerror",
    "quantile": "reg:quantileerror",
    "poisson": "count:poisson",
    "gamma": "reg:gamma",
    "tweedie": "reg:tweedie",
    "lambdarank": "rank:ndcg",
}
# max_bin counts the missing-value slot: 2 would leave one value bin, so no split is possible
MIN_MAX_BIN = 3
GROW_POLICIES = ("depthwise", "lossguide", "oblivious")
AFT_DISTRIBUTIONS = ("normal", "logistic", "extreme")
GROW_POLICY_ALIASES = {"leafwise": "lossguide", "symmetric": "oblivious", "levelwise": "depthwise"}


@dataclass(frozen=True)
class TrainParams:
    """Validated training parameters (XGBoost names; see `ALIASES` for accepted spellings)."""

    objective: str = "reg:squarederror"
    num_class: int = 1
    learning_rate: float = 0.3
    max_depth: int = 6
    max_leaves: int = 0
    grow_policy: str = "depthwise"
    reg_lambda: float = 1.0
    reg_alpha: float = 0.0
    gamma: float = 0.0
    min_child_weight: float = 1.0
    min_data_in_leaf: int = 0
    max_delta_step: float = 0.0
    subsample: float = 1.0
    colsample_bytree: float = 1.0
    colsample_bylevel: float = 1.0
    colsample_bynode: float = 1.0
    max_bin: int = 256
    base_score: float | None = None
    seed: int = 0
    nthread: int = 0
    device: str = "cpu"
    quantized_grad: bool = False
    grad_quant_bits: int = 8
    eval_metric: tuple[str, ...] = ()
    disable_default_eval_metric: bool = False
    verbosity: int = 1
    tree_method: str = "hist"
    tree_learner: str = "data"
    huber_slope: float = 1.0
    quantile_alpha: float = 0.5
    tweedie_variance_power: float = 1.5
    # survival:aft: the law of the noise of log(time) ("normal", "logistic", "extreme") and
    # its scale
    aft_loss_distribution: str = "normal"
    aft_loss_distribution_scale: float = 1.0
    # tuple of -1/0/1 per feature, or dict feature name -> -1/0/1 (tree/constraints.py)
    monotone_constraints: tuple | dict = ()
    # tuple of tuples of feature indices or names
    interaction_constraints: tuple = ()
    scale_pos_weight: float = 1.0  # binary objectives: the gradients of label-1 rows scaled
    # column sampling weights, one per feature (() : uniform); XGBoost's feature_weights
    feature_weights: tuple = ()
    # learning to rank (XGBoost's names; docs/ranking.md)
    lambdarank_pair_method: str = "topk"  # "topk" or "mean"
    # topk: the truncation (default 32); mean: pairs per document (default 1)
    lambdarank_num_pair_per_sample: int = 32
    lambdarank_normalization: bool = True
    lambdarank_score_normalization: bool = True
    ndcg_exp_gain: bool = True
    label_gain: tuple = ()  # LightGBM's NDCG gain per integer label (() : 2**label - 1)
    sigmoid: float = 1.0  # LightGBM's scale of the pair sigmoid (ranking objectives)
    eval_at: tuple = ()  # LightGBM's cut-offs of the ndcg / map metrics
    # categorical features (docs/categorical.md): target statistic priors (a, b), bins of each
    # statistic, regression label borders (0: the mean), permutations, one-hot threshold,
    # features per combination
    ctr_priors: tuple = ((0.0, 1.0), (0.5, 0.5), (1.0, 0.0))
    ctr_border_count: int = 15
    ctr_target_borders: int = 1
    n_permutations: int = 4
    one_hot_max_size: int = 2
    max_ctr_complexity: int = 1

    @property
    def n_threads(self) -> int:
        """Number of threads kernels may use (``nthread <= 0`` means all cores)."""
        if self.nthread > 0:
            return self.nthread
        return max(1, os.cpu_count() or 1)


    def to_dict(self) -> dict[str, Any]:
        """The parameters as JSON values (tuples as lists, nested too), so a model's params
        are the same before and after a save and load."""
        def plain(v: Any) -> Any:
            return [plain(x) for x in v] if isinstance(v, tuple | list) else v

        return {f.name: plain(getattr(self, f.name)) for f in fields(self)}


_KNOWN = {f.name for f in fields(TrainParams)}
# Accepted for compatibility with XGBoost scripts; they do not change histboost's behaviour.
_IGNORED = {"validate_parameters", "predictor", "single_precision_histogram", "silent"}

# Parameters of XGBoost / LightGBM that histboost does not implement: a ported script that sets
# one would train a different model than asked for, so it is an error naming the parameter
# (not the "unknown parameter" warning). name: (values that mean the peer's default, i.e.
# what histboost does anyway, accepted silently; what to do instead).
NOT_IMPLEMENTED: dict[str, tuple[tuple[Any, ...], str]] = {
    "is_unbalance": ((False, "false"), "weight the positive rows through Dataset(weight=...)"),
    "booster": (("gbtree",), "histboost grows trees only (no gblinear / dart)"),
    "boosting": (("gbdt",), "histboost is plain gradient boosting (no dart / goss / rf)"),
    "boosting_type": (("gbdt",), "histboost is plain gradient boosting (no dart / goss / rf)"),
    "num_parallel_tree": ((1,), "random forests are not implemented"),
    "sampling_method": (("uniform",), "only uniform row sampling (subsample) is implemented"),
    "multi_strategy": (("one_output_per_tree",), "one tree per output is the only strategy"),
    "updater": ((), "histboost has one tree updater (hist)"),
    "process_type": (("default",), "tree refreshing is not implemented"),
    "refresh_leaf": ((), "tree refreshing is not implemented"),
    "max_cat_to_onehot": ((), "categorical splits are not implemented; encode categories"),
    "max_cat_threshold": ((), "categorical splits are not implemented; encode categories"),
    "categorical_feature": ((), "categorical splits are not implemented; encode categories"),
    "enable_categorical": ((False, "false"), "categorical splits are not implemented"),
    "linear_tree": ((False, "false"), "linear leaves are not implemented"),
    "extra_trees": ((False, "false"), "extremely randomised splits are not implemented"),
    "path_smooth": ((0, 0.0), "path smoothing is not implemented"),
    "bagging_freq": ((1,), "histboost resamples rows (subsample) every round"),
    "pos_bagging_fraction": ((1, 1.0), "class-wise bagging is not implemented"),
    "neg_bagging_fraction": ((1, 1.0), "class-wise bagging is not implemented"),
    "top_rate": ((), "GOSS is not implemented"),
    "other_rate": ((), "GOSS is not implemented"),
    "rate_drop": ((), "DART is not implemented"),
    "drop_rate": ((), "DART is not implemented"),
    "skip_drop": ((), "DART is not implemented"),
    "one_drop": ((), "DART is not implemented"),
    "max_bin_by_feature": ((), "one max_bin for every feature"),
    "forcedsplits_filename": ((), "forced splits are not implemented"),
    "monotone_constraints_method": (("basic",), "histboost implements XGBoost's monotone "
                                    "constraints (LightGBM's 'basic' method) only"),
    "monotone_penalty": ((0, 0.0), "monotone penalties are not implemented"),
    "feature_penalty": ((), "feature penalties are not implemented"),
    "feature_contri": ((), "feature penalties are not implemented"),
    "cegb_tradeoff": ((1, 1.0), "cost-efficient gradient boosting is not implemented"),
    "cegb_penalty_split": ((0, 0.0), "cost-efficient gradient boosting is not implemented"),
    "cat_smooth": ((), "categorical splits are not implemented"),
    "cat_l2": ((), "categorical splits are not implemented"),
    "min_data_per_group": ((), "categorical splits are not implemented"),
    "fair_c": ((), "the fair loss is not implemented"),
    "poisson_max_delta_step": ((), "set max_delta_step instead (XGBoost's spelling)"),
    "lambdarank_unbiased": ((False, "false", 0), "position-debiased LambdaMART is not "
                            "implemented"),
    "lambdarank_bias_norm": ((1, 1.0), "position-debiased LambdaMART is not implemented"),
    "lambdarank_position_bias_regularization": ((0, 0.0), "position-debiased LambdaMART is "
                                                "not implemented"),
}


def _check_not_implemented(raw_name: str, value: Any) -> None:
    """ValueError naming a peer parameter histboost does not implement (unless its value is
    the peer's default)."""
    accepted, hint = NOT_IMPLEMENTED[raw_name]
    try:
        if any(value == a and isinstance(value, bool) == isinstance(a, bool)
               for a in accepted):
            return
    except (TypeError, ValueError):  # arrays compare elementwise
        pass
    if isinstance(value, str) and value.lower() in [str(a).lower() for a in accepted]:
        return
    raise ValueError(f"parameter {raw_name!r} is not implemented by histboost ({hint}); "
                     "remove it, or the model would differ from the one XGBoost / LightGBM "
                     "trains")


def _suggest(name: str) -> str:
    close = difflib.get_close_matches(name, sorted(_KNOWN | set(ALIASES)), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise ValueError(f"parameter {name!r} must be a boolean, got {value!r}")


def _coerce(name: str, value: Any, kind: type) -> Any:
    if isinstance(value, bool) and name != "verbosity":  # verbose=True is a common spelling
        raise ValueError(f"parameter {name!r} must be a {kind.__name__}, got {value!r}")
    try:
        if kind is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if kind is float:
            return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"parameter {name!r} must be a {kind.__name__}, got {value!r}") from None
    return value


def _number_list(name: str, value: Any, kind: type) -> tuple:
    """A list of numbers given as a list, an array, one number or a comma-separated string
    (LightGBM's config files: ``label_gain=0,1,3,7``), as a tuple of `kind`."""
    if isinstance(value, str):
        value = [v for v in value.replace("[", "").replace("]", "").split(",") if v.strip()]
    try:
        items = np.asarray(value, dtype=object).ravel().tolist()
        return tuple(_coerce(name, float(v) if isinstance(v, str) else v, kind)
                     for v in items)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a list of {kind.__name__}s, got {value!r}") \
            from None


def parse_params(params: dict[str, Any] | None) -> TrainParams:
    """Validate a parameter dict and return `TrainParams`.

    Raises ValueError for invalid values, TypeError if `params` is not a mapping, and warns
    (UserWarning) about unknown names with the closest known spelling.
    """
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict, got {type(params).__name__}")
    values: dict[str, Any] = {}
    lightgbm_norm = None
    for raw_name, value in params.items():
        name = ALIASES.get(raw_name, raw_name)
        if name in _IGNORED:
            continue
        if raw_name == "lambdarank_norm":  # LightGBM: both of XGBoost's normalisations
            lightgbm_norm = _as_bool(raw_name, value)
            continue
        if raw_name in NOT_IMPLEMENTED:
            _check_not_implemented(raw_name, value)
            continue
        if name not in _KNOWN:
            warnings.warn(f"unknown parameter {raw_name!r} is ignored{_suggest(raw_name)}",
                          UserWarning, stacklevel=3)
            continue
        if name in values:
            raise ValueError(f"parameter {name!r} given twice (as {raw_name!r} and an alias)")
        values[name] = value

    if lightgbm_norm is not None:
        for name in ("lambdarank_normalization", "lambdarank_score_normalization"):
            values.setdefault(name, lightgbm_norm)
    ints = ("num_class", "max_depth", "max_leaves", "min_data_in_leaf", "max_bin", "seed",
            "nthread", "grad_quant_bits", "verbosity", "lambdarank_num_pair_per_sample",
            "ctr_border_count", "ctr_target_borders", "n_permutations", "one_hot_max_size",
            "max_ctr_complexity")
    floats = ("learning_rate", "reg_lambda", "reg_alpha", "gamma", "min_child_weight",
              "max_delta_step", "subsample", "colsample_bytree", "colsample_bylevel",
              "colsample_bynode", "huber_slope", "quantile_alpha", "tweedie_variance_power",
              "scale_pos_weight", "aft_loss_distribution_scale", "sigmoid")
    qa = values.get("quantile_alpha")
    if isinstance(qa, list | tuple | np.ndarray):
        if len(qa) != 1:
            raise ValueError(f"quantile_alpha={list(qa)!r}: histboost fits one quantile per "
                             "model; train one model per quantile")
        values["quantile_alpha"] = qa[0]
    for name in ints:
        if name in values:
            values[name] = _coerce(name, values[name], int)
    for name in floats:
        if name in values:
            values[name] = _coerce(name, values[name], float)
    if values.get("base_score") is not None:
        values["base_score"] = _coerce("base_score", values["base_score"], float)
    if "aft_loss_distribution" in values:
        values["aft_loss_distribution"] = str(values["aft_loss_distribution"])
    if "quantized_grad" in values:
        values["quantized_grad"] = _as_bool("quantized_grad", values["quantized_grad"])
    for name in ("disable_default_eval_metric", "lambdarank_normalization",
                 "lambdarank_score_normalization", "ndcg_exp_gain"):
        if name in values:
            values[name] = _as_bool(name, values[name])
    if "lambdarank_num_pair_per_sample" in values and values[
            "lambdarank_num_pair_per_sample"] < 1:
        raise ValueError("lambdarank_num_pair_per_sample (lambdarank_truncation_level) must "
                         f"be >= 1, got {values['lambdarank_num_pair_per_sample']}")
    method = str(values.get("lambdarank_pair_method", "topk")).lower()
    if method not in ("topk", "mean"):
        raise ValueError("lambdarank_pair_method must be 'topk' or 'mean', got "
                         f"{values['lambdarank_pair_method']!r}")
    values["lambdarank_pair_method"] = method
    # XGBoost's defaults: the top 32 positions, or 1 pair per document
    values.setdefault("lambdarank_num_pair_per_sample", 32 if method == "topk" else 1)
    if "label_gain" in values:
        values["label_gain"] = _number_list("label_gain", values["label_gain"], float)
        if not all(math.isfinite(v) and v >= 0 for v in values["label_gain"]):
            raise ValueError(f"label_gain must be finite and >= 0, got {values['label_gain']}")
    if "eval_at" in values:
        values["eval_at"] = _number_list("eval_at", values["eval_at"], int)
        if not all(k >= 1 for k in values["eval_at"]):
            raise ValueError(f"eval_at must be positive integers, got {values['eval_at']}")

    objective = values.get("objective", "reg:squarederror")
    if callable(objective):
        raise TypeError("pass a custom objective as train(..., obj=callable), not in params")
    objective = OBJECTIVE_ALIASES.get(str(objective), str(objective))
    if objective not in OBJECTIVES:
        close = difflib.get_close_matches(objective, OBJECTIVES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown objective {objective!r}{hint}; choose from {OBJECTIVES}")
    values["objective"] = objective
    if objective == "count:poisson" and "max_delta_step" not in values:
        values["max_delta_step"] = 0.7  # XGBoost's default for Poisson regression

    policy = str(values.get("grow_policy", "depthwise")).lower()
    policy = GROW_POLICY_ALIASES.get(policy, policy)
    if policy not in GROW_POLICIES:
        raise ValueError(f"grow_policy must be one of {GROW_POLICIES}, got {policy!r}")
    values["grow_policy"] = policy

    metric = values.get("eval_metric", ())
    if isinstance(metric, str):
        metric = (metric,)
    values["eval_metric"] = tuple(str(m) for m in metric)

    device = str(values.get("device", "cpu")).lower()
    if device.startswith("gpu"):
        device = "cuda" + device[3:]
    if not (device == "cpu" or device == "cuda" or (
            device.startswith("cuda:") and device[5:].isdigit())):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    tree_method = str(values.get("tree_method", "hist"))
    if tree_method == "gpu_hist":  # XGBoost < 2.0's spelling of tree_method=hist, device=cuda
        if "device" in values and device == "cpu":
            raise ValueError("tree_method='gpu_hist' trains on the GPU but device='cpu'; drop "
                             "one of them (XGBoost 2+ spells it tree_method='hist', "
                             "device='cuda')")
        if device == "cpu":
            device = "cuda"
    elif tree_method not in ("hist", "auto"):
        raise ValueError(f"tree_method must be 'hist' (or 'auto', or 'gpu_hist' for the GPU): "
                         f"histboost only builds histograms, got {tree_method!r}")
    values["device"] = device
    values["tree_method"] = "hist"

    learner = str(values.get("tree_learner", "data")).lower()
    if learner in ("feature", "feature_parallel", "voting", "voting_parallel"):
        raise ValueError(f"tree_learner={learner!r} (LightGBM) is not implemented; histboost "
                         "has 'data' (histogram allreduce) and 'reduce_scatter' (LightGBM's "
                         "data-parallel learner)")
    learner = {"serial": "data", "data_parallel": "data"}.get(learner, learner)
    if learner not in ("data", "reduce_scatter"):
        raise ValueError(f"tree_learner must be 'data' or 'reduce_scatter', got {learner!r}")
    values["tree_learner"] = learner

    from .tree.constraints import parse_interaction, parse_monotone

    if "monotone_constraints" in values:
        values["monotone_constraints"] = parse_monotone(values["monotone_constraints"])
    if isinstance(values.get("feature_weights"), str):  # "[1, 2, 0.5]" (CLI, config files)
        try:
            values["feature_weights"] = ast.literal_eval(values["feature_weights"].strip())
        except (ValueError, SyntaxError):
            raise ValueError("feature_weights must be a list of numbers, one per feature, "
                             f"got {values['feature_weights']!r}") from None
    if values.get("feature_weights") is not None and len(values.get("feature_weights", ())):
        try:
            fw = tuple(float(v) for v in np.asarray(values["feature_weights"]).ravel())
        except (TypeError, ValueError):
            raise ValueError("feature_weights must be a list of numbers, one per feature, "
                             f"got {values['feature_weights']!r}") from None
        if not all(math.isfinite(v) and v >= 0 for v in fw) or not any(v > 0 for v in fw):
            raise ValueError("feature_weights must be finite and >= 0, some of them > 0")
        values["feature_weights"] = fw
    else:
        values.pop("feature_weights", None)
    if "interaction_constraints" in values:
        values["interaction_constraints"] = parse_interaction(values["interaction_constraints"])
    if "ctr_priors" in values:
        from .categorical.settings import check_priors

        priors = values["ctr_priors"]
        if isinstance(priors, str):  # "[(0, 1), (0.5, 0.5)]" (CLI, config files)
            try:
                priors = ast.literal_eval(priors.strip())
            except (ValueError, SyntaxError):
                raise ValueError(f"ctr_priors must be a list of (a, b) pairs, got "
                                 f"{priors!r}") from None
        values["ctr_priors"] = check_priors(priors)

    p = TrainParams(**values)
    _check_ranges(p)
    return p


def _check_ranges(p: TrainParams) -> None:
    def need(cond: bool, msg: str) -> None:
        if not cond:
            raise ValueError(msg)

    # inf passes every ">= 0" check below but gives NaN models (inf * 0) or constant ones
    for name in ("learning_rate", "reg_lambda", "reg_alpha", "gamma", "min_child_weight",
                 "max_delta_step", "base_score"):
        v = getattr(p, name)
        need(v is None or math.isfinite(v), f"{name} must be a finite number, got {v}")
    need(p.learning_rate > 0, f"learning_rate must be > 0, got {p.learning_rate}")
    need(p.max_depth >= 0, f"max_depth must be >= 0 (0 = unlimited), got {p.max_depth}")
    need(p.max_leaves >= 0, f"max_leaves must be >= 0 (0 = unlimited), got {p.max_leaves}")
    need(p.max_leaves != 1, "max_leaves must be 0 (unlimited) or >= 2")
    if p.grow_policy == "lossguide":
        need(p.max_depth > 0 or p.max_leaves > 0,
             "grow_policy='lossguide' needs max_leaves > 0 or max_depth > 0")
    if p.grow_policy in ("depthwise", "oblivious"):
        need(p.max_depth > 0, f"grow_policy={p.grow_policy!r} needs max_depth > 0")
    if p.grow_policy == "oblivious":
        need(p.max_depth <= 16, "oblivious trees support max_depth <= 16")
    need(p.reg_lambda >= 0, f"reg_lambda must be >= 0, got {p.reg_lambda}")
    need(p.reg_alpha >= 0, f"reg_alpha must be >= 0, got {p.reg_alpha}")
    need(p.gamma >= 0, f"gamma (min_split_loss) must be >= 0, got {p.gamma}")
    need(p.min_child_weight >= 0, f"min_child_weight must be >= 0, got {p.min_child_weight}")
    need(p.min_data_in_leaf >= 0, f"min_data_in_leaf must be >= 0, got {p.min_data_in_leaf}")
    need(p.max_delta_step >= 0, f"max_delta_step must be >= 0, got {p.max_delta_step}")
    for name in ("subsample", "colsample_bytree", "colsample_bylevel", "colsample_bynode"):
        v = getattr(p, name)
        need(0 < v <= 1, f"{name} must be in (0, 1], got {v}")
    need(MIN_MAX_BIN <= p.max_bin <= 65536, f"max_bin must be in [{MIN_MAX_BIN}, 65536], got "
         f"{p.max_bin} (it counts the missing-value slot: 3 gives two value bins, the fewest "
         "a split needs)")
    # b bits hold |values| up to 2**(b-1) - 1: one bit would round every gradient to 0
    need(2 <= p.grad_quant_bits <= 24,
         f"grad_quant_bits must be in [2, 24], got {p.grad_quant_bits}")
    need(math.isfinite(p.huber_slope) and p.huber_slope > 0,
         f"huber_slope must be > 0, got {p.huber_slope}")
    need(0 < p.quantile_alpha < 1, f"quantile_alpha must be in (0, 1), got {p.quantile_alpha}")
    need(1 <= p.tweedie_variance_power < 2,
         f"tweedie_variance_power must be in [1, 2), got {p.tweedie_variance_power}")
    need(p.aft_loss_distribution in AFT_DISTRIBUTIONS,
         f"aft_loss_distribution must be one of {AFT_DISTRIBUTIONS}, got "
         f"{p.aft_loss_distribution!r}")
    need(math.isfinite(p.aft_loss_distribution_scale) and p.aft_loss_distribution_scale > 0,
         f"aft_loss_distribution_scale must be > 0, got {p.aft_loss_distribution_scale}")
    need(math.isfinite(p.scale_pos_weight) and p.scale_pos_weight > 0,
         f"scale_pos_weight must be > 0, got {p.scale_pos_weight}")
    if p.scale_pos_weight != 1.0:
        need(p.objective in ("binary:logistic", "binary:logitraw"),
             f"scale_pos_weight applies to binary:logistic / binary:logitraw, not "
             f"{p.objective!r}; weight rows through Dataset(weight=...)")
    need(math.isfinite(p.sigmoid) and p.sigmoid > 0, f"sigmoid must be > 0, got {p.sigmoid}")
    if p.objective not in RANKING_OBJECTIVES:
        need(p.sigmoid == 1.0, f"sigmoid scales the pairs of the ranking objectives "
             f"{RANKING_OBJECTIVES}; it is not implemented for {p.objective!r}")
    need(not (p.label_gain and not p.ndcg_exp_gain),
         "label_gain and ndcg_exp_gain=False both set the NDCG gain; give one of them")
    need(1 <= p.ctr_border_count <= 254,
         f"ctr_border_count must be in [1, 254], got {p.ctr_border_count}")
    need(0 <= p.ctr_target_borders <= 64,
         f"ctr_target_borders must be in [0, 64] (0: the label mean), got "
         f"{p.ctr_target_borders}")
    need(1 <= p.n_permutations <= 1024,
         f"n_permutations must be in [1, 1024], got {p.n_permutations}")
    need(p.one_hot_max_size >= 0, f"one_hot_max_size must be >= 0, got {p.one_hot_max_size}")
    need(p.max_ctr_complexity >= 1, f"max_ctr_complexity must be >= 1 (1: no feature "
         f"combinations), got {p.max_ctr_complexity}")
    mono = p.monotone_constraints
    if any(mono.values() if isinstance(mono, dict) else mono):
        need(p.objective not in ("reg:absoluteerror", "reg:quantileerror"),
             f"monotone_constraints with {p.objective!r} are not implemented (its leaf refresh "
             "would not keep the leaves' bounds)")
    if p.objective.startswith("multi:"):
        need(p.num_class >= 2, f"objective {p.objective!r} needs num_class >= 2, "
             f"got {p.num_class}")
    if p.base_score is not None and p.objective.startswith("binary:"):
        # a probability for both: logitraw only skips the sigmoid at prediction
        need(0 < p.base_score < 1, f"base_score must be in (0, 1) for {p.objective}, "
             f"got {p.base_score}")
