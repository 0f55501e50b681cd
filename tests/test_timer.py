"""`PhaseTimer`: each block's wall time charged to its phase, the sync hook around it."""

from __future__ import annotations

import time

import pytest

from histboost.timer import PhaseTimer


def test_blocks_are_charged_to_their_phase_and_errors_pass_through():
    syncs = []
    timer = PhaseTimer(sync=lambda: syncs.append(time.perf_counter()))
    with timer("a"):
        time.sleep(0.02)
    with pytest.raises(ValueError, match="inside"):
        with timer("a"):
            time.sleep(0.01)
            raise ValueError("inside")
    with timer("b"):
        pass
    assert set(timer.seconds) == {"a", "b"}
    assert timer.seconds["a"] >= 0.03 and timer.seconds["b"] < 0.01
    # synchronised before and after every block, the failing one included
    assert len(syncs) == 6
    assert "a 0.0" in timer.summary()
