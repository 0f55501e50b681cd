"""Suites of CUDA-backend checks run under Numba's CUDA simulator (CI has no GPU).

The simulator is chosen when `numba.cuda` is first imported, so a suite is a script that a
pytest test starts in a fresh process with `NUMBA_ENABLE_CUDASIM=1` (`run_script`); the
script's `main` runs every check and reports each one (`run_checks`), so one failing check
does not hide the others."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path


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


def run_script(script: Path, timeout: float = 900.0) -> None:
    """Run the check script `script` (under tests/<folder>/ of a checkout) in a fresh process
    under the simulator, that checkout first on PYTHONPATH (the code under test, not an
    installed copy); AssertionError with the output's tail unless every check passed."""
    root = Path(script).resolve().parents[2]
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-5000:]
    assert " 0 failed" in res.stdout, res.stdout[-5000:]
