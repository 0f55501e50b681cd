"""Quality against CatBoost on the Adult census data (bundled; 8 categorical columns):
same depth, rounds and learning rate, test logloss within 0.003 of CatBoost's measured in the
same run (skipped without catboost, which is not a test dependency)."""

from __future__ import annotations

import numpy as np
import pytest

import histboost as hb
from histboost.datasets import load_adult

ROUNDS, DEPTH, LEARNING_RATE = 100, 6, 0.3


def _logloss(y: np.ndarray, p: np.ndarray) -> float:
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def test_adult_logloss_within_catboost():
    catboost = pytest.importorskip("catboost")
    X, y = load_adult("train")
    Xt, yt = load_adult("test")
    cats = [c for c in X.columns if X[c].dtype.kind not in "biuf"]
    assert len(cats) == 8 and X.shape == (32561, 14) and Xt.shape == (16281, 14)
    bst = hb.train({"objective": "binary:logistic", "max_depth": DEPTH,
                    "learning_rate": LEARNING_RATE, "grow_policy": "oblivious",
                    "reg_lambda": 3.0}, hb.Dataset(X, label=y), ROUNDS, verbose_eval=False)
    ours = _logloss(yt, bst.predict(Xt))

    def text(frame):  # CatBoost's categorical input: strings, NaN as a string
        return frame.assign(**{c: frame[c].astype(object).fillna("nan").astype(str)
                               for c in cats})

    model = catboost.CatBoostClassifier(iterations=ROUNDS, depth=DEPTH,
                                        learning_rate=LEARNING_RATE, verbose=False,
                                        allow_writing_files=False, random_seed=0)
    model.fit(text(X), y, cat_features=cats)
    theirs = _logloss(yt, model.predict_proba(text(Xt))[:, 1])
    assert ours <= theirs + 0.003, (ours, theirs)
