"""Where a sparse training's time goes at several thread counts: histboost on `sparse_like`
(as `bench/sparse.py`), a few trees per run, each run in its own process.

    python bench/sparse_scaling.py [--threads 1,4,16] [--trees 10] [--rows 200000]
        [--set _LOOP_MIN_THREADS=99 ...] [--kernels] [--profile N] [--cache DIR]

For each thread count: wall and CPU seconds of training (after a warm-up on a slice, so no
compilation is timed), `Booster.timings` (wall seconds per phase), and the wall seconds and
call counts of the sparse backend's steps (builds, subtractions, searches, partitions, margin
updates), with the mean size of their work (rows, nodes, list slots, rows). --set changes
module constants of `histboost.kernels.cpu.sparse_backend` in the worker, or class attributes
(`SparseCPUBackend.best_first_batch=4`), for an A/B of settings in one call. --kernels also
times each kernel of `histboost.kernels.cpu.sparse` the backend calls (a step's wall time
less its kernels' is its Python and NumPy work), and prints the Python between kernels: the
wall time less the kernels', the gradient phase's and the margin updates', in seconds and
per split-search step (on the pool's 2-3 threads kernels overlap, so there it is only a
bound; one thread, or `--set _LOOP_MIN_THREADS=1`, runs the many-thread path's Python on
one). Run from this checkout with another's `PYTHONPATH`, it measures that checkout's
histboost. --profile N prints the N functions of most own time under cProfile (the calling
thread's Python: a compiled kernel's time is its own). --cache DIR keeps the data there for
later runs. CPU time over wall time is the threads kept busy.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np
from _common import synth

STEPS = {  # backend method -> the size of its work
    "build_histograms": lambda be, nodes: sum(e - s for s, e in be._ranges.bounds(nodes)),
    "subtract_histograms": lambda be, parents, *a: len(parents),
    "find_best_splits": lambda be, nodes, *a, **k: sum(be._hist[n][0].shape[0] for n in nodes),
    "_partition": lambda be, bounds, *a: sum(e - s for s, e in bounds),
    "update_margin": lambda be, *a: 0,
}


def worker(a: argparse.Namespace) -> dict:
    import scipy.sparse as sp

    import histboost
    import histboost.callback
    from histboost.kernels.cpu import sparse_backend

    kernels: dict[str, list] = defaultdict(list)
    if a.kernels:
        # the backend's module reference replaced by a proxy whose kernels are timed (the
        # kernels themselves untouched: they call one another as compiled globals)
        from histboost.kernels.cpu import sparse

        class Timed:
            def __getattr__(self, name):
                kernel = getattr(sparse, name)
                if not hasattr(kernel, "py_func"):
                    return kernel

                def timed_kernel(*args, _kernel=kernel, _name=name):
                    t0 = time.perf_counter()
                    out = _kernel(*args)
                    kernels[_name].append(time.perf_counter() - t0)
                    return out
                return timed_kernel
        sparse_backend.sparse = Timed()
    for item in a.set:
        name, value = item.split("=")
        owner, _, attr = name.rpartition(".")
        setattr(getattr(sparse_backend, owner) if owner else sparse_backend, attr, int(value))
    steps: dict[str, list] = defaultdict(list)
    for name, size in STEPS.items():
        orig = getattr(sparse_backend.SparseCPUBackend, name)

        def timed(self, *args, _orig=orig, _name=name, _size=size, **kwargs):
            t0 = time.perf_counter()
            out = _orig(self, *args, **kwargs)
            steps[_name].append((_size(self, *args, **kwargs), time.perf_counter() - t0))
            return out
        setattr(sparse_backend.SparseCPUBackend, name, timed)
    X = sp.load_npz(os.path.join(a.data, "X.npz")).tocsr()
    y = np.load(os.path.join(a.data, "y.npy"))
    params = {"objective": "binary:logistic", "learning_rate": 0.1, "max_depth": 0,
              "max_leaves": a.leaves, "grow_policy": "lossguide", "max_bin": 256,
              "nthread": a.worker_threads}
    warm = histboost.Dataset(X[:20_000], label=y[:20_000])
    histboost.train(params, warm, 2, verbose_eval=False)
    d = histboost.Dataset(X, label=y)
    d.construct()
    steps.clear()
    kernels.clear()
    ends: list[float] = []

    class Clock(histboost.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log) -> bool:
            ends.append(time.perf_counter())
            return False

    profile = cProfile.Profile() if a.profile else None
    c0, t0 = time.process_time(), time.perf_counter()
    if profile:
        profile.enable()
    b = histboost.train(params, d, a.trees, verbose_eval=False,
                        callbacks=[Clock()])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    top = ""
    if profile:
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(a.profile)
        top = text.getvalue()
    # wall seconds of each tenth of the trees
    per_tree = np.diff(np.array([t0, *ends]))
    tenths = [round(float(x.sum()), 3) for x in np.array_split(per_tree, min(10, a.trees))]
    return {"threads": a.worker_threads, "wall": wall, "cpu": cpu, "tenths": tenths,
            "profile": top,
            "phases": {k: round(v, 3) for k, v in b.timings.items()},
            "steps": {k: [len(v), round(sum(t for _, t in v), 3),
                          round(float(np.mean([s for s, _ in v])), 0) if v else 0]
                      for k, v in steps.items()},
            "kernels": {k: [len(v), round(sum(v), 3)] for k, v in kernels.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--cols", type=int, default=100_000)
    ap.add_argument("--trees", type=int, default=10)
    ap.add_argument("--leaves", type=int, default=63)
    ap.add_argument("--threads", default="1,4,16")
    ap.add_argument("--set", action="append", default=[],
                    help="NAME=INT: a sparse_backend constant in the worker")
    ap.add_argument("--kernels", action="store_true",
                    help="time the sparse kernels the backend calls")
    ap.add_argument("--profile", type=int, default=0,
                    help="print the N functions of most own time (cProfile)")
    ap.add_argument("--cache", help="keep the data in this folder (reused when there)")
    ap.add_argument("--worker-threads", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker_threads:
        print(json.dumps(worker(a)))
        return
    import scipy.sparse as sp

    with tempfile.TemporaryDirectory() as tmp:
        if a.cache:
            os.makedirs(a.cache, exist_ok=True)
            tmp = a.cache
        if not os.path.exists(os.path.join(tmp, "y.npy")):
            # the training rows of bench/sparse.py's data (its test rows generated, left out)
            X, y = synth().sparse_like(a.rows + 50_000, seed=0, n_features=a.cols)
            sp.save_npz(os.path.join(tmp, "X.npz"), X.tocsr()[:a.rows], compressed=False)
            np.save(os.path.join(tmp, "y.npy"), y[:a.rows])
            del X, y
        print(f"{a.rows:,} x {a.cols:,} sparse_like, {a.trees} trees, {a.leaves} leaves"
              + (f", {' '.join(a.set)}" if a.set else ""))
        for t in [int(x) for x in a.threads.split(",")]:
            cmd = [sys.executable, __file__, "--worker-threads", str(t), "--data", tmp,
                   "--trees", str(a.trees), "--leaves", str(a.leaves),
                   "--profile", str(a.profile), *[f"--set={s}" for s in a.set],
                   *(["--kernels"] if a.kernels else [])]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{t} threads failed:\n{proc.stderr[-2000:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"\n{t} threads: wall {r['wall']:.2f} s, CPU {r['cpu']:.2f} s "
                  f"({r['cpu'] / r['wall']:.1f} busy); phases {r['phases']}")
            print(f"  tenths of the trees, wall s: {r['tenths']}")
            for name, (calls, secs, size) in r["steps"].items():
                print(f"  {name:20s} {calls:5d} calls {secs:7.3f} s "
                      f"{1e3 * secs / max(calls, 1):7.3f} ms/call, mean size {size:,.0f}")
            for name, (calls, secs) in sorted(r["kernels"].items(), key=lambda kv: -kv[1][1]):
                print(f"    kernel {name:26s} {calls:5d} calls {secs:7.3f} s "
                      f"{1e3 * secs / max(calls, 1):7.3f} ms/call")
            if r["kernels"]:
                py = (r["wall"] - sum(secs for _, secs in r["kernels"].values())
                      - r["phases"].get("gradient", 0.0) - r["phases"].get("predict", 0.0))
                steps = r["steps"].get("find_best_splits", [0])[0]
                print(f"  Python between kernels {py:.3f} s, "
                      f"{1e3 * py / max(steps, 1):.3f} ms a search step")
            print(r["profile"])


if __name__ == "__main__":
    main()
