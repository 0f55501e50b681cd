"""SHAP values benchmark: histboost's ``predict(pred_contribs=True)`` against XGBoost's
``pred_contribs`` (CPU) and the SHAP library's ``TreeExplainer``, on the very same trees.

    python bench/shap.py [--rows 100000] [--rounds 200] [--depth 8] [--shap-rows 10000]

A histboost model (binary:logistic, depth-wise) is trained on `--train-rows` rows of
`higgs_like` data (or histboost's synthetic classification data when the shared synth module is
absent), exported with ``save_model(format="xgboost")`` and loaded by XGBoost; the SHAP library
explains the XGBoost booster. So the three explain identical trees and their values agree (the
table reports the largest difference on the first 1000 rows). histboost is warmed up (Numba
compilation) on 100 rows first; XGBoost's DMatrix construction is not timed. The SHAP library
runs one thread: it explains `--shap-rows` rows and its time is also given scaled to `--rows`.
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _shap_library():
    """The SHAP library, not this script (bench/ is on sys.path, and this file is shap.py)."""
    saved = list(sys.path)
    sys.path[:] = [q for q in sys.path if Path(q or ".").resolve() != HERE]
    try:
        import shap
    finally:
        sys.path[:] = saved
    return shap


def data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        from _common import synth
        X, y = synth().higgs_like(n, seed=seed)[:2]
    except Exception:  # noqa: BLE001 - the shared synth module is optional
        from histboost.testing.data import make_classification
        X, y = make_classification(n, 28, n_classes=2, seed=seed, missing=0.02)
    return np.ascontiguousarray(X, dtype=np.float32), np.asarray(y, dtype=np.float64)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--train-rows", type=int, default=50_000)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--shap-rows", type=int, default=10_000)
    p.add_argument("--threads", type=int, default=0, help="0: every core")
    p.add_argument("--skip", nargs="*", default=[], choices=["xgboost", "shap"])
    a = p.parse_args()
    threads = a.threads or os.cpu_count()

    import histboost
    Xtr, ytr = data(a.train_rows, 0)
    X, _ = data(a.rows, 1)
    t = time.perf_counter()
    model = histboost.train({"objective": "binary:logistic", "max_depth": a.depth, "eta": 0.1,
                             "nthread": threads}, histboost.Dataset(Xtr, label=ytr), a.rounds,
                            verbose_eval=False)
    train_s = time.perf_counter() - t
    leaves = sum(t.n_leaves for t in model.trees)
    print(f"model: {a.rounds} rounds, depth {a.depth}, {leaves} leaves, {X.shape[1]} features,"
          f" trained on {a.train_rows} rows in {train_s:.1f} s; {threads} threads",
          file=sys.stderr)

    rows = []
    model.predict(X[:100], pred_contribs=True)  # compile
    t = time.perf_counter()
    ours = model.predict(X, pred_contribs=True)
    hb = time.perf_counter() - t
    rows.append(("histboost", hb, hb, "-"))
    print(f"histboost {hb:.2f} s", file=sys.stderr)

    xb = None
    if "xgboost" not in a.skip or "shap" not in a.skip:
        import xgboost as xgb
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "model.json")
            model.save_model(path, format="xgboost")
            xb = xgb.Booster(model_file=path)
        xb.set_param({"nthread": threads})
    if "xgboost" not in a.skip:
        dm = xgb.DMatrix(X, nthread=threads)
        t = time.perf_counter()
        theirs = xb.predict(dm, pred_contribs=True)
        s = time.perf_counter() - t
        diff = float(np.abs(theirs[:1000] - ours[:1000]).max())
        rows.append((f"xgboost {xgb.__version__} pred_contribs", s, s, f"{diff:.1e}"))
        print(f"xgboost {s:.2f} s", file=sys.stderr)
    if "shap" not in a.skip:
        shap = _shap_library()
        ex = shap.TreeExplainer(xb)
        sub = X[:a.shap_rows]
        t = time.perf_counter()
        sv = ex.shap_values(sub, check_additivity=False)
        s = time.perf_counter() - t
        m = min(1000, len(sub))
        diff = float(np.abs(sv[:m] - ours[:m, :-1]).max())
        rows.append((f"shap {shap.__version__} TreeExplainer ({a.shap_rows} rows)", s,
                     s * a.rows / len(sub), f"{diff:.1e}"))
        print(f"shap {s:.2f} s", file=sys.stderr)

    print(f"\nSHAP values of {a.rows} rows, {a.rounds} rounds of depth {a.depth}, "
          f"{threads} threads\n")
    print(f"| library | seconds | seconds per {a.rows} rows | vs histboost | max diff "
          "(1000 rows) |")
    print("|---|---:|---:|---:|---:|")
    for name, s, scaled, diff in rows:
        print(f"| {name} | {s:.2f} | {scaled:.2f} | {scaled / hb:.1f}x | {diff} |")


if __name__ == "__main__":
    main()
