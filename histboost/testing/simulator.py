"""Suites of CUDA-backend checks run under Numba's CUDA simulator (CI has no GPU).

The simulator is chosen when `numba.cuda` is first imported, so a suite is a script run in a
fresh process with `NUMBA_ENABLE_CUDASIM=1` (`start_script`, `run_script`); the script's
`main` runs every check and reports each one (`run_checks`), so one failing check does not
hide the others.

The suites are the slowest part of the test run (minutes of single-threaded Python each),
so the test session starts them as soon as their tests are collected and runs their tests
last (`tests/conftest.py`): they run on the machine's other cores beside the rest of the
tests, and each suite's test then waits for its process's result."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def run_checks(checks: Sequence[tuple[str, Callable[[], None]]]) -> int:
    """Run every (name, check): an "ok NAME (seconds)" line, or the traceback and a
    "FAIL NAME: error" line, then "P passed, F failed". Returns the exit status: 1 when any
    check failed, else 0."""
    failed = 0
    for name, fn in checks:
        t0 = time.perf_counter()
        try:
            fn()
            print(f"ok   {name} ({time.perf_counter() - t0:.1f}s)", flush=True)
        except Exception as e:  # report every failing check, then fail
            failed += 1
            traceback.print_exc()
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


class ScriptRun:
    """One suite script run under the simulator in its own process, started by `start` (or
    by `check` if nothing started it); its output goes to a temporary file (a pipe nobody
    reads while the script runs would fill and block it)."""

    def __init__(self, script: Path, timeout: float) -> None:
        self.script = Path(script)
        self.timeout = timeout
        self.deadline = float("inf")
        self._proc: subprocess.Popen | None = None
        self._output: Any = None
        self._stopped = False

    def start(self) -> None:
        """Start the script in a fresh process (once), its checkout (the folder holding its
        tests/ folder) first on PYTHONPATH: the code under test, not an installed copy."""
        with _LOCK:
            if self._proc is not None or self._stopped:
                return
            root = self.script.resolve().parents[2]
            env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "OMP_NUM_THREADS": "1",
                   "PYTHONPATH": os.pathsep.join([str(root),
                                                  os.environ.get("PYTHONPATH", "")])}
            self.deadline = time.monotonic() + self.timeout
            self._output = tempfile.TemporaryFile(mode="w+")
            self._proc = subprocess.Popen([sys.executable, str(self.script)], env=env,
                                          stdout=self._output, stderr=subprocess.STDOUT,
                                          text=True)

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def check(self) -> None:
        """Wait for the script (started now if it was not) up to `timeout` seconds from its
        start; AssertionError with the output's tail unless every check passed."""
        self.start()
        assert self._proc is not None, f"{self.script.name} was stopped"
        try:
            code = self._proc.wait(max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            code = None
        self._output.seek(0)
        out = self._output.read()
        assert code is not None, f"{self.script.name} timed out\n{out[-5000:]}"
        assert code == 0, out[-10000:]
        assert " 0 failed" in out, out[-5000:]

    def stop(self) -> None:
        """Kill the script if it runs; a script not started yet never starts."""
        with _LOCK:
            self._stopped = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


_LOCK = threading.Lock()
_RUNS: dict[Path, ScriptRun] = {}
_STOP = threading.Event()


def script_run(script: Path, timeout: float = 900.0) -> ScriptRun:
    """The run of the check script `script` (under tests/<folder>/ of a checkout), made
    once; `timeout`: the seconds it may take from its start."""
    key = Path(script).resolve()
    with _LOCK:
        if key not in _RUNS:
            _RUNS[key] = ScriptRun(key, timeout)
        return _RUNS[key]


def start_scripts(scripts: Sequence[Path], parallel: int | None = None) -> None:
    """Run `scripts` in the background, in this order, at most `parallel` at a time (default:
    one fewer than the machine's cores, at least one), so that they run beside the test
    session's own process without oversubscribing the cores (tests with timeouts share
    them)."""
    runs = [script_run(s) for s in scripts]
    slots = parallel or max(1, (os.cpu_count() or 2) - 1)
    _STOP.clear()

    def chain() -> None:
        pending, active = list(runs), []
        while (pending or active) and not _STOP.is_set():
            active = [r for r in active if r.running()]
            while pending and len(active) < slots:
                run = pending.pop(0)
                run.start()  # a no-op when its test started it first
                if run.running():
                    active.append(run)
            _STOP.wait(0.2)

    threading.Thread(target=chain, name="simulator-suites", daemon=True).start()


def run_script(script: Path) -> None:
    """Run the check script `script` (or wait for it, if `start_scripts` started it) and
    check its result (`ScriptRun.check`)."""
    script_run(script).check()


def stop_scripts() -> None:
    """Stop the background chain and kill every script still running."""
    _STOP.set()
    with _LOCK:
        runs = list(_RUNS.values())
        _RUNS.clear()
    for run in runs:
        run.stop()
