"""First-run benchmark: `examples/train_higgs.py` in fresh processes sharing one empty
``NUMBA_CACHE_DIR``: the first run compiles every kernel it uses (cold), the next ones load them
from the cache (warm).

    python bench/cold_start.py [--runs 3] [--warm 2]

Prints the wall-clock seconds of each process (interpreter start to exit) and the median of
the cold and of the warm runs. Each cold run gets a cache directory of its own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(cache_dir: str) -> float:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir,
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "examples" / "train_higgs.py")], env=env,
                   check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="cold runs, each on a new cache")
    ap.add_argument("--warm", type=int, default=2, help="warm runs after each cold one")
    a = ap.parse_args()
    cold, warm = [], []
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(run(cache))
            warm += [run(cache) for _ in range(a.warm)]
        print(f"cold {cold[-1]:.2f}s, warm {' '.join(f'{w:.2f}s' for w in warm[-a.warm:])}",
              flush=True)
    print(f"\nexamples/train_higgs.py, {os.cpu_count()} cores: cold (empty NUMBA_CACHE_DIR) "
          f"{statistics.median(cold):.2f}s, warm {statistics.median(warm):.2f}s (medians)")


if __name__ == "__main__":
    main()
