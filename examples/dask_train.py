"""Train on a Dask cluster (a LocalCluster of worker processes) and report test AUC.

    pip install ".[dask]" "dask[dataframe]"
    python examples/dask_train.py [--workers 2] [--rounds 100]

The HIGGS sample bundled with histboost becomes a Dask array of row blocks spread over the
workers; each worker trains on the blocks it holds (histboost.dask.train) and the test set is
predicted block by block on the workers (histboost.dask.predict).
"""

from __future__ import annotations

import argparse
import time

import dask.array as da
from distributed import Client, LocalCluster

import histboost.dask as hbd
from histboost.datasets import load_higgs_sample
from histboost.metrics import auc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=100)
    args = ap.parse_args()

    X, y = load_higgs_sample("train")
    Xt, yt = load_higgs_sample("test")
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        # row blocks of 1000 rows; the cluster decides which worker holds which block
        dX = da.from_array(X, chunks=(1000, X.shape[1]))
        dy = da.from_array(y, chunks=1000)
        dXt = da.from_array(Xt, chunks=(250, Xt.shape[1]))
        dtrain = hbd.DaskDataset(client, dX, dy)
        dtest = hbd.DaskDataset(client, dXt, da.from_array(yt, chunks=250))
        params = {"objective": "binary:logistic", "eval_metric": ["logloss", "auc"],
                  "learning_rate": 0.1, "max_depth": 6, "quantized_grad": True, "seed": 0}
        t0 = time.perf_counter()
        out = hbd.train(client, params, dtrain, args.rounds, evals=[(dtest, "test")],
                        early_stopping_rounds=20, verbose_eval=False)
        seconds = time.perf_counter() - t0
        booster = out["booster"]
        best = booster.best_iteration
        p = hbd.predict(client, booster, dXt, iteration_range=(0, best + 1)).compute()
        print(f"{args.workers} workers: {booster.num_boosted_rounds()} rounds in "
              f"{seconds:.2f}s; best iteration {best}: test AUC {auc(yt, p):.4f} (AUC logged "
              f"during training: {out['history']['test']['auc'][best]:.4f})")


if __name__ == "__main__":
    main()
