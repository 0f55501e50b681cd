"""Categorical features: train on the Adult census data (8 string columns) straight from a
pandas DataFrame, predict from raw values (unseen categories included), save and reload.

    python examples/categorical.py [--rounds 300] [--combinations 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import histboost as hb
from histboost.datasets import load_adult


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--combinations", type=int, default=1,
                    help="max_ctr_complexity: categorical columns per combination")
    a = ap.parse_args()
    X, y = load_adult("train")
    Xt, yt = load_adult("test")
    params = {"objective": "binary:logistic", "max_depth": 6, "learning_rate": 0.1,
              "grow_policy": "oblivious", "reg_lambda": 3.0,
              "max_ctr_complexity": a.combinations, "eval_metric": ["logloss", "auc"]}
    dtrain = hb.Dataset(X, label=y)  # string columns are categorical without being named
    dtest = hb.Dataset(Xt, label=yt, reference=dtrain)
    print(dtrain)
    started = time.perf_counter()
    bst = hb.train(params, dtrain, a.rounds, evals=[(dtest, "test")], verbose_eval=100)
    print(f"trained in {time.perf_counter() - started:.1f} s")
    importance = bst.get_score(importance_type="total_gain")
    print("top features:", sorted(importance, key=importance.get, reverse=True)[:6])

    new = Xt.iloc[:3].copy()
    new["occupation"] = ["Astronaut", None, "Sales"]  # unseen, missing, seen
    print("predictions from raw values:", np.round(bst.predict(new), 4))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "adult.json"
        bst.save_model(path)
        again = hb.Booster(model_file=path)
        assert np.array_equal(again.predict(Xt), bst.predict(Xt))
        print(f"saved and reloaded ({path.stat().st_size / 1e6:.1f} MB JSON): same predictions")


if __name__ == "__main__":
    main()
