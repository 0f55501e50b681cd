"""Training and prediction on a Dask cluster (``pip install 'histboost[dask]'``).

    from distributed import Client, LocalCluster
    import histboost.dask as hbd

    client = Client(LocalCluster(n_workers=4, threads_per_worker=2))
    dtrain = hbd.DaskDataset(client, X, label=y)          # Dask array or DataFrame
    out = hbd.train(client, {"objective": "binary:logistic"}, dtrain, 100)
    pred = hbd.predict(client, out["booster"], X)         # a Dask array, per partition

Each partition trains on the worker that holds it: one task per worker, pinned there, forms a
torch.distributed Gloo process group with the others and calls `histboost.train(...,
comm=...)` on its own rows (see docs/dask.md). The API follows ``xgboost.dask``.
"""

from typing import Any

from ._core import DaskDataset, RendezvousError, predict, train

__all__ = ["DaskDataset", "DaskHistBoostClassifier",
           "DaskHistBoostRegressor", "RendezvousError", "predict", "train"]


def __getattr__(name: str) -> Any:
    """The estimators need scikit-learn: imported on first use."""
    if name in ("DaskHistBoostClassifier", "DaskHistBoostRegressor"):
        from . import _sklearn

        return getattr(_sklearn, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
