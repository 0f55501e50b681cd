"""The runner of the CUDA simulator suites (`histboost.testing.simulator`): a suite's result
is read back whether its checks pass, fail or hang, and a started suite is not started twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from histboost.testing import simulator

SCRIPT = '''
import os, sys, time
from histboost.testing.simulator import run_checks

def ok():
    assert os.environ["NUMBA_ENABLE_CUDASIM"] == "1"

def bad():
    raise ValueError("wrong sums")

def slow():
    time.sleep(60)

sys.exit(run_checks([(name, globals()[name]) for name in sys.argv[1:] or {checks!r}]))
'''


def _script(tmp_path: Path, name: str, checks: list[str]) -> Path:
    """A suite script under <tmp>/tests/suites/ (the runner puts <tmp> first on the path)."""
    folder = tmp_path / "tests" / "suites"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(SCRIPT.format(checks=checks))
    return path


@pytest.fixture(autouse=True)
def _stop_started(tmp_path):
    """Stop this test's scripts only (the session's suites run beside it)."""
    yield
    for key in [k for k in simulator._RUNS if tmp_path.resolve() in k.parents]:
        simulator._RUNS.pop(key).stop()


def test_passing_suite_checks(tmp_path):
    simulator.run_script(_script(tmp_path, "good.py", ["ok", "ok"]))


def test_failing_check_is_reported_with_its_error(tmp_path):
    with pytest.raises(AssertionError, match="FAIL bad: ValueError: wrong sums"):
        simulator.run_script(_script(tmp_path, "bad.py", ["ok", "bad", "ok"]))


def test_hanging_suite_times_out(tmp_path):
    run = simulator.script_run(_script(tmp_path, "slow.py", ["slow"]), timeout=1.0)
    with pytest.raises(AssertionError, match="slow.py timed out"):
        run.check()


def test_background_suites_run_in_order_and_are_waited_for(tmp_path):
    scripts = [_script(tmp_path, f"s{i}.py", ["ok"]) for i in range(3)]
    simulator.start_scripts(scripts, parallel=1)
    runs = [simulator.script_run(s) for s in scripts]
    assert simulator.script_run(scripts[0]) is runs[0]  # one run a script
    runs[2].check()  # waits for its own script, whether or not the chain reached it
    runs[0].check()
    runs[1].check()


def test_stopped_suite_fails_its_check(tmp_path):
    run = simulator.script_run(_script(tmp_path, "stopped.py", ["slow"]))
    run.start()
    run.stop()
    with pytest.raises(AssertionError):
        run.check()
