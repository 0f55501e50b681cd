"""First-run benchmark: `examples/train_higgs.py` in fresh processes sharing one empty
``NUMBA_CACHE_DIR``: the first run compiles every kernel it uses (cold), the next ones load them
from the cache (warm).

    python bench/cold_start.py [--runs 3] [--warm 2]

Prints, for each process (interpreter start to exit), the wall-clock seconds and the CPU
seconds (user + system, all threads), then the medians of the cold and of the warm runs. Each
cold run gets a cache directory of its own. On a machine shared with other work the CPU seconds
are the steadier figure: the wall time includes waiting for a core.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cache_dir: str) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of the example with NUMBA_CACHE_DIR=cache_dir."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir,
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    before = _cpu()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "examples" / "train_higgs.py")], env=env,
                   check=True, capture_output=True)
    return time.perf_counter() - t0, _cpu() - before


def _fmt(runs: list[tuple[float, float]]) -> str:
    return " ".join(f"{w:.2f}s ({c:.2f})" for w, c in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="cold runs, each on a new cache")
    ap.add_argument("--warm", type=int, default=2, help="warm runs after each cold one")
    a = ap.parse_args()
    cold: list[tuple[float, float]] = []
    warm: list[tuple[float, float]] = []
    print("wall seconds (CPU seconds)", flush=True)
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(run(cache))
            warm += [run(cache) for _ in range(a.warm)]
        print(f"cold {_fmt(cold[-1:])}, warm {_fmt(warm[-a.warm:]) if a.warm else '-'}",
              flush=True)

    def med(runs: list[tuple[float, float]], i: int) -> str:
        return f"{statistics.median(r[i] for r in runs):.2f}s" if runs else "-"

    print(f"\nexamples/train_higgs.py, {os.cpu_count()} cores, medians: cold (empty "
          f"NUMBA_CACHE_DIR) {med(cold, 0)} wall, {med(cold, 1)} CPU; warm {med(warm, 0)} "
          f"wall, {med(warm, 1)} CPU")


if __name__ == "__main__":
    main()
