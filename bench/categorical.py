"""Categorical features benchmark: histboost (ordered target statistics, combinations)
against CatBoost (cat_features), LightGBM (categorical_feature) and XGBoost
(enable_categorical) on the Adult census data and on `ctr_like` (13 dense + 26
high-cardinality categorical columns), in one run.

    python bench/categorical.py [--sets adult,ctr200k,ctr1m] [--depth 6] [--threads 0]
    python bench/categorical.py --device cuda --libs histboost,histboost:cpu,lightgbm,xgboost

`--device cuda` trains histboost on the GPU (statistics, combinations and trees on the device;
a library name `histboost:cpu` / `histboost:cuda` picks the device for that row, so both can be
timed in one run). CatBoost's GPU mode (`task_type="GPU"`) is timed with `--libs catboost:gpu`;
on the lent GPU machines CatBoost comes from a stripped copy of its wheel (`.whl/cb.tar.xz`,
`bench/categorical_check.sh`).

Depth 6, learning rate 0.1; Adult 300 rounds, ctr_like 100 rounds (80/20 split). Every
library gets the raw categorical columns its own way (LightGBM and XGBoost: pandas category
columns, the ids as categories). histboost is warmed up first so that Numba compilation is not
timed. Time covers dataset construction + training. Prints a Markdown table per data set:
train time (wall), ratio to histboost, the process's CPU time over the same span and its
ratio (the steadier figure for 1-thread runs on a shared machine), test AUC and logloss, and
the wall time of predicting the test set from raw values (histboost with `--device cuda`:
on the GPU, the statistics built there; a warm-up prediction of 1000 rows first; CatBoost
predicts on the CPU, also after training on the GPU). With `--device cuda` and integer ids
(ctr_like), "device predict s" times histboost predicting the test set from one CUDA tensor
already on the GPU (ids hashed there).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd
from _common import auc, synth

LIBS = ("histboost", "catboost", "lightgbm", "xgboost")


def logloss(y: np.ndarray, p: np.ndarray) -> float:
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def load(name: str) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame, np.ndarray, list[str], int]:
    """(X, y, Xt, yt, categorical column names, rounds) of a data set."""
    if name == "adult":
        from histboost.datasets import load_adult

        X, y = load_adult("train")
        Xt, yt = load_adult("test")
        cats = [c for c in X.columns if X[c].dtype.kind not in "biuf"]
        return X, y, Xt, yt, cats, 300
    rows = {"ctr200k": 200_000, "ctr1m": 1_000_000}[name]
    n_test = rows // 4  # 80/20 of the whole
    dense, ids, y = synth().ctr_like(rows + n_test, seed=0)
    frame = pd.DataFrame(dense.astype(np.float64), columns=[f"d{i}" for i in range(13)])
    cats = [f"c{i}" for i in range(ids.shape[1])]
    for i, c in enumerate(cats):
        frame[c] = ids[:, i]
    y = y.astype(np.float64)
    return (frame.iloc[:rows].reset_index(drop=True), y[:rows],
            frame.iloc[rows:].reset_index(drop=True), y[rows:], cats, 100)


def as_category(X: pd.DataFrame, Xt: pd.DataFrame, cats: list[str]
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """pandas category columns with the training set's categories (LightGBM, XGBoost)."""
    X, Xt = X.copy(), Xt.copy()
    for c in cats:
        X[c] = X[c].astype("category")
        known = X[c].cat.categories
        Xt[c] = pd.Categorical(Xt[c].where(Xt[c].isin(known)), categories=known)
    return X, Xt


def device_predict(b, Xt: pd.DataFrame, p_host: np.ndarray) -> float:
    """Seconds histboost's GPU prediction takes on the test set held in one float64 CUDA
    tensor (integer ids exact below 2**53), after a warm-up; checks it equals the prediction
    from the host frame."""
    import torch

    T = torch.from_numpy(Xt.to_numpy(np.float64)).to("cuda")
    b.predict(T[:1000])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    p = b.predict(T)  # a host array: the prediction has finished
    seconds = time.perf_counter() - t0
    if not np.array_equal(p, p_host):
        raise AssertionError("prediction from the device tensor differs from the host frame's")
    return seconds


def run(lib: str, data: tuple, a: argparse.Namespace, policy: str) -> dict:
    X, y, Xt, yt, cats, rounds = data
    threads = a.threads or os.cpu_count()
    extra: dict = {}
    if lib.split(":")[0] == "histboost":
        import histboost

        device = lib.split(":")[1] if ":" in lib else a.device
        params = {"objective": "binary:logistic", "learning_rate": 0.1, "max_depth": a.depth,
                  "grow_policy": policy, "reg_lambda": 3.0, "nthread": threads,
                  "max_ctr_complexity": a.complexity, "device": device}
        if a.quantized:
            params["quantized_grad"] = True
        histboost.train(params, histboost.Dataset(X.iloc[:2000], label=y[:2000],
                                                  categorical_features=cats), 2,
                        verbose_eval=False)
        t0, c0 = time.perf_counter(), time.process_time()
        b = histboost.train(params, histboost.Dataset(X, label=y, categorical_features=cats),
                            rounds, verbose_eval=False)
        t, cpu = time.perf_counter() - t0, time.process_time() - c0
        b.predict(Xt.iloc[:1000])  # the prediction kernels compiled, the tables uploaded
        t1 = time.perf_counter()
        p = b.predict(Xt)
        extra = {"phases": {k: round(v, 2) for k, v in b.timings.items()},
                 "predict": time.perf_counter() - t1}
        if device.startswith("cuda") and all(Xt[c].dtype.kind in "iu" for c in cats):
            extra["device_predict"] = device_predict(b, Xt, p)
    elif lib.split(":")[0] == "catboost":
        import catboost

        gpu = lib == "catboost:gpu"
        m = catboost.CatBoostClassifier(iterations=rounds, learning_rate=0.1, depth=a.depth,
                                        thread_count=threads, verbose=False,
                                        allow_writing_files=False,
                                        **({"task_type": "GPU", "devices": "0"} if gpu
                                           else {}))
        Xc, Xtc = X.copy(), Xt.copy()
        for c in cats:  # CatBoost takes strings or integers; NaN must be a string
            if Xc[c].dtype.kind not in "iu":
                Xc[c] = Xc[c].astype(object).fillna("nan").astype(str)
                Xtc[c] = Xtc[c].astype(object).fillna("nan").astype(str)
        t0, c0 = time.perf_counter(), time.process_time()
        m.fit(Xc, y, cat_features=cats)
        t, cpu = time.perf_counter() - t0, time.process_time() - c0
        t1 = time.perf_counter()
        p = m.predict_proba(Xtc)[:, 1]
        extra = {"predict": time.perf_counter() - t1}
    elif lib == "lightgbm":
        import lightgbm as lgb

        Xc, Xtc = as_category(X, Xt, cats)
        params = {"objective": "binary", "learning_rate": 0.1, "max_depth": a.depth,
                  "num_leaves": 2 ** a.depth - 1, "num_threads": threads, "verbose": -1}
        t0, c0 = time.perf_counter(), time.process_time()
        b = lgb.train(params, lgb.Dataset(Xc, y, categorical_feature=cats), rounds)
        t, cpu = time.perf_counter() - t0, time.process_time() - c0
        t1 = time.perf_counter()
        p = b.predict(Xtc)
        extra = {"predict": time.perf_counter() - t1}
    elif lib == "xgboost":
        import xgboost as xgb

        Xc, Xtc = as_category(X, Xt, cats)
        params = {"objective": "binary:logistic", "eta": 0.1, "max_depth": a.depth,
                  "tree_method": "hist", "nthread": threads}
        t0, c0 = time.perf_counter(), time.process_time()
        b = xgb.train(params, xgb.DMatrix(Xc, y, enable_categorical=True, nthread=threads),
                      rounds)
        t, cpu = time.perf_counter() - t0, time.process_time() - c0
        t1 = time.perf_counter()
        p = b.predict(xgb.DMatrix(Xtc, enable_categorical=True))
        extra = {"predict": time.perf_counter() - t1}
    else:
        raise ValueError(f"unknown library {lib!r}; choose from {LIBS}")
    p = np.asarray(p, np.float64)
    return {"lib": lib, "seconds": t, "cpu": cpu, "auc": auc(yt, p), "logloss": logloss(yt, p),
            **extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="adult,ctr200k,ctr1m")
    ap.add_argument("--libs", default=",".join(LIBS))
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--policy", default="oblivious", help="histboost's grow_policy")
    ap.add_argument("--complexity", type=int, default=1, help="histboost max_ctr_complexity")
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--device", default="cpu", help="histboost's device (cpu, cuda)")
    ap.add_argument("--quantized", action="store_true", help="histboost quantized_grad=True")
    a = ap.parse_args()
    for name in a.sets.split(","):
        data = load(name)
        results = [run(lib, data, a, a.policy) for lib in a.libs.split(",")]
        base = next((r["seconds"] for r in results if r["lib"].startswith("histboost")), None)
        print(f"\n### {name}: {len(data[1])} train / {len(data[3])} test rows, "
              f"{len(data[4])} categorical columns, {data[5]} rounds, depth {a.depth}\n")
        cpu_base = next((r["cpu"] for r in results if r["lib"].startswith("histboost")),
                        None)
        print("| library | train s | ratio to histboost | CPU s | CPU ratio | test AUC | "
              "test logloss | predict s | device predict s |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in results:
            ratio = f"{r['seconds'] / base:.2f}" if base else "-"
            cpu_ratio = f"{r['cpu'] / cpu_base:.2f}" if cpu_base else "-"
            on_device = f"{r['device_predict']:.3f}" if "device_predict" in r else "-"
            print(f"| {r['lib']} | {r['seconds']:.2f} | {ratio} | {r['cpu']:.2f} | {cpu_ratio} | "
                  f"{r['auc']:.4f} | {r['logloss']:.4f} | {r.get('predict', 0.0):.3f} | "
                  f"{on_device} |", flush=True)
        for r in results:
            if "phases" in r:
                print(f"\n{r['lib']} phases (s): {r['phases']}")


if __name__ == "__main__":
    main()
