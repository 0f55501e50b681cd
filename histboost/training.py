"""`train()`: the boosting loop.

Per round: gradients from the objective, optional row subsampling and gradient quantisation,
one tree per output grown by `TreeGrower` on the kernel backend, the training margin updated
straight from the final row partition, eval-set margins updated incrementally, metrics logged,
callbacks run. The tree-level algorithm lives in `histboost.tree.grower`; the hot loops live in
`histboost.kernels`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .booster import Booster
from .callback import EarlyStopping, EvalsLog, EvaluationMonitor, TrainingCallback
from .data.dataset import Dataset
from .kernels.backend import make_backend
from .kernels.cpu.sampling import sample_rows
from .metrics import INTERVAL, MULTICLASS, RANKING, check_metrics_defined, get_metric, ndcg_gain
from .objectives import CustomObjective, get_objective
from .objectives.base import HostObjective, Objective
from .objectives.classification import sigmoid, softmax
from .objectives.leaves import refresh_leaves
from .params import ALIASES, TrainParams, parse_params
from .timer import PhaseTimer
from .tree.constraints import TreeConstraints
from .tree.grower import TreeGrower
from .tree.predictor import PackedForest
from .tree.quantize import Quantisation, make_quantisation, round_key, sample_key
from .tree.split import regularisation_vector

CustomObjectiveFn = Callable[[np.ndarray, Dataset], tuple[Any, Any]]
CustomMetricFn = Callable[[np.ndarray, Dataset], Any]


def _metric_key(name: str, p: TrainParams) -> str:
    """The metric evaluated for a logged name: metrics with a parameter take it from the
    training parameters, as XGBoost's do (``quantile``: quantile_alpha, ``mphe``:
    huber_slope, ``aft-nloglik``: aft_loss_distribution and its scale)."""
    args = {"quantile": repr(p.quantile_alpha), "mphe": repr(p.huber_slope),
            "aft-nloglik": f"{p.aft_loss_distribution}:{p.aft_loss_distribution_scale!r}"}
    return f"{name}@{args[name]}" if name in args else name


def _custom_metric_values(fn: CustomMetricFn, pred: np.ndarray, data: Dataset
                          ) -> list[tuple[str, float]]:
    """(name, value) pairs of a custom metric ``fn(predictions, dataset)`` returning a
    (name, value) pair or a list of them (XGBoost's `custom_metric`)."""
    out = fn(pred, data)
    pairs = out if isinstance(out, list) else [out]
    try:
        return [(str(n), float(v)) for n, v in pairs]
    except (TypeError, ValueError):
        raise TypeError("custom_metric must return (name, value) or a list of such pairs, "
                        f"got {out!r}") from None


def _metrics_at(metrics: list[str], cut_offs: tuple[int, ...]) -> list[str]:
    """LightGBM's ``eval_at``: each plain ``ndcg`` / ``map`` metric becomes one metric per
    cut-off (``ndcg@1``, ``ndcg@3``, ...); the others stay."""
    out = []
    for m in metrics:
        base = m.split("@")[0].rstrip("-")
        if base in ("ndcg", "map") and "@" not in m:
            out.extend(f"{base}@{k}{'-' if m.endswith('-') else ''}" for k in cut_offs)
        else:
            out.append(m)
    if out == metrics:
        raise ValueError(f"eval_at={list(cut_offs)} sets the cut-offs of the ndcg / map "
                         f"metrics, and the metrics are {metrics}; add eval_metric='ndcg'")
    return out


def _check_ranking_set(objective: Objective, metrics: list[str], data: Dataset, name: str,
                       p: TrainParams) -> None:
    """Raise ValueError if a ranking model's evaluation set has no query groups, or if the
    ndcg metrics' gain table (label_gain) does not cover its labels."""
    if getattr(objective, "needs_groups", False) and data.group is None:
        raise ValueError(f"eval set {name!r} has no query groups, which objective "
                         f"{objective.name!r} evaluates per query: pass Dataset(..., "
                         "group=sizes) or Dataset(..., qid=query ids)")
    if p.label_gain and any(m in RANKING and m.startswith("ndcg") for m in metrics):
        try:
            ndcg_gain(data.label, p.label_gain)
        except ValueError as e:
            raise ValueError(f"eval set {name!r}: {e}") from None


def _max_bin_given(params: dict[str, Any]) -> bool:
    return any(ALIASES.get(k, k) == "max_bin" for k in params)


def _metric_input(objective: Objective, margin: np.ndarray, metric: str) -> np.ndarray:
    """What a metric scores: probabilities for classification, the objective's predictions
    (exp(margin) for log-link objectives), margins for a custom objective and for the
    survival:aft metrics (as XGBoost's)."""
    if objective.name.startswith("binary:"):
        return sigmoid(margin[:, 0])
    if objective.name.startswith("multi:"):
        return softmax(margin)
    if metric in MULTICLASS or margin.shape[1] != 1:
        return margin
    if metric in INTERVAL:
        return margin[:, 0]
    return objective.transform(margin)


def _labels(data: Dataset, objective: Objective, what: str) -> np.ndarray:
    """The labels `objective` scores on `data` (`Objective.labels`); ValueError naming the
    set (`what`) when it has none."""
    y = objective.labels(data)
    if y is None:
        hint = f": {objective.name} needs {objective.label_hint}" if objective.label_hint \
            else ""
        raise ValueError(f"{what} has no label{hint}")
    return y


class _EvalSet:
    """An evaluation set with its labels, running margins and the matrix the trees read (the
    raw features, or the extended matrix of a model with categorical features)."""

    def __init__(self, data: Dataset, name: str, labels: np.ndarray, booster: Booster) -> None:
        self.data = data
        self.name = name
        self.labels = labels
        self.hashes = None  # categorical hashes, to add combination features later
        if booster.categorical is not None:
            numeric, self.hashes = booster.categorical.split_input(data)
            self.X = booster.categorical.extend(numeric, self.hashes)
        else:
            self.X = booster._matrix(data)[0]
        self.margin = booster.predict_margin(self.X, data.base_margin)

    def add_features(self, booster: Booster) -> None:
        """Append the model's derived features added since (combinations)."""
        cat = booster.categorical
        if cat is not None and self.hashes is not None and self.X.shape[1] < cat.n_features:
            new = cat.derived_values(self.hashes, range(self.X.shape[1] - cat.n_numeric,
                                                        len(cat.derived)))
            self.X = np.ascontiguousarray(np.hstack([self.X, new]))


def _check_categorical(p: TrainParams, objective: Objective, xgb_model: Any) -> None:
    """Raise for what categorical features do not support yet."""
    if xgb_model is not None:
        raise ValueError("continuing training (xgb_model) with categorical features is not "
                         "supported yet")
    if objective.leaf_alpha is not None:
        raise ValueError(f"objective {objective.name!r} (leaf refresh) with categorical features "
                         "is not supported yet")
    mono = p.monotone_constraints
    if any(mono.values() if isinstance(mono, dict) else mono) or p.interaction_constraints \
            or p.feature_weights:
        raise ValueError("monotone_constraints, interaction_constraints and feature_weights "
                         "with categorical features are not supported yet")


def train(params: dict[str, Any], dtrain: Dataset, num_boost_round: int = 100,
          evals: Sequence[tuple[Dataset, str]] = (), obj: CustomObjectiveFn | None = None,
          early_stopping_rounds: int | None = None, evals_result: EvalsLog | None = None,
          verbose_eval: bool | int = True, callbacks: Sequence[TrainingCallback] | None = None,
          xgb_model: Booster | str | None = None, comm: Any = None,
          custom_metric: CustomMetricFn | None = None, maximize: bool | None = None
          ) -> Booster:
    """Train a gradient-boosted tree model.

    Parameters
    ----------
    params : XGBoost-style parameters (see `histboost.params.TrainParams`).
    dtrain : training `Dataset` with a label (survival:aft: interval labels,
        ``label_lower_bound`` / ``label_upper_bound``).
    num_boost_round : boosting rounds (one tree per output and round).
    evals : (Dataset, name) pairs evaluated after every round.
    obj : custom objective ``obj(margins, dtrain) -> (grad, hess)``.
    early_stopping_rounds : stop when the last metric on the last eval set has not improved for
        this many rounds; the Booster's ``best_iteration`` / ``best_score`` are set.
    evals_result : dict filled with ``{name: {metric: [value per round]}}``.
    verbose_eval : print eval results every round (True) or every N rounds (int).
    callbacks : `TrainingCallback` objects. A callback may change the learning rate between
        rounds with ``model.set_param("learning_rate", value)`` (see
        `histboost.callback.LearningRateScheduler`); other parameters are fixed for the run.
    xgb_model : a Booster (or model file) to continue training from.
    custom_metric : ``custom_metric(predictions, dataset) -> (name, value)`` (or a list of
        pairs) evaluated on every eval set after the built-in metrics; predictions as
        ``Booster.predict`` gives them (raw margins with a custom objective).
    maximize : early stopping direction of a custom metric (default: minimise; built-in
        metrics know theirs).
    comm : a `histboost.collective.Communicator` (e.g. ``histboost.collective.init()``) for
        data-parallel training (docs/distributed.md): each rank passes its own rows (and its
        part of each evaluation set); the rows of all ranks in rank order (or by
        ``Dataset(row_ids=...)``) are the whole data set. Cuts come from all ranks' rows as
        one process would compute them (unless every rank gives the same ``reference=``);
        metrics and early stopping are global; every rank returns the same model. With
        ``quantized_grad=True`` it equals the one-process model on all rows (whenever the
        intercept does: ``base_score`` given, or label sums exact in float64);
        ``tree_learner`` picks histogram allreduce ("data") or reduce-scatter.
    """
    evals = list(evals or ())
    leader = comm is None or comm.rank == 0  # the rank that prints
    cbs: list[TrainingCallback] = list(callbacks or ())
    if verbose_eval and evals and leader:
        cbs.append(EvaluationMonitor(period=int(verbose_eval)))
    if early_stopping_rounds is not None:
        if not evals:
            raise ValueError("early_stopping_rounds needs at least one set in evals")
        cbs.append(EarlyStopping(early_stopping_rounds, maximize=maximize))
    run = _Training(params, dtrain, num_boost_round, evals, obj, xgb_model, comm,
                    custom_metric, early_stopping_rounds,
                    evals_result if evals_result is not None else {})

    booster = run.booster
    try:
        for cb in cbs:
            booster = cb.before_training(booster)
        run.booster = booster
        for epoch in range(run.start_round, run.start_round + num_boost_round):
            if any([cb.before_iteration(booster, epoch, run.history) for cb in cbs]):
                break
            run.boost_round(epoch)
            run.evaluate()
            if any([cb.after_iteration(booster, epoch, run.history) for cb in cbs]):
                break
    finally:
        run.release()
    for cb in cbs:
        booster = cb.after_training(booster)
    if run.p.verbosity >= 2 and leader:
        print(run.timer.summary(), flush=True)
    booster.timings = dict(run.timer.seconds)
    if run.dist is not None:
        # time spent in the tree's collectives, part of the phases above (not added to them)
        booster.timings["collectives"] = run.backend.wait_seconds
    # bytes this rank passed to collectives, by purpose (distributed training; else None)
    booster.traffic = dict(run.backend.traffic) if run.dist is not None else None
    booster.collective_calls = run.backend.calls if run.dist is not None else None
    return booster


class _Training:
    """The state of one training run: the objective, the kernel backend with the training
    margins, the tree grower, the model being built (`booster`), the evaluation sets and
    their metric log (`history`). `train` runs one; `histboost.cv` one per fold, in lockstep.

    Construction checks the inputs, bins the training data and fits the intercept;
    `boost_round` adds one round of trees, `evaluate` logs the metrics of every evaluation
    set, `release` frees the backend's memory.
    """

    def __init__(self, params: dict[str, Any], dtrain: Dataset, num_boost_round: int,
                 evals: Sequence[tuple[Dataset, str]], obj: CustomObjectiveFn | None,
                 xgb_model: Booster | str | None, comm: Any,
                 custom_metric: CustomMetricFn | None, early_stopping_rounds: int | None,
                 history: EvalsLog) -> None:
        if not isinstance(dtrain, Dataset):
            raise TypeError(f"dtrain must be a histboost.Dataset, got {type(dtrain).__name__}")
        if num_boost_round < 0:
            raise ValueError(f"num_boost_round must be >= 0, got {num_boost_round}")
        raw_params = dict(params or {})
        p = parse_params(raw_params)
        dist = None
        if comm is not None:
            from .distributed import training as dist

            dist.check_supported(p)
            n_threads = dist.prepare_rank(comm, p.nthread)  # the ranks of a host share it
        else:
            n_threads = p.n_threads
        timer = PhaseTimer()
        try:
            if obj is not None and not callable(obj):
                raise TypeError("obj must be callable: obj(preds, dtrain) -> (grad, hess)")
            objective: Objective = (CustomObjective(obj, p.num_class, dtrain) if obj is not None
                                    else get_objective(p.objective, p.num_class, p))
            y, w = _labels(dtrain, objective, "dtrain"), dtrain.weight
            objective.check_label(y)
            if isinstance(objective, HostObjective):
                objective.bind(y, w, dtrain.group)
            if dist is not None:
                dist.check_ranking_weights(objective, w)
            if comm is None and w is not None and not np.any(w > 0):
                raise ValueError("all weights are zero")
            if dtrain.is_sparse and p.device != "cpu" and dist is not None:
                raise ValueError("distributed training of a sparse Dataset runs on the CPU "
                                 f"for now (device={p.device!r} given)")
            evals = list(evals or ())
            eval_labels = []
            for d, name in evals:
                if not isinstance(d, Dataset):
                    raise TypeError(f"evals entries must be (Dataset, name) pairs, got "
                                    f"{type(d).__name__} for {name!r}")
                eval_labels.append(_labels(d, objective, f"eval set {name!r}"))
        except (ValueError, TypeError) as e:
            if dist is None:
                raise
            dist.raise_together(comm, e)
            raise
        n, n_features = dtrain.shape
        row_ids = None
        if dist is not None:
            dist.raise_together(comm, None)
            row_ids = dist.global_row_ids(comm, n, dtrain.row_ids)
            if w is not None and dist.global_set_facts(comm, y, w)[0] <= 0:
                raise ValueError("all weights are zero on every rank")
        with timer("binning"):
            # a GPU backend bins dense rows on the device from the cuts (sparse ones are
            # binned here); with comm, the cuts of all ranks' rows (a collective call)
            dtrain.construct(p.max_bin if _max_bin_given(raw_params) else None,
                             bin_rows=p.device == "cpu" or dtrain.is_sparse, comm=comm)
        mapper = dtrain.bin_mapper
        ctr = None  # categorical features: the derived columns (histboost.categorical)
        if dtrain.categorical is not None:
            if p.device == "cpu":
                from .categorical.training import CtrTrainer
            else:  # statistics on the device (histboost.categorical.cuda)
                from .categorical.cuda import CudaCtrTrainer as CtrTrainer

            _check_categorical(p, objective, xgb_model)
            with timer("binning"):
                ctr = CtrTrainer(dtrain, p, mapper, dtrain.bins, y, objective.name, comm=comm,
                                 row_ids=row_ids)
            mapper = ctr.mapper
        K = objective.n_outputs
        metrics = list(p.eval_metric) or ([] if p.disable_default_eval_metric or obj is not None
                                          else [objective.default_metric])
        if p.eval_at:
            if not p.eval_metric:  # the default metric's cut-offs: ndcg@32 -> ndcg@1, ...
                metrics = [m.split("@")[0] if m in RANKING else m for m in metrics]
            metrics = _metrics_at(metrics, p.eval_at)
        if dist is not None:
            dist.check_same_job(comm, dist.job_description(
                p, n_features, K, num_boost_round, [name for _, name in evals],
                early_stopping_rounds, obj is not None, dist.bin_layout(mapper)))

        intercept = None
        if dist is not None and xgb_model is None and p.base_score is None:
            intercept = dist.global_intercept(comm, objective, y, w)
        w_grad = w  # the weights of the gradients: with scale_pos_weight, positive rows' scaled
        if p.scale_pos_weight != 1.0:
            w_grad = (np.ones(n) if w is None else w) * np.where(y == 1.0, p.scale_pos_weight,
                                                                 1.0)
            if xgb_model is None and p.base_score is None:
                # XGBoost: the intercept is then one Newton step of the weighted loss from
                # margin 0
                intercept = np.array([float(np.sum(w_grad * (y - 0.5)))
                                      / (0.25 * float(np.sum(w_grad)))])
        booster = _initial_booster(xgb_model, p, objective, dtrain, y, w, intercept)
        if ctr is not None:
            booster.set_categorical(ctr.model)
        with timer("predict"):
            if dtrain.base_margin is None and not booster.trees:
                # every row starts at the model's base margin: a read-only broadcast view
                # (a backend copies it; a device one fills its margins without an upload)
                margin = np.broadcast_to(booster.base_margin, (n, K))
            else:
                margin = booster.predict_margin(dtrain.data, dtrain.base_margin)

        if custom_metric is not None and not callable(custom_metric):
            raise TypeError("custom_metric must be callable: custom_metric(preds, dtrain) -> "
                            "(name, value)")
        metric_fns = {m: get_metric(_metric_key(m, p), p.label_gain, p.ndcg_exp_gain)
                      for m in metrics}
        eval_sets = [_EvalSet(d, name, y_e, booster)
                     for (d, name), y_e in zip(evals, eval_labels, strict=True)]
        for es in eval_sets:  # e.g. AUC on one class: raise now, not NaN every round
            w_e = es.data.weight
            _check_ranking_set(objective, metrics, es.data, es.name, p)
            facts = None if dist is None else dist.global_set_facts(comm, es.labels, w_e)
            try:
                check_metrics_defined(metrics, es.labels, w_e, K, es.name, facts,
                                      objective=objective.name)
            except ValueError as e:
                if dist is None:
                    raise
                dist.raise_together(comm, e)
            if dist is not None:
                dist.raise_together(comm, None)
        # custom metrics under comm: each set's rows of all ranks, gathered once
        metric_sets = ([dist.gather_dataset(comm, es.data) for es in eval_sets]
                       if custom_metric is not None and dist is not None else None)
        history.clear()

        with timer("binning"):
            # interval labels (survival:aft) only feed host gradients: the backend holds none
            backend_args = dict(n_threads=n_threads, label=y if y.ndim == 1 else None,
                                weight=w_grad, n_outputs=K, count_rows=p.min_data_in_leaf > 0,
                                raw=dtrain.data if ctr is None else None, mapper=mapper)
            # with categorical features, the matrix with their static columns (uploaded)
            # (a sparse one binned on the host: the device holds its `SparseBins`)
            bins = (ctr.bins if ctr is not None else dtrain.bins
                    if p.device == "cpu" or dtrain.is_sparse else None)
            if dist is None:
                backend = make_backend(p.device, bins, mapper.bin_offsets, **backend_args)
            else:
                backend = dist.make_distributed_backend(
                    comm, p.device, bins, mapper.bin_offsets, tree_learner=p.tree_learner,
                    row_ids=row_ids, **backend_args)
            backend.set_margin(margin)
        if p.verbosity >= 2:  # phase times as printed: device work charged where launched
            timer.sync = backend.synchronize
        try:
            grower = TreeGrower(backend, p, mapper, timer,
                                constraints=TreeConstraints.from_params(
                                    p, n_features, dtrain.feature_names,
                                    regularisation_vector(p)), columns=ctr)
        except BaseException:  # e.g. feature_weights of the wrong length
            backend.release()
            raise

        self.p, self.dist, self.comm, self.timer = p, dist, comm, timer
        self.dtrain, self.y, self.w, self.row_ids = dtrain, y, w, row_ids
        self.objective, self.custom_objective, self.custom_metric = objective, obj, custom_metric
        self.metric_fns, self.eval_sets, self.history = metric_fns, eval_sets, history
        self._metric_sets = metric_sets
        self.backend, self.grower, self.booster = backend, grower, booster
        self.start_round = booster.num_boosted_rounds()
        self._end_round = self.start_round + num_boost_round  # past the run's last round
        self._params = dict(booster.params)  # what the run was set up with
        self._new_trees: list = []  # the last round's trees
        self.ctr = ctr
        # leaf refresh under comm: quantiles over the rows of all ranks
        self._refresh_args = {} if dist is None else {"quantiles": dist.leaf_quantiles(comm)}
        self._trees_grown = 0  # categorical statistics: one permutation per tree, rotating

    def _follow_params(self) -> None:
        """Take up the learning rate a callback set with ``Booster.set_param`` (e.g.
        `LearningRateScheduler`); raise for any other parameter changed mid-run."""
        now = self.booster.params
        changed = sorted(k for k in set(now) | set(self._params)
                         if k != "learning_rate" and now.get(k) != self._params.get(k))
        if changed:
            raise ValueError(f"parameters {changed} changed during training; between rounds "
                             "only learning_rate can change (Booster.set_param)")
        rate = float(now.get("learning_rate", self.p.learning_rate))
        if rate != self.p.learning_rate:
            self.p = dataclasses.replace(self.p, learning_rate=rate)
            self.grower.set_learning_rate(rate)

    def _next_quantise(self, epoch: int) -> Callable[[float, float], Quantisation | None] | None:
        """`Backend.next_round`'s hint for round epoch + 1: the rounding of its tree from its
        gradient bounds (`_rounding`; float trees: None), where that round's
        tree is foreseeable: one output over all rows, gradients of a built-in loss, no leaf
        refresh or categorical columns, and not past the run's last round. Else None.
        Whatever a callback changes before that round (the learning rate, a stop) the
        backend finds in the round's calls."""
        p, objective = self.p, self.objective
        if (epoch + 1 >= self._end_round or objective.n_outputs != 1 or objective.loss is None
                or objective.leaf_alpha is not None or p.subsample < 1.0
                or self.ctr is not None):
            return None
        return self._rounding(epoch + 1, 0)

    def _rounding(self, epoch: int, output: int
                  ) -> Callable[[float, float], Quantisation | None]:
        """The rounding of round `epoch`'s tree of `output` from its gradient bounds
        (max |g|, max |h|): with quantised gradients `make_quantisation` under the tree's
        counter-based key (made here, before the bounds, which may wait for the device);
        float trees: None."""
        p = self.p
        if not p.quantized_grad:
            return lambda g_bound, h_bound: None
        bits, key = p.grad_quant_bits, round_key(p.seed, epoch, output)
        return lambda g_bound, h_bound: make_quantisation(g_bound, h_bound, bits, key)

    def boost_round(self, epoch: int) -> None:
        """Grow round `epoch`'s trees (one per output) and append them to the model."""
        self._follow_params()
        p, backend, timer, objective = self.p, self.backend, self.timer, self.objective
        backend.next_round(self._next_quantise(epoch))
        rng = np.random.default_rng([p.seed & 0xFFFFFFFF, epoch])
        with timer("gradient"):
            if objective.loss is None:
                backend.set_gradients(objective.gradient_pairs(backend.margin(), epoch))
            else:
                backend.compute_gradients(objective.loss)
        rows = None
        if p.subsample < 1.0:
            rows = sample_rows(self.dtrain.num_row(), self.row_ids, sample_key(p.seed, epoch),
                               p.subsample)
        trees = []
        for k in range(objective.n_outputs):
            quantisation = None
            if p.quantized_grad:
                with timer("gradient"):
                    quantisation = self._rounding(epoch, k)(*backend.gradient_bounds(k))
            if self.ctr is not None:
                with timer("binning"):
                    self.ctr.begin_tree(self._trees_grown, backend)
            grown = self.grower.grow(k, rows, quantisation, rng)
            self._trees_grown += 1
            if objective.leaf_alpha is not None:
                with timer("gradient"):
                    grown = refresh_leaves(grown, objective.leaf_alpha, self.dtrain.data,
                                           backend.margin()[:, k], self.y, self.w, rows,
                                           p.learning_rate, **self._refresh_args)
            with timer("predict"):
                backend.update_margin(grown.tree, *grown.margin_leaves(), k)
            # categorical combinations: the model's feature indices
            trees.append(grown.tree if self.ctr is None else self.ctr.finish_tree(grown.tree))
        self.booster.append_round(trees)
        self._new_trees = trees
        if self.ctr is not None and self.booster.n_features != self.ctr.model.n_features:
            self.booster.set_categorical(self.ctr.model)  # combinations were added
            for es in self.eval_sets:
                es.add_features(self.booster)

    def evaluate(self) -> None:
        """Add the new trees to the evaluation sets' margins and append their metrics to
        `history`."""
        objective, obj, dist, comm = self.objective, self.custom_objective, self.dist, self.comm
        with self.timer("eval"):
            new = None  # the round's trees packed, once a set needs them
            for i, es in enumerate(self.eval_sets):
                if es.data is self.dtrain:
                    es.margin = self.backend.margin()
                else:
                    if new is None:
                        new = PackedForest(self._new_trees)
                    new.add_margin(es.X, es.margin)
                log = self.history.setdefault(es.name, {})
                y_e, w_e = es.labels, es.data.weight
                for m, fn in self.metric_fns.items():
                    pred = _metric_input(objective, es.margin, m)
                    if m in RANKING and dist is not None:
                        value = dist.global_ranking_metric(comm, fn, y_e, pred,
                                                           es.data.group)
                    elif m in RANKING:
                        value = fn(y_e, pred, w_e, group=es.data.group)
                    elif dist is None:
                        value = fn(y_e, pred, w_e)
                    else:
                        value = dist.global_metric(comm, _metric_key(m, self.p), fn, y_e, pred,
                                                   w_e)
                    log.setdefault(m, []).append(value)
                if self.custom_metric is not None:
                    K = es.margin.shape[1]
                    pred = (es.margin[:, 0].copy() if obj is not None and K == 1
                            else es.margin.copy() if obj is not None
                            else _metric_input(objective, es.margin, ""))
                    data = es.data
                    if self._metric_sets is not None:  # the set of all ranks, in rank order
                        pred = np.asarray(comm.allgather(np.ascontiguousarray(pred)))
                        data = self._metric_sets[i]
                    for m, value in _custom_metric_values(self.custom_metric, pred, data):
                        log.setdefault(m, []).append(value)

    def release(self) -> None:
        """Free the backend (device memory, worker threads)."""
        release_ctr = getattr(self.ctr, "release", None)  # statistics held on the device
        if release_ctr is not None:
            release_ctr()
        self.backend.release()


def _initial_booster(xgb_model: Booster | str | None, p: TrainParams, objective: Objective,
                     dtrain: Dataset, y: np.ndarray, w: np.ndarray | None,
                     intercept: np.ndarray | None = None) -> Booster:
    """A new empty Booster with the intercept (`intercept`, when given, else fitted to y, w),
    or a copy of the model to continue from."""
    n_features = dtrain.num_col()
    if xgb_model is not None:
        base = xgb_model if isinstance(xgb_model, Booster) else Booster(model_file=xgb_model)
        if base.n_features != n_features:
            raise ValueError(f"xgb_model was trained on {base.n_features} features, dtrain "
                             f"has {n_features}")
        if base.objective_name != objective.name or base.num_class != p.num_class:
            raise ValueError(f"xgb_model has objective {base.objective_name!r} "
                             f"(num_class={base.num_class}); continuing needs the same")
        booster = base.copy()
        booster.params = p.to_dict()
        return booster
    if intercept is not None:
        pass
    elif p.base_score is not None:
        intercept = objective.score_to_margin(p.base_score)
    else:
        intercept = objective.base_margin(y, w)
    return Booster(objective=objective.name, num_class=p.num_class, base_margin=intercept,
                   n_features=n_features, feature_names=dtrain.feature_names,
                   params=p.to_dict())
