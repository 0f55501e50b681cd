"""CPU training benchmark: histboost against xgboost (hist), lightgbm, catboost and
scikit-learn's HistGradientBoosting on `higgs_like` data, in one run.

    python bench/cpu.py [--rows 1000000] [--rounds 200] [--depth 8] [--leaves 255]
                        [--repeats 3] [--compare /path/to/other/checkout]

Every library trains in its own subprocess on the same cached arrays (so peak memory is its
own), with all cores, 256 bins, learning rate 0.1; histboost is warmed up first, on enough
rows to run every kernel the timed training runs, so Numba compilation is not timed. Time
covers dataset construction + training. Prints a Markdown table of train time, ms per round,
ratio to histboost, peak RSS and test AUC.

--repeats N runs the whole list of libraries N times in turns, in alternating order (A B C,
C B A, A B C, ...: a drift of the machine over the call touches every library alike) and
reports each one's median, range and samples. --compare DIR adds every histboost
configuration again as `NAME@DIR`, trained by the histboost package found in DIR (another
checkout, e.g. a `git worktree` of main), with its own Numba cache, in turns with this
checkout's: an A/B in one call.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import auc, synth

HERE = Path(__file__).resolve().parent
LIBS = ("histboost", "histboost-depthwise", "histboost-quantized", "lightgbm", "xgboost",
        "catboost", "sklearn")


def run_one(lib: str, data: str, a: argparse.Namespace) -> dict:
    """Train `lib` (a name of LIBS, `@...` ignored: the caller chose the package) on the
    cached arrays; return timing and quality."""
    label, lib = lib, lib.split("@")[0]
    z = np.load(data)
    X, y, Xt, yt = z["X"], z["y"], z["Xt"], z["yt"]
    threads = a.threads or os.cpu_count()
    if lib.startswith("histboost"):
        import histboost
        policy = "depthwise" if lib.endswith("depthwise") else "lossguide"
        params = {"quantized_grad": lib.endswith("quantized"), "objective": "binary:logistic",
                  "learning_rate": 0.1, "max_depth": a.depth,
                  "max_leaves": a.leaves, "grow_policy": policy, "max_bin": a.bins,
                  "nthread": threads, "min_child_weight": 1.0}
        # Compile (or load from the cache) outside the timing every kernel the run uses: the
        # once-a-tree row kernels (gradients, margins, rounding) run in parallel only once
        # half the pool has 16,384 rows a thread (kernels/cpu/backend.py): with a 50k-row
        # warm-up on 16 threads, the first 1M-row training compiled four parallel kernels
        # (two of them for quantised trees) inside its timing
        warm_rows = min(a.rows, max(50_000, 16_384 * threads))
        warm = histboost.Dataset(X[:warm_rows], label=y[:warm_rows], max_bin=a.bins)
        histboost.train(params, warm, 2, verbose_eval=False)
        t0 = time.perf_counter()
        d = histboost.Dataset(X, label=y, max_bin=a.bins)
        b = histboost.train(params, d, a.rounds, verbose_eval=False)
        t = time.perf_counter() - t0
        p = b.predict(Xt)
        extra = {k: round(v, 2) for k, v in b.timings.items()}
    elif lib == "lightgbm":
        import lightgbm as lgb
        params = {"objective": "binary", "learning_rate": 0.1, "num_leaves": a.leaves,
                  "max_depth": a.depth, "max_bin": a.bins - 1, "num_threads": threads,
                  "verbose": -1, "min_sum_hessian_in_leaf": 1.0}
        t0 = time.perf_counter()
        b = lgb.train(params, lgb.Dataset(X, y), a.rounds)
        t = time.perf_counter() - t0
        p = b.predict(Xt)
        extra = {}
    elif lib == "xgboost":
        import xgboost as xgb
        params = {"objective": "binary:logistic", "eta": 0.1, "max_depth": a.depth,
                  "max_leaves": a.leaves, "tree_method": "hist", "max_bin": a.bins,
                  "nthread": threads}
        t0 = time.perf_counter()
        b = xgb.train(params, xgb.DMatrix(X, y, nthread=threads), a.rounds)
        t = time.perf_counter() - t0
        p = b.predict(xgb.DMatrix(Xt))
        extra = {}
    elif lib == "catboost":
        import catboost
        m = catboost.CatBoostClassifier(iterations=a.rounds, learning_rate=0.1, depth=a.depth,
                                        border_count=a.bins - 1, thread_count=threads,
                                        verbose=False, allow_writing_files=False)
        t0 = time.perf_counter()
        m.fit(X, y)
        t = time.perf_counter() - t0
        p = m.predict_proba(Xt)[:, 1]
        extra = {}
    elif lib == "sklearn":
        from sklearn.ensemble import HistGradientBoostingClassifier
        m = HistGradientBoostingClassifier(max_iter=a.rounds, learning_rate=0.1,
                                           max_leaf_nodes=a.leaves, max_depth=a.depth,
                                           max_bins=a.bins - 1, early_stopping=False)
        t0 = time.perf_counter()
        m.fit(X, y)
        t = time.perf_counter() - t0
        p = m.predict_proba(Xt)[:, 1]
        extra = {}
    else:
        raise ValueError(f"unknown library {lib!r}; choose from {LIBS}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"lib": label, "seconds": t, "auc": auc(yt, np.asarray(p, np.float64)),
            "peak_mb": peak_mb, "phases": extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--test-rows", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--leaves", type=int, default=255)
    ap.add_argument("--bins", type=int, default=256)
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--libs", default=",".join(LIBS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1, help="runs of every library, in turns")
    ap.add_argument("--compare", help="another checkout whose histboost runs too, in turns")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(run_one(a.worker, a.data, a)))
        return

    libs = a.libs.split(",")
    if a.compare:
        other = str(Path(a.compare).resolve())
        libs += [f"{lib}@{other}" for lib in libs if lib.startswith("histboost")]
    X, y = synth().higgs_like(a.rows + a.test_rows, seed=a.seed)
    samples: dict[str, list[dict]] = {lib: [] for lib in libs}
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data.npz")
        np.savez(data, X=X[:a.rows], y=y[:a.rows], Xt=X[a.rows:], yt=y[a.rows:])
        del X, y
        for rep in range(a.repeats):
            # turns in alternating order (A B C, C B A, A B C, ...): a machine that speeds
            # up or slows down over the call favours no library's median
            for lib in (libs if rep % 2 == 0 else libs[::-1]):
                env = dict(os.environ)
                if "@" in lib:  # the other checkout's histboost first, its own compile cache
                    other = lib.split("@", 1)[1]
                    env["PYTHONPATH"] = os.pathsep.join(
                        [other, *filter(None, [env.get("PYTHONPATH")])])
                    env["NUMBA_CACHE_DIR"] = os.path.join(
                        env.get("NUMBA_CACHE_DIR", tmp), "compare")
                cmd = [sys.executable, __file__, "--worker", lib, "--data", data,
                       *[f"--{k}={v}" for k, v in (("rounds", a.rounds), ("depth", a.depth),
                                                  ("leaves", a.leaves), ("bins", a.bins),
                                                  ("threads", a.threads))]]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if proc.returncode != 0:
                    print(f"{lib} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                    continue
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                samples[lib].append(r)
                print(f"[{rep + 1}/{a.repeats}] {lib}: {r['seconds']:.2f}s auc {r['auc']:.4f} "
                      f"{r['phases'] or ''}", file=sys.stderr, flush=True)
    results = [{**runs[0], "seconds": statistics.median(r["seconds"] for r in runs),
                "all": [r["seconds"] for r in runs],
                "peak_mb": max(r["peak_mb"] for r in runs)}
               for runs in samples.values() if runs]
    base = next((r["seconds"] for r in results if r["lib"] == "histboost"), None)
    best_auc = max(r["auc"] for r in results)
    print(f"\n{a.rows:,} x 28 higgs_like, {a.rounds} rounds, depth {a.depth} / "
          f"{a.leaves} leaves, {a.bins} bins, {a.threads or os.cpu_count()} threads"
          + (f", median of {a.repeats} runs in turns" if a.repeats > 1 else "") + "\n")
    print("| library | train s | ms/round | ratio to histboost | peak MB | test AUC |"
          + (" runs (s) |" if a.repeats > 1 else ""))
    print("|---|---|---|---|---|---|" + ("---|" if a.repeats > 1 else ""))
    for r in results:
        ratio = f"{r['seconds'] / base:.2f}" if base else "-"
        runs = (" " + " / ".join(f"{t:.2f}" for t in r["all"]) + " |") if a.repeats > 1 else ""
        print(f"| {r['lib']} | {r['seconds']:.2f} | {1000 * r['seconds'] / a.rounds:.0f} | "
              f"{ratio} | {r['peak_mb']:.0f} | {r['auc']:.4f} |{runs}")
    print(f"\nbest AUC {best_auc:.4f}")


if __name__ == "__main__":
    main()
