"""Train a binary classifier on the HIGGS sample bundled with histboost and report test AUC.

    python examples/train_higgs.py [--rounds 200] [--grow-policy depthwise|lossguide|oblivious]
"""

from __future__ import annotations

import argparse
import time

import histboost
from histboost.datasets import load_higgs_sample
from histboost.metrics import auc, logloss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--grow-policy", default="depthwise",
                    choices=["depthwise", "lossguide", "oblivious"])
    args = ap.parse_args()

    X, y = load_higgs_sample("train")
    Xt, yt = load_higgs_sample("test")
    dtrain = histboost.Dataset(X, label=y)
    dtest = histboost.Dataset(Xt, label=yt, reference=dtrain)
    params = {"objective": "binary:logistic", "eval_metric": ["logloss", "auc"],
              "learning_rate": 0.05, "max_depth": 6, "max_leaves": 31,
              "grow_policy": args.grow_policy, "subsample": 0.8, "colsample_bytree": 0.8,
              "seed": 0, "verbosity": 2}
    t0 = time.perf_counter()
    booster = histboost.train(params, dtrain, num_boost_round=args.rounds,
                              evals=[(dtest, "test")], early_stopping_rounds=50,
                              verbose_eval=20)
    seconds = time.perf_counter() - t0
    p = booster.predict(dtest, iteration_range=(0, booster.best_iteration + 1))
    print(f"trained {booster.num_boosted_rounds()} rounds in {seconds:.2f}s; best iteration "
          f"{booster.best_iteration}: test AUC {auc(yt, p):.4f}, logloss {logloss(yt, p):.4f}")


if __name__ == "__main__":
    main()
