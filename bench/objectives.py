"""Objective families: histboost vs XGBoost vs LightGBM on the same synthetic data (a known
law per family), train time and the family's held-out metric (computed by histboost's metric
functions on each library's predictions; ranking: queries of 20 rows, NDCG@5 per query).
Not a timed test.

    python bench/objectives.py [--rows 20000] [--rounds 50] [--threads 2] [--families aft,cox]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import histboost
from histboost.metrics import get_metric

# family: (histboost/XGBoost objective, LightGBM objective or None, metric, extra params)
FAMILIES = {
    "absolute": ("reg:absoluteerror", "l1", "mae", {}),
    "quantile": ("reg:quantileerror", "quantile", "quantile@0.9", {"quantile_alpha": 0.9}),
    "pseudohuber": ("reg:pseudohubererror", None, "mphe@1.0", {}),
    "poisson": ("count:poisson", "poisson", "poisson-nloglik", {}),
    "gamma": ("reg:gamma", "gamma", "gamma-deviance", {}),
    "tweedie": ("reg:tweedie", "tweedie", "tweedie-nloglik@1.5", {}),
    "sq-log": ("reg:squaredlogerror", None, "rmsle", {}),
    "cox": ("survival:cox", None, "cox-nloglik", {}),
    "aft": ("survival:aft", None, "aft-nloglik@normal:1.0", {}),
    "ranking": ("rank:ndcg", "lambdarank", "ndcg@5", {}),
}
QUERY_SIZE = 20  # ranking: rows per query


def data(family: str, n: int, rng: np.random.Generator):
    X = rng.normal(size=(n, 10))
    f = 0.5 * X[:, 0] - 0.4 * X[:, 1] + 0.3 * X[:, 2] * X[:, 3] + 0.2 * np.sin(X[:, 4])
    mu = np.exp(f)
    y = {
        "absolute": lambda: 2 * f + rng.laplace(size=n),
        "quantile": lambda: 2 * f + rng.normal(size=n),
        "pseudohuber": lambda: 2 * f + rng.standard_t(2, size=n),
        "poisson": lambda: rng.poisson(mu).astype(float),
        "gamma": lambda: rng.gamma(2.0, mu / 2.0),
        "tweedie": lambda: rng.poisson(mu) * rng.gamma(3.0, 1 / 3.0, size=n),
        "sq-log": lambda: mu * rng.lognormal(0, 0.3, size=n),
        "cox": lambda: np.where(rng.random(n) < 0.7, 1, -1) * rng.exponential(1 / mu),
        "aft": lambda: _intervals(mu * rng.lognormal(0, 0.5, size=n), rng),
        # relevance 0-4: quintiles of the latent score plus noise
        "ranking": lambda: np.digitize(f + 0.5 * rng.normal(size=n),
                                       np.quantile(f, [0.5, 0.75, 0.9, 0.97])).astype(float),
    }[family]()
    return X, y


def groups(family: str, n: int) -> np.ndarray | None:
    """Query sizes of `n` rows (ranking: queries of QUERY_SIZE rows), else None."""
    if family != "ranking":
        return None
    sizes = np.full(n // QUERY_SIZE, QUERY_SIZE)
    return sizes if n % QUERY_SIZE == 0 else np.r_[sizes, n % QUERY_SIZE]


def _intervals(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(n, 2) interval labels of times t: 30% right-censored at a uniform fraction of t."""
    censored = rng.random(t.shape[0]) < 0.3
    lower = np.where(censored, t * rng.uniform(0.2, 1.0, t.shape[0]), t)
    return np.stack([lower, np.where(censored, np.inf, t)], axis=1)


def _datasets(X: np.ndarray, y: np.ndarray, group: np.ndarray | None = None):
    """histboost Dataset and XGBoost DMatrix of labels y (n,) (with query sizes `group`) or
    intervals (n, 2)."""
    import xgboost as xgb

    if y.ndim == 1:
        d = xgb.DMatrix(X, y)
        if group is not None:
            d.set_group(group)
        return histboost.Dataset(X, label=y, group=group), d
    d = xgb.DMatrix(X)
    d.set_float_info("label_lower_bound", y[:, 0])
    d.set_float_info("label_upper_bound", y[:, 1])
    return histboost.Dataset(X, label_lower_bound=y[:, 0], label_upper_bound=y[:, 1]), d


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--families", default=",".join(FAMILIES),
                    help=f"comma-separated subset of {', '.join(FAMILIES)}")
    a = ap.parse_args()
    chosen = a.families.split(",")
    unknown = sorted(set(chosen) - set(FAMILIES))
    if unknown:
        ap.error(f"unknown families {unknown}; choose from {list(FAMILIES)}")
    import lightgbm as lgb
    import xgboost as xgb

    warnings.simplefilter("ignore")
    print(f"{a.rows} rows x 10 features (80% train), {a.rounds} rounds, depth 6 / 63 leaves, "
          f"eta 0.1, max_bin 256, {a.threads} threads")
    print(f"{'family':12s} {'library':10s} {'train s':>8s}  metric (aft-nloglik: of margins)")
    for fam in chosen:
        obj, lgb_obj, metric, extra = FAMILIES[fam]
        rng = np.random.default_rng(0)
        X, y = data(fam, a.rows, rng)
        cut = int(0.8 * a.rows) // QUERY_SIZE * QUERY_SIZE
        Xtr, ytr, Xte, yte = X[:cut], y[:cut], X[cut:], y[cut:]
        gtr, gte = groups(fam, cut), groups(fam, a.rows - cut)
        fn = get_metric(metric)
        common = {"objective": obj, "max_depth": 6, "eta": 0.1, "max_bin": 256,
                  "nthread": a.threads, **extra}
        runs = []
        d_hist, d_xgb = _datasets(Xtr, ytr, gtr)
        # compile (or load) the family's kernels outside the timing
        histboost.train(common, _datasets(Xtr[:200], ytr[:200], groups(fam, 200))[0], 2)
        t = time.perf_counter()
        b = histboost.train(common, d_hist, a.rounds, verbose_eval=False)
        runs.append(("histboost", time.perf_counter() - t, b.predict(Xte)))
        t = time.perf_counter()
        bx = xgb.train({**common, "tree_method": "hist"}, d_xgb, a.rounds)
        runs.append(("xgboost", time.perf_counter() - t, bx.predict(xgb.DMatrix(Xte))))
        if lgb_obj is not None:
            lp = {"objective": lgb_obj, "num_leaves": 63, "max_depth": 6,
                  "learning_rate": 0.1, "max_bin": 255, "num_threads": a.threads,
                  "verbose": -1, "min_data_in_leaf": 1, "min_sum_hessian_in_leaf": 1.0}
            if fam == "quantile":
                lp["alpha"] = 0.9
            t = time.perf_counter()
            bl = lgb.train(lp, lgb.Dataset(Xtr, ytr, group=gtr), a.rounds)
            runs.append(("lightgbm", time.perf_counter() - t, bl.predict(Xte)))
        for lib, secs, pred in runs:
            pred = np.asarray(pred, np.float64)
            pred = np.log(pred) if yte.ndim == 2 else pred
            value = fn(yte, pred, None) if gte is None else fn(yte, pred, None, group=gte)
            print(f"{fam:12s} {lib:10s} {secs:8.2f}  {metric} {value:.4f}")


if __name__ == "__main__":
    main()
