"""The CUDA backend under NUMBA_ENABLE_CUDASIM=1: the conformance suite, and training with
device='cuda' against the CPU engine (quantised: the same trees). Run by
test_cuda_backend_sim.py in a subprocess (the simulator is chosen when numba.cuda is first
imported); tiny inputs, since the simulator runs every GPU thread as a Python thread."""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"
# uint64 hash products wrap by design; NumPy scalars in the simulator warn about it.
warnings.filterwarnings("ignore", category=RuntimeWarning)
# The simulator runs a block's threads as Python threads and polls them at every
# syncthreads; at the default 5 ms GIL switch interval a barrier waits for the threads'
# turns (the split search, a few dozen barriers a block, ran 3-4x slower).
sys.setswitchinterval(5e-4)

import histboost  # noqa: E402
from histboost.kernels.backend import make_backend  # noqa: E402
from histboost.testing import conformance  # noqa: E402
from histboost.testing.conformance import CHECKS  # noqa: E402

conformance.PROBLEM_ROWS = 96  # every simulated GPU thread is a Python thread
from histboost.testing.data import make_classification  # noqa: E402
from histboost.testing.simulator import run_checks  # noqa: E402


def cuda_backend(bins, offsets, **kw):
    return make_backend("cuda", bins, offsets, n_threads=1, **kw)


def check_training_matches_cpu() -> None:
    """Quantised training on the simulated GPU grows the CPU engine's trees: every grow
    policy, binary and multiclass, missing values, a row sample and min_data_in_leaf."""
    cases = [
        ({"objective": "binary:logistic", "max_depth": 3}, 2),
        ({"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 4,
          "max_depth": 0, "subsample": 0.7}, 2),
        ({"objective": "multi:softprob", "num_class": 3, "grow_policy": "oblivious",
          "max_depth": 2, "min_data_in_leaf": 5}, 3),
    ]
    for params, n_classes in cases:
        X, y = make_classification(64, 4, n_classes=n_classes, seed=3)
        base = {"quantized_grad": True, "max_bin": 6, "nthread": 1, "seed": 1, **params}
        models = {}
        for device in ("cpu", "cuda"):
            d = histboost.Dataset(X, label=y)
            models[device] = histboost.train({**base, "device": device}, d, 1,
                                             verbose_eval=False)
        cpu, gpu = models["cpu"].save_raw(), models["cuda"].save_raw()
        assert cpu.replace(b'"device":"cpu"', b"") == gpu.replace(b'"device":"cuda"', b""), \
            f"{params}: CPU and simulated-GPU models differ"


def check_planned_levels_match_cpu() -> None:
    """Levels planned on the device (`CUDABackend.plan_levels`: launched at once) grow the
    CPU engine's trees: depth-wise (multiclass, a row sample, missing values, gamma pruning)
    and the first levels of best-first growth (steps of two leaves here: two levels
    planned), whose later steps are planned on the device too (`check_best_first_steps`).
    Every tree takes the plan; a grower call it cannot answer raises."""
    from histboost.kernels.cuda.backend import CUDABackend
    from histboost.tree import grower

    planned = []
    plain = CUDABackend.plan_levels

    def counted(self, *args, **kwargs):
        planned.append(plain(self, *args, **kwargs))
        return planned[-1]
    CUDABackend.plan_levels = counted
    batch = grower.BEST_FIRST_BATCH
    grower.BEST_FIRST_BATCH = 2
    try:
        X, y = make_classification(80, 4, n_classes=3, seed=4)
        X[::5, 1] = np.nan
        base = {"quantized_grad": True, "max_bin": 6, "nthread": 1, "seed": 2}
        for params in ({"objective": "multi:softprob", "num_class": 3, "max_depth": 3,
                        "subsample": 0.8, "gamma": 0.05},
                       {"objective": "binary:logistic", "grow_policy": "lossguide",
                        "max_leaves": 10, "max_depth": 0, "min_child_weight": 0.0}):
            label = y if "num_class" in params else (y > 0).astype(float)
            raw = [histboost.train({**base, **params, "device": dev},
                                   histboost.Dataset(X, label=label), 1,
                                   verbose_eval=False).save_raw().replace(
                                       f'"device":"{dev}"'.encode(), b"")
                   for dev in ("cpu", "cuda")]
            assert raw[0] == raw[1], f"{params}: planned trees differ from the CPU engine's"
    finally:
        CUDABackend.plan_levels = plain
        grower.BEST_FIRST_BATCH = batch
    assert planned == [True] * 4, planned
    be = make_backend("cuda", np.zeros((8, 2), np.uint8), np.array([0, 3, 6]), n_threads=1,
                      label=np.arange(8.0) % 2, weight=None, n_outputs=1, count_rows=False)
    be.compute_gradients("logistic")
    be.begin_tree(0, None, None)
    be.build_histograms([0])
    reg = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    assert be.plan_levels(2, np.ones(2, bool), reg, False)
    totals = np.array([[*be.histogram_totals([0])[0], 8.0]])
    try:
        be.find_best_splits([0], totals, np.zeros((1, 2), bool), reg)
    except RuntimeError as e:
        assert "planned on the device" in str(e)
    else:
        raise AssertionError("a search with other feature masks than the plan's was answered")


def check_best_first_steps_match_cpu() -> None:
    """Best-first steps planned on the device after the planned levels
    (`histboost.kernels.cuda.best_first`) grow the CPU engine's trees, and the grower's
    calls are answered from them: steps of two leaves, a depth limit (leaves whose children
    are not searched), and too few steps planned (the host plans the rest of the tree from
    the device's histograms). A call that is not the device's step raises."""
    from histboost.kernels.cuda import best_first
    from histboost.kernels.cuda.backend import CUDABackend
    from histboost.tree import grower

    answered = []
    plain = CUDABackend.release

    def counted(self):
        answered.append(self.best_first_calls_answered)
        return plain(self)
    CUDABackend.release = counted
    batch, steps = grower.BEST_FIRST_BATCH, best_first.MAX_STEPS
    grower.BEST_FIRST_BATCH = 2
    try:
        X, y = make_classification(64, 4, n_classes=2, seed=4)
        X[::5, 1] = np.nan
        base = {"quantized_grad": True, "max_bin": 6, "nthread": 1, "seed": 2,
                "objective": "binary:logistic", "grow_policy": "lossguide",
                "min_child_weight": 0.0}
        for params, most in (({"max_leaves": 10, "max_depth": 0}, 24),
                             ({"max_leaves": 10, "max_depth": 4, "subsample": 0.8}, 1)):
            best_first.MAX_STEPS = most
            raw = [histboost.train({**base, **params, "device": dev},
                                   histboost.Dataset(X, label=y), 1,
                                   verbose_eval=False).save_raw().replace(
                                       f'"device":"{dev}"'.encode(), b"")
                   for dev in ("cpu", "cuda")]
            assert raw[0] == raw[1], f"{params}: best-first steps differ from the CPU engine's"
    finally:
        CUDABackend.release = plain
        grower.BEST_FIRST_BATCH, best_first.MAX_STEPS = batch, steps
    # the first tree's steps after its levels from the device (at least 3: 6 leaves in steps
    # of 2, the last one's partition apart), one of the second's
    assert answered[0] >= 3 and answered[1] == 1, answered
    be = make_backend("cuda", np.arange(16, dtype=np.uint8).reshape(8, 2) % 3,
                      np.array([0, 4, 8]), n_threads=1, label=np.arange(8.0) % 2, weight=None,
                      n_outputs=1, count_rows=False)
    be.compute_gradients("logistic")
    be.begin_tree(0, None, None)
    be.build_histograms([0])
    reg = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    mask = np.ones(2, bool)
    assert be.plan_levels(1, mask, reg, True, best_first=(8, 0, 2))
    G, H = be.histogram_totals([0])[0]
    rec = be.find_best_splits([0], np.array([[G, H, 8.0]]), mask[None], reg)
    sums = np.array([rec[0, 4:6], [G - rec[0, 4], H - rec[0, 5]]])
    be.split_and_search([0], [1], [2], rec, sums, np.ones((2, 2), bool), reg)
    try:
        be.split_and_search([5], [7], [8], rec, sums, np.ones((2, 2), bool), reg)
    except RuntimeError as e:
        assert "best-first steps planned on the device" in str(e), e
    else:
        raise AssertionError("a step other than the device's was answered")


def check_margin_ahead_matches_cpu() -> None:
    """A whole depth-wise tree planned on the device has its margin update launched behind
    its levels (`LevelPlan.launch_leaves`), out of place, and the next round's gradients
    from those margins behind it; `update_margin` keeps them only for the grower's leaves
    and values bit for bit. Two rounds (the second tree grows from the margins and gradients
    kept) equal the CPU engine's: binary, where margins and gradients are kept, and a
    leaf-refresh objective, whose refreshed values do not match and are added as before
    (its gradients come from the host)."""
    from histboost.kernels.cuda.backend import CUDABackend

    kept, taken = [], []
    plain, plain_grad = CUDABackend._keep_spare_margin, CUDABackend.compute_gradients

    def counted(self, output):
        kept.append(output)
        return plain(self, output)

    def counted_grad(self, loss):
        taken.append(self._state.ahead_loss == loss)
        return plain_grad(self, loss)
    CUDABackend._keep_spare_margin = counted
    CUDABackend.compute_gradients = counted_grad
    try:
        X, y = make_classification(48, 3, n_classes=2, seed=6)
        X[::6, 2] = np.nan
        for objective, n_kept, n_taken in (("binary:logistic", 2, 1),
                                           ("reg:absoluteerror", 0, 0)):
            kept.clear()
            taken.clear()
            raw = [histboost.train({"objective": objective, "max_depth": 3, "max_bin": 6,
                                    "quantized_grad": True, "nthread": 1, "seed": 2,
                                    "device": dev}, histboost.Dataset(X, label=y), 2,
                                   verbose_eval=False).save_raw().replace(
                                       f'"device":"{dev}"'.encode(), b"")
                   for dev in ("cpu", "cuda")]
            assert raw[0] == raw[1], f"{objective}: margins added ahead differ from the CPU's"
            assert len(kept) == n_kept, (objective, kept)
            assert sum(taken) == n_taken, (objective, taken)
    finally:
        CUDABackend._keep_spare_margin = plain
        CUDABackend.compute_gradients = plain_grad


def check_next_tree_ahead_matches_cpu() -> None:
    """The next round's tree launched behind a whole depth-wise tree
    (`CUDABackend._launch_next_tree`, while the host replays the tree) is taken when the
    next round is the one foretold and dropped otherwise, and the models are the CPU
    engine's (quantised) or the serial path's (float, speculation off): every round after the
    first taken ahead; a learning rate changed by a callback every round (each tree
    launched ahead with the last rate, dropped at its plan and grown again); early stopping
    (the last tree launched is never taken; the margins metrics read are the committed
    ones); a row sample (nothing launched)."""
    from histboost.callback import LearningRateScheduler
    from histboost.kernels.cuda.backend import CUDABackend

    counts = []
    plain, plain_round = CUDABackend.release, CUDABackend.next_round

    def counted(self):
        counts.append((self.trees_ahead_launched, self.trees_ahead_kept,
                       self.trees_ahead_dropped))
        return plain(self)
    CUDABackend.release = counted
    try:
        X, y = make_classification(64, 3, n_classes=2, seed=9)
        X[::7, 1] = np.nan
        X_val, y_val = X[:32], 1.0 - y[:32]  # a metric that worsens: stops at round 2
        base = {"objective": "binary:logistic", "max_depth": 3, "max_bin": 6, "nthread": 1,
                "seed": 5}
        rates = [0.3, 0.2, 0.1]
        cases = [  # (params, train's keywords, (launched, kept, dropped))
            ({"quantized_grad": True}, {}, (2, 2, 0)),
            ({"quantized_grad": True}, {"callbacks": [LearningRateScheduler(rates)]},
             (2, 0, 2)),
            ({"quantized_grad": True, "eval_metric": "logloss"},
             {"early_stopping_rounds": 1, "train_evals": True}, None),
            ({"quantized_grad": True, "subsample": 0.8}, {}, (0, 0, 0)),
            ({"quantized_grad": False}, {}, (2, 2, 0)),
        ]
        for params, kw, want in cases:
            kw = dict(kw)
            dval = histboost.Dataset(X_val, label=y_val)
            on_train = kw.pop("train_evals", False)
            raw = []
            for dev in ("cpu", "cuda"):
                counts.clear()
                d = histboost.Dataset(X, label=y)
                if params["quantized_grad"] is False and dev == "cpu":  # the serial path
                    dev = "cuda"
                    CUDABackend.next_round = lambda self, quantise: None
                try:
                    evals = [(d, "train"), (dval, "val")] if on_train else []
                    model = histboost.train({**base, **params, "device": dev}, d, 3,
                                            evals=evals, verbose_eval=False, **kw)
                finally:
                    CUDABackend.next_round = plain_round
                raw.append(model.save_raw().replace(f'"device":"{dev}"'.encode(), b""))
            assert raw[0] == raw[1], f"{params} {kw}: trees launched ahead change the model"
            launched, kept, dropped = counts[-1]
            if want is None:  # stopped early: one tree launched and never taken
                rounds = model.num_boosted_rounds()
                assert rounds < 3 and launched == rounds and kept == rounds - 1 \
                    and dropped == 0, (rounds, counts)
            else:
                assert counts[-1] == want, (params, counts)
    finally:
        CUDABackend.release = plain


def check_best_first_ahead_matches_cpu() -> None:
    """Best-first trees whose margins the device adds after its last planned step
    (`BestFirstPlan.launch_leaves`), and the next round's lossguide tree launched behind
    them (`CUDABackend._launch_next_tree`): models equal to the CPU engine's (quantised), with
    the trees launched ahead, taken and dropped, and the margins kept, counted: the second
    round taken ahead; a learning rate changed every round (the tree launched ahead dropped
    at its plan, the margins of the tree grown instead still added ahead), with a depth
    limit, max_delta_step and reg_alpha; one step launched a tree (the device stops, the host
    plans the rest and adds the margins: nothing launched ahead); several outputs (margins
    added ahead, nothing launched). Early stopping, a row sample and float trees take the
    rules `check_next_tree_ahead_matches_cpu` checks on depth-wise trees (the same hint and
    drops); on the GPU, `test_next_tree_launched_ahead` runs lossguide float trees too. Two
    rounds a training: the simulator runs each GPU thread as a Python thread."""
    from histboost.callback import LearningRateScheduler
    from histboost.kernels.cuda import best_first
    from histboost.kernels.cuda.backend import CUDABackend
    from histboost.tree import grower

    counts = []
    plain = CUDABackend.release

    def counted(self):
        counts.append((self.trees_ahead_launched, self.trees_ahead_kept,
                       self.trees_ahead_dropped, self.margins_kept_ahead))
        return plain(self)
    CUDABackend.release = counted
    batch, steps = grower.BEST_FIRST_BATCH, best_first.MAX_STEPS
    grower.BEST_FIRST_BATCH = 2
    try:
        X, y = make_classification(64, 4, n_classes=2, seed=4)
        X[::5, 1] = np.nan
        y3 = np.arange(64) % 3
        base = {"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 10,
                "max_depth": 0, "max_bin": 6, "nthread": 1, "seed": 2,
                "min_child_weight": 0.0, "quantized_grad": True}
        cases = [  # (params, train's keywords, most steps, (launched, kept, dropped, margins))
            ({}, {}, steps, (1, 1, 0, 2)),
            ({"max_depth": 3, "max_delta_step": 0.3, "reg_alpha": 0.5},
             {"callbacks": [LearningRateScheduler([0.3, 0.2])]}, steps, (1, 0, 1, 2)),
            ({}, {}, 1, (0, 0, 0, 0)),
            ({"objective": "multi:softprob", "num_class": 3}, {}, steps, (0, 0, 0, 6)),
        ]
        for params, kw, most, want in cases:
            best_first.MAX_STEPS = most
            labels = y3 if "num_class" in params else y
            raw = []
            for dev in ("cpu", "cuda"):
                counts.clear()
                model = histboost.train({**base, **params, "device": dev},
                                        histboost.Dataset(X, label=labels), 2,
                                        verbose_eval=False, **kw)
                raw.append(model.save_raw().replace(f'"device":"{dev}"'.encode(), b""))
            assert raw[0] == raw[1], f"{params} {kw}: best-first trees ahead change the model"
            assert counts[-1] == want, (params, kw, counts)
    finally:
        CUDABackend.release = plain
        grower.BEST_FIRST_BATCH, best_first.MAX_STEPS = batch, steps


def check_ranking_matches_cpu() -> None:
    """A ranking objective (gradient pairs computed on the host, copied to the device) grows
    the CPU engine's trees on the simulated GPU."""
    X, y = make_classification(40, 3, n_classes=3, seed=5)
    group = [10, 14, 16]
    models = {}
    for device in ("cpu", "cuda"):
        d = histboost.Dataset(X, label=y, group=group)
        models[device] = histboost.train(
            {"objective": "rank:ndcg", "lambdarank_pair_method": "mean", "max_depth": 2,
             "quantized_grad": True, "max_bin": 6, "nthread": 1, "seed": 2,
             "min_child_weight": 0, "reg_lambda": 0.05, "device": device}, d, 1,
            verbose_eval=False)
    assert len(models["cpu"].get_dump()[0].splitlines()) == 7  # a full tree of depth 2
    cpu, gpu = models["cpu"].save_raw(), models["cuda"].save_raw()
    assert cpu.replace(b'"device":"cpu"', b"") == gpu.replace(b'"device":"cuda"', b""), \
        "rank:ndcg: CPU and simulated-GPU models differ"


def check_constrained_records_match_cpu() -> None:
    """Quantised histograms: the constrained split records and oblivious gain table of the
    simulated GPU are the CPU's, bit for bit (unbounded and bounded nodes, L1 and
    max_delta_step)."""
    from histboost.params import parse_params
    from histboost.tree.quantize import make_quantisation
    from histboost.tree.split import leaf_weight, regularisation_vector

    p = conformance.make_problem(5, n=80)
    reg = regularisation_vector(parse_params({"reg_alpha": 0.2, "max_delta_step": 0.5}))
    cons = np.array([1, -1, 0, 1], np.int8)
    results = []
    for device in ("cpu", "cuda"):
        be = make_backend(device, p.bins, p.offsets, n_threads=1, label=p.label,
                          weight=None, n_outputs=1, count_rows=False)
        be.set_gradients(p.gh[None])
        be.begin_tree(0, None, make_quantisation(*be.gradient_bounds(0), 8, 11))
        be.build_histograms([0])
        G, H = be.histogram_totals([0])[0]
        w = leaf_weight(G, H, reg)
        recs = be.find_best_splits([0, 0], np.array([[G, H, 80.0]] * 2), np.ones((2, 4), bool),
                                   reg, monotone=(cons, np.array([-np.inf, w - 0.02]),
                                                  np.array([np.inf, w + 0.05])))
        counts = be.apply_splits([0], [1], [2], recs[:1].copy())
        be.build_histograms([1, 2])
        gh = be.histogram_totals([1, 2])
        mid = 0.5 * (leaf_weight(*gh[0], reg) + leaf_weight(*gh[1], reg))
        table = be.oblivious_gains([1, 2], np.column_stack([gh, counts[0]]), np.ones(4, bool),
                                   reg, monotone=(cons, np.array([-np.inf, mid]),
                                                  np.array([mid, np.inf])))
        results.append((recs, table))
    (cpu_recs, cpu_table), (gpu_recs, gpu_table) = results
    assert (cpu_recs[:, 1] >= 0).all() and np.isfinite(cpu_table).any(), "nothing found"
    np.testing.assert_array_equal(gpu_recs, cpu_recs)
    np.testing.assert_array_equal(gpu_table, cpu_table)


def check_constrained_training_matches_cpu() -> None:
    """Quantised training under monotone constraints (with interaction constraints, and
    weighted column sampling) grows the CPU engine's trees on the simulated GPU, every grow
    policy; the constraints change the CPU's model, so they bind."""
    rng = np.random.default_rng(7)
    X = rng.integers(0, 12, size=(64, 4)).astype(np.float64)
    y = np.sin(X[:, 0] / 2) - 0.1 * X[:, 0] + np.cos(X[:, 1] / 3) + X[:, 2] * X[:, 3] / 40
    X[::9, 1] = np.nan
    mono = {"monotone_constraints": (1, -1, 0, 1)}
    cases = [
        {"max_depth": 3, "interaction_constraints": [[0, 1], [2, 3]]},
        {"grow_policy": "lossguide", "max_leaves": 5, "max_depth": 0,
         "feature_weights": [1.0, 2.0, 0.5, 1.0], "colsample_bynode": 0.75},
        {"grow_policy": "oblivious", "max_depth": 3, "reg_alpha": 0.1},
    ]
    for params in cases:
        base = {"objective": "reg:squarederror", "quantized_grad": True, "max_bin": 8,
                "nthread": 1, "seed": 1, "learning_rate": 1.0, **params}
        models = {}
        for device in ("cpu", "cuda"):
            models[device] = histboost.train({**base, **mono, "device": device},
                                             histboost.Dataset(X, label=y), 1,
                                             verbose_eval=False).save_raw()
        free = histboost.train(base, histboost.Dataset(X, label=y), 1,
                               verbose_eval=False).save_raw()
        cpu, gpu = models["cpu"], models["cuda"]
        assert cpu.replace(b'"device":"cpu"', b"") == gpu.replace(b'"device":"cuda"', b""), \
            f"{params}: CPU and simulated-GPU models differ"
        assert _trees(cpu) != _trees(free), f"{params}: the constraints do not bind"


def _trees(raw: bytes) -> str:
    import json

    return json.dumps(json.loads(raw)["trees"])


def check_host_gradient_objective_matches_cpu() -> None:
    """survival:aft (interval labels, gradients computed on the host and handed to the device
    with set_gradients): two quantised rounds on the simulated GPU equal the CPU engine's."""
    from histboost.testing.data import make_regression

    X, y = make_regression(64, 4, seed=5)
    t = np.exp(y - y.min() + 0.1)
    kind = np.arange(64) % 3
    lower, upper = np.where(kind == 0, 0.0, t), np.where(kind == 1, np.inf, t)
    models = {}
    for device in ("cpu", "cuda"):
        d = histboost.Dataset(X, label_lower_bound=lower, label_upper_bound=upper)
        models[device] = histboost.train(
            {"objective": "survival:aft", "aft_loss_distribution": "logistic",
             "quantized_grad": True, "max_bin": 6, "max_depth": 1, "nthread": 1,
             "device": device}, d, 2, verbose_eval=False)
    cpu, gpu = models["cpu"].save_raw(), models["cuda"].save_raw()
    assert cpu.replace(b'"device":"cpu"', b"") == gpu.replace(b'"device":"cuda"', b""), \
        "survival:aft: CPU and simulated-GPU models differ"


def check_raw_prediction_kernel() -> None:
    """The raw-feature prediction kernel against the CPU predictor: normal and oblivious
    trees, two classes of a multiclass model, NaN, float32 and float64 input."""
    import torch

    from histboost.kernels.cuda import predict as cuda_predict
    from histboost.tree.predictor import PackedForest

    X, y = make_classification(60, 4, n_classes=3, seed=4)
    X[::5, 1] = np.nan
    for policy in ("depthwise", "oblivious"):
        b = histboost.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 3,
                             "grow_policy": policy, "max_bin": 8}, histboost.Dataset(X, label=y),
                            2, verbose_eval=False)
        forest = PackedForest(b.trees)
        for dtype in (np.float32, np.float64):
            Xd = X.astype(dtype)
            want = np.zeros((60, 3))
            forest.add_margin(Xd, want, 1, 5)
            got = torch.zeros((60, 3), dtype=torch.float64)
            cuda_predict.add_margin_raw(cuda_predict.forest_arrays(forest, "cpu"),
                                        torch.from_numpy(Xd), got, 1, 5)
            np.testing.assert_array_equal(got.numpy(), want)


def check_histogram_kernel_paths() -> None:
    """The histogram kernel's paths against a NumPy sum, over several nodes of several
    chunks, through the row buffers and over identity rows, with one and two rows a thread step:
    one-byte bins (four to a word)
    and int32 bins, 2 and 3 channels, a group wider than the block (a thread's several words
    a row), a feature too wide for shared memory and `wide` values (global memory)."""
    import torch

    from histboost.kernels.cuda import _common, histogram

    rng = np.random.default_rng(11)
    n = 70
    cases = [  # (bins per feature, dtype, channels, shared values, wide)
        ([2] * 150 + [5, 7], np.uint8, 2, 1000, False),  # 75+ words a group > 32 threads
        ([3, 256, 4, 9, 1], np.uint8, 3, 12288, False),
        ([6, 700, 3], np.int32, 2, 1024, False),  # the 700-bin feature: global memory
        ([4, 5, 6], np.uint8, 2, 12288, True),
    ]
    for widths, dtype, channels, shared_values, wide in cases:
        widths = np.array(widths)
        offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
        bins = (rng.random((n, len(widths))) * widths).astype(np.int64)
        if dtype == np.uint8:
            packed = np.zeros((n, -(-len(widths) // 4) * 4), np.uint8)
            packed[:, :len(widths)] = bins
            words = torch.from_numpy(packed.view(np.int32).copy())
        else:
            words = torch.from_numpy(bins.astype(np.int32))
        gh = rng.integers(-2000, 2000, (n, 2)).astype(np.int32)
        gh[:, 1] = np.abs(gh[:, 1])
        order = rng.permutation(n).astype(np.int32)
        rows2 = np.stack([order, np.arange(n, dtype=np.int32)])
        # nodes: rows 0..n-1 in order (identity), two ranges of buffer 0, one of buffer 1
        bounds, sides = [(0, n), (0, 30), (30, 70), (5, 61)], [2, 0, 0, 1]
        # chunks of 24 rows: two rows a thread step where a pass takes 16 rows or fewer
        table, n_chunks = _common.node_table(bounds, sides, 24, [(j,) for j in range(4)])
        first, last = histogram.feature_groups(offsets, channels, shared_values)
        pool = torch.zeros((4, int(offsets[-1]), channels), dtype=torch.int64)
        histogram.BUILD[np.dtype(dtype), channels].launch(
            (n_chunks, len(first)), histogram.HIST_THREADS, torch.device("cpu"), words,
            torch.from_numpy(gh.view(np.int64).reshape(n)), torch.from_numpy(rows2),
            torch.from_numpy(table),
            torch.from_numpy(first), torch.from_numpy(last), torch.from_numpy(offsets),
            shared_values, wide, pool,
            shared_bytes=histogram.shared_bytes(offsets, first, last, channels,
                                                shared_values))
        for j, ((a, b), side) in enumerate(zip(bounds, sides, strict=True)):
            rows = np.arange(a, b) if side == 2 else rows2[side, a:b]
            want = np.zeros((int(offsets[-1]), channels), np.int64)
            for f in range(len(widths)):
                slots = offsets[f] + bins[rows, f]
                np.add.at(want[:, 0], slots, gh[rows, 0])
                np.add.at(want[:, 1], slots, gh[rows, 1])
                if channels == 3:
                    np.add.at(want[:, 2], slots, 1)
            np.testing.assert_array_equal(pool[j].numpy(), want, err_msg=str(widths))


def check_partition_kernels() -> None:
    """`count_left` then `scatter_rows` against NumPy's stable partition, for nodes of
    several chunks in both row buffers, missing values going either way, one-byte and int32
    bins; `node_lefts`' counts equal the scatter's without moving a row."""
    import torch

    from histboost.kernels.cuda import _common, partition

    rng = np.random.default_rng(12)
    n, n_features = 150, 3
    cpu = torch.device("cpu")
    for dtype in (np.uint8, np.int32):
        missing = np.array([5, 9, 3], np.int32)  # each feature's missing-value bin
        columns = (rng.random((n_features, n)) * (missing[:, None] + 1)).astype(dtype)
        rows2 = np.stack([rng.permutation(n), rng.permutation(n)]).astype(np.int32)
        # (start, end, side, feature, bin, missing goes left); the third node has no rows
        nodes = [(0, 70, 0, 0, 2, 1), (70, 150, 1, 1, 4, 0), (70, 70, 0, 2, 1, 0),
                 (5, 41, 1, 2, 0, 1)]
        for chosen in (nodes[:3], nodes[3:]):  # the ranges of one call do not overlap
            table, n_chunks = _common.node_table(
                [nd[:2] for nd in chosen], [nd[2] for nd in chosen],
                partition.partition_chunk_rows, [nd[3:] for nd in chosen])
            got = torch.from_numpy(rows2.copy())
            chunk_left = torch.zeros(n_chunks, dtype=torch.int64)
            counts = torch.full((len(chosen), 2), -7, dtype=torch.int64)
            summed = torch.full((len(chosen), 2), -7, dtype=torch.int64)
            args = (torch.from_numpy(columns), got, torch.from_numpy(table),
                    torch.from_numpy(missing), chunk_left)
            partition.COUNT_LEFT[np.dtype(dtype)].launch(n_chunks, _common.THREADS, cpu,
                                                        *args)
            partition.NODE_LEFTS.launch(_common.grid(len(chosen)), _common.THREADS, cpu,
                                        torch.from_numpy(table), chunk_left, summed)
            partition.SCATTER_ROWS[np.dtype(dtype)].launch(n_chunks, _common.THREADS, cpu,
                                                          *args, counts)
            for j, (a, b, side, f, split_bin, dleft) in enumerate(chosen):
                rows = rows2[side, a:b]
                bins = columns[f, rows].astype(np.int64)
                left = np.where(bins == missing[f], dleft == 1, bins <= split_bin)
                want = np.concatenate([rows[left], rows[~left]])
                np.testing.assert_array_equal(got.numpy()[1 - side, a:b], want)
                if b > a:
                    assert counts[j].tolist() == [int(left.sum()), int((~left).sum())]
                    assert summed[j].tolist() == counts[j].tolist()
                else:  # no chunk: nothing written
                    assert summed[j].tolist() == [-7, -7]


def main() -> int:
    checks = [(c.__name__, lambda c=c: c(cuda_backend, 0)) for c in CHECKS]
    checks.append(("check_training_matches_cpu", check_training_matches_cpu))
    checks.append(("check_planned_levels_match_cpu", check_planned_levels_match_cpu))
    checks.append(("check_best_first_steps_match_cpu", check_best_first_steps_match_cpu))
    checks.append(("check_margin_ahead_matches_cpu", check_margin_ahead_matches_cpu))
    checks.append(("check_next_tree_ahead_matches_cpu", check_next_tree_ahead_matches_cpu))
    checks.append(("check_best_first_ahead_matches_cpu", check_best_first_ahead_matches_cpu))
    checks.append(("check_ranking_matches_cpu", check_ranking_matches_cpu))
    checks.append(("check_constrained_records_match_cpu", check_constrained_records_match_cpu))
    checks.append(("check_constrained_training_matches_cpu",
                   check_constrained_training_matches_cpu))
    checks.append(("check_host_gradient_objective_matches_cpu",
                   check_host_gradient_objective_matches_cpu))
    checks.append(("check_raw_prediction_kernel", check_raw_prediction_kernel))
    checks.append(("check_histogram_kernel_paths", check_histogram_kernel_paths))
    checks.append(("check_partition_kernels", check_partition_kernels))
    return run_checks(checks)


if __name__ == "__main__":
    sys.exit(main())
