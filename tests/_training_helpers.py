"""Shared by the training tests (`test_training.py`, `objectives/`, `metrics/`, `tree/`):
small data sets and a `histboost.train` wrapper. A plain module beside the tests, put on
`sys.path` by its users."""

from __future__ import annotations

import json

import histboost
from histboost.testing.data import make_classification, make_regression

F = 5
X_REG, Y_REG = make_regression(400, F, seed=11, missing=0.1)
X_BIN, Y_BIN = make_classification(600, F, n_classes=2, seed=12)
X_MC, Y_MC = make_classification(450, F, n_classes=3, seed=13)


def _train(params, X, y, rounds=5, weight=None, base_margin=None, **kw):
    p = {"nthread": 1, "max_bin": 64, "seed": 0, **params}
    kw.setdefault("verbose_eval", False)
    d = histboost.Dataset(X, label=y, weight=weight, base_margin=base_margin)
    return histboost.train(p, d, rounds, **kw)


def _json(b):
    return [json.loads(s) for s in b.get_dump(dump_format="json")]
