"""Sparse training benchmark: histboost, LightGBM and XGBoost (hist) on `sparse_like` CSR data
(CTR-like: ~25 stored values a row over 100,000 columns, zipf-popular columns), in one run.

    python bench/sparse.py [--rows 200000] [--cols 100000] [--rounds 100] [--leaves 63]
    python bench/sparse.py --libs histboost-cuda,histboost,histboost-cuda-quantized

`histboost-cuda` / `histboost-cuda-quantized` train on the GPU (`device="cuda"`, the data
sparse on the device, `histboost.kernels.cuda.sparse`); their rows add the peak device memory
(torch's allocator, from the dataset on).

Every library trains in its own subprocess on the same cached CSR matrix (so peak memory is its
own: the data, ~60 MB at the defaults, is in every figure), best-first with `--leaves` leaves,
learning rate 0.1, 256 bins, all cores; histboost's kernels are compiled into Numba's cache in a
process of its own first, and warmed up in the timed process, so compilation is neither timed
nor in the peak memory. Time covers dataset construction + training (scipy CSR in, nothing
densified), as wall seconds and as the process's CPU seconds (all its threads: the steadier
figure on a shared machine). Prints a Markdown table of train time, ratio to histboost, CPU
time, peak RSS and test AUC; a library still training after --timeout seconds is reported as
such.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from _common import auc, synth

LIBS = ("histboost", "histboost-quantized", "lightgbm", "xgboost")
GPU_LIBS = ("histboost-cuda", "histboost-cuda-quantized")


def run_one(lib: str, data: str, a: argparse.Namespace) -> dict:
    """Train `lib` on the cached matrices; return timing and quality."""
    import scipy.sparse as sp

    z = np.load(os.path.join(data, "y.npz"))
    y, yt = z["y"], z["yt"]
    X = sp.load_npz(os.path.join(data, "X.npz")).tocsr()
    Xt = sp.load_npz(os.path.join(data, "Xt.npz")).tocsr()
    threads = a.threads or os.cpu_count()
    extra: dict = {}
    if lib == "warm":  # compile histboost's kernels (float and quantised) into the cache
        import histboost
        d = histboost.Dataset(X[:20_000], label=y[:20_000], max_bin=a.bins)
        # the CPU engine's only: Numba's CUDA kernels are not cached on disk, each GPU worker
        # compiles them in its warm-up anyway
        for quantised in {lib.endswith("quantized") for lib in a.libs.split(",")
                          if lib.startswith("histboost")}:
            params = {"objective": "binary:logistic", "max_depth": 0, "max_leaves": a.leaves,
                      "grow_policy": "lossguide", "nthread": threads,
                      "quantized_grad": quantised, "device": "cpu"}
            histboost.train(params, d, 2, verbose_eval=False).predict(Xt[:10])
            # one round on all rows: the kernels of large inputs (parallel gradients and
            # margins) too, else the first timed run compiles them (16-core host: 1.3 s)
            histboost.train(params, histboost.Dataset(X, label=y, max_bin=a.bins), 1,
                            verbose_eval=False)
        return {"lib": lib}
    if lib.startswith("histboost"):
        import histboost
        params = {"objective": "binary:logistic", "learning_rate": 0.1, "max_depth": 0,
                  "max_leaves": a.leaves, "grow_policy": "lossguide", "max_bin": a.bins,
                  "nthread": threads, "quantized_grad": lib.endswith("quantized"),
                  "device": _device(lib)}
        warm = histboost.Dataset(X[:20_000], label=y[:20_000], max_bin=a.bins)
        histboost.train(params, warm, 2, verbose_eval=False)
        histboost.Booster.predict(histboost.train(params, warm, 1, verbose_eval=False), Xt[:10])
        gpu_before = None  # device memory held before the timed run
        if lib in GPU_LIBS:
            import torch
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            gpu_before = torch.cuda.memory_allocated()
        c0, t0 = time.process_time(), time.perf_counter()
        d = histboost.Dataset(X, label=y, max_bin=a.bins)
        d.construct()
        t_data = time.perf_counter() - t0
        b = histboost.train(params, d, a.rounds, verbose_eval=False)
        t, cpu = time.perf_counter() - t0, time.process_time() - c0
        p = b.predict(Xt)
        extra = {"dataset": round(t_data, 2), "stored_MB": round(d.bins.nbytes / 2**20, 1),
                 **{k: round(v, 2) for k, v in b.timings.items()}}
        if gpu_before is not None:
            extra["gpu_peak_MB"] = round(
                (torch.cuda.max_memory_allocated() - gpu_before) / 2**20)
    elif lib == "lightgbm":
        import lightgbm as lgb
        params = {"objective": "binary", "learning_rate": 0.1, "num_leaves": a.leaves,
                  "max_bin": a.bins - 1, "num_threads": threads, "verbose": -1}
        c0, t0 = time.process_time(), time.perf_counter()
        b = lgb.train(params, lgb.Dataset(X, y), a.rounds)
        t, cpu = time.perf_counter() - t0, time.process_time() - c0
        p = b.predict(Xt)
    elif lib == "xgboost":
        import xgboost as xgb
        params = {"objective": "binary:logistic", "eta": 0.1, "max_depth": 0,
                  "max_leaves": a.leaves, "grow_policy": "lossguide", "tree_method": "hist",
                  "max_bin": a.bins, "nthread": threads}
        c0, t0 = time.process_time(), time.perf_counter()
        b = xgb.train(params, xgb.DMatrix(X, y, nthread=threads), a.rounds)
        t, cpu = time.perf_counter() - t0, time.process_time() - c0
        p = b.predict(xgb.DMatrix(Xt))
    else:
        raise ValueError(f"unknown library {lib!r}; choose from {LIBS}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"lib": lib, "seconds": t, "cpu": cpu, "auc": auc(yt, np.asarray(p, np.float64)),
            "peak_mb": peak_mb, "phases": extra}


def _device(lib: str) -> str:
    return "cuda" if lib in GPU_LIBS else "cpu"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--test-rows", type=int, default=50_000)
    ap.add_argument("--cols", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--leaves", type=int, default=63)
    ap.add_argument("--bins", type=int, default=256)
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--libs", default=",".join(LIBS), help=f"of {LIBS + GPU_LIBS}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds a library may take (data, warm-up and training)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(run_one(a.worker, a.data, a)))
        return

    import scipy.sparse as sp

    X, y = synth().sparse_like(a.rows + a.test_rows, seed=a.seed, n_features=a.cols)
    X = X.tocsr()
    stored = X.nnz / X.shape[0]
    with tempfile.TemporaryDirectory() as tmp:
        sp.save_npz(os.path.join(tmp, "X.npz"), X[:a.rows], compressed=False)
        sp.save_npz(os.path.join(tmp, "Xt.npz"), X[a.rows:], compressed=False)
        np.savez(os.path.join(tmp, "y.npz"), y=y[:a.rows], yt=y[a.rows:])
        del X, y
        results = []
        libs = a.libs.split(",")
        if any(lib.startswith("histboost") for lib in libs):
            # fill Numba's cache in a process of its own: compiling takes hundreds of MB,
            # which a timed worker (loading the compiled kernels) should not count
            subprocess.run([sys.executable, __file__, "--worker", "warm", "--data", tmp,
                            "--threads", str(a.threads), "--libs", a.libs],
                           capture_output=True, check=True)
        for lib in libs:
            cmd = [sys.executable, __file__, "--worker", lib, "--data", tmp,
                   *[f"--{k}={v}" for k, v in (("rounds", a.rounds), ("leaves", a.leaves),
                                              ("bins", a.bins), ("threads", a.threads))]]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
            except subprocess.TimeoutExpired:
                print(f"{lib}: still running after {a.timeout:.0f} s, stopped", file=sys.stderr)
                results.append({"lib": lib, "timeout": a.timeout})
                continue
            if proc.returncode != 0:
                print(f"{lib} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            results.append(r)
            print(f"{lib}: {r['seconds']:.2f}s auc {r['auc']:.4f} {r['phases'] or ''}",
                  file=sys.stderr, flush=True)
    done = [r for r in results if "seconds" in r]
    base = next((r["seconds"] for r in done if r["lib"] == "histboost"), None)
    print(f"\n{a.rows:,} x {a.cols:,} sparse_like ({stored:.1f} stored values a row), "
          f"{a.rounds} rounds, {a.leaves} leaves, {a.bins} bins, "
          f"{a.threads or os.cpu_count()} threads\n")
    print("| library | train s | ratio to histboost | CPU s | peak MB | GPU peak MB | test AUC |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        if "seconds" not in r:
            print(f"| {r['lib']} | > {r['timeout']:.0f} (stopped) | - | - | - | - | - |")
            continue
        ratio = f"{r['seconds'] / base:.2f}" if base else "-"
        gpu = (r.get("phases") or {}).get("gpu_peak_MB", "-")
        print(f"| {r['lib']} | {r['seconds']:.2f} | {ratio} | {r['cpu']:.2f} | "
              f"{r['peak_mb']:.0f} | {gpu} | {r['auc']:.4f} |")
    if done:
        print(f"\nbest AUC {max(r['auc'] for r in done):.4f}")


if __name__ == "__main__":
    main()
