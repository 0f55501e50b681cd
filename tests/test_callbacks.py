"""`LearningRateScheduler`, `TrainingCheckPoint` and `Booster.set_param`: a schedule grows the
trees that training round by round at those rates grows, checkpoints are the model's
prefixes, written atomically."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import histboost
from histboost.callback import LearningRateScheduler, TrainingCallback, TrainingCheckPoint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _training_helpers import X_REG, Y_REG, _json, _train  # noqa: E402

EXTRAS = [{}, {"monotone_constraints": (1, 0, -1, 0, 0)},
          {"grow_policy": "lossguide", "max_leaves": 6, "subsample": 0.8}]


@pytest.mark.parametrize("extra", EXTRAS)
def test_constant_schedule_equals_that_fixed_rate(extra):
    p = {"max_depth": 3, **extra}
    fixed = _train({**p, "eta": 0.1}, X_REG, Y_REG, 4)
    scheduled = _train({**p, "eta": 0.3}, X_REG, Y_REG, 4,
                       callbacks=[LearningRateScheduler(lambda epoch: 0.1)])
    assert _json(scheduled) == _json(fixed)
    np.testing.assert_array_equal(scheduled.predict(X_REG), fixed.predict(X_REG))


@pytest.mark.parametrize("extra", EXTRAS)
def test_schedule_equals_one_round_at_a_time(extra):
    """Round e's trees are scaled by rates[e]: the model equals one grown a round at a time,
    continuing with eta = rates[e] each time."""
    rates = [0.5, 0.1, 0.3]
    p = {"max_depth": 3, **extra}
    scheduled = _train(p, X_REG, Y_REG, 3, callbacks=[LearningRateScheduler(rates)])
    manual = None
    for rate in rates:
        manual = _train({**p, "eta": rate}, X_REG, Y_REG, 1, xgb_model=manual)
    assert _json(scheduled) == _json(manual)
    assert scheduled.params["learning_rate"] == 0.3
    # a schedule that changes the model: not the same as the fixed default rate
    assert _json(scheduled) != _json(_train(p, X_REG, Y_REG, 3))


def test_schedule_epochs_count_the_models_rounds():
    seen = []
    first = _train({"max_depth": 2}, X_REG, Y_REG, 2)
    _train({"max_depth": 2}, X_REG, Y_REG, 2, xgb_model=first,
           callbacks=[LearningRateScheduler(lambda e: seen.append(e) or 0.2)])
    assert seen == [2, 3]
    with pytest.raises(ValueError, match="2 learning rates, round 2 needs one more"):
        _train({}, X_REG, Y_REG, 3, callbacks=[LearningRateScheduler([0.1, 0.2])])
    with pytest.raises(TypeError, match="learning_rates"):
        LearningRateScheduler(0.1)
    with pytest.raises(ValueError, match="learning_rate must be > 0"):
        _train({}, X_REG, Y_REG, 2, callbacks=[LearningRateScheduler([0.1, -1.0])])


class _ChangeDepth(TrainingCallback):
    def after_iteration(self, model, epoch, evals_log):
        model.set_param("max_depth", 2)
        return False


def test_only_the_learning_rate_may_change_mid_training():
    with pytest.raises(ValueError, match=r"\['max_depth'\] changed during training"):
        _train({"max_depth": 4}, X_REG, Y_REG, 3, callbacks=[_ChangeDepth()])


def test_set_param_validates_and_takes_aliases():
    b = _train({}, X_REG, Y_REG, 1)
    b.set_param("eta", 0.05)
    assert b.params["learning_rate"] == 0.05 and "eta" not in b.params
    b.set_param({"max_depth": 3, "lambda": 2.0})
    assert (b.params["max_depth"], b.params["reg_lambda"]) == (3, 2.0)
    with pytest.raises(ValueError, match="learning_rate"):
        b.set_param("learning_rate", 0)


def test_checkpoints_every_interval_rounds(tmp_path):
    folder = tmp_path / "ckpt"  # created by the callback
    cb = TrainingCheckPoint(folder, name="m", interval=2)
    b = _train({"max_depth": 2}, X_REG, Y_REG, 5, callbacks=[cb])
    assert sorted(os.listdir(folder)) == ["m_1.json", "m_3.json"]  # no temporary files left
    for epoch in (1, 3):
        saved = histboost.Booster(model_file=folder / f"m_{epoch}.json")
        assert _json(saved) == _json(b[: epoch + 1])
        np.testing.assert_array_equal(saved.predict(X_REG), b[: epoch + 1].predict(X_REG))
    # continuing from the last checkpoint: files named by the model's rounds
    resumed = _train({"max_depth": 2}, X_REG, Y_REG, 2, xgb_model=str(folder / "m_3.json"),
                     callbacks=[TrainingCheckPoint(folder, name="m", interval=1)])
    assert sorted(os.listdir(folder)) == ["m_1.json", "m_3.json", "m_4.json", "m_5.json"]
    assert _json(resumed) == _json(_train({"max_depth": 2}, X_REG, Y_REG, 6))


def test_checkpoint_options():
    with pytest.raises(ValueError, match="JSON only"):
        TrainingCheckPoint(".", as_pickle=True)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="interval"):
            TrainingCheckPoint(".", interval=bad)
    assert histboost.TrainingCheckPoint is TrainingCheckPoint
    assert histboost.LearningRateScheduler is LearningRateScheduler
