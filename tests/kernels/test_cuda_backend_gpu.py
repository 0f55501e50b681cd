"""The CUDA backend on a real GPU: the conformance suite, and quantised training identical to
the CPU engine on data large enough for several chunks, feature groups and levels. Skipped
without a CUDA device (run through `bench/gpu_tree_check.sh` on a GPU machine)."""

from __future__ import annotations

import os

import numpy as np
import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("needs a real GPU", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("numba.cuda")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import histboost  # noqa: E402
from histboost.kernels.backend import make_backend  # noqa: E402
from histboost.testing.conformance import CHECKS  # noqa: E402
from histboost.testing.data import make_classification  # noqa: E402


def _cuda(bins, offsets, **kw):
    return make_backend("cuda", bins, offsets, n_threads=1, **kw)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cuda_backend_conforms(check, seed):
    check(_cuda, seed)


@pytest.mark.parametrize("params", [
    {"grow_policy": "depthwise", "max_depth": 6},
    {"grow_policy": "lossguide", "max_leaves": 31, "max_depth": 0, "subsample": 0.8},
    # the first six levels planned on the device (`plan_levels`), then best-first steps
    # planned there too (`test_best_first_steps_planned_equals_cpu`)
    {"grow_policy": "lossguide", "max_leaves": 127, "max_depth": 0},
    {"grow_policy": "oblivious", "max_depth": 5, "min_data_in_leaf": 20},
    {"grow_policy": "depthwise", "max_depth": 4, "objective": "multi:softprob",
     "num_class": 3, "colsample_bytree": 0.7},
    {"grow_policy": "depthwise", "max_depth": 5, "max_bin": 1024},  # wide bins, 2+ groups
])
def test_quantised_gpu_model_equals_cpu(params):
    n_classes = params.get("num_class", 2)
    X, y = make_classification(20_000, 12, n_classes=n_classes, seed=5)
    X[::7, 3] = np.nan
    base = {"objective": "binary:logistic", "quantized_grad": True, "seed": 3, **params}
    models = [histboost.train({**base, "device": dev}, histboost.Dataset(X, label=y), 8,
                              verbose_eval=False) for dev in ("cpu", "cuda")]
    a, b = (m.save_raw().replace(f'"device":"{d}"'.encode(), b"")
            for m, d in zip(models, ("cpu", "cuda"), strict=True))
    assert a == b


@pytest.mark.parametrize("params", [
    {"grow_policy": "depthwise", "max_depth": 6,
     "interaction_constraints": [[0, 1, 2, 3], [3, 4, 5, 6, 7, 8, 9, 10, 11]]},
    {"grow_policy": "lossguide", "max_leaves": 31, "max_depth": 0, "colsample_bynode": 0.7,
     "feature_weights": [2.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]},
    {"grow_policy": "oblivious", "max_depth": 5, "reg_alpha": 0.5, "max_delta_step": 0.7,
     "min_data_in_leaf": 20},
])
def test_quantised_constrained_gpu_model_equals_cpu(params):
    """Monotone constraints (bounds, clipped gains, rejected splits) on the GPU: the CPU
    engine's model, with interaction constraints and weighted column sampling too."""
    X, y = make_classification(20_000, 12, seed=5)
    X[::7, 3] = np.nan
    base = {"objective": "binary:logistic", "quantized_grad": True, "seed": 3,
            "learning_rate": 0.5, **params}
    mono = {"monotone_constraints": (1, -1, 0, 1, 0, 0, -1, 0, 1, 0, 0, 0)}
    models = [histboost.train({**base, **mono, "device": dev}, histboost.Dataset(X, label=y), 8,
                              verbose_eval=False) for dev in ("cpu", "cuda")]
    a, b = (m.save_raw().replace(f'"device":"{d}"'.encode(), b"")
            for m, d in zip(models, ("cpu", "cuda"), strict=True))
    assert a == b
    free = histboost.train({**base, "device": "cpu"}, histboost.Dataset(X, label=y), 8,
                           verbose_eval=False)
    assert not np.array_equal(free.predict(X), models[0].predict(X)), "constraints bind"


@pytest.mark.parametrize("params", [
    {"objective": "binary:logistic"},
    {"objective": "multi:softprob", "num_class": 3},
    {"objective": "binary:logistic", "quantized_grad": False},  # fixed-point float sums
])
def test_margin_update_ahead_is_kept(params, monkeypatch):
    """The margin update launched behind a whole depth-wise tree's planned levels
    (`LevelPlan.launch_leaves`) is kept for every tree: the device's leaf values are the
    grower's, bit for bit (no fused multiply-add), and every round after the first takes
    the gradients computed ahead from them. Quantised models equal the CPU's over several
    rounds (each round's gradients come from the margins kept); float models are close to
    it, not equal (docs/gpu.md)."""
    from histboost.kernels.cuda.backend import CUDABackend

    kept, taken = [], []
    plain, plain_grad = CUDABackend._keep_spare_margin, CUDABackend.compute_gradients

    def counted(self, output):
        kept.append(output)
        return plain(self, output)

    def counted_grad(self, loss):
        taken.append(self._state.ahead_loss == loss)
        return plain_grad(self, loss)
    monkeypatch.setattr(CUDABackend, "_keep_spare_margin", counted)
    monkeypatch.setattr(CUDABackend, "compute_gradients", counted_grad)
    n_classes = params.get("num_class", 2)
    X, y = make_classification(20_000, 12, n_classes=n_classes, seed=7)
    X[::9, 2] = np.nan
    base = {"quantized_grad": True, "max_depth": 6, "seed": 4, **params}
    rounds = 4
    models = [histboost.train({**base, "device": dev}, histboost.Dataset(X, label=y), rounds,
                              verbose_eval=False) for dev in ("cpu", "cuda")]
    a, b = (m.save_raw().replace(f'"device":"{d}"'.encode(), b"")
            for m, d in zip(models, ("cpu", "cuda"), strict=True))
    assert a == b or not base["quantized_grad"]
    outputs = n_classes if n_classes > 2 else 1
    assert len(kept) == rounds * outputs, kept
    assert taken == [False] + [True] * (rounds - 1), taken


_LOSSGUIDE = {"grow_policy": "lossguide", "max_leaves": 63, "max_depth": 0}


@pytest.mark.parametrize("params, schedule", [
    ({"quantized_grad": True}, False),
    ({"quantized_grad": False}, False),  # fixed-point float sums
    ({"quantized_grad": True}, True),  # a learning rate changed every round
    ({"quantized_grad": True, **_LOSSGUIDE}, False),
    ({"quantized_grad": False, **_LOSSGUIDE}, False),
    ({"quantized_grad": True, **_LOSSGUIDE}, True),
])
def test_next_tree_launched_ahead(params, schedule, monkeypatch):
    """The next round's tree launched behind each whole depth-wise tree, or each best-first
    tree the device finished and whose margins it added (`CUDABackend._launch_next_tree`;
    a tree needing more steps than launched is finished by the host, launching none), is
    taken by the next round, or, with a learning rate a callback changes every round,
    dropped and grown again; the model is the one without trees launched ahead
    (quantised: the CPU engine's; float: the GPU's with the hint ignored), byte for
    byte."""
    from histboost.callback import LearningRateScheduler
    from histboost.kernels.cuda.backend import CUDABackend

    counts = []
    plain = CUDABackend.release

    def counted(self):
        counts.append((self.trees_ahead_launched, self.trees_ahead_kept,
                       self.trees_ahead_dropped, self.margins_kept_ahead))
        return plain(self)
    monkeypatch.setattr(CUDABackend, "release", counted)
    X, y = make_classification(20_000, 12, seed=11)
    X[::9, 2] = np.nan
    rounds = 5
    base = {"objective": "binary:logistic", "max_depth": 6, "seed": 4, **params}
    kw = {"callbacks": [LearningRateScheduler([0.3 - 0.05 * r for r in range(rounds)])]} \
        if schedule else {}
    ahead = histboost.train({**base, "device": "cuda"}, histboost.Dataset(X, label=y), rounds,
                            verbose_eval=False, **kw)
    launched, kept, dropped, margins = counts[0]
    if "grow_policy" in params:  # a tree the device did not finish launches none
        assert 1 <= launched <= rounds - 1 and launched <= margins <= rounds, counts
    else:
        assert (launched, margins) == (rounds - 1, rounds), counts
    assert (kept, dropped) == ((0, launched) if schedule else (launched, 0)), counts
    device = "cpu" if params["quantized_grad"] else "cuda"
    if device == "cuda":
        monkeypatch.setattr(CUDABackend, "next_round", lambda self, quantise: None)
    serial = histboost.train({**base, "device": device}, histboost.Dataset(X, label=y),
                             rounds, verbose_eval=False, **kw)
    assert device == "cpu" or counts[-1][:3] == (0, 0, 0)
    a, b = (m.save_raw().replace(f'"device":"{d}"'.encode(), b"")
            for m, d in ((ahead, "cuda"), (serial, device)))
    assert a == b


@pytest.mark.parametrize("params", [
    {"max_leaves": 255, "max_depth": 0},
    {"max_leaves": 100, "max_depth": 9, "subsample": 0.8},  # a depth limit, a row sample
])
def test_best_first_steps_planned_equals_cpu(params, monkeypatch):
    """Best-first steps planned on the device after the first six levels
    (`kernels/cuda/best_first.py`) answer the grower's calls of every tree (a call they
    cannot answer raises), and the quantised model is the CPU engine's. The steps' buffers
    (made again, every step's kernel parameters are packed again) are made once a training
    without a row sample for the current tree and once for the tree launched ahead, and
    never again for the same parents and rows; the margins are added ahead and the next
    trees launched ahead (behind the trees the device finished)."""
    from histboost.kernels.cuda import best_first
    from histboost.kernels.cuda.backend import CUDABackend

    answered, made, ahead = [], [], []
    plain, plain_buffers = CUDABackend.release, best_first.BestFirstBuffers.__init__

    def counted(self):
        answered.append(self.best_first_calls_answered)
        ahead.append((self.trees_ahead_launched, self.margins_kept_ahead))
        return plain(self)

    def counted_buffers(self, *args):
        made.append(args[1:])
        return plain_buffers(self, *args)
    monkeypatch.setattr(CUDABackend, "release", counted)
    monkeypatch.setattr(best_first.BestFirstBuffers, "__init__", counted_buffers)
    X, y = make_classification(30_000, 12, seed=8)
    X[::7, 3] = np.nan
    base = {"objective": "binary:logistic", "quantized_grad": True, "seed": 3,
            "grow_policy": "lossguide", **params}
    rounds = 4
    models = [histboost.train({**base, "device": dev}, histboost.Dataset(X, label=y), rounds,
                              verbose_eval=False) for dev in ("cpu", "cuda")]
    a, b = (m.save_raw().replace(f'"device":"{d}"'.encode(), b"")
            for m, d in zip(models, ("cpu", "cuda"), strict=True))
    assert a == b
    assert answered[0] >= 2 * rounds, answered
    if "subsample" in params:  # no trees launched ahead, no margins added ahead
        assert ahead == [(0, 0)], ahead
        # (steps, parents, rows) of each made: a row sample's count differs tree to tree
        assert all(a[1:] != b[1:] for a, b in zip(made, made[1:], strict=False)), made
    else:  # the current tree's and the one launched ahead, the margins added ahead
        assert len(made) == 2 and made[0] == made[1], made
        assert 1 <= ahead[0][0] <= ahead[0][1], ahead


def test_float_gpu_model_is_deterministic_and_close_to_cpu():
    X, y = make_classification(20_000, 12, seed=6)
    p = {"objective": "binary:logistic", "max_depth": 6, "device": "cuda"}
    runs = [histboost.train(p, histboost.Dataset(X, label=y), 10, verbose_eval=False)
            for _ in range(2)]
    assert runs[0].save_raw() == runs[1].save_raw()
    cpu = histboost.train({**p, "device": "cpu"}, histboost.Dataset(X, label=y), 10,
                          verbose_eval=False)
    # fixed-point sums differ from float64 sums by rounding only: near-ties aside, the same
    # trees
    assert np.mean(np.abs(runs[0].predict(X) - cpu.predict(X))) < 1e-3


def test_training_releases_device_memory():
    X, y = make_classification(50_000, 12, seed=7)
    torch.cuda.synchronize()
    before = torch.cuda.memory_reserved()
    histboost.train({"objective": "binary:logistic", "device": "cuda"},
                    histboost.Dataset(X, label=y), 3, verbose_eval=False)
    assert torch.cuda.memory_reserved() <= before


def test_gpu_prediction_equals_cpu_prediction():
    """A GPU model predicts on the GPU (host and device input) exactly as the CPU predictor."""
    X, y = make_classification(30_000, 12, n_classes=3, seed=8)
    X[::9, 2] = np.nan
    b = histboost.train({"objective": "multi:softprob", "num_class": 3, "device": "cuda",
                         "max_depth": 5}, histboost.Dataset(X, label=y), 6, verbose_eval=False)
    assert b._predicts_on_gpu()
    on_gpu = b.predict(X, output_margin=True)
    from_device = b.predict(torch.from_numpy(X).cuda(), output_margin=True)
    b.params["device"] = "cpu"
    on_cpu = b.predict(X, output_margin=True)
    np.testing.assert_array_equal(on_gpu, on_cpu)
    np.testing.assert_array_equal(from_device, on_cpu)


def test_device_binning_equals_host_binning():
    X, y = make_classification(50_000, 9, seed=9)
    X[::11, 4] = np.nan
    d = histboost.Dataset(X.astype(np.float32), label=y).construct()
    be = make_backend("cuda", None, d.bin_mapper.bin_offsets, n_threads=1, label=y,
                      weight=None, n_outputs=1, count_rows=False, raw=d.data,
                      mapper=d.bin_mapper)
    np.testing.assert_array_equal(be.bins[:, :9].cpu().numpy(), d.bins)
